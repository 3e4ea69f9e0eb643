"""Sessions of clients of the stateless protocol (MCP 2026-07-28), and what they listen to.

A 2026-07-28 request has no ``initialize`` before it and no ``Mcp-Session-Id``; over
streamable HTTP each request is a connection of its own. The gateway keeps a client's
session (the tools ``tool_search`` found, approve-always grants, stored results) by who
sends the request (:func:`principal_key`):

- over stdio (or in process) the process serves one client: its one session, whatever
  the protocol;
- over HTTP with OAuth (resource-server mode): the access token's principal, the
  ``(client_id, issuer, subject)`` of the SDK's ``principal_components`` (what its
  request-state binding and HTTP-session ownership use). One user's requests share one
  session; two users, or one user through two OAuth clients, never do. A token without
  a subject cannot tell its users apart, so it is refused;
- over HTTP without OAuth (a static bearer token, or none on loopback) nothing in a
  request says which client sent it, so 2026-07-28 requests are refused with
  ``-32022`` (unsupported protocol version) naming the handshake versions: the SDK's
  client in its default ``auto`` mode falls back to ``initialize``, where every HTTP
  session (``Mcp-Session-Id``) is a gateway session of its own.

Sessions keyed by principal (:class:`PrincipalSessions`) end after ``idle`` seconds
without a request, an open listen stream or an approval waiting for the client's answer,
and when the gateway stops.

``subscriptions/listen``: every session has its own listeners (:class:`Listeners`, the
SDK's ``ListenHandler`` on an ``InMemorySubscriptionBus`` of its own). A listen request
joins the listeners of its sender's session only, so a client is told when *its*
listing changes, and never hears about another's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import principal_components
from mcp.server.request_state import authenticated_principal
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from .session import GatewaySession

__all__ = [
    "DEFAULT_IDLE",
    "MAX_SESSIONS",
    "Listeners",
    "PrincipalSessions",
    "over_http",
    "principal_key",
    "stateless",
]

_log = logging.getLogger("tooldeck.gateway")
DEFAULT_IDLE = 1800.0
"""Seconds a principal's session lives without requests (the SDK's HTTP-session default)."""
MAX_SESSIONS = 10_000
"""Principal sessions at once (the SDK's limit of HTTP sessions)."""
MAX_STREAMS = 32
"""Listen streams one session may hold open."""

NO_IDENTITY = (
    "this gateway serves MCP 2026-07-28 requests over HTTP only with OAuth "
    "(tooldeck serve --oauth-issuer), where each user's requests share a session of their "
    "own; without it nothing tells one client's requests from another's. Connect with the "
    "initialize handshake (protocol 2025-11-25: the MCP SDK's Client falls back to it by "
    "itself in its default mode), where every connection is a session of its own"
)
NO_SUBJECT = (
    "this access token names no user (its introspection has no 'sub'), so the gateway "
    "cannot keep one user's MCP 2026-07-28 requests apart from another's; use a token "
    "with a subject, or connect with the initialize handshake (protocol 2025-11-25), "
    "where every connection is a session of its own"
)


def stateless(ctx: ServerRequestContext[Any]) -> bool:
    """Whether the request speaks the stateless protocol (2026-07-28)."""
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def over_http(ctx: ServerRequestContext[Any]) -> bool:
    """Whether the request came over HTTP (the SDK gives HTTP requests their Starlette
    request; stdio and in-process requests have none)."""
    return ctx.request is not None


def _refused(ctx: ServerRequestContext[Any], why: str) -> MCPError:
    data = types.UnsupportedProtocolVersionErrorData(
        supported=list(HANDSHAKE_PROTOCOL_VERSIONS), requested=ctx.protocol_version
    )
    return MCPError(types.UNSUPPORTED_PROTOCOL_VERSION, why, data.model_dump(mode="json"))


def principal_key(ctx: ServerRequestContext[Any]) -> str:
    """The session key of a stateless request over HTTP: its OAuth principal.

    Raises :class:`MCPError` (``-32022``, saying what to do) for a request without an
    access token (the gateway has no OAuth) or with one that names no subject.
    """
    token = get_access_token()
    if token is None:
        raise _refused(ctx, NO_IDENTITY)
    if principal_components(token)[2] is None:
        raise _refused(ctx, NO_SUBJECT)
    key = authenticated_principal(ctx)
    assert key is not None  # a token is there
    return key


class Listeners:
    """The ``subscriptions/listen`` streams of one session."""

    def __init__(self) -> None:
        self.bus = InMemorySubscriptionBus()
        self.handler = ListenHandler(self.bus, max_subscriptions=MAX_STREAMS)

    async def tools_changed(self) -> None:
        """Tell this session's listeners that its tool listing changed."""
        await self.bus.publish(ToolsListChanged())

    def close(self) -> None:
        """End every stream gracefully (each sends its final result)."""
        self.handler.close()


@dataclass
class _Held:
    session: GatewaySession
    last: float
    busy: int = 0


class PrincipalSessions:
    """Gateway sessions by principal key, ended after ``idle`` seconds unused.

    ``make`` makes a session; ``ended`` is told of each session that ends (its stored
    results go with :meth:`GatewaySession.close`, called here); ``keep`` says whether an
    idle session must live on (an approval of it waits for its client's answer).
    """

    def __init__(
        self,
        make: Callable[[], GatewaySession],
        idle: float = DEFAULT_IDLE,
        *,
        ended: Callable[[GatewaySession], None] | None = None,
        keep: Callable[[GatewaySession], bool] | None = None,
        limit: int = MAX_SESSIONS,
    ) -> None:
        if idle <= 0:
            raise ValueError("the session idle time must be positive")
        self.make = make
        self.idle = idle
        self.limit = limit
        self._ended = ended
        self._keep = keep
        self._held: dict[str, _Held] = {}

    def __len__(self) -> int:
        return len(self._held)

    @contextmanager
    def hold(
        self, key: str, make: Callable[[], GatewaySession] | None = None
    ) -> Iterator[GatewaySession]:
        """The session of ``key`` (made if new: by ``make`` if given), kept from ending
        while held."""
        held = self._held.get(key)
        if held is None:
            self.expire()
            if len(self._held) >= self.limit:
                raise MCPError(
                    types.INTERNAL_ERROR,
                    f"the gateway holds {self.limit:,} sessions already; try again later",
                )
            held = self._held[key] = _Held((make or self.make)(), time.monotonic())
            _log.info("client session %s started (MCP 2026-07-28, by principal)", held.session.id)
        held.busy += 1
        try:
            yield held.session
        finally:
            held.busy -= 1
            held.last = time.monotonic()

    def expire(self, now: float | None = None) -> list[GatewaySession]:
        """End the sessions unused for ``idle`` seconds (not held, not kept); the ended ones."""
        now = time.monotonic() if now is None else now
        keep = self._keep
        idle = [
            k
            for k, h in self._held.items()
            if not h.busy and now - h.last >= self.idle and not (keep and keep(h.session))
        ]
        ended = [self._end(key) for key in idle]
        for session in ended:
            _log.info("client session %s ended after %g s unused", session.id, self.idle)
        return ended

    def close(self) -> None:
        """End every session (the gateway stops)."""
        for key in list(self._held):
            self._end(key)

    def _end(self, key: str) -> GatewaySession:
        session = self._held.pop(key).session
        if self._ended is not None:
            self._ended(session)
        session.close()
        return session
