"""tooldeck's tools in an openai-agents agent (``tooldeck.adapters.openai_agents``), run by
openai-agents' own ``Runner`` with a scripted model of ours that implements its ``Model``
interface: each step answers with the next scripted output (function calls or text), and
the tools it was offered and the input it got are kept.

Each scenario of the issue: a valid call, a repaired call (openai-agents hands the tool the
raw argument string), an invalid call retried, a denied call, an approval (one batch for a
step's calls), an offloaded result read back by the ref id the answer gives, a parallel
batch, and deferred tools found with ``tool_search``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner
from agents.items import ModelResponse, TResponseInputItem, TResponseStreamEvent
from agents.models.interface import Model, ModelTracing
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

import tooldeck
from tooldeck import ApprovalAnswer, ApprovalRequest, Protection, TurnContext
from tooldeck.adapters.openai_agents import function_tools
from tooldeck.plan import ToolPlanner

Call = tuple[str, str, str]  # call id, tool name, raw arguments
Step = list[Call] | str | Callable[[list[dict[str, Any]]], "list[Call] | str"]
_ids = itertools.count()


class ScriptedAgentsModel(Model):
    """openai-agents' Model interface, answering from a script (not a real model)."""

    def __init__(self, *steps: Step) -> None:
        self.steps = list(steps)
        self.offered: list[list[str]] = []
        self.schemas: list[dict[str, Any]] = []

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: Any,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> ModelResponse:
        self.offered.append([t.name for t in tools])
        self.schemas.append({t.name: t.params_json_schema for t in tools})
        step = self.steps.pop(0)
        if callable(step):
            items = [dict(i) for i in input] if isinstance(input, list) else []
            step = step(items)
        output: list[Any]
        if isinstance(step, str):
            output = [
                ResponseOutputMessage(
                    id=f"msg_{next(_ids)}",
                    role="assistant",
                    status="completed",
                    type="message",
                    content=[ResponseOutputText(text=step, type="output_text", annotations=[])],
                )
            ]
        else:
            output = [
                ResponseFunctionToolCall(
                    type="function_call",
                    id=f"fc_{call_id}",
                    call_id=call_id,
                    name=name,
                    arguments=arguments,
                    status="completed",
                )
                for call_id, name, arguments in step
            ]
        return ModelResponse(output=output, usage=Usage(requests=1), response_id=None)

    async def stream_response(
        self, *args: Any, **kwargs: Any
    ) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError("the scripted model does not stream")
        yield  # an async generator


def outputs(result: Any) -> dict[str, str]:
    """Every tool output the run recorded, by call id."""
    found: dict[str, str] = {}
    for item in result.to_input_list():
        if isinstance(item, dict) and item.get("type") == "function_call_output":
            found[item["call_id"]] = item["output"]
    return found


def run(model: ScriptedAgentsModel, tools: list[Any], prompt: str = "go") -> Any:
    agent = Agent(name="test", model=model, tools=tools)
    return Runner.run_sync(agent, prompt)


@tooldeck.tool(read_only=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tooldeck.tool(read_only=True)
def greet(name: str, title: str | None = None) -> str:
    """Greet someone, with a title if given."""
    return f"hello {title + ' ' if title else ''}{name}"


written: list[str] = []


@tooldeck.tool
def write_note(text: str) -> str:
    """Write a note (a WRITE tool: it changes the world)."""
    written.append(text)
    return f"wrote {text!r}"


@pytest.fixture(autouse=True)
def _fresh_notes() -> None:
    written.clear()


def test_a_valid_call_runs_and_its_frozen_text_is_the_answer() -> None:
    model = ScriptedAgentsModel([("c1", "add", '{"a": 2, "b": 3}')], "five")
    result = run(model, function_tools([add]))
    assert outputs(result) == {"c1": "5"}
    assert result.final_output == "five"


def test_the_strict_projection_is_offered_and_its_nulls_read_as_absent() -> None:
    model = ScriptedAgentsModel([("c1", "greet", '{"name": "Ada", "title": null}')], "ok")
    result = run(model, function_tools([greet]))
    schema = model.schemas[0]["greet"]
    assert schema["additionalProperties"] is False
    assert sorted(schema["required"]) == ["name", "title"]  # strict: every key required
    assert outputs(result) == {"c1": "hello Ada"}


def test_a_call_with_broken_json_is_repaired_and_runs() -> None:
    model = ScriptedAgentsModel([("c1", "add", '{"a": 1, "b": 2,}')], "three")
    result = run(model, function_tools([add]))
    assert outputs(result) == {"c1": "3"}


def test_an_invalid_call_answers_what_to_fix_and_the_model_calls_again() -> None:
    model = ScriptedAgentsModel(
        [("c1", "add", '{"a": "one"}')],
        [("c2", "add", '{"a": 1, "b": 1}')],
        "two",
    )
    result = run(model, function_tools([add]))
    answers = outputs(result)
    assert answers["c1"].startswith("Invalid arguments for add: ")
    assert "$.b: required property missing" in answers["c1"]
    assert answers["c2"] == "2"
    assert result.final_output == "two"


def test_a_denied_call_is_the_tools_answer_and_the_run_goes_on() -> None:
    def refuse(request: ApprovalRequest) -> ApprovalAnswer:
        return ApprovalAnswer(False, "not today")

    model = ScriptedAgentsModel([("c1", "write_note", '{"text": "hi"}')], "understood")
    tools = function_tools([write_note], protect=Protection.ask("WRITE", approver=refuse))
    result = run(model, tools)
    assert outputs(result) == {"c1": "Denied by the user: not today"}
    assert result.final_output == "understood"
    assert written == []


def test_the_calls_of_one_step_are_approved_in_one_batch() -> None:
    batches: list[list[str]] = []

    async def approve(requests: Sequence[ApprovalRequest]) -> list[ApprovalAnswer]:
        batches.append([r.call.call_id for r in requests])
        return [ApprovalAnswer(r.call.call_id != "c2", "no to the second") for r in requests]

    model = ScriptedAgentsModel(
        [
            ("c1", "write_note", '{"text": "one"}'),
            ("c0", "add", '{"a": 1, "b": 1}'),
            ("c2", "write_note", '{"text": "two"}'),
            ("c3", "write_note", '{"text": "three"}'),
        ],
        "done",
    )
    protect = Protection.ask("WRITE", approver=approve)
    result = run(model, function_tools([add, write_note], protect=protect))
    assert batches == [["c1", "c2", "c3"]]  # one step, one batch, the model's order
    assert outputs(result) == {
        "c1": "wrote 'one'",
        "c0": "2",
        "c2": "Denied by the user: no to the second",
        "c3": "wrote 'three'",
    }
    assert written == ["one", "three"]


def test_a_large_result_is_offloaded_and_read_back_by_its_ref_id(tmp_path: Path) -> None:
    lines = [f"line {i:05d} " + "x" * 60 for i in range(3000)]  # ~200,000 characters

    @tooldeck.tool(read_only=True)
    def dump() -> str:
        """A large report."""
        return "\n".join(lines)

    refs: list[str] = []

    def read_back(items: list[dict[str, Any]]) -> list[Call]:
        [summary] = [i["output"] for i in items if i.get("type") == "function_call_output"]
        assert len(summary) < 20_000 and "line 00000" in summary
        refs.extend(re.findall(r"ref_[0-9a-f]+", summary))
        return [("c2", "recall_tool_result", json.dumps({"ref_id": refs[0], "offset": 0}))]

    model = ScriptedAgentsModel([("c1", "dump", "{}")], read_back, "read")
    turn = TurnContext("offload-session", home=tmp_path)
    result = run(model, function_tools([dump], turn=turn))
    assert model.offered[0] == ["dump"]  # the recall tool is offered once a result is stored
    assert model.offered[1] == ["dump", "recall_tool_result"]
    page = outputs(result)["c2"]
    assert "line 00000" in page
    assert f'next page: recall_tool_result(ref_id="{refs[0]}"' in page
    assert list(tmp_path.rglob(f"{refs[0]}*"))


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

    model = ScriptedAgentsModel(
        [
            ("c1", "wait_for_peer", '{"name": "left"}'),
            ("c2", "wait_for_peer", '{"name": "right"}'),
        ],
        "met",
    )
    result = run(model, function_tools([wait_for_peer]))
    assert outputs(result) == {"c1": "left met its peer", "c2": "right met its peer"}


def test_deferred_tools_are_found_with_tool_search_and_called_next_step() -> None:
    def numbered(n: int) -> tooldeck.Tool:
        def fn(x: int) -> int:
            return x * n

        fn.__name__ = f"times_{n}"
        fn.__doc__ = f"Multiply x by {n}."
        return tooldeck.tool(read_only=True)(fn)

    planner = ToolPlanner([numbered(n) for n in range(2, 30)], threshold=4, search="local")
    model = ScriptedAgentsModel(
        [("s", "tool_search", '{"query": "multiply by 17"}')],
        [("c", "times_17", '{"x": 2}')],
        "34",
    )
    result = run(model, function_tools(planner))
    assert "times_17" not in model.offered[0] and "tool_search" in model.offered[0]
    assert "times_17" in model.offered[1]
    assert outputs(result)["c"] == "34"


def test_a_missing_extra_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib
    import sys

    from tooldeck.errors import MissingExtra

    monkeypatch.setitem(sys.modules, "agents", None)
    monkeypatch.delitem(sys.modules, "tooldeck.adapters.openai_agents", raising=False)
    with pytest.raises(MissingExtra) as caught:
        importlib.import_module("tooldeck.adapters.openai_agents")
    assert str(caught.value) == (
        "tooldeck tools in an openai-agents agent need the openai-agents extra "
        "(no module named 'agents'): pip install 'tooldeck[openai-agents]'"
    )
