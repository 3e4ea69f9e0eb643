"""MCP sources against real servers: subprocesses over stdio and streamable HTTP, no mocks.

The servers live in tests/mcp_servers/ (the SDK's MCPServer, and a low-level server that
pages tools/list). HTTP servers run on a free port of 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

import tooldeck
from tooldeck import Dispatcher, EventBus, Session, Tool, Toolset, TurnContext, assemble, tool
from tooldeck.cli.mcp import app as mcp_app
from tooldeck.events import Event, ToolEvent
from tooldeck.mcp import McpProgress, McpServerStatusChanged, McpSource, McpTool
from tooldeck.mcp.connection import RETRY_FLOOR
from tooldeck.result import JsonPart
from tooldeck.testing import ScriptedModel, call, reply
from tooldeck.transcript import ToolCall, ToolOutput

SERVERS = Path(__file__).parent / "mcp_servers"
PY = sys.executable
# The module's tests share one set of started servers (``shared``): one test process.
pytestmark = pytest.mark.xdist_group("mcp_source")


def stdio(script: str, **options: Any) -> dict[str, Any]:
    return {"command": PY, "args": [str(SERVERS / script), "stdio"], **options}


def turn(session_id: str = "s1") -> TurnContext:
    return TurnContext(session_id=session_id, home=Path("/tmp"))


def names(tools: list[Tool]) -> list[str]:
    return [t.name for t in tools]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class HttpServer:
    """tests/mcp_servers/basic.py over streamable HTTP, as a subprocess on a free port."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [PY, str(SERVERS / "basic.py"), "http", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("the HTTP test server did not start")

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


@pytest.fixture
def http_server() -> Iterator[HttpServer]:
    server = HttpServer()
    server.start()
    try:
        yield server
    finally:
        server.kill()


def dispatch(
    toolset: Toolset, *calls: ToolCall, events: EventBus | None = None
) -> list[ToolOutput]:
    async def go() -> list[ToolOutput]:
        result = await Dispatcher(toolset, events=events).dispatch(list(calls))
        return result.outputs

    return asyncio.run(go())


def alive(pid: int) -> bool:
    """Whether ``pid`` exists at all (a zombie counts: it was never reaped)."""
    return Path(f"/proc/{pid}").exists()


async def server_pid(source: McpSource, server: str = "basic") -> int:
    result = await source.call(server, "pid")
    assert not result.is_error, result.content
    part = result.parts[0]
    assert isinstance(part, JsonPart)
    pid: int = part.value["result"]
    return pid


# -- one shared source for the read-only checks -------------------------------------------------
@pytest.fixture(scope="module")
def shared() -> Iterator[McpSource]:
    config = {
        "mcpServers": {
            "basic": stdio("basic.py", description="Arithmetic and echo."),
            "trusted": stdio("basic.py", trust_annotations=True, destructive_is_dangerous=True),
            "paged": stdio("paged.py"),
            "broken": {"command": "/nonexistent/mcp-server"},
            "crash": {
                "command": PY,
                "args": ["-c", "import sys; sys.stderr.write('boom at startup'); sys.exit(3)"],
            },
            "hang": {
                "command": PY,
                "args": ["-c", "import time; time.sleep(60)"],
                "startup_timeout": 1,
            },
        }
    }
    with McpSource(config) as source:
        yield source


def test_discovery_names_schemas_and_metadata(shared: McpSource) -> None:
    tools = {t.name: t for t in shared.tools_for(turn()) if isinstance(t, McpTool)}
    assert "mcp__basic__add" in tools and "mcp__basic__echo" in tools
    add = tools["mcp__basic__add"]
    assert add.description == "Add two integers."
    assert add.schema["properties"]["a"]["type"] == "integer"
    assert set(add.schema["required"]) == {"a", "b"}
    assert add.namespace == "basic" and add.namespace_description == "Arithmetic and echo."
    assert add.tier == "WRITE" and add.execution_mode == "sequential"
    weather = tools["mcp__basic__weather"].mcp
    assert weather.output_schema is not None
    assert set(weather.output_schema["properties"]) == {"city", "celsius"}
    # The reverse map, the dotted/underscored collision and the shortened long name.
    assert shared.lookup("mcp__basic__add") == ("basic", "add")
    dotted = next(n for n, t in tools.items() if t.mcp.tool == "dotted.name")
    assert dotted.startswith("mcp__basic__dotted_name_")
    assert tools["mcp__basic__dotted_name"].mcp.tool == "dotted_name"
    assert shared.lookup(dotted) == ("basic", "dotted.name")
    long = next(t for t in tools.values() if t.mcp.tool.startswith("a_very_long"))
    assert len(long.name) == 64
    status = shared.server_status("basic")
    assert status.state == "connected" and status.protocol_version
    assert any("collide on mcp__basic__dotted_name" in c for c in status.collisions)
    # Untrusted annotations: the read-only hint is echoed, the tier is not lowered.
    note, wipe = tools["mcp__basic__read_note"], tools["mcp__basic__wipe"]
    assert note.read_only and note.tier == "WRITE" and note.execution_mode == "sequential"
    assert wipe.destructive and wipe.tier == "WRITE"


def test_pagination_follows_next_cursor(shared: McpSource) -> None:
    paged = [t for t in shared.tools_for(turn()) if t.name.startswith("mcp__paged__")]
    assert names(paged) == [f"mcp__paged__tool_{i:02d}" for i in range(10)]
    outputs = dispatch(Toolset(paged), call("mcp__paged__tool_07", {"n": 3}))
    assert outputs[0].result.content == "tool_07:3"


def test_failed_servers_are_reported_and_the_others_work(shared: McpSource) -> None:
    tools = shared.tools_for(turn())
    down = ("mcp__broken__", "mcp__crash__", "mcp__hang__")
    assert not any(n.startswith(down) for n in names(tools))
    broken = shared.server_status("broken")
    assert broken.state == "failed" and broken.error == "/nonexistent/mcp-server: no such file"
    crash = shared.server_status("crash")
    assert crash.state == "failed" and "boom at startup" in (crash.error or "")
    report = shared.status_report()
    deadline = time.monotonic() + 15
    while "within 1s" not in (shared.server_status("hang").error or ""):
        assert time.monotonic() < deadline, shared.server_status("hang")
        time.sleep(0.1)  # answers nothing: stopped after its startup_timeout, then retried
    assert [s["name"] for s in report["servers"]] == [
        "basic",
        "trusted",
        "paged",
        "broken",
        "crash",
        "hang",
    ]
    json.dumps(report)  # JSON-ready, for TurnContext.status_sources
    # The whole set assembles with native tools: a failed server never breaks a turn.
    assert "mcp__basic__add" in assemble(turn(), [shared]).names


def test_calls_validate_locally_and_map_results(shared: McpSource) -> None:
    toolset = assemble(turn(), [shared])
    outputs = dispatch(
        toolset,
        call("mcp__basic__add", {"a": 2, "b": 3}),
        call("mcp__basic__echo", {"text": "hi"}),
        call("mcp__basic__fail", {"message": "no luck"}),
        call("mcp__basic__weather", {"city": "Oslo"}),
        call("mcp__basic__add", {"a": "two"}),
    )
    add, echo, fail, weather, invalid = (o.result for o in outputs)
    assert list(add.content) == [JsonPart({"result": 5})] and not add.is_error
    assert add.details["representation"] == "structured"
    assert echo.content == "hi"
    assert fail.is_error and "no luck" in fail.text()
    assert list(weather.content) == [JsonPart({"city": "Oslo", "celsius": 21.5})]
    assert invalid.is_error and "Invalid arguments for mcp__basic__add" in invalid.text()
    assert invalid.details is not None and "mcp" not in invalid.details  # never sent


def test_progress_notifications_become_tool_events(shared: McpSource) -> None:
    bus = EventBus()
    seen: list[Event] = []
    bus.subscribe(seen.append, ToolEvent)
    outputs = dispatch(
        assemble(turn(), [shared]), call("mcp__basic__slow", {"seconds": 0.2}), events=bus
    )
    assert list(outputs[0].result.content) == [JsonPart({"result": "slept 0.2"})]
    progress = [e.payload for e in seen if isinstance(e, ToolEvent)]
    assert progress == [McpProgress("basic", "slow", float(i), 3.0, f"step {i}") for i in (1, 2, 3)]


def test_dispatcher_timeout_cancels_the_mcp_call(shared: McpSource) -> None:
    async def go() -> tuple[ToolOutput, ToolOutput]:
        dispatcher = Dispatcher(assemble(turn(), [shared]), timeouts={"mcp__basic__slow": 0.5})
        slow = (await dispatcher.dispatch([call("mcp__basic__slow", {"seconds": 30})])).outputs
        after = (await dispatcher.dispatch([call("mcp__basic__echo", {"text": "ok"})])).outputs
        return slow[0], after[0]

    started = time.monotonic()
    slow, after = asyncio.run(go())
    assert time.monotonic() - started < 5
    assert slow.result.is_error and "timed out after 0.5s" in slow.result.text()
    assert after.result.content == "ok"  # the session survived the cancellation


# -- resilience ----------------------------------------------------------------------------------
def test_per_call_timeout_then_the_server_still_answers() -> None:
    async def go() -> None:
        async with McpSource({"basic": stdio("basic.py", timeout=1)}) as source:
            started = time.monotonic()
            slow = await source.call("basic", "slow", {"seconds": 30})
            assert time.monotonic() - started < 5
            assert slow.is_error and "timed out after 1s" in slow.text()
            assert list((await source.call("basic", "add", {"a": 1, "b": 1})).content) == [
                JsonPart({"result": 2})
            ]

    asyncio.run(go())


def test_list_changed_relists_for_the_next_step() -> None:
    async def go() -> None:
        async with McpSource({"basic": stdio("basic.py")}) as source:
            model = ScriptedModel(
                [
                    reply(call("mcp__basic__grow", {"name": "late_tool"})),
                    reply(call("mcp__basic__late_tool", {"x": 21})),
                    reply("done"),
                ]
            )
            session = Session(model, [source], turn=turn())
            result = await session.run("grow a tool, then use it")
            first, second = (names(list(r.tools)) for r in model.requests[:2])
            assert "mcp__basic__late_tool" not in first
            assert "mcp__basic__late_tool" in second
            outputs = result.tool_outputs
            assert list(outputs[1].result.content) == [JsonPart({"result": 42})]

    asyncio.run(go())


def test_stdio_server_killed_mid_call_then_reconnected_next_turn() -> None:
    async def go() -> None:
        async with McpSource({"basic": stdio("basic.py")}) as source:
            pid = await server_pid(source)
            pending = asyncio.ensure_future(source.call("basic", "slow", {"seconds": 30}))
            await asyncio.sleep(0.5)
            os.kill(pid, signal.SIGKILL)
            started = time.monotonic()
            result = await asyncio.wait_for(pending, 10)
            assert time.monotonic() - started < 5
            assert result.is_error and "went away" in result.text()
            assert result.details["reason"] == "connection_lost"
            tools = await asyncio.to_thread(source.tools_for, turn())  # the next turn's assembly
            assert "mcp__basic__add" in names(tools)
            assert source.server_status("basic").state == "connected"
            assert await server_pid(source) != pid
            assert not alive(pid)  # killed and reaped, not a zombie

    asyncio.run(go())


@pytest.mark.no_zygote  # killed, then started again on its port at once
def test_http_server_killed_mid_call_then_restarted(http_server: HttpServer) -> None:
    async def go() -> None:
        async with McpSource({"web": {"url": http_server.url, "startup_timeout": 5}}) as source:
            assert "mcp__web__add" in names(source.tools_for(turn()))
            pending = asyncio.ensure_future(source.call("web", "slow", {"seconds": 30}))
            await asyncio.sleep(0.5)
            http_server.kill()
            result = await asyncio.wait_for(pending, 10)
            assert result.is_error and result.details["reason"] == "connection_lost"
            down = await asyncio.to_thread(source.tools_for, turn())
            assert names(down) == []  # down: the turn goes on without its tools
            http_server.start()
            # An assembly asks a server in backoff to retry at most once per RETRY_FLOOR:
            # the "down" assembly just did, so the next one may only after that long.
            await asyncio.sleep(RETRY_FLOOR)
            up = await asyncio.to_thread(source.tools_for, turn())
            assert "mcp__web__add" in names(up)
            added = await source.call("web", "add", {"a": 2, "b": 2})
            assert list(added.content) == [JsonPart({"result": 4})]

    asyncio.run(go())


@pytest.mark.no_zygote  # killed, then started again on its port at once
def test_http_stale_session_404_reconnects_and_retries(http_server: HttpServer) -> None:
    config = {"web": {"url": http_server.url, "protocol": "legacy"}}

    async def go() -> None:
        async with McpSource(config) as source:
            assert source.server_status("web").protocol_version == "2025-11-25"
            assert list((await source.call("web", "add", {"a": 1, "b": 1})).content) == [
                JsonPart({"result": 2})
            ]
            http_server.kill()  # a restart between two calls: the session id is now unknown
            http_server.start()
            again = await source.call("web", "add", {"a": 3, "b": 3})
            assert list(again.content) == [JsonPart({"result": 6})], again.content
            assert source.server_status("web").attempts == 2

    asyncio.run(go())


def test_close_stops_every_server_process() -> None:
    before = _server_children()

    async def go() -> list[int]:
        config = {"a": stdio("basic.py"), "b": stdio("basic.py")}
        async with McpSource(config) as source:
            pids = [await server_pid(source, "a"), await server_pid(source, "b")]
            assert all(alive(p) for p in pids)
        return pids

    pids = asyncio.run(go())
    assert not any(alive(p) for p in pids)
    assert _server_children() <= before  # no orphan, no zombie left by this source


def _server_children() -> set[int]:
    """Our child processes that run a test MCP server (other fixtures may hold some)."""
    return {
        int(p.name)
        for p in Path("/proc").iterdir()
        if p.name.isdigit() and _parent(p) == os.getpid() and "mcp_servers" in _cmdline(p)
    }


def _parent(proc: Path) -> int:
    try:
        return int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_text()
    except OSError:
        return ""


def test_status_events_report_a_server_that_fails_to_start() -> None:
    bus = EventBus()
    seen: list[Event] = []
    bus.subscribe(seen.append, McpServerStatusChanged)

    async def go() -> None:
        config = {"good": stdio("basic.py"), "bad": {"command": "/nonexistent/mcp-server"}}
        async with McpSource(config, events=bus) as source:
            assert names(source.tools()) and all(
                n.startswith("mcp__good__") for n in names(source.tools())
            )
            await asyncio.sleep(0.05)  # events hop back to this loop

    asyncio.run(go())
    states = {(e.server, e.state) for e in seen if isinstance(e, McpServerStatusChanged)}
    assert ("good", "connected") in states and ("bad", "failed") in states
    bad = [e for e in seen if isinstance(e, McpServerStatusChanged) and e.state == "failed"]
    assert bad[0].error == "/nonexistent/mcp-server: no such file"


# -- on the caller's loop (in_loop=True: the gateway) ---------------------------------------------
def _io_threads() -> list[str]:
    import threading

    return [t.name for t in threading.enumerate() if t.name == "tooldeck-mcp"]


def test_in_loop_calls_run_on_the_callers_loop_with_progress_timeouts_and_a_clean_close() -> None:
    before = _server_children()
    bus = EventBus()
    seen: list[Event] = []
    bus.subscribe(seen.append, ToolEvent)

    async def go() -> int:
        threads = _io_threads()  # another test's source may hold one
        async with McpSource({"basic": stdio("basic.py")}, in_loop=True) as source:
            assert _io_threads() == threads  # none of its own: this loop runs the servers
            toolset = assemble(turn(), [source])  # tools_for answers what is listed
            assert "mcp__basic__echo" in toolset.names
            dispatcher = Dispatcher(toolset, events=bus, timeouts={"mcp__basic__slow": 0.5})
            echo, slow = (
                await dispatcher.dispatch(
                    [
                        call("mcp__basic__echo", {"text": "hi"}),
                        call("mcp__basic__slow", {"seconds": 0}),
                    ]
                )
            ).outputs
            assert echo.result.content == "hi"
            assert list(slow.result.content) == [JsonPart({"result": "slept 0.0"})]
            progress = [e.payload for e in seen if isinstance(e, ToolEvent)]
            assert progress == [
                McpProgress("basic", "slow", float(i), 3.0, f"step {i}") for i in (1, 2, 3)
            ]
            started = time.monotonic()
            cut = await dispatcher.dispatch([call("mcp__basic__slow", {"seconds": 30})])
            assert time.monotonic() - started < 5
            assert "timed out after 0.5s" in cut.outputs[0].result.text()
            again = await source.call("basic", "echo", {"text": "still here"})
            assert again.content == "still here"  # the session survived the cancellation
            return await server_pid(source)

    pid = asyncio.run(go())
    assert not alive(pid)
    assert _server_children() <= before  # stopped and reaped by aclose, on this loop


def test_in_loop_server_killed_mid_call_then_reconnected() -> None:
    async def go() -> None:
        async with McpSource({"basic": stdio("basic.py")}, in_loop=True) as source:
            pid = await server_pid(source)
            pending = asyncio.ensure_future(source.call("basic", "slow", {"seconds": 30}))
            await asyncio.sleep(0.5)
            os.kill(pid, signal.SIGKILL)
            result = await asyncio.wait_for(pending, 10)
            assert result.is_error and result.details["reason"] == "connection_lost"
            await source.refresh()  # reconnects, on this loop
            assert source.server_status("basic").state == "connected"
            assert await server_pid(source) != pid
            assert not alive(pid)

    asyncio.run(go())


def test_in_loop_needs_the_loop_that_calls_and_says_so() -> None:
    source = McpSource({"basic": stdio("basic.py")}, in_loop=True)
    with pytest.raises(RuntimeError, match=r"call start\(\) \(or enter it\) from a coroutine"):
        source.start()
    with pytest.raises(RuntimeError, match="from a coroutine"), source:
        pass

    async def closing_on_the_loop() -> None:
        live = McpSource({"basic": stdio("basic.py")}, in_loop=True)
        live.start()
        try:
            with pytest.raises(RuntimeError, match="await aclose"):
                live.close()  # it would block the loop its servers stop on
        finally:
            await live.aclose()

    asyncio.run(closing_on_the_loop())


# -- turns, skills, trust ------------------------------------------------------------------------
@tool
def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()


@tooldeck.source
def native(ctx: TurnContext) -> list[Tool]:
    return [shout]


def test_full_turn_merges_mcp_and_native_tools() -> None:
    async def go() -> None:
        async with McpSource({"basic": stdio("basic.py")}) as source:
            model = ScriptedModel(
                [
                    reply(
                        call("mcp__basic__add", {"a": 40, "b": 2}),
                        call("shout", {"text": "hi"}),
                    ),
                    reply("42, HI"),
                ]
            )
            session = Session(model, [native, source], turn=turn())
            result = await session.run("add and shout")
            assert result.output == "42, HI"
            add, loud = result.tool_outputs
            assert list(add.result.content) == [JsonPart({"result": 42})]
            assert loud.result.content == "HI"
            offered = names(list(model.requests[0].tools))
            assert offered[0] == "shout" and "mcp__basic__add" in offered

    asyncio.run(go())


def test_autostart_false_servers_connect_when_activated_for_a_session() -> None:
    config = {"lazy": stdio("paged.py", autostart=False)}

    async def go() -> None:
        async with McpSource(config) as source:
            assert source.server_status("lazy").state == "idle"
            assert not any(n.startswith("mcp__lazy__") for n in names(source.tools_for(turn("s1"))))
            status = await source.activate("lazy", session_id="s1")
            assert status.state == "connected" and len(status.tools) == 10
            s1 = await asyncio.to_thread(source.tools_for, turn("s1"))
            s2 = await asyncio.to_thread(source.tools_for, turn("s2"))
            assert "mcp__lazy__tool_00" in names(s1)
            assert "mcp__lazy__tool_00" not in names(s2)
            await source.deactivate("lazy", session_id="s1")
            await asyncio.sleep(0.3)
            assert source.server_status("lazy").state == "idle"
            # The skills hook: anything with an ``mcp_server`` (a tooldeck.agents.skills.Skill).
            hook = source.activation_hook()  # for every session
            status = await hook(SimpleNamespace(name="paging", mcp_server="lazy"))
            assert status is not None and status.state == "connected"
            assert "mcp__lazy__tool_00" in names(
                await asyncio.to_thread(source.tools_for, turn("s2"))
            )
            assert await hook(SimpleNamespace(mcp_server="unknown")) is None
            with pytest.raises(KeyError, match="configured: lazy"):
                await source.activate("nope")

    asyncio.run(go())


def test_trusted_annotations_lower_and_destructive_raise_the_tier(shared: McpSource) -> None:
    tools = {t.name: t for t in shared.tools_for(turn())}
    note, wipe, add = (tools[f"mcp__trusted__{n}"] for n in ("read_note", "wipe", "add"))
    assert note.tier == "STANDARD" and note.execution_mode == "parallel"
    assert wipe.tier == "DANGEROUS"
    assert add.tier == "WRITE"


# -- a server published on PyPI by someone else --------------------------------------------------
@pytest.mark.skipif(
    importlib.util.find_spec("mcp_server_time") is None,
    reason="mcp-server-time is not installed (uv run --with mcp-server-time pytest ...)",
)
def test_published_server_mcp_server_time() -> None:
    config = {
        "time": {
            "command": PY,
            "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
            "trust_annotations": True,
        }
    }
    with McpSource(config) as source:
        tools = {t.name: t for t in source.tools_for(turn())}
        assert {"mcp__time__get_current_time", "mcp__time__convert_time"} <= set(tools)
        current = tools["mcp__time__get_current_time"]
        assert current.tier == "STANDARD"  # read-only by its annotation, on a trusted server
        outputs = dispatch(
            Toolset(tools.values()),
            call("mcp__time__get_current_time", {"timezone": "Europe/Paris"}),
            call("mcp__time__get_current_time", {}),
        )
    ok, missing = (o.result for o in outputs)
    assert not ok.is_error and "Europe/Paris" in ok.text()
    assert missing.is_error and "Invalid arguments" in missing.text()  # checked locally


# -- the command line ----------------------------------------------------------------------------
def test_cli_list_and_call(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "basic": stdio("basic.py"),
                    "paged": stdio("paged.py", autostart=False),
                    "broken": {"command": "/nonexistent/mcp-server"},
                }
            }
        )
    )
    runner = CliRunner()
    listed = runner.invoke(mcp_app, ["list", str(path), "--json"])
    assert listed.exit_code == 1  # one server failed
    servers = {s["name"]: s for s in json.loads(listed.output)["servers"]}
    assert servers["basic"]["state"] == "connected"
    assert servers["paged"]["state"] == "connected"  # listed even though autostart is off
    assert servers["broken"]["state"] == "failed"
    assert {"name": "mcp__basic__add", "tool": "add", "tier": "WRITE"}.items() <= (
        next(t for t in servers["basic"]["tools"] if t["tool"] == "add").items()
    )

    added = runner.invoke(mcp_app, ["call", str(path), "basic", "add", "--args", '{"a":1,"b":2}'])
    assert added.exit_code == 0 and added.output.strip() == '{"result":3}'
    invalid = runner.invoke(mcp_app, ["call", str(path), "paged", "tool_01", "-a", '{"n":"x"}'])
    assert (invalid.exit_code, invalid.output) == (
        2,
        'error: --args for tool_01: $.n: "x" is not of type "integer"\n',
    )
    unknown = runner.invoke(mcp_app, ["call", str(path), "nope", "add"])
    assert unknown.exit_code == 2 and "no MCP server 'nope'" in unknown.output
