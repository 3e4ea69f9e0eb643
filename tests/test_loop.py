"""The agent loop and Session: stop conditions, refusal, truncation, usage, events."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import tooldeck
from tooldeck import Session, StopReason, ToolResult, Toolset, Usage, tool
from tooldeck.events import Event
from tooldeck.model import ModelRequest
from tooldeck.testing import ScriptedModel, call, reply
from tooldeck.transcript import AssistantMessage, ToolOutput

RAN: list[str] = []


@tool(read_only=True)
async def add(a: int, b: int) -> int:
    """Add two integers."""
    RAN.append("add")
    return a + b


@tool
def stop_here() -> ToolResult:
    """End the turn."""
    RAN.append("stop_here")
    return ToolResult("stopping", terminate=True)


TOOLS = Toolset([add, stop_here])


def run(script: Any, **kwargs: Any) -> tooldeck.RunResult:
    RAN.clear()
    return asyncio.run(tooldeck.run(ScriptedModel(script), TOOLS, "go", **kwargs))


def test_simple_tool_round_trip_and_usage_summed() -> None:
    result = run([reply("Let me add.", call("add", {"a": 2, "b": 3})), reply("It is 5.")])
    assert result.output == "It is 5."
    assert result.stop_reason is StopReason.END_TURN and result.steps == 2
    assert result.usage == Usage(20, 10, requests=2)
    assert [o.text for o in result.tool_outputs] == ["5"]
    kinds = [type(i).__name__ for i in result.items]
    assert kinds == ["UserMessage", "AssistantMessage", "ToolOutput", "AssistantMessage"]


def test_model_sees_outputs_of_previous_step() -> None:
    def script(request: ModelRequest) -> AssistantMessage:
        outputs = [i for i in request.transcript if isinstance(i, ToolOutput)]
        if not outputs:
            return reply(call("add", {"a": 40, "b": 2}))
        return reply(f"sum={outputs[-1].text}")

    assert run(script).output == "sum=42"


def test_refusal_ends_the_turn_before_any_tool_runs() -> None:
    result = run(
        [
            reply(
                call("add", {"a": 1, "b": 1}),
                stop_reason=StopReason.REFUSAL,
                refusal="refusal:safety",
            )
        ]
    )
    assert RAN == []
    assert result.stop_reason is StopReason.REFUSAL
    assert result.reason == "refusal:safety; 1 call(s) not executed"
    assert result.tool_outputs[0].is_error and "refused" in result.tool_outputs[0].text


def test_calls_from_a_truncated_response_are_never_executed() -> None:
    result = run([reply(call("add", '{"a": 1, "b": 2}'), stop_reason=StopReason.MAX_TOKENS)])
    assert RAN == []
    assert result.stop_reason is StopReason.MAX_TOKENS
    assert "cut off" in result.tool_outputs[0].text


def test_max_steps_stops_a_model_that_never_finishes() -> None:
    result = run(lambda request: reply(call("add", {"a": 1, "b": 1})), max_steps=3)
    assert result.steps == 3 and RAN == ["add"] * 3
    assert result.reason == "max_steps (3) reached"


def test_terminating_tool_ends_the_turn() -> None:
    result = run([reply(call("stop_here")), reply("unreachable")])
    assert result.reason == "ended by tool stop_here" and result.steps == 1


def test_pause_turn_is_sent_back_and_continues() -> None:
    result = run([reply("searching...", stop_reason=StopReason.PAUSE_TURN), reply("done")])
    assert result.output == "done" and result.steps == 2


def test_model_errors_propagate_after_turn_finished_event() -> None:
    events: list[Event] = []

    async def main() -> None:
        session = Session(ScriptedModel([]), TOOLS)
        session.events.subscribe(events.append)
        await session.run("hi")

    with pytest.raises(RuntimeError, match="script exhausted"):
        asyncio.run(main())
    assert events[-1].type == "turn_finished"
    assert events[-1].stop_reason is StopReason.ERROR  # type: ignore[attr-defined]


def test_session_keeps_the_transcript_across_turns() -> None:
    model = ScriptedModel([reply("first"), reply("second")])
    session = Session(model, TOOLS)

    async def main() -> None:
        await session.run("one")
        await session.run("two")

    asyncio.run(main())
    assert len(model.requests[1].transcript) == 3  # user, assistant, user
    assert [type(i).__name__ for i in session.transcript] == [
        "UserMessage",
        "AssistantMessage",
        "UserMessage",
        "AssistantMessage",
    ]


def test_event_stream_sees_the_whole_turn() -> None:
    async def main() -> list[str]:
        session = Session(ScriptedModel([reply(call("add", {"a": 1, "b": 2})), reply("3")]), TOOLS)
        seen: list[str] = []

        async def consume() -> None:
            async with session.events.stream() as events:
                ready.set()
                async for event in events:
                    seen.append(event.type)

        ready = asyncio.Event()
        consumer = asyncio.create_task(consume())
        await ready.wait()
        await session.run("go")
        await consumer
        return seen

    assert asyncio.run(main()) == [
        "turn_started",
        "model_step_started",
        "model_step_finished",
        "call_started",
        "call_finished",
        "output_recorded",
        "model_step_started",
        "model_step_finished",
        "turn_finished",
    ]


def test_abort_before_a_step_stops_the_turn() -> None:
    signal = tooldeck.AbortSignal()
    signal.abort("shutting down")
    result = run([reply("never")], signal=signal)
    assert result.steps == 0 and result.reason == "aborted: shutting down"


def test_a_toolset_factory_is_assembled_again_before_every_step(tmp_path: Any) -> None:
    from tooldeck import TurnContext

    built: list[int] = []

    @tooldeck.source
    def factory(ctx: TurnContext) -> Toolset:
        built.append(1)
        # the second step gains stop_here: a tool becomes callable from the next step
        return Toolset([add, stop_here]) if len(built) > 1 else Toolset([add])

    model = ScriptedModel([reply(call("add", {"a": 1, "b": 1})), reply(call("stop_here"))])
    session = Session(model, factory, turn=TurnContext(session_id="s", home=tmp_path))
    result = asyncio.run(session.run("go"))
    assert [t.name for t in model.requests[0].tools] == ["add"]
    assert [t.name for t in model.requests[1].tools] == ["add", "stop_here"]
    assert result.reason == "ended by tool stop_here" and len(built) == 2


def test_result_hooks_transform_outputs_and_a_failing_hook_is_skipped() -> None:
    def shout(c: Any, t: Any, r: ToolResult, ctx: Any) -> ToolResult:
        return ToolResult(r.text() + "!")

    def broken(c: Any, t: Any, r: ToolResult, ctx: Any) -> ToolResult:
        raise RuntimeError("hook bug")

    model = ScriptedModel([reply(call("add", {"a": 1, "b": 1})), reply("done")])
    session = Session(model, TOOLS, result_hooks=[shout, broken])
    result = asyncio.run(session.run("go"))
    assert result.tool_outputs[0].text == "2!"
