"""Hostile and broken input schemas from a real MCP server (a subprocess over stdio).

A tool whose schema cannot be compiled, or that refers to anything outside itself, is
skipped when the listing is turned into tools: with a logged warning, a reason in the
server's status, and in ``tooldeck mcp list``. Listing it fetches and reads nothing
(the counting HTTP server and the watched FIFO of tests/test_schema_compile.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tooldeck import Dispatcher, Toolset, TurnContext
from tooldeck.cli.mcp import app as mcp_app
from tooldeck.mcp import McpSource
from tooldeck.testing import call
from tooldeck.transcript import ToolCall, ToolOutput
from watchers import CountingServer, WatchedFifo

SERVER = Path(__file__).parent / "mcp_servers" / "schemas.py"


def turn() -> TurnContext:
    return TurnContext(session_id="s1", home=Path("/tmp"))


def dispatch(toolset: Toolset, *calls: ToolCall) -> list[ToolOutput]:
    async def go() -> list[ToolOutput]:
        return (await Dispatcher(toolset).dispatch(list(calls))).outputs

    return asyncio.run(go())


def prop(sub: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": {"a": sub}}


@pytest.fixture
def config(tmp_path: Path) -> Iterator[tuple[dict[str, Any], CountingServer, WatchedFifo]]:
    with CountingServer() as web, WatchedFifo(tmp_path) as fifo:
        schemas = {
            "good": prop({"type": "integer"}),
            "bad_pattern": prop({"type": "string", "pattern": "("}),
            "bad_ref": prop({"$ref": "#/nope"}),
            "remote_ref": prop({"$ref": f"{web.base}/a.json"}),
            "file_ref": prop({"$ref": fifo.path.as_uri()}),
            "remote_dialect": {"$schema": f"{web.base}/meta.json", "type": "object"},
        }
        path = tmp_path / "tools.json"
        path.write_text(json.dumps(schemas))
        server = {"command": sys.executable, "args": [str(SERVER), "stdio", str(path)]}
        yield {"mcpServers": {"hostile": server}}, web, fifo


def test_unusable_schemas_are_skipped_with_a_reason_and_fetch_nothing(
    config: tuple[dict[str, Any], CountingServer, WatchedFifo], caplog: pytest.LogCaptureFixture
) -> None:
    cfg, web, fifo = config
    with caplog.at_level(logging.WARNING, logger="tooldeck.mcp"), McpSource(cfg) as source:
        tools = source.tools_for(turn())
        assert [t.name for t in tools] == ["mcp__hostile__good"]
        status = source.server_status("hostile")
        outputs = dispatch(
            Toolset(tools),
            call("mcp__hostile__good", {"a": 2}, call_id="ok"),
            call("mcp__hostile__good", {"a": "2"}, call_id="bad"),
        )
    skipped = {line.split(":")[0]: line for line in status.skipped}
    assert set(skipped) == {"bad_pattern", "bad_ref", "remote_ref", "file_ref", "remote_dialect"}
    assert "['pattern']" in skipped["bad_pattern"] and "regex" in skipped["bad_pattern"]
    assert "'#/nope' points to nothing" in skipped["bad_ref"]
    for name in ("remote_ref", "file_ref", "remote_dialect"):
        assert "never fetches" in skipped[name], skipped[name]
    assert all(line.count("unusable input schema") == 1 for line in status.skipped)
    warned = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert len(warned) == 5 and any("bad_ref" in w and "points to nothing" in w for w in warned)
    assert web.hits == [] and fifo.opened == 0
    ok, bad = (o.result for o in outputs)
    assert not ok.is_error and ok.text() == 'good:{"a": 2}'
    assert bad.is_error and "Invalid arguments" in bad.text()


def test_mcp_list_shows_why_a_tool_was_skipped(
    config: tuple[dict[str, Any], CountingServer, WatchedFifo], tmp_path: Path
) -> None:
    cfg, web, fifo = config
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(cfg))
    runner = CliRunner()
    table = runner.invoke(mcp_app, ["list", str(path)], env={"COLUMNS": "250"})
    assert table.exit_code == 0, table.output
    assert "mcp__hostile__good" in table.output
    assert "hostile: skipped: bad_ref: unusable input schema:" in table.output
    assert table.output.count("hostile: skipped:") == 5
    listed = runner.invoke(mcp_app, ["list", str(path), "--json"])
    [server] = json.loads(listed.output)["servers"]
    assert [t["tool"] for t in server["tools"]] == ["good"]
    assert len(server["skipped"]) == 5
    assert any("never fetches" in s for s in server["skipped"])
    assert web.hits == [] and fifo.opened == 0


def test_a_server_whose_every_tool_is_skipped_still_says_why(tmp_path: Path) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps({"only": prop({"$ref": "#/nope"})}))
    path = tmp_path / "mcp.json"
    server = {"command": sys.executable, "args": [str(SERVER), "stdio", str(tools)]}
    path.write_text(json.dumps({"mcpServers": {"lone": server}}))
    table = CliRunner().invoke(mcp_app, ["list", str(path)], env={"COLUMNS": "250"})
    assert table.exit_code == 0, table.output
    assert "lone: skipped: only: unusable input schema:" in table.output
