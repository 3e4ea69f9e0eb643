"""A job's policy: its parent's, as for ``delegate_task``, and headless on top.

A background job runs while nobody watches it, so nothing that needs a human can run in
it. Its policy is derived from the session that started it exactly as a sub-agent's is
(:func:`tooldeck.delegation._child_policy`: the parent's rules plus the agent's
restrictions, an explicit policy only ever stricter), then wrapped by :class:`Headless`:

1. the headless denylist is checked first (``HEADLESS_DENY``: ``delegate_task`` and every
   DANGEROUS tool, plus the policy file's ``[headless] deny``): a match is a deny;
2. the inherited policy judges the call; a deny is a deny;
3. an *ask* (a WRITE tool, say) is denied: nobody can answer it now. A grant the parent's
   human gave with approve-always still counts (it is the human's answer, given ahead),
   except for DANGEROUS tools, which step 1 already denied.

Never an allow where the parent would have asked. :class:`Headless` works on any policy
hook, so a plain function inherited from the parent is made headless too; a
:class:`~tooldeck.policy.SessionPolicy` additionally records every decision in the
parent's audit log. A job's approver always answers "no" (:func:`deny_all`), so a policy
that asks after all is still never answered yes.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ..approvals import (
    ApprovalAnswer,
    ApprovalRequest,
    PolicyDecision,
    PolicyHook,
    not_answered,
)
from ..delegation import _child_policy
from ..policy import SessionPolicy
from ..policy.chain import HEADLESS_DENY, Policy
from ..policy.rules import Selector
from ..tool import Tool
from ..transcript import ToolCall

__all__ = ["Headless", "deny_all", "job_policy"]

_DEFAULT_RULES = Policy()  # tiers as defined, run_bash and computer always DANGEROUS
_NOBODY = "nobody can approve it: a background job is headless"


class Headless:
    """``inner``, with the headless denylist first and every ask turned into a deny."""

    def __init__(self, inner: PolicyHook, extra_deny: Sequence[str] = ()) -> None:
        self.inner = inner
        self.deny = tuple(Selector(s) for s in (*HEADLESS_DENY, *extra_deny))

    def _listed(self, tool: Tool) -> str | None:
        rules = getattr(self.inner, "policy", None)
        facts = (rules if isinstance(rules, Policy) else _DEFAULT_RULES).facts(tool)
        return next((s.text for s in self.deny if s.matches(facts)), None)

    async def __call__(self, tool: Tool, params: Any, call: ToolCall) -> PolicyDecision:
        listed = self._listed(tool)
        if listed is not None:
            return PolicyDecision(
                "deny",
                f"{tool.name} is not available in a background job (headless denylist: {listed})",
                "headless",
            )
        decided = self.inner(tool, params, call)
        if inspect.isawaitable(decided):
            decided = await decided
        if not isinstance(decided, PolicyDecision):
            return PolicyDecision("deny", f"the policy answered {decided!r}, not a decision")
        if decided.action == "ask":
            return PolicyDecision("deny", f"{decided.reason}; {_NOBODY}", "headless")
        return decided

    def visible(self, tool: Tool) -> bool:
        if self._listed(tool) is not None:
            return False
        shows = getattr(self.inner, "visible", None)
        return not callable(shows) or bool(shows(tool))


def job_policy(parent: PolicyHook, agent: str, session_id: str) -> Headless:
    """The policy of a job of agent ``agent`` started by a session whose policy is ``parent``."""
    inherited = _child_policy(parent, None, agent, session_id)
    if isinstance(inherited, SessionPolicy) and not inherited.headless:
        # the chain itself then knows it is headless (its audit lines say so too)
        inherited = SessionPolicy(
            inherited.policy,
            session_id=inherited.session_id,
            context=replace(inherited.ctx, headless=True),
            grants=inherited.grants,
            audit=inherited.audit,
        )
    extra: tuple[str, ...] = ()
    if isinstance(inherited, SessionPolicy):
        extra = tuple(s.text for s in inherited.policy.headless_deny)
    return Headless(inherited, extra)


async def deny_all(requests: Sequence[ApprovalRequest]) -> list[ApprovalAnswer]:
    """A job's approver: nobody is there, every request is denied."""
    return [not_answered(_NOBODY) for _ in requests]
