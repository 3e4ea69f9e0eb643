"""Streamed turns offline (ScriptedModel): event order, equivalence with run(), cancellation.

The same properties over real HTTP/SSE, per provider, are in
``tests/providers/test_streamed_turns.py``.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tooldeck
from tooldeck import (
    ApprovalAnswer,
    ApprovalRequest,
    AssistantMessage,
    OpaqueItem,
    PolicyDecision,
    Protection,
    Session,
    StopReason,
    ToolCall,
    ToolContext,
    ToolOutput,
    UserMessage,
    tool,
)
from tooldeck._streaming import TurnStream
from tooldeck.events import (
    ApprovalRequested,
    CallFinished,
    CallStarted,
    Event,
    ModelStepFinished,
    ModelStepStarted,
    OutputRecorded,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    ToolCallDone,
    ToolCallStarted,
    ToolEvent,
    TurnFinished,
    TurnStarted,
)
from tooldeck.model import ModelDelta, ModelRequest
from tooldeck.testing import ScriptedModel, call, reply

RAN: list[str] = []


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


@tool(read_only=True)
async def add(a: int, b: int) -> int:
    """Add two integers."""
    RAN.append(f"add:{a}+{b}")
    return a + b


@tool(read_only=True)
async def mul(a: int, b: int) -> int:
    """Multiply two integers."""
    RAN.append(f"mul:{a}*{b}")
    return a * b


def two_steps(chunk: int | None = 3) -> ScriptedModel:
    return ScriptedModel(
        [
            reply(
                "Working it out.",
                call("add", {"a": 2, "b": 3}, call_id="c_add"),
                call("mul", {"a": 4, "b": 5}, call_id="c_mul"),
            ),
            reply("5 and 20."),
        ],
        stream_chunk=chunk,
    )


async def collect(stream: TurnStream[Any]) -> list[Event]:
    return [event async for event in stream]


def kinds(events: Sequence[Event]) -> list[str]:
    return [e.type for e in events]


# -- order and content ----------------------------------------------------------------------


def test_events_of_a_streamed_turn_in_order() -> None:
    session = Session(two_steps(), [add, mul], session_id="s")

    async def main() -> tuple[list[Event], tooldeck.RunResult]:
        stream = session.stream("2+3 and 4*5?")
        events = await collect(stream)
        return events, stream.result

    events, result = asyncio.run(main())
    model_side = [e for e in events if not isinstance(e, (CallStarted, CallFinished))]
    assert kinds(model_side) == [
        "turn_started",
        "model_step_started",
        *["text_delta"] * 5,  # "Working it out." in pieces of 3
        "tool_call_started",
        *["tool_call_delta"] * 6,  # '{"a": 2, "b": 3}' in pieces of 3
        "tool_call_started",
        *["tool_call_delta"] * 6,
        "tool_call_done",
        "tool_call_done",
        "model_step_finished",
        "output_recorded",
        "output_recorded",
        "model_step_started",
        *["text_delta"] * 3,
        "model_step_finished",
        "turn_finished",
    ]
    step_one = [e for e in events if isinstance(e, TextDelta) and e.step == 1]
    assert "".join(e.text for e in step_one) == "Working it out."
    args = {
        i: "".join(e.arguments for e in events if isinstance(e, ToolCallDelta) and e.index == i)
        for i in (0, 1)
    }
    assert args == {0: '{"a": 2, "b": 3}', 1: '{"a": 4, "b": 5}'}
    started = [e for e in events if isinstance(e, ToolCallStarted)]
    assert [(e.index, e.call_id, e.name) for e in started] == [
        (0, "c_add", "add"),
        (1, "c_mul", "mul"),
    ]
    done = [e for e in events if isinstance(e, ToolCallDone)]
    first = next(e for e in events if isinstance(e, ModelStepFinished))
    assert [e.call for e in done] == first.message.tool_calls
    assert first.stop_reason is StopReason.TOOL_CALLS and first.usage.requests == 1
    # every call runs after the message is complete, and each is recorded once, in order
    position = {id(e): i for i, e in enumerate(events)}
    for call_id in ("c_add", "c_mul"):
        begin = next(e for e in events if isinstance(e, CallStarted) and e.call.call_id == call_id)
        end = next(e for e in events if isinstance(e, CallFinished) and e.call.call_id == call_id)
        out = next(
            e for e in events if isinstance(e, OutputRecorded) and e.output.call_id == call_id
        )
        assert position[id(done[-1])] < position[id(first)] < position[id(begin)]
        assert position[id(begin)] < position[id(end)] < position[id(out)]
    finished = events[-1]
    assert isinstance(finished, TurnFinished) and finished.stop_reason is StopReason.END_TURN
    assert finished.usage == result.usage and result.output == "5 and 20."
    assert sorted(RAN) == ["add:2+3", "mul:4*5"]


def test_the_bus_sees_the_same_events_as_the_stream() -> None:
    session = Session(two_steps(), [add, mul])
    seen: list[Event] = []
    session.events.subscribe(seen.append)

    async def main() -> list[Event]:
        return await collect(session.stream("go"))

    assert asyncio.run(main()) == seen


def test_stream_and_run_are_the_same_turn() -> None:
    """Same requests to the model, same transcript, same result; only the step streams."""
    streamed, ran = Session(two_steps(), [add, mul]), Session(two_steps(), [add, mul])

    async def main() -> tuple[tooldeck.RunResult, tooldeck.RunResult]:
        first = await streamed.stream("2+3 and 4*5?").wait()
        second = await ran.run("2+3 and 4*5?")
        return first, second

    a, b = asyncio.run(main())
    assert streamed.model.requests == ran.model.requests  # type: ignore[attr-defined]
    assert streamed.transcript == ran.transcript
    assert (a.output, a.stop_reason, a.reason, a.usage, a.steps) == (
        b.output,
        b.stop_reason,
        b.reason,
        b.usage,
        b.steps,
    )
    assert a.items == b.items


step_parts = st.lists(
    st.one_of(
        st.text(min_size=1, max_size=12).map(lambda t: ("text", t)),
        st.builds(lambda a, b: ("add", {"a": a, "b": b}), st.integers(-9, 99), st.integers(0, 9)),
    ),
    min_size=1,
    max_size=4,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(step_parts, min_size=1, max_size=3), chunk=st.integers(1, 7))
def test_streamed_fragments_add_up_to_the_message(
    steps: list[list[tuple[str, Any]]], chunk: int
) -> None:
    """Whatever the script and the piece size: text and arguments streamed add up to the
    message the transcript keeps, calls are announced and done once each, in order, and
    the turn equals the same turn run without streaming."""

    def script() -> list[AssistantMessage]:
        turns = []
        for n, parts in enumerate(steps):
            made: list[str | ToolCall] = [
                p[1] if p[0] == "text" else call("add", p[1], call_id=f"c{n}_{i}")
                for i, p in enumerate(parts)
            ]
            turns.append(reply(*made))
        return [*turns, reply("end")]

    streamed = Session(ScriptedModel(script(), stream_chunk=chunk), [add])
    ran = Session(ScriptedModel(script()), [add])

    async def main() -> list[Event]:
        events = await collect(streamed.stream("go"))
        await ran.run("go")
        return events

    events = asyncio.run(main())
    assert streamed.transcript == ran.transcript
    messages = [e.message for e in events if isinstance(e, ModelStepFinished)]
    for step, message in enumerate(messages, start=1):
        mine = [e for e in events if getattr(e, "step", None) == step]
        assert "".join(e.text for e in mine if isinstance(e, TextDelta)) == message.text
        calls = message.tool_calls
        assert [e.index for e in mine if isinstance(e, ToolCallStarted)] == list(range(len(calls)))
        assert [e.call for e in mine if isinstance(e, ToolCallDone)] == calls
        for index, c in enumerate(calls):
            written = "".join(
                e.arguments for e in mine if isinstance(e, ToolCallDelta) and e.index == index
            )
            assert written == c.arguments


def test_reasoning_streams_from_a_scripted_reasoning_item() -> None:
    thought = OpaqueItem("scripted", "scripted", "scripted", "reasoning", "Add them first.")
    message = AssistantMessage(parts=[thought, *reply("5").parts])
    model = ScriptedModel([message], stream_chunk=5)

    async def main() -> list[Event]:
        return await collect(tooldeck.stream(model, [], "2+3?"))

    events = asyncio.run(main())
    thinking = [e.text for e in events if isinstance(e, ReasoningDelta)]
    assert thinking == ["Add t", "hem f", "irst."]
    assert kinds(events).index("reasoning_delta") < kinds(events).index("text_delta")


class _Fragments:
    """A third-party model whose stream names calls by id only, and never announces them."""

    name = "fragments"

    def __init__(self, pieces: Sequence[ModelDelta], message: AssistantMessage | None):
        self.pieces, self.message = pieces, message
        self.closed = False

    async def respond(self, request: ModelRequest) -> AssistantMessage:
        assert self.message is not None
        return self.message

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta | AssistantMessage]:
        try:
            for piece in self.pieces:
                yield piece
            if self.message is not None:
                yield self.message
        finally:
            self.closed = True


def test_calls_a_stream_never_announced_still_start_and_finish() -> None:
    message = reply(call("add", '{"a":1,"b":1}', call_id="x"), call("add", "{}", call_id="y"))
    model = _Fragments(
        [
            ModelDelta("tool_call", '{"a":1,', call_id="x"),
            ModelDelta("tool_call", '"b":1}', call_id="x"),
        ],
        message,
    )
    session = Session(model, [add], max_steps=1)

    async def main() -> list[Event]:
        return await collect(session.stream("go"))

    events = asyncio.run(main())
    started = [(e.index, e.call_id) for e in events if isinstance(e, ToolCallStarted)]
    assert started == [(0, "x"), (1, "y")]
    assert [e.arguments for e in events if isinstance(e, ToolCallDelta)] == ['{"a":1,', '"b":1}']
    assert [e.index for e in events if isinstance(e, ToolCallDone)] == [0, 1]


def test_a_stream_that_ends_without_its_message_fails_the_turn() -> None:
    model = _Fragments([ModelDelta("text", "Hel")], None)
    session = Session(model, [])

    async def main() -> list[Event]:
        seen: list[Event] = []
        with pytest.raises(RuntimeError, match="ended without its message"):
            async for event in session.stream("go"):
                seen.append(event)
        return seen

    events = asyncio.run(main())
    assert model.closed
    assert kinds(events)[-2:] == ["text_delta", "turn_finished"]
    finished = events[-1]
    assert isinstance(finished, TurnFinished) and finished.stop_reason is StopReason.ERROR
    assert session.transcript == [UserMessage("go")]


def test_a_model_error_comes_after_turn_finished() -> None:
    def broken(request: ModelRequest) -> AssistantMessage:
        raise ConnectionError("the network is down")

    stream = tooldeck.stream(ScriptedModel(broken), [], "go")

    async def main() -> list[Event]:
        seen: list[Event] = []
        with pytest.raises(ConnectionError, match="network is down"):
            async for event in stream:
                seen.append(event)
        return seen

    events = asyncio.run(main())
    assert kinds(events) == ["turn_started", "model_step_started", "turn_finished"]
    with pytest.raises(ConnectionError):
        _ = stream.result


def test_result_before_the_end_and_a_stream_never_iterated() -> None:
    model = two_steps()
    session = Session(model, [add, mul])

    async def main() -> None:
        stream = session.stream("go")
        with pytest.raises(RuntimeError, match="has not finished"):
            _ = stream.result
        assert not stream.done
        del stream  # never iterated: nothing ran
        result = await session.run("again")
        assert result.output == "5 and 20."

    asyncio.run(main())
    assert [m.text for m in session.transcript if isinstance(m, UserMessage)] == ["again"]


# -- approvals ------------------------------------------------------------------------------


def test_an_approval_answered_by_the_stream_consumer() -> None:
    @tool
    async def deploy(target: str) -> str:
        """Deploy to a target."""
        RAN.append(f"deploy:{target}")
        return "deployed"

    def ask(tool: tooldeck.Tool, params: Any, call: ToolCall) -> PolicyDecision:
        return PolicyDecision("ask", "deploys need a human")

    model = ScriptedModel(
        [
            reply(
                call("deploy", {"target": "prod"}, call_id="d1"),
                call("deploy", {"target": "staging"}, call_id="d2"),
            ),
            reply("done"),
        ]
    )

    async def main() -> list[Event]:
        answer: asyncio.Future[list[ApprovalAnswer]] = asyncio.get_running_loop().create_future()

        async def approver(requests: Sequence[ApprovalRequest]) -> list[ApprovalAnswer]:
            return await answer

        session = Session(model, [deploy], protect=Protection.policy(ask, approver=approver))
        seen: list[Event] = []
        async for event in session.stream("ship it"):
            seen.append(event)
            if isinstance(event, ApprovalRequested):  # one batch for the whole step
                assert [c.call_id for c in event.calls] == ["d1", "d2"]
                answer.set_result([ApprovalAnswer(False, "not prod"), ApprovalAnswer(True)])
        return seen

    events = asyncio.run(main())
    assert RAN == ["deploy:staging"]
    assert kinds(events).count("approval_requested") == 1
    order = kinds(events)
    assert order.index("model_step_finished") < order.index("approval_requested")
    assert order.index("approval_requested") < order.index("call_started")
    outputs = [e.output for e in events if isinstance(e, OutputRecorded)]
    assert [(o.call_id, o.is_error) for o in outputs] == [("d1", True), ("d2", False)]


# -- cancellation ---------------------------------------------------------------------------


def test_break_after_the_first_text_delta_runs_nothing() -> None:
    model = ScriptedModel(
        [reply("Let me add.", call("add", {"a": 1, "b": 2}, call_id="c1")), reply("3")],
        stream_chunk=2,
    )
    session = Session(model, [add])
    finished: list[Event] = []
    session.events.subscribe(finished.append, TurnFinished)

    async def main() -> tooldeck.RunResult:
        async with session.stream("1+2?") as events:
            async for event in events:
                if isinstance(event, TextDelta):
                    assert event.text == "Le"
                    break
        # the turn has ended by now: nothing of the cut-short step is in the transcript
        assert session.transcript == [UserMessage("1+2?")]
        assert len(finished) == 1 and isinstance(finished[0], TurnFinished)
        assert finished[0].stop_reason is StopReason.ERROR
        return await session.run("1+2, please")

    result = asyncio.run(main())
    assert RAN == []  # the call of the abandoned step never ran
    assert result.output == "3"
    # the next request carries a valid transcript: both user messages, nothing dangling
    second = model.requests[1].transcript
    assert second == [UserMessage("1+2?"), UserMessage("1+2, please")]


def test_a_dropped_stream_is_cancelled_and_the_next_turn_waits_for_it() -> None:
    @tool
    async def slow(x: int, ctx: ToolContext) -> str:
        """Wait for a long time."""
        RAN.append("slow started")
        ctx.emit({"waiting": True})
        try:
            await asyncio.Event().wait()
        finally:
            RAN.append("slow stopped")
        return "never"

    model = ScriptedModel(
        [reply(call("slow", {"x": 1}, call_id="c1"), call("add", {"a": 1, "b": 1})), reply("ok")]
    )
    session = Session(model, [slow, add])

    async def main() -> tooldeck.RunResult:
        async for event in session.stream("go"):  # no `async with`, no reference kept
            if isinstance(event, ToolEvent):  # the tool is running now
                break
        return await session.run("again")

    result = asyncio.run(main())
    assert result.output == "ok"
    assert RAN == ["slow started", "slow stopped"]
    outputs = [i for i in session.transcript if isinstance(i, ToolOutput)]
    assert [o.text for o in outputs] == [
        "slow was stopped: the turn was cancelled while it ran.",
        "Not executed: the turn was cancelled.",
    ]
    assert model.requests[1].transcript[:4] == session.transcript[:4]


def test_cancelling_the_consumer_during_a_tool_call_records_one_output_per_call() -> None:
    async def main() -> tuple[Session, ScriptedModel, list[Event]]:
        started = asyncio.Event()

        @tool(read_only=True)
        async def fetch(url: str) -> str:
            """Fetch a page (never answers)."""
            started.set()
            await asyncio.Event().wait()
            return "page"

        model = ScriptedModel(
            [
                reply(
                    call("fetch", {"url": "a"}, call_id="f1"),
                    call("fetch", {"url": "b"}, call_id="f2"),
                    call("add", {"a": 1, "b": 2}, call_id="a1"),
                ),
                reply("after"),
            ]
        )
        session = Session(model, [fetch, add])
        seen: list[Event] = []

        async def consume() -> None:
            async for event in session.stream("go"):
                seen.append(event)

        task = asyncio.create_task(consume())
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert task.cancelled()
        return session, model, seen

    session, model, seen = asyncio.run(main())
    outputs = [i for i in session.transcript if isinstance(i, ToolOutput)]
    assert [o.call_id for o in outputs] == ["f1", "f2", "a1"]  # exactly one each, in order
    assert [o.text for o in outputs] == [
        "fetch was stopped: the turn was cancelled while it ran.",
        "fetch was stopped: the turn was cancelled while it ran.",
        "3",  # it ran with them and finished: its result is kept, as in a cancelled run()
    ]
    assert RAN == ["add:1+2"]
    assert not any(isinstance(e, OutputRecorded) for e in seen)
    result = asyncio.run(session.run("and now?"))
    assert result.output == "after"
    assert model.requests[1].transcript[:5] == session.transcript[:5]


def test_a_consumer_that_raises_cancels_the_turn() -> None:
    model = two_steps()
    session = Session(model, [add, mul])

    async def main() -> None:
        with pytest.raises(KeyError):
            async with session.stream("go") as events:
                async for event in events:
                    if isinstance(event, ToolCallDone):
                        raise KeyError("the UI broke")
        assert len(model.requests) == 1 and RAN == []
        # the response was complete: it is recorded, and its calls have their outputs
        message = session.transcript[1]
        assert isinstance(message, AssistantMessage) and len(message.tool_calls) == 2
        outputs = [i for i in session.transcript if isinstance(i, ToolOutput)]
        assert [o.text for o in outputs] == ["Not executed: the turn was cancelled."] * 2

    asyncio.run(main())


def test_another_turn_while_a_stream_is_still_read_is_refused() -> None:
    session = Session(two_steps(), [add, mul])

    async def main() -> None:
        stream = session.stream("go")
        first = await stream.__anext__()
        assert isinstance(first, TurnStarted)
        with pytest.raises(RuntimeError, match="a streamed turn is still running"):
            await session.run("again")
        step = await stream.__anext__()
        assert isinstance(step, ModelStepStarted)
        await stream.aclose()
        assert stream.done
        await stream.aclose()  # twice is fine
        assert [e async for e in stream] == []

    asyncio.run(main())
    gc.collect()


# -- the CLI's live view --------------------------------------------------------------------


def test_turn_progress_shows_the_streamed_text_reasoning_and_calls_being_written() -> None:
    import io

    from rich.console import Console

    from tooldeck.cli.progress import TurnProgress

    thought = OpaqueItem("scripted", "scripted", "scripted", "reasoning", "First add, then mul.")
    first = reply("Working it out.", call("add", {"a": 2, "b": 3}, call_id="c_add"))
    model = ScriptedModel(
        [AssistantMessage(parts=[thought, *first.parts]), reply("It is 5.")], stream_chunk=4
    )
    session = Session(model, [add])
    console = Console(file=io.StringIO(), force_terminal=True, width=100)
    progress = TurnProgress(console).attach(session.events)
    frames: list[str] = []

    # what the live display shows after each event, drawn on a console of its own: a capture
    # of the live console would also catch whatever the Live's refresh thread printed then
    # (its last update, which may be an event older), so the frames raced that thread
    frame_console = Console(file=io.StringIO(), force_terminal=True, width=100)

    def draw(event: Event) -> None:
        with frame_console.capture() as capture:
            frame_console.print(progress.render())
        frames.append(capture.get())

    session.events.subscribe(draw)

    async def main() -> None:
        with progress:
            await session.stream("2+3?").wait()

    asyncio.run(main())
    assert any("thinking: First add, then mul." in f for f in frames)
    assert any("Working it" in f and "Working it out." not in f for f in frames)  # partial
    assert any("writing a call to add" in f for f in frames)
    assert "It is 5." in frames[-1] and "turn finished after 2 step(s)" in frames[-1]
    assert "Working it out." not in frames[-1]  # each step shows its own text


def test_turn_progress_prints_the_streamed_text_when_not_a_terminal() -> None:
    import io

    from rich.console import Console

    from tooldeck.cli.progress import TurnProgress

    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=100)
    session = Session(two_steps(chunk=2), [add, mul])
    with TurnProgress(console).attach(session.events):
        asyncio.run(session.stream("go").wait())
    lines = out.getvalue().splitlines()
    assert lines[0] == "Working it out."
    assert lines[-2:] == ["5 and 20.", "turn finished after 2 step(s): end_turn; 30 tokens"]
    assert sum(line.startswith("✓") for line in lines) == 2


# -- leaving at every point -----------------------------------------------------------------


def assert_valid(transcript: Sequence[object]) -> None:
    """Every call of every message is answered exactly once, before the next message."""
    open_calls: list[str] = []
    for item in transcript:
        if isinstance(item, AssistantMessage):
            assert not open_calls, f"calls {open_calls} have no output"
            open_calls = [c.call_id for c in item.tool_calls]
        elif isinstance(item, ToolOutput):
            assert item.call_id in open_calls, f"output for {item.call_id} answers no open call"
            open_calls.remove(item.call_id)
    assert not open_calls, f"calls {open_calls} have no output"


def _leaving_script() -> ScriptedModel:
    return ScriptedModel(
        [
            reply(
                "Two sums, then a note.",
                call("add", {"a": 1, "b": 2}, call_id="p1"),
                call("add", {"a": 3, "b": 4}, call_id="p2"),
                call("note", {"text": "sums done"}, call_id="s1"),
            ),
            reply("All done."),
            reply("After."),
        ],
        stream_chunk=6,
    )


@tool
async def note(text: str) -> str:
    """Write a note (sequential: it runs after the sums)."""
    await asyncio.sleep(0)
    RAN.append(f"note:{text}")
    return "noted"


@pytest.mark.parametrize("how", ["async with", "dropped", "cancelled"])
def test_leaving_at_every_event_keeps_the_transcript_valid(how: str) -> None:
    full = asyncio.run(collect(Session(_leaving_script(), [add, note]).stream("go")))
    count = len(full)
    assert count > 30
    for stop_at in range(count):
        RAN.clear()
        session = Session(_leaving_script(), [add, note])

        async def main(k: int = stop_at, s: Session = session) -> tuple[list[str], int]:
            seen = 0
            if how == "async with":
                async with s.stream("go") as events:
                    async for _ in events:
                        seen += 1
                        if seen > k:
                            break
            elif how == "dropped":
                async for _ in s.stream("go"):
                    seen += 1
                    if seen > k:
                        break
                await s._settle_stream()  # what the next turn does first
            else:
                reached = asyncio.Event()

                async def consume() -> None:
                    nonlocal seen
                    async for _ in s.stream("go"):
                        seen += 1
                        if seen > k:
                            reached.set()
                            await asyncio.Event().wait()  # cancelled here

                task = asyncio.create_task(consume())
                waiter = asyncio.create_task(reached.wait())
                await asyncio.wait([task, waiter], return_when=asyncio.FIRST_COMPLETED)
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                waiter.cancel()
            ran = list(RAN)
            assert_valid(s.transcript)
            before, after = list(s.transcript), ScriptedModel([reply("After.")])
            s.model = after  # the next turn only answers: no tool of it may run
            result = await s.run("next")
            assert result.output == "After."
            assert after.requests[0].transcript == [*before, UserMessage("next")]
            return ran, seen

        ran, _ = asyncio.run(main())
        assert ran == RAN, f"a tool ran after the stream was left at event {stop_at}"
        assert_valid(session.transcript)
        finished_first = next(i for i, e in enumerate(full) if isinstance(e, ModelStepFinished))
        if stop_at < finished_first:  # left before the first step's message was taken
            assert ran == []


def test_a_failed_turn_nobody_reads_to_the_end_leaves_no_unretrieved_task_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The loop logs a failed turn; asyncio must not add "Task exception was never
    retrieved" for a stream nobody read to its end."""

    def broken(request: ModelRequest) -> AssistantMessage:
        raise ConnectionError("down")

    # a log record would keep the exception (and so the task) alive past this test
    monkeypatch.setattr(logging.getLogger("tooldeck.loop"), "disabled", True)
    reported: list[str] = []

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(
            lambda loop, context: reported.append(str(context.get("message")))
        )
        session = Session(ScriptedModel(broken), [])
        stream = session.stream("go")
        assert isinstance(await stream.__anext__(), TurnStarted)
        await stream.__anext__()  # ModelStepStarted; the model fails right after
        await stream._live.stopped()
        assert stream.done
        del stream, session
        gc.collect()

    asyncio.run(main())
    gc.collect()
    assert reported == []
