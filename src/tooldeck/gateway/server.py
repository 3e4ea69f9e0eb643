"""The gateway's MCP server: one lowlevel :class:`mcp.server.Server` over the catalog.

``tools/list`` answers the client session's listing (:class:`GatewaySession.listed`);
``tools/call`` runs the call through the session's dispatcher, with approvals asked by
elicitation (:mod:`.approval`). When a call changes what the session lists (a
``tool_search`` found tools), ``notifications/tools/list_changed`` is sent before the
answer; a watcher sends it too when an upstream server's tools change (a re-list, a
drop, a reconnect, a server that was still starting coming up: the gateway serves while
its upstream servers start, and a listing names those still starting in ``_meta``,
:data:`STARTING_META`). The server declares ``tools.listChanged``, and the resources and
prompts ``listChanged`` and ``resources.subscribe`` its upstreams' changes need
(:mod:`.clients`: roots, subscriptions and list changes per client session).

Sessions: over stdio the process serves one client, one session; over streamable HTTP
each client connection (``Mcp-Session-Id``) gets its own, and a client of the stateless
protocol (2026-07-28) the session of its OAuth principal (:mod:`.stateless`: refused
without OAuth). Such a client hears of listing changes through ``subscriptions/listen``,
and is asked for approvals with ``input_required`` results (:mod:`.input_required`).
HTTP without a bearer token or OAuth (:mod:`.http_auth`) is served on loopback
addresses only. See ``docs/gateway.md``.
"""

from __future__ import annotations

import logging
import signal
import socket
import sys
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.caching import CacheHint
from mcp.server.context import CallNext, HandlerResult
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.models import InitializationOptions
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity

from ..approvals import ApprovalRequest, Approver, PendingApproval
from ..policy import Policy, wait_for_human
from ._handshake import INSTRUCTIONS, EarlyInitialize
from ._stdin import wire_stdin, wire_stdout
from .allow import how_to_allow
from .approval import (
    MODES,
    NO_ELICITATION,
    NOBODY,
    OTHERWISE,
    WATCH,
    Progress,
    elicitation_asker,
    elicitation_supported,
    nobody_asker,
)
from .catalog import Catalog, client_name, name_problems
from .clients import Clients
from .content import UpstreamContent
from .forwarding import forwarding
from .http_auth import LOOPBACK, IntrospectionVerifier, OAuthResourceServer
from .http_calls import HttpCalls
from .input_required import ASK_SECONDS, InputAsks
from .out_of_band import (
    DEFAULT_TIMEOUT,
    WHO,
    ApprovalDesk,
    ApprovalsFolderError,
    approvals_folder,
)
from .session import GatewaySession
from .shared import SharedSessions, http_key
from .shared_asks import SharedAsks
from .stateless import (
    DEFAULT_IDLE,
    Listeners,
    PrincipalSessions,
    over_http,
    principal_key,
    stateless,
)
from .stdio_calls import stdio_calls_around
from .wire import to_call_result

__all__ = ["STARTING_META", "http_socket"]

_log = logging.getLogger("tooldeck.gateway")
WATCH_SECONDS = 1.0
CLOSING_SECONDS = 2.0  # at shutdown: how long waiting calls get to be answered
CLIENT_USER = "mcp-client-user"  # who answered, in the audit log, for an answer from the client
# how to tell a session's client that its listing changed, and what it was last listed
_Peer = tuple[Callable[[], Awaitable[None]], tuple[tuple[str, int], ...]]
STARTING_META = "tooldeck/starting"
"""The ``_meta`` key of a ``tools/list`` answer naming the servers still starting."""


def http_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` for :meth:`Gateway.serve_http` (bound before
    anything else starts, so a port in use is said at once); raises ``OSError``. Not
    inheritable (Python's default, kept): uvloop hands a subprocess every inheritable
    descriptor, and an upstream server holding this one would keep the port of a gateway
    killed (``kill -9``) from the gateway started again on it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        if sys.platform != "win32":  # there it would let two servers share the port
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except BaseException:
        sock.close()
        raise
    return sock


_CHANGES = NotificationOptions(tools_changed=True, resources_changed=True, prompts_changed=True)


class _Server(Server[Any]):
    """The lowlevel server, declaring its ``listChanged`` on every transport."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or _CHANGES,
            experimental_capabilities,
            extensions,
        )


class Gateway:
    """The tools of ``catalog`` served to MCP clients, one :class:`GatewaySession` each."""

    def __init__(
        self,
        catalog: Catalog,
        policy: Policy | None = None,
        *,
        state: Path | None = None,
        offload_tokens: int = 15_000,
        guard_tokens: int = 25_000,
        approvals: str = "auto",
        approval_timeout: float = DEFAULT_TIMEOUT,
        home: Path | None = None,
        session_idle: float = DEFAULT_IDLE,
        sessions: SharedSessions | None = None,
    ) -> None:
        from .. import __version__

        if approvals not in MODES:
            raise ValueError(f"approvals must be one of {', '.join(MODES)}, not {approvals!r}")
        self.catalog = catalog
        self.policy = policy or Policy()
        servers = (s.name for s in catalog.source.config.servers)
        own = (t.name for t in catalog.native)
        problems = name_problems(servers, self.policy, catalog.core, own)
        if problems:  # a rule or glob that would match nothing here: never silently
            raise ValueError("; ".join(problems))
        if offload_tokens > guard_tokens:  # checked here, not at the first result
            raise ValueError(
                f"offload_tokens ({offload_tokens}) is above guard_tokens ({guard_tokens}): "
                "results in between would be cut without being stored"
            )
        self.state = state
        self.offload_tokens = offload_tokens
        self.guard_tokens = guard_tokens
        self.approvals = approvals
        self.home = home
        self.desk: ApprovalDesk | None = None
        if approvals in ("auto", "out-of-band") and state is not None:
            try:
                self.desk = ApprovalDesk(approvals_folder(state), approval_timeout)
            except ApprovalsFolderError as exc:
                if approvals == "out-of-band":
                    raise
                _log.warning("no out-of-band approvals (tooldeck approve --watch): %s", exc)
        elif approvals == "out-of-band":
            raise ValueError("out-of-band approvals need a state folder (--state)")
        self._sessions: weakref.WeakKeyDictionary[Any, GatewaySession] = weakref.WeakKeyDictionary()
        self._peers: weakref.WeakKeyDictionary[GatewaySession, _Peer] = weakref.WeakKeyDictionary()
        self._single: GatewaySession | None = None  # stdio: the one client
        # over HTTP: the SDK's connection of each HTTP session (Mcp-Session-Id) served
        self._http: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()
        self._stdio = False
        self.session_idle = session_idle
        self.sessions = sessions  # shared with other gateway processes (:mod:`.shared`)
        # clients of the stateless protocol (2026-07-28): sessions by principal, their
        # listen streams, their approvals waiting for a retry
        self.asks = InputAsks(ASK_SECONDS)
        self.shared_asks = SharedAsks(self.asks, sessions) if sessions else None
        self.principals = PrincipalSessions(
            self.new_session, session_idle, ended=self._ended, keep=self.asks.waiting
        )
        self._listeners: weakref.WeakKeyDictionary[GatewaySession, Listeners] = (
            weakref.WeakKeyDictionary()
        )
        self.server: Server[Any] = _Server(
            "tooldeck",
            version=__version__,
            instructions=INSTRUCTIONS,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_subscriptions_listen=self._listen,
            **self._content_handlers(catalog),  # upstream resources and prompts (content.py)
            # each session lists its own tools, which change: never cached, never shared
            cache_hints={"tools/list": CacheHint(ttl_ms=0, scope="private")},
            get_tool_input_schema=self._input_schema,
        )
        if sessions is None:
            security = RequestStateSecurity.ephemeral(ttl=ASK_SECONDS)
        else:  # any process opens what another sealed
            security = RequestStateSecurity(keys=[sessions.sealing_key], ttl=ASK_SECONDS)
        self.clients.register(self.server)  # roots, subscriptions (clients.py)
        self.server.middleware += [
            self._only_known_principals,
            self._record_initialize,
            RequestStateBoundary(security, default_audience=self.server.name),
        ]

    def _content_handlers(self, catalog: Catalog) -> dict[str, Any]:
        self.clients = Clients(catalog.source)
        content = UpstreamContent(catalog.source, self._client, self.clients)
        return {
            "on_list_resources": content.list_resources,
            "on_list_resource_templates": content.list_resource_templates,
            "on_read_resource": content.read_resource,
            "on_subscribe_resource": content.subscribe_resource,
            "on_unsubscribe_resource": content.unsubscribe_resource,
            "on_list_prompts": content.list_prompts,
            "on_get_prompt": content.get_prompt,
        }

    def new_session(self, session_id: str | None = None) -> GatewaySession:
        shared = self.sessions is not None and session_id is not None
        return GatewaySession(
            self.catalog,
            self.policy,
            self.state,
            offload_tokens=self.offload_tokens,
            guard_tokens=self.guard_tokens,
            home=self.home,
            session_id=session_id,
            grants=SharedSessions.grant_store() if shared else None,
        )

    def _asker(
        self, ctx: ServerRequestContext[Any], session: GatewaySession
    ) -> tuple[Approver, str]:
        """How this call's asks reach a human (``--approvals``), and who that is."""
        mode = self.approvals
        progress = ctx.session.report_progress
        if mode in ("auto", "elicit") and elicitation_supported(ctx.session):
            if stateless(ctx):  # no back channel: the call ends its round input_required
                return wait_for_human, CLIENT_USER
            asker = elicitation_asker(
                ctx.session, ctx.request_id, client_name, progress, on_give_up=session.gave_up
            )
            http_id = getattr(getattr(ctx.session, "_connection", None), "session_id", None)
            if self.sessions is not None and http_id is not None:  # the answer may come
                asker = self.sessions.replies.asker(http_key(http_id), asker)  # elsewhere
            return asker, CLIENT_USER
        return self._asker_of(session, progress)

    def plain_asker(
        self, session: GatewaySession, progress: Progress | None = None
    ) -> tuple[Approver, str]:
        """How a call of a client that cannot be asked by elicitation reaches a human,
        telling ``progress`` while it waits (:mod:`.stdio_calls`: none sent;
        :mod:`.http_calls`); an upstream's question is declined."""
        mode, desk = self.approvals, self.desk
        desked = desk is not None and (mode == "out-of-band" or (mode == "auto" and desk.watched()))
        if progress is not None:
            asker, who = self._asker_of(session, progress, desked)
            return forwarding(asker, None, None), who
        # without progress to tell, the same for every call while these stay: kept, so the
        # session keeps its dispatcher too (GatewaySession._dispatcher)
        kept = session.asker_kept
        if kept is not None and kept[0] == (mode, desk, desked, self.state):
            return kept[1]
        asker, who = self._asker_of(session, None, desked)
        made = forwarding(asker, None, None), who
        session.asker_kept = ((mode, desk, desked, self.state), made)
        return made

    def _asker_of(
        self, session: GatewaySession, progress: Progress | None, desked: bool | None = None
    ) -> tuple[Approver, str]:
        """``desked``: whether the approval desk asks (worked out here when None)."""
        mode = self.approvals
        desk = self.desk
        if desked is None:
            desked = desk is not None and (
                mode == "out-of-band" or (mode == "auto" and desk.watched())
            )
        if desked:
            assert desk is not None
            asker = desk.asker(
                session.id,
                tier_of=session.policy.tier_of,
                shown=client_name,
                progress=progress,
                on_give_up=session.gave_up,
            )
            return asker, WHO
        # nobody can answer: denied at once, with what lets the call run
        otherwise = OTHERWISE[mode]
        if mode == "auto" and desk is not None:
            otherwise = WATCH.format(state=self.state)

        def fix(request: ApprovalRequest) -> str:
            return how_to_allow(request, session.policy, otherwise=otherwise)

        return nobody_asker(NOBODY if mode == "deny" else NO_ELICITATION, fix), "nobody"

    @asynccontextmanager
    async def _client(self, ctx: ServerRequestContext[Any]) -> AsyncIterator[GatewaySession]:
        """The session of the client that sent this request (see the module docstring);
        with a shared store, brought up to date before and written back after."""
        shared = self.sessions
        if self._stdio or (stateless(ctx) and not over_http(ctx)):
            yield self._local()
            return
        if stateless(ctx):
            key = principal_key(ctx)
            if shared is None:
                with self.principals.hold(key) as session:
                    yield session
                return
            record = await shared.of_principal(key)
            with self.principals.hold(key, make=lambda: self.new_session(record.id)) as session:
                shared.attach(session, record)
                async with shared.around(session, fresh=True):
                    yield session
            return
        if shared is None:
            yield self._by_connection(ctx)
            return
        connection = getattr(ctx.session, "_connection", None)
        known = self._sessions.get(connection) if connection is not None else None
        fresh = known is None
        if known is None:  # new here: the session another process (or this one) opened
            record = await shared.of_http(connection)
            known = self._by_connection(ctx, record.id)
            shared.attach(known, record)
        async with shared.around(known, fresh=fresh):
            yield known

    def stdio_session(self) -> GatewaySession:
        """The session of the one client over stdio."""
        return self._local()

    def http_session(self, session_id: str) -> tuple[Any, GatewaySession] | None:
        """The SDK's connection of the HTTP session ``session_id`` and its gateway
        session, if a request of it was served (:mod:`.http_calls`)."""
        connection = self._http.get(session_id)
        session = self._sessions.get(connection) if connection is not None else None
        return None if session is None else (connection, session)

    async def listing_changed(
        self, session: GatewaySession, announce: Callable[[], Awaitable[None]]
    ) -> None:
        """``session``'s listing changed during a call: ``announce`` it, and with it
        the session's changes from now on."""
        self._peers[session] = (announce, session.listing_key())
        try:
            await announce()
        except Exception as exc:  # the client went away: the answer fails the same way
            _log.debug("list_changed not sent: %s", exc)

    def _local(self) -> GatewaySession:
        if self._single is None:
            self._single = self.new_session()
            _log.info("client session %s started", self._single.id)
        return self._single

    def _by_connection(
        self, ctx: ServerRequestContext[Any], session_id: str | None = None
    ) -> GatewaySession:
        key = getattr(ctx.session, "_connection", None)
        if key is None:
            raise RuntimeError("the MCP SDK gave this request no connection")
        session = self._sessions.get(key)
        if session is None:
            session = self._sessions[key] = self.new_session(session_id)
            http_id = getattr(key, "session_id", None)
            if isinstance(http_id, str):
                self._http[http_id] = key
            # the connection ended (its HTTP session closed or idled out): so did the session
            key.exit_stack.callback(self._connection_ended, key)
            weakref.finalize(key, session.close)  # a transport that never closes its stack
            _log.info("client session %s started", session.id)
        return session

    def _connection_ended(self, connection: Any) -> None:
        session = self._sessions.pop(connection, None)
        if session is not None:
            self._peers.pop(session, None)  # it held the connection
            session.close()
            _log.info("client session %s ended", session.id)

    def _listeners_of(self, session: GatewaySession) -> Listeners:
        listeners = self._listeners.get(session)
        if listeners is None:
            listeners = self._listeners[session] = Listeners()
        return listeners

    def _remember(self, session: GatewaySession, ctx: ServerRequestContext[Any]) -> None:
        """Announce this session's listing changes to the client of ``ctx`` from now on."""
        if stateless(ctx):
            announce = self._listeners_of(session).tools_changed
        else:
            announce = ctx.session.send_tool_list_changed
        self._peers[session] = (announce, session.listing_key())

    def _ended(self, session: GatewaySession) -> None:
        """A session by principal ended: its waiting asks are denied (or, shared, left to
        the other processes), its streams end."""
        if self.sessions is not None:
            self.asks.let_go(session)
        else:
            self.asks.end(session)
        self._peers.pop(session, None)
        listeners = self._listeners.pop(session, None)
        if listeners is not None:
            listeners.close()

    def _input_schema(self, name: str) -> dict[str, Any] | None:
        """The input schema of the catalog's tool ``name``, for the SDK's ``Mcp-Param-*``
        header check of a 2026-07-28 call (instead of a whole listing per call)."""
        tool = self.catalog.view().tools.get(name)
        return tool.input_schema() if tool is not None else None

    async def _only_known_principals(
        self, ctx: ServerRequestContext[Any], call_next: CallNext
    ) -> HandlerResult:
        """Middleware: a stateless request over HTTP is served only when its sender is known
        (:func:`.stateless.principal_key`); ``server/discover`` included, so the SDK's
        client falls back to the handshake by itself."""
        if ctx.request_id is not None and stateless(ctx) and over_http(ctx) and not self._stdio:
            principal_key(ctx)
        return await call_next(ctx)

    async def _record_initialize(
        self, ctx: ServerRequestContext[Any], call_next: CallNext
    ) -> HandlerResult:
        """Middleware: with a shared store, an HTTP session initialized here is written
        there (before the client is answered), so any process serves its next request."""
        result = await call_next(ctx)
        if ctx.method == "initialize" and self.sessions is not None and over_http(ctx):
            await self.sessions.initialized(ctx, result)
        return result

    # -- handlers ---------------------------------------------------------------------
    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        async with self._client(ctx) as session:
            self._remember(session, ctx)
            starting = self.catalog.source.starting()  # listed, and announced, once up
            meta = {STARTING_META: starting} if starting else None
            return types.ListToolsResult(
                tools=session.listed(protocol=ctx.protocol_version), _meta=meta
            )

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        async with self._client(ctx) as session:
            before = session.listing_state()
            if stateless(ctx) and params.request_state is not None:
                # the retry of a call that asked: the client's answer, taken once
                if self.shared_asks is not None:  # asked here, or by another process
                    call_id, answer = await self.shared_asks.answer(session, params)
                else:
                    call_id, answer = self.asks.answer(session, params)
                nobody = nobody_asker("no answer was given")
                result = await session.call(
                    params.name,
                    params.arguments,
                    nobody,
                    who=CLIENT_USER,
                    call_id=call_id,
                    answers={call_id: answer},
                    protocol=ctx.protocol_version,
                )
            else:
                asker, who = self._asker(ctx, session)
                back = None if stateless(ctx) else ctx.session  # who an upstream asks
                asker = forwarding(asker, back, ctx.request_id)
                try:
                    result = await session.call(
                        params.name,
                        params.arguments,
                        asker,
                        who=who,
                        protocol=ctx.protocol_version,
                    )
                except PendingApproval as pending:
                    if self.shared_asks is not None:
                        return await self.shared_asks.ask(session, params, pending, client_name)
                    return self.asks.ask(session, params, pending, client_name)
            if session.listing_state() != before:
                self._remember(session, ctx)
                try:
                    await self._peers[session][0]()
                except Exception as exc:  # the client went away: the answer fails the same way
                    _log.debug("list_changed not sent: %s", exc)
            return to_call_result(result, ctx.protocol_version)

    async def _listen(
        self, ctx: ServerRequestContext[Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        """``subscriptions/listen``: a stream of this client's session's changes only."""
        async with self._client(ctx) as session:  # held open: the session lives while it listens
            self._remember(session, ctx)
            return await self._listeners_of(session).handler(ctx, params)

    # -- upstream changes -------------------------------------------------------------
    async def watch(self) -> None:
        """Announce upstream changes of what a session lists; end the sessions by principal
        that idled out, and deny the asks nobody answered (runs until cancelled)."""
        while True:
            await anyio.sleep(WATCH_SECONDS)
            if self.shared_asks is not None:
                await self.shared_asks.expire()  # logged, not raised, if the store fails
            self.asks.expire()
            self.principals.expire()
            if self.sessions is not None:
                await self.sessions.tick(self.state)
            for session, (announce, listed) in list(self._peers.items()):
                now = session.listing_key()
                if now == listed:
                    continue
                self._peers[session] = (announce, now)
                try:
                    await announce()
                except Exception as exc:
                    _log.debug("list_changed not sent to %s: %s", session.id, exc)

    # -- serving ----------------------------------------------------------------------
    def begin_closing(self) -> None:
        """The gateway is stopping: calls waiting for an out-of-band approval give up now,
        each answered with a deny that says so (instead of being cut off)."""
        if self.desk is not None:
            self.desk.close()

    async def _drain(self, seconds: float = CLOSING_SECONDS) -> None:
        """Wait (bounded) until no call waits for approval, then a moment for the
        answers to be written."""
        with anyio.move_on_after(seconds):
            while self.desk is not None and self.desk.waiting:  # noqa: ASYNC110 (a counter)
                await anyio.sleep(0.05)
            await anyio.sleep(0.2)

    def end_streams(self) -> None:
        """End every listen stream gracefully (in the event loop, as the gateway stops)."""
        for listeners in list(self._listeners.values()):
            listeners.close()

    async def _stop_on_signal(self, scope: anyio.CancelScope) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                _log.info("signal %s: stopping", signum)
                self.begin_closing()
                self.end_streams()
                await self._drain()
                scope.cancel()
                return

    async def serve_stdio(self, early: EarlyInitialize | None = None) -> None:
        """Serve one client over this process's stdin and stdout until it disconnects
        (or SIGTERM / SIGINT: waiting calls are answered first). ``early``: the thread
        that read the client's first message (and answered ``initialize``) already."""
        from mcp.server.stdio import stdio_server

        self._stdio = True
        options = self.server.create_initialization_options()
        read, answered = b"", None
        if early is not None:  # read again by the SDK; its answer, if given, not sent twice
            await anyio.to_thread.run_sync(early.join, abandon_on_cancel=True)
            read, answered = early.read, early.answered
        stdin = wire_stdin(read)  # read by the loop: a stop is not held up by a read
        stdout = wire_stdout(answered)  # written by the loop: no thread hand-off per message
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self.watch)
                tg.start_soon(self._stop_on_signal, tg.cancel_scope)
                async with stdio_calls_around(self, stdin, stdout) as lines:
                    wire: Any = {"stdin": lines, "stdout": stdout}
                    async with stdio_server(**wire) as (read, write):
                        await self.server.run(read, write, options)
                tg.cancel_scope.cancel()
        finally:
            if stdout is not None:
                stdout.close()
            if stdin is not None:
                stdin.close()
            self.begin_closing()
            if self._single is not None:
                self.asks.end(self._single)
                self._single.close()

    async def serve_http(
        self,
        host: str = "127.0.0.1",
        port: int = 8765,
        *,
        token: str | None = None,
        oauth: OAuthResourceServer | None = None,
        sock: socket.socket | None = None,
        announce: Callable[[str], None] | None = None,
    ) -> None:
        """Serve streamable HTTP at ``http://host:port/mcp`` until cancelled (or SIGTERM /
        SIGINT: calls waiting for approval are answered, then the server stops).

        With ``token`` every request needs ``Authorization: Bearer <token>``; with
        ``oauth``, an access token of that authorization server (:mod:`.http_auth`);
        without either, only loopback addresses are served. ``sock`` is the socket to
        serve on, bound already (:func:`http_socket`; default: bound here);
        ``announce`` is told the URL once requests are served.
        """
        import uvicorn
        from mcp.server.transport_security import RequestBodyLimitMiddleware

        from .http_auth import BearerToken
        from .http_wire import http_protocol

        if token is not None and oauth is not None:
            raise ValueError("give the gateway a static token or OAuth, not both")
        if host not in LOOPBACK and token is None and oauth is None:
            raise ValueError(
                f"the gateway serves HTTP without a token on loopback addresses only "
                f"({', '.join(LOOPBACK)}), not {host!r}"
            )
        auth: dict[str, Any] = {}
        verifier: IntrospectionVerifier | None = None
        if oauth is not None:
            verifier = oauth.verifier()
            auth = {"auth": oauth.auth_settings(), "token_verifier": verifier}
        app: Any = self.server.streamable_http_app(
            host=host, session_idle_timeout=self.session_idle, **auth
        )
        manager = self.server.session_manager
        if self.sessions is None:  # plain calls answered by the gateway (http_calls.py)
            calls = HttpCalls(self, manager, manager._handle_request)
            manager.asgi_app = RequestBodyLimitMiddleware(calls, manager.max_request_body_size)
        if token is not None:
            app = BearerToken(app, token)
        gateway = self

        class _Server(uvicorn.Server):
            def handle_exit(self, sig: int, frame: Any) -> None:
                gateway.begin_closing()  # a plain flag: safe in a signal handler
                super().handle_exit(sig, frame)
                self._captured_signals.clear()  # a clean exit, not the signal raised again

            async def shutdown(self, sockets: Any = None) -> None:
                gateway.end_streams()  # in the loop: open listen streams end, not hang on
                await super().shutdown(sockets)

            async def startup(self, sockets: Any = None) -> None:
                await super().startup(sockets)
                if self.started and announce is not None:
                    announce(url)

        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            http=http_protocol(),  # httptools (else h11), a turn's writes sent as one
            log_level="warning",
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=int(CLOSING_SECONDS) + 1,  # open event streams
        )
        if sock is None:
            sock = http_socket(host, port)
        bound = sock.getsockname()[1]
        url = f"http://{f'[{host}]' if ':' in host else host}:{bound}/mcp"
        if self.sessions is not None:  # sessions other processes opened are served here
            self.sessions.serve(self.server.session_manager, url)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self.watch)
                await _Server(config).serve(sockets=[sock])
                tg.cancel_scope.cancel()
        finally:
            self.begin_closing()
            if verifier is not None:
                with anyio.CancelScope(shield=True):
                    await verifier.aclose()
            self.principals.close()
            for session in list(self._sessions.values()):
                session.close()
