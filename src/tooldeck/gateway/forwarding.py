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
- while a call of **another** client session runs on the same upstream server, which call
  asked cannot be told apart (the upstream's request names none; the library answers with
  the latest call's session): the question is declined (:data:`AMBIGUOUS`), never sent
  to a client that may not be the one asked. :class:`Running` keeps, per upstream server,
  the sessions with a call running there;
- every other request (an approval of a call) goes to the asker, unchanged.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import mcp_types as types
from mcp.server.session import ServerSession

from ..approvals import ApprovalAnswer, ApprovalRequest, Approver
from ..mcp import ElicitationRequest

__all__ = ["AMBIGUOUS", "NO_QUESTIONS", "Running", "forwarding", "takes_questions"]

_log = logging.getLogger("tooldeck.gateway")
NO_QUESTIONS = "this MCP client cannot answer a server's questions (it declared no elicitation)"
NO_URL = "URL-mode questions are not forwarded by the gateway"
AMBIGUOUS = (
    "a call of another client session is running on this server: which call asked "
    "cannot be told apart, so the question is not forwarded"
)


class Running:
    """Per upstream server, how many calls each gateway session has running there."""

    def __init__(self) -> None:
        self._on: dict[str, Counter[str]] = {}

    @contextmanager
    def call(self, server: str | None, session_id: str) -> Iterator[None]:
        """While the block runs, ``session_id`` has a call running on ``server``."""
        if server is None:  # not an upstream tool
            yield
            return
        sessions = self._on.setdefault(server, Counter())
        sessions[session_id] += 1
        try:
            yield
        finally:
            sessions[session_id] -= 1
            if sessions[session_id] <= 0:
                del sessions[session_id]
            if not sessions:
                self._on.pop(server, None)

    def others(self, server: str, session_id: str) -> bool:
        """Whether a session other than ``session_id`` has a call running on ``server``."""
        return any(s != session_id for s in self._on.get(server, ()))


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


def forwarding(
    asker: Approver,
    client: ServerSession | None,
    request_id: Any,
    running: tuple[Running, str] | None = None,
) -> Approver:
    """``asker``, with an upstream's questions forwarded to ``client`` (see the module
    docstring); ``client`` None: the call has no back channel; ``running``: the
    gateway's :class:`Running` and this call's session id."""
    forwards = takes_questions(client)

    async def ask(requests: Sequence[ApprovalRequest]) -> list[ApprovalAnswer]:
        answers: dict[int, ApprovalAnswer] = {}
        rest: list[tuple[int, ApprovalRequest]] = []
        for i, request in enumerate(requests):
            question = request.params
            if not isinstance(question, ElicitationRequest):
                rest.append((i, request))
            elif running is not None and running[0].others(question.server, running[1]):
                answers[i] = ApprovalAnswer(False, AMBIGUOUS)
            elif forwards and client is not None:
                answers[i] = await _ask(client, request_id, question)
            else:
                answers[i] = ApprovalAnswer(False, NO_QUESTIONS)
        if rest:
            asked = await asker([r for _, r in rest])
            answers.update((i, answer) for (i, _), answer in zip(rest, asked, strict=False))
        return [
            answers.get(i, ApprovalAnswer(False, "no answer was given"))
            for i in range(len(requests))
        ]

    return ask
