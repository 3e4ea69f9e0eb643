"""Gateway results: offload with recall, the hard guard, evidence, session isolation, and
an upstream server killed mid-session.

Real processes only: ``tooldeck serve`` reached with the official MCP client SDK, in
front of tests/mcp_servers/basic.py and mcp-server-time.
"""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

import anyio

from gateway_client import (
    ALLOW_ALL,
    Notes,
    gateway,
    result_of,
    stdio,
    text_of,
    time_server,
    write_config,
    write_policy,
)
from tooldeck.tokens import estimate_tokens

REF = re.compile(r"ref_[0-9a-f]{16}")


def test_a_huge_result_is_offloaded_recalled_and_kept_whole_as_evidence(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    policy = write_policy(tmp_path, ALLOW_ALL)
    state = tmp_path / "s"
    lines = [f"line {i:06d} " + "lorem ipsum dolor sit amet " * 3 for i in range(6000)]
    huge = "\n".join(lines)

    async def main() -> None:
        async with gateway(config, state, "--core", "*", "--policy", str(policy)) as c:
            result = await c.call_tool("alpha__echo", {"text": huge})
            shown = text_of(result)
            assert not result.is_error
            assert estimate_tokens(shown) < 2_000 < estimate_tokens(huge) // 10
            ref = REF.search(shown)
            assert ref is not None and "recall_tool_result" in shown
            text, offset = "", 0
            for _ in range(200):
                page = await c.call_tool(
                    "recall_tool_result", {"ref_id": ref.group(), "offset": offset}
                )
                assert not page.is_error
                header, body = page.content[0].text, page.content[1].text  # type: ignore[union-attr]
                assert estimate_tokens(header + body) <= 25_000
                text += body
                found = re.search(r"offset=(\d+)", header) or re.search(r'"offset": (\d+)', header)
                if "this is the end" in header:
                    break
                assert found is not None, header
                offset = int(found.group(1))
            assert text == huge

    anyio.run(main)
    [record] = [json.loads(line) for p in state.glob("*.calls.jsonl") for line in p.open()][:1]
    assert record["tool"] == "alpha__echo" and record["server"] == "alpha"
    assert record["result"]["content"][0]["text"] == huge  # the complete CallToolResult


def test_the_guard_cuts_what_cannot_be_stored(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    policy = write_policy(tmp_path, ALLOW_ALL)
    huge = "word " * 60_000

    async def main() -> None:
        args = ("--core", "*", "--policy", str(policy), "--offload-tokens", "0")
        args += ("--guard-tokens", "3000")
        async with gateway(config, tmp_path / "s", *args) as c:
            result = await c.call_tool("alpha__echo", {"text": huge})
            assert estimate_tokens(text_of(result)) <= 3_000
            assert REF.search(text_of(result)) is None

    anyio.run(main)


def test_recall_is_isolated_between_client_sessions(tmp_path: Path) -> None:
    """Two clients, one state directory: B cannot read A's stored result, even by its id."""
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    policy = write_policy(tmp_path, ALLOW_ALL)
    state = tmp_path / "shared"
    huge = "secret of A " * 20_000

    async def main() -> None:
        args = ("--core", "*", "--policy", str(policy))
        async with gateway(config, state, *args) as a, gateway(config, state, *args) as b:
            ref = REF.search(text_of(await a.call_tool("alpha__echo", {"text": huge})))
            assert ref is not None
            theirs = await b.call_tool("recall_tool_result", {"ref_id": ref.group()})
            assert theirs.is_error and "secret of A" not in text_of(theirs)
            wrapped = await b.call_tool(
                "call_tool", {"name": "recall_tool_result", "arguments": {"ref_id": ref.group()}}
            )
            assert wrapped.is_error and "secret of A" not in text_of(wrapped)
            for hostile in ("../" + ref.group(), ref.group() + "/../x", "ref_" + "0" * 16):
                attempt = await b.call_tool("recall_tool_result", {"ref_id": hostile})
                assert attempt.is_error
            mine = await a.call_tool("recall_tool_result", {"ref_id": ref.group()})
            assert not mine.is_error and "secret of A" in text_of(mine)

    anyio.run(main)
    sessions = {p.name.split(".")[0] for p in state.glob("*.audit.jsonl")}
    assert len(sessions) == 2  # each client its own session id
    offload = state / ".tooldeck" / "tool-offload"
    assert not offload.exists() or list(offload.iterdir()) == []  # removed when they ended


def test_an_upstream_killed_mid_session_is_reported_then_reconnected(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"alpha": stdio("basic.py"), "time": time_server()})
    policy = write_policy(tmp_path, ALLOW_ALL)
    notes = Notes()

    async def main() -> None:
        args = ("--core", "*", "--policy", str(policy))
        async with gateway(config, tmp_path / "s", *args, notes=notes) as c:
            await c.list_tools()
            pid = result_of(await c.call_tool("alpha__pid", {}))
            os.kill(pid, signal.SIGKILL)
            # the other server keeps serving meanwhile
            now = await c.call_tool("time__get_current_time", {"timezone": "UTC"})
            assert not now.is_error
            seen: list[str] = []
            with anyio.fail_after(45):
                while True:
                    result = await c.call_tool("alpha__pid", {})
                    if not result.is_error:
                        break
                    seen.append(text_of(result))
                    await anyio.sleep(0.2)
            assert result_of(result) != pid  # a new process
            for message in seen:  # while it was away, the client was told which server
                assert "alpha" in message, message
            # its tools were listed anew: announced (waited for before the client lists
            # again, since a client that lists has the new listing and is not told twice)
            with anyio.fail_after(10):
                await notes.changed.wait()
            assert "alpha__pid" in [t.name for t in (await c.list_tools()).tools]

    anyio.run(main)
