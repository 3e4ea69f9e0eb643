"""An upstream server's question (``elicitation/create``) forwarded to the gateway's client.

The gateway's :class:`~tooldeck.mcp.McpSource` declares elicitation to its upstream
servers (``elicitation=True``). A question an upstream asks while one of its tools runs
for a client is answered as the library answers any server's question
(:mod:`tooldeck.mcp.elicitation`): by the approver of the session whose call is running,
after that session's policy judged it (``<server>__elicitation_create``; a rule can deny
it), the answer audited and checked against the requested schema before it goes back.

That approver is the one :func:`forwarding` wraps around the call's approval asker:

- a question (an :class:`~tooldeck.mcp.ElicitationRequest`) goes, as the upstream asked
  it (its message, its schema), to the client of **this call's** MCP session
  (``elicitation/create``, related to the client's ``tools/call``), never to another
  client; its ``accept`` with content is the answer, ``decline``/``cancel`` a decline;
- a client that did not declare form elicitation (or a call without a back channel: the
  stateless protocol, the gateway's own stdio call path) gets it declined at once, with
  why (:data:`NO_QUESTIONS`); URL-mode questions are declined (not forwarded);
- which call asked is the library's routing (:mod:`tooldeck.mcp.asking`): exactly where the
  protocol links the question to its call (an HTTP upstream, the 2026-07-28 rounds), else
  the one session with calls running on that upstream; while calls of several sessions
  run there (a stdio upstream before 2026-07-28 names no call) the question is declined,
  never sent to a client that may not be the one asked;
- every other request (an approval of a call) goes to the asker, unchanged;
- a question waits only while the call that asked runs: when the client cancels its call
  (``notifications/cancelled``) or the call ends otherwise, the library ends the question
  at once (:data:`tooldeck.mcp.asking.ENDED`), not at the upstream's timeout.

An upstream's sampling request (:mod:`.sampling`) is routed the same way and reaches the
same :class:`Forwarding` of the call (its client, its request).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import mcp_types as types
from mcp.server.session import ServerSession

from ..approvals import ApprovalAnswer, ApprovalRequest, Approver
from ..mcp import ElicitationRequest

__all__ = [
    "NO_QUESTIONS",
    "Forwarding",
    "forwarding",
    "takes_questions",
]

_log = logging.getLogger("tooldeck.gateway")
NO_QUESTIONS = "this MCP client cannot answer a server's questions (it declared no elicitation)"
NO_URL = "URL-mode questions are not forwarded by the gateway"


def takes_questions(client: ServerSession | None) -> bool:
    """Whether ``client`` declared form elicitation (an empty capability means form)."""
    if client is None:
        return False
    params = client.client_params
    caps = params.capabilities if params is not None else None
    found = caps.elicitation if caps is not None else None
    return found is not None and (found.form is not None or found.url is None)


async def _ask(
    client: ServerSession, request_id: Any, question: ElicitationRequest
) -> ApprovalAnswer:
    if question.mode != "form":
        return ApprovalAnswer(False, NO_URL)
    try:
        result = await client.elicit_form(
            message=question.message,
            requested_schema=question.requested_schema,
            related_request_id=request_id,
        )
    except Exception as exc:  # the client's error: a decline, never a hang
        _log.warning("question of %s not forwarded: %s", question.server, exc)
        return ApprovalAnswer(False, f"the client did not answer ({type(exc).__name__})")
    return answer_of(result)


def answer_of(result: types.ElicitResult) -> ApprovalAnswer:
    """The client's answer as the library's question machinery takes it."""
    if result.action == "accept":
        return ApprovalAnswer(True, arguments=dict(result.content or {}))
    return ApprovalAnswer(False, f"the client's user chose {result.action}")


class Forwarding:
    """``asker``, with an upstream's questions forwarded to ``client`` (see the module
    docstring); ``client`` None: the call has no back channel. The approver of one call;
    :mod:`.sampling` finds it (inside the session policy's approver) to reach the same
    client about the same request."""

    def __init__(
        self,
        asker: Approver,
        client: ServerSession | None,
        request_id: Any,
    ) -> None:
        self.asker = asker
        self.client = client
        self.request_id = request_id
        self.forwards = takes_questions(client)

    async def _question(self, question: ElicitationRequest) -> ApprovalAnswer:
        if not self.forwards or self.client is None:
            return ApprovalAnswer(False, NO_QUESTIONS)
        return await _ask(self.client, self.request_id, question)

    async def __call__(self, requests: Sequence[ApprovalRequest]) -> list[ApprovalAnswer]:
        answers: dict[int, ApprovalAnswer] = {}
        rest: list[tuple[int, ApprovalRequest]] = []
        for i, request in enumerate(requests):
            question = request.params
            if isinstance(question, ElicitationRequest):
                answers[i] = await self._question(question)
            else:
                rest.append((i, request))
        if rest:
            asked = await self.asker([r for _, r in rest])
            answers.update((i, answer) for (i, _), answer in zip(rest, asked, strict=False))
        return [
            answers.get(i, ApprovalAnswer(False, "no answer was given"))
            for i in range(len(requests))
        ]


def forwarding(
    asker: Approver,
    client: ServerSession | None,
    request_id: Any,
) -> Approver:
    """The :class:`Forwarding` approver of one call."""
    return Forwarding(asker, client, request_id)
