"""How the gateway asks a human: MCP elicitation, ``tooldeck approve`` out of band, or nobody.

The gateway's policy chain (:mod:`tooldeck.policy`) decides every call; a call it says
*ask* about is put to a human in the way ``--approvals`` chooses (:data:`MODES`):

- ``auto`` (the default): by elicitation when the client declared the ``elicitation``
  capability (in its ``initialize`` request, or, for a client of MCP 2026-07-28, in its
  request's envelope: then the form goes out in an ``input_required`` round,
  :mod:`.input_required`); else out of band while a ``tooldeck approve --watch`` watches
  the gateway's state folder (someone is there to answer); else nobody: the call is
  denied at once;
- ``elicit``: by elicitation only (a client without it gets the call denied at once);
- ``out-of-band``: always ``tooldeck approve`` (:mod:`.out_of_band`), even for a client
  that could elicit (the person who approves is not the person at the client): the call
  waits, bounded, and the client is sent progress while it does;
- ``deny``: nobody; every ask is denied at once, so only what the policy allows runs.

A call is never left waiting for someone who is not there: with nobody to ask, the
denial comes at once and says how to let the call run, the exact rule to add to the
policy file, checked against the gateway's policy (:mod:`.allow`), or the option.

Elicitation is an ``elicitation/create`` form request (``approve``, and ``always`` for
an approve-always grant of that tool for the rest of the session: recorded and audited
by :class:`~tooldeck.policy.PolicyApprover`, never for a DANGEROUS tool). Only an
accepted form with ``approve: true`` approves; decline, cancel, a missing or malformed
answer, or a failed request is a deny. Nothing that needs a human runs without one,
DANGEROUS tools included (the chain never allows those without asking). While the form
waits for its answer, the client is sent progress (:data:`PROGRESS_SECONDS`), which
resets the request timeout of a client that lets progress do so.

What the user sees: the tool (by the name the client knows), the policy's reason, and
the arguments (canonical JSON, cut to :data:`ARGUMENTS_SHOWN` characters, with the cut
said).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp.server.session import ServerSession

from ..approvals import (
    ApprovalAnswer,
    ApprovalRequest,
    Approver,
    arguments_json,
    not_answered,
)
from ..policy import approve_always, canonical_json
from ..tools import Tool

__all__ = [
    "APPROVAL_SCHEMA",
    "ARGUMENTS_SHOWN",
    "CANCELLED",
    "MODES",
    "NOBODY",
    "NO_ELICITATION",
    "OTHERWISE",
    "PROGRESS_SECONDS",
    "WATCH",
    "answer_of",
    "approval_message",
    "elicitation_asker",
    "elicitation_supported",
    "nobody_asker",
    "progress_while",
]

MODES = ("auto", "elicit", "out-of-band", "deny")
Progress = Callable[[float, float | None, str], Awaitable[None]]
"""A client progress report: seconds so far, the total (if known), a message."""
"""The values of ``tooldeck serve --approvals``."""

_log = logging.getLogger("tooldeck.gateway")

ARGUMENTS_SHOWN = 2000
PROGRESS_SECONDS = 5.0
"""How often a client is sent progress while its call waits for a person."""
NO_ELICITATION = "nobody can approve it here: this MCP client cannot ask its user (no elicitation)"
CANCELLED = "the call was cancelled while its approval form waited for the user"
"""Why a call cancelled while asked by elicitation (a client's timeout, say) was denied."""
NOBODY = "nobody can approve it: the gateway asks nobody (tooldeck serve --approvals deny)"
OTHERWISE = {
    "auto": "use an MCP client with elicitation, or restart the gateway with --approvals "
    "out-of-band",
    "elicit": "use an MCP client with elicitation",
    "deny": "restart the gateway without --approvals deny",
}
"""The other way to let a call run, by ``--approvals`` mode, said after the rule."""
WATCH = "run tooldeck approve --watch {state} (then calls wait for you) and call it again"
"""The other way under ``auto`` when the gateway has a state folder to be watched."""
APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {
            "type": "boolean",
            "title": "Run this call",
            "description": "Check to let this one call run.",
            "default": False,
        },
        "always": {
            "type": "boolean",
            "title": "Also allow this tool for the rest of this session",
            "description": "Later calls of this tool run without asking (never for "
            "DANGEROUS tools, which are asked call by call).",
            "default": False,
        },
    },
    "required": ["approve"],
}


def approval_message(request: ApprovalRequest, shown_name: str) -> str:
    """The form's message: the tool as the client knows it, why it is asked, the arguments."""
    args = canonical_json(arguments_json(request.params))
    if len(args) > ARGUMENTS_SHOWN:
        args = args[:ARGUMENTS_SHOWN] + f"… ({len(args) - ARGUMENTS_SHOWN:,} more characters)"
    return (
        f"Allow the tool call {shown_name}?\nWhy this is asked: {request.reason}\nArguments: {args}"
    )


def elicitation_supported(session: ServerSession) -> bool:
    """Whether the client of ``session`` declared the elicitation capability."""
    caps = session.client_capabilities
    return caps is not None and caps.elicitation is not None


def nobody_asker(why: str, fix: Callable[[ApprovalRequest], str] | None = None) -> Approver:
    """An approver with nobody behind it: every ask is denied at once, saying ``why``
    and, with ``fix``, what lets that call run (:func:`.allow.how_to_allow`)."""

    async def ask(requests: Sequence[ApprovalRequest]) -> list[ApprovalAnswer]:
        if fix is None:
            return [not_answered(why) for _ in requests]
        return [not_answered(f"{why}; it was not run. {fix(r)}") for r in requests]

    return ask


@asynccontextmanager
async def progress_while(
    progress: Progress | None, message: str, total: float | None = None
) -> AsyncIterator[None]:
    """Send ``progress`` now and every :data:`PROGRESS_SECONDS` while the block runs (the
    seconds waited so far, ``total``, ``message``): a call waiting for a person is not
    timed out by a client whose timeout progress resets. A failed report is let go (the
    client went away: the wait ends the same way)."""
    if progress is None:
        yield
        return

    async def beat() -> None:
        started = anyio.current_time()
        while True:
            try:
                await progress(anyio.current_time() - started, total, message)
            except Exception as exc:
                _log.debug("progress not sent: %s", exc)
            await anyio.sleep(PROGRESS_SECONDS)

    async with anyio.create_task_group() as tg:
        tg.start_soon(beat)
        try:
            yield
        finally:
            tg.cancel_scope.cancel()


def elicitation_asker(
    session: ServerSession,
    request_id: Any,
    shown: Callable[[Tool], str],
    progress: Progress | None = None,
    on_give_up: Callable[[ApprovalRequest, str], None] | None = None,
) -> Approver:
    """An approver that asks the user of ``session``'s client, one form per call
    (``shown`` names a tool as the client knows it; ``progress`` is sent while a form
    waits, :func:`progress_while`; ``on_give_up`` is told of each call whose wait the
    client cancelled, its request timeout say, so that it is audited as a deny)."""
    if not elicitation_supported(session):
        return nobody_asker(NO_ELICITATION)

    async def ask(requests: Sequence[ApprovalRequest]) -> list[ApprovalAnswer]:
        answers: list[ApprovalAnswer] = []
        for request in requests:
            shown_name = shown(request.tool)
            try:
                async with progress_while(progress, f"waiting for your approval of {shown_name}"):
                    result = await session.elicit_form(
                        message=approval_message(request, shown_name),
                        requested_schema=APPROVAL_SCHEMA,
                        related_request_id=request_id,
                    )
            except Exception as exc:  # fails closed
                why = _cause(exc)  # the client's error, not the progress task group's
                _log.warning("elicitation for %s failed: %s", shown_name, why)
                answers.append(not_answered(f"the approval request failed ({why})"))
                continue
            except BaseException:  # cancelled: none of these calls runs, each is audited
                if on_give_up is not None:
                    for asked in requests:
                        on_give_up(asked, CANCELLED)
                raise
            answers.append(answer_of(result))
        return answers

    return ask


def _cause(exc: BaseException) -> BaseException:
    """The one error inside (nested) exception groups of one error each, else ``exc``."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def answer_of(result: types.ElicitResult) -> ApprovalAnswer:
    """The approval an answered form gives: only ``accept`` with ``approve: true``
    approves (with ``always: true``, approve-always); anything else denies."""
    content = result.content or {}
    if result.action == "accept" and content.get("approve") is True:
        return approve_always() if content.get("always") is True else ApprovalAnswer(True)
    if result.action == "accept":
        return ApprovalAnswer(False, "the user did not approve")
    return ApprovalAnswer(False, f"the user chose {result.action}")
