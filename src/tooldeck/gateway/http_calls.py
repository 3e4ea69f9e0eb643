"""``tools/call`` over streamable HTTP answered by the gateway itself, not by the SDK's server.

Over HTTP the MCP SDK's server costs each request a Starlette request, a transport that
routes it through two memory streams and a router task into the session's JSON-RPC
dispatcher (a task, pydantic models of the request and the answer), and an
``EventSourceResponse`` with its own task group; that was most of what a call through
``tooldeck serve --http`` cost beyond the upstream's own time (``bench/RESULTS.md``).
:class:`HttpCalls` sits in front of the SDK's session manager (inside its request-body
limit and behind the HTTP auth: a static bearer token, or OAuth, checked as for every
request): it takes a plain ``tools/call`` POST of an established session and answers it
after running it through the session's dispatcher, as the SDK's handler would
(:meth:`GatewaySession.call`: policy, approvals, audit, evidence, offload, guard), with
the JSON-RPC message the SDK would send (the same JSON bytes). Every other request goes
to the SDK unchanged (a body read here is handed on as it came).

Taken: a POST whose every check the SDK would pass as it does now (the same functions
where the SDK has them): a handshake protocol version (or none), an ``Mcp-Session-Id``
of a session the SDK's manager holds, made by the same credential (OAuth principal),
not terminated nor idled out; the transport's Host / Origin / Content-Type checks;
``Accept`` of both JSON and SSE; a session the gateway already serves (a request of it
went through the SDK before); a JSON-RPC request (no other top-level keys) of
``tools/call`` whose ``params`` are just ``name`` (a string), ``arguments`` (an
object, or none) and a ``_meta`` of just a ``progressToken``, whose id is not in
flight here (progress, sent while an approval is waited for, is written on the call's
stream as the SDK writes it). Left to the SDK: everything else, and a call that may
need the SDK's session: one carrying any other ``_meta`` (a trace context), any call
of a client that declared elicitation or sampling (an ask, or an upstream server's
question or sampling request, goes to that client), the stateless protocol
(2026-07-28), and every request when sessions are shared between processes
(``--sessions``).

As the SDK does: a ``notifications/cancelled`` POST naming a call taken here (same
session) cancels it and is answered ``202``; the call is answered with the
``Request cancelled`` (``-32800``) error. A listing change is announced on the
session's standalone stream before the answer. Unlike the SDK, a call whose client
disconnects is cancelled (the SDK lets it run and drops its answer; watched for from
:data:`WATCH_AFTER` on, so a call answered sooner pays no task for it). An answer ready
before anything else was sent is one ``application/json`` body framed with
``Content-Length`` (the streamable HTTP transport lets a server answer either way a
client that accepts both; the SDK's client then reads it to its end and keeps the
connection for the next request). A call that reports progress, or takes longer than
:data:`HEADERS_AFTER` seconds, gets the SDK's SSE stream instead (the same events and
bytes as the SDK's), with a keep-alive comment every :data:`PING_SECONDS` (as
``sse_starlette`` does), its answer chunked.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import pydantic_core
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, authorization_context
from mcp.server.streamable_http import check_accept_headers
from mcp.shared.exceptions import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.requests import Request

from ..approvals import Approver
from .approval import Progress
from .wire import an_id, call_result_json, request_key

if TYPE_CHECKING:
    from mcp.server.connection import Connection
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from .session import GatewaySession

__all__ = ["HEADERS_AFTER", "PING_SECONDS", "WATCH_AFTER", "HttpCalls", "HttpHost"]

_log = logging.getLogger("tooldeck.gateway")
HEADERS_AFTER = 1.0
"""Seconds a call runs before its response headers are sent (an HTTP client's read
timeout counts from the request; the SDK sends them at once)."""
PING_SECONDS = 15.0
"""Keep-alive comments on a long call's stream (``sse_starlette``'s default)."""
WATCH_AFTER = 0.1
"""Seconds a call runs before a disconnect of its client is watched for (cancelling it)."""
REQUEST_CANCELLED = -32800  # the SDK's answer, on this era's wire, to a cancelled request
_PLAIN = frozenset({"name", "arguments", "_meta"})
_ENVELOPE = frozenset({"jsonrpc", "id", "method", "params"})
_SESSION = b"mcp-session-id"
_VERSION = b"mcp-protocol-version"
_HANDSHAKE = frozenset(v.encode() for v in HANDSHAKE_PROTOCOL_VERSIONS)
_LIST_CHANGED = "notifications/tools/list_changed"


class HttpHost(Protocol):
    """What :class:`HttpCalls` needs of the gateway (:class:`~.server.Gateway`)."""

    approvals: str

    def http_session(self, session_id: str) -> tuple[Connection, GatewaySession] | None: ...

    def plain_asker(
        self, session: GatewaySession, progress: Progress | None = None
    ) -> tuple[Approver, str]: ...

    async def listing_changed(
        self, session: GatewaySession, announce: Callable[[], Awaitable[None]]
    ) -> None: ...


class _Call:
    """One call taken here: its cancel scope, and how it ended."""

    __slots__ = ("cancelled", "scope")

    def __init__(self) -> None:
        self.scope = anyio.CancelScope()
        self.cancelled = False  # by the client's notifications/cancelled


def _ended(task: asyncio.Task[None]) -> None:
    """A watcher's end: a failure is logged, not left for asyncio to find."""
    if not task.cancelled() and (exc := task.exception()) is not None:
        _log.error("watching an HTTP call failed", exc_info=exc)


def _requestor(scope: Scope) -> Any:
    user = scope.get("user")
    return authorization_context(user) if isinstance(user, AuthenticatedUser) else None


def _event(message: dict[str, Any]) -> bytes:
    """``message`` as the SDK's SSE event (``sse_starlette``'s framing)."""
    return b"event: message\r\ndata: " + pydantic_core.to_json(message) + b"\r\n\r\n"


class _Reply:
    """The response of one call. Its answer alone, when nothing was sent before it, is one
    JSON body framed with ``Content-Length`` (as the SDK's server answers in its JSON mode;
    a client that accepts SSE accepts JSON too, and reads the body to its end, so its HTTP
    connection is kept for the next request, where an SSE answer ends it: the SDK's client
    closes the stream at the answer, before its end). Anything sent before the answer (a
    progress notification, a late call's headers) makes it the SDK's SSE stream, chunked."""

    __slots__ = ("send", "session", "started")

    def __init__(self, send: Send, session_id: str) -> None:
        self.send = send
        self.started = False  # the SSE stream's headers sent
        self.session = session_id.encode("latin-1")

    async def _start(self) -> None:
        self.started = True
        headers = [
            (b"cache-control", b"no-cache, no-transform"),
            (b"connection", b"keep-alive"),
            (b"content-type", b"text/event-stream"),
            (_SESSION, self.session),
            (b"x-accel-buffering", b"no"),
        ]
        await self.send({"type": "http.response.start", "status": 200, "headers": headers})

    async def keep_alive(self) -> None:
        if not self.started:
            await self._start()
            return
        ping = f": ping - {datetime.now(UTC)}\r\n\r\n".encode()
        await self.send({"type": "http.response.body", "body": ping, "more_body": True})

    async def event(self, message: dict[str, Any]) -> None:
        """An event before the answer (a progress notification)."""
        if not self.started:
            await self._start()
        await self.send({"type": "http.response.body", "body": _event(message), "more_body": True})

    async def answer(self, message: dict[str, Any]) -> None:
        if self.started:
            await self.send({"type": "http.response.body", "body": _event(message)})
            return
        self.started = True
        body = pydantic_core.to_json(message)
        headers = [
            (b"content-type", b"application/json"),
            (_SESSION, self.session),
            (b"content-length", str(len(body)).encode()),
        ]
        await self.send({"type": "http.response.start", "status": 200, "headers": headers})
        await self.send({"type": "http.response.body", "body": body})


class HttpCalls:
    """See the module docstring: an ASGI app in front of ``inner`` (the SDK's session
    manager's request handler, ``manager``)."""

    def __init__(self, host: HttpHost, manager: StreamableHTTPSessionManager, inner: ASGIApp):
        self.host = host
        self.manager = manager
        self.inner = inner
        self._running: dict[tuple[str, int | str], _Call] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or self.manager.stateless:
            await self.inner(scope, receive, send)
            return
        session_id: str | None = None
        for name, value in scope["headers"]:
            if name == _SESSION:
                session_id = value.decode("latin-1")
            elif name == _VERSION and value not in _HANDSHAKE:
                session_id = None  # the SDK's modern entry
                break
        else:
            if session_id is not None and await self._plain_post(session_id, scope):
                await self._post(session_id, scope, receive, send)
                return
        await self.inner(scope, receive, send)

    async def _plain_post(self, session_id: str, scope: Scope) -> bool:
        """Whether the SDK would hand this POST of ``session_id`` to the session's server
        (every check it makes before reading the body), and the gateway serves it."""
        manager = self.manager
        transport = manager._server_instances.get(session_id)
        if transport is None or manager.json_response:
            return False
        if _requestor(scope) != manager._session_owners.get(session_id):
            return False  # the SDK answers 404
        idle = transport.idle_scope
        if transport.is_terminated or (idle is not None and idle.cancel_called):
            return False
        request = Request(scope)
        if await transport._security.validate_request(request, is_post=True) is not None:
            return False
        has_json, has_sse = check_accept_headers(request)
        if not (has_json and has_sse) or not transport._check_content_type(request):
            return False
        return self.host.http_session(session_id) is not None

    async def _post(self, session_id: str, scope: Scope, receive: Receive, send: Send) -> None:
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":  # gone before its body came
                return
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        data = bytes(body)
        try:
            parsed = pydantic_core.from_json(data)
        except ValueError:
            parsed = None
        if (
            isinstance(parsed, dict)
            and parsed.get("jsonrpc") == "2.0"
            and parsed.keys() <= _ENVELOPE
        ):
            method = parsed.get("method")
            if method == "tools/call" and await self._call(
                session_id, parsed, scope, receive, send
            ):
                return
            cancel = method == "notifications/cancelled" and "id" not in parsed
            if cancel and await self._cancel(session_id, parsed.get("params"), send):
                return
        await self.inner(scope, replay(data, receive), send)

    async def _call(
        self, session_id: str, message: dict[str, Any], scope: Scope, receive: Receive, send: Send
    ) -> bool:
        """Serve this ``tools/call`` here; ``False`` (nothing done) to leave it to the SDK."""
        request_id = message.get("id")
        params = message.get("params")
        if not an_id(request_id) or not isinstance(params, dict) or not params.keys() <= _PLAIN:
            return False
        name, arguments = params.get("name"), params.get("arguments")
        if not isinstance(name, str) or not (arguments is None or isinstance(arguments, dict)):
            return False
        token: int | str | None = None
        if "_meta" in params:  # a progress token only (fastmcp's client always sends one)
            meta = params["_meta"]
            if not isinstance(meta, dict) or meta.keys() != {"progressToken"}:
                return False
            token = meta["progressToken"]
            if not an_id(token):
                return False
        found = self.host.http_session(session_id)
        if found is None:
            return False
        connection = found[0]
        caps = connection.client_capabilities
        if not connection.initialize_accepted or (
            caps is not None and (caps.elicitation is not None or caps.sampling is not None)
        ):
            return False  # an ask, an upstream's question or sampling goes to that client
        assert isinstance(request_id, int | str)
        key = (session_id, request_key(request_id))
        if key in self._running:
            return False  # the SDK says what a duplicate id gets
        call = self._running[key] = _Call()
        # in flight, the session does not idle out (as the SDK's transport counts requests)
        transport = self.manager._server_instances.get(session_id)
        idle = transport.idle_scope if transport is not None else None
        timeout = transport._idle_timeout if transport is not None else None
        if transport is not None and idle is not None and timeout is not None:
            transport._requests_in_flight += 1
            idle.deadline = float("inf")
        try:
            await self._serve(session_id, request_id, token, call, name, arguments, receive, send)
        finally:
            if self._running.get(key) is call:
                del self._running[key]
            if transport is not None and idle is not None and timeout is not None:
                transport._requests_in_flight -= 1
                if not transport._requests_in_flight:
                    idle.deadline = anyio.current_time() + timeout
        return True

    async def _serve(
        self,
        session_id: str,
        request_id: int | str,
        token: int | str | None,
        call: _Call,
        name: str,
        arguments: dict[str, Any] | None,
        receive: Receive,
        send: Send,
    ) -> None:
        reply = _Reply(send, session_id)
        answer: dict[str, Any] | None = None
        progress: Progress | None = None
        if token is not None:

            async def progress(done: float, total: float | None, message: str) -> None:
                params: dict[str, Any] = {"progressToken": token, "progress": done}
                if total is not None:
                    params["total"] = total
                if message is not None:
                    params["message"] = message
                note = {"jsonrpc": "2.0", "method": "notifications/progress", "params": params}
                with anyio.CancelScope(shield=True):
                    await reply.event(note)

        # A call still running after WATCH_AFTER gets a watcher (its own task; a call
        # answered sooner, nearly every one, pays a timer, not a task and its cancellation)
        loop = asyncio.get_running_loop()
        watcher: asyncio.Task[None] | None = None

        def watch() -> None:
            nonlocal watcher
            watcher = loop.create_task(self._watch(receive, reply, call))
            watcher.add_done_callback(_ended)

        timer = loop.call_later(WATCH_AFTER, watch)
        try:
            with call.scope:
                try:
                    result = await self._answer(session_id, name, arguments, progress)
                    answer = {"jsonrpc": "2.0", "id": request_id, "result": result}
                except MCPError as exc:
                    error = exc.error.model_dump(by_alias=True, exclude_none=True)
                    answer = {"jsonrpc": "2.0", "id": request_id, "error": error}
                except Exception as exc:  # as the SDK's dispatcher answers it
                    _log.exception("tools/call %s failed", name)
                    answer = {
                        "jsonrpc": "2.0",
                        "id": request_id,
                        "error": {"code": 0, "message": str(exc)},
                    }
        finally:
            timer.cancel()
            if watcher is not None:  # cancelled where it waits: it sends nothing more
                watcher.cancel()
        if answer is None:
            if not call.cancelled:
                return  # the client went away: nobody to answer
            error = {"code": REQUEST_CANCELLED, "message": "Request cancelled"}
            answer = {"jsonrpc": "2.0", "id": request_id, "error": error}
        with anyio.CancelScope(shield=True):  # a message is never left half written
            try:
                await reply.answer(answer)
            except OSError as exc:
                _log.debug("answer not written: %s", exc)

    async def _answer(
        self,
        session_id: str,
        name: str,
        arguments: dict[str, Any] | None,
        progress: Progress | None,
    ) -> dict[str, Any]:
        found = self.host.http_session(session_id)
        if found is None:  # the session ended meanwhile
            raise MCPError(-32600, "Session not found")
        connection, session = found
        host = self.host
        before = session.listing_state()
        asker, who = host.plain_asker(session, progress)
        protocol = connection.protocol_version
        result = await session.call(name, arguments, asker, who=who, protocol=protocol)
        if session.listing_state() != before:  # announced before the answer, as the SDK's

            async def announce() -> None:
                await connection.notify(_LIST_CHANGED, None)

            await host.listing_changed(session, announce)
        return call_result_json(result, protocol)

    async def _watch(self, receive: Receive, reply: _Reply, call: _Call) -> None:
        """From :data:`WATCH_AFTER` until cancelled: a client that disconnects cancels its
        call; a late call gets its headers, then keep-alive comments. (A task of asyncio,
        as uvicorn serves on its loop; a send is one write, never cut in half.)"""
        wait = HEADERS_AFTER - WATCH_AFTER
        while True:
            try:
                async with asyncio.timeout(wait):
                    message = await receive()
            except TimeoutError:
                try:
                    await reply.keep_alive()
                except OSError:
                    call.scope.cancel()
                    return
                wait = PING_SECONDS
                continue
            if message["type"] == "http.disconnect":
                call.scope.cancel()
                return

    async def _cancel(self, session_id: str, params: object, send: Send) -> bool:
        """A ``notifications/cancelled`` for a call taken here: cancel it, answer 202."""
        request_id = params.get("requestId") if isinstance(params, dict) else None
        if not an_id(request_id):
            return False
        assert isinstance(request_id, int | str)
        call = self._running.get((session_id, request_key(request_id)))
        if call is None:
            return False
        call.cancelled = True
        call.scope.cancel()
        headers = [(b"content-type", b"application/json"), (_SESSION, session_id.encode("latin-1"))]
        await send({"type": "http.response.start", "status": 202, "headers": headers})
        await send({"type": "http.response.body", "body": b""})
        return True


def replay(body: bytes, receive: Receive) -> Receive:
    """``receive`` with the body read here given again first."""
    given = False

    async def again() -> Message:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again
