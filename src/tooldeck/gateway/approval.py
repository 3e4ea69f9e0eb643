"""How the gateway asks a human: MCP elicitation, ``tooldeck approve`` out of band, or nobody.

The gateway's policy chain (:mod:`tooldeck.policy`) decides every call; a call it says
*ask* about is put to a human in the way ``--approvals`` chooses (:data:`MODES`):

- ``auto`` (the default): by elicitation when the client declared the ``elicitation``
  capability (in its ``initialize`` request, or, for a client of MCP 2026-07-28, in its
  request's envelope: then the form goes out in an ``input_required`` round,
  :mod:`.input_required`), else out of band when the gateway has a state folder
  (:mod:`.out_of_band`), else nobody (denied);
- ``elicit``: by elicitation only (a client without it gets the call denied);
- ``out-of-band``: always ``tooldeck approve``, even for a client that could elicit
  (the person who approves is not the person at the client);
- ``deny``: nobody; every ask is denied, so only what the policy allows runs.

Elicitation is an ``elicitation/create`` form request (``approve``, and ``always`` for
an approve-always grant of that tool for the rest of the session: recorded and audited
by :class:`~tooldeck.policy.PolicyApprover`, never for a DANGEROUS tool). Only an
accepted form with ``approve: true`` approves; decline, cancel, a missing or malformed
answer, or a failed request is a deny. A denied ask says how to allow the tool (a rule
in the gateway's policy file): nothing that needs a human runs without one, DANGEROUS
tools included (the chain never allows those without asking).

What the user sees: the tool (by the name the client knows), the policy's reason, and
the arguments (canonical JSON, cut to :data:`ARGUMENTS_SHOWN` characters, with the cut
said).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

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
from ..tool import Tool

__all__ = [
    "APPROVAL_SCHEMA",
    "ARGUMENTS_SHOWN",
    "MODES",
    "NO_ELICITATION",
    "answer_of",
    "approval_message",
    "elicitation_asker",
    "elicitation_supported",
    "nobody_asker",
]

MODES = ("auto", "elicit", "out-of-band", "deny")
"""The values of ``tooldeck serve --approvals``."""

_log = logging.getLogger("tooldeck.gateway")

ARGUMENTS_SHOWN = 2000
ALLOW = "allow the tool with a rule in the gateway's policy file (tooldeck serve --policy)"
NO_ELICITATION = (
    "this MCP client cannot ask its user (it did not declare the elicitation capability); "
    f"{ALLOW}, or use a client that supports elicitation"
)
NO_STATE = (
    "this MCP client cannot ask its user (no elicitation) and the gateway has no state "
    f"folder for out-of-band approvals (tooldeck approve); {ALLOW}"
)
NOBODY = f"the gateway asks nobody (tooldeck serve --approvals deny); {ALLOW}"
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


def nobody_asker(why: str) -> Approver:
    """An approver with nobody behind it: every ask is denied, saying ``why``."""

    async def ask(requests: Sequence[ApprovalRequest]) -> list[ApprovalAnswer]:
        return [not_answered(why) for _ in requests]

    return ask


def elicitation_asker(
    session: ServerSession, request_id: Any, shown: Callable[[Tool], str]
) -> Approver:
    """An approver that asks the user of ``session``'s client, one form per call
    (``shown`` names a tool as the client knows it)."""
    if not elicitation_supported(session):
        return nobody_asker(NO_ELICITATION)

    async def ask(requests: Sequence[ApprovalRequest]) -> list[ApprovalAnswer]:
        answers: list[ApprovalAnswer] = []
        for request in requests:
            shown_name = shown(request.tool)
            try:
                result = await session.elicit_form(
                    message=approval_message(request, shown_name),
                    requested_schema=APPROVAL_SCHEMA,
                    related_request_id=request_id,
                )
            except Exception as exc:  # fails closed
                _log.warning("elicitation for %s failed: %s", shown_name, exc)
                answers.append(not_answered(f"the approval request failed ({exc})"))
                continue
            answers.append(answer_of(result))
        return answers

    return ask


def answer_of(result: types.ElicitResult) -> ApprovalAnswer:
    """The approval an answered form gives: only ``accept`` with ``approve: true``
    approves (with ``always: true``, approve-always); anything else denies."""
    content = result.content or {}
    if result.action == "accept" and content.get("approve") is True:
        return approve_always() if content.get("always") is True else ApprovalAnswer(True)
    if result.action == "accept":
        return ApprovalAnswer(False, "the user did not approve")
    return ApprovalAnswer(False, f"the user chose {result.action}")
