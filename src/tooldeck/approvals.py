"""What the policy hook answers, and how a human's approval of a call is asked and given.

The vocabulary the dispatcher and the policy package share: :class:`PolicyDecision`
(allow / deny / ask; the one decision type, of a policy hook and of the policy chain,
which adds its tier and the :class:`TraceEntry` of every level consulted), the
:class:`PolicyHook` protocol and its default
:func:`allow_all`; an :class:`ApprovalRequest` shown to an :data:`Approver`, its
:class:`ApprovalAnswer`, :class:`PendingApproval` for an approver that cannot answer
now, and :func:`answering` to finish a waiting step with answers given later; a
step that waits (:class:`PendingStep`, its :class:`PendingCall` s) and where it is kept
between processes (:class:`PendingStore`).
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias

from pydantic import BaseModel

from .errors import TooldeckError
from .tools import Tier, Tool
from .transcript import AssistantMessage, Item, ToolCall, ToolOutput, Usage

__all__ = [
    "ApprovalCallback",
    "Approver",
    "PendingApproval",
    "PendingCall",
    "PendingStep",
    "PendingStore",
    "PolicyHook",
    "TraceEntry",
    "Verdict",
    "allow_all",
    "answering",
    "arguments_json",
    "not_answered",
    "policy_decision",
]

_log = logging.getLogger("tooldeck.dispatch")


Verdict: TypeAlias = Literal["allow", "deny", "ask", "pass"]
"""What one level of the policy chain says about a call (``pass``: nothing)."""


@dataclass(frozen=True, slots=True)
class TraceEntry:
    """What one level of the policy chain said about one call."""

    level: str
    verdict: Verdict
    reason: str

    def as_dict(self) -> dict[str, str]:
        return {"level": self.level, "verdict": self.verdict, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class PolicyDecision:
    """The decision about one call: allow, deny or ask, why, and who decided.

    The one decision type: what a policy hook answers the dispatcher, and what the
    policy chain (:meth:`tooldeck.policy.Policy.decide`) answers, with the call's
    effective ``tier``, the ``trace`` of every level it consulted and the approve-always
    ``grant`` that allowed it, if one did. ``level`` is the deciding level.
    """

    action: Literal["allow", "deny", "ask"]
    reason: str = ""
    level: str = ""
    tier: Tier | None = None
    trace: tuple[TraceEntry, ...] = ()
    grant: str | None = None  # the approve-always grant that allowed it

    def as_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "level": self.level,
            "reason": self.reason,
            "tier": self.tier,
            "grant": self.grant,
            "trace": [t.as_dict() for t in self.trace],
        }


class PolicyHook(Protocol):
    """Decides, right before execution, whether one validated call may run."""

    def __call__(
        self, tool: Tool, params: Any, call: ToolCall
    ) -> PolicyDecision | Awaitable[PolicyDecision]: ...


def allow_all(tool: Tool, params: Any, call: ToolCall) -> PolicyDecision:
    """The default policy until one is configured: every call may run."""
    return PolicyDecision("allow", "no policy configured")


async def policy_decision(
    policy: PolicyHook, tool: Tool, params: Any, call: ToolCall
) -> PolicyDecision:
    """``policy``'s decision, awaited; anything that is not a decision is a deny."""
    decided = policy(tool, params, call)
    if inspect.isawaitable(decided):
        decided = await decided
    if not isinstance(decided, PolicyDecision) or decided.action not in ("allow", "deny", "ask"):
        return PolicyDecision("deny", f"the policy answered {decided!r}, not a decision")
    return decided


def arguments_json(params: Any) -> Any:
    """Validated parameters as JSON data (a Pydantic model dumped, a mapping copied)."""
    if isinstance(params, BaseModel):
        return params.model_dump(mode="json")
    if isinstance(params, Mapping):
        if type(params) is dict:
            copied = _plain_copy(params, _PLAIN_DEPTH)
            if copied is not _NOT_PLAIN:
                return copied
        return json.loads(json.dumps(dict(params), default=str))
    return params


_NOT_PLAIN = object()
_PLAIN_DEPTH = 32
_SCALARS = frozenset({str, int, float, bool, type(None)})


def _plain_copy(value: Any, depth: int) -> Any:
    """A copy of ``value`` when it is plain JSON data already (dicts with str keys, lists,
    str, int, float, bool, None; not too deep), equal to what the JSON round trip of
    :func:`arguments_json` gives; else ``_NOT_PLAIN`` (that round trip says what it is)."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if depth == 0:
        return _NOT_PLAIN
    if kind is dict:
        out: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is not str:
                return _NOT_PLAIN
            copied = _plain_copy(item, depth - 1)
            if copied is _NOT_PLAIN:
                return _NOT_PLAIN
            out[key] = copied
        return out
    if kind is list:
        items: list[Any] = []
        for item in value:
            copied = _plain_copy(item, depth - 1)
            if copied is _NOT_PLAIN:
                return _NOT_PLAIN
            items.append(copied)
        return items
    return _NOT_PLAIN


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    call: ToolCall
    tool: Tool
    params: Any
    reason: str

    @property
    def display(self) -> Any:
        """What a human is shown before answering, as JSON data.

        The validated arguments, unless the tool describes its approval itself with a
        ``describe_approval(params)`` method (``switch_model`` shows its role and
        model_hint). Kept with a step that waits for approval, so whoever answers later
        sees the same thing.
        """
        describe = getattr(self.tool, "describe_approval", None)
        if callable(describe):
            try:
                return describe(self.params)
            except Exception:
                _log.exception("describe_approval failed for %s", self.call.name)
        return arguments_json(self.params)


@dataclass(frozen=True, slots=True)
class ApprovalAnswer:
    """A human's answer: approve, deny (with a message for the model), or edit arguments.

    ``by_user`` is False for a deny that no human gave (nobody answered in time, the input
    ended, nobody can be asked, the policy refused edited arguments): the model is told
    ``Denied: <why>``, not ``Denied by the user``, and the audit line names no one. Make
    those with :func:`not_answered`.
    """

    approved: bool
    message: str = ""
    arguments: Mapping[str, Any] | None = None
    by_user: bool = field(default=True, kw_only=True)


def not_answered(why: str) -> ApprovalAnswer:
    """A deny that no human gave; ``why`` says what happened, for the model and the audit."""
    return ApprovalAnswer(False, why, by_user=False)


Approver = Callable[[Sequence[ApprovalRequest]], Awaitable[Sequence[ApprovalAnswer]]]

ApprovalCallback = Callable[
    [ApprovalRequest], bool | ApprovalAnswer | Awaitable[bool | ApprovalAnswer]
]
"""A plain function of one request, as ``approver=`` also takes it: ``True`` approves,
``False`` denies, an :class:`ApprovalAnswer` denies with a message or edits the
arguments; it may be async (see :class:`tooldeck.policy.ask.CallbackApprover`)."""


class PendingApproval(TooldeckError):
    """Raised by an approver when nobody can answer now: the step waits for a human.

    The dispatcher runs nothing of the step, fills in ``requests`` (the whole batch
    waiting for an answer) and ``outputs`` (the outputs the step already has: unknown,
    invalid or denied calls) and re-raises; the loop keeps the step so that
    ``Session.resume(answers)`` finishes it later without producing any output twice.
    """

    def __init__(
        self, requests: Sequence[ApprovalRequest] = (), message: str = "waiting for approval"
    ) -> None:
        super().__init__(message)
        self.requests: tuple[ApprovalRequest, ...] = tuple(requests)
        self.outputs: tuple[ToolOutput, ...] = ()


def answering(answers: Mapping[str, ApprovalAnswer], approver: Approver | None) -> Approver:
    """An approver that answers from ``answers`` (by call id) and asks ``approver`` the rest.

    Used to finish a step that waited for approval. An approver with a
    ``with_answers(answers)`` method (``tooldeck.policy.PolicyApprover``) builds this
    itself, so the given answers pass through it like a human's (approve-always
    recorded, edits checked, audit lines written).
    """
    own = getattr(approver, "with_answers", None)
    if callable(own):
        made: Approver = own(answers)
        return made

    async def approve(requests: Sequence[ApprovalRequest]) -> list[ApprovalAnswer]:
        rest = [r for r in requests if r.call.call_id not in answers]
        asked = iter(await approver(rest) if rest and approver is not None else ())
        unanswered = not_answered("no answer was given")
        return [
            answers[r.call.call_id] if r.call.call_id in answers else next(asked, unanswered)
            for r in requests
        ]

    return approve


@dataclass(frozen=True, slots=True)
class PendingCall:
    """A call of a waiting step that needs a human's answer, as the human is shown it."""

    call_id: str
    name: str
    tier: str
    reason: str
    display: Any  # JSON data: the arguments, or the tool's own approval display

    @classmethod
    def of(cls, request: ApprovalRequest) -> PendingCall:
        return cls(
            request.call.call_id,
            request.call.name,
            request.tool.tier,
            request.reason,
            request.display,
        )


@dataclass(slots=True)
class PendingStep:
    """A model step waiting for approval, finished later by :meth:`Session.resume`."""

    message: AssistantMessage  # the step's response: its calls
    outputs: tuple[ToolOutput, ...]  # outputs the step already has; never produced again
    calls: tuple[PendingCall, ...]  # the calls waiting for an answer
    start: int  # where the turn's user message is in the transcript
    steps: int  # model steps the turn has used
    usage: Usage  # the turn's usage so far


class PendingStore(Protocol):
    """Keeps a waiting step between processes (``tooldeck.policy.PendingFiles`` is one)."""

    def save(self, session_id: str, transcript: Sequence[Item], step: PendingStep) -> None: ...

    def load(self, session_id: str) -> tuple[list[Item], PendingStep] | None:
        """The waiting step and the transcript up to it, or ``None``."""
        ...

    def claim(self, session_id: str) -> bool:
        """Take the waiting step to finish it: true at most once per saved step."""
        ...
