"""Before a step runs: the policy's decision on each call, then one approval request.

:func:`decide` asks the :data:`~tooldeck.approvals.PolicyHook` about one valid call
(a policy that raises or answers nonsense denies: it fails closed); :func:`approve`
sends every call of the step that needs approval to the approver in one batch, and
records a "denied" output for each call it refuses. An approver that cannot answer now
raises :class:`~tooldeck.approvals.PendingApproval`, with the step's requests and the
outputs it already has.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import traceback
from collections.abc import Mapping, Sequence

from ._call import Slot, error
from .approvals import (
    ApprovalAnswer,
    ApprovalRequest,
    Approver,
    PendingApproval,
    PolicyDecision,
    PolicyHook,
    answering,
)
from .arguments import validate_arguments
from .errors import ArgumentError
from .events import ApprovalRequested, EventBus
from .telemetry.tracing import StepTracing

__all__ = ["decide"]

_ACTIONS = ("allow", "deny", "ask")


def _denied(answer: ApprovalAnswer) -> str:
    """What the model is told of a deny: the user's words, or what happened when no one
    answered (never "by the user" for a timeout or a closed input)."""
    if answer.by_user:
        return "Denied by the user" + (f": {answer.message}" if answer.message else ".")
    why = answer.message or "nobody approved the call"
    return f"Denied: {why}" + ("" if why.endswith(".") else ".")


async def decide(policy: PolicyHook, log: logging.Logger, slot: Slot, trace: StepTracing) -> None:
    """The policy's decision on ``slot``'s call: a "denied" output, a reason to ask, or
    nothing (allowed)."""
    assert slot.tool is not None
    try:
        decision = policy(slot.tool, slot.params, slot.call)
        if type(decision) is not PolicyDecision and inspect.isawaitable(decision):
            decision = await decision
    except asyncio.CancelledError:
        raise
    except BaseException as exc:  # fails closed, whatever the policy raised
        log.exception("policy failed for %s (%s)", slot.call.name, slot.call.call_id)
        trace.decided(slot, "deny", "", "the policy check failed")
        slot.output = error(
            slot.call,
            f"Denied: the policy check failed ({exc}).",
            {"traceback": traceback.format_exc()},
            slot.repairs,
        )
        return
    if not isinstance(decision, PolicyDecision) or decision.action not in _ACTIONS:
        log.error("policy returned %r for %s; denied", decision, slot.call.name)
        trace.decided(slot, "deny", "", "the policy gave no decision")
        slot.output = error(slot.call, "Denied: the policy gave no decision.", None, slot.repairs)
        return
    trace.decided(slot, decision.action, decision.level, decision.reason)
    if decision.action == "deny":
        why = decision.reason or "not allowed"
        slot.output = error(
            slot.call, f"Denied by policy: {why}", {"level": decision.level}, slot.repairs
        )
    elif decision.action == "ask":
        slot.approval_reason = decision.reason or "approval required"


async def approve(
    slots: Sequence[Slot],
    asking: Sequence[Slot],
    approver: Approver | None,
    answers: Mapping[str, ApprovalAnswer] | None,
    events: EventBus,
    session_id: str,
    log: logging.Logger,
) -> None:
    """Ask about every call of ``asking`` in one batch; deny those not approved.

    An approved call whose arguments the human edited is validated again.
    """
    requests = [
        ApprovalRequest(s.call, s.tool, s.params, s.approval_reason or "")
        for s in asking
        if s.tool is not None
    ]
    await events.emit(
        ApprovalRequested(
            session_id, tuple(r.call for r in requests), tuple(r.reason for r in requests)
        )
    )
    if answers:
        approver = answering(answers, approver)
    if approver is None:
        for s in asking:
            s.output = error(
                s.call,
                f"Denied: {s.call.name} needs approval "
                f"({s.approval_reason}) and no approver is attached.",
            )
        return
    try:
        given = list(await approver(requests))
    except PendingApproval as pending:
        pending.requests = tuple(requests)
        pending.outputs = tuple(s.output for s in slots if s.output is not None)
        raise
    except Exception as exc:
        log.exception("approver failed")
        given = []
        failure = f"the approval request failed ({exc})"
    else:
        failure = "no answer was given"
    for index, s in enumerate(asking):
        answer = given[index] if index < len(given) else None
        if answer is None or not isinstance(answer, ApprovalAnswer):
            s.output = error(s.call, f"Denied: {failure}.")
        elif not answer.approved:
            s.output = error(s.call, _denied(answer))
        elif answer.arguments is not None:
            assert s.tool is not None
            try:
                s.params = validate_arguments(s.tool, answer.arguments).params
            except ArgumentError as exc:
                s.output = error(s.call, f"The edited arguments are invalid: {exc.model_message}")
