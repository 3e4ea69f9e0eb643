"""The gateway's client sessions as its upstream servers reach them: roots, subscriptions
and list changes.

Per client session (one over stdio, one per ``Mcp-Session-Id`` over HTTP; the MCP
connection the SDK gives its requests), kept from its ``notifications/initialized`` to
the end of its connection:

- **roots**: a client that declares the ``roots`` capability is asked ``roots/list``
  when initialized and on each ``notifications/roots/list_changed``; the upstream
  servers are told the roots of the clients (:mod:`.roots`: one client's, the common
  part of several), and told again when they change or a client ends;
- **subscriptions**: ``resources/subscribe`` of a gateway URI (``tooldeck://<server>/...``,
  judged by the session's policy as a read of it, :mod:`.content`) subscribes upstream
  once for every client that wants it (and unsubscribes when the last one
  unsubscribes or ends); each ``notifications/resources/updated`` from upstream reaches
  the client sessions subscribed to that URI, with the gateway's URI, and no other;
- **list changes**: an upstream's ``notifications/resources/list_changed`` and
  ``notifications/prompts/list_changed`` reach every client session (what the gateway
  lists of resources and prompts is the same for all). ``tools/list_changed`` is the
  gateway's own (:mod:`.server`): its catalog re-lists the server first, and each
  session whose listing changed is told.

Clients of the stateless protocol (2026-07-28) have no ``initialize``, no roots
notification and no ``resources/subscribe``: none of this reaches them.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp import MCPError
from mcp.server.session import ServerSession
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from ..events import Event, EventBus
from ..mcp import McpPromptListChanged, McpResourceListChanged, McpResourceUpdated, McpSource
from ..mcp.resources import ResourceError
from .content import gateway_uri
from .roots import common, paths_of

__all__ = ["ROOTS_WAITS", "Clients"]

_log = logging.getLogger("tooldeck.gateway")
ROOTS_WAITS = (1.0, 2.0, 4.0, 8.0)
"""How long each ``roots/list`` waits for the client's answer before it is asked again:
over HTTP a request sent before the client opened its event stream is lost."""


@dataclass(eq=False)
class _Client:
    session: ServerSession  # sends on the client's connection (not tied to a request)
    roots: tuple[Path, ...] | None = None  # None: declared none (or not answered yet)
    asking: bool = False  # a roots/list is waiting for its answer
    again: bool = False  # and the roots changed since it was sent
    subscribed: set[tuple[str, str]] = field(default_factory=set)  # (server, upstream URI)


class Clients:
    """The client sessions of one gateway, and what its upstreams are told of them."""

    def __init__(self, source: McpSource) -> None:
        self.source = source
        self._clients: dict[Any, _Client] = {}  # by the SDK's connection
        self._wanted: Counter[tuple[str, str]] = Counter()  # clients per upstream URI
        self._tasks: set[asyncio.Future[None]] = set()
        if source.events is None:
            source.events = EventBus()
        source.events.subscribe(
            self._upstream, McpResourceUpdated, McpResourceListChanged, McpPromptListChanged
        )

    def register(self, server: Any) -> None:
        """Handle the client notifications this needs on the lowlevel ``server``."""
        server.add_notification_handler(
            "notifications/initialized", types.NotificationParams, self.initialized
        )
        server.add_notification_handler(
            "notifications/roots/list_changed", types.NotificationParams, self.roots_changed
        )

    def _client(self, ctx: Any) -> _Client | None:
        """The client of ``ctx`` (known from now on), or ``None`` for a request that
        belongs to no connection (the stateless protocol)."""
        connection = getattr(ctx.session, "_connection", None)
        if connection is None or ctx.session.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
            return None
        client = self._clients.get(connection)
        if client is None:
            client = self._clients[connection] = _Client(ctx.session)
            connection.exit_stack.callback(self._ended, connection)
        return client

    # -- roots ----------------------------------------------------------------------------
    async def initialized(self, ctx: Any, params: types.NotificationParams) -> None:
        """``notifications/initialized``: a client session begins; its roots are asked."""
        client = self._client(ctx)
        caps = ctx.session.client_capabilities
        if client is not None and caps is not None and caps.roots is not None:
            self._want_roots(client)

    async def roots_changed(self, ctx: Any, params: types.NotificationParams) -> None:
        """``notifications/roots/list_changed``: ask the client again."""
        client = self._client(ctx)
        if client is not None:
            self._want_roots(client)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _want_roots(self, client: _Client) -> None:
        """Ask ``client`` for its roots: at once, or after the answer being waited for (a
        flood of notifications is one request at a time, the last change never lost)."""
        if client.asking:
            client.again = True
            return
        client.asking = True
        self._spawn(self._ask_roots(client))

    async def _ask_roots(self, client: _Client) -> None:
        try:
            while True:
                client.again = False
                answer = await self._roots_of(client)
                if client.again:
                    continue  # changed meanwhile: this answer may be old
                if answer is not None and client in self._clients.values():
                    client.roots = paths_of(answer)
                    self._tell_roots()
                return
        finally:
            client.asking = False

    async def _roots_of(self, client: _Client) -> types.ListRootsResult | None:
        """The client's answer to ``roots/list`` (``None``: none came; logged)."""
        for seconds in ROOTS_WAITS:
            try:
                return await client.session.send_request(
                    types.ListRootsRequest(),
                    types.ListRootsResult,
                    request_read_timeout_seconds=seconds,
                )
            except MCPError as exc:  # the HTTP client's event stream may not be open yet
                if exc.error.code != types.REQUEST_TIMEOUT:
                    _log.warning("the client's roots could not be read: %s", exc)
                    return None
            except Exception as exc:  # a malformed answer, or the client is gone
                _log.warning("the client's roots could not be read: %s", exc)
                return None
        _log.warning("the client did not answer roots/list within %g s", sum(ROOTS_WAITS))
        return None

    def _tell_roots(self) -> None:
        declared = [c.roots for c in self._clients.values() if c.roots is not None]
        if not declared:
            self.source.set_client_roots(None)
            return
        shared = common(declared)
        if not shared and len(declared) > 1:
            _log.warning(
                "the %d client sessions that declared roots share no directory: the upstream "
                "servers are told no roots",
                len(declared),
            )
        self.source.set_client_roots(shared)

    def roots(self) -> tuple[Path, ...] | None:
        """What the upstreams are told now (``None``: no client declared roots)."""
        declared = [c.roots for c in self._clients.values() if c.roots is not None]
        return common(declared) if declared else None

    # -- subscriptions --------------------------------------------------------------------
    async def subscribe(self, ctx: Any, server: str, uri: str) -> None:
        """The client of ``ctx`` wants ``notifications/resources/updated`` of ``uri`` on
        ``server``; an :class:`MCPError` (one line) when the server cannot say."""
        client = self._client(ctx)
        if client is None:
            raise MCPError(
                types.INVALID_REQUEST,
                "resources/subscribe needs a session (the initialize handshake); "
                "with MCP 2026-07-28 listen with subscriptions/listen",
            )
        key = (server, uri)
        if key in client.subscribed:
            return
        client.subscribed.add(key)
        self._wanted[key] += 1
        if self._wanted[key] > 1:
            return
        try:
            await self.source.subscribe_resource(server, uri)
        except (ResourceError, KeyError) as exc:
            client.subscribed.discard(key)
            self._drop(key)
            raise MCPError(types.INVALID_PARAMS, str(exc).strip("'\"")) from None

    async def unsubscribe(self, ctx: Any, server: str, uri: str) -> None:
        """Undo :meth:`subscribe` for the client of ``ctx`` (unknown URIs: nothing)."""
        client = self._client(ctx)
        key = (server, uri)
        if client is None or key not in client.subscribed:
            return
        client.subscribed.discard(key)
        if self._drop(key):
            await self._unsubscribe_upstream(key)

    def _drop(self, key: tuple[str, str]) -> bool:
        """One client fewer wants ``key``; whether none does now."""
        self._wanted[key] -= 1
        if self._wanted[key] > 0:
            return False
        del self._wanted[key]
        return True

    async def _unsubscribe_upstream(self, key: tuple[str, str]) -> None:
        try:
            await self.source.unsubscribe_resource(*key)
        except ResourceError as exc:  # the server is gone: nothing to unsubscribe
            _log.info("%s", exc)

    def subscribed(self, ctx: Any) -> set[tuple[str, str]]:
        """The ``(server, upstream URI)`` the client of ``ctx`` subscribed to."""
        client = self._client(ctx)
        return set(client.subscribed) if client is not None else set()

    # -- the end of a client ----------------------------------------------------------------
    def _ended(self, connection: Any) -> None:
        client = self._clients.pop(connection, None)
        if client is None:
            return
        gone = [key for key in client.subscribed if self._drop(key)]
        client.subscribed.clear()
        if gone:
            self._spawn(self._unsubscribe_all(gone))
        if client.roots is not None:
            self._tell_roots()

    async def _unsubscribe_all(self, keys: list[tuple[str, str]]) -> None:
        for key in keys:
            await self._unsubscribe_upstream(key)

    # -- upstream notifications -----------------------------------------------------------
    async def _upstream(self, event: Event) -> None:
        if isinstance(event, McpResourceUpdated):
            key = (event.server, event.uri)
            shown = gateway_uri(event.server, event.uri)
            for client in [c for c in self._clients.values() if key in c.subscribed]:
                await _send(client, client.session.send_resource_updated(shown))
        elif isinstance(event, McpResourceListChanged):
            for client in list(self._clients.values()):
                await _send(client, client.session.send_resource_list_changed())
        elif isinstance(event, McpPromptListChanged):
            for client in list(self._clients.values()):
                await _send(client, client.session.send_prompt_list_changed())


async def _send(client: _Client, sending: Any) -> None:
    try:
        await sending
    except Exception as exc:  # the client went away: its connection's end drops it
        _log.debug("notification not sent: %s", exc)
