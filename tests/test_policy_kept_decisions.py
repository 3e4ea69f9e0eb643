"""A session keeps the chain's decision for a tool whose rules never read the arguments
(an allow no grant gave, a deny of the rules): every call gets what the chain decides
for it, whatever its arguments, and asks, grants, rules on arguments, a headless deny,
a new context or policy are decided again."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from test_policy import make as make_tool
from tooldeck.policy import Policy, SessionPolicy
from tooldeck.tools import Tool


def make(name: str, tier: Any = "STANDARD") -> Tool:
    return make_tool(name, tier)


ALLOWED, DENIED, BY_ARGS, ASKED = make("allowed"), make("denied"), make("by_args"), make("asked")
DANGER = make("danger", "DANGEROUS")
RULES = {
    "profile": {
        "rules": [
            {"tools": "allowed", "action": "allow"},
            {"tools": "denied", "action": "deny", "reason": "never"},
            {"tools": "by_args", "action": "allow"},
            {"tools": "by_args", "action": "deny", "args": {"path": {"prefix": "secrets/"}}},
            {"tools": ["asked", "danger"], "action": "ask"},
        ]
    }
}
ARGS = [{}, {"path": "secrets/key"}, {"path": "notes.txt"}, {"x": [1, 2]}]


def session(**kwargs: Any) -> SessionPolicy:
    return SessionPolicy(Policy.from_dict(RULES), session_id="s", **kwargs)


@pytest.mark.parametrize("headless", [False, True])
def test_every_call_gets_the_chains_decision(headless: bool) -> None:
    policy = session(headless=headless)
    for _ in range(3):  # kept from the first round on
        for tool in (ALLOWED, DENIED, BY_ARGS, ASKED, DANGER):
            for args in ARGS:
                fresh = policy.policy.decide(tool, args, policy.ctx, policy.grants)
                assert policy.decide(tool, args) == fresh


def test_rules_on_arguments_are_judged_per_call() -> None:
    policy = session()
    assert policy.decide(BY_ARGS, {"path": "notes.txt"}).action == "allow"
    assert policy.decide(BY_ARGS, {"path": "secrets/key"}).action == "deny"
    assert policy.decide(BY_ARGS, {"path": "notes.txt"}).action == "allow"
    assert policy.policy.reads_arguments(policy.policy.facts(BY_ARGS), policy.ctx)
    assert not policy.policy.reads_arguments(policy.policy.facts(ALLOWED), policy.ctx)


def test_an_ask_is_decided_again_so_a_grant_counts() -> None:
    policy = session()
    assert policy.decide(ASKED, {}).action == "ask"
    grant = policy.grants.add("asked")
    decision = policy.decide(ASKED, {})
    assert (decision.action, decision.grant) == ("allow", grant.id)


def test_a_headless_deny_of_an_ask_is_decided_again() -> None:
    policy = session(headless=True)
    assert policy.decide(ASKED, {}).action == "deny"
    policy.grants.add("asked")
    assert policy.decide(ASKED, {}).action == "allow"


def test_a_new_context_or_policy_decides_again() -> None:
    policy = session()
    assert policy.decide(ALLOWED, {}).action == "allow"
    denying = {"profile": {"rules": [{"tools": "allowed", "action": "deny"}]}}
    policy.policy = Policy.from_dict(denying)
    assert policy.decide(ALLOWED, {}).action == "deny"
    policy.ctx = replace(policy.ctx, headless=True)
    assert policy.decide(ALLOWED, {}).level != ""
    assert policy.decide(ALLOWED, {}) == policy.policy.decide(ALLOWED, {}, policy.ctx)


def test_another_tool_of_the_same_name_is_decided_again() -> None:
    policy = session()
    assert policy.decide(ALLOWED, {}).action == "allow"
    other = make("allowed")
    assert other is not ALLOWED
    assert policy.decide(other, {}) == policy.policy.decide(other, {}, policy.ctx)
