"""The client's MCP roots: the turn's home and the configured roots, announced when they
change (``notifications/roots/list_changed``).

Real servers only: npm's ``@modelcontextprotocol/server-filesystem`` started with no
directory arguments (it takes its allowed directories from the client's roots, per its
README), and tests/mcp_servers/roots.py, an SDK server that records every roots list
it is given.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gateway_client import node_server, npm_server
from tooldeck import TurnContext
from tooldeck.mcp import McpSource
from tooldeck.result import ToolResult

SERVERS = Path(__file__).parent / "mcp_servers"
FILESYSTEM = ("@modelcontextprotocol/server-filesystem", "2026.8.31", "mcp-server-filesystem")


def until(check: Callable[[], bool], seconds: float = 15.0) -> None:
    """Wait for a server to act on what it was told (it asks for the roots on its own)."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("the server did not get there in time")
        time.sleep(0.05)


def seen(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def recorder(log: Path, protocol: str = "legacy") -> dict[str, Any]:
    """The recording server; ``legacy``: the handshake era, where roots/list_changed is."""
    server = {"command": sys.executable, "args": [str(SERVERS / "roots.py"), "stdio"]}
    return {"mcpServers": {"rec": {**server, "env": {"ROOTS_LOG": str(log)}, "protocol": protocol}}}


def test_a_new_home_is_announced_and_answered(tmp_path: Path) -> None:
    log = tmp_path / "roots.jsonl"
    shared, first, second = (tmp_path / n for n in ("shared", "first", "second"))
    for folder in (shared, first, second):
        folder.mkdir()
    with McpSource(recorder(log), roots=[shared]) as source:
        until(lambda: len(seen(log)) == 1)  # asked once connected: the configured root
        assert seen(log) == [{"event": "initialized", "roots": [shared.as_uri()]}]
        source.tools_for(TurnContext("s1", home=first))
        until(lambda: len(seen(log)) == 2)
        assert seen(log)[1] == {"event": "list_changed", "roots": [first.as_uri(), shared.as_uri()]}
        assert source.roots == (first, shared)

        source.tools_for(TurnContext("s1", home=first))  # the same home: nothing to say
        source.tools_for(TurnContext("s2", home=second))
        until(lambda: len(seen(log)) == 3)
        assert seen(log)[2] == {
            "event": "list_changed",
            "roots": [second.as_uri(), shared.as_uri()],
        }
        asked = asyncio.run(source.call("rec", "roots"))
        assert not asked.is_error
        assert asked.details["mcp"]["structuredContent"]["result"] == [
            second.as_uri(),
            shared.as_uri(),
        ]
        source.tools_for(TurnContext("s3"))  # a turn without a home: the configured roots
        until(lambda: len(seen(log)) == 4)
        assert seen(log)[3] == {"event": "list_changed", "roots": [shared.as_uri()]}
    assert len(seen(log)) == 4  # nothing announced that did not change


def read(source: McpSource, path: Path) -> ToolResult:
    return asyncio.run(source.call("fs", "read_text_file", {"path": str(path)}))


def test_server_filesystem_works_in_the_turns_home_only(tmp_path: Path) -> None:
    entry = npm_server(*FILESYSTEM)
    home, outside = tmp_path / "home", tmp_path / "outside"
    home.mkdir()
    outside.mkdir()
    (home / "notes.txt").write_text("inside the home")
    (outside / "secret.txt").write_text("outside the home")
    config = {"mcpServers": {"fs": node_server(entry)}}  # no folders
    with McpSource(config) as source:
        tools = {t.name for t in source.tools_for(TurnContext("s1", home=home))}
        assert "mcp__fs__read_text_file" in tools
        # the server asks for the roots when told they changed, then applies them
        until(lambda: not read(source, home / "notes.txt").is_error)
        assert "inside the home" in read(source, home / "notes.txt").text()
        refused = read(source, outside / "secret.txt")
        assert refused.is_error
        assert "access denied" in refused.text().lower()
        assert "outside the home" not in refused.text()
        listed = asyncio.run(source.call("fs", "list_allowed_directories"))
        assert str(home.resolve()) in listed.text()


def test_configured_roots_reach_server_filesystem_at_start(tmp_path: Path) -> None:
    entry = npm_server(*FILESYSTEM)
    (tmp_path / "data.txt").write_text("configured")
    config = {"mcpServers": {"fs": node_server(entry)}}
    with McpSource(config, roots=[tmp_path]) as source:
        until(lambda: not read(source, tmp_path / "data.txt").is_error)
        assert "configured" in read(source, tmp_path / "data.txt").text()
        assert read(source, Path("/etc/hostname")).is_error


def test_a_2026_era_server_asks_for_the_roots_with_its_request(tmp_path: Path) -> None:
    """The 2026 protocol has no roots/list_changed: a server asks for the roots within a
    request (an input request), and gets the current ones."""
    log, home = tmp_path / "roots.jsonl", tmp_path / "home"
    home.mkdir()
    with McpSource(recorder(log, protocol="auto"), roots=[tmp_path]) as source:
        assert source.server_status("rec").protocol_version == "2026-07-28"
        source.tools_for(TurnContext("s1", home=home))
        asked = asyncio.run(source.call("rec", "roots"))
        assert not asked.is_error, asked.text()
        assert asked.details["mcp"]["structuredContent"]["result"] == [
            home.as_uri(),
            tmp_path.as_uri(),
        ]
    assert seen(log) == []  # no handshake, no notification
