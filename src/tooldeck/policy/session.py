"""One session's policy: the chain bound to a mode, agent, node, grants and an audit log.

:class:`SessionPolicy` is what a :class:`~tooldeck.loop.Session` plugs in, three times
over, all from the same decision function:

- ``visible`` for the :class:`~tooldeck.plan.ToolPlanner`: a tool is hidden from the
  model (and from the dispatcher's toolset) when every call of it would be denied in
  this session, whatever the arguments; a tool denied only for some arguments stays;
- the policy hook itself (``Protection.policy(session_policy)``): the dispatcher asks it
  again about every call, with its validated arguments, right before execution;
- :meth:`SessionPolicy.approver` wraps a human interface (a programmatic async callback,
  the CLI prompt, or :func:`wait_for_human` for a run that waits): it records
  approve-always grants, re-checks edited arguments and writes the human's answers to the
  audit log.

For ``delegate_task``, :meth:`SessionPolicy.child` gives a sub-agent at most the parent's
permissions plus the sub-agent's own restrictions, and
:meth:`SessionPolicy.for_delegation` returns the ``child_policy`` factory and approver to
pass to ``delegate_task_tool``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..approvals import (
    ApprovalAnswer,
    ApprovalRequest,
    Approver,
    PendingApproval,
    PolicyDecision,
    answering,
    arguments_json,
    not_answered,
)
from ..arguments import validate_arguments
from ..context import ToolContext
from ..errors import ArgumentError
from ..telemetry.calls import note_approver
from ..tools import Tier, Tool
from ..transcript import ToolCall
from ._files import session_file
from .audit import AuditLog
from .chain import Policy, PolicyContext, PolicyError
from .grants import GrantStore

if TYPE_CHECKING:  # the agent type child_policy names; the policy imports no feature
    from ..agents.toolkits import AgentDefinition

__all__ = []


# -- answers ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ApproveAlways(ApprovalAnswer):
    """Approve this call and every later call of the same tool (matching ``pattern``)."""

    approved: bool = True
    pattern: Mapping[str, Any] | None = None


def approve() -> ApprovalAnswer:
    """Approve this one call."""
    return ApprovalAnswer(True)


def approve_always(pattern: Mapping[str, Any] | None = None) -> ApproveAlways:
    """Approve this call, and record a grant for this tool (only where ``pattern`` holds)."""
    return ApproveAlways(pattern=pattern)


def deny(message: str = "") -> ApprovalAnswer:
    """Deny the call; ``message`` is passed to the model."""
    return ApprovalAnswer(False, message)


def edit(arguments: Mapping[str, Any]) -> ApprovalAnswer:
    """Approve the call with these arguments instead (validated and checked again)."""
    return ApprovalAnswer(True, arguments=dict(arguments))


async def wait_for_human(requests: Sequence[ApprovalRequest]) -> Sequence[ApprovalAnswer]:
    """A human interface for nobody-here-now: the run waits, to be resumed with answers."""
    raise PendingApproval(requests)


# -- the session policy -----------------------------------------------------------------------
@dataclass
class _Shared:
    """What a session and its sub-agents share: grants, the audit log, who asked what."""

    grants: GrantStore
    audit: AuditLog
    asked: dict[int, tuple[ToolCall, SessionPolicy]] = field(default_factory=dict)


def _args_of(params: Any) -> dict[str, Any]:
    value = arguments_json(params)
    return dict(value) if isinstance(value, Mapping) else {}


def _fixed(decision: PolicyDecision) -> bool:
    """Whether ``decision`` came without asking the grants (:meth:`SessionPolicy.decide`)."""
    if decision.action == "allow":
        return decision.grant is None
    return decision.action == "deny" and decision.level != "headless"


class SessionPolicy:
    """The policy of one session. See the module docstring.

    ``mode``, ``agent``, ``node`` and ``headless`` describe the session (or give a whole
    ``context``). ``home`` is the agent's home directory, the same as the turn's
    ``TurnContext.home``: path rules judge the path the file tools will touch there
    (without it, the text only). ``directory`` keeps the session's grants (``<id>.grants.json``) and
    audit log (``<id>.audit.jsonl``) there unless ``grants`` / ``audit`` are given;
    without either they live in memory.
    """

    def __init__(
        self,
        policy: Policy | None = None,
        *,
        session_id: str = "session",
        mode: str | None = None,
        agent: str | None = None,
        node: str | None = None,
        headless: bool = False,
        home: str | Path | None = None,
        grants: GrantStore | None = None,
        audit: AuditLog | None = None,
        directory: str | Path | None = None,
        context: PolicyContext | None = None,
        _shared: _Shared | None = None,
    ) -> None:
        self.policy = policy or Policy()
        self.session_id = session_id
        self.ctx = context or PolicyContext(mode, agent, node, headless)
        if home is not None:
            self.ctx = replace(self.ctx, home=Path(home))
        if _shared is None:
            if grants is None:
                grants = GrantStore(
                    session_file(directory, session_id, ".grants.json") if directory else None
                )
            if audit is None:
                audit = AuditLog(
                    session_file(directory, session_id, ".audit.jsonl") if directory else None
                )
            _shared = _Shared(grants, audit)
        self._shared = _shared
        self._visible: dict[tuple[Any, int], bool] = {}
        # :meth:`decide`'s kept decisions, by the tool's id
        self._decided: dict[int, tuple[Tool, Policy, PolicyContext, PolicyDecision]] = {}

    @property
    def grants(self) -> GrantStore:
        return self._shared.grants

    @property
    def audit(self) -> AuditLog:
        return self._shared.audit

    @property
    def headless(self) -> bool:
        return self.ctx.headless

    def tier_of(self, tool: Tool) -> Tier:
        return self.policy.tier_of(tool)

    def asker(self, call: ToolCall) -> SessionPolicy:
        """The policy (this one or a sub-agent's) that asked about ``call``; forgets it.

        Asks are kept by the call itself, not by its id: a parent and its sub-agents
        share this table, and two sessions' models may use the same ids.
        """
        entry = self._shared.asked.pop(id(call), None)
        if entry is not None and entry[0] is call:
            return entry[1]
        return self

    # -- the one decision function ----------------------------------------------------------
    def decide(self, tool: Tool, args: Mapping[str, Any]) -> PolicyDecision:
        """The chain's decision for ``tool`` with these (validated, JSON) arguments.

        Kept, by tool, while the policy and the session's facts stay the same, when it
        cannot depend on the arguments nor on the grants: an allow no grant gave, or a
        deny of the rules (not a headless one, which may be an ask the grants would have
        answered), of a tool none of whose rules test arguments
        (:meth:`~tooldeck.policy.Policy.reads_arguments`)."""
        policy, ctx = self.policy, self.ctx
        kept = self._decided.get(id(tool))
        if kept is not None and kept[0] is tool and kept[1] is policy and kept[2] is ctx:
            return kept[3]
        decision = policy.decide(tool, args, ctx, self.grants)
        if _fixed(decision) and not policy.reads_arguments(policy.facts(tool), ctx):
            if len(self._decided) > 4096:
                self._decided.clear()
            self._decided[id(tool)] = (tool, policy, ctx, decision)  # holding the tool
        return decision

    def visible(self, tool: Tool) -> bool:
        """Show ``tool`` unless every call of it would be denied in this session."""
        facts = self.policy.facts(tool)
        _ = self.grants.grants  # refresh: a grant or a revocation changes visibility
        key = (facts, self.grants.revision)
        if key not in self._visible:
            if len(self._visible) > 4096:
                self._visible.clear()
            self._visible[key] = not self.policy.denied_for_all(facts, self.ctx, self.grants)
        return self._visible[key]

    def __call__(self, tool: Tool, params: Any, call: ToolCall) -> PolicyDecision:
        """The dispatcher's policy hook: decide, write the audit line, answer."""
        args = _args_of(params)
        decision = self.decide(tool, args)
        approved_by = None
        if decision.action == "allow":
            approved_by = (
                f"grant {decision.grant}"
                if decision.grant
                else "parent (delegation)"
                if decision.level == "delegation"
                else "policy"
            )
        self.audit.record(
            session_id=self.session_id,
            call_id=call.call_id,
            tool=tool.name,
            args=args,
            decision=decision.action,
            level=decision.level,
            reason=decision.reason,
            approved_by=approved_by,
            tier=decision.tier,
        )
        if decision.action == "ask":
            asked = self._shared.asked
            if len(asked) > 10_000:  # asks nobody settled (no approver attached)
                asked.clear()
            asked[id(call)] = (call, self)  # holding the call keeps its id unique
        if decision.action == "ask":
            return replace(decision, reason=f"{tool.name} is {decision.tier}: {decision.reason}")
        return decision

    # -- approvals --------------------------------------------------------------------------
    def approver(self, ask: Approver | None, *, who: str = "human") -> PolicyApprover:
        """An approver for this session around ``ask`` (the human interface)."""
        return PolicyApprover(self, ask, who=who)

    # -- delegation -------------------------------------------------------------------------
    def child(self, agent: str, session_id: str | None = None) -> SessionPolicy:
        """A sub-agent's policy: this one, plus the agent's own rules as restrictions.

        The sub-agent's ``[agents.<name>]`` rules can only deny or ask (their allows
        count as pass), so it never gets more than its parent. STANDARD tools may be
        auto-approved by the delegation level; WRITE and DANGEROUS still ask the human.
        Grants and the audit log are the parent's.
        """
        return SessionPolicy(
            self.policy,
            session_id=session_id or f"{self.session_id}.{agent}",
            context=self.policy.with_restriction(self.ctx, agent),
            _shared=self._shared,
        )

    def judges_like(self, other: SessionPolicy) -> bool:
        """Whether ``other`` decides every call as this one does: the same rules, the same
        session facts (restrictions included) and the same grants and audit log."""
        return (
            other.policy is self.policy and other.ctx == self.ctx and other._shared is self._shared
        )

    def child_policy(self) -> Callable[[AgentDefinition, ToolContext], SessionPolicy]:
        """The ``child_policy`` factory for ``delegate_task_tool``.

        The child is derived from the policy of the session that delegates (found in the
        call's ``ctx.protection``) when that is this policy or one of its sub-agents', so a
        grandchild keeps the intermediate agent's restrictions; otherwise from this one.
        ``delegate_task_tool`` already derives it so without this factory.
        """

        def make(agent: AgentDefinition, ctx: ToolContext) -> SessionPolicy:
            caller = ctx.protection.policy if ctx.protection is not None else None
            judges = getattr(caller, "judges", (caller,))  # a Protection, or its one judge
            parent = next(
                (j for j in judges if isinstance(j, SessionPolicy) and j._shared is self._shared),
                self,
            )
            return parent.child(agent.name, f"{ctx.session_id or parent.session_id}.{agent.name}")

        return make

    def for_delegation(self, ask: Approver | None, *, who: str = "human") -> dict[str, Any]:
        """``delegate_task_tool(..., **policy.for_delegation(ask))``: child policy + approver.

        A sub-agent's calls that need a human go to ``ask``, the parent's human. They
        cannot wait for a later answer (a sub-agent run is not resumable on its own), so
        an interface that would make them wait denies them instead, with a message.
        """
        return {
            "child_policy": self.child_policy(),
            "approver": PolicyApprover(self, ask, who=who, can_wait=False),
        }


class PolicyApprover:
    """Wraps a human interface with the session's rules for answers.

    - no answer, or anything that is not an :class:`ApprovalAnswer`, is a deny: empty
      input is never approval;
    - :class:`ApproveAlways` records a grant for that one tool (and argument pattern);
      for a DANGEROUS tool it approves this call only;
    - edited arguments are validated and checked by the policy again: a deny still wins;
    - every answer is written to the audit log with who gave it;
    - in a headless session nobody is asked: everything is denied.
    """

    def __init__(
        self,
        policy: SessionPolicy,
        ask: Approver | None,
        *,
        who: str = "human",
        can_wait: bool = True,
    ) -> None:
        self.policy = policy
        self.ask = ask
        self.who = who
        self.can_wait = can_wait

    def with_answers(self, answers: Mapping[str, ApprovalAnswer]) -> PolicyApprover:
        """This approver, with ``answers`` (by call id) given as the human's."""
        return PolicyApprover(
            self.policy, answering(answers, self.ask), who=self.who, can_wait=self.can_wait
        )

    async def __call__(self, requests: Sequence[ApprovalRequest]) -> list[ApprovalAnswer]:
        if self.policy.headless or self.ask is None:
            why = "this session is headless" if self.policy.headless else "no human is attached"
            return [self._settle(r, not_answered(f"nobody can approve: {why}")) for r in requests]
        try:
            given = list(await self.ask(requests))
        except PendingApproval:
            if self.can_wait:
                raise
            given = [
                not_answered(
                    "no human could answer now, and a sub-agent's call cannot wait for a "
                    "later approval"
                )
                for _ in requests
            ]
        return [
            self._settle(r, given[i] if i < len(given) else None) for i, r in enumerate(requests)
        ]

    def _settle(self, request: ApprovalRequest, answer: Any) -> ApprovalAnswer:
        asker = self.policy.asker(request.call)
        tool, call = request.tool, request.call
        note_approver(call.call_id, self.who)  # on the approval span, only if configured
        args = _args_of(request.params)

        def log(decision: str, reason: str = "", by: str | None = None, **extra: Any) -> None:
            asker.audit.record(
                session_id=asker.session_id,
                call_id=call.call_id,
                tool=tool.name,
                args=args,
                decision=decision,
                level="approval",
                reason=reason,
                approved_by=by,
                **extra,
            )

        if not isinstance(answer, ApprovalAnswer):
            log("deny", "no answer was given")
            return not_answered("no answer was given (an empty answer never approves)")
        if not answer.approved:
            if answer.by_user:
                log("deny", answer.message or "denied", None, denied_by=self.who)
            else:
                log("deny", answer.message or "nobody approved the call")
            return answer
        if answer.arguments is not None:
            try:
                params = validate_arguments(tool, answer.arguments).params
            except ArgumentError:
                log("edit", "the edited arguments are invalid", self.who)
                return answer  # the dispatcher reports why, once
            args = _args_of(params)
            checked = asker.decide(tool, args)
            if checked.action == "deny":
                log("deny", f"edited arguments denied: {checked.reason}", None, edited=True)
                return not_answered(f"the edited arguments are denied by policy: {checked.reason}")
        kind = "edit" if answer.arguments is not None else "approve"
        if isinstance(answer, ApproveAlways):
            if asker.tier_of(tool) == "DANGEROUS":
                log(
                    kind,
                    "approve-always refused: DANGEROUS tools are approved call by call",
                    self.who,
                )
                return ApprovalAnswer(True, answer.message, answer.arguments)
            try:
                grant = asker.grants.add(tool.name, answer.pattern, by=self.who)
            except PolicyError as exc:
                log(kind, f"approve-always not recorded: {exc.problems[0]}", self.who)
                return ApprovalAnswer(True, answer.message, answer.arguments)
            log("approve-always", grant.describe(), self.who, grant=grant.id)
            return ApprovalAnswer(True, answer.message, answer.arguments)
        log(kind, answer.message, self.who)
        return answer
