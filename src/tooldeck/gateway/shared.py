"""Client sessions shared by several gateway processes (``tooldeck serve --sessions``).

Each process keeps the sessions it serves in memory, as without a store; around every
request the session is brought up to date from the store (:meth:`SharedSessions.load`:
the tools found and the grants another process wrote) and what this request changed is
merged back (:meth:`SharedSessions.save`: the tools used, in order, and the grants
added; :func:`.session_store.op_merge`). A session made by another process (or before a
restart) is served under its own id, so its stored results, audit log and evidence
record (under ``--state``, which the processes share) are the same files.

A client's answer to an approval form (elicitation) that reaches another process than
the one whose call waits for it is passed on there (:mod:`.replies`).

What lives where: the store holds the sessions' keys and owners, their found tools and
grants, the clients' ``initialize`` parameters, and the key that seals the
``requestState`` of ``input_required`` rounds (so any process can open what another
sealed). The ``--state`` folder holds the stored results, audit logs, evidence records
and out-of-band approvals: processes on one machine share it as it is; on several
machines it must be one shared folder.
"""

from __future__ import annotations

import logging
import secrets
import weakref
from collections.abc import AsyncIterator, Awaitable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import anyio
import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import principal_components
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError

from ..errors import TooldeckError
from ..offload import OffloadStore
from ..policy import Grant, GrantStore, PolicyError
from ..policy.grants import grant_of
from ..workflows.store import StoreError, WorkflowStore
from .replies import Replies
from .session import GatewaySession, remember
from .session_store import SessionRecord, SessionTable, open_session_store

__all__ = ["EXPIRE_SECONDS", "SEALING_SECRET", "SessionGone", "SharedSessions", "http_key"]

_T = TypeVar("_T")
Headers = Sequence[tuple[bytes, bytes]]

_log = logging.getLogger("tooldeck.gateway")
SEALING_SECRET = "request-state-key"
"""The shared secret that seals ``requestState`` (32 bytes, hex)."""
EXPIRE_SECONDS = 60.0
"""How often a process forgets the sessions nobody used for the idle time."""


class SessionGone(TooldeckError, LookupError):
    """The shared session of a request is no longer in the store (it ended or expired)."""


@dataclass
class _Sync:
    """What one process changed in a session and has not written to the store yet."""

    key: str
    uses: list[list[str]] = field(default_factory=list)
    known: set[str] = field(default_factory=set)  # grant ids read from the store


class SharedSessions:
    """The gateway's sessions in ``store`` (open), used for ``idle`` seconds at most."""

    def __init__(self, store: WorkflowStore, sealing_key: bytes, idle: float) -> None:
        self.store = store
        self.table = SessionTable(store)
        self.sealing_key = sealing_key
        self.idle = idle
        self._syncs: weakref.WeakKeyDictionary[GatewaySession, _Sync] = weakref.WeakKeyDictionary()
        self._ticked = 0.0
        self.replies = Replies(self.table)  # a client's answers, to the process that asked

    @classmethod
    @asynccontextmanager
    async def opened(cls, where: str, idle: float) -> AsyncIterator[SharedSessions]:
        """The store ``--sessions WHERE`` names, open (raises
        :class:`~tooldeck.workflows.store.StoreError` saying why it cannot be)."""
        store = open_session_store(where)
        await store.open()
        try:
            key = await SessionTable(store).secret(SEALING_SECRET)
            yield cls(store, bytes.fromhex(key), idle)
        finally:
            await store.close()

    @property
    def location(self) -> str:
        return self.store.location

    # -- sessions ---------------------------------------------------------------------
    async def record_http(
        self,
        session_id: str,
        *,
        owner: dict[str, Any] | None,
        protocol: str | None,
        client: dict[str, Any] | None,
    ) -> SessionRecord:
        """An HTTP session was initialized here: written, so any process serves it."""
        record = SessionRecord(
            key=http_key(session_id),
            id="gw-" + secrets.token_hex(8),
            owner=owner,
            protocol=protocol,
            client=client,
        )
        return await self.table.create(record)

    async def find(self, key: str) -> SessionRecord | None:
        return await self.table.get(key)

    async def find_or_make(self, key: str, owner: dict[str, Any] | None) -> SessionRecord:
        """The session of ``key`` (a principal's), made now if there is none."""
        record = await self.table.get(key)
        if record is None:
            record = await self.table.create(
                SessionRecord(key=key, id="gw-" + secrets.token_hex(8), owner=owner)
            )
        return record

    def attach(self, session: GatewaySession, record: SessionRecord) -> None:
        """``session`` (made with the record's id and an in-memory :class:`GrantStore`)
        is the one of ``record`` from now on: its uses are kept for :meth:`save`, and
        its stored results outlive this process's hold on it."""
        sync = self._syncs.get(session)
        if sync is None:
            sync = self._syncs[session] = _Sync(record.key)
            session.on_use = sync.uses.append
            session.keep_results = True
            # call ids (pending approval files, audit, evidence) unique over processes
            session.call_prefix = f"{session.id}-{secrets.token_hex(3)}"
        self._apply(session, sync, record)

    async def load(self, session: GatewaySession) -> None:
        """Bring ``session`` up to date with the store; :class:`SessionGone` if it ended."""
        sync = self._syncs[session]
        record = await self.table.get(sync.key)
        if record is None:
            raise SessionGone(sync.key)
        self._apply(session, sync, record)

    async def save(self, session: GatewaySession) -> None:
        """Write what this process changed in ``session`` (nothing to write: no call)."""
        sync = self._syncs.get(session)
        if sync is None:
            return
        added = [g.as_dict() for g in session.policy.grants.grants if g.id not in sync.known]
        if not sync.uses and not added:
            return
        uses, sync.uses[:] = list(sync.uses), []
        try:
            record = await self.table.merge(sync.key, uses, added, session.max_found)
        except BaseException:
            sync.uses[:0] = uses  # not written: kept for the next save
            raise
        if record is not None:
            self._apply(session, sync, record)

    def _apply(self, session: GatewaySession, sync: _Sync, record: SessionRecord) -> None:
        loaded, used = dict.fromkeys(record.loaded), dict.fromkeys(record.used)
        for names in sync.uses:  # this process's uses not written yet stay
            remember(loaded, used, names, session.max_found)
        session.restore_found(list(loaded), list(used))
        store = session.policy.grants
        grants: dict[str, Grant] = {}
        for i, data in enumerate(record.grants):
            try:
                grant = grant_of(data, f"{record.key} grants[{i}]")
            except PolicyError as exc:  # fail closed: a grant that cannot be read allows nothing
                _log.warning("a shared grant was not read: %s", exc)
                continue
            grants[grant.id] = grant
        for grant in store.grants:  # added here and not written yet
            if grant.id not in sync.known and grant.id not in grants:
                grants[grant.id] = grant
        sync.known = {str(g.get("id")) for g in record.grants}
        store.replace(tuple(grants.values()))

    async def ended(self, session_id: str) -> None:
        """The client ended its HTTP session (``DELETE``): every process forgets it."""
        await self.table.delete(http_key(session_id))

    async def expire(self, state: Path | None) -> None:
        """Forget the sessions nobody used for the idle time; their stored results go."""
        for session_id in await self.table.expire(self.idle):
            _log.info("shared session %s ended after %g s unused", session_id, self.idle)
            if state is not None:
                try:
                    OffloadStore(state, session_id, threshold_tokens=0).cleanup()
                except OSError as exc:
                    _log.warning("the stored results of %s were not removed: %s", session_id, exc)

    # -- around a request (:meth:`.server.Gateway._client`) -----------------------------
    async def guarded(self, step: Awaitable[_T]) -> _T:
        """A step of the store; its failure is one line to the client (an MCP error)."""
        try:
            return await step
        except SessionGone:
            raise gone() from None
        except StoreError as exc:
            _log.warning("the session store failed: %s", exc)
            raise MCPError(
                types.INTERNAL_ERROR, f"the gateway's session store failed: {exc}"
            ) from None

    async def of_http(self, connection: Any) -> SessionRecord:
        """The record of the HTTP session of ``connection`` (the SDK's), opened by this
        process or another; an MCP error if it ended."""
        http_id = str(getattr(connection, "session_id", None))
        record = await self.guarded(self.find(http_key(http_id)))
        if record is None:
            raise gone()
        return record

    async def of_principal(self, principal: str) -> SessionRecord:
        """The record of the session of an OAuth principal (stateless protocol)."""
        return await self.guarded(self.find_or_make(f"principal:{principal}", request_owner()))

    @asynccontextmanager
    async def around(self, session: GatewaySession, *, fresh: bool) -> AsyncIterator[None]:
        """Bring ``session`` up to date (unless ``fresh``: just attached), then write
        what the request changed, whatever became of it."""
        if not fresh:
            await self.guarded(self.load(session))
        try:
            yield
        finally:
            await self.guarded(self.save(session))

    async def initialized(self, ctx: ServerRequestContext[Any], result: Any) -> None:
        """An ``initialize`` over HTTP was answered ``result``: the session is written
        (before the client has the answer), so any process serves its next request."""
        http_id = getattr(getattr(ctx.session, "_connection", None), "session_id", None)
        if http_id is None or not isinstance(result, dict):
            return
        protocol = result.get("protocolVersion")
        await self.guarded(
            self.record_http(
                http_id,
                owner=request_owner(),
                protocol=protocol if isinstance(protocol, str) else None,
                client=dict(ctx.params) if ctx.params is not None else None,
            )
        )

    async def tick(self, state: Path | None) -> None:
        """Now and then (every :data:`EXPIRE_SECONDS`): forget the sessions nobody used
        for the idle time."""
        now = anyio.current_time()
        if now - self._ticked < EXPIRE_SECONDS:
            return
        self._ticked = now
        try:
            await self.expire(state)
        except StoreError as exc:
            _log.warning("the session store failed: %s", exc)

    def serve(self, manager: StreamableHTTPSessionManager, url: str) -> None:
        """This process serves HTTP at ``url`` with ``manager``: a session another process
        opened is served here too (:mod:`.adopt`), and answers are passed on here."""
        from .adopt import adopt_sessions

        self.replies.url = url

        async def find(http_id: str) -> SessionRecord | None:
            return await self.find(http_key(http_id))

        async def exists(http_id: str) -> bool:
            return await self.table.exists(http_key(http_id))

        async def pass_on(
            http_id: str, body: bytes, headers: Sequence[tuple[bytes, bytes]]
        ) -> None:
            await self.replies.pass_on(http_key(http_id), body, headers)

        adopt_sessions(manager, find, exists, self.ended, pass_on)

    @staticmethod
    def grant_store() -> GrantStore:
        """The grants of a shared session: in memory, kept in step with the store."""
        return GrantStore(None)


def http_key(session_id: str) -> str:
    return f"http:{session_id}"


def request_owner() -> dict[str, Any] | None:
    """The OAuth principal of this request (as the SDK compares session owners), if any."""
    token = get_access_token()
    if token is None:
        return None
    client_id, issuer, subject = principal_components(token)
    return {"client_id": client_id, "issuer": issuer, "subject": subject}


def gone() -> MCPError:
    return MCPError(
        types.INVALID_REQUEST,
        "this session ended (the client closed it, or it was unused too long); "
        "start a new one (initialize)",
    )
