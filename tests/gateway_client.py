"""Helpers for the gateway tests: a real ``tooldeck serve`` subprocess, reached with the
official MCP client SDK (``ClientSession`` over ``stdio_client``), in front of real MCP
servers (tests/mcp_servers/, and PyPI's mcp-server-time)."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

SERVERS = Path(__file__).parent / "mcp_servers"
PY = sys.executable
ALLOW_ALL = '[profile]\n[[profile.rules]]\ntools = "mcp__*"\naction = "allow"\n'

Elicit = Callable[[Any, types.ElicitRequestParams], Awaitable[types.ElicitResult]]


def stdio(script: str, *args: str) -> dict[str, Any]:
    return {"command": PY, "args": [str(SERVERS / script), "stdio", *args]}


def time_server() -> dict[str, Any]:
    return {"command": PY, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}


def write_config(directory: Path, servers: dict[str, Any]) -> Path:
    path = directory / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def write_policy(directory: Path, text: str, name: str = "policy.toml") -> Path:
    path = directory / name
    path.write_text(text)
    return path


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def result_of(result: types.CallToolResult) -> Any:
    """The value of a structured result (sent to the client as its one JSON text)."""
    return json.loads(text_of(result))["result"]


class Notes:
    """The notifications a client received."""

    def __init__(self) -> None:
        self.list_changed = 0
        self.changed = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.list_changed += 1
            self.changed.set()


@asynccontextmanager
async def gateway(
    config: Path,
    state: Path,
    *args: str,
    elicit: Elicit | None = None,
    notes: Notes | None = None,
) -> AsyncIterator[ClientSession]:
    serve = ["-m", "tooldeck.cli", "serve", "--mcp", str(config), "--state", str(state)]
    params = StdioServerParameters(command=PY, args=[*serve, "--lexical", *args])
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, elicitation_callback=elicit, message_handler=notes) as client,
    ):
        with anyio.fail_after(60):
            await client.initialize()
        yield client


async def names(client: ClientSession) -> list[str]:
    return [t.name for t in (await client.list_tools()).tools]
