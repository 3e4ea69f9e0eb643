"""Approvals asked of stateless clients, answerable by way of any gateway process.

A call of a client of the stateless protocol (MCP 2026-07-28) that needs approval ends
its round ``input_required`` (:mod:`.input_required`); the client's retry, with the
sealed ``requestState``, may come to another process than the one that asked. With a
shared session store the ask is written there too, and the retry, on whichever process,
*takes* it from the store: one ``DELETE ... RETURNING`` that holds only for the same
session, the same call (name and arguments), before the ask expires. So an ask is
answered at most once over all processes (a replay to another process finds nothing),
and the process that asked, when the ask's time is up, denies it (audited) only if no
process took it. The seal's key is shared too (:mod:`.shared`), so every process opens
what another sealed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

import mcp_types as types

from ..approvals import ApprovalAnswer, PendingApproval
from ..tools import Tool
from ..workflows.store import StoreError
from .input_required import InputAsks, answer_in, fingerprint, invalid, state_in
from .session import GatewaySession
from .shared import SharedSessions

__all__ = ["SharedAsks"]

_log = logging.getLogger("tooldeck.gateway")


class SharedAsks:
    """The ``input_required`` asks of this process (``asks``), kept in ``shared`` too
    (a store that fails is one line to the client: :meth:`SharedSessions.guarded`)."""

    def __init__(self, asks: InputAsks, shared: SharedSessions) -> None:
        self.asks = asks
        self.shared = shared
        self.table = shared.table

    async def ask(
        self,
        session: GatewaySession,
        params: types.CallToolRequestParams,
        pending: PendingApproval,
        shown: Callable[[Tool], str],
    ) -> types.InputRequiredResult:
        result = self.asks.ask(session, params, pending, shown)
        ask_id = str(json.loads(result.request_state or "{}").get("ask"))
        call_id = pending.requests[0].call.call_id
        put = self.table.put_ask(ask_id, session.id, call_id, fingerprint(params), self.asks.ttl)
        try:
            await self.shared.guarded(put)
        except BaseException:
            self.asks.forget(ask_id)  # not shared: not asked at all
            raise
        return result

    async def answer(
        self, session: GatewaySession, params: types.CallToolRequestParams
    ) -> tuple[str, ApprovalAnswer]:
        """The call id and the answer of a retry; its ask taken from the store (once, by
        whichever process). Raises ``Invalid or expired requestState`` otherwise."""
        state = state_in(params)
        ask_id = str(state.get("ask"))
        if state.get("session") != session.id:
            raise invalid("an ask of another session")
        take = self.table.take_ask(ask_id, session.id, fingerprint(params))
        call_id = await self.shared.guarded(take)
        if call_id is None:
            if self.asks.expired(ask_id):
                self.asks.answer(session, params)  # denied, audited: expired
            raise invalid("no such ask (answered already, expired, or another call)")
        self.asks.forget(ask_id)  # taken: this process's copy (if it asked) goes
        return call_id, answer_in(params)

    async def expire(self) -> None:
        """Deny (audited) the asks of this process whose time is up, unless another
        process took them meanwhile (with the store gone, they are denied here)."""
        for ask_id in self.asks.due():
            try:
                if not await self.table.drop_ask(ask_id):
                    self.asks.forget(ask_id)
            except StoreError as exc:
                _log.warning("the session store failed: %s", exc)
        self.asks.expire()
