"""The gateway's start-up: ``initialize`` answered at once while the upstream servers start
in the background, what a client sees meanwhile, and every start-up error in one line.

A real ``tooldeck serve`` in front of tests/mcp_servers/basic.py, held back from serving
by a gate file (``BASIC_START_GATE``) that the test opens when it wants the server up, so
nothing here depends on timing; the client is the official MCP SDK's.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from typer.testing import CliRunner

from gateway_client import (
    ALLOW_ALL,
    PY,
    Call,
    Notes,
    gateway,
    gateway_process,
    names,
    result_of,
    stdio,
    text_of,
    write_config,
    write_policy,
)
from tooldeck.cli import app

STARTING = "tooldeck/starting"


def gated(gate: Path, **extra: Any) -> dict[str, Any]:
    """basic.py, serving only once ``gate`` exists."""
    return {**stdio("basic.py"), "env": {"BASIC_START_GATE": str(gate)}, **extra}


def serve(*args: str, **options: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "tooldeck.cli", "serve", *args],
        capture_output=True,
        text=True,
        timeout=120,
        **options,
    )


def test_initialize_is_answered_while_a_server_starts_and_its_tools_are_announced(
    tmp_path: Path,
) -> None:
    gate = tmp_path / "gate"
    config = write_config(tmp_path, {"fast": stdio("basic.py"), "slow": gated(gate)})
    policy = write_policy(tmp_path, ALLOW_ALL)
    notes = Notes()

    async def main() -> None:
        args = ("--core", "*", "--policy", str(policy))
        async with gateway(config, tmp_path / "s", *args, notes=notes, settle=False) as c:
            # initialize was answered with "slow" held back: it is not listed, but said
            first = await c.list_tools()
            assert "slow" in (first.meta or {}).get(STARTING, [])
            assert not any(t.name.startswith("slow__") for t in first.tools)
            with anyio.fail_after(60):  # "fast" comes up by itself
                while any(t.startswith("fast__") for t in await names(c)) is False:
                    await notes.changed.wait()
                    notes.changed = anyio.Event()
            notes.changed = anyio.Event()
            gate.touch()
            with anyio.fail_after(60):
                await notes.changed.wait()  # announced when it is up
            listing = await c.list_tools()
            assert "slow__add" in [t.name for t in listing.tools]
            assert not (listing.meta or {}).get(STARTING)
            assert result_of(await c.call_tool("slow__add", {"a": 1, "b": 2})) == 3

    anyio.run(main)


def test_a_call_to_a_server_still_starting_waits_for_it(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    config = write_config(tmp_path, {"slow": gated(gate)})
    policy = write_policy(tmp_path, ALLOW_ALL)

    async def main() -> None:
        args = ("--policy", str(policy))
        async with gateway(config, tmp_path / "s", *args, settle=False) as c:
            # deferred loading: tool_search and call_tool are there before any tool is
            assert {"tool_search", "call_tool"} <= set(await names(c))
            call, search = Call(), Call()
            async with anyio.create_task_group() as tg:
                tg.start_soon(call.run, c, "slow__add", {"a": 2, "b": 3})
                tg.start_soon(search.run, c, "tool_search", {"query": "add two integers"})
                await anyio.sleep(1)
                assert not call.done.is_set() and not search.done.is_set()  # they wait
                gate.touch()
                assert result_of(await call.get()) == 5
                assert "slow__add" in text_of(await search.get())

    anyio.run(main)


def test_a_server_that_never_comes_up_is_waited_for_no_longer_than_its_startup_timeout(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, {"stuck": gated(tmp_path / "never", startup_timeout=1)})

    async def main() -> None:
        async with gateway(config, tmp_path / "s", settle=False) as c:
            result = await c.call_tool("stuck__add", {"a": 1, "b": 1})
            assert result.is_error
            assert "Servers not serving now: stuck" in text_of(result)
            assert "within 1s" in text_of(result)

    anyio.run(main)


def test_a_banner_on_stderr_and_the_url_once_http_listens(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    log = tmp_path / "err"

    async def main() -> None:
        with log.open("w") as errlog:
            async with gateway(config, tmp_path / "s", errlog=errlog):
                pass

    anyio.run(main)
    first = log.read_text().splitlines()[0]
    assert first.startswith("tooldeck serve ") and "1 upstream server from" in first
    assert "policy: none" in first and "MCP over stdio" in first
    err = tmp_path / "http.err"
    with (
        err.open("w") as errlog,
        gateway_process(config, tmp_path / "h", stderr=errlog) as (
            url,
            _,
        ),
    ):
        deadline = time.monotonic() + 30  # said once uvicorn serves (the port answers before)
        while f"listening on {url}\n" not in err.read_text():
            assert time.monotonic() < deadline, err.read_text()
            time.sleep(0.05)
    lines = err.read_text().splitlines()
    assert lines[0].startswith("tooldeck serve ") and "MCP over HTTP" in lines[0]


def test_start_up_errors_are_one_line_and_exit_2(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    base = ("--mcp", str(config), "--state", str(tmp_path / "s"))
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        taken = serve(*base, "--http", str(port))
    assert taken.returncode == 2, taken.stderr
    assert taken.stderr.strip() == (
        f"error: --http {port}: cannot listen on 127.0.0.1:{port}: the port is in use "
        "(another server listens there); give another --http port"
    )
    nothing = serve(*base, stdin=subprocess.DEVNULL)
    assert nothing.returncode == 2, nothing.stderr
    assert nothing.stderr.startswith(f"error: stdin is {os.devnull}, so no MCP client")
    assert len(nothing.stderr.strip().splitlines()) == 1
    if sys.platform != "win32":
        closed = serve(*base, preexec_fn=lambda: os.close(0))
        assert closed.returncode == 2, closed.stderr
        assert closed.stderr.startswith("error: stdin is closed, so no MCP client")
        assert len(closed.stderr.strip().splitlines()) == 1


def test_check_names_a_missing_launcher_plainly_and_exits_1(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        {"ok": stdio("basic.py"), "npm": {"command": "tooldeck-no-such-npx", "args": ["-y", "x"]}},
    )
    args = ["serve", "--mcp", str(config), "--state", str(tmp_path / "s"), "--check", "--lexical"]
    out = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert out.exit_code == 1, out.output
    assert "npm: failed, 0 tools (tooldeck-no-such-npx: not found on PATH)" in out.output
    assert "ok: connected" in out.output
    assert "FileNotFoundError" not in out.output


@pytest.mark.parametrize("value", ["70000", "-1"])
def test_a_port_out_of_range_is_one_line(tmp_path: Path, value: str) -> None:
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    out = serve("--mcp", str(config), "--http", value, "--state", str(tmp_path / "s"))
    assert out.returncode == 2 and out.stderr.startswith("error: --http ")
    assert len(out.stderr.strip().splitlines()) == 1


# -- initialize answered before the MCP SDK is loaded (gateway/_handshake.py) ---------------------
def _raw(line: dict[str, Any]) -> bytes:
    import json

    return (json.dumps(line) + "\n").encode()


def _initialize(version: str, request_id: int | str = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {"elicitation": {}, "roots": {"listChanged": True}},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }


async def _sdk_answer(message: dict[str, Any]) -> dict[str, Any]:
    """What the gateway's server, run by the MCP SDK itself, answers ``message``."""
    import json

    import mcp_types as types
    from mcp.shared.message import SessionMessage

    from tooldeck.gateway import Catalog, Gateway
    from tooldeck.mcp import McpSource

    gw = Gateway(Catalog(McpSource({}, prefixed=False)))
    to_server, server_in = anyio.create_memory_object_stream[Any](1)
    server_out, from_server = anyio.create_memory_object_stream[Any](1)
    parsed = types.jsonrpc_message_adapter.validate_python(message, by_name=False)
    async with anyio.create_task_group() as tg:
        options = gw.server.create_initialization_options()
        tg.start_soon(gw.server.run, server_in, server_out, options)
        await to_server.send(SessionMessage(parsed))
        with anyio.fail_after(30):
            answer = await from_server.receive()
        tg.cancel_scope.cancel()
    dumped = answer.message.model_dump_json(by_alias=True, exclude_unset=True)
    out: dict[str, Any] = json.loads(dumped)
    return out


@pytest.mark.parametrize(
    "version", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28", "1999-01-01"]
)
def test_the_early_initialize_answer_is_the_sdks(version: str) -> None:
    import json

    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    from tooldeck import __version__
    from tooldeck.gateway._handshake import HANDSHAKE_VERSIONS, initialize_answer

    assert HANDSHAKE_VERSIONS == HANDSHAKE_PROTOCOL_VERSIONS
    for request_id in (7, "seven"):
        message = _initialize(version, request_id)
        early = initialize_answer(_raw(message).strip(), __version__)
        assert early is not None and early[0] == request_id
        assert json.loads(early[1]) == anyio.run(_sdk_answer, message)


@pytest.mark.parametrize(
    "line",
    [
        b"not json",
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}',
        b'{"jsonrpc": "2.0", "id": null, "method": "initialize", "params": {}}',
        b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 5}}',
        b'{"jsonrpc": "2.0", "id": true, "method": "initialize"}',
        b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": '
        b'"2025-06-18", "capabilities": {"roots": 5}, "clientInfo": {"name": "x", '
        b'"version": "1"}}}',
        b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": '
        b'"2025-06-18", "capabilities": {}, "clientInfo": {"name": "x"}}}',
    ],
)
def test_anything_but_a_well_formed_initialize_is_left_to_the_sdk(line: bytes) -> None:
    from tooldeck.gateway._handshake import initialize_answer

    assert initialize_answer(line, "0") is None


def _read_line(proc: subprocess.Popen[bytes]) -> dict[str, Any]:
    import json
    from concurrent.futures import ThreadPoolExecutor

    assert proc.stdout is not None
    with ThreadPoolExecutor(1) as pool:  # a missing answer fails the test, never hangs it
        reading = pool.submit(proc.stdout.readline)
        try:
            line = reading.result(timeout=60)
        except TimeoutError:
            proc.kill()  # ends the read too
            raise AssertionError("no answer from the gateway within 60 s") from None
    assert line, "the gateway closed stdout"
    out: dict[str, Any] = json.loads(line)
    return out


def test_initialize_answered_early_is_answered_once_and_the_session_goes_on(
    tmp_path: Path,
) -> None:
    """A raw client over pipes: its ``initialize`` answered once (the SDK's own answer to
    the same request is not sent again), then the session serves as usual; a malformed
    first line is left to the SDK's reader (answered with a parse error, no id: it has
    none), and initialize after it still works."""
    gate = tmp_path / "gate"  # never opened: the upstream never serves
    config = write_config(tmp_path, {"slow": gated(gate)})
    for first in (None, b"{oops\n"):
        proc = subprocess.Popen(
            [PY, "-m", "tooldeck.cli", "serve", "--mcp", str(config), "--state",
             str(tmp_path / "s"), "--lexical"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        assert proc.stdin is not None
        try:
            if first is not None:
                proc.stdin.write(first)
                proc.stdin.flush()
            proc.stdin.write(_raw(_initialize("2025-06-18", "init")))
            proc.stdin.flush()
            if first is not None:  # answered as JSON-RPC says: a parse error, no id
                error = _read_line(proc)
                assert error["id"] is None and error["error"]["code"] == -32700, error
            answer = _read_line(proc)
            assert answer["id"] == "init" and answer["result"]["protocolVersion"] == "2025-06-18"
            proc.stdin.write(_raw({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            proc.stdin.write(_raw({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
            proc.stdin.flush()
            listing = _read_line(proc)  # not a second answer to "init"
            while listing.get("method") == "roots/list":  # it declared roots: it is asked
                proc.stdin.write(
                    _raw({"jsonrpc": "2.0", "id": listing["id"], "result": {"roots": []}})
                )
                proc.stdin.flush()
                listing = _read_line(proc)
            assert listing["id"] == 2, listing
            assert listing["result"]["_meta"][STARTING] == ["slow"]
            assert "tool_search" in [t["name"] for t in listing["result"]["tools"]]
        finally:
            proc.stdin.close()
            proc.wait(30)
