"""One supervised connection to one MCP server (runs on the MCP I/O thread's loop).

A supervisor task owns the SDK ``Client`` for its whole life: it connects (stdio or
streamable HTTP, protocol era negotiated by the SDK), lists the tools page by page,
keeps the listing fresh (``notifications/tools/list_changed``), and when the session
drops — the process exited, the HTTP session went stale (404), a call found the
connection closed — tears it down within a bound and reconnects with backoff.

Everything here runs on one event loop (:mod:`tooldeck.mcp.source` owns it); the
source reaches it with ``run_coroutine_threadsafe`` and reads the published listing
(``tools``) from other threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import shutil
import tempfile
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import IO, Any, TextIO, cast

import anyio
import anyio.abc
import httpx2
import mcp_types as types
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._context_streams import ContextReceiveStream
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types import CONNECTION_CLOSED
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..errors import TooldeckError
from ..result import ToolResult
from ..telemetry.propagation import current as current_trace
from ..telemetry.propagation import inject_headers, restored
from .config import ServerConfig
from .direct_calls import DirectCalls, Plain
from .direct_calls import call_tool as direct_call_tool
from .direct_calls import usable as direct_usable
from .oauth import LoginRequired, OAuthUnavailable, check_login, login_command, oauth_provider
from .oauth_store import OAuthStoreError
from .plain_results import plain_tool_result
from .roots import Roots
from .stdio_transport import stdio_transport

__all__ = [
    "BACKOFF",
    "Connection",
    "ConnectionState",
    "ProgramNotFound",
    "describe_error",
    "error_leaves",
    "http_transport",
    "missing_program",
]

_log = logging.getLogger("tooldeck.mcp")

BACKOFF: tuple[float, ...] = (0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0)
"""Seconds before reconnect attempt N (the last value repeats)."""
RETRY_FLOOR = 1.0
"""An assembly asks a server waiting out its backoff to retry at once at most once per this
many seconds (so fast model steps never hammer a dead server)."""
STABLE_SECONDS = 5.0
"""A connection that lived this long resets the backoff."""
TEARDOWN_SECONDS = 10.0
"""Bound on tearing one connection down (the stdio transport bounds its own kill steps)."""
MAX_PAGES = 1000
_STDERR_TAIL = 1500
_HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)

ConnectionState = str
"""``idle`` (not wanted), ``connecting``, ``connected``, ``reconnecting`` (after a drop,
waiting to retry), ``failed`` (could not connect, waiting to retry), ``closed``."""

ToolsInstaller = Callable[["Connection", list[types.Tool]], None]
StateListener = Callable[["Connection"], None]


def error_leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside ``exc``, exception groups unwrapped, in order."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in error_leaves(inner)]
    return [exc]


class ProgramNotFound(TooldeckError, OSError):
    """A stdio server's command cannot be run: not found on PATH, or no such file."""


def missing_program(config: ServerConfig) -> str | None:
    """Why a stdio server's ``command`` cannot be started (``npx: not found on PATH``), or
    None. Looked up as the spawn will: on the server's own ``PATH`` (its ``env``, else
    the gateway's), a path with a folder in it from the server's ``cwd``."""
    command = config.command
    if command is None:
        return None
    if os.sep in command or (os.altsep is not None and os.altsep in command):
        path = os.path.join(config.cwd or os.getcwd(), command)
        if not os.path.isfile(path):
            return f"{command}: no such file"
        if not os.access(path, os.X_OK):
            return f"{command}: not executable (chmod +x {command})"
        return None
    search = config.env.get("PATH", os.environ.get("PATH", os.defpath))
    if shutil.which(command, path=search) is None:
        return f"{command}: not found on PATH"
    return None


def describe_error(exc: BaseException) -> str:
    """A one-line description of an exception, unwrapping exception groups."""
    leaves = error_leaves(exc)
    for leaf in leaves:  # says itself what to do: the one line to show
        if isinstance(leaf, LoginRequired | OAuthStoreError | OAuthUnavailable | ProgramNotFound):
            return str(leaf)
    parts = []
    for leaf in leaves[:3]:
        text = str(leaf).strip() or leaf.__class__.__name__
        parts.append(f"{type(leaf).__name__}: {text}")
    return "; ".join(parts) or type(exc).__name__


def _connection_error(exc: BaseException) -> bool:
    """Whether an exception means the session is gone (rather than one bad request)."""
    if isinstance(exc, BaseExceptionGroup):
        return any(_connection_error(e) for e in exc.exceptions)
    if isinstance(exc, MCPError):
        return exc.code == CONNECTION_CLOSED or _stale_session(exc)
    return isinstance(
        exc,
        OSError
        | httpx2.TransportError
        | anyio.BrokenResourceError
        | anyio.ClosedResourceError
        | anyio.EndOfStream,
    )


def _stale_session(exc: BaseException) -> bool:
    """HTTP 404 on a known session id: the server forgot the session (e.g. it restarted).

    The SDK spells a bare 404 "Session terminated"; a server that sends a JSON-RPC body
    says so itself (the SDK's own server: -32600 "Session not found").
    """
    if not isinstance(exc, MCPError) or exc.code != types.INVALID_REQUEST:
        return False
    message = exc.error.message.lower()
    return "session" in message and any(
        word in message for word in ("terminated", "not found", "expired", "unknown")
    )


NETWORK_VARIABLES = (
    # certificate bundles (a corporate CA), for Python, curl, Node, pip and uv
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "PIP_CERT",
    "UV_NATIVE_TLS",
    # proxies, both spellings
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
    # package indexes a launcher (uvx, npx, pipx) installs the server from
    "UV_INDEX_URL",
    "UV_DEFAULT_INDEX",
    "UV_EXTRA_INDEX_URL",
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "NPM_CONFIG_REGISTRY",
    "npm_config_registry",
)
"""Passed to a stdio server on top of the MCP SDK's minimal set (HOME, PATH, USER...).

A server started with the minimal set cannot reach the network behind a corporate CA or
proxy (``uvx`` fails with "invalid peer certificate"). Only these variables are added;
everything else (API keys, tokens) reaches a server only through its own ``env``.
"""


def network_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The :data:`NETWORK_VARIABLES` that are set (in ``environ``, default the process's)."""
    source = os.environ if environ is None else environ
    return {name: source[name] for name in NETWORK_VARIABLES if source.get(name)}


@asynccontextmanager
async def _watched(
    inner: contextlib.AbstractAsyncContextManager[Any],
    on_lost: Callable[[], None],
) -> AsyncIterator[Any]:
    """A transport that reports when its read side ends (the server went away); over
    stdio :func:`.stdio_transport.stdio_transport` reports it itself. Each message keeps
    the context it was read in (the SDK's context streams): a server's request that came
    on the HTTP response stream of a call is handled in that call's context
    (:mod:`.asking`)."""
    async with inner as (read, write):
        send, raw = anyio.create_memory_object_stream[Any](0)
        receive = ContextReceiveStream[Any](raw)

        async def pump() -> None:
            try:
                async with send:
                    async for item in read:
                        await send.send((getattr(read, "last_context", None), item))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
                pass
            finally:
                on_lost()

        async with anyio.create_task_group() as tg:
            tg.start_soon(pump)
            try:
                async with receive:
                    yield receive, write
            finally:
                tg.cancel_scope.cancel()


@dataclass(eq=False)
class Connection:
    """The live state of one configured server. Mutated only on the I/O loop."""

    config: ServerConfig
    install: ToolsInstaller
    on_state: StateListener
    client_info: types.Implementation
    config_source: str = "<config>"
    wanted: bool = False
    state: ConnectionState = "idle"
    error: str | None = None
    list_error: str | None = None
    listing: list[types.Tool] = field(default_factory=list)
    protocol_version: str | None = None
    server_name: str | None = None
    server_version: str | None = None
    instructions: str | None = None
    attempts: int = 0
    concluded: int = 0  # connection attempts that reached a verdict (connected or failed)
    last_verdict: float = -math.inf
    last_poke: float = -math.inf
    retry_at: float | None = None
    dirty: bool = False
    listing_now: bool = False
    closing: bool = False
    ever_connected: bool = False
    needs_login: bool = False  # the last attempt failed for want of an (OAuth) login
    roots: Roots | None = None  # the client's roots (roots.py), answered on roots/list
    capabilities: types.ServerCapabilities | None = None  # the connected server's
    # the source's hooks: resource notifications (resources.py), elicitation and sampling
    # requests from the server (elicitation.py, sampling.py); None: not handled here
    on_notification: Callable[[Connection, Any], None] | None = None
    probe: Callable[[Connection, Client], Awaitable[None]] | None = None  # before install
    elicitation: Any = None
    sampling: Any = None
    sampling_capabilities: types.SamplingCapability | None = None
    _client: Client | None = None
    _direct: DirectCalls | None = None  # calls made without the SDK's session (stdio)
    _direct_known: tuple[Client, bool] | None = None  # :meth:`_direct_ok` of a client
    _changed: anyio.Event | None = None
    _wake: anyio.Event | None = None
    _broken: anyio.Event | None = None
    _dirty_event: anyio.Event | None = None
    _roots_event: anyio.Event | None = None
    done: anyio.Event | None = None
    _attempt: anyio.CancelScope | None = None

    # -- events -----------------------------------------------------------------------
    def _set(self, state: ConnectionState, error: str | None = None, *, keep: bool = False) -> None:
        changed = state != self.state or (error != self.error and not keep)
        self.state = state
        if not keep:
            self.error = error
        self._notify()
        if changed:
            self.on_state(self)

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()
        self._changed = anyio.Event()

    async def _wait_change(self) -> None:
        if self._changed is None:
            self._changed = anyio.Event()
        await self._changed.wait()

    def poke(self) -> None:
        """Wake the supervisor (to retry now, or to notice ``wanted`` changed)."""
        if self._wake is not None:
            self._wake.set()

    def mark_broken(self, why: str) -> None:
        """The session is unusable: tear it down and reconnect."""
        if self._broken is not None and not self._broken.is_set():
            if self.state == "connected":
                _log.info("MCP server %r: connection lost (%s)", self.config.name, why)
                self.error = why
            self._broken.set()

    def mark_dirty(self) -> None:
        """The tool list changed on the server: list again before the next assembly."""
        self.dirty = True
        if self._dirty_event is not None:
            self._dirty_event.set()
        self._notify()

    def mark_roots_changed(self) -> None:
        """The client's roots changed: tell the server (``notifications/roots/list_changed``)."""
        if self._roots_event is not None:
            self._roots_event.set()

    # -- lifecycle -------------------------------------------------------------------------
    def start(self, tg: anyio.abc.TaskGroup) -> None:
        self._wake = anyio.Event()
        self._changed = anyio.Event()
        self.done = anyio.Event()
        tg.start_soon(self._supervise)

    def set_wanted(self, wanted: bool) -> None:
        if wanted == self.wanted:
            return
        self.wanted = wanted
        if not wanted:
            self._disconnect()
        self.poke()

    def close(self) -> None:
        self.closing = True
        self._disconnect()
        self.poke()

    def _disconnect(self) -> None:
        if self._broken is not None:
            self._broken.set()
        if self.state == "connecting" and self._attempt is not None:
            self._attempt.cancel()  # do not wait out a slow start

    async def _supervise(self) -> None:
        failures = 0
        while not self.closing:
            if not self.wanted:
                self._set("idle", None)
                await self._sleep(None)
                continue
            self.attempts += 1
            started = anyio.current_time()
            connected = await self._connect_once()
            if not connected:
                self.concluded += 1  # a verdict: this attempt failed
                self.last_verdict = anyio.current_time()
            if self.closing:
                break
            if not self.wanted:
                continue
            lived = anyio.current_time() - started
            if connected and lived >= STABLE_SECONDS:
                failures = 0
            delay = BACKOFF[min(failures if connected else max(failures, 1), len(BACKOFF) - 1)]
            failures += 1
            self.retry_at = anyio.current_time() + delay
            self._set("reconnecting" if connected else "failed", self.error, keep=True)
            await self._sleep(delay)
            self.retry_at = None
        self._set("closed", None)
        if self.done is not None:
            self.done.set()

    async def _sleep(self, seconds: float | None) -> None:
        assert self._wake is not None
        with anyio.move_on_after(math.inf if seconds is None else seconds):
            await self._wake.wait()
        self._wake = anyio.Event()

    def _transport(self, on_lost: Callable[[], None], errlog: TextIO | None) -> Any:
        cfg = self.config
        if cfg.transport == "stdio":
            assert cfg.command is not None and errlog is not None
            missing = missing_program(cfg)
            if missing is not None:  # said plainly, not as a spawn's FileNotFoundError
                raise ProgramNotFound(missing)
            env = {**network_environment(), **cfg.env}  # the server's own env wins
            params = StdioServerParameters(
                command=cfg.command, args=list(cfg.args), env=env or None, cwd=cfg.cwd
            )
            return stdio_transport(params, errlog, on_lost, self._set_direct)
        assert cfg.url is not None
        auth = None if cfg.oauth is None else oauth_provider(cfg, self.login_hint)
        return _watched(http_transport(cfg.url, dict(cfg.headers), auth), on_lost)

    def _set_direct(self, direct: DirectCalls | None) -> None:
        self._direct = direct

    @property
    def login_hint(self) -> str:
        return login_command(self.config_source, self.config.name)

    async def _connect_once(self) -> bool:
        cfg = self.config
        self._set("connecting", self.error, keep=True)  # the last error stays until connected
        broken = self._broken = anyio.Event()
        self._dirty_event = anyio.Event()
        self._roots_event = anyio.Event()
        self.dirty = False

        def lost() -> None:
            if self._broken is broken and not broken.is_set():
                self.mark_broken("the server closed the connection")

        errlog: TextIO | None = None
        if cfg.transport == "stdio":  # the server's stderr, for error messages; closed below
            errlog = cast(TextIO, tempfile.TemporaryFile("w+", errors="replace"))  # noqa: SIM115
        connected = False
        error: str | None = None
        try:
            with anyio.CancelScope(deadline=anyio.current_time() + cfg.startup_timeout) as scope:
                self._attempt = scope
                if cfg.oauth is not None:  # no stored login: say so, without a request
                    await anyio.to_thread.run_sync(check_login, cfg, self.login_hint)
                async with AsyncExitStack() as stack:
                    client = Client(
                        self._transport(lost, errlog),
                        message_handler=self._on_message,
                        client_info=self.client_info,
                        cache=None,
                        mode=cfg.protocol,
                        list_roots_callback=None if self.roots is None else self._list_roots,
                        elicitation_callback=self.elicitation,
                        sampling_callback=self.sampling,
                        sampling_capabilities=self.sampling_capabilities,
                    )
                    await stack.enter_async_context(client)
                    session = client.session
                    self.protocol_version = client.protocol_version
                    info = client.server_info
                    self.server_name = info.name if info else None
                    self.server_version = info.version if info else None
                    self.instructions = client.instructions
                    self.capabilities = session.server_capabilities
                    await self._list(client)
                    scope.deadline = math.inf
                    connected = self.ever_connected = True
                    self.needs_login = False
                    self.concluded += 1  # a verdict: connected
                    self.last_verdict = anyio.current_time()
                    self._client = client
                    self._set("connected", None)
                    _log.info(
                        "MCP server %r connected (%s, %d tools)",
                        cfg.name,
                        self.protocol_version,
                        len(self.listing),
                    )
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(self._relister, client)
                        if self.roots is not None and self.protocol_version not in (
                            MODERN_PROTOCOL_VERSIONS
                        ):  # the 2026 era has no client notifications: servers ask per request
                            tg.start_soon(self._roots_notifier, client)
                        caps = session.server_capabilities
                        if (
                            self.protocol_version in MODERN_PROTOCOL_VERSIONS
                            and caps is not None
                            and caps.tools is not None
                            and caps.tools.list_changed
                        ):
                            tg.start_soon(self._listen, client)
                        await broken.wait()
                        tg.cancel_scope.cancel()
                    self._client = None
                    if not self.closing and self.wanted:
                        self._set("reconnecting", self.error, keep=True)
                    else:  # disconnecting on purpose: its tools are gone from now on
                        self._set("idle", None)
                    scope.deadline = anyio.current_time() + TEARDOWN_SECONDS
            if scope.cancelled_caught and not connected and not self.closing and self.wanted:
                error = f"did not connect and list its tools within {cfg.startup_timeout:g}s"
        except Exception as exc:
            if not self.closing:
                error = describe_error(exc)
                self.needs_login = any(isinstance(e, LoginRequired) for e in error_leaves(exc))
        finally:
            self._client = None
            self._attempt = None
            if errlog is not None:
                tail = _tail(errlog)
                errlog.close()
                if error is not None and tail:
                    error += f" (stderr: {tail})"
        if error is not None and not connected:
            again = error == self.error  # the same failure as the last attempt's: said already
            self.error = error
            verb = "could not reconnect" if self.ever_connected else "failed to start"
            level = logging.DEBUG if again else logging.WARNING
            if self.needs_login:  # the message names the server and the command
                _log.log(level, "%s", error)
            else:
                _log.log(level, "MCP server %r %s: %s", cfg.name, verb, error)
        elif error is not None:
            self.error = self.error or error
        return connected

    # -- listing ------------------------------------------------------------------------------
    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.mark_dirty()
        elif self.on_notification is not None and not isinstance(message, Exception):
            self.on_notification(self, message)
        elif isinstance(message, Exception):
            _log.debug("MCP server %r: transport message %r", self.config.name, message)

    async def _list_roots(self, context: Any) -> types.ListRootsResult:
        assert self.roots is not None
        return self.roots.result()

    async def _roots_notifier(self, client: Client) -> None:
        while True:
            assert self._roots_event is not None
            await self._roots_event.wait()
            self._roots_event = anyio.Event()
            try:
                with warnings.catch_warnings():  # deprecated in the 2026 era only
                    warnings.simplefilter("ignore", MCPDeprecationWarning)
                    await client.send_roots_list_changed()
            except Exception as exc:
                if _connection_error(exc):
                    self.mark_broken(f"sending roots/list_changed failed: {describe_error(exc)}")
                    return
                _log.warning(
                    "MCP server %r: roots/list_changed failed: %s",
                    self.config.name,
                    describe_error(exc),
                )

    async def _listen(self, client: Client) -> None:
        """Keep a 2026-era ``subscriptions/listen`` stream open (list_changed arrives on it)."""
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _event in subscription:
                    self.mark_dirty()
        except Exception as exc:
            _log.debug("MCP server %r: listen stream ended: %s", self.config.name, exc)

    async def _list(self, client: Client) -> None:
        self.dirty = False
        self.listing_now = True
        self._notify()
        try:
            tools: list[types.Tool] = []
            cursor: str | None = None
            seen: set[str] = set()
            with anyio.fail_after(self.config.startup_timeout):
                for _ in range(MAX_PAGES):
                    page = await client.list_tools(cursor=cursor)
                    tools.extend(page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        break
                    if cursor in seen:
                        _log.warning(
                            "MCP server %r repeated the cursor %r; listing stopped",
                            self.config.name,
                            cursor,
                        )
                        break
                    seen.add(cursor)
                if self.probe is not None:  # the source's look at what else it offers
                    await self.probe(self, client)
            self.listing = tools
            self.list_error = None
            self.install(self, tools)
        finally:
            self.listing_now = False
            self._notify()

    async def _relister(self, client: Client) -> None:
        while True:
            assert self._dirty_event is not None
            await self._dirty_event.wait()
            self._dirty_event = anyio.Event()
            try:
                await self._list(client)
            except Exception as exc:
                self.list_error = describe_error(exc)
                if _connection_error(exc):
                    self.mark_broken(f"listing the tools failed: {self.list_error}")
                else:
                    _log.warning(
                        "MCP server %r: listing the tools failed: %s",
                        self.config.name,
                        self.list_error,
                    )

    def usable(self) -> bool:
        """Connected, and the session is not known to be broken."""
        return (
            self.state == "connected"
            and self._client is not None
            and self._broken is not None
            and not self._broken.is_set()
        )

    async def settle(self, *, retry: bool = True) -> None:
        """Wait until the listing is current, or the next connection attempt concluded.

        With ``retry``, a server waiting out its backoff is asked to try now (at most once
        per ``RETRY_FLOOR`` seconds; otherwise it is not waited for).
        """
        if not self.wanted or self.closing:
            return
        # ``concluded`` counts verdicts (connected or failed); wait for the next one.
        target = self.concluded + 1
        poked = False
        while not self.closing and self.wanted:
            if self.usable():
                if not self.dirty and not self.listing_now:
                    return
            elif self.state in ("reconnecting", "failed"):
                now = anyio.current_time()
                if self.concluded >= target:
                    return
                if retry and not poked and now - self.last_poke >= RETRY_FLOOR:
                    self.last_poke = now
                    poked = True
                    self.poke()
                elif not poked and self.retry_at is not None and self.retry_at > now:
                    return  # waiting out its backoff: the turn goes on without it
            elif self.state == "closed":
                return
            await self._wait_change()  # "idle" while wanted: the supervisor is waking up

    # -- calls --------------------------------------------------------------------------------
    def call(
        self,
        tool: str,
        arguments: dict[str, Any],
        on_progress: Callable[[float, float | None, str | None], Any] | None = None,
    ) -> Coroutine[Any, Any, ToolResult]:
        """Call ``tool``; every failure becomes an error result (never raises, never hangs).

        Made in the caller's thread and run on the I/O loop: the caller's trace context
        (its ``execute_tool`` span) is taken here, so the MCP request joins that trace
        (the SDK's ``_meta``, and ``traceparent`` in the HTTP request headers).
        """
        return self._call(tool, arguments, on_progress, current_trace())

    async def _call(
        self,
        tool: str,
        arguments: dict[str, Any],
        on_progress: Callable[[float, float | None, str | None], Any] | None,
        trace_context: Any,
    ) -> ToolResult:
        if trace_context is None:  # no span to carry (telemetry off): nothing to restore
            return await self._call_traced(tool, arguments, on_progress, traced=False)
        with restored(trace_context):
            return await self._call_traced(tool, arguments, on_progress, traced=True)

    async def _call_traced(
        self,
        tool: str,
        arguments: dict[str, Any],
        on_progress: Callable[[float, float | None, str | None], Any] | None,
        *,
        traced: bool,
    ) -> ToolResult:
        """``traced``: the call carries a trace context (the SDK's session carries it)."""
        cfg = self.config
        details: dict[str, Any] = {"server": cfg.name, "tool": tool}
        for attempt in (1, 2):
            client = await self._ready_client()
            if client is None:
                why = self.error or self.state
                return ToolResult.error(
                    f"The MCP server {cfg.name!r} is not connected ({why}); "
                    f"its tool {tool!r} cannot run right now.",
                    details={**details, "reason": "not_connected", "state": self.state},
                )

            try:
                # the connection's loop is asyncio's (or uvloop's): its own timeout, which
                # cancels this task as an anyio scope would, at a fraction of the cost
                async with asyncio.timeout(cfg.timeout):
                    direct = self._direct
                    if direct is not None and not traced and self._direct_ok(client):
                        result = await self._direct_call(
                            client, direct, tool, arguments, on_progress
                        )
                    else:
                        result = await client.call_tool(
                            tool, arguments, progress_callback=_relay(on_progress)
                        )
            except TimeoutError:
                return ToolResult.error(
                    f"{tool} on the MCP server {cfg.name!r} timed out after {cfg.timeout:g}s "
                    "and was cancelled.",
                    details={**details, "reason": "timeout", "timeout": cfg.timeout},
                )
            except Exception as exc:
                text = describe_error(exc)
                if _stale_session(exc) and attempt == 1:
                    # The server never saw this request: reconnect and send it again.
                    self.mark_broken("the HTTP session expired (404)")
                    continue
                if _connection_error(exc):
                    self.mark_broken(f"a call failed: {text}")
                    return ToolResult.error(
                        f"The MCP server {cfg.name!r} went away during {tool} ({text}); it "
                        "will be reconnected. The call may or may not have taken effect.",
                        details={**details, "reason": "connection_lost", "error": text},
                    )
                if isinstance(exc, MCPError):
                    if exc.code == types.INVALID_PARAMS or "nknown tool" in exc.error.message:
                        self.mark_dirty()
                    return ToolResult.error(
                        f"The MCP server {cfg.name!r} rejected {tool}: {exc.error.message} "
                        f"(code {exc.code}).",
                        details={**details, "reason": "server_error", "code": exc.code},
                    )
                _log.warning("MCP call %s/%s failed: %s", cfg.name, tool, text, exc_info=exc)
                return ToolResult.error(
                    f"{tool} on the MCP server {cfg.name!r} failed: {text}",
                    details={**details, "reason": "client_error", "error": text},
                )
            return _to_result(result, cfg.name, tool)
        raise AssertionError("unreachable")  # pragma: no cover

    def _direct_ok(self, client: Client) -> bool:
        """Whether a call (one with no trace to carry in the request's ``_meta``: the
        SDK's) may skip the SDK's session (:mod:`.direct_calls`): an SDK it knows (asked
        once per client)."""
        known = self._direct_known
        if known is not None and known[0] is client:
            return known[1]
        usable = direct_usable(client)
        self._direct_known = (client, usable)
        return usable

    async def _direct_call(
        self,
        client: Client,
        direct: DirectCalls,
        tool: str,
        arguments: dict[str, Any],
        on_progress: Callable[[float, float | None, str | None], Any] | None,
    ) -> types.CallToolResult | ToolResult:
        """``tools/call`` by :mod:`.direct_calls`: what ``client.call_tool`` returns, or
        the result already made of a plain answer (:mod:`.plain_results`)."""
        version = self.protocol_version
        assert version is not None
        got = await direct_call_tool(
            client, direct, version, tool, arguments, on_progress, plain=True
        )
        if isinstance(got, Plain):
            return plain_tool_result(got.texts, got.is_error, got.meta, self.config.name, tool)
        return got

    async def ready_client(self) -> Client | None:
        """The session's client once connected and listed (waiting up to the startup
        timeout), or None when the server is not connected."""
        return await self._ready_client()

    async def _ready_client(self) -> Client | None:
        if not self.wanted or self.closing:
            return None
        if self.usable() and not self.dirty and not self.listing_now:
            return self._client  # settled already: no timer, no wait (every call)
        with anyio.move_on_after(self.config.startup_timeout):
            await self.settle()
        return self._client if self.usable() else None


def _relay(
    on_progress: Callable[[float, float | None, str | None], Any] | None,
) -> ProgressFnT:
    """The SDK's progress callback of a call: ``on_progress``, its failures logged."""

    async def relay(progress: float, total: float | None, message: str | None) -> None:
        if on_progress is not None:
            try:
                on_progress(progress, total, message)
            except Exception:
                _log.exception("progress callback failed")

    return relay


def _to_result(result: types.CallToolResult | ToolResult, server: str, tool: str) -> ToolResult:
    if type(result) is ToolResult:  # made of a plain answer already
        return result
    from .results import call_tool_result_to_tool_result

    return call_tool_result_to_tool_result(result, server=server, tool=tool)


def _tail(errlog: IO[str]) -> str:
    try:
        errlog.seek(0, 2)
        size = errlog.tell()
        errlog.seek(max(0, size - _STDERR_TAIL * 4))
        text = errlog.read()
    except (OSError, ValueError):
        return ""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    tail = " | ".join(lines[-6:])
    return tail[-_STDERR_TAIL:]


async def _trace_headers(request: httpx2.Request) -> None:
    """W3C trace context of the request's sender (a call's span) in its HTTP headers."""
    inject_headers(request.headers)


@asynccontextmanager
async def http_transport(
    url: str, headers: dict[str, str], auth: httpx2.Auth | None = None
) -> AsyncIterator[Any]:
    """The streamable-HTTP transport to ``url`` (``auth``: an OAuth provider, or none)."""
    async with (
        httpx2.AsyncClient(
            headers=headers,
            timeout=_HTTP_TIMEOUT,
            event_hooks={"request": [_trace_headers]},
            auth=auth,
        ) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams
