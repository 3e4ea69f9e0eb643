"""Calls run in the step's own task: what a tool binds to its task stays valid.

The dispatcher runs a tool's first step at once and arms the timeout and the abort only
once the tool waits (see ``Dispatcher._run``); these tests pin what that must not break.
"""

from __future__ import annotations

import asyncio
from typing import Any

import anyio

from tooldeck import AbortSignal, Dispatcher, Tool, ToolContext, Toolset
from tooldeck.transcript import ToolCall


def schema_tool(name: str, fn: Any, **options: Any) -> Tool:
    schema = {"type": "object", "properties": {}}
    return Tool.from_schema(name=name, description=name, json_schema=schema, execute=fn, **options)


def dispatch(
    *tools: Tool, timeout: float | None = 300.0, signal: AbortSignal | None = None
) -> list[str]:
    async def main() -> list[str]:
        dispatcher = Dispatcher(Toolset(tools), timeout=timeout)
        calls = [ToolCall(f"c{i}", t.name, "{}") for i, t in enumerate(tools)]
        result = await dispatcher.dispatch(calls, signal)
        await asyncio.sleep(0.01)  # a stray cancellation of this task would land here
        return [o.text for o in result.outputs]

    return asyncio.run(main())


def test_asyncio_timeout_and_anyio_scopes_entered_in_the_first_step_work() -> None:
    async def with_timeout(p: Any, ctx: ToolContext) -> str:
        async with asyncio.timeout(5):
            await asyncio.sleep(0.01)
        return "asyncio ok"

    async def with_anyio(p: Any, ctx: ToolContext) -> str:
        with anyio.fail_after(5):
            await anyio.sleep(0.01)
        with anyio.move_on_after(0.01):
            await anyio.sleep(5)
        return "anyio ok"

    async def own_timeout(p: Any, ctx: ToolContext) -> str:
        try:
            async with asyncio.timeout(0.01):
                await asyncio.sleep(5)
        except TimeoutError:
            return "its own timeout fired"
        return "no"

    assert dispatch(
        schema_tool("a", with_timeout), schema_tool("b", with_anyio), schema_tool("c", own_timeout)
    ) == ["asyncio ok", "anyio ok", "its own timeout fired"]


def test_a_tool_that_finishes_in_its_first_step_needs_no_timer() -> None:
    async def instant(p: Any, ctx: ToolContext) -> str:
        return "done"

    async def main() -> int:
        loop = asyncio.get_running_loop()
        dispatcher = Dispatcher(Toolset([schema_tool("i", instant)]))
        before = len(loop._scheduled)  # type: ignore[attr-defined]
        await dispatcher.dispatch([ToolCall("a", "i", "{}")])
        return len(loop._scheduled) - before  # type: ignore[attr-defined]

    assert asyncio.run(main()) == 0


def test_the_timeout_counts_from_the_start_of_the_call() -> None:
    import time

    async def busy_then_wait(p: Any, ctx: ToolContext) -> str:
        time.sleep(0.2)  # noqa: ASYNC251 - a first step longer than the whole timeout
        await asyncio.sleep(30)
        return "never"

    assert dispatch(schema_tool("b", busy_then_wait), timeout=0.1) == [
        "b was stopped: timed out after 0.1s."
    ]


def test_the_call_signal_follows_the_turn_and_its_own_timeout() -> None:
    seen: dict[str, Any] = {}

    async def watcher(p: Any, ctx: ToolContext) -> str:
        seen["before"] = ctx.signal.aborted
        seen["reason"] = await ctx.signal.wait()
        await asyncio.sleep(30)
        return "never"

    texts = dispatch(schema_tool("w", watcher), timeout=0.05)
    assert seen == {"before": False, "reason": "timed out after 0.05s"}
    assert texts == ["w was stopped: timed out after 0.05s."]

    turn = AbortSignal()
    turn.abort("the user stopped it")
    child = turn.child()
    assert child.aborted and child.reason == "the user stopped it"
    child.detach()
    assert child.aborted  # what it saw stays


def test_an_unlinked_child_signal_costs_the_parent_nothing() -> None:
    turn = AbortSignal()
    children = [turn.child() for _ in range(1_000)]
    assert turn._callbacks == []
    for child in children:
        child.detach()
    linked = turn.child()
    linked.on_abort(lambda reason: None)
    assert len(turn._callbacks) == 1
    linked.detach()
    assert turn._callbacks == []
