"""Property: for any scripted batch, every call id gets exactly one output, in order,
and no task is left running once the dispatcher returns."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tooldeck import AbortSignal, Toolset, tool
from tooldeck.approvals import PolicyDecision
from tooldeck.dispatch import Dispatcher
from tooldeck.testing import call


@tool(read_only=True)
async def fast(n: int) -> int:
    """Return n."""
    await asyncio.sleep(0)
    return n


@tool
async def slow_write(n: int) -> int:
    """Sequential, takes a moment."""
    await asyncio.sleep(0.002)
    return n


@tool(read_only=True)
async def crash(n: int) -> int:
    """Always raises."""
    raise RuntimeError(f"crash {n}")


@tool(read_only=True)
async def stuck(n: int) -> int:
    """Hangs until cancelled."""
    await asyncio.sleep(3600)
    return n


@tool(read_only=True)
async def stubborn(n: int) -> int:
    """Swallows the first cancellation, then stops."""
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        await asyncio.sleep(0.001)
    return n


TOOLS = Toolset([fast, slow_write, crash, stuck, stubborn])
KINDS = [
    "fast",
    "slow_write",
    "crash",
    "stuck",
    "stubborn",
    "malformed",
    "unknown",
    "incomplete",
    "denied",
]


def make_call(kind: str, n: int) -> Any:
    if kind == "malformed":
        return call("fast", '{"n": ' + str(n))
    if kind == "unknown":
        return call("nope", {"n": n})
    if kind == "incomplete":
        return call("fast", {"n": n}, incomplete=True)
    if kind == "denied":
        return call("slow_write", {"n": -1})
    return call(kind, {"n": n})


def policy(t: Any, params: Any, c: Any) -> PolicyDecision:
    return (
        PolicyDecision("deny", "negative")
        if getattr(params, "n", 0) < 0
        else (PolicyDecision("allow"))
    )


@settings(max_examples=60)
@given(
    kinds=st.lists(st.sampled_from(KINDS), min_size=1, max_size=8),
    abort_after=st.one_of(st.none(), st.floats(min_value=0.0, max_value=0.02)),
)
def test_exactly_one_output_per_call_in_order(kinds: list[str], abort_after: float | None) -> None:
    calls = [make_call(k, i) for i, k in enumerate(kinds)]

    async def main() -> list[Any]:
        signal = AbortSignal()
        dispatcher = Dispatcher(TOOLS, policy=policy, timeout=0.03)
        if abort_after is not None:
            asyncio.get_running_loop().call_later(abort_after, signal.abort, "stop")
        result = await dispatcher.dispatch(calls, signal)
        leftover = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        assert leftover == [], leftover
        return result.outputs

    outputs = asyncio.run(main())
    assert [o.call_id for o in outputs] == [c.call_id for c in calls]
    for kind, output in zip(kinds, outputs, strict=True):
        if kind in ("crash", "stuck", "stubborn", "malformed", "unknown", "incomplete", "denied"):
            assert output.is_error, (kind, output.text)
        assert output.text
