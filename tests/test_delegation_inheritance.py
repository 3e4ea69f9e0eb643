"""A sub-agent never runs with less protection than its parent (issue 17, item 2).

Real built-in tools (``run_bash`` really runs ``bash -c`` in the home), ScriptedModel,
the loop and the dispatcher: whether ``touch PWNED`` ran is read off the file system.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tooldeck import Protection, Session, Toolset, TurnContext, tool
from tooldeck.agents.delegation import delegate_task_tool
from tooldeck.agents.toolkits import AgentDefinition, ToolkitManifest
from tooldeck.approvals import (
    ApprovalAnswer,
    ApprovalRequest,
    PendingApproval,
    PolicyDecision,
    allow_all,
    arguments_json,
)
from tooldeck.builtin import load_builtin_registry
from tooldeck.context import LiveProtection, ToolContext
from tooldeck.dispatch import Dispatcher
from tooldeck.policy import Policy, SessionPolicy, approve, deny
from tooldeck.testing import ScriptedModel, call, reply
from tooldeck.transcript import ToolCall, ToolOutput

ROOT = Path(__file__).resolve().parents[1]
REGISTRY = load_builtin_registry()
MANIFEST = ToolkitManifest.load()
REGISTRY_TOOL = REGISTRY.toolset(TurnContext(session_id="t", home=Path("/nonexistent")))["run_bash"]

ANALYST = AgentDefinition.parse(
    "---\nname: analyst\ndescription: Runs commands.\ntoolkit: data_analysis\n---\nWork."
)


class Human:
    """A programmatic approver: answers from a script, records what it was asked."""

    def __init__(self, *answers: ApprovalAnswer, default: ApprovalAnswer | None = None) -> None:
        self.script = list(answers)
        self.default = default or deny("script ran out")
        self.asked: list[str] = []

    async def __call__(self, requests: Sequence[ApprovalRequest]) -> list[ApprovalAnswer]:
        self.asked.extend(r.call.name for r in requests)
        return [self.script.pop(0) if self.script else self.default for _ in requests]


def touch_script(name: str = "PWNED") -> ScriptedModel:
    return ScriptedModel([reply(call("run_bash", {"command": f"touch {name}"})), reply("ok")])


def parent_session(
    home: Path,
    delegate: Any,
    *,
    agent: str = "analyst",
    **options: Any,
) -> Session:
    turn = TurnContext(session_id="parent", home=home)
    model = ScriptedModel(
        [reply(call("delegate_task", {"agent": agent, "task": "tidy up"})), reply("done")]
    )
    tools = Toolset([*REGISTRY.toolset(turn).tools, delegate])
    return Session(model, tools, session_id="parent", turn=turn, **options)


def child_outputs(model: ScriptedModel) -> list[ToolOutput]:
    return [i for r in model.requests for i in r.transcript if isinstance(i, ToolOutput)]


def ask_for_all_but_delegation(tool: Any, params: Any, call: ToolCall) -> PolicyDecision:
    return PolicyDecision("allow" if tool.name == "delegate_task" else "ask", "ask me first")


# -- the documented example ------------------------------------------------------------------
def test_the_toolkits_doc_example_as_written_never_runs_what_the_parents_human_denied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = (ROOT / "docs" / "toolkits.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    example = next(b for b in blocks if "delegate_task_tool(agents, manifest, model_for=" in b)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # its mkdtemp lands in tmp_path
    namespace: dict[str, Any] = {"__name__": "toolkits_example"}
    with contextlib.suppress(AssertionError):  # its own assert: judged below, off the disk
        exec(compile(example, "docs/toolkits.md", "exec"), namespace)
    home: Path = namespace["home"]
    assert home.parent == tmp_path
    assert not (home / "PWNED").exists()
    (output,) = child_outputs(namespace["child_model"])
    assert output.is_error and "Denied by the user: not on my machine" in output.text


# -- the parent's policy and approver are inherited ------------------------------------------
def test_a_child_inherits_a_plain_policy_hook_and_its_human(tmp_path: Path) -> None:
    human = Human(default=deny("no"))
    child = touch_script()
    delegate = delegate_task_tool({"analyst": ANALYST}, MANIFEST, model_for=lambda a: child)
    session = parent_session(
        tmp_path, delegate, protect=Protection.policy(ask_for_all_but_delegation, approver=human)
    )
    asyncio.run(session.run("go"))
    assert not (tmp_path / "PWNED").exists()
    assert human.asked == ["run_bash"]  # the child's call went to the parent's human
    (output,) = child_outputs(child)
    assert output.is_error and output.text == "Denied by the user: no"


def test_a_child_inherits_a_session_policy_without_for_delegation(tmp_path: Path) -> None:
    rules = Policy.from_dict(
        {"profile": {"rules": [{"tools": "delegate_task", "action": "allow"}]}}
    )
    policy = SessionPolicy(rules, session_id="parent")
    human = Human(default=deny("no"))
    child = touch_script()
    delegate = delegate_task_tool({"analyst": ANALYST}, MANIFEST, model_for=lambda a: child)
    session = parent_session(
        tmp_path, delegate, protect=Protection.policy(policy, approver=policy.approver(human))
    )
    asyncio.run(session.run("go"))
    assert not (tmp_path / "PWNED").exists()
    assert human.asked == ["run_bash"]
    asked = [e for e in policy.audit.entries if e["tool"] == "run_bash"]
    # the child's own policy decided (under the child's session id), the human denied
    assert [e["decision"] for e in asked] == ["ask", "deny"]
    assert asked[0]["session_id"].startswith("parent.analyst.")


def test_a_parent_without_an_approver_gives_its_child_none(tmp_path: Path) -> None:
    child = touch_script()
    delegate = delegate_task_tool({"analyst": ANALYST}, MANIFEST, model_for=lambda a: child)
    session = parent_session(
        tmp_path, delegate, protect=Protection.policy(ask_for_all_but_delegation)
    )
    asyncio.run(session.run("go"))
    assert not (tmp_path / "PWNED").exists()
    (output,) = child_outputs(child)
    assert "no approver is attached" in output.text


def test_a_parent_without_a_policy_gives_its_child_exactly_that(tmp_path: Path) -> None:
    """No policy means allow_all for the parent itself; the child gets the same, not more."""
    child = touch_script("ran")
    delegate = delegate_task_tool({"analyst": ANALYST}, MANIFEST, model_for=lambda a: child)
    asyncio.run(parent_session(tmp_path, delegate).run("go"))
    assert (tmp_path / "ran").exists()


# -- an explicit child policy can only be stricter ---------------------------------------------
def test_an_explicit_child_policy_cannot_loosen_the_parents(tmp_path: Path) -> None:
    human = Human(default=deny("no"))
    child = touch_script()
    delegate = delegate_task_tool(
        {"analyst": ANALYST},
        MANIFEST,
        model_for=lambda a: child,
        child_policy=lambda agent, ctx: allow_all,
    )
    session = parent_session(
        tmp_path, delegate, protect=Protection.policy(ask_for_all_but_delegation, approver=human)
    )
    asyncio.run(session.run("go"))
    assert not (tmp_path / "PWNED").exists()
    assert human.asked == ["run_bash"]  # allow_all AND ask: ask, and the human said no


def test_an_explicit_child_policy_adds_its_own_denies(tmp_path: Path) -> None:
    def no_shell(tool: Any, params: Any, call: ToolCall) -> PolicyDecision:
        if tool.name == "run_bash" and "touch" in arguments_json(params)["command"]:
            return PolicyDecision("deny", "children do not touch files", "child")
        return PolicyDecision("allow")

    human = Human(default=approve())  # the parent's human would say yes
    child = touch_script()
    delegate = delegate_task_tool(
        {"analyst": ANALYST},
        MANIFEST,
        model_for=lambda a: child,
        child_policy=lambda a, c: no_shell,
    )
    session = parent_session(
        tmp_path, delegate, protect=Protection.policy(ask_for_all_but_delegation, approver=human)
    )
    asyncio.run(session.run("go"))
    assert not (tmp_path / "PWNED").exists()
    assert human.asked == []  # denied before anyone is asked
    (output,) = child_outputs(child)
    assert "children do not touch files" in output.text


def test_a_failing_or_strange_explicit_child_policy_denies(tmp_path: Path) -> None:
    def broken(tool: Any, params: Any, call: ToolCall) -> PolicyDecision:
        raise RuntimeError("policy store is down")

    async def nonsense(tool: Any, params: Any, call: ToolCall) -> Any:
        return "allow"  # not a PolicyDecision

    for explicit in (broken, nonsense):
        child = touch_script()
        delegate = delegate_task_tool(
            {"analyst": ANALYST},
            MANIFEST,
            model_for=lambda a, m=child: m,
            child_policy=lambda a, c, p=explicit: p,
        )
        asyncio.run(parent_session(tmp_path, delegate).run("go"))  # the parent allows all
        assert not (tmp_path / "PWNED").exists(), explicit
        (output,) = child_outputs(child)
        assert output.is_error and "Denied" in output.text


def test_an_explicit_approver_answers_the_childs_asks_and_cannot_make_it_wait(
    tmp_path: Path,
) -> None:
    async def waits(requests: Sequence[ApprovalRequest]) -> Sequence[ApprovalAnswer]:
        raise PendingApproval(requests)

    parent_human = Human(default=approve())
    child = touch_script()
    delegate = delegate_task_tool(
        {"analyst": ANALYST}, MANIFEST, model_for=lambda a: child, approver=waits
    )
    session = parent_session(
        tmp_path,
        delegate,
        protect=Protection.policy(ask_for_all_but_delegation, approver=parent_human),
    )
    result = asyncio.run(session.run("go"))
    assert not (tmp_path / "PWNED").exists()
    assert parent_human.asked == []  # the explicit approver was asked instead
    (output,) = child_outputs(child)
    assert "cannot wait" in output.text
    assert not result.waiting


# -- every level: a grandchild keeps the intermediate agent's restrictions ---------------------
LEAD = AgentDefinition.parse(
    "---\nname: lead\ndescription: Plans and delegates.\n"
    "tools: [read_document, run_bash, delegate_task]\ngrants: [delegate_task]\n---\nLead."
)
WORKER = AgentDefinition.parse(
    "---\nname: worker\ndescription: Does things.\n"
    "tools: [read_document, write_file, run_bash]\n---\nWork."
)
NESTED = {
    "profile": {"rules": [{"tools": "delegate_task", "action": "allow"}]},
    "agents": {
        "lead": {
            "rules": [
                {
                    "tools": "run_bash",
                    "action": "deny",
                    "args": {"command": {"program": ["touch"]}},
                    "reason": "the lead's team never touches files",
                }
            ]
        }
    },
}


def nested_run(tmp_path: Path, **delegate_options: Any) -> tuple[Human, ScriptedModel, Any]:
    policy = SessionPolicy(Policy.from_dict(NESTED), session_id="root")
    human = Human(default=approve())  # the root's human approves everything it is asked
    worker = ScriptedModel(
        [
            reply(
                call("run_bash", {"command": "touch PWNED"}),
                call("write_file", {"path": "w.txt", "content": "w"}),
            ),
            reply("worker done"),
        ]
    )
    lead = ScriptedModel(
        [reply(call("delegate_task", {"agent": "worker", "task": "t"})), reply("lead done")]
    )
    models = {"lead": lead, "worker": worker}
    options = dict(delegate_options)
    if options.pop("for_delegation", False):
        options.update(policy.for_delegation(human))
    delegate = delegate_task_tool(
        {"lead": LEAD, "worker": WORKER},
        MANIFEST,
        model_for=lambda agent: models[agent.name],
        **options,
    )
    session = parent_session(
        tmp_path,
        delegate,
        agent="lead",
        protect=Protection.policy(policy, approver=policy.approver(human)),
    )
    asyncio.run(session.run("go"))
    return human, worker, policy


@pytest.mark.parametrize("for_delegation", [False, True])
def test_a_grandchild_keeps_the_intermediate_agents_restrictions(
    tmp_path: Path, for_delegation: bool
) -> None:
    human, worker, policy = nested_run(tmp_path, for_delegation=for_delegation)
    assert not (tmp_path / "PWNED").exists()
    assert human.asked == []  # denied by the lead's rule before the human is asked
    bash, _write = child_outputs(worker)
    assert "the lead's team never touches files" in bash.text
    # the stricter toolkit holds too: write_file is not the lead's, so never the worker's
    assert [t.name for t in worker.requests[0].tools] == ["read_document", "run_bash"]
    assert "Unknown tool 'write_file'" in _write.text and not (tmp_path / "w.txt").exists()
    (denied,) = [e for e in policy.audit.entries if e["tool"] == "run_bash"]  # judged once
    assert denied["decision"] == "deny" and denied["level"] == "sub-agent lead"
    # under the grandchild's real session id: <root>.lead.<id>.worker.<id>
    assert re.fullmatch(r"parent\.lead\.[0-9a-f]{8}\.worker\.[0-9a-f]{8}", denied["session_id"])


# -- without a dispatcher there is no parent to inherit from: refuse ---------------------------
def test_delegation_outside_a_dispatcher_refuses_to_guess(tmp_path: Path) -> None:
    child = touch_script()
    delegate = delegate_task_tool({"analyst": ANALYST}, MANIFEST, model_for=lambda a: child)
    turn = TurnContext(session_id="x", home=tmp_path)
    ctx = ToolContext(session_id="x", turn=turn, toolset=REGISTRY.toolset(turn))
    params = delegate.params(agent="analyst", task="t")
    result = asyncio.run(delegate.invoke(params, ctx))
    assert result.is_error and "dispatcher" in result.text()
    assert child.requests == [] and not (tmp_path / "PWNED").exists()


def test_the_dispatcher_hands_every_call_its_protection(tmp_path: Path) -> None:
    seen: list[LiveProtection | None] = []

    @tool(read_only=True)
    def peek(ctx: ToolContext) -> str:
        """Look at the protection."""
        seen.append(ctx.protection)
        return "ok"

    human = Human()

    def hook(call: ToolCall, tool_: Any, result: Any, ctx: ToolContext) -> Any:
        return result

    dispatcher = Dispatcher(
        Toolset([peek]), policy=ask_for_all_but_delegation, approver=human, result_hooks=[hook]
    )
    human.default = approve()
    asyncio.run(dispatcher.dispatch([call("peek")]))
    assert seen == [LiveProtection(ask_for_all_but_delegation, human, (hook,))]
    asyncio.run(Dispatcher(Toolset([peek])).dispatch([call("peek")]))
    assert seen[1] == LiveProtection(allow_all, None, ())  # no policy: allow_all, said so


# -- the combination, for every pair of answers ------------------------------------------------
ACTIONS = ("allow", "ask", "deny")
RANK = {a: i for i, a in enumerate(ACTIONS)}


@given(
    inherited=st.sampled_from(ACTIONS),
    explicit=st.one_of(st.sampled_from(ACTIONS), st.sampled_from(["yes", "", None, 1])),
    sync=st.tuples(st.booleans(), st.booleans()),
)
def test_both_must_allow_is_never_looser_than_the_inherited_policy(
    inherited: str, explicit: Any, sync: tuple[bool, bool]
) -> None:
    asked: list[str] = []

    def hook(name: str, answer: Any, is_sync: bool) -> Any:
        def decide(tool_: Any, params: Any, call_: ToolCall) -> Any:
            asked.append(name)
            return PolicyDecision(answer, name) if answer in RANK else answer

        async def decide_async(tool_: Any, params: Any, call_: ToolCall) -> Any:
            return decide(tool_, params, call_)

        return decide if is_sync else decide_async

    both = Protection.policy(hook("inherited", inherited, sync[0])) & Protection.policy(
        hook("explicit", explicit, sync[1])
    )
    decided = asyncio.run(both(REGISTRY_TOOL, {}, call("run_bash")))
    strictest = max(inherited, explicit if explicit in RANK else "deny", key=RANK.__getitem__)
    assert decided.action == strictest
    assert RANK[decided.action] >= RANK[inherited]
    assert asked == (["inherited"] if inherited == "deny" else ["inherited", "explicit"])
