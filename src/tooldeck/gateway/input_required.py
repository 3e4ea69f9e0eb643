"""Approvals asked of a stateless client (MCP 2026-07-28): an ``input_required`` round.

A 2026-07-28 server cannot send a request to its client in the middle of a call (there
is no back channel), so an ``elicitation/create`` cannot be sent the way it is to a
handshake-era client. Instead, a call the policy asks about ends its first round with an
``InputRequiredResult``: the same approval form (:data:`.approval.APPROVAL_SCHEMA`) as an
embedded elicitation request, and a ``requestState``. Nothing of the call has run (the
approver raised :class:`~tooldeck.approvals.PendingApproval`). The client asks its user
and retries the same call with the answer (``inputResponses``) and the state echoed; the
call, under the same call id, is then judged by the policy again and runs only if the
answer approves (:func:`.approval.answer_of`: ``accept`` with ``approve: true``). The
answer passes through the session's ``PolicyApprover`` like any human's: approve-always
recorded (never for a DANGEROUS tool), audited as given by ``mcp-client-user``.

What makes a retry trustworthy:

- the SDK's ``RequestStateBoundary`` seals the state (AES-256-GCM under a key made when
  the gateway starts), binds it to the request (tool name and a digest of the
  arguments), to the OAuth principal when there is one, and to an expiry
  (:data:`ASK_SECONDS`); a state that fails any of it is refused with ``-32602 Invalid or
  expired requestState`` before the gateway sees the call;
- inside the seal, the state names one waiting ask of this session by a random id. The
  first retry takes it (:meth:`InputAsks.answer`); a second retry with the same state (a
  replay), a state of another session, or one whose ask is gone, is refused the same
  way. So each ask is answered at most once and the call runs at most once; a retry
  without a state is a new call, asked anew (answers alone approve nothing);
- an ask nobody answers within :data:`ASK_SECONDS`, or whose session ends first, is
  audited as a deny (the call never ran).
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError

from ..approvals import ApprovalAnswer, ApprovalRequest, PendingApproval, not_answered
from ..policy import canonical_json
from ..tools import Tool
from .approval import APPROVAL_SCHEMA, answer_of, approval_message
from .session import GatewaySession

__all__ = [
    "ASK_SECONDS",
    "FORM_KEY",
    "InputAsks",
    "answer_in",
    "fingerprint",
    "invalid",
    "state_in",
]

_log = logging.getLogger("tooldeck.gateway")
ASK_SECONDS = 600.0
"""Seconds an ask waits for the client's retry (the sealed state's lifetime too)."""
FORM_KEY = "approval"
"""The key of the approval form in ``inputRequests`` (and of its answer)."""
_FORMAT = "tooldeck.ask/1"
_LIMIT = 1024  # asks waiting at once, over all sessions: the oldest is dropped (denied)


def invalid(reason: str) -> MCPError:
    """The SDK boundary's own refusal, so a replay looks like any bad state."""
    _log.warning("requestState refused: %s", reason)
    return MCPError(
        types.INVALID_PARAMS,
        "Invalid or expired requestState",
        {"reason": "invalid_request_state"},
    )


def fingerprint(params: types.CallToolRequestParams) -> str:
    """The call a retry must repeat: the tool's name and arguments, canonical."""
    return canonical_json({"name": params.name, "arguments": params.arguments or {}})


def state_in(params: types.CallToolRequestParams) -> dict[str, Any]:
    """The gateway's ask that the (unsealed) ``requestState`` of a retry names."""
    try:
        state: Any = json.loads(params.request_state or "")
    except ValueError:
        raise invalid("not JSON") from None
    if not isinstance(state, dict) or state.get("format") != _FORMAT:
        raise invalid("not a gateway ask")
    return state


def answer_in(params: types.CallToolRequestParams) -> ApprovalAnswer:
    """The human's answer a retry carries (none, or a malformed one, never approves)."""
    response = (params.input_responses or {}).get(FORM_KEY)
    if isinstance(response, types.ElicitResult):
        return answer_of(response)
    return not_answered("no answer was given (an empty answer never approves)")


@dataclass(frozen=True, slots=True)
class _Ask:
    session: GatewaySession
    request: ApprovalRequest
    call: str  # the request's name and arguments, as the client sent them
    until: float


class InputAsks:
    """The asks of every stateless session that wait for their client's retry."""

    def __init__(self, ttl: float = ASK_SECONDS, limit: int = _LIMIT) -> None:
        self.ttl = ttl
        self.limit = limit
        self._asks: dict[str, _Ask] = {}

    def __len__(self) -> int:
        return len(self._asks)

    def ask(
        self,
        session: GatewaySession,
        params: types.CallToolRequestParams,
        pending: PendingApproval,
        shown: Callable[[Tool], str],
    ) -> types.InputRequiredResult:
        """The first round's answer to a call that waits for approval (``pending``)."""
        request = pending.requests[0]  # one call per request: one ask
        self.expire()
        while len(self._asks) >= self.limit:
            self._give_up(next(iter(self._asks)), "too many calls waited for an answer")
        ask_id = secrets.token_urlsafe(16)
        until = time.monotonic() + self.ttl
        self._asks[ask_id] = _Ask(session, request, fingerprint(params), until)
        form = types.ElicitRequestFormParams(
            message=approval_message(request, shown(request.tool)),
            requested_schema=APPROVAL_SCHEMA,
        )
        state = {"format": _FORMAT, "ask": ask_id, "session": session.id}
        _log.info("%s waits for its client's answer (input_required)", request.call.call_id)
        return types.InputRequiredResult(
            input_requests={FORM_KEY: types.ElicitRequest(params=form)},
            request_state=json.dumps(state),
        )

    def answer(
        self, session: GatewaySession, params: types.CallToolRequestParams
    ) -> tuple[str, ApprovalAnswer]:
        """The call id and the answer a retry carries; takes its ask (once).

        ``params.request_state`` is the plaintext the SDK's boundary unsealed. Raises
        :class:`MCPError` (``Invalid or expired requestState``) for a state that names
        no waiting ask of ``session``, or a call that is not the one asked about.
        """
        state = state_in(params)
        ask_id = str(state.get("ask"))
        ask = self._asks.get(ask_id)
        if ask is None:
            raise invalid("no such ask (answered already, expired, or never made)")
        if ask.session is not session or state.get("session") != session.id:
            raise invalid("an ask of another session")
        if ask.call != fingerprint(params):
            raise invalid("another call than the one asked about")
        del self._asks[ask_id]
        if ask.until <= time.monotonic():
            self._audit(ask, "the answer came after the ask expired")
            raise invalid("expired")
        return ask.request.call.call_id, answer_in(params)

    def forget(self, ask_id: str) -> bool:
        """Drop ``ask_id`` without a word (answered by way of another gateway process)."""
        return self._asks.pop(ask_id, None) is not None

    def expired(self, ask_id: str, now: float | None = None) -> bool:
        """Whether ``ask_id`` is held here and its time is up."""
        ask = self._asks.get(ask_id)
        return ask is not None and ask.until <= (time.monotonic() if now is None else now)

    def let_go(self, session: GatewaySession) -> None:
        """Drop the asks of ``session`` without a word: this process lets go of a session
        that lives on elsewhere (a shared store keeps the asks for its other processes)."""
        for ask_id in [k for k, a in self._asks.items() if a.session is session]:
            del self._asks[ask_id]

    def due(self, now: float | None = None) -> list[str]:
        """The asks whose time is up (:meth:`expire` denies them)."""
        now = time.monotonic() if now is None else now
        return [k for k, a in self._asks.items() if a.until <= now]

    def waiting(self, session: GatewaySession) -> bool:
        """Whether an ask of ``session`` waits for its client's answer."""
        return any(a.session is session for a in self._asks.values())

    def expire(self, now: float | None = None) -> None:
        """Deny (audited) the asks whose time is up."""
        now = time.monotonic() if now is None else now
        for ask_id in [k for k, a in self._asks.items() if a.until <= now]:
            self._give_up(ask_id, f"the client did not answer within {self.ttl:g} s")

    def end(self, session: GatewaySession) -> None:
        """Deny (audited) the asks of a session that ended."""
        for ask_id in [k for k, a in self._asks.items() if a.session is session]:
            self._give_up(ask_id, "the gateway session ended before the client answered")

    def _give_up(self, ask_id: str, why: str) -> None:
        self._audit(self._asks.pop(ask_id), why)

    @staticmethod
    def _audit(ask: _Ask, why: str) -> None:
        ask.session.gave_up(ask.request, f"{why}; the call was not run")
