"""What every real client of tests/test_gateway_clients*.py does at the gateway, and the
parts they share: the upstream servers (PyPI's mcp-server-time, tests/mcp_servers/basic.py),
the policy (time's tools run, ``alpha__wipe`` is denied by a rule, the other alpha tools
are WRITE and ask), the query, and a real ``tooldeck approve --watch`` answering
out-of-band approvals as a person in another terminal would."""

from __future__ import annotations

import re
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process

from gateway_client import PY, RUN, audit_lines, stdio, time_server, write_config, write_policy
from tooldeck.gateway.out_of_band import WATCHED_SECONDS

QUERY = "current time in a timezone"
FOUND = "time__get_current_time"  # what the search must answer for QUERY
DENIED = "alpha__wipe"  # a deny rule's tool
DENIAL = "Denied by policy: nothing is wiped here"
ASKS = "alpha__echo"  # WRITE (no rule): approval required
POLICY = """\
[profile]
[[profile.rules]]
tools = "time__*"
action = "allow"

[[profile.rules]]
tools = "alpha__wipe"
action = "deny"
reason = "nothing is wiped here"
"""
GATEWAY_TOOLS = {"tool_search", "call_tool", "recall_tool_result"}


def setup(directory: Path) -> tuple[Path, Path, Path]:
    """The config, the policy file and the state folder of a gateway."""
    config = write_config(directory, {"time": time_server(), "alpha": stdio("basic.py")})
    return config, write_policy(directory, POLICY), directory / "s"


def serve_args(config: Path, policy: Path, state: Path) -> list[str]:
    """``tooldeck serve`` over stdio, as a client's command line starts it (after PY;
    through RUN: by the tests' fork server, when the client runs under one)."""
    serve = [RUN, "-m", "tooldeck.cli", "serve", "--mcp", str(config), "--state", str(state)]
    return [*serve, "--policy", str(policy), "--lexical"]


def found_names(answer: str) -> list[str]:
    """The tool names a ``tool_search`` answer gives (its ``- name: description`` lines)."""
    return re.findall(r"^- (\S+): ", answer, flags=re.MULTILINE)


def the_found_name(answer: str) -> str:
    """The name the search answered for QUERY, exactly as it spelled it: what a model
    calls next."""
    names = found_names(answer)
    assert FOUND in names, answer
    return names[names.index(FOUND)]


def says_how_to_allow(text: str, policy: Path, state: Path) -> bool:
    """Is ``text`` the gateway's immediate denial of ASKS, naming the rule that allows it
    and the watcher that would let calls wait?"""
    return (
        "nobody can approve it here" in text
        and str(policy) in text
        and f'tools = "{ASKS}"' in text
        and f"tooldeck approve --watch {state}" in text
    )


def is_current_time(text: str) -> bool:
    """Is ``text`` mcp-server-time's answer for UTC?"""
    return '"timezone":"UTC"' in text.replace(" ", "") and '"datetime"' in text


def approvals(state: Path) -> list[tuple[str, str, str | None]]:
    """``(tool, decision, who approved)`` of every answered approval in the audit logs (of every
    session), in the order they were given."""
    answered = sorted((e for e in audit_lines(state) if e["level"] == "approval"), key=_time)
    return [(e["tool"], e["decision"], e.get("approved_by")) for e in answered]


def _time(entry: dict[str, Any]) -> Any:
    return entry["time"]


class Watcher:
    """A running ``tooldeck approve --watch STATE``: what it showed, and its stdin."""

    def __init__(self, process: Process) -> None:
        self.process = process
        self.shown = b""

    async def until(self, text: str) -> None:
        """Read its output until ``text`` was shown (bounded)."""
        assert self.process.stdout is not None
        with anyio.fail_after(120):
            while text.encode() not in self.shown:
                self.shown += await self.process.stdout.receive()

    async def answer(self, typed: str) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(typed.encode())


_WITH_CTRL_C = (
    "import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "runpy.run_module('tooldeck.cli', run_name='__main__', alter_sys=True)"
)


@asynccontextmanager
async def watching(state: Path) -> AsyncIterator[Watcher]:
    """``tooldeck approve --watch STATE`` running, and known to the gateway (which looks
    once per WATCHED_SECONDS); stopped with Ctrl-C after, and again unknown to it."""
    # Ctrl-C as at a terminal: SIGINT at its default even when this run was started in
    # the background of a script (a shell starts those with SIGINT ignored, which Python
    # then keeps ignoring, so the watcher would never stop)
    command = [PY, "-c", _WITH_CTRL_C, "approve", "--watch", str(state)]
    process = await anyio.open_process(command)
    watcher = Watcher(process)
    try:
        await watcher.until("Watching ")
        await anyio.sleep(WATCHED_SECONDS)
        yield watcher
        process.send_signal(signal.SIGINT)
        with anyio.fail_after(60):
            assert await process.wait() == 0
    finally:  # a failure must not leave the watcher running
        if process.returncode is None:
            process.kill()
        with anyio.CancelScope(shield=True):
            await process.aclose()
    await anyio.sleep(WATCHED_SECONDS)


async def approved_by_watcher(state: Path, call: Any) -> Any:
    """Run ``call`` (an async function: the client's call of ASKS) while a watcher runs;
    the watcher is shown the call and approves it; what ``call`` returned."""
    got: list[Any] = []

    async def run() -> None:
        got.append(await call())

    async with watching(state) as watcher, anyio.create_task_group() as tg:
        tg.start_soon(run)
        await watcher.until(f"Approve {ASKS}")
        await watcher.answer("y\n")
    return got[0]
