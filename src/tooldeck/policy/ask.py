"""``approve=``: ask before some tools run, answered at the console or by a function.

The common case of the policy chain in one argument of a :class:`~tooldeck.Session`
(or of ``run`` / ``run_sync`` / ``stream``):

- ``approve="WRITE"``: ask before every call of a WRITE tool *or anything above it*
  (tiers are ordered STANDARD < WRITE < DANGEROUS, so DANGEROUS asks too);
  ``approve="DANGEROUS"`` asks only before DANGEROUS tools, ``approve="STANDARD"``
  before every call. A tuple is the union: ``("WRITE", "send_*")``; a word that is not a
  tier is a policy selector (a tool name, a glob, ``ns:NAME``, ``tier:TIER``);
- ``approve=lambda request: ...``: ask when the function returns anything but
  ``False`` (it gets the :class:`~tooldeck.approvals.ApprovalRequest`; if it raises,
  the call is denied);

The tier judged is the effective one (:meth:`tooldeck.policy.Policy.tier_of`: MCP
annotations and ``run_bash`` raise it, never lower it).

``approver=`` answers: any :data:`~tooldeck.approvals.Approver` (an async function of
the step's batch, as before), or a plain function of one request returning ``True`` /
``False`` or an :class:`~tooldeck.approvals.ApprovalAnswer` (:class:`CallbackApprover`;
anything else is a deny; if it raises an ``Exception`` the step's asked calls are
denied; a ``BaseException`` ends the turn with nothing run). Without ``approver=``,
``approve=`` asks at the console (:class:`~tooldeck.policy.prompt.PromptApprover` on
stdin; the end of the input denies).

With ``policy=`` as well, both judge every call and the stricter wins (deny > ask >
allow: :class:`~tooldeck.policy.both.BothMustAllow`); the console or callback approver
is then wrapped by a :class:`~tooldeck.policy.SessionPolicy`'s
:meth:`~tooldeck.policy.SessionPolicy.approver`, so answers are audited and
approve-always is kept. A grant answers the policy's asks, not ``approve=``'s: those ask
every time.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeAlias

import anyio.to_thread

from ..approvals import (
    ApprovalAnswer,
    ApprovalRequest,
    Approver,
    PolicyDecision,
    PolicyHook,
    answering,
    not_answered,
)
from ..arguments import validate_arguments
from ..errors import ArgumentError
from ..tools import TIERS, Tier, Tool
from ..transcript import ToolCall
from .both import BothMustAllow, policy_decision
from .chain import Policy
from .rules import Selector, ToolFacts, parse_selectors
from .session import SessionPolicy

__all__ = [
    "ApproveRule",
    "AskBefore",
    "CallbackApprover",
    "EditsRechecked",
    "as_approver",
    "protection",
]

ApproveRule: TypeAlias = str | Sequence[str] | Callable[[ApprovalRequest], bool | Awaitable[bool]]
"""What ``approve=`` takes: a tier (and those above it), selectors, or a predicate (sync
or async; ``False`` lets the call run, anything else asks)."""

_HINT = "give 'WRITE', ('WRITE', 'DANGEROUS'), tool names, or a function of the request"


class AskBefore:
    """A policy hook for ``approve=``: ask before the calls the rule names, allow the rest."""

    def __init__(self, rule: ApproveRule, tier_of: Callable[[Tool], Tier] | None = None) -> None:
        self.tier_of = tier_of or Policy().tier_of
        self.test: Callable[[ApprovalRequest], Any] | None = None
        self.tiers: frozenset[str] = frozenset()
        self.selectors: tuple[Selector, ...] = ()
        if callable(rule) and not isinstance(rule, str):
            self.test = rule
            self.describe = "the calls its function picks"
            return
        words = [rule] if isinstance(rule, str) else list(rule)
        if not words or not all(isinstance(w, str) and w.strip() for w in words):
            raise ValueError(f"approve={rule!r} names nothing to ask about: {_HINT}")
        tiers: set[str] = set()
        others: list[str] = []
        for word in words:
            upper = word.strip().upper()
            if upper in TIERS:
                tiers.update(TIERS[TIERS.index(upper) :])  # this tier and every one above
            else:
                others.append(word.strip())
        problems: list[str] = []
        self.selectors = parse_selectors(others, "approve=", problems, empty=True)
        if problems:
            raise ValueError(f"{problems[0]}; {_HINT}")
        self.tiers = frozenset(tiers)
        named = [t for t in TIERS if t in self.tiers] + [str(s) for s in self.selectors]
        self.describe = " and ".join(named) + (" tools" if self.tiers else "")

    def __call__(
        self, tool: Tool, params: Any, call: ToolCall
    ) -> PolicyDecision | Awaitable[PolicyDecision]:
        tier = self.tier_of(tool)
        if self.test is not None:
            verdict = self.test(ApprovalRequest(call, tool, params, ""))
            if inspect.isawaitable(verdict):
                return self._later(verdict, tool, tier)
            return self._judged(verdict, tool, tier)
        mcp = getattr(tool, "mcp", None)
        server = getattr(mcp, "server", None)
        facts = ToolFacts(
            tool.name, tier, tool.namespace, server if isinstance(server, str) else None
        )
        if tier in self.tiers or any(s.matches(facts) for s in self.selectors):
            return PolicyDecision(
                "ask", f"{tool.name} is {tier}: approve= asks before {self.describe}", "approve"
            )
        return PolicyDecision("allow", f"approve= asks before {self.describe} only", "approve")

    async def _later(self, verdict: Awaitable[Any], tool: Tool, tier: str) -> PolicyDecision:
        return self._judged(await verdict, tool, tier)

    def _judged(self, verdict: Any, tool: Tool, tier: str) -> PolicyDecision:
        """Anything but ``False`` asks: a rule that cannot say no never lets a call through."""
        if verdict is False:
            return PolicyDecision("allow", "approve= does not ask about this call", "approve")
        return PolicyDecision("ask", f"{tool.name} is {tier}: approve= asks before it", "approve")


def _answer(value: Any) -> ApprovalAnswer:
    if isinstance(value, ApprovalAnswer):
        return value
    if value is True:
        return ApprovalAnswer(True)
    if value is False:
        return ApprovalAnswer(False)
    return not_answered(f"the approver answered {value!r}, not True, False or an answer")


class CallbackApprover:
    """An :data:`~tooldeck.approvals.Approver` from a function of one request.

    The function answers ``True`` (approve), ``False`` (deny) or an
    :class:`~tooldeck.approvals.ApprovalAnswer` (deny with a message, edit); anything
    else denies. A synchronous function runs in a worker thread (it may block on
    ``input()``); one that returns an awaitable is awaited. It is asked about the
    step's calls one after the other, in the model's order.
    """

    def __init__(self, answer: Callable[[ApprovalRequest], Any]) -> None:
        self.answer = answer

    async def __call__(self, requests: Sequence[ApprovalRequest]) -> list[ApprovalAnswer]:
        given: list[ApprovalAnswer] = []
        for request in requests:
            value = await anyio.to_thread.run_sync(self.answer, request)
            if inspect.isawaitable(value):
                value = await value
            given.append(_answer(value))
        return given


def _is_async(fn: Any) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - an object whose __call__ is async
    )


def as_approver(approver: Any) -> Approver | None:
    """``approver=`` as an Approver: an async one as it is, a plain function wrapped."""
    if approver is None or _is_async(approver):
        return approver  # type: ignore[no-any-return]
    if not callable(approver):
        raise TypeError(
            f"approver={approver!r} is not callable: give a function of one request "
            "returning True or False, or an async function of the step's requests"
        )
    return CallbackApprover(approver)


class EditsRechecked:
    """An approver whose edited arguments are judged by the session's policy hook again.

    The decision is made on what will execute: an answer that edits a call's arguments
    is checked by ``policy`` with the edited (validated) arguments, and a deny there
    turns the answer into a deny. (A :class:`~tooldeck.policy.PolicyApprover` does this
    itself; this wraps the other approvers of ``approve=`` and plain functions.)
    """

    def __init__(self, ask: Approver, policy: PolicyHook) -> None:
        self.ask = ask
        self.policy = policy

    def with_answers(self, answers: Mapping[str, ApprovalAnswer]) -> EditsRechecked:
        """This approver, with ``answers`` given as the human's (a resumed step)."""
        return EditsRechecked(answering(answers, self.ask), self.policy)

    async def __call__(self, requests: Sequence[ApprovalRequest]) -> list[ApprovalAnswer]:
        given = list(await self.ask(requests))
        checked: list[ApprovalAnswer] = []
        for request, answer in zip(requests, given, strict=False):
            if isinstance(answer, ApprovalAnswer) and answer.approved and answer.arguments:
                try:
                    params = validate_arguments(request.tool, answer.arguments).params
                except ArgumentError:
                    checked.append(answer)  # the dispatcher says why, once
                    continue
                decided = await policy_decision(self.policy, request.tool, params, request.call)
                if decided.action == "deny":
                    answer = ApprovalAnswer(
                        False, f"the edited arguments are denied by policy: {decided.reason}"
                    )
            checked.append(answer)
        return checked + given[len(checked) :]


def protection(
    policy: PolicyHook | None, approve: ApproveRule | None, approver: Any
) -> tuple[PolicyHook | None, Approver | None]:
    """The policy hook and approver a session runs with (see the module docstring)."""
    made = as_approver(approver)
    session = policy if isinstance(policy, SessionPolicy) else None
    hook = policy
    ours = isinstance(made, CallbackApprover)  # made here from a plain function
    if approve is not None:
        rule = AskBefore(approve, session.tier_of if session is not None else None)
        hook = rule if policy is None else BothMustAllow(policy, rule)
        if made is None:
            from .prompt import PromptApprover  # rich loads only when a console is needed

            made = PromptApprover(policy=session, offer_always=session is not None)
            ours = True
    if session is not None and made is not None and ours:
        made = session.approver(made)  # audited, approve-always kept, edits checked again
    elif hook is not None and made is not None and (ours or approve is not None):
        made = EditsRechecked(made, hook)  # the decision is made on what will run
    return hook, made
