"""An ``ask`` rule, and approvers made from plain functions, for a ``Protection``.

:meth:`~tooldeck.policy.protection.Protection.ask` asks before some calls:

- ``"WRITE"``: ask before every call of a WRITE tool *or anything above it* (tiers are
  ordered STANDARD < WRITE < DANGEROUS, so DANGEROUS asks too); ``"DANGEROUS"`` asks
  only before DANGEROUS tools, ``"STANDARD"`` before every call. A tuple is the union:
  ``("WRITE", "send_*")``; a word that is not a tier is a policy selector (a tool name,
  a glob, ``ns:NAME``, ``tier:TIER``);
- ``lambda request: ...``: ask when the function returns anything but ``False`` (it
  gets the :class:`~tooldeck.approvals.ApprovalRequest`; if it raises, the call is
  denied).

:class:`AskBefore` is that rule as a policy hook. The tier judged is the effective one
(:meth:`tooldeck.policy.Policy.tier_of`: MCP annotations and ``run_bash`` raise it, never
lower it; with session policies in the same protection, the highest tier they give).

An approver given as a plain function of one request returning ``True`` / ``False`` or
an :class:`~tooldeck.approvals.ApprovalAnswer` becomes a :class:`CallbackApprover`
(anything else is a deny; if it raises an ``Exception`` the step's asked calls are
denied; a ``BaseException`` ends the turn with nothing run). :class:`EditsRechecked`
judges an answer's edited arguments again. How a protection combines them:
:mod:`tooldeck.policy.protection`.
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
    policy_decision,
)
from ..arguments import validate_arguments
from ..errors import ArgumentError
from ..tools import TIERS, Tier, Tool
from ..transcript import ToolCall
from .chain import Policy
from .rules import Selector, ToolFacts, parse_selectors

__all__ = [
    "ApproveRule",
    "AskBefore",
    "CallbackApprover",
    "EditsRechecked",
    "as_approver",
]

ApproveRule: TypeAlias = str | Sequence[str] | Callable[[ApprovalRequest], bool | Awaitable[bool]]
"""What :meth:`~tooldeck.policy.protection.Protection.ask` takes: a tier (and those
above it), selectors, or a predicate (sync or async; ``False`` lets the call run,
anything else asks)."""

_HINT = "give 'WRITE', ('WRITE', 'DANGEROUS'), tool names, or a function of the request"


class AskBefore:
    """An ``ask`` rule as a policy hook: ask before the calls the rule names, allow the rest."""

    def __init__(self, rule: ApproveRule, tier_of: Callable[[Tool], Tier] | None = None) -> None:
        self.rule = rule
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
            raise ValueError(f"Protection.ask({rule!r}) names nothing to ask about: {_HINT}")
        tiers: set[str] = set()
        others: list[str] = []
        for word in words:
            upper = word.strip().upper()
            if upper in TIERS:
                tiers.update(TIERS[TIERS.index(upper) :])  # this tier and every one above
            else:
                others.append(word.strip())
        problems: list[str] = []
        self.selectors = parse_selectors(others, "Protection.ask", problems, empty=True)
        if problems:
            raise ValueError(f"{problems[0]}; {_HINT}")
        self.tiers = frozenset(tiers)
        named = [t for t in TIERS if t in self.tiers] + [str(s) for s in self.selectors]
        self.describe = " and ".join(named) + (" tools" if self.tiers else "")

    def bound(self, tier_of: Callable[[Tool], Tier]) -> AskBefore:
        """The same rule, judging the tier ``tier_of`` gives (a session policy's)."""
        if tier_of == self.tier_of:
            return self
        return AskBefore(self.rule, tier_of)

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
                "ask", f"{tool.name} is {tier}: the ask rule names {self.describe}", "ask"
            )
        return PolicyDecision("allow", f"the ask rule names {self.describe} only", "ask")

    async def _later(self, verdict: Awaitable[Any], tool: Tool, tier: str) -> PolicyDecision:
        return self._judged(await verdict, tool, tier)

    def _judged(self, verdict: Any, tool: Tool, tier: str) -> PolicyDecision:
        """Anything but ``False`` asks: a rule that cannot say no never lets a call through."""
        if verdict is False:
            return PolicyDecision("allow", "the ask rule does not ask about this call", "ask")
        return PolicyDecision("ask", f"{tool.name} is {tier}: the ask rule asks about it", "ask")


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
    itself; this wraps the other approvers of an ``ask`` rule and plain functions.)
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
