"""What protects a session: one immutable :class:`Protection`, given as ``protect=``.

A protection is a set of *judges* (policy hooks that each decide every call: a
:class:`~tooldeck.policy.SessionPolicy`, an ``ask`` rule, a plain function) and who
answers their asks. It is made by name:

- :meth:`Protection.none`: nothing is judged, every call runs (the default);
- :meth:`Protection.ask`: ask before some calls (``"WRITE"``: WRITE tools and everything
  above; a tuple of tiers or tool selectors; a function of the request), answered by
  ``approver`` (the console by default: ``approver="console"``);
- :meth:`Protection.policy`: a policy hook judges every call (a
  :class:`~tooldeck.policy.SessionPolicy`, or any function of ``(tool, params, call)``),
  its asks answered by ``approver`` (none: an ask is denied);
- ``a & b`` (:meth:`Protection.both`): both judge every call and **the stricter wins**
  (deny > ask > allow; a deny of the first ends it). ``&`` is commutative in what it
  decides; an approver given on either side answers for both (two different ones are an
  error), and a given one wins over the console default.

The same value is how every power boundary inherits it: a sub-agent runs with
:meth:`Protection.child` (each judge derived for it, never looser), a background job or a
schedule's run with :meth:`Protection.headless` (the headless denylist first, every ask
denied, nobody asked), and :meth:`Protection.of` reads it back from the policy hook a
dispatcher hands a tool (``ToolContext.protection.policy``).

:meth:`Protection.dispatch` is what a :class:`~tooldeck.loop.Session` gives its
dispatcher: the policy hook (the one judge itself, or this protection combining them)
and the approver, made from ``approver`` as follows. A plain function of one request
becomes a :class:`~tooldeck.policy.ask.CallbackApprover`; ``"console"`` a
:class:`~tooldeck.policy.prompt.PromptApprover`; either is wrapped by the session
policy's :meth:`~tooldeck.policy.SessionPolicy.approver` when exactly one session policy
judges (answers audited, approve-always kept, edits checked again), else by an
:class:`~tooldeck.policy.ask.EditsRechecked` (edited arguments judged again). An async
batch :data:`~tooldeck.approvals.Approver` is used as it is (with an ``ask`` rule, its
edits are judged again too). A grant answers a session policy's asks, not an ``ask``
rule's: those ask every time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, TypeAlias

from ..approvals import (
    ApprovalAnswer,
    ApprovalCallback,
    ApprovalRequest,
    Approver,
    PolicyDecision,
    PolicyHook,
    allow_all,
    not_answered,
    policy_decision,
)
from ..tools import TIERS, Tier, Tool
from ..transcript import ToolCall
from .ask import ApproveRule, AskBefore, CallbackApprover, EditsRechecked, as_approver
from .chain import HEADLESS_DENY, Policy
from .rules import Selector
from .session import SessionPolicy

__all__ = ["ApproverSpec"]

ApproverSpec: TypeAlias = Approver | ApprovalCallback | Literal["console"] | None
"""Who answers asks: an async batch :data:`~tooldeck.approvals.Approver`, a plain
function of one request (:data:`~tooldeck.approvals.ApprovalCallback`), ``"console"``
(stdin), or ``None`` (nobody: an ask is denied)."""

_RANK = {"allow": 0, "ask": 1, "deny": 2}
_DEFAULT_RULES = Policy()  # tiers as defined, run_bash and computer always DANGEROUS
_NOBODY = "nobody can approve it: a background job is headless"


async def deny_all(requests: Sequence[ApprovalRequest]) -> list[ApprovalAnswer]:
    """The approver of a headless protection: nobody is there, every request is denied."""
    return [not_answered(_NOBODY) for _ in requests]


def _inherit(judge: PolicyHook, agent: str, session_id: str) -> PolicyHook:
    if isinstance(judge, SessionPolicy):
        return judge.child(agent, session_id)
    return judge  # a plain hook or an ask rule: the same function judges the child's calls


def _same(a: PolicyHook, b: PolicyHook) -> bool:
    """Whether judge ``b`` decides every call as ``a`` does (so one of them is enough)."""
    if a is b:
        return True
    return isinstance(a, SessionPolicy) and isinstance(b, SessionPolicy) and a.judges_like(b)


def _strictest_tier(sessions: Sequence[SessionPolicy]) -> Callable[[Tool], Tier]:
    def tier_of(tool: Tool) -> Tier:
        tiers = [s.tier_of(tool) for s in sessions]
        return max(tiers, key=TIERS.index)

    return tier_of


@dataclass(frozen=True, slots=True)
class Protection:
    """What protects a session's calls. See the module docstring; make it by name.

    ``judges`` all judge every call, the stricter verdict winning; ``approver`` answers
    their asks; ``unattended``: nobody is there (the headless denylist first, every ask a
    deny). An ``ask`` rule judges tiers as the session policies among the judges do (the
    highest tier any of them gives a tool).
    """

    judges: tuple[PolicyHook, ...] = ()
    approver: ApproverSpec = None
    unattended: bool = False
    _sessions: tuple[SessionPolicy, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        judges: list[PolicyHook] = []
        for judge in self.judges:
            if isinstance(judge, Protection):
                raise TypeError("a Protection is not a judge: combine them with & instead")
            if not callable(judge):
                raise TypeError(
                    f"{judge!r} is not a policy hook: give a function of (tool, params, call)"
                )
            if judge is not allow_all and not any(_same(j, judge) for j in judges):
                judges.append(judge)
        sessions = tuple(j for j in judges if isinstance(j, SessionPolicy))
        if sessions:
            tier_of = sessions[0].tier_of if len(sessions) == 1 else _strictest_tier(sessions)
            judges = [j.bound(tier_of) if isinstance(j, AskBefore) else j for j in judges]
        if isinstance(self.approver, str) and self.approver != "console":
            raise ValueError(
                f"approver={self.approver!r}: give 'console', a function of one request, "
                "or an async function of the step's requests"
            )
        if self.approver is not None and not isinstance(self.approver, str):
            as_approver(self.approver)  # not callable: one line, now
        object.__setattr__(self, "judges", tuple(judges))
        object.__setattr__(self, "_sessions", sessions)

    # -- made by name -----------------------------------------------------------------------
    @classmethod
    def none(cls) -> Protection:
        """Nothing judged: every call runs (what a session without ``protect=`` has)."""
        return cls()

    @classmethod
    def ask(cls, rule: ApproveRule, *, approver: ApproverSpec = "console") -> Protection:
        """Ask before the calls ``rule`` names, answered by ``approver`` (the console).

        ``rule``: a tier (``"WRITE"``: WRITE and every tier above), a tuple of tiers and
        tool selectors (a name, a glob, ``ns:NAME``, ``tier:TIER``), or a function of the
        :class:`~tooldeck.approvals.ApprovalRequest` (``False``: do not ask; anything
        else asks). A rule that names nothing is a ``ValueError`` saying what to give.
        """
        return cls((AskBefore(rule),), approver)

    @classmethod
    def policy(cls, hook: PolicyHook, *, approver: ApproverSpec = None) -> Protection:
        """``hook`` judges every call (a :class:`~tooldeck.policy.SessionPolicy`...),
        its asks answered by ``approver`` (``None``: every ask is denied)."""
        return cls((hook,), approver)

    @classmethod
    def both(cls, *protections: Protection) -> Protection:
        """Every one of ``protections`` judges every call; the stricter verdict wins."""
        judges: list[PolicyHook] = []
        approver: ApproverSpec = None
        for p in protections:
            if not isinstance(p, Protection):
                raise TypeError(f"{p!r} is not a Protection: make one with Protection.policy")
            judges.extend(p.judges)
            approver = _one_approver(approver, p.approver)
        return cls(tuple(judges), approver, any(p.unattended for p in protections))

    def __and__(self, other: Protection) -> Protection:
        return Protection.both(self, other)

    @classmethod
    def of(cls, hook: PolicyHook | Protection | None) -> Protection:
        """The protection a dispatcher's policy hook stands for (``None`` and
        :func:`~tooldeck.approvals.allow_all`: none; a plain hook: it alone judges)."""
        if isinstance(hook, Protection):
            return hook
        if hook is None or hook is allow_all:
            return cls()
        return cls((hook,))

    # -- derived ----------------------------------------------------------------------------
    def child(self, agent: str, session_id: str) -> Protection:
        """A sub-agent ``agent``'s protection: each session policy derived for it (the
        parent's rules plus the agent's restrictions), every other judge the same."""
        judges = tuple(_inherit(j, agent, session_id) for j in self.judges)
        return Protection(judges, self.approver, self.unattended)

    def headless(self, home: Path | None = None) -> Protection:
        """This protection with nobody there (a background job, a schedule's run).

        Every session policy is told it is headless (the chain then denies its asks
        itself, and never lets its delegation level auto-approve one) and, given
        ``home``, that its path rules judge paths there; the headless denylist is checked
        first; every ask is a deny; the approver denies everything.
        """
        judges: list[PolicyHook] = []
        for judge in self.judges:
            if isinstance(judge, SessionPolicy):
                ctx = replace(judge.ctx, headless=True, home=home or judge.ctx.home)
                if ctx != judge.ctx:
                    judge = SessionPolicy(
                        judge.policy,
                        session_id=judge.session_id,
                        context=ctx,
                        grants=judge.grants,
                        audit=judge.audit,
                    )
            judges.append(judge)
        return Protection(tuple(judges), None, True)

    def tier_of(self, tool: Tool) -> Tier:
        """``tool``'s effective tier: the highest any session policy here gives it."""
        if not self._sessions:
            return _DEFAULT_RULES.tier_of(tool)
        return max((s.tier_of(tool) for s in self._sessions), key=TIERS.index)

    # -- judging ----------------------------------------------------------------------------
    def _listed(self, tool: Tool) -> str | None:
        """The headless denylist entry ``tool`` matches, or None (only when headless)."""
        extra = [s for p in self._sessions for s in p.policy.headless_deny]
        listed = (*(Selector(s) for s in HEADLESS_DENY), *extra)
        rules = self._sessions[0].policy if len(self._sessions) == 1 else _DEFAULT_RULES
        facts = replace(rules.facts(tool), tier=self.tier_of(tool))
        return next((s.text for s in listed if s.matches(facts)), None)

    async def __call__(self, tool: Tool, params: Any, call: ToolCall) -> PolicyDecision:
        """The policy hook: every judge in order; a deny ends it, the stricter wins."""
        if self.unattended:
            listed = self._listed(tool)
            if listed is not None:
                return PolicyDecision(
                    "deny",
                    f"{tool.name} is not available in a headless session "
                    f"(headless denylist: {listed})",
                    "headless",
                )
        decided = PolicyDecision("allow", "no policy configured")
        first = True
        for judge in self.judges:
            verdict = await policy_decision(judge, tool, params, call)
            if verdict.action == "deny":
                return verdict
            if first or _RANK[verdict.action] > _RANK[decided.action]:
                decided = verdict
            first = False
        if self.unattended and decided.action == "ask":
            return PolicyDecision("deny", f"{decided.reason}; {_NOBODY}", "headless")
        return decided

    def visible(self, tool: Tool) -> bool:
        """Shown only when every judge shows it (and, headless, it is not denylisted)."""
        if self.unattended and self._listed(tool) is not None:
            return False
        for judge in self.judges:
            shows = getattr(judge, "visible", None)
            if callable(shows) and not shows(tool):
                return False
        return True

    def dispatch(self) -> tuple[PolicyHook | None, Approver | None]:
        """The policy hook and approver a dispatcher runs with (see the module docstring)."""
        if not self.judges and not self.unattended:
            hook: PolicyHook | None = None
        elif len(self.judges) == 1 and not self.unattended:
            hook = self.judges[0]  # the one judge itself: a tool reads it back as it is
        else:
            hook = self
        if self.unattended:
            return hook, deny_all
        session = self._sessions[0] if len(self._sessions) == 1 else None
        asks = any(isinstance(j, AskBefore) for j in self.judges)
        if isinstance(self.approver, str):
            from .prompt import PromptApprover  # rich loads only when a console is needed

            made: Approver | None = PromptApprover(policy=session, offer_always=session is not None)
            ours = True
        else:
            made = as_approver(self.approver)
            ours = isinstance(made, CallbackApprover)  # made here from a plain function
        if made is None or hook is None:
            return hook, made
        if session is not None and ours:
            return hook, session.approver(made)  # audited, approve-always kept, edits checked
        if ours or asks:
            return hook, EditsRechecked(made, hook)  # the decision is made on what will run
        return hook, made


def _one_approver(a: ApproverSpec, b: ApproverSpec) -> ApproverSpec:
    """The approver of ``a & b``: a given one over the console default over none."""
    if a is None or a is b:
        return b
    if b is None:
        return a
    if isinstance(a, str):  # "console": the default, when nothing else answers
        return b
    if isinstance(b, str):
        return a
    raise ValueError(
        "both protections have their own approver, and one answers every ask: "
        "give approver= to one of them"
    )
