"""Properties of ``Protection``: ``a & b`` is the stricter of a and b, whatever they are.

Every case runs a real call through the real dispatcher, with the policy hook and the
approver ``Protection.dispatch`` gives it, and reads what happened: the call ran without
anyone asked (allow), the human was asked and it ran (ask), or it was refused and nobody
was asked (deny). Judges are plain functions (sync or async, or answering junk), ask
rules, and session policies from random policy files.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from test_policy_properties import ALL, args_strategy, config
from tooldeck import Protection
from tooldeck.approvals import ApprovalAnswer, ApprovalRequest, PolicyDecision, policy_decision
from tooldeck.assembly import Toolset
from tooldeck.dispatch import Dispatcher
from tooldeck.jobs.policy import creator_policy, record_creator
from tooldeck.policy import Policy, SessionPolicy
from tooldeck.transcript import ToolCall

RANK = {"allow": 0, "ask": 1, "deny": 2}
HEADLESS_LISTED = ("shell", "run_bash")  # DANGEROUS: first on the headless denylist


class Human:
    """An approver that says yes to everything and remembers what it was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def __call__(self, requests: Sequence[ApprovalRequest]) -> list[ApprovalAnswer]:
        self.asked.extend(r.call.name for r in requests)
        return [ApprovalAnswer(True) for _ in requests]


def fixed(answer: Any, is_sync: bool) -> Any:
    def decide(tool: Any, params: Any, call: ToolCall) -> Any:
        return PolicyDecision(answer, f"says {answer}") if answer in RANK else answer

    async def decide_async(tool: Any, params: Any, call: ToolCall) -> Any:
        return decide(tool, params, call)

    return decide if is_sync else decide_async


def no_marks(data: dict[str, Any]) -> dict[str, Any]:
    """A policy file without ``dangerous`` marks: its tiers are the tools' own, so an ask
    rule beside it judges the same tiers alone as together."""
    return {k: v for k, v in data.items() if k != "dangerous"}


judge = st.one_of(
    st.tuples(
        st.just("fixed"),
        st.sampled_from(["allow", "ask", "deny", "yes", None]),
        st.booleans(),
    ),
    st.tuples(
        st.just("ask"),
        st.lists(
            st.sampled_from(["STANDARD", "WRITE", "DANGEROUS", "writer", "w*", "ns:ext"]),
            min_size=1,
            max_size=2,
        ),
    ),
    st.tuples(st.just("rules"), config.map(no_marks)),
)


def protection(spec: tuple[Any, ...]) -> Protection:
    """A fresh protection of one judge, from its spec (no approver of its own)."""
    if spec[0] == "fixed":
        return Protection.policy(fixed(spec[1], spec[2]))
    if spec[0] == "ask":
        return Protection.ask(tuple(spec[1]))  # the console default: never used here
    return Protection.policy(SessionPolicy(Policy.from_dict(spec[1])))


def outcome(protect: Protection, name: str, args: dict[str, Any]) -> str:
    """What the dispatcher did with one call of ``name`` under ``protect``."""
    human = Human()
    if not protect.unattended:  # the human answers every ask; & gives it to every judge
        protect = protect & Protection.none() & Protection(approver=human)
    hook, approver = protect.dispatch()
    dispatcher = Dispatcher(Toolset([ALL[name]]), policy=hook, approver=approver)
    call = ToolCall("c1", name, json.dumps(args))
    (output,) = asyncio.run(dispatcher.dispatch([call])).outputs
    ran = output.text == f"{name} ran"
    if human.asked:
        assert ran  # the human said yes
        return "ask"
    return "allow" if ran else "deny"


@settings(max_examples=150, deadline=None)
@given(st.lists(judge, min_size=1, max_size=3), st.sampled_from(sorted(ALL)), args_strategy)
def test_the_combination_is_the_stricter_of_its_parts_in_any_order(
    specs: list[tuple[Any, ...]], name: str, args: dict[str, Any]
) -> None:
    alone = [outcome(protection(s), name, args) for s in specs]
    combined = outcome(Protection.both(*(protection(s) for s in specs)), name, args)
    assert combined == max(alone, key=RANK.__getitem__)
    backwards = outcome(Protection.both(*(protection(s) for s in reversed(specs))), name, args)
    assert backwards == combined  # commutative in what it decides
    if len(specs) == 3:
        a, b, c = (protection(s) for s in specs)
        assert outcome((a & b) & c, name, args) == outcome(a & (b & c), name, args) == combined


@settings(max_examples=100, deadline=None)
@given(st.lists(judge, max_size=3), st.sampled_from(sorted(ALL)), args_strategy)
def test_headless_never_asks_and_never_allows_more(
    specs: list[tuple[Any, ...]], name: str, args: dict[str, Any]
) -> None:
    attended = outcome(Protection.both(*(protection(s) for s in specs)), name, args)
    made = Protection.both(*(protection(s) for s in specs)).headless()
    headless = outcome(made, name, args)
    assert headless != "ask"  # nobody is there: the human is never asked
    if attended != "allow" or name in HEADLESS_LISTED:
        assert headless == "deny"
    hook = made.dispatch()[0]  # and its hook itself never asks: the approver is not the guard
    assert hook is not None
    call = ToolCall("c1", name, json.dumps(args))
    decided = asyncio.run(policy_decision(hook, ALL[name], args, call))
    assert decided.action != "ask" and (decided.action == "deny") == (headless == "deny")


@settings(max_examples=100, deadline=None)
@given(config, st.lists(st.sampled_from(["WRITE", "DANGEROUS", "writer", "ns:ext"]), max_size=2))
def test_a_recorded_protection_rebuilds_every_judge_and_decides_alike(
    data: dict[str, Any], words: list[str]
) -> None:
    """What a schedule or a job keeps of its creator: a session policy and an ask rule,
    read back as the same judges (marks included: the rule judges the policy's tiers)."""
    rules = Policy.from_dict(data)
    made = Protection.policy(SessionPolicy(rules, session_id="s"))
    if words:
        made = made & Protection.ask(tuple(words))
    record = json.loads(json.dumps(record_creator(made, "s")))
    rebuilt = creator_policy(record, "s")
    assert [type(j) for j in rebuilt.judges] == [type(j) for j in made.judges]
    for name in sorted(ALL):
        for args in ({}, {"path": "docs/a.md"}, {"command": "ls"}):
            assert outcome(rebuilt, name, args) == outcome(made, name, args), (name, args)


def test_the_one_judge_is_handed_to_the_dispatcher_as_it_is() -> None:
    """A tool reads the session's protection back from its call's context, exactly."""
    policy = SessionPolicy()
    alone = Protection.policy(policy)
    assert alone.dispatch()[0] is policy and Protection.of(policy).judges == (policy,)
    both = alone & Protection.ask("WRITE")
    assert both.dispatch()[0] is both and Protection.of(both) is both
    assert Protection.none().dispatch() == (None, None)
    assert alone & alone == alone  # the same judge is not added twice


def test_two_approvers_are_one_too_many_and_the_console_gives_way() -> None:
    def yes(request: ApprovalRequest) -> bool:
        return True

    asked = Protection.ask("WRITE") & Protection.policy(SessionPolicy(), approver=yes)
    assert asked.approver is yes  # a given approver answers for both, not the console
    with pytest.raises(ValueError, match="give approver= to one of them"):
        Protection.ask("WRITE", approver=yes) & Protection.ask("DANGEROUS", approver=print)
    with pytest.raises(ValueError, match="give 'console'"):
        Protection.ask("WRITE", approver="consol")  # type: ignore[arg-type]
