"""Two policies that must both allow a call: :class:`BothMustAllow` (the stricter wins).

Used for a sub-agent given an explicit policy (``tooldeck.agents.delegation``) and for a
session given both ``policy=`` and ``approve=`` (``tooldeck.loop``): each call is judged
by both, deny > ask > allow, and a sub-agent derives both parts again.
"""

from __future__ import annotations

import inspect
from typing import Any

from ..approvals import PolicyDecision, PolicyHook
from ..tools import Tool
from ..transcript import ToolCall
from .session import SessionPolicy

__all__ = ["BothMustAllow", "inherit_policy", "policy_decision"]

_RANK = {"allow": 0, "ask": 1, "deny": 2}


async def policy_decision(
    policy: PolicyHook, tool: Tool, params: Any, call: ToolCall
) -> PolicyDecision:
    """``policy``'s decision, awaited; anything that is not a decision is a deny."""
    decided = policy(tool, params, call)
    if inspect.isawaitable(decided):
        decided = await decided
    if not isinstance(decided, PolicyDecision) or decided.action not in _RANK:
        return PolicyDecision("deny", f"the policy answered {decided!r}, not a decision")
    return decided


class BothMustAllow:
    """A sub-agent's policy when one is given explicitly: the inherited one AND it.

    Each call is judged by the inherited policy first (a deny there ends it), then by the
    explicit one; the stricter verdict wins (deny > ask > allow), with its reason. A
    tool is shown only when both show it. Its sub-agents derive both parts again.
    """

    def __init__(self, inherited: PolicyHook, explicit: PolicyHook) -> None:
        self.inherited = inherited
        self.explicit = explicit

    async def __call__(self, tool: Tool, params: Any, call: ToolCall) -> PolicyDecision:
        first = await policy_decision(self.inherited, tool, params, call)
        if first.action == "deny":
            return first
        second = await policy_decision(self.explicit, tool, params, call)
        return second if _RANK[second.action] > _RANK[first.action] else first

    def visible(self, tool: Tool) -> bool:
        for part in (self.inherited, self.explicit):
            shows = getattr(part, "visible", None)
            if callable(shows) and not shows(tool):
                return False
        return True

    def child(self, agent: str, session_id: str) -> BothMustAllow:
        return BothMustAllow(
            inherit_policy(self.inherited, agent, session_id),
            inherit_policy(self.explicit, agent, session_id),
        )


def inherit_policy(policy: PolicyHook, agent: str, session_id: str) -> PolicyHook:
    """The policy a sub-agent ``agent`` of a session with ``policy`` runs under."""
    if isinstance(policy, SessionPolicy | BothMustAllow):
        return policy.child(agent, session_id)
    return policy  # a plain hook: the same function judges the child's calls
