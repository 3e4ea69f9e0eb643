"""A job's policy: its parent's, as for ``delegate_task``, and headless on top.

A background job runs while nobody watches it, so nothing that needs a human can run in
it. Its policy is derived from the session that started it exactly as a sub-agent's is
(:func:`tooldeck.agents.delegation._child_policy`: the parent's rules plus the agent's
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

A job that runs where its session is not (a schedule's, a DBOS job, one resumed after its
process died) rebuilds that session's policy from what was recorded when it was made
(:func:`record_creator`, :func:`creator_policy`): the session's id, every part of its
policy (the rules in force then, as JSON: :mod:`tooldeck.policy.snapshot`; its mode,
agent, node and restrictions; an ``approve=`` rule) and the names of its tools. No
approve-always grant is carried: each run's asks are denied. A record that cannot be read
back raises :class:`CreatorPolicyError`, and the job does not run.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..agents.delegation import _child_policy
from ..approvals import (
    ApprovalAnswer,
    ApprovalRequest,
    PolicyDecision,
    PolicyHook,
    allow_all,
    not_answered,
)
from ..errors import TooldeckError
from ..policy import SessionPolicy
from ..policy.ask import AskBefore
from ..policy.both import BothMustAllow
from ..policy.chain import HEADLESS_DENY, Policy, PolicyContext, PolicyError
from ..policy.rules import Selector
from ..policy.snapshot import (
    context_from_json,
    context_to_json,
    policy_from_json,
    policy_to_json,
)
from ..tools import TIERS, Tool
from ..transcript import ToolCall

__all__ = [
    "CREATOR_VERSION",
    "CreatorPolicyError",
    "Headless",
    "creator_policy",
    "creator_tools",
    "deny_all",
    "job_policy",
    "record_creator",
]

CREATOR_VERSION = 1

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


def _headless(hook: PolicyHook, home: Path | None) -> PolicyHook:
    """``hook`` with every session policy in it told that it is headless (the chain then
    denies its asks itself, and never lets its delegation level auto-approve one) and,
    given the job's ``home``, that its path rules judge paths there."""
    if isinstance(hook, SessionPolicy):
        ctx = replace(hook.ctx, headless=True, home=home if home is not None else hook.ctx.home)
        if ctx == hook.ctx:
            return hook
        return SessionPolicy(
            hook.policy,
            session_id=hook.session_id,
            context=ctx,
            grants=hook.grants,
            audit=hook.audit,
        )
    if isinstance(hook, BothMustAllow):
        return BothMustAllow(_headless(hook.inherited, home), _headless(hook.explicit, home))
    return hook


def _headless_denied(hook: PolicyHook) -> tuple[str, ...]:
    """The ``[headless] deny`` lists of every session policy in ``hook``."""
    if isinstance(hook, SessionPolicy):
        return tuple(s.text for s in hook.policy.headless_deny)
    if isinstance(hook, BothMustAllow):
        return _headless_denied(hook.inherited) + _headless_denied(hook.explicit)
    return ()


def job_policy(
    parent: PolicyHook, agent: str, session_id: str, home: Path | None = None
) -> Headless:
    """The policy of a job of agent ``agent`` started by a session whose policy is
    ``parent``; ``home``: the job's home, where its path rules are judged."""
    inherited = _headless(_child_policy(parent, None, agent, session_id), home)
    return Headless(inherited, _headless_denied(inherited))


# -- what a job or a schedule keeps of the session that made it ------------------------------
class CreatorPolicyError(TooldeckError, ValueError):
    """The policy of the session that made a job cannot be recorded, or rebuilt; says why."""


def _rules_part(policy: SessionPolicy) -> dict[str, Any]:
    part = {
        "kind": "rules",
        "policy": policy_to_json(policy.policy),
        "context": context_to_json(policy.ctx),
    }
    try:  # exactly what will be read back, or nothing
        text = json.dumps(part, allow_nan=False)
        read = json.loads(text)
        same = policy_from_json(read["policy"]) == policy.policy and context_from_json(
            read["context"]
        ) == replace(policy.ctx, home=None)
    except (TypeError, ValueError, PolicyError) as exc:
        raise CreatorPolicyError(f"the session's policy cannot be written down: {exc}") from exc
    if not same:
        raise CreatorPolicyError(
            "the session's policy cannot be written down exactly (a value in it is not JSON)"
        )
    return part


def _ask_part(rule: AskBefore) -> dict[str, Any]:
    if rule.test is not None:
        raise CreatorPolicyError(
            "the session's approve= is a function, which cannot be written down; give it "
            "tiers or tool names instead"
        )
    return {
        "kind": "ask",
        "ask": [t for t in TIERS if t in rule.tiers] + [s.text for s in rule.selectors],
    }


def _parts(hook: PolicyHook | None) -> list[dict[str, Any]]:
    if hook is None or hook is allow_all:  # no policy: the empty one (tiers decide)
        return [_rules_part(SessionPolicy())]
    if isinstance(hook, SessionPolicy):
        return [_rules_part(hook)]
    if isinstance(hook, BothMustAllow):
        return _parts(hook.inherited) + _parts(hook.explicit)
    if isinstance(hook, Headless):
        return _parts(hook.inner)
    if isinstance(hook, AskBefore):
        return [_ask_part(hook)]
    raise CreatorPolicyError(
        f"the session's policy is a {type(hook).__name__}, which tooldeck cannot write "
        "down (use a tooldeck.policy.SessionPolicy)"
    )


def record_creator(
    policy: PolicyHook | None, session_id: str, tools: Sequence[str] | None = None
) -> dict[str, Any]:
    """What a job or a schedule keeps of the session that made it (JSON data).

    Its id; every part of its ``policy`` (a :class:`~tooldeck.policy.SessionPolicy`: the
    rules in force now and the session's mode, agent, node and restrictions; an
    ``approve=`` rule; both, when both judge its calls; no policy at all is recorded as
    the empty one: the tiers decide); and the names of the ``tools`` it had (``None``: no
    limit). A policy that cannot be written down exactly (a plain function) is recorded
    as ``refused``, with why: :func:`creator_policy` then refuses it.
    """
    record: dict[str, Any] = {
        "version": CREATOR_VERSION,
        "session_id": session_id,
        "tools": list(tools) if tools is not None else None,
    }
    try:
        record["policy"] = _parts(policy)
    except CreatorPolicyError as exc:
        record.update(policy=None, refused=str(exc))
    return record


def _rebuilt(part: Any, session_id: str, home: Path | None, tier_of: Any) -> PolicyHook:
    kind = part.get("kind") if isinstance(part, Mapping) else None
    if kind == "rules":
        try:
            rules = policy_from_json(part.get("policy"))
            ctx: PolicyContext = context_from_json(part.get("context"))
        except PolicyError as exc:
            more = f" (and {len(exc.problems) - 1} more)" if len(exc.problems) > 1 else ""
            raise CreatorPolicyError(
                f"the recorded policy cannot be read back: {exc.problems[0]}{more}"
            ) from exc
        return SessionPolicy(rules, session_id=session_id, context=replace(ctx, home=home))
    if kind == "ask":
        words = part.get("ask")
        if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
            raise CreatorPolicyError("the recorded approve= rule is not a list of names")
        try:
            return AskBefore(tuple(words), tier_of)
        except ValueError as exc:
            raise CreatorPolicyError(f"the recorded approve= rule is unusable: {exc}") from exc
    raise CreatorPolicyError(f"the recorded policy has a part tooldeck does not know: {kind!r}")


def creator_policy(record: Any, session_id: str, home: Path | None = None) -> PolicyHook:
    """The policy of the session ``record`` (:func:`record_creator`) describes, for a job
    of it whose session id is ``session_id`` and whose home is ``home`` (path rules are
    judged there): every recorded part must allow a call. :func:`job_policy` makes it
    headless. Raises :class:`CreatorPolicyError` saying why when it cannot be rebuilt."""
    if record is None:
        raise CreatorPolicyError(
            "nothing records the policy of the session that made it (a schedule made "
            "before tooldeck recorded it: make the schedule again)"
        )
    if not isinstance(record, Mapping):
        raise CreatorPolicyError("the record of its creator's policy is not an object")
    if record.get("version") != CREATOR_VERSION:
        raise CreatorPolicyError(
            f"its creator's policy is recorded in version {record.get('version')!r}, which "
            f"this tooldeck does not read (it reads version {CREATOR_VERSION})"
        )
    if record.get("refused"):
        raise CreatorPolicyError(str(record["refused"]))
    parts = record.get("policy")
    if not isinstance(parts, list) or not parts:
        raise CreatorPolicyError("the record of its creator's policy holds no policy")
    hooks: list[PolicyHook] = []
    tier_of = None
    for part in parts:
        hook = _rebuilt(part, session_id, home, tier_of)
        if isinstance(hook, SessionPolicy):
            tier_of = hook.tier_of
        hooks.append(hook)
    combined = hooks[0]
    for hook in hooks[1:]:
        combined = BothMustAllow(combined, hook)
    return combined


def creator_tools(record: Any) -> list[str] | None:
    """The tool names the creator had (``None``: no limit was recorded)."""
    tools = record.get("tools") if isinstance(record, Mapping) else None
    if tools is None:
        return None
    if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
        raise CreatorPolicyError("the recorded tool names are not a list of names")
    return tools


async def deny_all(requests: Sequence[ApprovalRequest]) -> list[ApprovalAnswer]:
    """A job's approver: nobody is there, every request is denied."""
    return [not_answered(_NOBODY) for _ in requests]
