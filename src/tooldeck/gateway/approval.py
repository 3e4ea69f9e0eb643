"""Approvals asked of the MCP client's user, by elicitation.

The gateway's policy chain (:mod:`tooldeck.policy`) decides every call; a call it says
*ask* about is put to the client's user with an ``elicitation/create`` form request
(``approve``, and ``always`` for an approve-always grant of that tool for the rest of
the session: recorded and audited by :class:`~tooldeck.policy.PolicyApprover`, never for
a DANGEROUS tool), when the client declared the ``elicitation`` capability in its
``initialize`` request. Only an accepted form with ``approve: true`` approves;
decline, cancel, a missing or malformed answer, or a failed request is a deny. A
client without elicitation gets every such call denied, with a message saying how to
allow it (a rule in the gateway's policy file): nothing that needs a human runs without
one, DANGEROUS tools included (the chain never allows those without asking).

What the user sees: the tool, the policy's reason, and the arguments (canonical JSON,
cut to :data:`ARGUMENTS_SHOWN` characters, with the cut said).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from mcp.server.session import ServerSession

from ..approvals import ApprovalAnswer, ApprovalRequest, Approver, arguments_json
from ..policy import approve_always, canonical_json

__all__ = ["APPROVAL_SCHEMA", "ARGUMENTS_SHOWN", "NO_ELICITATION", "elicitation_asker"]

_log = logging.getLogger("tooldeck.gateway")

ARGUMENTS_SHOWN = 2000
NO_ELICITATION = (
    "this MCP client cannot ask its user (it did not declare the elicitation capability); "
    "allow the tool with a rule in the gateway's policy file (tooldeck serve --policy), "
    "or use a client that supports elicitation"
)
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


def _message(request: ApprovalRequest, shown_name: str) -> str:
    args = canonical_json(arguments_json(request.params))
    if len(args) > ARGUMENTS_SHOWN:
        args = args[:ARGUMENTS_SHOWN] + f"… ({len(args) - ARGUMENTS_SHOWN:,} more characters)"
    return (
        f"Allow the tool call {shown_name}?\nWhy this is asked: {request.reason}\nArguments: {args}"
    )


def _elicitation_supported(session: ServerSession) -> bool:
    caps = session.client_capabilities
    return caps is not None and caps.elicitation is not None


def elicitation_asker(session: ServerSession, request_id: Any, shown_name: str) -> Approver:
    """An approver that asks the user of ``session``'s client, one form per call."""
    supported = _elicitation_supported(session)

    async def ask(requests: Sequence[ApprovalRequest]) -> list[ApprovalAnswer]:
        if not supported:
            return [ApprovalAnswer(False, NO_ELICITATION) for _ in requests]
        answers: list[ApprovalAnswer] = []
        for request in requests:
            try:
                result = await session.elicit_form(
                    message=_message(request, shown_name),
                    requested_schema=APPROVAL_SCHEMA,
                    related_request_id=request_id,
                )
            except Exception as exc:  # fails closed
                _log.warning("elicitation for %s failed: %s", shown_name, exc)
                answers.append(ApprovalAnswer(False, f"the approval request failed ({exc})"))
                continue
            content = result.content or {}
            if result.action == "accept" and content.get("approve") is True:
                always = content.get("always") is True
                answers.append(approve_always() if always else ApprovalAnswer(True))
            elif result.action == "accept":
                answers.append(ApprovalAnswer(False, "the user did not approve"))
            else:
                answers.append(ApprovalAnswer(False, f"the user chose {result.action}"))
        return answers

    return ask
