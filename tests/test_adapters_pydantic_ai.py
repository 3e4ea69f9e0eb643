"""tooldeck's tools in a pydantic-ai agent (``tooldeck.adapters.pydantic_ai``), run by
pydantic-ai's own test models: ``TestModel`` (calls every tool with arguments made from its
schema) and ``FunctionModel`` (a function of the messages answers each step).

Each scenario of the issue: a valid call, a repaired call, an invalid call retried (with
pydantic-ai's retry count), a denied call (also with ``retries=0``), an approval (one batch
for a step's calls), a call nobody can approve now (``ApprovalRequired``, then resumed), an
offloaded result read back by the ref id the answer gives, a parallel batch, and deferred
tools found with ``tool_search``.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, UnexpectedModelBehavior
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

import tooldeck
from tooldeck import ApprovalAnswer, ApprovalRequest, Protection, TurnContext
from tooldeck.adapters.pydantic_ai import TooldeckToolset
from tooldeck.approvals import PendingApproval
from tooldeck.plan import ToolPlanner


@tooldeck.tool(read_only=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


written: list[str] = []


@tooldeck.tool
def write_note(text: str) -> str:
    """Write a note (a WRITE tool: it changes the world)."""
    written.append(text)
    return f"wrote {text!r}"


@pytest.fixture(autouse=True)
def _fresh_notes() -> None:
    written.clear()


Step = list[ToolCallPart] | str


def scripted(*steps: Step) -> tuple[FunctionModel, list[AgentInfo]]:
    """A FunctionModel answering each step with the next of ``steps`` (calls or text);
    the AgentInfo of every step is kept (the tools it offered)."""
    queue = list(steps)
    seen: list[AgentInfo] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(info)
        step = queue.pop(0)
        if isinstance(step, str):
            return ModelResponse(parts=[TextPart(step)])
        return ModelResponse(parts=list(step))

    return FunctionModel(answer), seen


def _parts(messages: Sequence[ModelMessage]) -> list[Any]:
    return [p for m in messages if isinstance(m, ModelRequest) for p in m.parts]


def returns(messages: Sequence[ModelMessage]) -> list[ToolReturnPart]:
    """The tools' answers (not the retry prompts)."""
    return [
        p
        for p in _parts(messages)
        if isinstance(p, ToolReturnPart) and getattr(p, "outcome", None) != "retried"
    ]


def retries(messages: Sequence[ModelMessage]) -> list[ToolReturnPart | RetryPromptPart]:
    """pydantic-ai's retry prompts (a retried tool return, or a RetryPromptPart)."""
    return [
        p
        for p in _parts(messages)
        if isinstance(p, RetryPromptPart)
        or (isinstance(p, ToolReturnPart) and getattr(p, "outcome", None) == "retried")
    ]


def test_test_model_calls_each_tool_with_valid_arguments() -> None:
    agent = Agent(TestModel(), toolsets=[TooldeckToolset([add])])
    result = agent.run_sync("add")
    [returned] = returns(result.all_messages())
    assert (returned.tool_name, returned.content) == ("add", "0")
    assert json.loads(result.output) == {"add": "0"}


def test_a_valid_call_runs_and_its_frozen_text_is_the_answer() -> None:
    model, _ = scripted([ToolCallPart("add", {"a": 2, "b": 3}, tool_call_id="c1")], "five")
    result = Agent(model, toolsets=[TooldeckToolset([add])]).run_sync("2+3?")
    [returned] = returns(result.all_messages())
    assert (returned.tool_call_id, returned.content) == ("c1", "5")
    assert result.output == "five"


def test_a_call_with_broken_json_is_repaired_and_runs() -> None:
    broken = '{"a": 1, "b": 2,}'  # a trailing comma: not JSON, repaired by tooldeck
    model, _ = scripted([ToolCallPart("add", broken, tool_call_id="c1")], "three")
    result = Agent(model, toolsets=[TooldeckToolset([add])]).run_sync("1+2?")
    [returned] = returns(result.all_messages())
    assert returned.content == "3"
    assert retries(result.all_messages()) == []


def test_an_invalid_call_is_a_model_retry_and_the_model_corrects_it() -> None:
    model, _ = scripted(
        [ToolCallPart("add", '{"a": "one"}', tool_call_id="c1")],
        [ToolCallPart("add", '{"a": 1, "b": 1}', tool_call_id="c2")],
        "two",
    )
    result = Agent(model, toolsets=[TooldeckToolset([add])]).run_sync("1+1?")
    [retry] = retries(result.all_messages())
    assert retry.tool_call_id == "c1"
    assert "Invalid arguments for add" in str(retry.content)
    assert "$.b: required property missing" in str(retry.content)
    [returned] = returns(result.all_messages())
    assert (returned.tool_call_id, returned.content) == ("c2", "2")


def test_invalid_calls_past_max_retries_end_the_run_as_pydantic_ai_says() -> None:
    model, _ = scripted(
        [ToolCallPart("add", '{"a": "x"}', tool_call_id="c1")],
        [ToolCallPart("add", '{"a": "y"}', tool_call_id="c2")],
        "never",
    )
    agent = Agent(model, toolsets=[TooldeckToolset([add], max_retries=1)])
    with pytest.raises(UnexpectedModelBehavior, match="exceeded max retries"):
        agent.run_sync("1+1?")


@pytest.mark.parametrize("agent_retries", [0, 1])
def test_a_denied_call_is_the_tools_answer_and_the_run_goes_on(agent_retries: int) -> None:
    def refuse(request: ApprovalRequest) -> ApprovalAnswer:
        return ApprovalAnswer(False, "not today")

    model, _ = scripted(
        [ToolCallPart("write_note", {"text": "hi"}, tool_call_id="c1")], "understood"
    )
    toolset = TooldeckToolset([write_note], protect=Protection.ask("WRITE", approver=refuse))
    result = Agent(model, toolsets=[toolset], retries=agent_retries).run_sync("note hi")
    [returned] = returns(result.all_messages())
    assert returned.content == "Denied by the user: not today"
    assert result.output == "understood"
    assert written == []


def test_a_policy_deny_without_an_approver_is_the_answer_too() -> None:
    model, _ = scripted([ToolCallPart("write_note", {"text": "x"}, tool_call_id="c1")], "ok")
    toolset = TooldeckToolset([write_note], protect=Protection.policy(_deny_writes))
    result = Agent(model, toolsets=[toolset], retries=0).run_sync("note x")
    [returned] = returns(result.all_messages())
    assert returned.content == "Denied by policy: writes are off"
    assert written == []


def _deny_writes(tool: tooldeck.Tool, params: Any, call: tooldeck.ToolCall) -> Any:
    from tooldeck import PolicyDecision

    if tool.tier == "STANDARD":
        return PolicyDecision("allow")
    return PolicyDecision("deny", "writes are off")


def test_the_calls_of_one_step_are_approved_in_one_batch() -> None:
    batches: list[list[str]] = []

    async def approve(requests: Sequence[ApprovalRequest]) -> list[ApprovalAnswer]:
        batches.append([r.call.call_id for r in requests])
        return [ApprovalAnswer(r.call.call_id != "c2", "no to the second") for r in requests]

    model, _ = scripted(
        [
            ToolCallPart("write_note", {"text": "one"}, tool_call_id="c1"),
            ToolCallPart("add", {"a": 1, "b": 1}, tool_call_id="c0"),
            ToolCallPart("write_note", {"text": "two"}, tool_call_id="c2"),
            ToolCallPart("write_note", {"text": "three"}, tool_call_id="c3"),
        ],
        "done",
    )
    toolset = TooldeckToolset([add, write_note], protect=Protection.ask("WRITE", approver=approve))
    result = Agent(model, toolsets=[toolset]).run_sync("notes")
    assert batches == [["c1", "c2", "c3"]]  # one step, one batch, the model's order
    answers = {p.tool_call_id: p.content for p in returns(result.all_messages())}
    assert answers == {
        "c1": "wrote 'one'",
        "c0": "2",
        "c2": "Denied by the user: no to the second",
        "c3": "wrote 'three'",
    }
    assert written == ["one", "three"]  # WRITE tools run alone, in the model's order


def test_a_call_nobody_can_approve_now_is_deferred_then_resumed() -> None:
    async def later(requests: Sequence[ApprovalRequest]) -> list[ApprovalAnswer]:
        raise PendingApproval(requests)

    model, _ = scripted(
        [
            ToolCallPart("write_note", {"text": "later"}, tool_call_id="c1"),
            ToolCallPart("add", {"a": 2, "b": 2}, tool_call_id="c2"),
        ],
        "written",
    )
    toolset = TooldeckToolset([add, write_note], protect=Protection.ask("WRITE", approver=later))
    agent = Agent(model, toolsets=[toolset], output_type=[str, DeferredToolRequests])
    first = agent.run_sync("note later")
    assert isinstance(first.output, DeferredToolRequests)
    assert [c.tool_call_id for c in first.output.approvals] == ["c1"]
    assert written == []
    assert {p.tool_call_id: p.content for p in returns(first.all_messages())} == {"c2": "4"}

    second = agent.run_sync(
        message_history=first.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals={"c1": True}),
    )
    assert second.output == "written"
    assert written == ["later"]
    assert "wrote 'later'" in [p.content for p in returns(second.new_messages())]


def test_a_large_result_is_offloaded_and_read_back_by_its_ref_id(tmp_path: Path) -> None:
    lines = [f"line {i:05d} " + "x" * 60 for i in range(3000)]  # ~200,000 characters

    @tooldeck.tool(read_only=True)
    def dump() -> str:
        """A large report."""
        return "\n".join(lines)

    refs: list[str] = []
    offered: list[list[str]] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        offered.append([t.name for t in info.function_tools])
        if len(offered) == 1:
            return ModelResponse(parts=[ToolCallPart("dump", {}, tool_call_id="c1")])
        if len(offered) == 2:
            [summary] = returns(messages)
            refs.extend(re.findall(r"ref_[0-9a-f]+", str(summary.content)))
            call = {"ref_id": refs[0], "offset": 0}
            return ModelResponse(
                parts=[ToolCallPart("recall_tool_result", call, tool_call_id="c2")]
            )
        return ModelResponse(parts=[TextPart("read")])

    turn = TurnContext("offload-session", home=tmp_path)
    agent = Agent(FunctionModel(answer), toolsets=[TooldeckToolset([dump], turn=turn)])
    result = agent.run_sync("report")
    summary, page = returns(result.all_messages())
    assert len(str(summary.content)) < 20_000  # the model saw a summary, not 200,000
    assert "line 00000" in str(summary.content)
    assert refs and "line 00000" in str(page.content)
    assert f'next page: recall_tool_result(ref_id="{refs[0]}"' in str(page.content)
    assert offered[0] == ["dump"]  # the recall tool is offered once a result is stored
    assert offered[1] == ["dump", "recall_tool_result"]
    assert list(tmp_path.rglob(f"{refs[0]}*"))  # stored under the turn's home


def test_read_only_calls_of_one_step_run_together() -> None:
    arrived: list[str] = []
    both = asyncio.Event()

    @tooldeck.tool(read_only=True)
    async def wait_for_peer(name: str) -> str:
        """Waits until the other call of the step has started too."""
        arrived.append(name)
        if len(arrived) == 2:
            both.set()
        await asyncio.wait_for(both.wait(), 5)
        return f"{name} met its peer"

    model, _ = scripted(
        [
            ToolCallPart("wait_for_peer", {"name": "left"}, tool_call_id="c1"),
            ToolCallPart("wait_for_peer", {"name": "right"}, tool_call_id="c2"),
        ],
        "met",
    )
    result = Agent(model, toolsets=[TooldeckToolset([wait_for_peer])]).run_sync("meet")
    answers = [p.content for p in returns(result.all_messages())]
    assert answers == ["left met its peer", "right met its peer"]


def test_deferred_tools_are_found_with_tool_search_and_called_next_step() -> None:
    def numbered(n: int) -> tooldeck.Tool:
        def fn(x: int) -> int:
            return x * n

        fn.__name__ = f"times_{n}"
        fn.__doc__ = f"Multiply x by {n}."
        return tooldeck.tool(read_only=True)(fn)

    many = [numbered(n) for n in range(2, 30)]
    planner = ToolPlanner(many, threshold=4, search="local")
    offered: list[list[str]] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        offered.append([t.name for t in info.function_tools])
        if len(offered) == 1:
            call = {"query": "multiply by 17"}
            return ModelResponse(parts=[ToolCallPart("tool_search", call, tool_call_id="s")])
        if len(offered) == 2:
            return ModelResponse(parts=[ToolCallPart("times_17", {"x": 2}, tool_call_id="c")])
        return ModelResponse(parts=[TextPart("34")])

    toolset = TooldeckToolset(planner)
    result = Agent(FunctionModel(answer), toolsets=[toolset]).run_sync("2*17")
    assert "times_17" not in offered[0] and "tool_search" in offered[0]
    assert "times_17" in offered[1]
    assert returns(result.all_messages())[-1].content == "34"


def test_a_missing_extra_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib
    import sys

    from tooldeck.errors import MissingExtra

    monkeypatch.setitem(sys.modules, "pydantic_ai", None)
    monkeypatch.delitem(sys.modules, "tooldeck.adapters.pydantic_ai", raising=False)
    with pytest.raises(MissingExtra) as caught:
        importlib.import_module("tooldeck.adapters.pydantic_ai")
    assert str(caught.value) == (
        "tooldeck tools in a pydantic-ai agent need the pydantic-ai extra "
        "(no module named 'pydantic_ai'): pip install 'tooldeck[pydantic-ai]'"
    )
