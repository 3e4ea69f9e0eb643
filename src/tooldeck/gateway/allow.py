"""How to allow a call that nobody could approve: the exact rule, checked, or what else.

When the policy asks about a call and no person can answer (the client cannot elicit and
no out-of-band approver waits, or ``--approvals deny``), the gateway denies the call at
once (:func:`.approval.nobody_asker`) and says how to let it run:

- the rule to add to the gateway's policy file, for this one tool, spelled by
  :func:`.catalog.rule_name`, in the format of that file (TOML, or JSON). It is checked
  before it is shown: the gateway's policy merged with the rule must allow this very
  call. So a rule is never suggested where it would not help;
- otherwise why no rule of that kind helps: a DANGEROUS tool always needs a person, and
  a rule that asks (or a level's ``default``) wins over an added allow, so that rule is
  named instead;
- and the other way: a client with elicitation, or ``--approvals out-of-band``.

The text is for the model, which tells the user; it is kept short (the dispatcher clips
error texts at 500 characters: a long tool name and policy path can cut the other way
off, never the rule, which comes first), the rule on lines of its own so that it can be
pasted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..approvals import ApprovalRequest, arguments_json
from ..policy import Policy, SessionPolicy
from .catalog import client_name, rule_name

__all__ = ["allow_rule", "how_to_allow"]


def allow_rule(name: str, *, json_file: bool = False) -> str:
    """The policy rule that allows every call of the tool ``name``: TOML lines to append
    to a policy file, or (``json_file``) the JSON object to add to ``profile.rules``."""
    if json_file:
        return json.dumps({"tools": name, "action": "allow"})
    return f'[[profile.rules]]\ntools = {json.dumps(name)}\naction = "allow"'


def how_to_allow(request: ApprovalRequest, policy: SessionPolicy, *, otherwise: str) -> str:
    """What lets ``request`` run next time (see the module docstring); ``otherwise`` is
    the other way (an option), said last."""
    tool = request.tool
    shown = client_name(tool)
    if policy.tier_of(tool) == "DANGEROUS":
        return (
            f"{shown} is DANGEROUS, so no policy rule runs it without a person's approval: "
            f"{otherwise}."
        )
    value = arguments_json(request.params)
    args = dict(value) if isinstance(value, Mapping) else {}
    name = rule_name(tool)
    rule = {"profile": {"rules": [{"tools": name, "action": "allow"}]}}
    chain = policy.policy
    decided = chain.merged(Policy.from_dict(rule)).decide(tool, args, policy.ctx, policy.grants)
    if decided.action != "allow":
        now = chain.decide(tool, args, policy.ctx, policy.grants)
        return (
            f"the gateway's policy asks about {shown} ({now.level}: {now.reason}), and an "
            f"added allow rule would not change that: change that rule, or {otherwise}."
        )
    files = _files(chain.sources)
    if not files:
        return (
            "To allow it, restart the gateway with --policy FILE, a file holding:\n"
            f"{allow_rule(name)}\n(or {otherwise})."
        )
    target = files[-1]
    json_file = target.suffix == ".json"
    where = "to the profile.rules list of" if json_file else "to"
    return (
        f"To allow it, add this rule {where} {target} and restart the gateway:\n"
        f"{allow_rule(name, json_file=json_file)}\n(or {otherwise})."
    )


def _files(sources: Sequence[str]) -> list[Path]:
    """The policy files among a policy's sources (not ``<policy>`` and the like)."""
    return [Path(s).absolute() for s in sources if not s.startswith("<")]
