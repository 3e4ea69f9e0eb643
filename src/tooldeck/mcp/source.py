"""``McpSource``: the tools of configured MCP servers, as a tool source.

Usage:

    source = McpSource.from_file("mcp.json")
    async with source:                       # connects the autostart servers, lists tools
        session = Session(model, [native, source])
        await session.run("...", turn=turn_context)

``source.tools_for(ctx)`` gives the current tools of every server active for ``ctx`` (autostart
servers, plus servers activated for the whole source or for ``ctx.session_id``). It is
called at assembly time, before every model step, so a tool list changed on the server
(``notifications/tools/list_changed``) or a server reconnected after a crash shows up
in the next step. A server that is down is reported (status, event, log) and simply
contributes no tools; the turn goes on.

All MCP traffic runs on one background thread with its own event loop (the
"MCP I/O thread"). That keeps every SDK session in the task that opened it, lets the
synchronous ``tools_for`` wait (bounded by ``assembly_wait``) for a pending re-list or
reconnect, and works the same whatever loop (or none) the caller runs.

``in_loop=True`` runs the connections on the caller's own event loop instead (the one
:meth:`McpSource.start` is called on): a call then goes to its server without a hop to
another thread and back (the gateway, which only ever calls from that loop, uses it).
The synchronous ``tools_for`` cannot wait there for a pending re-list (it would block the
loop the re-list runs on): it answers what is listed; :meth:`McpSource.refresh` waits.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import fnmatch
import functools
import itertools
import logging
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, TypeVar

import anyio
import mcp_types as types

from ..approvals import ApprovalCallback, Approver
from ..assembly import Source, TurnContext
from ..context import ToolContext
from ..errors import SchemaError, ToolDefinitionError
from ..events import Event, EventBus
from ..model import Model
from ..policy.ask import as_approver
from ..result import ToolResult
from ..tools import Tier, Tool
from .asking import InFlight, answer_routed, request_name
from .config import McpConfig, ServerConfig
from .connection import Connection, ConnectionState
from .elicitation import answer_elicitation, declined
from .naming import Collision, map_names, namespace_name
from .prompts import (
    McpPrompt,
    PromptError,
    PromptResult,
    check_arguments,
    fetch_prompt,
    fetch_prompt_result,
)
from .prompts import list_server_prompts as _list_server_prompts
from .resource_tools import LIST, LIST_SCHEMA, READ, READ_SCHEMA, descriptions, executors
from .resources import (
    McpResource,
    McpResourceTemplate,
    ResourceError,
    ResourceResult,
    fetch_resource,
    list_server_resources,
    list_server_templates,
    offers_resources,
    subscribe,
)
from .roots import Roots
from .sampling import Sampling, refused, serve_sampling

_log = logging.getLogger("tooldeck.mcp")
_T = TypeVar("_T")

DEFAULT_ASSEMBLY_WAIT = 10.0
SHUTDOWN_SECONDS = 20.0


# -- payloads, events and status -----------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class McpProgress:
    """A progress notification of a running MCP call (sent through ``ctx.emit``)."""

    type: ClassVar[str] = "mcp_progress"
    server: str
    tool: str
    progress: float
    total: float | None = None
    message: str | None = None


@dataclass(frozen=True, slots=True)
class McpServerStatusChanged(Event):
    """A server connected, dropped, failed to start, or was closed."""

    type: ClassVar[str] = "mcp_server_status"
    server: str
    state: str
    error: str | None = None
    tools: int = 0


@dataclass(frozen=True, slots=True)
class McpResourceUpdated(Event):
    """A resource the source subscribed to changed on its server (read it again)."""

    type: ClassVar[str] = "mcp_resource_updated"
    server: str
    uri: str


@dataclass(frozen=True, slots=True)
class McpResourceListChanged(Event):
    """A server's list of resources changed (``notifications/resources/list_changed``)."""

    type: ClassVar[str] = "mcp_resource_list_changed"
    server: str


@dataclass(frozen=True, slots=True)
class McpPromptListChanged(Event):
    """A server's list of prompts changed (``notifications/prompts/list_changed``)."""

    type: ClassVar[str] = "mcp_prompt_list_changed"
    server: str


@dataclass(frozen=True, slots=True)
class ServerStatus:
    """A snapshot of one configured server."""

    name: str
    transport: str
    target: str
    state: ConnectionState
    error: str | None
    active: bool
    autostart: bool
    tools: tuple[str, ...]
    protocol_version: str | None
    server_name: str | None
    server_version: str | None
    attempts: int
    collisions: tuple[str, ...]
    skipped: tuple[str, ...]
    list_error: str | None = None
    needs_login: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "transport": self.transport,
            "target": self.target,
            "state": self.state,
            "error": self.error,
            "active": self.active,
            "autostart": self.autostart,
            "tools": list(self.tools),
            "protocol_version": self.protocol_version,
            "server": (
                {"name": self.server_name, "version": self.server_version}
                if self.server_name
                else None
            ),
            "attempts": self.attempts,
            "collisions": list(self.collisions),
            "skipped": list(self.skipped),
            "list_error": self.list_error,
            "needs_login": self.needs_login,
        }


# -- tools ---------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class McpToolInfo:
    """Where an MCP tool comes from, and what its server said about it."""

    server: str
    tool: str
    exposed: str
    title: str | None
    input_schema: Mapping[str, Any]
    output_schema: Mapping[str, Any] | None
    annotations: Mapping[str, Any]
    meta: Mapping[str, Any] | None


class McpTool(Tool):
    """A :class:`Tool` backed by a tool of an MCP server; ``mcp`` says which."""

    mcp: McpToolInfo


def tier_for(
    server: ServerConfig, annotations: Mapping[str, Any] | None
) -> tuple[Tier, bool, bool]:
    """``(tier, read_only, destructive)`` of a server tool from its untrusted annotations.

    The configured ``tier`` (default ``WRITE``) is where every tool starts. Annotations
    can raise it, never lower it, with one exception the user opts into:

    - ``readOnlyHint: true`` lowers ``WRITE`` to ``STANDARD`` only on a server configured
      with ``trust_annotations: true``;
    - ``destructiveHint: true`` (on a tool that is not read-only) raises the tier to
      ``DANGEROUS`` only on a server configured with ``destructive_is_dangerous: true``.

    ``read_only`` and ``destructive`` echo the hints for display and policies; the tier
    is the decision.
    """
    hints = annotations or {}
    read_only = hints.get("readOnlyHint") is True
    destructive = not read_only and hints.get("destructiveHint") is True
    tier: Tier = server.tier
    if read_only and server.trust_annotations and tier == "WRITE":
        tier = "STANDARD"
    if destructive and server.destructive_is_dangerous:
        tier = "DANGEROUS"
    return tier, read_only, destructive


def _activity(text: str, params: Any) -> str:
    return text


def _normalised_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(schema)
    if "type" not in out:  # some servers omit the root type of an arguments object
        out["type"] = "object"
    return out


# -- the I/O thread ------------------------------------------------------------------------------
class _IoThread:
    """A daemon thread running one asyncio loop for all MCP connections."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            self.loop = loop
            ready.set()
            try:
                loop.run_forever()
            finally:
                try:
                    loop.run_until_complete(loop.shutdown_asyncgens())
                finally:
                    loop.close()

        self.thread = threading.Thread(target=run, name="tooldeck-mcp", daemon=True)
        self.thread.start()
        ready.wait()

    def submit(self, coro: Coroutine[Any, Any, _T]) -> concurrent.futures.Future[_T]:
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call_soon(self, fn: Callable[[], None]) -> None:
        assert self.loop is not None
        self.loop.call_soon_threadsafe(fn)

    @property
    def current(self) -> bool:
        return self.thread is threading.current_thread()

    def stop(self) -> None:
        if self.loop is not None and self.thread is not None:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=SHUTDOWN_SECONDS)


class _CallerLoop(_IoThread):
    """The caller's running loop as the MCP I/O loop (``in_loop=True``): nothing to start
    or stop; ``current`` in that loop's thread."""

    def start(self) -> None:
        try:
            self.loop = asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError(
                "McpSource(in_loop=True) starts in the event loop that will call its tools: "
                "call start() (or enter it) from a coroutine"
            ) from None
        self.thread = threading.current_thread()

    @property
    def alive(self) -> bool:
        return self.loop is not None and not self.loop.is_closed()

    def stop(self) -> None:
        pass


# -- the source ----------------------------------------------------------------------------------
@dataclass(eq=False)
class _Server:
    config: ServerConfig
    conn: Connection
    namespace: str
    tools: tuple[McpTool, ...] = ()
    collisions: tuple[Collision, ...] = ()
    skipped: tuple[str, ...] = ()
    # (connection attempt, resources, templates): the listing of one connection, dropped
    # when the server says its list changed
    resources: tuple[tuple[int, int], list[McpResource], list[McpResourceTemplate]] | None = None
    generation: int = 0  # resources/list_changed notifications seen
    inflight: InFlight = field(default_factory=InFlight)  # the calls running (asking.py)
    offers_resources: bool = False  # lists a resource or template (its resource tools)
    subscribed: set[str] = field(default_factory=set)  # URIs, subscribed again on reconnect


class McpSource(Source):
    """The tools of the servers in an MCP config, merged into each turn (a tool source).

    - ``events``: an :class:`EventBus` that receives :class:`McpServerStatusChanged`;
    - ``assembly_wait``: seconds an assembly may wait for a pending re-list or
      reconnect of the active servers (it blocks the caller: ``tools_for`` is
      synchronous);
    - ``client_name``: how tooldeck introduces itself to servers;
    - ``prefixed``: tools are named ``mcp__<server>__<tool>`` (the default), or, with
      ``False``, ``<server>__<tool>``: the names the gateway serves them under
      (:mod:`.naming`), used everywhere the source names a tool (``lookup``, status,
      collisions);
    - ``in_loop``: the connections run on the event loop :meth:`start` is called on,
      not on a thread of their own (see the module docstring);
    - ``roots``: directories every server is told as the client's MCP roots, after the
      home of the latest turn (:mod:`.roots`);
    - ``elicitation``: declare the elicitation capability and answer a server's questions
      with the approver of the session whose call is running (:mod:`.elicitation`); by
      default with the library's names, not in the gateway;
    - ``approver``: who answers a server's questions outside any session's call (an
      async approver or a function of one request, as ``Protection`` takes); none:
      they are declined;
    - ``sampling``: serve servers' ``sampling/createMessage`` with this model (a
      :class:`~tooldeck.mcp.sampling.Sampling` sets the per-server token budget), when
      the policy lets the server sample (:mod:`.sampling`); none: not declared;
    - ``resource_tools``: give each server that lists resources or templates its two
      read-only, deferred tools (:mod:`.resource_tools`); by default with the library's names
      (``prefixed=True``), not in the gateway, which serves resources as resources.

    Use it as an async (or plain) context manager so every server process is stopped
    when you are done; :meth:`close` does the same.
    """

    label = "mcp"

    def __init__(
        self,
        config: McpConfig | Mapping[str, Any],
        *,
        events: EventBus | None = None,
        assembly_wait: float = DEFAULT_ASSEMBLY_WAIT,
        client_name: str = "tooldeck",
        prefixed: bool = True,
        in_loop: bool = False,
        roots: Iterable[str | Path] = (),
        resource_tools: bool | None = None,
        elicitation: bool | None = None,
        approver: Approver | ApprovalCallback | None = None,
        sampling: Sampling | Model | None = None,
    ) -> None:
        from .. import __version__

        self.resource_tools = prefixed if resource_tools is None else resource_tools
        self.elicitation = prefixed if elicitation is None else elicitation
        self.approver = as_approver(approver)
        self.sampling = sampling if isinstance(sampling, Sampling | None) else Sampling(sampling)

        self.config = config if isinstance(config, McpConfig) else McpConfig.from_dict(config)
        self.server_prefix = prefixed  # mcp__ before <server>__<tool>
        self.events = events
        self.assembly_wait = assembly_wait
        self._client_info = types.Implementation(name=client_name, version=__version__)
        self._io = _CallerLoop() if in_loop else _IoThread()
        self._lock = threading.Lock()
        self._started = False
        self._closed = False
        self._caller_loop: asyncio.AbstractEventLoop | None = None
        self._activations: dict[str, set[str | None]] = {}
        self._servers: dict[str, _Server] = {}
        self._epochs = itertools.count(1)
        self.listing_epoch = next(self._epochs)
        """Changes (after the change) whenever what :meth:`tools` lists may have: a
        server's state or listing, an activation. Read it before the tools."""
        self._roots = Roots(roots)
        for cfg in self.config.servers:
            conn = Connection(
                config=cfg,
                install=self._install,
                on_state=self._on_state,
                client_info=self._client_info,
                config_source=self.config.source,
                wanted=cfg.autostart,
                roots=self._roots,
                on_notification=self._on_notification,
                probe=self._probe if self.resource_tools else None,
            )
            if self.elicitation:
                conn.elicitation = self._elicitation_handler(cfg.name)
            if self.sampling is not None:
                conn.sampling = self._sampling_handler(cfg.name, self.sampling)
            # McpConfig refused names that could share a tool name (naming.py)
            self._servers[cfg.name] = _Server(cfg, conn, namespace_name(cfg.name))
        self._reverse: dict[str, tuple[str, str]] = {}
        self._tasks: set[asyncio.Future[None]] = set()
        self._stop: anyio.Event | None = None
        self._runner: concurrent.futures.Future[None] | None = None

    @classmethod
    def from_file(cls, path: str | Path, **options: Any) -> McpSource:
        """A source for the servers of a config file (see :mod:`tooldeck.mcp.config`)."""
        return cls(McpConfig.load(path), **options)

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the I/O thread and begin connecting the autostart servers (non-blocking)."""
        with self._lock:
            if self._closed:
                raise RuntimeError("this McpSource is closed")
            if self._started:
                return
            self._io.start()  # in_loop: raises outside a running loop, nothing started
            self._started = True
            try:
                self._caller_loop = asyncio.get_running_loop()
            except RuntimeError:
                self._caller_loop = None
            ready: concurrent.futures.Future[None] = concurrent.futures.Future()
            self._runner = self._io.submit(self._run(ready))
            if isinstance(self._io, _CallerLoop):
                self._stop = anyio.Event()  # this loop's: a close before _run starts counts
            else:
                ready.result()
            atexit.register(self.close)

    async def _run(self, ready: concurrent.futures.Future[None]) -> None:
        if self._stop is None:
            self._stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            for server in self._servers.values():
                server.conn.start(tg)
            ready.set_result(None)
            await self._stop.wait()
            for server in self._servers.values():
                server.conn.close()
            with anyio.move_on_after(SHUTDOWN_SECONDS) as scope:
                for server in self._servers.values():
                    if server.conn.done is not None:
                        await server.conn.done.wait()
            if scope.cancelled_caught:
                _log.error("MCP servers did not close within %ss; cancelling", SHUTDOWN_SECONDS)
                tg.cancel_scope.cancel()

    def _request_stop(self) -> None:
        if self._stop is not None:
            self._stop.set()

    def close(self) -> None:
        """Disconnect every server and stop every server process (blocking, idempotent)."""
        gone = isinstance(self._io, _CallerLoop) and self._started and not self._io.alive
        if self._io.current and not gone and not self._closed:  # it would wait for itself
            raise RuntimeError(
                "McpSource.close() cannot run on the MCP I/O loop's thread; await aclose()"
            )
        with self._lock:
            if self._closed:
                return
            self._closed = True
            started = self._started
        atexit.unregister(self.close)
        if not started or gone:  # a closed loop: its tasks, and the server processes, ended
            return
        self._io.call_soon(self._request_stop)
        if self._runner is not None:
            try:
                self._runner.result(timeout=SHUTDOWN_SECONDS + 5)
            except Exception:
                _log.exception("closing the MCP source failed")
        self._io.stop()

    async def aclose(self) -> None:
        """:meth:`close` without blocking the caller's event loop."""
        await asyncio.to_thread(self.close)

    async def __aenter__(self) -> McpSource:
        self.start()
        await self.refresh()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __enter__(self) -> McpSource:
        self.start()
        self._wait(self._settle(self._active_names(None)), self._startup_bound())
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- activation (MCP-backed skills) -----------------------------------------------------------
    def _server(self, name: str) -> _Server:
        server = self._servers.get(name)
        if server is None:
            known = ", ".join(self._servers) or "(none)"
            raise KeyError(f"no MCP server {name!r} is configured; configured: {known}")
        return server

    def _update_wanted(self, name: str) -> None:
        server = self._servers[name]
        with self._lock:
            wanted = server.config.autostart or bool(self._activations.get(name))
        if self._started and not self._closed:
            self._io.call_soon(lambda: server.conn.set_wanted(wanted))
        else:
            server.conn.wanted = wanted

    async def activate(
        self, name: str, *, session_id: str | None = None, wait: bool = True
    ) -> ServerStatus:
        """Make server ``name`` available: connect and list it (for one session, or all).

        This is the hook for MCP-backed skills: when ``use_skill`` activates a skill that
        declares a server, it calls ``await source.activate(server, session_id=...)``; the
        server's tools are in the next assembly of that session's turns. With ``wait`` the
        call returns once the server is connected and listed (or failed to start).
        """
        self._server(name)
        with self._lock:
            self._activations.setdefault(name, set()).add(session_id)
        self.listing_epoch = next(self._epochs)
        self.start()
        self._update_wanted(name)
        if wait:
            await self._await(self._settle([name]), self._startup_bound([name]))
        return self.server_status(name)

    def activation_hook(
        self, *, session_id: str | None = None
    ) -> Callable[[Any], Awaitable[ServerStatus | None]]:
        """An ``on_activate`` hook for skills: activates the skill's ``mcp_server``.

        ``SkillCatalog(..., on_activate=source.activation_hook())`` (``tooldeck.agents.skills``)
        connects the server a skill declares when ``use_skill`` loads it; the hook takes
        any object with an ``mcp_server`` attribute, or a server name. A server that is
        not configured is logged and ignored (the skill's instructions still load).
        """

        async def activate(skill: Any) -> ServerStatus | None:
            name = skill if isinstance(skill, str) else getattr(skill, "mcp_server", None)
            if not name:
                return None
            if name not in self._servers:
                _log.warning("a skill needs the MCP server %r, which is not configured", name)
                return None
            return await self.activate(name, session_id=session_id)

        return activate

    async def deactivate(self, name: str, *, session_id: str | None = None) -> None:
        """Undo :meth:`activate`; a server no longer wanted by anyone is disconnected."""
        self._server(name)
        with self._lock:
            holders = self._activations.get(name, set())
            holders.discard(session_id)
            if not holders:
                self._activations.pop(name, None)
        self.listing_epoch = next(self._epochs)
        self._update_wanted(name)

    def _active_for(self, name: str, session_id: str | None) -> bool:
        server = self._servers[name]
        if server.config.autostart:
            return True
        with self._lock:
            holders = self._activations.get(name, set())
            return None in holders or (session_id is not None and session_id in holders)

    def _active_names(self, session_id: str | None) -> list[str]:
        return [n for n in self._servers if self._active_for(n, session_id)]

    def starting(self) -> list[str]:
        """The active servers whose first connection attempt has not concluded yet
        (connected and listed, or failed): what :meth:`refresh` of them would wait for."""
        if self._closed or not self._started:
            return []
        return [n for n in self._active_names(None) if self._servers[n].conn.concluded == 0]

    # -- assembly ---------------------------------------------------------------------------------
    def tools_for(self, ctx: TurnContext, /) -> list[Tool]:
        """The current tools of every server active for ``ctx`` (waiting up to
        ``assembly_wait`` for a pending re-list or reconnect)."""
        names = self._active_names(ctx.session_id)
        if not self._closed:
            self.start()
            self.set_home(ctx.home)
            if not self._io.current:
                self._wait(self._settle(names), self.assembly_wait)
        return self._collect(names)

    def tools(self, session_id: str | None = None) -> list[Tool]:
        """The tools listed right now for ``session_id`` (no waiting, no reconnecting)."""
        return self._collect(self._active_names(session_id))

    def _collect(self, names: Iterable[str]) -> list[Tool]:
        out: list[Tool] = []
        for name in names:
            server = self._servers[name]
            if server.conn.state == "connected":
                out.extend(server.tools)  # names are unique across servers (naming.py)
        return out

    async def refresh(self, names: Iterable[str] | None = None) -> None:
        """Bring the listing of ``names`` (default: the active servers) up to date.

        Reconnects servers that dropped. Does not block the caller's loop; call it
        before a turn to keep the synchronous assembly from having to wait.
        """
        self.start()
        chosen = list(names) if names is not None else self._active_names(None)
        await self._await(self._settle(chosen), self._startup_bound(chosen))

    async def _settle(self, names: Iterable[str]) -> None:
        conns = [self._servers[n].conn for n in names]
        async with anyio.create_task_group() as tg:
            for conn in conns:
                tg.start_soon(self._settle_one, conn)

    @staticmethod
    async def _settle_one(conn: Connection) -> None:
        with anyio.move_on_after(conn.config.startup_timeout + 1):
            await conn.settle()

    def _startup_bound(self, names: Iterable[str] | None = None) -> float:
        chosen = list(names) if names is not None else list(self._servers)
        return max((self._servers[n].config.startup_timeout for n in chosen), default=0) + 2

    def _wait(self, coro: Coroutine[Any, Any, None], timeout: float) -> None:
        future = self._io.submit(coro)
        try:
            future.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
        except Exception:
            _log.exception("waiting for MCP servers failed")

    async def _await(self, coro: Coroutine[Any, Any, None], bound: float) -> None:
        if self._io.current:  # in_loop: already where the connections run
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(coro, bound)
            return
        future = asyncio.wrap_future(self._io.submit(coro))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(future, bound)

    # -- listing -> tools -------------------------------------------------------------------------
    def _install(self, conn: Connection, listing: list[types.Tool]) -> None:
        """Turn a fresh listing into tools (runs on the I/O thread)."""
        server = self._servers[conn.config.name]
        cfg = server.config
        kept: list[types.Tool] = []
        skipped: list[str] = []
        seen: set[str] = set()
        for t in listing:
            if t.name in seen:
                skipped.append(f"{t.name}: listed twice; the first entry is used")
                continue
            seen.add(t.name)
            if cfg.include_tools and not any(
                fnmatch.fnmatchcase(t.name, p) for p in cfg.include_tools
            ):
                continue
            if any(fnmatch.fnmatchcase(t.name, p) for p in cfg.exclude_tools):
                continue
            kept.append(t)
        extra = self._resource_names(conn, seen, skipped)
        raw = [t.name for t in kept] + extra
        names, collisions = map_names(cfg.name, raw, prefixed=self.server_prefix)
        if tuple(collisions) != server.collisions:
            for collision in collisions:
                _log.warning("MCP tool names collide: %s", collision.describe())
        description = (
            cfg.description
            or conn.instructions
            or f"Tools of the MCP server {cfg.name}"
            + (
                f" ({conn.server_name})"
                if conn.server_name and conn.server_name != cfg.name
                else ""
            )
        )
        tools: list[McpTool] = []
        for t in kept:
            if t.name not in names:
                continue  # no free name (said by its collision)
            try:
                tools.append(self._make_tool(server, t, names[t.name], description))
            except ToolDefinitionError as exc:  # a SchemaError too: compiled right here
                reason = (
                    "unusable input schema: " + "; ".join(exc.problems)
                    if isinstance(exc, SchemaError)
                    else str(exc).splitlines()[0]
                )
                skipped.append(f"{t.name}: {reason}")
                _log.warning("MCP server %r: tool %r skipped: %s", cfg.name, t.name, reason)
        reverse = {tool.name: (cfg.name, tool.mcp.tool) for tool in tools}
        tools.extend(self._resource_tools(server, {n: names[n] for n in extra if n in names}))
        server.tools = tuple(tools)
        self.listing_epoch = next(self._epochs)
        server.collisions = tuple(collisions)
        server.skipped = tuple(skipped)
        server.resources = None  # a new connection, or a new listing: list them again
        with self._lock:
            self._reverse = {k: v for k, v in self._reverse.items() if v[0] != cfg.name} | reverse

    async def _probe(self, conn: Connection, client: Any) -> None:
        """Whether the server has resources to offer tools for (before its tools install)."""
        self._servers[conn.config.name].offers_resources = await offers_resources(client)

    def _resource_names(self, conn: Connection, listed: set[str], skipped: list[str]) -> list[str]:
        """The raw names of the resource tools a server gets (resource_tools.py): none
        without resources, or when filtered out; a server tool of the same name wins."""
        if not self.resource_tools or not self._servers[conn.config.name].offers_resources:
            return []
        cfg = conn.config
        out: list[str] = []
        for name in (LIST, READ):
            if name in listed:
                skipped.append(f"{name} (resources): the server has a tool of that name")
                continue
            included = any(fnmatch.fnmatchcase(name, p) for p in cfg.include_tools)
            excluded = any(fnmatch.fnmatchcase(name, p) for p in cfg.exclude_tools)
            if (included or not cfg.include_tools) and not excluded:
                out.append(name)
        return out

    def _resource_tools(self, server: _Server, names: Mapping[str, str]) -> list[McpTool]:
        """The list and read tools of one server (resource_tools.py), as named."""
        cfg, conn = server.config, server.conn

        async def lister() -> tuple[list[McpResource], list[McpResourceTemplate]]:
            return await self._on_io(self._listed_resources(server))

        async def reader(uri: str) -> ResourceResult:
            return await self._on_io(fetch_resource(conn, uri))

        run_list, run_read = executors(cfg.name, lister, reader)
        about_list, about_read = descriptions(cfg.name)
        specs = {
            LIST: (LIST_SCHEMA, run_list, about_list),
            READ: (READ_SCHEMA, run_read, about_read),
        }
        tools: list[McpTool] = []
        for raw, exposed in names.items():
            schema, execute, about = specs[raw]
            tool = McpTool.from_schema(
                name=exposed,
                description=about,
                json_schema=schema,
                execute=execute,
                namespace=server.namespace,
                namespace_description=f"Resources and tools of the MCP server {cfg.name}",
                defer_loading=True,
                read_only=True,
                execution_mode="parallel",
                tier="STANDARD",
                describe_activity=functools.partial(_activity, f"{cfg.name}: {raw}"),
            )
            tool.mcp = McpToolInfo(
                server=cfg.name,
                tool=raw,
                exposed=exposed,
                title=None,
                input_schema=schema,
                output_schema=None,
                annotations={"readOnlyHint": True},
                meta=None,
            )
            tools.append(tool)
        return tools

    def _make_tool(
        self, server: _Server, listed: types.Tool, exposed: str, namespace_description: str
    ) -> McpTool:
        cfg = server.config
        dumped = listed.model_dump(mode="json", by_alias=True, exclude_none=True)
        annotations: dict[str, Any] = dumped.get("annotations") or {}
        tier, read_only, destructive = tier_for(cfg, annotations)
        raw_name = listed.name
        description = (
            listed.description
            or listed.title
            or annotations.get("title")
            or f"The tool {raw_name} of the MCP server {cfg.name}."
        )
        conn = server.conn

        async def execute(params: dict[str, Any], ctx: ToolContext) -> ToolResult:
            return await self._call_from_caller(conn, raw_name, params, ctx)

        def describe(params: Any) -> str:
            return f"{cfg.name}: {listed.title or annotations.get('title') or raw_name}"

        tool = McpTool.from_schema(
            name=exposed,
            description=description,
            json_schema=_normalised_schema(dumped.get("inputSchema") or {}),
            execute=execute,
            namespace=server.namespace,
            namespace_description=namespace_description,
            defer_loading=cfg.defer_loading,
            read_only=read_only,
            destructive=destructive,
            execution_mode="parallel" if read_only and cfg.trust_annotations else "sequential",
            tier=tier,
            describe_activity=describe,
        )
        tool.mcp = McpToolInfo(
            server=cfg.name,
            tool=raw_name,
            exposed=exposed,
            title=listed.title or annotations.get("title"),
            input_schema=dumped.get("inputSchema") or {},
            output_schema=dumped.get("outputSchema"),
            annotations=annotations,
            meta=dumped.get("_meta"),
        )
        return tool

    # -- calls ------------------------------------------------------------------------------------
    async def _call_from_caller(
        self, conn: Connection, tool: str, arguments: dict[str, Any], ctx: ToolContext
    ) -> ToolResult:
        if self._closed or not self._started:
            return ToolResult.error(
                f"The MCP source is closed; {tool} on {conn.config.name!r} cannot run."
            )
        caller = asyncio.get_running_loop()
        server = conn.config.name
        here = self._io.current  # in_loop: the call runs in this task, no hop

        def progress(done: float, total: float | None, message: str | None) -> None:
            payload = McpProgress(server, tool, done, total, message)
            if here:
                ctx.emit(payload)
                return
            with contextlib.suppress(RuntimeError):  # the caller's loop is gone
                caller.call_soon_threadsafe(ctx.emit, payload)

        # the session that answers the server's requests (asking.py); the I/O loop's task
        # inherits the block's context, so a request linked to this call finds it
        with self._servers[server].inflight.running(ctx, caller):
            if here:
                return await conn.call(tool, arguments, progress)
            future = self._io.submit(conn.call(tool, arguments, progress))
            return await asyncio.wrap_future(future)

    async def call(
        self,
        server: str,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        on_progress: Callable[[McpProgress], None] | None = None,
    ) -> ToolResult:
        """Call ``tool`` of ``server`` directly (no local validation; the CLI uses it)."""
        conn = self._server(server).conn
        self.start()
        ctx = ToolContext(tool_name=tool, sink=on_progress or (lambda _e: None))
        return await self._call_from_caller(conn, tool, dict(arguments or {}), ctx)

    # -- roots and prompts -------------------------------------------------------------------------
    @property
    def roots(self) -> tuple[Path, ...]:
        """The client's roots right now: the latest turn's home, then the configured ones."""
        return self._roots.paths()

    def set_home(self, home: str | Path | None) -> None:
        """Make ``home`` the first root (``tools_for`` does, with the turn's home); when the
        roots change, every connected server is sent ``notifications/roots/list_changed``."""
        if self._roots.set_home(home):
            self._announce_roots()

    def set_client_roots(self, roots: Iterable[Path] | None) -> None:
        """The roots a gateway's clients gave, in place of the home and the configured
        ones (``None``: back to those); announced as :meth:`set_home` does."""
        if self._roots.set_client(roots):
            self._announce_roots()

    def _announce_roots(self) -> None:
        if self._started and not self._closed:
            conns = [server.conn for server in self._servers.values()]

            def tell() -> None:
                for conn in conns:
                    conn.mark_roots_changed()

            self._io.call_soon(tell)

    async def _on_io(self, coro: Coroutine[Any, Any, _T]) -> _T:
        self.start()
        if self._io.current:  # in_loop: already where the connections run
            return await coro
        return await asyncio.wrap_future(self._io.submit(coro))

    async def list_prompts(self, server: str | None = None) -> list[McpPrompt]:
        """The prompts of ``server``, or of every active server (a server that is not
        connected is skipped); :class:`~tooldeck.mcp.prompts.PromptError` for one server
        that is not connected."""
        if server is not None:
            return await self._on_io(_list_server_prompts(self._server(server).conn))
        out: list[McpPrompt] = []
        for name in self._active_names(None):
            try:
                out.extend(await self._on_io(_list_server_prompts(self._servers[name].conn)))
            except PromptError as exc:
                _log.warning("%s", exc)
        return out

    async def get_prompt(
        self, server: str, name: str, arguments: Mapping[str, str] | None = None
    ) -> PromptResult:
        """The prompt ``name`` of ``server`` rendered with ``arguments`` (checked against the
        prompt's declared ones first); :class:`~tooldeck.mcp.prompts.PromptError` (one
        line) for an unknown prompt, a missing or unknown argument, or a refusal."""
        conn = self._server(server).conn
        listed = await self._on_io(_list_server_prompts(conn))
        found = next((p for p in listed if p.name == name), None)
        if found is None:
            names = ", ".join(p.name for p in listed) or "none"
            raise PromptError(f"no prompt {name!r} on {server!r}; its prompts: {names}")
        checked = check_arguments(found, arguments or {})
        return await self._on_io(fetch_prompt(conn, found, checked))

    async def get_prompt_result(
        self, server: str, name: str, arguments: Mapping[str, str] | None = None
    ) -> types.GetPromptResult:
        """:meth:`get_prompt`, answered as the server sent it (the gateway passes it on)."""
        conn = self._server(server).conn
        listed = await self._on_io(_list_server_prompts(conn))
        found = next((p for p in listed if p.name == name), None)
        if found is None:
            raise PromptError(f"no prompt {name!r} on {server!r}")
        checked = check_arguments(found, arguments or {})
        return await self._on_io(fetch_prompt_result(conn, found, checked))

    # -- a server's requests ---------------------------------------------------------------------
    def _elicitation_handler(self, name: str) -> Callable[..., Awaitable[types.ElicitResult]]:
        async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            server = self._servers[name]
            called = request_name(name, "elicitation/create", prefixed=self.server_prefix)
            within = server.config.timeout
            return await answer_routed(
                server.inflight,
                self.approver,
                self._caller_loop,
                called,
                lambda asker: answer_elicitation(name, called, params, asker, within),
                lambda why: declined(name, why),
            )

        return elicit

    def _sampling_handler(
        self, name: str, sampling: Sampling
    ) -> Callable[..., Awaitable[types.CreateMessageResult | types.ErrorData]]:
        async def sample(
            context: Any, params: types.CreateMessageRequestParams
        ) -> types.CreateMessageResult | types.ErrorData:
            called = request_name(name, "sampling/createMessage", prefixed=self.server_prefix)
            return await answer_routed(
                self._servers[name].inflight,
                self.approver,
                self._caller_loop,
                called,
                lambda asker: serve_sampling(name, called, params, asker, sampling),
                lambda why: refused(name, why),
            )

        return sample

    # -- resources --------------------------------------------------------------------------------
    async def _listed_resources(
        self, server: _Server
    ) -> tuple[list[McpResource], list[McpResourceTemplate]]:
        """A server's resources and templates, listed once per connection and change
        (runs on the I/O loop)."""
        conn = server.conn
        cached = server.resources
        if cached is not None and cached[0] == (conn.attempts, server.generation):
            return list(cached[1]), list(cached[2])
        key = (conn.attempts, server.generation)
        resources = await list_server_resources(conn)
        templates = await list_server_templates(conn)
        if key == (conn.attempts, server.generation):  # no change was said meanwhile
            server.resources = (key, resources, templates)
        return list(resources), list(templates)

    async def _each_server(self, server: str | None, index: int) -> list[Any]:
        chosen = [server] if server is not None else self._active_names(None)
        out: list[Any] = []
        for name in chosen:
            try:
                out.extend((await self._on_io(self._listed_resources(self._server(name))))[index])
            except ResourceError as exc:
                if server is not None:
                    raise
                _log.warning("%s", exc)
        return out

    async def list_resources(self, server: str | None = None) -> list[McpResource]:
        """The resources of ``server``, or of every active server (one that is not
        connected is skipped); :class:`~tooldeck.mcp.resources.ResourceError` for one
        server that is not connected. Listed once per connection, again after the server
        says its list changed."""
        found: list[McpResource] = await self._each_server(server, 0)
        return found

    async def list_resource_templates(self, server: str | None = None) -> list[McpResourceTemplate]:
        """The resource templates of ``server``, or of every active server."""
        found: list[McpResourceTemplate] = await self._each_server(server, 1)
        return found

    async def read_resource(self, server: str, uri: str) -> ResourceResult:
        """The contents of ``uri`` on ``server`` (direct: no policy, like :meth:`call`;
        in a turn the read tool is judged); :class:`~tooldeck.mcp.resources.ResourceError`
        (one line) when the server refuses, times out or is not connected."""
        return await self._on_io(fetch_resource(self._server(server).conn, uri))

    async def subscribe_resource(self, server: str, uri: str) -> None:
        """Ask ``server`` to say when ``uri`` changes: each change is an
        :class:`McpResourceUpdated` on ``events``. Kept across reconnects;
        :class:`~tooldeck.mcp.resources.ResourceError` when the server does not support
        subscriptions."""
        chosen = self._server(server)
        await self._on_io(subscribe(chosen.conn, uri, True))
        chosen.subscribed.add(uri)

    async def unsubscribe_resource(self, server: str, uri: str) -> None:
        """Undo :meth:`subscribe_resource`."""
        chosen = self._server(server)
        chosen.subscribed.discard(uri)
        await self._on_io(subscribe(chosen.conn, uri, False))

    async def _resubscribe(self, server: _Server) -> None:
        for uri in sorted(server.subscribed):
            try:
                await subscribe(server.conn, uri, True)
            except ResourceError as exc:
                _log.warning("%s", exc)

    def _on_notification(self, conn: Connection, message: Any) -> None:
        """A server's notification the connection does not handle itself (I/O loop)."""
        server = self._servers[conn.config.name]
        if isinstance(message, types.ResourceListChangedNotification):
            server.generation += 1
            server.resources = None
            if self.resource_tools and not server.offers_resources:
                conn.mark_dirty()  # its first resources: list again, with the resource tools
            self._emit(McpResourceListChanged("", server.config.name))
        elif isinstance(message, types.ResourceUpdatedNotification):
            self._emit(McpResourceUpdated("", server.config.name, str(message.params.uri)))
        elif isinstance(message, types.PromptListChangedNotification):
            self._emit(McpPromptListChanged("", server.config.name))

    def _emit(self, event: Event) -> None:
        """Send ``event`` to ``events`` on the caller's loop (from the I/O loop)."""
        bus, loop = self.events, self._caller_loop
        if bus is None or loop is None:
            return
        with contextlib.suppress(RuntimeError):  # the caller's loop is closed
            loop.call_soon_threadsafe(lambda: asyncio.ensure_future(bus.emit(event)))

    # -- status -----------------------------------------------------------------------------------
    def lookup(self, exposed: str) -> tuple[str, str] | None:
        """``(server, tool)`` for an exposed name (the reverse map), or ``None``."""
        with self._lock:
            return self._reverse.get(exposed)

    def server_status(self, name: str) -> ServerStatus:
        server = self._server(name)
        conn = server.conn
        return ServerStatus(
            name=name,
            transport=server.config.transport,
            target=server.config.describe(),
            state=conn.state,
            error=conn.error,
            active=conn.wanted,
            autostart=server.config.autostart,
            tools=tuple(t.name for t in server.tools) if conn.state == "connected" else (),
            protocol_version=conn.protocol_version,
            server_name=conn.server_name,
            server_version=conn.server_version,
            attempts=conn.attempts,
            collisions=tuple(c.describe() for c in server.collisions),
            skipped=server.skipped,
            list_error=conn.list_error,
            needs_login=conn.needs_login,
        )

    def status(self) -> list[ServerStatus]:
        """A snapshot of every configured server."""
        return [self.server_status(n) for n in self._servers]

    def status_report(self) -> dict[str, Any]:
        """A JSON status, for ``TurnContext(status_sources={"mcp": source.status_report})``."""
        return {"servers": [s.as_dict() for s in self.status()]}

    def _on_state(self, conn: Connection) -> None:
        """Report a state change (runs on the I/O thread)."""
        self.listing_epoch = next(self._epochs)
        name = conn.config.name
        server = self._servers[name]
        tools = len(server.tools) if conn.state == "connected" else 0
        if conn.state == "connected" and server.subscribed:
            task = asyncio.ensure_future(self._resubscribe(server))  # on the I/O loop
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        self._emit(McpServerStatusChanged("", name, conn.state, conn.error, tools))
