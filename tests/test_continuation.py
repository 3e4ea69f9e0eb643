"""Continue after truncation (ContinuePolicy), offline; over HTTP per provider see
``tests/providers/test_streamed_turns.py``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import tooldeck
from tooldeck import (
    AssistantMessage,
    ContinuePolicy,
    ModelSettings,
    Session,
    StopReason,
    ToolOutput,
    Usage,
    UserMessage,
    tool,
)
from tooldeck.events import (
    Event,
    ModelStepFinished,
    ModelStepStarted,
    TurnContinued,
    TurnFinished,
)
from tooldeck.testing import ScriptedModel, call, reply

RAN: list[tuple[int, int]] = []


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


@tool(read_only=True)
async def add(a: int, b: int) -> int:
    """Add two integers."""
    RAN.append((a, b))
    return a + b


def cut(*parts: Any, used: int = 100, raw_stop: str | None = None) -> AssistantMessage:
    """A response cut off at its limit; its calls are marked incomplete, as adapters do."""
    made = reply(*parts, stop_reason=StopReason.MAX_TOKENS, usage=Usage(10, used, requests=1))
    if raw_stop is None:
        return made
    return AssistantMessage(
        parts=made.parts,
        stop_reason=made.stop_reason,
        usage=made.usage,
        provider_data={"stop_reason": raw_stop},
    )


def turn(model: ScriptedModel, **options: Any) -> tuple[tooldeck.RunResult, list[Event], Session]:
    session = Session(model, [add], **options)
    events: list[Event] = []
    session.events.subscribe(events.append)
    result = asyncio.run(session.run("2+3?"))
    return result, events, session


def limits(model: ScriptedModel) -> list[int | None]:
    return [r.settings.max_output_tokens for r in model.requests]


def test_a_cut_off_call_is_never_run_and_the_turn_goes_on_with_twice_the_limit() -> None:
    model = ScriptedModel(
        [
            cut("Adding", call("add", '{"a": 2, "b"', call_id="cut", incomplete=True)),
            reply(call("add", {"a": 2, "b": 3}, call_id="whole")),
            reply("5"),
        ]
    )
    result, events, session = turn(
        model,
        settings=ModelSettings(max_output_tokens=100),
        continue_on_max_tokens=ContinuePolicy(max_continuations=2, factor=2),
    )
    assert result.stop_reason is StopReason.END_TURN and result.output == "5"
    assert limits(model) == [100, 200, 200]  # the larger limit holds for the rest of the turn
    assert RAN == [(2, 3)]  # only the whole call ran
    outputs = {o.call_id: o for o in result.tool_outputs}
    assert outputs["cut"].is_error
    assert outputs["cut"].text == (  # the output every cut-off call gets, as without a policy
        "Not executed: the response was cut off at its token limit, so its arguments may "
        "be incomplete."
    )
    assert outputs["whole"].text == "5"
    # the transcript says what happened, right after the cut-off call's output
    note = result.items[3]
    assert isinstance(note, UserMessage)
    assert note.text == (
        "[tooldeck] Your previous response was cut off at its output limit (100 tokens) "
        "before it was complete; its 1 tool call(s) were not run. The limit is now 200 "
        "tokens: write that response again, in full."
    )
    assert model.requests[1].transcript[-1] == note
    continued = [e for e in events if isinstance(e, TurnContinued)]
    assert continued == [TurnContinued(session.session_id, 1, 1, 100, 200, ("cut",))]
    order = [type(e).__name__ for e in events]
    first_done = order.index("ModelStepFinished")
    assert order[first_done + 1 : first_done + 4] == [
        "OutputRecorded",
        "TurnContinued",
        "ModelStepStarted",
    ]
    # the next turn starts from the session's own settings again
    model2 = ScriptedModel([reply("ok")])
    session.model = model2
    asyncio.run(session.run("again"))
    assert limits(model2) == [100]


def test_continuations_are_bounded() -> None:
    model = ScriptedModel([cut("a"), cut("b"), cut("c"), reply("never asked")])
    result, events, _ = turn(
        model,
        settings=ModelSettings(max_output_tokens=100),
        continue_on_max_tokens=ContinuePolicy(max_continuations=2),
    )
    assert limits(model) == [100, 200, 400]
    assert result.stop_reason is StopReason.MAX_TOKENS and result.steps == 3
    assert (
        result.reason
        == "max_tokens; not continued: already continued 2 time(s), the policy's maximum"
    )
    assert [e.continuation for e in events if isinstance(e, TurnContinued)] == [1, 2]
    notes = [i for i in result.items if isinstance(i, UserMessage)]
    assert len(notes) == 3  # the prompt and one note per continuation


def test_the_ceiling_caps_the_limit_and_then_stops() -> None:
    model = ScriptedModel([cut("a"), cut("b"), reply("never asked")])
    result, _, _ = turn(
        model,
        settings=ModelSettings(max_output_tokens=100),
        continue_on_max_tokens=ContinuePolicy(max_continuations=5, factor=4, max_output_tokens=250),
    )
    assert limits(model) == [100, 250]
    assert result.reason.endswith(
        "not continued: the output limit is already at the policy's ceiling (250 tokens)"
    )


def test_without_a_limit_the_tokens_the_response_used_are_the_limit_it_hit() -> None:
    model = ScriptedModel([cut("long", used=4096), reply("short")])
    result, _, _ = turn(model, continue_on_max_tokens=ContinuePolicy())
    assert limits(model) == [None, 8192] and result.output == "short"

    model = ScriptedModel([cut("long", used=0), reply("never asked")])
    result, _, _ = turn(model, continue_on_max_tokens=ContinuePolicy())
    assert len(model.requests) == 1
    assert result.reason == (
        "max_tokens; not continued: the output limit that was hit is unknown "
        "(set max_output_tokens)"
    )


def test_a_full_context_window_is_not_continued() -> None:
    model = ScriptedModel([cut("x", raw_stop="model_context_window_exceeded"), reply("no")])
    result, _, _ = turn(
        model,
        settings=ModelSettings(max_output_tokens=100),
        continue_on_max_tokens=ContinuePolicy(),
    )
    assert len(model.requests) == 1 and result.stop_reason is StopReason.MAX_TOKENS
    assert "a larger output limit cannot help" in result.reason


@pytest.mark.parametrize("stop", [StopReason.REFUSAL, StopReason.CONTENT_FILTER, StopReason.ERROR])
def test_other_stops_are_never_continued(stop: StopReason) -> None:
    model = ScriptedModel([reply("x", call("add", {"a": 1, "b": 1}), stop_reason=stop)])
    result, events, _ = turn(model, continue_on_max_tokens=ContinuePolicy())
    assert result.stop_reason is stop and len(model.requests) == 1
    assert "not continued" not in result.reason and RAN == []
    assert not any(isinstance(e, TurnContinued) for e in events)


def test_without_the_policy_a_cut_off_turn_ends_as_before() -> None:
    model = ScriptedModel([cut(call("add", '{"a": 1', incomplete=True)), reply("never")])
    result, _, _ = turn(model, settings=ModelSettings(max_output_tokens=100))
    assert result.stop_reason is StopReason.MAX_TOKENS
    assert result.reason == "max_tokens; 1 call(s) not executed"
    assert len(model.requests) == 1 and RAN == []
    assert isinstance(result.items[-1], ToolOutput)


def test_a_streamed_turn_continues_the_same_way() -> None:
    model = ScriptedModel(
        [cut(call("add", '{"a": 2,', call_id="cut", incomplete=True)), reply("done")],
        stream_chunk=4,
    )
    session = Session(
        model,
        [add],
        settings=ModelSettings(max_output_tokens=64),
        continue_on_max_tokens=ContinuePolicy(),
    )

    async def main() -> list[Event]:
        return [e async for e in session.stream("go")]

    events = asyncio.run(main())
    assert limits(model) == [64, 128] and RAN == []
    at = next(i for i, e in enumerate(events) if isinstance(e, TurnContinued))
    assert isinstance(events[at - 2], ModelStepFinished)  # then the cut call's output
    step = events[at + 1]
    assert isinstance(step, ModelStepStarted) and step.step == 2
    last = events[-1]
    assert isinstance(last, TurnFinished) and last.stop_reason is StopReason.END_TURN


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_continuations": 0}, "at least 1"),
        ({"factor": 1}, "greater than 1"),
        ({"factor": float("nan")}, "greater than 1"),
        ({"max_output_tokens": 0}, "positive"),
    ],
)
def test_policy_values_are_checked(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ContinuePolicy(**options)
