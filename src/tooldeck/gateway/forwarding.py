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
- every other request (an approval of a call) goes to the asker, unchanged;
- a question waits only while the call that asked runs: when the client cancels its call
  (``notifications/cancelled``) or the call ends otherwise, the question ends at once
  (:data:`CANCELLED`; :meth:`Running.asking`), not at the upstream's timeout.

An upstream's sampling request (:mod:`.sampling`) goes through the same two parts: the
:class:`Running` guard, and the :class:`Forwarding` of the call (its client, its request).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp.server.session import ServerSession

from ..approvals import ApprovalAnswer, ApprovalRequest, Approver
from ..mcp import ElicitationRequest
from ..mcp.asking import current_route

__all__ = [
    "AMBIGUOUS",
    "CANCELLED",
    "NO_QUESTIONS",
    "Forwarding",
    "Running",
    "forwarding",
    "guessed",
    "takes_questions",
]

_log = logging.getLogger("tooldeck.gateway")
NO_QUESTIONS = "this MCP client cannot answer a server's questions (it declared no elicitation)"
NO_URL = "URL-mode questions are not forwarded by the gateway"
AMBIGUOUS = (
    "a call of another client session is running on this server: which call asked "
    "cannot be told apart, so the question is not forwarded"
)
CANCELLED = "the client cancelled its call while the question waited"


def guessed() -> bool:
    """Whether the upstream request being answered was routed without the protocol's link
    to its call (stdio before 2026-07-28; :func:`tooldeck.mcp.asking.current_route`): only
    then can another session's running call make it ambiguous. One routed exactly
    (streamable HTTP, a call's own rounds) went to the call that asked."""
    route = current_route()
    return route is None or route.how != "exact"


class Running:
    """Per upstream server, how many calls each gateway session has running there, and
    the questions those calls' server asked that wait for an answer."""

    def __init__(self) -> None:
        self._on: dict[str, Counter[str]] = {}
        self._asked: dict[tuple[str, str], set[anyio.CancelScope]] = {}

    @contextmanager
    def call(self, server: str | None, session_id: str) -> Iterator[None]:
        """While the block runs, ``session_id`` has a call running on ``server``; when its
        last call there ends (done, failed or cancelled), its waiting questions end."""
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
                for scope in self._asked.pop((server, session_id), ()):
                    scope.cancel()
            if not sessions:
                self._on.pop(server, None)

    def others(self, server: str, session_id: str) -> bool:
        """Whether a session other than ``session_id`` has a call running on ``server``."""
        return any(s != session_id for s in self._on.get(server, ()))

    @contextmanager
    def asking(self, server: str, session_id: str) -> Iterator[anyio.CancelScope]:
        """A scope for a question ``server`` asks a call of ``session_id``: cancelled when
        that session's calls there have ended (at once if none runs); ``cancelled_caught``
        says so after the block."""
        with anyio.CancelScope() as scope:
            if session_id not in self._on.get(server, ()):
                scope.cancel()
            waiting = self._asked.setdefault((server, session_id), set())
            waiting.add(scope)
            try:
                yield scope
            finally:
                waiting.discard(scope)
                if not waiting and self._asked.get((server, session_id)) is waiting:
                    del self._asked[(server, session_id)]


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
    docstring); ``client`` None: the call has no back channel; ``running``: the
    gateway's :class:`Running` and this call's session id. The approver of one call;
    :mod:`.sampling` finds it (inside the session policy's approver) to reach the same
    client about the same request."""

    def __init__(
        self,
        asker: Approver,
        client: ServerSession | None,
        request_id: Any,
        running: tuple[Running, str] | None = None,
    ) -> None:
        self.asker = asker
        self.client = client
        self.request_id = request_id
        self.running = running
        self.forwards = takes_questions(client)

    def ambiguous(self, server: str) -> bool:
        """Whether another session's call runs on ``server`` (who asked is unknown)."""
        running = self.running
        return guessed() and running is not None and running[0].others(server, running[1])

    async def _question(self, question: ElicitationRequest) -> ApprovalAnswer:
        if self.ambiguous(question.server):
            return ApprovalAnswer(False, AMBIGUOUS)
        if not self.forwards or self.client is None:
            return ApprovalAnswer(False, NO_QUESTIONS)
        if self.running is None:
            return await _ask(self.client, self.request_id, question)
        running, session_id = self.running
        with running.asking(question.server, session_id):
            return await _ask(self.client, self.request_id, question)
        return ApprovalAnswer(False, CANCELLED)  # the call ended: so did the question

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
    running: tuple[Running, str] | None = None,
) -> Approver:
    """The :class:`Forwarding` approver of one call."""
    return Forwarding(asker, client, request_id, running)
