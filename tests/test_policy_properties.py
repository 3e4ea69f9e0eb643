"""Properties of the policy chain over random configurations and call sequences.

- a DANGEROUS call never executes without a human's approval of that very call;
- a deny at any level always wins;
- the plan never shows a tool the dispatcher would deny for the session, and never hides
  one it would let run (checked against an independent brute force over arguments);
- a sub-agent never gets more than its parent;
- every call gets exactly one output, whatever the policy and the answers.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from tooldeck import Protection, Session, Tool, Toolset
from tooldeck.approvals import ApprovalAnswer, ApprovalRequest
from tooldeck.plan import ToolPlanner
from tooldeck.policy import GrantStore, Policy, PolicyContext, SessionPolicy
from tooldeck.policy.rules import RANK
from tooldeck.policy.session import ApproveAlways
from tooldeck.testing import ScriptedModel, call, reply
from tooldeck.transcript import ToolOutput

# -- the universe: tools, argument values, rule pieces -----------------------------------------
TOOLS = {
    # name: (tier, namespace)
    "reader": ("STANDARD", None),
    "writer": ("WRITE", None),
    "shell": ("DANGEROUS", None),
    "wiper": ("WRITE", None),  # sometimes marked dangerous by the policy
    "ext_tool": ("STANDARD", "ext"),
    "run_bash": ("STANDARD", None),  # DANGEROUS whatever its definition says
}
PREFIXES = ["docs", "docs/sub", "src", "/etc"]
PATHS: list[Any] = ["docs", "docs/a.md", "docs/sub/b", "src/x.py", "../etc/passwd", "/etc/passwd"]
PATHS += ["zz", 1]
PROGRAMS = ["git", "ls", "rm", "cat", "echo"]
COMMANDS: list[Any] = [
    *PROGRAMS,
    *(f"{a} x && {b} y" for a, b in itertools.combinations(PROGRAMS, 2)),
    "sudo rm -rf /",
    "echo $(id)",
    "cat a > b",
    "zz",
    1,
]
MODES: list[Any] = ["fast", "slow", "docs", "zz", 1, True]
ABSENT = object()
BRUTE = [
    {k: v for k, v in zip(("path", "command", "mode"), combo, strict=True) if v is not ABSENT}
    for combo in itertools.product([ABSENT, *PATHS], [ABSENT, *COMMANDS], [ABSENT, *MODES])
]
"""Every class of values the generated tests can tell apart, for each argument."""

selector = st.sampled_from(
    [*TOOLS, "*", "w*", "ns:ext", "tier:STANDARD", "tier:WRITE", "tier:DANGEROUS"]
)
prefix_test = st.fixed_dictionaries({"prefix": st.sampled_from(PREFIXES)})
path_test = st.one_of(
    prefix_test,
    st.fixed_dictionaries({"equals": st.sampled_from(["docs/a.md", "zz"])}),
    st.fixed_dictionaries(
        {"prefix": st.sampled_from(PREFIXES), "in": st.lists(st.sampled_from(PATHS), min_size=1)}
    ),
)
command_test = st.one_of(
    st.fixed_dictionaries(
        {"program": st.lists(st.sampled_from(PROGRAMS), min_size=1, max_size=3, unique=True)}
    ),
    st.fixed_dictionaries({"equals": st.sampled_from(["ls", "git x && rm y", 1])}),
)
mode_value = st.sampled_from(["fast", "slow", 1, True])
mode_test = st.one_of(
    st.fixed_dictionaries({"equals": mode_value}),
    st.fixed_dictionaries({"in": st.lists(mode_value, min_size=1, max_size=3)}),
    st.fixed_dictionaries({"prefix": st.just("docs")}),  # on a non-path: uncertain for 1, True
)
arg_tests = st.fixed_dictionaries(
    {}, optional={"path": path_test, "command": command_test, "mode": mode_test}
)
rule = st.fixed_dictionaries(
    {
        "tools": st.lists(selector, min_size=1, max_size=2),
        "action": st.sampled_from(["allow", "deny", "ask", "pass"]),
    },
    optional={"args": arg_tests},
)
level = st.fixed_dictionaries(
    {},
    optional={
        "default": st.sampled_from(["allow", "deny", "ask", "pass"]),
        "rules": st.lists(rule, max_size=3),
    },
)
node = st.fixed_dictionaries(
    {"allow": st.lists(selector, min_size=1, max_size=3)},
    optional={"rules": st.lists(rule, max_size=2)},
)
config = st.fixed_dictionaries(
    {},
    optional={
        "profile": level,
        "organization": level,
        "modes": st.dictionaries(st.sampled_from(["plan", "auto"]), level, max_size=2),
        "agents": st.dictionaries(st.sampled_from(["main", "worker"]), level, max_size=2),
        "nodes": st.dictionaries(st.just("n1"), node, max_size=1),
        "dangerous": st.lists(st.sampled_from(["wiper", "w*", "ns:ext"]), max_size=2, unique=True),
        "headless": st.fixed_dictionaries({"deny": st.lists(selector, min_size=1, max_size=2)}),
        "delegation": st.fixed_dictionaries(
            {"auto_approve": st.lists(selector, max_size=2, unique=True)}
        ),
    },
)
context = st.builds(
    PolicyContext,
    mode=st.sampled_from([None, "plan", "auto"]),
    agent=st.sampled_from([None, "main", "worker"]),
    node=st.sampled_from([None, None, "n1", "n2"]),
    headless=st.booleans(),
)
grant = st.tuples(st.sampled_from(list(TOOLS)), st.one_of(st.none(), arg_tests))
args_strategy = st.fixed_dictionaries(
    {},
    optional={
        "path": st.sampled_from([p for p in PATHS if isinstance(p, str)]),
        "command": st.sampled_from([c for c in COMMANDS if isinstance(c, str)]),
        "mode": st.sampled_from(MODES),
    },
)


def make_tool(name: str) -> Tool:
    tier, namespace = TOOLS[name]

    def execute(params: Any, ctx: Any) -> str:
        EXECUTED.append((ctx.call_id, name))
        return f"{name} ran"

    return Tool.from_schema(
        name=name,
        description=f"The {name} tool.",
        json_schema={
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "command": {"type": "string"},
                "mode": {},
            },
            "additionalProperties": False,
        },
        execute=execute,
        tier=tier,  # type: ignore[arg-type]
        namespace=namespace,
        run_sync_in_thread=False,
    )


ALL = {name: make_tool(name) for name in TOOLS}
EXECUTED: list[tuple[str, str]] = []


def with_context(policy: Policy, ctx: PolicyContext, subagent: str | None) -> PolicyContext:
    return policy.with_restriction(ctx, subagent) if subagent else ctx


def store_with(grants: Sequence[tuple[str, Any]]) -> GrantStore:
    store = GrantStore()
    for name, pattern in grants:
        store.add(name, pattern)
    return store


# -- the decision function ---------------------------------------------------------------------
@given(
    config,
    context,
    st.sampled_from([None, "worker"]),
    st.sampled_from(list(TOOLS)),
    args_strategy,
    st.lists(grant, max_size=2),
)
def test_deny_wins_and_dangerous_is_never_allowed(
    data: dict[str, Any],
    ctx: PolicyContext,
    subagent: str | None,
    name: str,
    args: dict[str, Any],
    grants: list[tuple[str, Any]],
) -> None:
    policy = Policy.from_dict(data)
    ctx = with_context(policy, ctx, subagent)
    decision = policy.decide(ALL[name], args, ctx, store_with(grants))
    if any(entry.verdict == "deny" for entry in decision.trace):
        assert decision.action == "deny"
    else:
        assert decision.action != "deny"
    if decision.tier == "DANGEROUS":
        assert decision.action != "allow"
    if ctx.headless:
        assert decision.action != "ask"
    if decision.action == "allow" and decision.level == "delegation":
        assert decision.tier == "STANDARD" and subagent


LEVEL_KEYS = ["profile", "organization", "mode", "agent", "node", "subagent"]


@given(
    config,
    context,
    st.sampled_from([None, "worker"]),
    st.sampled_from(list(TOOLS)),
    args_strategy,
    st.sampled_from(LEVEL_KEYS),
    st.lists(grant, max_size=2),
)
def test_a_deny_added_at_any_active_level_always_wins(
    data: dict[str, Any],
    ctx: PolicyContext,
    subagent: str | None,
    name: str,
    args: dict[str, Any],
    where: str,
    grants: list[tuple[str, Any]],
) -> None:
    data = {**data}
    deny_rule = {"tools": [name], "action": "deny", "reason": "injected"}

    def add(section: dict[str, Any]) -> dict[str, Any]:
        return {**section, "rules": [*section.get("rules", []), deny_rule]}

    if where in ("profile", "organization"):
        data[where] = add(data.get(where, {}))
    elif where == "mode":
        ctx = PolicyContext("plan", ctx.agent, ctx.node, ctx.headless)
        data["modes"] = {
            **data.get("modes", {}),
            "plan": add(data.get("modes", {}).get("plan", {})),
        }
    elif where == "agent" or where == "subagent":
        agent = "main" if where == "agent" else "worker"
        if where == "agent":
            ctx = PolicyContext(ctx.mode, "main", ctx.node, ctx.headless)
        else:
            subagent = "worker"
        agents = data.get("agents", {})
        data["agents"] = {**agents, agent: add(agents.get(agent, {}))}
    else:
        ctx = PolicyContext(ctx.mode, ctx.agent, "n1", ctx.headless)
        nodes = data.get("nodes", {})
        data["nodes"] = {"n1": add(nodes.get("n1", {"allow": ["*"]}))}
    policy = Policy.from_dict(data)
    full = with_context(policy, ctx, subagent)
    decision = policy.decide(ALL[name], args, full, store_with(grants))
    assert decision.action == "deny"
    session = SessionPolicy(policy, context=full, grants=store_with(grants))
    assert not session.visible(ALL[name])


@settings(max_examples=120)
@given(
    config,
    context,
    st.sampled_from([None, "worker"]),
    st.sampled_from(list(TOOLS)),
    st.lists(grant, max_size=2),
)
def test_the_plan_shows_a_tool_exactly_when_some_call_of_it_could_run(
    data: dict[str, Any],
    ctx: PolicyContext,
    subagent: str | None,
    name: str,
    grants: list[tuple[str, Any]],
) -> None:
    policy = Policy.from_dict(data)
    full = with_context(policy, ctx, subagent)
    store = store_with(grants)
    session = SessionPolicy(policy, context=full, grants=store)
    runnable = any(
        session.decide(ALL[name], args).action != "deny" for args in BRUTE
    )  # independent of the representatives visible() tries
    assert session.visible(ALL[name]) == runnable
    event("shown" if runnable else "hidden")


@given(
    config,
    context,
    st.sampled_from(list(TOOLS)),
    args_strategy,
    st.lists(grant, max_size=2),
)
def test_a_sub_agent_never_gets_more_than_its_parent(
    data: dict[str, Any],
    ctx: PolicyContext,
    name: str,
    args: dict[str, Any],
    grants: list[tuple[str, Any]],
) -> None:
    policy = Policy.from_dict(data)
    store = store_with(grants)
    parent = policy.decide(ALL[name], args, ctx, store)
    child = policy.decide(ALL[name], args, policy.with_restriction(ctx, "worker"), store)
    if parent.action == "deny":
        assert child.action == "deny"
    if RANK[child.action] < RANK[parent.action]:
        # the only loosening: a STANDARD ask auto-approved by the parent
        assert (parent.action, child.action, child.level) == ("ask", "allow", "delegation")
        assert child.tier == "STANDARD"


# -- whole runs: the dispatcher, the loop, the human -------------------------------------------
answer = st.one_of(
    st.just(ApprovalAnswer(True)),
    st.just(ApprovalAnswer(True)),
    st.just(ApprovalAnswer(True)),
    st.just(ApprovalAnswer(False, "no")),
    st.builds(
        lambda p: ApproveAlways(pattern=p),
        st.one_of(st.none(), st.just({"path": {"prefix": "docs"}})),
    ),
    st.builds(lambda a: ApprovalAnswer(True, arguments=a), args_strategy),
    st.sampled_from([None, "", "yes", True, 1]),  # not answers: never approval
)
run_context = st.builds(
    PolicyContext,
    mode=st.sampled_from([None, "plan", "auto"]),
    agent=st.sampled_from([None, "main", "worker"]),
    node=st.sampled_from([None, None, None, "n1"]),
    headless=st.sampled_from([False, False, False, True]),
)
steps = st.lists(
    st.lists(
        st.tuples(
            st.sampled_from([*TOOLS, "shell", "shell", "run_bash", "unknown_tool"]), args_strategy
        ),
        min_size=1,
        max_size=5,
    ),
    min_size=1,
    max_size=4,
)


@settings(max_examples=150)
@given(config, run_context, steps, st.lists(answer, min_size=3, max_size=30), st.booleans())
def test_dangerous_calls_run_only_with_a_human_approval_and_every_call_gets_one_output(
    data: dict[str, Any],
    ctx: PolicyContext,
    script: list[list[tuple[str, dict[str, Any]]]],
    answers: list[Any],
    planned: bool,
) -> None:
    EXECUTED.clear()
    policy = Policy.from_dict(data)
    session_policy = SessionPolicy(policy, context=ctx)
    approved: set[str] = set()
    feed = iter(answers)

    async def human(requests: Sequence[ApprovalRequest]) -> list[Any]:
        out = []
        for r in requests:
            given_ = next(feed, None)
            if isinstance(given_, ApprovalAnswer) and given_.approved:
                approved.add(r.call.call_id)
            out.append(given_)
        return out

    turns = [reply(*(call(n, a) for n, a in step)) for step in script]
    model = ScriptedModel([*turns, reply("done")])
    toolset = Toolset(ALL.values())
    source: Any = ToolPlanner(toolset, visible=session_policy.visible) if planned else toolset
    session = Session(
        model,
        source,
        protect=Protection.policy(session_policy, approver=session_policy.approver(human)),
    )
    result = asyncio.run(session.run("go"))

    # every call exactly one output, in the model's order, step by step
    outputs = [o for o in result.items if isinstance(o, ToolOutput)]
    calls = [c for t in turns for c in t.tool_calls]
    assert [o.call_id for o in outputs] == [c.call_id for c in calls]
    # a DANGEROUS call ran only after a human approved that very call
    tiers = {n: policy.tier_of(t) for n, t in ALL.items()}
    for call_id, name in EXECUTED:
        if tiers[name] == "DANGEROUS":
            assert call_id in approved
            assert not ctx.headless
    # the model was never shown a tool the plan hides (every call of it would be denied:
    # visible() is checked against a brute force in the test above)
    if planned:
        for request in model.requests:
            assert all(session_policy.visible(shown) for shown in request.tools)
    event("a DANGEROUS call ran" if any(tiers[n] == "DANGEROUS" for _, n in EXECUTED) else "none")
