"""A call's identity is never ambiguous: an approval answers exactly one call.

Issue: the model sends ``run_bash("touch PWNED")`` and ``run_bash("echo ok")``, both with
id ``c``; the human answers no, then yes, in ``tooldeck approve``; on resume both ran.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import typer
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from tooldeck import Dispatcher, Protection, Session, TextPart, Tool, ToolContext, Toolset
from tooldeck.assembly import TurnContext
from tooldeck.builtin import load_builtin_registry
from tooldeck.cli.approve import approve_command
from tooldeck.policy import PendingFiles, SessionPolicy, load_answers, wait_for_human
from tooldeck.providers.anthropic import AnthropicModel
from tooldeck.testing import ScriptedModel, call, reply
from tooldeck.transcript import AssistantMessage, ToolCall, distinct_call_ids

REGISTRY = load_builtin_registry()


def approve_cli() -> typer.Typer:
    app = typer.Typer()
    app.command()(approve_command)
    return app


def bash_session(home: Path, state: Path, script: list[AssistantMessage]) -> Session:
    policy = SessionPolicy(session_id="dup", directory=state)
    turn = TurnContext(session_id="dup", home=home)
    return Session(
        ScriptedModel(script),
        REGISTRY.toolset(turn),
        session_id="dup",
        turn=turn,
        protect=Protection.policy(policy, approver=policy.approver(wait_for_human)),
        pending_store=PendingFiles(state),
    )


def test_a_denied_call_never_runs_when_two_calls_share_an_id(tmp_path: Path) -> None:
    home, state = tmp_path / "home", tmp_path / "state"
    home.mkdir()
    step = reply(
        call("run_bash", {"command": "touch PWNED"}, call_id="c"),
        call("run_bash", {"command": "echo ok > OK"}, call_id="c"),
    )
    s = bash_session(home, state, [step, reply("done")])
    waiting = asyncio.run(s.run("go"))
    assert waiting.waiting
    ids = [c.call_id for c in waiting.pending.calls]  # type: ignore[union-attr]
    assert ids == ["c", "c_2"]  # two calls, two identities, from the moment they were parsed
    out = CliRunner().invoke(approve_cli(), [str(state / "dup.pending.json")], input="n\nno\ny\n")
    assert out.exit_code == 0, out.output
    answers = load_answers(state / "dup.answers.json")
    assert [a.approved for a in answers.values()] == [False, True]
    done = asyncio.run(bash_session(home, state, [reply("done")]).resume(answers))
    assert not (home / "PWNED").exists()
    assert (home / "OK").exists()
    texts = [o.text for o in done.tool_outputs]
    assert texts[0].startswith("Denied by the user")


def test_a_pending_file_whose_calls_share_an_id_is_never_answered_or_resumed(
    tmp_path: Path,
) -> None:
    home, state = tmp_path / "home", tmp_path / "state"
    home.mkdir()
    step = reply(
        call("run_bash", {"command": "touch PWNED"}, call_id="a"),
        call("run_bash", {"command": "echo ok"}, call_id="b"),
    )
    assert asyncio.run(bash_session(home, state, [step]).run("go")).waiting
    path = state / "dup.pending.json"
    data = json.loads(path.read_text())
    for part in data["step"]["message"]["parts"]:  # a hostile or older file: ids collide
        part["call_id"] = "c"
    for waiting in data["step"]["calls"]:
        waiting["call_id"] = "c"
    path.write_text(json.dumps(data))
    out = CliRunner().invoke(approve_cli(), [str(path)], input="n\ny\n")
    assert out.exit_code == 2  # a file the command cannot use: one line (docs/cli.md)
    assert out.output.startswith("error: ") and out.output.count("\n") == 1
    assert "cannot be resumed" in out.output and "Traceback" not in out.output
    with pytest.raises(ValueError, match="cannot be resumed"):
        asyncio.run(bash_session(home, state, [reply("x")]).resume([]))
    assert not (home / "PWNED").exists()


def test_the_dispatcher_runs_none_of_the_calls_that_share_an_id() -> None:
    ran: list[str] = []

    def work(p: Any, ctx: ToolContext) -> str:
        ran.append(ctx.call_id)
        return "ran"

    tool = Tool.from_schema(
        name="work", description="w", json_schema={"type": "object"}, execute=work
    )
    calls = [ToolCall("x", "work", "{}"), ToolCall("x", "work", "{}"), ToolCall("y", "work", "{}")]
    result = asyncio.run(Dispatcher(Toolset([tool])).dispatch(calls))
    assert ran == ["y"]
    assert [o.is_error for o in result.outputs] == [True, True, False]
    assert "share the call id 'x'" in result.outputs[0].text


def test_empty_ids_from_a_provider_become_distinct() -> None:
    model = AnthropicModel("claude-sonnet-4-6", api_key="x", base_url="http://127.0.0.1:9")
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": [
            {"type": "tool_use", "id": "", "name": "a", "input": {}},
            {"type": "tool_use", "id": "", "name": "b", "input": {}},
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    message = model.parse_message(body)
    ids = [c.call_id for c in message.tool_calls]
    assert len(set(ids)) == 2 and "" not in ids
    assert all((c.provider_data or {})["provider_call_id"] == "" for c in message.tool_calls)


def test_a_sub_agents_ask_is_settled_by_the_policy_that_asked() -> None:
    parent = SessionPolicy(session_id="parent")
    child = parent.child("helper")
    tool = REGISTRY.toolset(TurnContext(session_id="p", home=Path(".")))["run_bash"]
    mine, theirs = ToolCall("call_1", "run_bash", "{}"), ToolCall("call_1", "run_bash", "{}")
    parent(tool, {"command": "ls"}, mine)
    child(tool, {"command": "ls"}, theirs)
    assert parent.asker(theirs) is child  # same id, different calls: never confused
    assert parent.asker(mine) is parent


IDS = st.lists(st.sampled_from(["", "a", "b", "a_2", "call_2", "c"]), max_size=8)


@given(IDS)
def test_distinct_call_ids_are_distinct_non_empty_and_keep_first_ids(ids: list[str]) -> None:
    parts = [TextPart("t"), *(ToolCall(i, "f", "{}") for i in ids)]
    out = distinct_call_ids(parts)
    made = [p.call_id for p in out if isinstance(p, ToolCall)]
    assert len(made) == len(ids) and len(set(made)) == len(made) and "" not in made
    firsts = {i for i in ids if i}
    assert firsts <= set(made)
    assert [p.call_id for p in distinct_call_ids(out) if isinstance(p, ToolCall)] == made
    message = AssistantMessage(parts)
    assert [c.call_id for c in message.tool_calls] == made
