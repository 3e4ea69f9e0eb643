"""Helpers for the gateway tests: a real ``tooldeck serve`` subprocess, reached with the
official MCP client SDK (``ClientSession`` over ``stdio_client``), in front of real MCP
servers (tests/mcp_servers/, and PyPI's mcp-server-time)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, TextIO

import anyio
import httpx2
import mcp_types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import get_default_environment, stdio_client
from mcp.client.streamable_http import streamable_http_client

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
    errlog: TextIO | None = None,
    env: dict[str, str] | None = None,
) -> AsyncIterator[ClientSession]:
    """``tooldeck serve`` as a stdio subprocess, reached by an SDK client; ``errlog``
    gets its stderr, ``env`` is added to the SDK's default environment."""
    serve = ["-m", "tooldeck.cli", "serve", "--mcp", str(config), "--state", str(state)]
    params = StdioServerParameters(
        command=PY,
        args=[*serve, "--lexical", *args],
        env={**get_default_environment(), **env} if env else None,
    )
    async with (
        stdio_client(params, errlog=errlog or sys.stderr) as (read, write),
        ClientSession(read, write, elicitation_callback=elicit, message_handler=notes) as client,
    ):
        with anyio.fail_after(60):
            await client.initialize()
        yield client


async def names(client: ClientSession) -> list[str]:
    return [t.name for t in (await client.list_tools()).tools]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _listening(proc: subprocess.Popen[Any], port: int, what: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        assert proc.poll() is None, f"{what} exited"
        assert time.monotonic() < deadline, f"{what} did not listen"
        time.sleep(0.2)


def _stop(proc: subprocess.Popen[Any]) -> None:
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextmanager
def http_server(script: str) -> Iterator[str]:
    """A test MCP server of tests/mcp_servers/ over streamable HTTP; its URL."""
    port = free_port()
    proc = subprocess.Popen([PY, str(SERVERS / script), "http", str(port)])
    try:
        _listening(proc, port, script)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        _stop(proc)


@contextmanager
def served_gateway(
    config: Path, state: Path, *args: str, env: dict[str, str] | None = None
) -> Iterator[str]:
    """``tooldeck serve --http`` as a subprocess on a free loopback port; its URL."""
    port = free_port()
    serve = ["-m", "tooldeck.cli", "serve", "--mcp", str(config), "--state", str(state)]
    environment = {**os.environ, **env} if env else None
    proc = subprocess.Popen([PY, *serve, "--lexical", "--http", str(port), *args], env=environment)
    try:
        _listening(proc, port, "the gateway")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        _stop(proc)


@asynccontextmanager
async def http_client(
    url: str, elicit: Any = None, notes: Notes | None = None, token: str | None = None
) -> AsyncIterator[ClientSession]:
    """The SDK's client over streamable HTTP (``elicit``: its elicitation callback)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write, elicitation_callback=elicit, message_handler=notes) as c,
    ):
        with anyio.fail_after(30):
            await c.initialize()
        yield c


# -- out-of-band approvals ----------------------------------------------------------------
async def pending_file(state: Path, after: set[Path] | None = None) -> Path:
    """The next pending-approval file the gateway writes (waits, bounded)."""
    with anyio.fail_after(60):
        while True:
            found = set((state / "approvals").glob("*.pending.json")) - (after or set())
            if found:
                return min(found)
            await anyio.sleep(0.05)


def approve(path: Path, typed: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``tooldeck approve FILE`` in another process, the answers typed on its stdin."""
    return subprocess.run(
        [PY, "-m", "tooldeck.cli", "approve", str(path), *args],
        input=typed,
        capture_output=True,
        text=True,
        timeout=120,
    )


class Call:
    """A client call run in the background, its result kept."""

    def __init__(self) -> None:
        self.result: types.CallToolResult | None = None
        self.done = anyio.Event()

    async def run(self, client: Any, name: str, args: dict[str, Any], **kw: Any) -> None:
        try:
            self.result = await client.call_tool(name, args, **kw)
        finally:
            self.done.set()

    async def get(self) -> types.CallToolResult:
        with anyio.fail_after(60):
            await self.done.wait()
        assert self.result is not None
        return self.result


async def answered_out_of_band(
    client: ClientSession,
    state: Path,
    name: str,
    arguments: dict[str, Any],
    typed: str,
    seen: set[Path] | None = None,
) -> tuple[types.CallToolResult, subprocess.CompletedProcess[str]]:
    """Call ``name``; answer its out-of-band approval with ``tooldeck approve``, ``typed``
    on its stdin; the call's result and the approver's run (``seen``: pending files
    answered before, the new one is added)."""
    call = Call()
    async with anyio.create_task_group() as tg:
        tg.start_soon(call.run, client, name, arguments)
        path = await pending_file(state, seen)
        if seen is not None:
            seen.add(path)
        answered = await anyio.to_thread.run_sync(approve, path, typed)
        assert answered.returncode == 0, answered.stderr
        return await call.get(), answered
