"""Access control end to end: real tools, ScriptedModel, the loop, the dispatcher.

Parallel approvals in one batch; approve-always scoping and revocation; a run that waits
for approval, persisted and resumed without running anything twice; headless sessions;
delegation limits; the switch_model display; the CLI prompt; the audit log.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

import tooldeck
from tooldeck import Protection, Session, Toolset, tool
from tooldeck.agents.delegation import delegate_task_tool
from tooldeck.agents.switch_model import ModelRoles, switch_model_tool
from tooldeck.agents.toolkits import AgentDefinition, ToolkitManifest
from tooldeck.approvals import ApprovalAnswer, ApprovalRequest
from tooldeck.assembly import TurnContext
from tooldeck.builtin import load_builtin_registry
from tooldeck.cli.approve import approve_command
from tooldeck.cli.policy import policy_app
from tooldeck.plan import ToolPlanner
from tooldeck.policy import (
    AuditLog,
    PendingFiles,
    Policy,
    SessionPolicy,
    approve,
    approve_always,
    canonical_json,
    deny,
    edit,
    load_answers,
    wait_for_human,
)
from tooldeck.policy.prompt import PromptApprover
from tooldeck.testing import ScriptedModel, call, reply
from tooldeck.transcript import AssistantMessage, ToolCall, ToolOutput

REGISTRY = load_builtin_registry()


class Human:
    """A programmatic approver: answers from a script, records every batch it saw."""

    def __init__(self, *answers: Any) -> None:
        self.script = list(answers)
        self.batches: list[list[ApprovalRequest]] = []

    async def __call__(self, requests: Sequence[ApprovalRequest]) -> list[ApprovalAnswer]:
        self.batches.append(list(requests))
        out = []
        for _ in requests:
            out.append(self.script.pop(0) if self.script else deny("script ran out"))
        return out

    @property
    def asked(self) -> list[list[str]]:
        return [[r.call.name for r in batch] for batch in self.batches]


def never_asked(requests: Sequence[ApprovalRequest]) -> Any:
    raise AssertionError(f"a human was asked: {[r.call.name for r in requests]}")


def session(
    tmp_path: Path,
    script: Any,
    policy: SessionPolicy,
    approver: Any,
    *,
    extra: Sequence[Any] = (),
    store: PendingFiles | None = None,
    planner: bool = True,
) -> Session:
    turn = TurnContext(session_id=policy.session_id, home=tmp_path)

    def tools(ctx: TurnContext) -> Toolset:
        return Toolset([*REGISTRY.toolset(ctx).tools, *extra])

    source: Any = (
        ToolPlanner(tooldeck.source(tools), visible=policy.visible) if planner else tools(turn)
    )
    return Session(
        ScriptedModel(script),
        source,
        session_id=policy.session_id,
        turn=turn,
        protect=Protection.policy(policy, approver=approver),
        pending_store=store,
    )


def one_output_per_call(items: Sequence[Any]) -> None:
    calls = [c.call_id for i in items if isinstance(i, AssistantMessage) for c in i.tool_calls]
    outputs = [o.call_id for o in items if isinstance(o, ToolOutput)]
    assert sorted(outputs) == sorted(calls) and len(set(outputs)) == len(outputs)


# -- batching ----------------------------------------------------------------------------------
def test_parallel_approvals_are_one_batch_and_each_answer_applies(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("alpha\n")
    step = [
        call("read_document", {"path": "a.md"}),
        call("write_file", {"path": "one.txt", "content": "1"}),
        call("write_file", {"path": "two.txt", "content": "2"}),
        call("run_bash", {"command": "echo ran >> bash.log"}),
        call("write_file", {"path": "three.txt", "content": "3"}),
    ]
    human = Human(approve(), deny("not two"), approve(), edit({"path": "3b.txt", "content": "3"}))
    policy = SessionPolicy(session_id="batch")
    s = session(tmp_path, [reply(*step), reply("done")], policy, policy.approver(human))
    result = asyncio.run(s.run("go"))

    assert human.asked == [["write_file", "write_file", "run_bash", "write_file"]]
    texts = [o.text for o in result.tool_outputs]
    assert [o.call_id for o in result.tool_outputs] == [c.call_id for c in step]
    assert "alpha" in texts[0]
    assert (tmp_path / "one.txt").read_text() == "1"
    assert texts[2] == "Denied by the user: not two" and not (tmp_path / "two.txt").exists()
    assert (tmp_path / "bash.log").read_text() == "ran\n"
    assert (tmp_path / "3b.txt").exists() and not (tmp_path / "three.txt").exists()
    one_output_per_call(result.items)


# -- approve-always ------------------------------------------------------------------------------
def test_approve_always_is_scoped_to_one_tool_and_its_pattern_and_revocable(tmp_path: Path) -> None:
    script = [
        reply(call("write_file", {"path": "docs/a.md", "content": "a"})),
        reply(
            call("write_file", {"path": "docs/b.md", "content": "b"}),  # covered by the grant
            call("write_file", {"path": "src/c.py", "content": "c"}),  # other arguments: asks
            call("edit_file", {"path": "docs/a.md", "old_string": "a", "new_string": "A"}),
        ),
        reply(call("write_file", {"path": "docs/d.md", "content": "d"})),  # after revoking
        reply("done"),
    ]
    human = Human(
        approve_always({"path": {"prefix": "docs"}}),
        deny("not src"),
        approve(),
        approve(),
    )
    policy = SessionPolicy(session_id="always", directory=tmp_path / "state")
    revoked: list[bool] = []

    def revoke_after_step_two(event: Any) -> None:
        if getattr(event, "step", 0) == 3 and not revoked:
            grant = policy.grants.grants[0]
            result = CliRunner().invoke(
                policy_app, ["revoke", str(tmp_path / "state" / "always.grants.json"), grant.id]
            )
            assert result.exit_code == 0, result.output
            revoked.append(True)

    s = session(tmp_path, script, policy, policy.approver(human))
    s.events.subscribe(revoke_after_step_two, "model_step_started")
    result = asyncio.run(s.run("go"))

    assert human.asked == [["write_file"], ["write_file", "edit_file"], ["write_file"]]
    assert human.batches[1][0].params["path"] == "src/c.py"  # docs/b.md never asked
    assert (tmp_path / "docs" / "b.md").read_text() == "b"
    assert (tmp_path / "docs" / "a.md").read_text() == "A"
    assert (tmp_path / "docs" / "d.md").exists() and not (tmp_path / "src" / "c.py").exists()
    assert revoked and len(policy.grants) == 0
    audit = AuditLog.read(tmp_path / "state" / "always.audit.jsonl")
    b = next(e for e in audit if e["tool"] == "write_file" and e["decision"] == "allow")
    assert b["level"] == "approved-always" and b["approved_by"].startswith("grant g_")
    one_output_per_call(result.items)


def test_always_on_a_dangerous_tool_approves_one_call_only(tmp_path: Path) -> None:
    script = [
        reply(call("run_bash", {"command": "echo 1 >> n"})),
        reply(call("run_bash", {"command": "echo 2 >> n"})),
        reply("done"),
    ]
    human = Human(approve_always(), approve())
    policy = SessionPolicy(session_id="dangerous")
    asyncio.run(session(tmp_path, script, policy, policy.approver(human)).run("go"))
    assert human.asked == [["run_bash"], ["run_bash"]]
    assert len(policy.grants) == 0
    assert (tmp_path / "n").read_text() == "1\n2\n"


def test_three_yes_answers_never_become_always(tmp_path: Path) -> None:
    script = [reply(call("write_file", {"path": f"f{i}", "content": "x"})) for i in range(4)]
    human = Human(approve(), approve(), approve(), approve())
    policy = SessionPolicy(session_id="three")
    asyncio.run(session(tmp_path, [*script, reply("ok")], policy, policy.approver(human)).run("go"))
    assert len(human.batches) == 4 and len(policy.grants) == 0


# -- waiting and resuming ----------------------------------------------------------------------
COUNT: dict[str, int] = {}


@tool(read_only=True)
def tally(key: str) -> str:
    """Count how many times this ran for a key (a side effect)."""
    COUNT[key] = COUNT.get(key, 0) + 1
    return f"{key}={COUNT[key]}"


def test_a_waiting_run_is_persisted_and_resumed_without_running_anything_twice(
    tmp_path: Path,
) -> None:
    COUNT.clear()
    step = [
        call("tally", {"key": "before"}),
        call("run_bash", {"command": "echo once >> side-effect.log"}),
        call("no_such_tool", {}),  # gets its error output before the wait
        call("write_file", {"path": "w.txt", "content": "w"}),
        call("tally", {"key": "after"}),
    ]
    script = [reply(*step), reply(call("tally", {"key": "next"})), reply("finished")]
    state = tmp_path / "state"
    policy = SessionPolicy(session_id="waits", directory=state)
    first = session(
        tmp_path,
        script,
        policy,
        policy.approver(wait_for_human),
        extra=[tally],
        store=PendingFiles(state),
    )
    waiting = asyncio.run(first.run("go"))

    assert waiting.waiting and waiting.pending is not None
    assert waiting.reason == "waiting for approval of 2 call(s)"
    assert [c.name for c in waiting.pending.calls] == ["run_bash", "write_file"]
    assert [o.name for o in waiting.pending.outputs] == ["no_such_tool"]
    assert COUNT == {} and not (tmp_path / "side-effect.log").exists()
    assert (state / "waits.pending.json").exists()
    with pytest.raises(RuntimeError, match="waiting for approval"):
        asyncio.run(first.run("another prompt"))

    # a fresh process: a new Session with the same store, policy files and tools
    policy2 = SessionPolicy(session_id="waits", directory=state)
    second = session(
        tmp_path,
        script[1:],
        policy2,
        policy2.approver(never_asked),
        extra=[tally],
        store=PendingFiles(state),
    )
    with pytest.raises(RuntimeError, match="waiting for approval"):
        asyncio.run(second.run("a new turn would lose the waiting step"))
    answers = load_answers_roundtrip(tmp_path, waiting.pending.calls, [approve(), deny("no")])
    done = asyncio.run(second.resume(answers))

    assert done.output == "finished" and not done.waiting
    assert (tmp_path / "side-effect.log").read_text() == "once\n"
    assert COUNT == {"before": 1, "after": 1, "next": 1}
    assert not (tmp_path / "w.txt").exists()
    outputs = {o.call_id: o for o in done.tool_outputs}
    assert outputs[step[3].call_id].text == "Denied by the user: no"
    assert outputs[step[2].call_id].text.startswith("Unknown tool 'no_such_tool'")
    one_output_per_call(second.transcript)
    assert [o.call_id for o in second.transcript if isinstance(o, ToolOutput)][:5] == [
        c.call_id for c in step
    ]
    assert not (state / "waits.pending.json").exists()

    # resuming again (here, or in the first process) runs nothing
    with pytest.raises(RuntimeError):
        asyncio.run(second.resume(answers))
    with pytest.raises(RuntimeError, match="already resumed"):
        asyncio.run(first.resume(answers))
    assert (tmp_path / "side-effect.log").read_text() == "once\n"
    assert COUNT == {"before": 1, "after": 1, "next": 1}


def load_answers_roundtrip(
    tmp_path: Path, calls: Sequence[Any], answers: Sequence[ApprovalAnswer]
) -> dict[str, ApprovalAnswer]:
    from tooldeck.policy import save_answers

    path = tmp_path / "answers.json"
    save_answers(path, "waits", {c.call_id: a for c, a in zip(calls, answers, strict=True)})
    return load_answers(path)


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("[]", "not an answers file"),
        ('{"format": "tooldeck.answers/1", "session_id": "waits"}', "has no answers"),
        (
            '{"format": "tooldeck.answers/1", "session_id": "waits", "answers": [1]}',
            "has no answers",
        ),
        (
            '{"format": "tooldeck.answers/1", "session_id": "other", "answers": {}}',
            "the answers are for 'other', not 'waits'",
        ),
    ],
)
def test_an_answers_file_that_cannot_be_used_is_one_value_error(
    tmp_path: Path, content: str, why: str
) -> None:
    path = tmp_path / "answers.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=why):
        load_answers(path, session_id="waits")


def test_resume_in_the_same_process_and_answers_must_cover_the_waiting_calls(
    tmp_path: Path,
) -> None:
    COUNT.clear()
    policy = SessionPolicy(session_id="same")
    approver = policy.approver(wait_for_human)
    s = session(
        tmp_path,
        [
            reply(call("write_file", {"path": "x", "content": "1"}), call("tally", {"key": "k"})),
            reply("ok"),
        ],
        policy,
        approver,
        extra=[tally],
    )
    waiting = asyncio.run(s.run("go"))
    assert waiting.waiting and COUNT == {}
    with pytest.raises(ValueError, match="missing"):
        asyncio.run(s.resume({}))
    with pytest.raises(ValueError, match="1 call"):
        asyncio.run(s.resume([approve(), approve()]))
    done = asyncio.run(s.resume([approve_always()]))
    assert done.output == "ok" and COUNT == {"k": 1} and (tmp_path / "x").read_text() == "1"
    assert [g.tool for g in policy.grants] == ["write_file"]  # resumed answers are recorded too


# -- headless ----------------------------------------------------------------------------------
def test_headless_sessions_deny_what_needs_a_human_and_hide_it(tmp_path: Path) -> None:
    rules = Policy.from_dict(
        {
            "headless": {"deny": ["notes"]},
            "profile": {
                "rules": [
                    {"tools": "write_file", "action": "allow", "args": {"path": {"prefix": "out"}}}
                ]
            },
        }
    )
    policy = SessionPolicy(rules, session_id="bot", headless=True)
    planned = ToolPlanner(REGISTRY, visible=policy.visible)(
        TurnContext(session_id="bot", home=tmp_path)
    )
    shown = {t.name for t in planned.shown}
    assert {"read_document", "grep_files", "write_file"} <= shown
    assert not shown & {"run_bash", "notes", "edit_file", "todo"}

    step = [
        call("run_bash", {"command": "echo hi > x"}),
        call("write_file", {"path": "out/a.txt", "content": "a"}),
        call("write_file", {"path": "elsewhere.txt", "content": "b"}),
        call("notes", {"action": "list"}),
    ]
    s = session(
        tmp_path, [reply(*step), reply("ok")], policy, policy.approver(never_asked), planner=False
    )
    result = asyncio.run(s.run("go"))
    texts = [o.text for o in result.tool_outputs]
    assert texts[0] == (
        "Denied by policy: run_bash is not available in a headless session "
        "(denylist: tier:DANGEROUS)"
    )
    assert texts[1] == "Created out/a.txt (1 bytes, 1 line(s))."
    assert texts[2].startswith("Denied by policy: write_file needs a human approval")
    assert "headless" in texts[2]
    assert texts[3] == (
        "Denied by policy: notes is not available in a headless session (denylist: notes)"
    )
    assert not (tmp_path / "x").exists() and not (tmp_path / "elsewhere.txt").exists()
    one_output_per_call(result.items)


# -- delegation --------------------------------------------------------------------------------
WORKER = AgentDefinition.parse(
    "---\nname: worker\ndescription: Does things.\n"
    "tools: [read_document, grep_files, write_file, run_bash]\n---\nWork."
)

DELEGATION = {
    # the parent must ask before grep_files (a STANDARD tool)...
    "profile": {"rules": [{"tools": "grep_files", "action": "ask"}]},
    "agents": {
        # ...the worker's own rules: its allow cannot loosen anything, its deny holds
        "worker": {
            "rules": [
                {"tools": "write_file", "action": "allow"},
                {"tools": "run_bash", "action": "deny", "reason": "workers never run shell"},
            ]
        }
    },
    "modes": {
        "nowrite": {
            "rules": [
                {"tools": "write_file", "action": "deny", "reason": "no writing in this mode"}
            ]
        }
    },
}


def child_script(request: Any) -> AssistantMessage:
    outputs = [i for i in request.transcript if isinstance(i, ToolOutput)]
    if not outputs:
        return reply(
            call("grep_files", {"pattern": "x"}),
            call("write_file", {"path": "child.txt", "content": "c"}),
            call("run_bash", {"command": "echo no > bash.txt"}),
        )
    return reply(" | ".join(o.text for o in outputs))


def delegate(tmp_path: Path, mode: str | None, human: Human) -> tuple[Any, SessionPolicy]:
    policy = SessionPolicy(Policy.from_dict(DELEGATION), session_id="parent", mode=mode)
    tool_ = delegate_task_tool(
        {"worker": WORKER},
        ToolkitManifest.load(),
        model_for=lambda agent: ScriptedModel(child_script),
        **policy.for_delegation(human),
    )
    script = [reply(call("delegate_task", {"agent": "worker", "task": "t"})), reply("parent done")]
    s = session(tmp_path, script, policy, policy.approver(human), extra=[tool_], planner=False)
    return asyncio.run(s.run("go")), policy


def test_a_sub_agent_gets_standard_auto_approved_and_asks_the_human_for_write(
    tmp_path: Path,
) -> None:
    human = Human(approve(), approve())  # delegate_task, then the child's write_file
    result, policy = delegate(tmp_path, None, human)
    assert human.asked == [["delegate_task"], ["write_file"]]  # grep_files: auto-approved
    assert result.tool_outputs[0].text == (
        "No matches for /x/ in 0 file(s) under .. | Created child.txt (1 bytes, 1 line(s)). "
        # run_bash is denied outright for the worker, so the child is never shown it
        "| Unknown tool 'run_bash'. Available tools: read_document, grep_files, write_file."
    )
    assert (tmp_path / "child.txt").read_text() == "c" and not (tmp_path / "bash.txt").exists()
    lines = policy.audit.entries
    grep = next(e for e in lines if e["tool"] == "grep_files")
    assert grep["level"] == "delegation" and grep["approved_by"] == "parent (delegation)"
    assert grep["session_id"].startswith("parent.worker")
    # the parent itself would have asked for grep_files
    tools = REGISTRY.toolset(TurnContext(session_id="p", home=tmp_path))
    assert policy.decide(tools["grep_files"], {"pattern": "x"}).action == "ask"


def test_a_sub_agent_never_exceeds_its_parent(tmp_path: Path) -> None:
    human = Human(approve())  # delegate_task; the child's write_file is denied before asking
    result, policy = delegate(tmp_path, "nowrite", human)
    assert human.asked == [["delegate_task"]]
    child_text = result.tool_outputs[0].text
    # denied outright by the parent's mode and by the child's own rule: never even shown
    assert "Unknown tool 'write_file'" in child_text
    assert "Unknown tool 'run_bash'" in child_text
    assert not (tmp_path / "child.txt").exists() and not (tmp_path / "bash.txt").exists()
    tools = REGISTRY.toolset(TurnContext(session_id="p", home=tmp_path))
    child = policy.child("worker")
    write, bash = tools["write_file"], tools["run_bash"]
    assert policy.decide(write, {"path": "a"}).action == "deny"
    assert child.decide(write, {"path": "a"}).action == "deny"  # its own allow changes nothing
    assert policy.decide(bash, {"command": "ls"}).action == "ask"
    assert child.decide(bash, {"command": "ls"}).action == "deny"  # stricter than the parent
    relaxed = SessionPolicy(Policy.from_dict(DELEGATION), session_id="p2")
    # the worker's own allow for write_file does not auto-approve it either
    assert relaxed.child("worker").decide(write, {"path": "a"}).action == "ask"


# -- switch_model -----------------------------------------------------------------------------
def test_switch_model_requests_show_role_and_hint_and_differ_by_role(tmp_path: Path) -> None:
    big = ScriptedModel([reply("answered by big")], name="test:big")
    roles = ModelRoles(
        {
            "primary": ScriptedModel(
                [
                    reply(
                        call("switch_model", {"model_hint": "big"}),
                        call("switch_model", {"role": "judgment", "model_hint": "careful"}),
                    )
                ],
                name="test:small",
            ),
            "judgment": ScriptedModel([], name="test:judge"),
        },
        factory=lambda hint: big if hint == "big" else ScriptedModel([], name=f"test:{hint}"),
    )
    human = Human(approve(), approve())
    policy = SessionPolicy(session_id="switch")
    s = Session(
        roles.proxy("primary"),
        Toolset([switch_model_tool(roles)]),
        protect=Protection.policy(policy, approver=policy.approver(human)),
    )
    result = asyncio.run(s.run("go"))
    displays = [r.display for r in human.batches[0]]
    assert displays == [
        {"role": "primary", "model_hint": "big"},
        {"role": "judgment", "model_hint": "careful"},
    ]
    assert json.dumps(displays[0]) != json.dumps(displays[1])
    assert result.output == "answered by big"
    assert roles.get("judgment").name == "test:careful"

    # the CLI prompt shows the same JSON
    out = io.StringIO()
    prompt = PromptApprover(io.StringIO("y\nn\n\n"), Console(file=out, width=120), policy)
    answers = asyncio.run(prompt(human.batches[0]))
    shown = out.getvalue()
    assert '"role": "primary"' in shown and '"role": "judgment"' in shown
    assert '"model_hint": "careful"' in shown and "[WRITE]" in shown
    assert [a.approved for a in answers] == [True, False]


# -- the CLI prompt -------------------------------------------------------------------------------
def prompt_run(tmp_path: Path, typed: str) -> tuple[Any, str, SessionPolicy]:
    out = io.StringIO()
    policy = SessionPolicy(session_id="cli")
    prompt = PromptApprover(io.StringIO(typed), Console(file=out, width=120), policy)
    step = reply(call("write_file", {"path": "p.txt", "content": "x"}))
    s = session(tmp_path, [step, reply("ok")], policy, policy.approver(prompt))
    return asyncio.run(s.run("go")), out.getvalue(), policy


def test_an_empty_answer_is_never_approval(tmp_path: Path) -> None:
    result, shown, _ = prompt_run(tmp_path, "\n")
    assert not (tmp_path / "p.txt").exists()
    assert result.tool_outputs[0].text == "Denied: no answer: the input ended."
    assert "An empty answer is not an approval" in shown
    assert "write_file" in shown and "[WRITE]" in shown and '"path": "p.txt"' in shown
    assert "approval required" in shown


def test_the_prompt_asks_again_after_empty_or_unknown_input(tmp_path: Path) -> None:
    _, shown, _ = prompt_run(tmp_path, "\n  \nmaybe\ny\n")
    assert (tmp_path / "p.txt").read_text() == "x"
    assert shown.count("Approve write_file") == 4


def test_the_prompt_records_always_with_a_pattern_and_reads_edits(tmp_path: Path) -> None:
    _, _, policy = prompt_run(tmp_path, 'a\n{"path": {"prefix": "p"\n{"path": {"prefix": "p"}}\n')
    assert [(g.tool, g.args) for g in policy.grants] == [("write_file", {"path": {"prefix": "p"}})]
    result, _, _ = prompt_run(tmp_path, 'e\nnot json\n{"path": "q.txt", "content": "edited"}\n')
    assert (tmp_path / "q.txt").read_text() == "edited"
    result, _, _ = prompt_run(tmp_path, "n\nuse another name\n")
    assert result.tool_outputs[0].text == "Denied by the user: use another name"


def test_edited_arguments_are_checked_by_the_policy_again(tmp_path: Path) -> None:
    rules = Policy.from_dict(
        {
            "organization": {
                "rules": [
                    {
                        "tools": "write_file",
                        "action": "deny",
                        "args": {"path": {"prefix": "secret"}},
                    }
                ]
            }
        }
    )
    policy = SessionPolicy(rules, session_id="edits")
    human = Human(edit({"path": "secret/key", "content": "x"}), edit({"path": 5}))
    step = reply(
        call("write_file", {"path": "ok.txt", "content": "x"}),
        call("write_file", {"path": "ok2.txt", "content": "x"}),
    )
    s = session(tmp_path, [step, reply("ok")], policy, policy.approver(human))
    texts = [o.text for o in asyncio.run(s.run("go")).tool_outputs]
    assert texts[0].startswith("Denied: the edited arguments are denied by policy")
    assert texts[1].startswith("The edited arguments are invalid")
    assert not (tmp_path / "secret").exists()


def test_tooldeck_approve_answers_a_waiting_run_from_the_terminal(tmp_path: Path) -> None:
    state = tmp_path / "state"
    policy = SessionPolicy(session_id="later", directory=state)
    step = reply(
        call("write_file", {"path": "a.txt", "content": "a"}),
        call("write_file", {"path": "b.txt", "content": "b"}),
    )
    s = session(
        tmp_path,
        [step, reply("ok")],
        policy,
        policy.approver(wait_for_human),
        store=PendingFiles(state),
    )
    assert asyncio.run(s.run("go")).waiting

    import typer

    app = typer.Typer()
    app.command()(approve_command)
    nowhere = tmp_path / "nowhere" / "a.json"  # said before asking, so no answer is lost
    out = CliRunner().invoke(app, [str(state / "later.pending.json"), "-o", str(nowhere)])
    assert (out.exit_code, out.output) == (
        2,
        f"error: {nowhere.parent} does not exist; give --answers a file in a folder that does\n",
    )
    out = CliRunner().invoke(app, [str(state / "later.pending.json")], input="y\nn\nno b\n")
    assert out.exit_code == 0, out.output
    assert "2 calls need approval (one batch)" in out.output
    answers = load_answers(state / "later.answers.json")
    done = asyncio.run(s.resume(answers))
    assert done.output == "ok" and (tmp_path / "a.txt").exists()
    assert not (tmp_path / "b.txt").exists()


# -- the audit log -------------------------------------------------------------------------------
def test_every_decision_is_one_audit_line(tmp_path: Path) -> None:
    state = tmp_path / "state"
    policy = SessionPolicy(
        Policy.from_dict({"organization": {"rules": [{"tools": "run_bash", "action": "deny"}]}}),
        session_id="audited",
        directory=state,
    )
    step = [
        call("read_document", {"path": "missing.md"}),
        call("write_file", {"path": "a", "content": "é"}),
        call("run_bash", {"command": "ls"}),
    ]
    human = Human(approve())
    asyncio.run(
        session(
            tmp_path, [reply(*step), reply("ok")], policy, policy.approver(human), planner=False
        ).run("go")
    )
    lines = (state / "audited.audit.jsonl").read_text(encoding="utf-8").splitlines()
    entries = [json.loads(line) for line in lines]
    assert [(e["tool"], e["decision"], e["level"], e["approved_by"]) for e in entries] == [
        ("read_document", "allow", "tier", "policy"),
        ("write_file", "ask", "tier", None),
        ("run_bash", "deny", "organization", None),
        ("write_file", "approve", "approval", "human"),
    ]
    digest = hashlib.sha256(
        canonical_json({"path": "a", "content": "é"}).encode("utf-8")
    ).hexdigest()
    assert entries[1]["args_sha256"] == digest == entries[3]["args_sha256"]
    assert all(e["session_id"] == "audited" and e["call_id"] for e in entries)
    assert canonical_json({"b": 1, "a": [1, 2]}) == '{"a":[1,2],"b":1}'


def test_audit_appends_from_many_threads_never_interleave(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "a.jsonl")
    other = AuditLog(tmp_path / "a.jsonl")  # a second writer on the same file

    def write(writer: AuditLog, n: int) -> None:
        for i in range(50):
            writer.record(
                session_id="s",
                call_id=f"{n}-{i}",
                tool="t",
                args={"x": "y" * 500},
                decision="allow",
                level="tier",
            )

    threads = [threading.Thread(target=write, args=(log if n % 2 else other, n)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    entries = AuditLog.read(tmp_path / "a.jsonl")
    assert len(entries) == 400 and len({e["call_id"] for e in entries}) == 400


def test_a_policy_failure_or_a_bad_grants_file_fails_closed(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "bad.grants.json").write_text("{not json")
    policy = SessionPolicy(session_id="bad", directory=state)
    tools = REGISTRY.toolset(TurnContext(session_id="bad", home=tmp_path))
    assert policy.decide(tools["write_file"], {"path": "a"}).action == "ask"
    call_ = ToolCall("c1", "write_file", "{}")
    assert policy(tools["write_file"], {"path": "a", "content": ""}, call_).action == "ask"
