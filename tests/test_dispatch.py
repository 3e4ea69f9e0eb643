"""The dispatcher: exactly one output per call, order, modes, timeouts, abort, policy hook."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from typing import Any

import pytest

from tooldeck import AbortSignal, ToolContext, ToolResult, Toolset, tool
from tooldeck.approvals import ApprovalAnswer, ApprovalRequest, PolicyDecision, not_answered
from tooldeck.dispatch import Dispatcher
from tooldeck.events import ApprovalRequested, CallFinished, CallStarted, Event, EventBus
from tooldeck.testing import call

LOG: list[str] = []


@tool(
    read_only=True,
    describe_activity=lambda p: f"Reading {p.key}",
    describe_completed_activity=lambda p, r: f"Read {p.key}",
)
async def read(key: str, delay: float = 0.0) -> str:
    """Read a value."""
    LOG.append(f"start read {key}")
    await asyncio.sleep(delay)
    LOG.append(f"end read {key}")
    return f"value of {key}"


@tool
async def write(key: str, delay: float = 0.0) -> str:
    """Write a value (sequential by default)."""
    LOG.append(f"start write {key}")
    await asyncio.sleep(delay)
    LOG.append(f"end write {key}")
    return f"wrote {key}"


@tool(read_only=True)
async def boom(message: str) -> str:
    """Raise."""
    raise ValueError(message)


@tool(read_only=True)
async def hang() -> str:
    """Never finishes unless cancelled."""
    await asyncio.sleep(3600)
    return "never"


@tool(read_only=True)
def finish() -> ToolResult:
    """End the turn."""
    return ToolResult("finished", terminate=True)


TOOLS = Toolset([read, write, boom, hang, finish])


def dispatch(calls: Sequence[Any], **kwargs: Any) -> Any:
    LOG.clear()

    async def main() -> Any:
        return await Dispatcher(TOOLS, **kwargs).dispatch(calls)

    return asyncio.run(main())


def test_one_output_per_call_in_model_order_whatever_happens() -> None:
    calls = [
        call("read", {"key": "a"}),
        call("reed", {"key": "b"}),  # unknown
        call("read", '{"key": 5'),  # malformed, cannot repair (cut in a number)
        call("boom", {"message": "kaput"}),
        call("read", '{"key": "c",}'),  # repaired
        call("write", {"key": "d"}, incomplete=True),
    ]
    result = dispatch(calls)
    assert [o.call_id for o in result.outputs] == [c.call_id for c in calls]
    texts = [o.text for o in result.outputs]
    assert texts[0] == "value of a" and not result.outputs[0].is_error
    assert texts[1].startswith("Unknown tool 'reed'. Available tools: read,")
    assert result.outputs[2].is_error and "number" in texts[2]
    assert result.outputs[3].is_error and texts[3] == "boom failed: ValueError: kaput"
    assert "Traceback" in result.outputs[3].result.details["traceback"]
    assert texts[4] == "value of c" and result.outputs[4].repairs == ("trailing_commas",)
    assert result.outputs[5].is_error and "cut off" in texts[5]
    assert "start write d" not in LOG


def test_exceptions_are_logged_with_traceback(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="tooldeck.dispatch"):
        dispatch([call("boom", {"message": "visible"})])
    record = next(r for r in caplog.records if "boom" in r.getMessage())
    assert record.exc_info is not None and "visible" in str(record.exc_info[1])


def test_parallel_reads_overlap_and_a_sequential_write_keeps_model_order() -> None:
    calls = [
        call("read", {"key": "a", "delay": 0.05}),
        call("read", {"key": "b", "delay": 0.01}),
        call("write", {"key": "w", "delay": 0.01}),
        call("read", {"key": "c"}),
    ]
    dispatch(calls)
    # a and b overlap; the write starts after both ended and ends before c starts
    assert LOG.index("start read b") < LOG.index("end read a")
    assert LOG.index("start write w") > max(LOG.index("end read a"), LOG.index("end read b"))
    assert LOG.index("end write w") < LOG.index("start read c")


def test_write_ordered_first_runs_first() -> None:
    dispatch([call("write", {"key": "w", "delay": 0.02}), call("read", {"key": "r"})])
    assert LOG == ["start write w", "end write w", "start read r", "end read r"]


def test_ten_parallel_sleeps_run_concurrently() -> None:
    calls = [call("read", {"key": str(i), "delay": 0.2}) for i in range(10)]

    async def main() -> float:
        loop = asyncio.get_running_loop()
        start = loop.time()
        await Dispatcher(TOOLS).dispatch(calls)
        return loop.time() - start

    assert asyncio.run(main()) < 1.0  # sequentially it would take 2 s


def test_timeout_gives_an_error_output_and_stops_the_tool() -> None:
    result = dispatch([call("hang"), call("read", {"key": "x"})], timeouts={"hang": 0.05})
    assert result.outputs[0].is_error and "timed out after 0.05s" in result.outputs[0].text
    assert result.outputs[1].text == "value of x"


def test_abort_reaches_running_tools_and_later_calls_are_not_run() -> None:
    seen: dict[str, Any] = {}

    @tool(read_only=True)
    async def watch(ctx: ToolContext) -> str:
        """Wait for the abort signal."""
        seen["reason"] = await ctx.signal.wait()
        await asyncio.sleep(3600)
        return "never"

    toolset = Toolset([watch, hang, write])

    async def main() -> Any:
        signal = AbortSignal()
        dispatcher = Dispatcher(toolset)
        task = asyncio.create_task(
            dispatcher.dispatch([call("watch"), call("hang"), call("write", {"key": "k"})], signal)
        )
        await asyncio.sleep(0.05)
        signal.abort("user pressed stop")
        return await task

    result = asyncio.run(main())
    assert seen["reason"] == "user pressed stop"
    assert [o.is_error for o in result.outputs] == [True, True, True]
    assert "user pressed stop" in result.outputs[0].text
    assert result.outputs[2].text.startswith("Not run: the turn was aborted")


def test_terminate_ends_after_the_current_batch() -> None:
    calls = [
        call("read", {"key": "a"}),
        call("finish"),
        call("write", {"key": "w"}),
        call("read", {"key": "z"}),
    ]
    result = dispatch(calls)
    assert result.terminated_by == "finish"
    assert result.outputs[0].text == "value of a" and result.outputs[1].text == "finished"
    assert result.outputs[2].text == "Not run: finish ended the turn."
    assert result.outputs[3].text == "Not run: finish ended the turn."
    assert "start write w" not in LOG


def test_policy_deny_and_batched_approvals() -> None:
    asked: list[list[ApprovalRequest]] = []

    def policy(t: Any, params: Any, c: Any) -> PolicyDecision:
        if t.name == "boom":
            return PolicyDecision("deny", "boom is disabled", level="organization")
        if t.name == "write":
            return PolicyDecision("ask", "writes need approval")
        return PolicyDecision("allow")

    async def approver(requests: Sequence[ApprovalRequest]) -> list[ApprovalAnswer]:
        asked.append(list(requests))
        return [
            ApprovalAnswer(True),
            ApprovalAnswer(False, "not that one"),
            ApprovalAnswer(True, arguments={"key": "edited"}),
        ]

    events: list[Event] = []
    bus = EventBus()
    bus.subscribe(events.append)
    calls = [
        call("write", {"key": "1"}),
        call("boom", {"message": "x"}),
        call("write", {"key": "2"}),
        call("write", {"key": "3"}),
    ]
    result = dispatch(calls, policy=policy, approver=approver, events=bus)
    assert len(asked) == 1 and [r.call.call_id for r in asked[0]] == [
        calls[0].call_id,
        calls[2].call_id,
        calls[3].call_id,
    ]
    texts = [o.text for o in result.outputs]
    assert texts == [
        "wrote 1",
        "Denied by policy: boom is disabled",
        "Denied by the user: not that one",
        "wrote edited",
    ]
    approvals = [e for e in events if isinstance(e, ApprovalRequested)]
    assert len(approvals) == 1 and len(approvals[0].calls) == 3


def test_a_deny_nobody_gave_is_not_told_as_the_users() -> None:
    async def approver(requests: Sequence[ApprovalRequest]) -> list[ApprovalAnswer]:
        return [
            not_answered("nobody approved the call within 5 s"),
            not_answered(""),
            ApprovalAnswer(False),
        ]

    calls = [call("write", {"key": str(n)}) for n in range(3)]
    policy = lambda t, p, c: PolicyDecision("ask", "writes need approval")  # noqa: E731
    result = dispatch(calls, policy=policy, approver=approver)
    assert [o.text for o in result.outputs] == [
        "Denied: nobody approved the call within 5 s.",
        "Denied: nobody approved the call.",
        "Denied by the user.",
    ]
    assert all(o.is_error for o in result.outputs) and LOG == []


def test_ask_without_approver_is_denied_never_run() -> None:
    result = dispatch(
        [call("write", {"key": "k"})], policy=lambda t, p, c: PolicyDecision("ask", "needs a human")
    )
    assert result.outputs[0].is_error and "no approver" in result.outputs[0].text
    assert LOG == []


def test_failing_policy_fails_closed() -> None:
    def policy(t: Any, p: Any, c: Any) -> PolicyDecision:
        raise RuntimeError("policy store offline")

    result = dispatch([call("read", {"key": "k"})], policy=policy)
    assert result.outputs[0].is_error and "policy check failed" in result.outputs[0].text
    assert LOG == []


def test_activity_events_carry_labels() -> None:
    events: list[Event] = []
    bus = EventBus()
    bus.subscribe(events.append, CallStarted, CallFinished)
    dispatch([call("read", {"key": "notes.md"})], events=bus)
    assert [type(e).__name__ for e in events] == ["CallStarted", "CallFinished"]
    assert events[0].label == "Reading notes.md"  # type: ignore[attr-defined]
    assert events[1].label == "Read notes.md"  # type: ignore[attr-defined]


def test_tool_emit_reaches_the_event_bus() -> None:
    @tool(read_only=True)
    async def progress(ctx: ToolContext) -> str:
        """Report progress."""
        ctx.emit({"done": 0.5})
        await asyncio.sleep(0.01)
        return "ok"

    payloads: list[Any] = []
    bus = EventBus()
    bus.subscribe(lambda e: payloads.append(e.payload), "tool_event")  # type: ignore[attr-defined]

    async def main() -> None:
        await Dispatcher(Toolset([progress]), events=bus).dispatch([call("progress")])
        await asyncio.sleep(0.01)

    asyncio.run(main())
    assert payloads == [{"done": 0.5}]


def test_unknown_tool_lists_closest_names_first() -> None:
    result = dispatch([call("wrte", {})])
    assert result.outputs[0].text.startswith("Unknown tool 'wrte'. Available tools: write")
    assert json.loads(json.dumps(result.outputs[0].text))


def test_a_reused_turn_signal_does_not_keep_finished_calls() -> None:
    signal = AbortSignal()

    async def main() -> None:
        dispatcher = Dispatcher(TOOLS)
        for _ in range(3):
            await dispatcher.dispatch([call("read", {"key": str(i)}) for i in range(5)], signal)

    asyncio.run(main())
    assert signal._callbacks == []
