"""Helpers for the gateway tests: a real ``tooldeck serve`` subprocess, reached with the
official MCP client SDK (``ClientSession`` over ``stdio_client``, or ``Client``), in front
of real MCP servers (tests/mcp_servers/, and PyPI's mcp-server-time); for OAuth, the
authorization server of tests/oauth_server.py and the SDK's ``OAuthClientProvider``."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import mcp_types as types
from mcp import Client, ClientSession, StdioServerParameters
from mcp.client.auth import OAuthClientProvider
from mcp.client.stdio import get_default_environment, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from pydantic import AnyUrl

from oauth_server import OAuthServers

SERVERS = Path(__file__).parent / "mcp_servers"
PY = sys.executable
# `python RUN -m MODULE ...` runs as `python -m MODULE ...`, by the tests' fork server when
# there is one (tests/_zygote.py): without importing the MCP SDK again
RUN = str(Path(__file__).parent / "_zygote_run.py")
ALLOW_ALL = '[profile]\n[[profile.rules]]\ntools = "*__*"\naction = "allow"\n'

Elicit = Callable[[Any, types.ElicitRequestParams], Awaitable[types.ElicitResult]]
Sample = Callable[[Any, types.CreateMessageRequestParams], Awaitable[Any]]


def stdio(script: str, *args: str) -> dict[str, Any]:
    return {"command": PY, "args": [str(SERVERS / script), "stdio", *args]}


def time_server() -> dict[str, Any]:
    return {"command": PY, "args": [RUN, "-m", "mcp_server_time", "--local-timezone", "UTC"]}


NPM_CACHE = Path.home() / ".cache" / "tooldeck-tests" / "npm"


def _npm(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["npm", *args, "--no-audit", "--no-fund", "--loglevel=error"],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def npm_server(package: str, version: str, command: str) -> Path:
    """The entry script of an npm MCP server, installed once into ``~/.cache`` (pinned);
    the test is skipped only when npm is missing or the registry cannot be reached."""
    import pytest
    from filelock import FileLock

    if shutil.which("npm") is None or shutil.which("node") is None:
        pytest.skip("npm and node are not installed: the npm MCP server cannot be run")
    prefix = NPM_CACHE / f"{package.rsplit('/', 1)[-1]}-{version}"
    manifest = prefix / "node_modules" / package / "package.json"
    prefix.mkdir(parents=True, exist_ok=True)
    with FileLock(str(prefix) + ".lock", timeout=600):  # two test processes install once
        if not manifest.exists():
            try:
                done = _npm("install", "--prefix", str(prefix), f"{package}@{version}", timeout=300)
            except subprocess.TimeoutExpired:
                pytest.skip("the npm registry did not answer within 300 s")
            if done.returncode != 0:
                reachable = _npm("view", f"{package}@{version}", "version", timeout=60)
                if reachable.returncode != 0:
                    why = " ".join(reachable.stderr.split())[:200]
                    pytest.skip(f"the npm registry cannot be reached: {why}")
                raise AssertionError(f"npm install failed: {done.stderr[-2000:]}")
    entry: str = json.loads(manifest.read_text())["bin"][command]
    return manifest.parent / entry


EXIT_AT_STDIN_END = SERVERS / "exit_at_stdin_end.mjs"


def node_server(entry: Path, *args: str, **options: Any) -> dict[str, Any]:
    """The config entry of an npm MCP server (``entry``, from :func:`npm_server`) run by
    node, ``args`` after it: it exits as soon as its stdin ends, as a client's close asks
    (tests/mcp_servers/exit_at_stdin_end.mjs says why); ``options`` join the entry."""
    preload = ["--import", EXIT_AT_STDIN_END.as_uri()]
    return {"command": "node", "args": [*preload, str(entry), *args], **options}


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


def audit_lines(state: Path) -> list[dict[str, Any]]:
    """Every audit line of every session under ``state``."""
    from tooldeck.policy import AuditLog

    lines: list[dict[str, Any]] = []
    for path in sorted(state.glob("*.audit.jsonl")):
        lines.extend(AuditLog.read(path))
    return lines


class Answers:
    """An elicitation callback that answers from a list, and keeps what it was asked."""

    def __init__(self, *answers: types.ElicitResult) -> None:
        self.answers = list(answers)
        self.asked: list[types.ElicitRequestParams] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(params)
        return self.answers.pop(0)


APPROVE = types.ElicitResult(action="accept", content={"approve": True})
ALWAYS = types.ElicitResult(action="accept", content={"approve": True, "always": True})
UNCHECKED = types.ElicitResult(action="accept", content={"approve": False})
DECLINE = types.ElicitResult(action="decline")


class Notes:
    """The notifications a client received."""

    def __init__(self) -> None:
        self.list_changed = 0
        self.changed = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.list_changed += 1
            self.changed.set()


async def settled(client: Any) -> None:
    """Wait until no upstream server of the gateway is still starting (its ``tools/list``
    answers name them in ``_meta``, ``tooldeck/starting``): the servers start in the
    background, after ``initialize`` was answered."""
    with anyio.fail_after(60):
        while True:
            listing = await client.list_tools()
            if not (listing.meta or {}).get("tooldeck/starting"):
                return
            await anyio.sleep(0.05)


@asynccontextmanager
async def gateway(
    config: Path | None,
    state: Path,
    *args: str,
    elicit: Elicit | None = None,
    notes: Notes | None = None,
    errlog: TextIO | None = None,
    sample: Sample | None = None,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    lexical: bool = True,
    settle: bool = True,
    roots: Any = None,
) -> AsyncIterator[ClientSession]:
    """``tooldeck serve`` as a stdio subprocess, reached by an SDK client; ``errlog``
    gets its stderr, ``env`` is added to the SDK's default environment, ``cwd`` is its
    folder; ``lexical=False``: its search ranks by meaning too (when the ``semantic``
    extra is installed); ``settle``: the upstream servers are up (or failed) when the
    client is handed over; ``roots``: the client's roots callback (it declares roots).
    Without ``config`` it serves no upstream server (give ``--tools``)."""
    upstream = ["--mcp", str(config)] if config is not None else []
    serve = [RUN, "-m", "tooldeck.cli", "serve", *upstream, "--state", str(state)]
    params = StdioServerParameters(
        command=PY,
        args=[*serve, *(["--lexical"] if lexical else []), *args],
        env={**get_default_environment(), **env} if env else None,
        cwd=cwd,
    )
    async with (
        stdio_client(params, errlog=errlog or sys.stderr) as (read, write),
        ClientSession(
            read,
            write,
            elicitation_callback=elicit,
            message_handler=notes,
            sampling_callback=sample,
            list_roots_callback=roots,
        ) as client,
    ):
        with anyio.fail_after(60):
            await client.initialize()
        if settle:
            await settled(client)
        yield client


async def names(client: ClientSession) -> list[str]:
    return [t.name for t in (await client.list_tools()).tools]


@asynccontextmanager
async def started_as_entry(
    entry: dict[str, Any],
    env: dict[str, str],
    *extra: str,
    elicit: Elicit | None = None,
    starts_within: float = 60,
) -> AsyncIterator[ClientSession]:
    """The gateway started exactly as a client's entry for it says (its ``command`` and
    ``args``, then ``extra``), with ``env``, reached by an SDK client, initialized."""
    params = StdioServerParameters(command=entry["command"], args=[*entry["args"], *extra], env=env)
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, elicitation_callback=elicit) as client,
    ):
        with anyio.fail_after(starts_within):
            await client.initialize()
        yield client


async def search_then_call(
    client: ClientSession, query: str, ending: str, arguments: dict[str, Any]
) -> str:
    """What a model does: ``tool_search`` for ``query``, then call the listed tool whose
    name ends with ``ending`` (found by the search) with ``arguments``; its text."""
    found = await client.call_tool("tool_search", {"query": query})
    assert ending in text_of(found), text_of(found)
    name = next(n for n in await names(client) if n.endswith(ending))
    answer = await client.call_tool(name, arguments)
    assert not answer.is_error, text_of(answer)
    return text_of(answer)


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
def gateway_process(
    config: Path,
    state: Path,
    *args: str,
    env: dict[str, str] | None = None,
    stderr: TextIO | None = None,
) -> Iterator[tuple[str, subprocess.Popen[Any]]]:
    """``tooldeck serve --http`` as a subprocess on a free loopback port; its URL, and the
    process (``stderr``: where its stderr goes)."""
    port = free_port()
    serve = [RUN, "-m", "tooldeck.cli", "serve", "--mcp", str(config), "--state", str(state)]
    environment = {**os.environ, **env} if env else None
    proc = subprocess.Popen(
        [PY, *serve, "--lexical", "--http", str(port), *args], env=environment, stderr=stderr
    )
    try:
        _listening(proc, port, "the gateway")
        yield f"http://127.0.0.1:{port}/mcp", proc
    finally:
        _stop(proc)


@contextmanager
def served_gateway(
    config: Path, state: Path, *args: str, env: dict[str, str] | None = None
) -> Iterator[str]:
    """``tooldeck serve --http`` as a subprocess on a free loopback port; its URL."""
    with gateway_process(config, state, *args, env=env) as (url, _):
        yield url


@asynccontextmanager
async def http_client(
    url: str,
    elicit: Any = None,
    notes: Notes | None = None,
    token: str | None = None,
    settle: bool = True,
    sample: Sample | None = None,
    roots: Any = None,
) -> AsyncIterator[ClientSession]:
    """The SDK's client over streamable HTTP (``elicit``: its elicitation callback;
    ``sample``: its sampling callback; ``settle``, ``roots``: see :func:`gateway`)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(
            read,
            write,
            elicitation_callback=elicit,
            message_handler=notes,
            sampling_callback=sample,
            list_roots_callback=roots,
        ) as c,
    ):
        with anyio.fail_after(30):
            await c.initialize()
        if settle:
            await settled(c)
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
        [PY, RUN, "-m", "tooldeck.cli", "approve", str(path), *args],
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


# -- OAuth resource-server mode ------------------------------------------------------------
INTROSPECTOR = ("gateway", "introspection-secret")


def oauth_args(servers: OAuthServers, directory: Path) -> list[str]:
    """``tooldeck serve`` options for OAuth at ``servers`` (the secret written to a file)."""
    (directory / "secret").write_text(INTROSPECTOR[1] + "\n")
    args = ["--oauth-issuer", servers.issuer, "--oauth-introspect", f"{servers.issuer}/introspect"]
    args += ["--oauth-scope", "mcp", "--oauth-client-id", INTROSPECTOR[0]]
    return [*args, "--oauth-secret-file", str(directory / "secret")]


class MemoryStorage:
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


@asynccontextmanager
async def oauth_client(
    url: str, name: str, mode: str = "auto", **options: Any
) -> AsyncIterator[tuple[Client, MemoryStorage, list[str]]]:
    """An SDK ``Client`` that logs in by itself (the test AS approves; the redirect's code
    is read from its Location, as the user's browser would deliver it); the HTTP session
    ids the gateway gave it. ``options`` go to the ``Client``."""
    storage, sessions, answer = MemoryStorage(), [], {}

    async def redirect(authorize: str) -> None:
        async with httpx2.AsyncClient() as http:
            location = (await http.get(authorize)).headers["location"]
        query = parse_qs(urlsplit(location).query)
        answer["result"] = AuthorizationCodeResult(code=query["code"][0], state=query["state"][0])

    async def callback() -> AuthorizationCodeResult:
        return answer["result"]

    async def remember(response: httpx2.Response) -> None:
        if "mcp-session-id" in response.headers:
            sessions.append(response.headers["mcp-session-id"])

    metadata = OAuthClientMetadata(
        redirect_uris=[AnyUrl("http://127.0.0.1:9/callback")], client_name=name
    )
    provider = OAuthClientProvider(url, metadata, storage, redirect, callback)
    hooks = {"response": [remember]}
    timeout = httpx2.Timeout(30, read=300)
    async with (
        httpx2.AsyncClient(auth=provider, event_hooks=hooks, timeout=timeout) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode, **options) as client,
    ):
        yield client, storage, sessions


# -- clients of the stateless protocol (MCP 2026-07-28) -------------------------------------
@asynccontextmanager
async def stdio_2026(
    config: Path, state: Path, *args: str, **options: Any
) -> AsyncIterator[Client]:
    """``tooldeck serve`` over stdio, reached by the SDK's ``Client`` in its default mode
    (it negotiates 2026-07-28 with a server that speaks it); ``options`` go to the
    ``Client``; the upstream servers are up (or failed) when it is handed over."""
    serve = ["-m", "tooldeck.cli", "serve", "--mcp", str(config), "--state", str(state)]
    params = StdioServerParameters(command=PY, args=[*serve, "--lexical", *args])
    async with Client(params, **options) as client:
        await settled(client)
        yield client


@asynccontextmanager
async def bearer_client(url: str, token: str | None, **options: Any) -> AsyncIterator[Client]:
    """The SDK's ``Client`` over streamable HTTP with a bearer token (an access token minted
    by the test authorization server, or none); ``options`` go to the ``Client``."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    timeout = httpx2.Timeout(30, read=300)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
        Client(streamable_http_client(url, http_client=http), **options) as client,
    ):
        yield client


class Events:
    """A ``subscriptions/listen`` stream's events, read in the background:
    ``await tg.start(events.listen, client)`` returns once the server acknowledged it."""

    def __init__(self) -> None:
        self.count = 0
        self.ended = False
        self._changed = anyio.Event()

    async def listen(self, client: Client, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        async with client.listen(tools_list_changed=True) as subscription:
            task_status.started()
            async for _ in subscription:
                self.count += 1
                self._changed.set()
        self.ended = True  # the server closed the stream gracefully
        self._changed.set()

    async def next(self, seconds: float = 15) -> None:
        """Wait for an event not waited for before."""
        with anyio.fail_after(seconds):
            await self._changed.wait()
        self._changed = anyio.Event()
