"""A job's protection: its parent's, as for ``delegate_task``, and headless on top.

A background job runs while nobody watches it, so nothing that needs a human can run in
it. Its protection is derived from the session that started it exactly as a sub-agent's
is (:meth:`~tooldeck.policy.protection.Protection.child`: a session policy's rules plus the agent's
restrictions), then made headless (:meth:`~tooldeck.policy.protection.Protection.headless`):

1. the headless denylist is checked first (``HEADLESS_DENY``: ``delegate_task`` and every
   DANGEROUS tool, plus the policy file's ``[headless] deny``): a match is a deny;
2. every inherited judge judges the call; a deny is a deny;
3. an *ask* (a WRITE tool, say) is denied: nobody can answer it now. A grant the parent's
   human gave with approve-always still counts (it is the human's answer, given ahead),
   except for DANGEROUS tools, which step 1 already denied.

Never an allow where the parent would have asked. A plain function inherited from the
parent is made headless too; a :class:`~tooldeck.policy.SessionPolicy` additionally
records every decision in the parent's audit log. A job's approver always answers "no"
(:func:`~tooldeck.policy.protection.deny_all`), so a judge that asks after all is still
never answered yes.

A job that runs where its session is not (a schedule's, a DBOS job, one resumed after its
process died) rebuilds that session's protection from what was recorded when it was made
(:func:`record_creator`, :func:`creator_policy`): the session's id, every judge of its
protection (a session policy: the rules in force then, as JSON,
:mod:`tooldeck.policy.snapshot`, and its mode, agent, node and restrictions; an ``ask``
rule) and the names of its tools. No approve-always grant is carried: each run's asks
are denied. A record that cannot be read back raises :class:`CreatorPolicyError`, and
the job does not run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..approvals import PolicyHook
from ..errors import TooldeckError
from ..policy import SessionPolicy
from ..policy.ask import AskBefore
from ..policy.chain import PolicyContext, PolicyError
from ..policy.protection import Protection
from ..policy.snapshot import (
    context_from_json,
    context_to_json,
    policy_from_json,
    policy_to_json,
)
from ..tools import TIERS

__all__ = [
    "CREATOR_VERSION",
    "creator_tools",
]

CREATOR_VERSION = 1


def job_policy(
    parent: PolicyHook | Protection, agent: str, session_id: str, home: Path | None = None
) -> Protection:
    """The protection of a job of agent ``agent`` started by a session whose dispatcher's
    policy hook is ``parent``; ``home``: the job's home, where its path rules are judged."""
    return Protection.of(parent).child(agent, session_id).headless(home)


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
            "the session's ask rule is a function, which cannot be written down; give it "
            "tiers or tool names instead"
        )
    return {
        "kind": "ask",
        "ask": [t for t in TIERS if t in rule.tiers] + [s.text for s in rule.selectors],
    }


def _part(judge: PolicyHook) -> dict[str, Any]:
    if isinstance(judge, SessionPolicy):
        return _rules_part(judge)
    if isinstance(judge, AskBefore):
        return _ask_part(judge)
    raise CreatorPolicyError(
        f"the session's policy is a {type(judge).__name__}, which tooldeck cannot write "
        "down (use a tooldeck.policy.SessionPolicy)"
    )


def record_creator(
    policy: PolicyHook | Protection | None, session_id: str, tools: Sequence[str] | None = None
) -> dict[str, Any]:
    """What a job or a schedule keeps of the session that made it (JSON data).

    Its id; every judge of its protection (``policy``: a
    :class:`~tooldeck.policy.protection.Protection`, or the dispatcher's policy hook it stands for):
    a :class:`~tooldeck.policy.SessionPolicy` (the rules in force now and the session's
    mode, agent, node and restrictions), an ``ask`` rule, each of them when several judge
    its calls; no judge at all is recorded as the empty policy (the tiers decide); and
    the names of the ``tools`` it had (``None``: no limit). A judge that cannot be
    written down exactly (a plain function) is recorded as ``refused``, with why:
    :func:`creator_policy` then refuses it.
    """
    record: dict[str, Any] = {
        "version": CREATOR_VERSION,
        "session_id": session_id,
        "tools": list(tools) if tools is not None else None,
    }
    judges = Protection.of(policy).judges or (SessionPolicy(),)
    try:
        record["policy"] = [_part(judge) for judge in judges]
    except CreatorPolicyError as exc:
        record.update(policy=None, refused=str(exc))
    return record


def _rebuilt(part: Any, session_id: str, home: Path | None) -> PolicyHook:
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
            raise CreatorPolicyError("the recorded ask rule is not a list of names")
        try:
            return AskBefore(tuple(words))  # judging the tiers of the session policies
        except ValueError as exc:
            raise CreatorPolicyError(f"the recorded ask rule is unusable: {exc}") from exc
    raise CreatorPolicyError(f"the recorded policy has a part tooldeck does not know: {kind!r}")


def creator_policy(record: Any, session_id: str, home: Path | None = None) -> Protection:
    """The protection of the session ``record`` (:func:`record_creator`) describes, for a
    job of it whose session id is ``session_id`` and whose home is ``home`` (path rules
    are judged there): every recorded judge must allow a call. :func:`job_policy` makes
    it headless. Raises :class:`CreatorPolicyError` saying why when it cannot be rebuilt."""
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
    return Protection(tuple(_rebuilt(part, session_id, home) for part in parts))


def creator_tools(record: Any) -> list[str] | None:
    """The tool names the creator had (``None``: no limit was recorded)."""
    tools = record.get("tools") if isinstance(record, Mapping) else None
    if tools is None:
        return None
    if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
        raise CreatorPolicyError("the recorded tool names are not a list of names")
    return tools
