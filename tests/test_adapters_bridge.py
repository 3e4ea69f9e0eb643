"""The part every adapter shares (``tooldeck.adapters._bridge``), under faults: the calls a
host starts together are one step, and every call gets its one outcome whatever happens to
the task that runs the step (cancelled, or a follower gone), the way a host's tasks meet it.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

import tooldeck
from tooldeck.adapters._bridge import Bridge, Outcome
from tooldeck.transcript import ToolCall


def sync(fn: Callable[[], Coroutine[Any, Any, None]]) -> Callable[[], None]:
    """The test run on a fresh event loop (as each host runs its own)."""

    @functools.wraps(fn)
    def run() -> None:
        asyncio.run(fn())

    return run


@tooldeck.tool(read_only=True)
async def slow(label: str) -> str:
    """Sleeps a long time."""
    await asyncio.sleep(60)
    return label


@tooldeck.tool(read_only=True)
def echo(text: str) -> str:
    """Returns its text."""
    return text


@sync
async def test_calls_started_together_are_one_step_each_with_its_outcome() -> None:
    bridge = Bridge([echo])
    calls = [ToolCall(f"c{i}", "echo", f'{{"text": "t{i}"}}') for i in range(3)]
    outcomes = await asyncio.gather(*(bridge.call(c) for c in calls))
    assert [(o.kind, o.text) for o in outcomes] == [("ok", "t0"), ("ok", "t1"), ("ok", "t2")]
    assert bridge.steps == 1


@sync
async def test_each_refusal_has_its_kind() -> None:
    bridge = Bridge([echo])
    calls = [
        ToolCall("a", "echo", '{"text": 1}'),
        ToolCall("b", "nope", "{}"),
        ToolCall("c", "echo", '{"text": "x"', incomplete=True),
        ToolCall("d", "echo", '{"text": "fine"}'),
    ]
    outcomes: list[Outcome] = await asyncio.gather(*(bridge.call(c) for c in calls))
    assert [o.kind for o in outcomes] == ["invalid", "unknown", "invalid", "ok"]
    assert outcomes[1].text.startswith("Unknown tool 'nope'. Available tools: echo")


@sync
async def test_two_calls_with_one_id_are_both_refused_never_run() -> None:
    bridge = Bridge([echo])
    a, b = ToolCall("same", "echo", '{"text": "a"}'), ToolCall("same", "echo", '{"text": "b"}')
    first, second = await asyncio.gather(bridge.call(a), bridge.call(b))
    assert first.kind == second.kind == "failed"
    assert "share the call id 'same'" in first.text


@sync
async def test_the_step_task_cancelled_gives_the_other_calls_their_outputs() -> None:
    bridge = Bridge([slow, echo])
    leader = asyncio.create_task(bridge.call(ToolCall("c1", "slow", '{"label": "one"}')))
    follower = asyncio.create_task(bridge.call(ToolCall("c2", "slow", '{"label": "two"}')))
    await asyncio.sleep(0.2)  # both are running in the step
    leader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await leader
    outcome = await asyncio.wait_for(follower, 5)  # never hangs
    assert outcome.kind == "failed"
    assert outcome.output.call_id == "c2"
    assert "slow" in outcome.text


@sync
async def test_a_follower_gone_leaves_the_step_running_to_its_end() -> None:
    bridge = Bridge([echo, slow])
    leader = asyncio.create_task(bridge.call(ToolCall("c1", "echo", '{"text": "kept"}')))
    follower = asyncio.create_task(bridge.call(ToolCall("c2", "echo", '{"text": "gone"}')))
    await asyncio.sleep(0)
    follower.cancel()
    assert (await leader).text == "kept"
    with pytest.raises(asyncio.CancelledError):
        await follower


@sync
async def test_a_later_step_is_a_new_step() -> None:
    bridge = Bridge([echo])
    one = await bridge.call(ToolCall("c1", "echo", '{"text": "1"}'))
    two = await bridge.call(ToolCall("c1", "echo", '{"text": "2"}'))  # an id may come again
    assert (one.text, two.text, bridge.steps) == ("1", "2", 2)


def test_protect_must_be_a_protection() -> None:
    with pytest.raises(TypeError, match="is not a Protection"):
        Bridge([echo], protect="WRITE")  # type: ignore[arg-type]
