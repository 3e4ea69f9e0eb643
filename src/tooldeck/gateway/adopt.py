"""Serving an HTTP session another gateway process opened (or this one, before a restart).

The MCP SDK's streamable-HTTP session manager answers an ``Mcp-Session-Id`` it does not
hold with 404. With a shared session store (:mod:`.shared`), the gateway looks such an
id up first: a session in the store, opened by the same credential, is *adopted*: the
manager gets a transport with that id whose connection is born initialized, with the
protocol version and the client's ``initialize`` parameters (its capabilities: whether
it can be asked by elicitation) recorded when the session was opened. The request is
then served as if the session had always been here. An id the store does not have, or
one opened by another OAuth principal, is answered 404 as before (the SDK's answer for a
session of another credential too: nothing tells a stranger the session exists).

A ``DELETE`` the manager accepted ends the session in the store too; a process that
still holds the session looks it up at its next request, finds it gone and lets it go,
so every process answers 404 for it from then on.

This reaches into the SDK's manager (its private session table and task group): the
SDK has no hook for sessions kept outside the process. Its stateless mode would not do:
it drops the ``Mcp-Session-Id`` and every server-to-client request of a call
(elicitation) with it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any

import anyio
from anyio.abc import TaskStatus
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, authorization_context
from mcp.server.connection import Connection
from mcp.server.runner import serve_connection
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp.shared.transport_context import TransportContext
from mcp_types import INTERNAL_ERROR, InitializeRequestParams, JSONRPCError
from mcp_types import ErrorData as _ErrorData
from starlette.types import Message, Receive, Scope, Send

from ..workflows.store import StoreError
from .http_calls import replay
from .replies import PASSED_ON, only_answers
from .session_store import SessionRecord

__all__ = ["adopt_sessions", "owner_of"]

_log = logging.getLogger("tooldeck.gateway")
Find = Callable[[str], Awaitable[SessionRecord | None]]
Ended = Callable[[str], Awaitable[None]]
Exists = Callable[[str], Awaitable[bool]]
PassOn = Callable[[str, bytes, Sequence[tuple[bytes, bytes]]], Awaitable[None]]


def owner_of(user: Any) -> dict[str, Any] | None:
    """Who a request's credential is (the SDK's ``authorization_context``), or ``None``
    without OAuth (a static token, or loopback without one: anyone who can connect)."""
    if isinstance(user, AuthenticatedUser):
        return dict(authorization_context(user))
    return None


def adopt_sessions(
    manager: StreamableHTTPSessionManager,
    find: Find,
    exists: Exists,
    ended: Ended,
    pass_on: PassOn | None = None,
) -> None:
    """Make ``manager`` serve the sessions ``find`` knows (by HTTP session id) that it
    does not hold, let go of those it holds that no longer ``exists``, tell ``ended`` of
    each session a client deleted, and ``pass_on`` each POST of a client's answers only
    (:mod:`.replies`) before it is served here."""
    handle = manager._handle_stateful_request

    async def stateful(scope: Scope, receive: Receive, send: Send) -> None:
        session_id = _header(scope, MCP_SESSION_ID_HEADER)
        if session_id is not None:
            try:
                held = manager._server_instances.get(session_id)
                if held is None:
                    await _adopt(manager, session_id, scope, find)
                elif not await exists(session_id):  # ended by way of another process
                    _log.info("session %s ended elsewhere", session_id[:64])
                    await manager._discard_session(session_id, held)
            except StoreError as exc:  # the store is gone: said in one line, at once
                _log.warning("session %s not looked up: %s", session_id[:64], exc)
                await _error(scope, receive, send, f"the gateway's session store failed: {exc}")
                return
        if (
            session_id in manager._server_instances
            and pass_on is not None
            and scope.get("method") == "POST"
            and _header(scope, PASSED_ON) is None
        ):
            body = await _body(receive)
            receive = replay(body, receive)
            if session_id is not None and only_answers(body):
                await pass_on(session_id, body, scope.get("headers", ()))
        if session_id is None or scope.get("method") != "DELETE":
            await handle(scope, receive, send)
            return

        async def watched(message: Message) -> None:
            # ended in the store before the client hears it is: then no process serves it
            if message["type"] == "http.response.start" and int(message["status"]) < 300:
                try:
                    await ended(session_id)
                except StoreError as exc:  # it idles out in the store instead
                    _log.warning("session %s not ended in the store: %s", session_id[:64], exc)
            await send(message)

        await handle(scope, receive, watched)

    manager._handle_stateful_request = stateful  # type: ignore[method-assign]


async def _body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _header(scope: Scope, name: str) -> str | None:
    wanted = name.lower().encode("ascii")
    for key, value in scope.get("headers", ()):
        if key == wanted:
            return bytes(value).decode("latin-1")
    return None


async def _error(scope: Scope, receive: Receive, send: Send, message: str) -> None:
    from starlette.responses import Response

    body = JSONRPCError(
        jsonrpc="2.0", id=None, error=_ErrorData(code=INTERNAL_ERROR, message=message)
    )
    response = Response(
        body.model_dump_json(by_alias=True, exclude_unset=True),
        status_code=503,
        media_type="application/json",
    )
    await response(scope, receive, send)


async def _adopt(
    manager: StreamableHTTPSessionManager, session_id: str, scope: Scope, find: Find
) -> None:
    record = await find(session_id)
    if record is None:
        return  # the manager answers 404
    user = scope.get("user")
    if owner_of(user) != record.owner:
        _log.warning("session %s refused: another credential opened it", session_id[:64])
        return  # 404, as the SDK answers a session opened by another credential
    async with manager._session_creation_lock:
        if session_id in manager._server_instances:
            return  # adopted by a request that came at the same time
        transport = StreamableHTTPServerTransport(
            mcp_session_id=session_id,
            is_json_response_enabled=manager.json_response,
            event_store=manager.event_store,
            security_settings=manager.security_settings,
            retry_interval=manager.retry_interval,
            idle_timeout=manager.session_idle_timeout,
        )
        manager._server_instances[session_id] = transport
        if isinstance(user, AuthenticatedUser):
            manager._session_owners[session_id] = authorization_context(user)
    assert manager._task_group is not None
    await manager._task_group.start(partial(_serve, manager, transport, record))
    _log.info("HTTP session %s adopted from the session store", session_id[:64])


async def _serve(
    manager: StreamableHTTPSessionManager,
    transport: StreamableHTTPServerTransport,
    record: SessionRecord,
    *,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """The adopted session's server task: as the SDK's own (``_serve_opening_request``),
    with a connection that is initialized already."""
    session_id = transport.mcp_session_id
    assert session_id is not None
    async with transport.connect() as (read, write):
        task_status.started()
        try:
            idle_scope = transport.idle_scope or anyio.CancelScope()
            with idle_scope:
                dispatcher: JSONRPCDispatcher[TransportContext] = JSONRPCDispatcher(
                    read, write, inline_methods=frozenset({"initialize"})
                )
                connection = Connection.for_loop(
                    dispatcher, session_id=session_id, protocol_version_hint=record.protocol
                )
                if record.client is not None:
                    connection.client_params = InitializeRequestParams.model_validate(
                        record.client, by_name=False
                    )
                connection.initialized.set()
                await serve_connection(
                    manager.app,
                    dispatcher,
                    connection=connection,
                    lifespan_state=manager._lifespan_state,
                )
        except Exception:
            _log.exception("adopted session %s crashed", session_id[:64])
        finally:
            await manager._discard_session(session_id, transport)
