"""What the dispatcher makes only when it is needed, and the guarantees that must hold anyway.

A tool made from a function without a ``ToolContext`` parameter gets no context and no
abort signal of its own (nothing of them could be read); a call of it that waits still
has its own deadline and abort, which never reach the turn; a result hook still sees a
context. ``ToolResult.wrap`` builds a plain value's result without the generic
constructor: it must be the very result that constructor makes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tooldeck import AbortSignal, ToolContext, ToolResult, Toolset, tool
from tooldeck.dispatch import Dispatcher
from tooldeck.providers.scripted import call
from tooldeck.result import ImagePart, JsonPart, TextPart
from tooldeck.transcript import ToolCall
from tooldeck.transcript import ToolOutput as Output


@tool(read_only=True)
async def hang() -> str:
    """Never finishes unless stopped."""
    await asyncio.sleep(3600)
    return "never"


@tool
async def write(key: str) -> str:
    """Write a value (sequential)."""
    return f"wrote {key}"


@tool(read_only=True)
def add(a: int, b: int) -> int:
    """Add (in a worker thread)."""
    return a + b


def test_a_timed_out_tool_without_context_stops_itself_not_the_turn() -> None:
    signal = AbortSignal()

    async def main() -> Any:
        dispatcher = Dispatcher(Toolset([hang, write]), timeouts={"hang": 0.05})
        return await dispatcher.dispatch([call("hang"), call("write", {"key": "k"})], signal)

    result = asyncio.run(main())
    assert result.outputs[0].is_error
    assert "hang was stopped: timed out after 0.05s" in result.outputs[0].text
    assert result.outputs[1].text == "wrote k"  # the sequential call after it ran
    assert not signal.aborted
    assert signal._callbacks == []  # the call's own signal was let go


def test_the_turn_abort_stops_a_waiting_tool_without_context() -> None:
    async def main() -> tuple[Any, AbortSignal]:
        signal = AbortSignal()
        task = asyncio.create_task(
            Dispatcher(Toolset([hang, write])).dispatch(
                [call("hang"), call("write", {"key": "k"})], signal
            )
        )
        await asyncio.sleep(0.05)
        signal.abort("user pressed stop")
        return await task, signal

    result, signal = asyncio.run(main())
    assert result.outputs[0].text == "hang was stopped: user pressed stop."
    assert result.outputs[1].text.startswith("Not run: the turn was aborted")
    assert signal._callbacks == []


def test_an_aborted_turn_runs_no_tool_without_context() -> None:
    ran: list[str] = []

    @tool
    async def note() -> str:
        """Record that it ran."""
        ran.append("note")
        return "ran"

    signal = AbortSignal()
    signal.abort("stop")
    result = asyncio.run(Dispatcher(Toolset([note])).dispatch([call("note")], signal))
    assert ran == []
    assert result.outputs[0].text == "Not run: the turn was aborted (stop)."


def test_result_hooks_see_a_context_for_a_tool_that_takes_none() -> None:
    seen: list[ToolContext] = []

    def hook(c: ToolCall, t: Any, result: ToolResult, ctx: ToolContext) -> ToolResult:
        seen.append(ctx)
        return dataclasses.replace(result, content=result.text() + "!")

    toolset = Toolset([add, write])
    dispatcher = Dispatcher(toolset, session_id="s1", result_hooks=[hook])
    calls = [call("add", {"a": 1, "b": 2}, call_id="c1"), call("write", {"key": "k"})]
    result = asyncio.run(dispatcher.dispatch(calls))
    assert [o.text for o in result.outputs] == ["3!", "wrote k!"]
    ctx = seen[0]
    assert (ctx.call_id, ctx.tool_name, ctx.session_id) == ("c1", "add", "s1")
    assert ctx.toolset is toolset
    assert ctx.protection is not None and ctx.protection.result_hooks == (hook,)
    assert not ctx.signal.aborted


def test_a_tool_that_takes_a_context_still_gets_the_calls() -> None:
    seen: list[ToolContext] = []

    @tool
    async def peek(ctx: ToolContext) -> str:
        """Look at the context."""
        seen.append(ctx)
        return ctx.call_id

    signal = AbortSignal()
    result = asyncio.run(
        Dispatcher(Toolset([peek]), session_id="s").dispatch([call("peek", call_id="p1")], signal)
    )
    assert result.outputs[0].text == "p1"
    assert (seen[0].tool_name, seen[0].session_id) == ("peek", "s")
    signal.abort("later")
    assert not seen[0].signal.aborted  # the call's signal was detached when it ended


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


def _generic(value: Any) -> ToolResult:
    """What the constructor makes for ``value`` (the documented meaning of ``wrap``)."""
    if isinstance(value, str):
        return ToolResult(value)
    return ToolResult((JsonPart(value),))


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_wrap_makes_what_the_constructor_makes(value: Any) -> None:
    wrapped = ToolResult.wrap(value)
    made = _generic(value)
    assert wrapped == made
    assert hash(wrapped) == hash(made)
    assert wrapped.text() == made.text()
    assert repr(wrapped) == repr(made)
    assert type(wrapped.content) is type(made.content)
    assert dataclasses.asdict(wrapped) == dataclasses.asdict(made)
    with pytest.raises(dataclasses.FrozenInstanceError):
        wrapped.content = "changed"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del wrapped.is_error  # type: ignore[misc]
    replaced = dataclasses.replace(wrapped, is_error=True)
    assert replaced.is_error and replaced.text() == wrapped.text() and not wrapped.is_error


def test_wrap_of_the_special_values() -> None:
    assert ToolResult.wrap("a\ud800b").text() == "a\ufffdb"  # no provider takes a lone surrogate
    assert ToolResult.wrap(None).text() == "null"
    assert ToolResult.wrap(True).text() == "true"
    assert ToolResult.wrap(10**30).text() == str(10**30)
    assert ToolResult.wrap(-0.0).text() == "-0.0"
    assert ToolResult.wrap([]).text() == "[]"
    parts = [TextPart("a"), ImagePart(url="https://example.com/i.png")]
    assert ToolResult.wrap(parts).content == tuple(parts)
    assert ToolResult.wrap(math.pi) == ToolResult((JsonPart(math.pi),))
    same = ToolResult("x")
    assert ToolResult.wrap(same) is same


def test_a_wrapped_result_is_one_output_that_nothing_can_change() -> None:
    values: dict[str, Any] = {"a": [1, 2]}

    @tool
    async def leak() -> dict[str, Any]:
        """Return a value it keeps."""
        return values

    result = asyncio.run(Dispatcher(Toolset([leak])).dispatch([call("leak")]))
    values["a"].append(3)  # the tool's object changes afterwards
    (output,) = result.outputs
    assert isinstance(output, Output)
    assert output.text == '{"a":[1,2]}'
    assert output.result.content[0].value == {"a": [1, 2]}  # type: ignore[union-attr]


raw_arguments = st.one_of(
    st.builds(
        lambda d: __import__("json").dumps(d),
        st.dictionaries(
            st.sampled_from(["a", "b", "c", "note"]),
            st.none() | st.integers() | st.text(max_size=5) | st.booleans(),
            max_size=4,
        ),
    ),
    st.text(max_size=30),
    st.sampled_from(['{"a": 1, "b": 2', "{'a': 1, 'b': 2}", '"{\\"a\\": 1, \\"b\\": 2}"', ""]),
)


@settings(max_examples=300, deadline=None)
@given(raw_arguments)
def test_the_dispatchers_check_is_validate_arguments(raw: str) -> None:
    from pydantic import BaseModel, field_validator

    from tooldeck import Tool
    from tooldeck.arguments import checked_arguments, validate_arguments
    from tooldeck.errors import ArgumentError

    runs: list[int] = []

    class Params(BaseModel):
        a: int
        b: int = 0
        note: str | None = None

        @field_validator("a")
        @classmethod
        def counted(cls, v: int) -> int:
            runs.append(v)
            return v

    def outcome(check: Any) -> tuple[Any, ...]:
        tool_ = Tool.from_model(Params, lambda p, c: "x", name="t", description="d")
        validate_arguments(tool_, '{"a": 1}')  # its checks are built on the first call
        runs.clear()
        try:
            got = check(tool_, raw)
        except ArgumentError as exc:
            return ("error", exc.model_message, tuple(exc.problems), tuple(exc.repairs), *runs)
        params, repairs = got if isinstance(got, tuple) else (got.params, got.repairs)
        return ("ok", params, repairs, *runs)

    assert outcome(checked_arguments) == outcome(validate_arguments)


def test_a_wrapped_result_pickles_and_copies_as_the_constructors() -> None:
    import copy
    import pickle

    for value in (3, "text", {"a": [1, None]}, None):
        wrapped, made = ToolResult.wrap(value), _generic(value)
        for twin in (
            pickle.loads(pickle.dumps(wrapped)),
            copy.copy(wrapped),
            copy.deepcopy(wrapped),
        ):
            assert twin == made and twin.text() == made.text()
            assert (twin.details, twin.events, twin.is_error, twin.terminate) == (
                None,
                (),
                False,
                False,
            )
