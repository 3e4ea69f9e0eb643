"""Real numbers that are not ``float`` (a ``Fraction``, numpy scalars, a library's own
number type) are recorded as the JSON number they stand for, wherever they sit in a
result, through a real tool run by the dispatcher."""

from __future__ import annotations

import asyncio
import json
import math
import numbers
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tooldeck import Session, Tool, ToolContext, ToolResult, Toolset
from tooldeck.dispatch import Dispatcher
from tooldeck.errors import ResultEncodingError
from tooldeck.result import encode_json
from tooldeck.testing import ScriptedModel, call, reply
from tooldeck.transcript import ToolOutput

EMPTY = {"type": "object", "properties": {}}


class Measure:
    """A number type of its own (as a units or math library has): registered as
    ``numbers.Real``, not a ``float`` subclass, converts with ``float()``."""

    def __init__(self, value: float) -> None:
        self.value = value

    def __float__(self) -> float:
        return self.value

    def __repr__(self) -> str:
        return f"Measure({self.value!r})"


class Count:
    """An integral number type of its own (registered as ``numbers.Integral``)."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __int__(self) -> int:
        return self.value

    def __index__(self) -> int:
        return self.value

    def __float__(self) -> float:
        return float(self.value)  # inexact for big values: int() is what must be used

    def __repr__(self) -> str:
        return f"Count({self.value!r})"


class Refusing:
    """A number type whose own conversions raise what no standard type does."""

    def __float__(self) -> float:
        raise RuntimeError("no double for this one")

    def __int__(self) -> int:
        raise RuntimeError("no int for this one")


class RefusingCount(Refusing):
    pass


numbers.Real.register(Measure)
numbers.Integral.register(Count)
numbers.Real.register(Refusing)
numbers.Integral.register(RefusingCount)


def run_tool(value: Any) -> ToolOutput:
    """The output a real tool returning ``value`` gets from the dispatcher."""

    def give(params: Any, ctx: ToolContext) -> Any:
        return value

    tool = Tool.from_schema(name="give", description="give", json_schema=EMPTY, execute=give)

    async def main() -> list[ToolOutput]:
        return (await Dispatcher(Toolset([tool])).dispatch([call("give")])).outputs

    (output,) = asyncio.run(main())
    return output


def plain(value: Any) -> Any:
    """What ``value`` stands for in JSON: integral numbers exact, other reals as doubles."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, bool | str) or value is None:
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    return float(value)


def test_a_fraction_and_a_registered_number_type_nested_in_a_result_are_json_numbers() -> None:
    big = 2**70 + 1  # not a double: an integral value stays exact
    value = {
        "ratio": Fraction(1, 3),
        "whole": Fraction(6, 3),
        "measures": [Measure(2.5), {"deep": [Measure(-0.1), Count(big)]}],
        "flag": True,
        "plain": 1.25,
    }
    output = run_tool(value)
    assert not output.is_error, output.text
    assert output.text == (
        '{"ratio":0.3333333333333333,"whole":2.0,"measures":[2.5,{"deep":[-0.1,'
        f'{big}]}}],"flag":true,"plain":1.25}}'
    )
    assert json.loads(output.text)["measures"][1]["deep"][1] == big
    # the same values as details: the private JSON copy holds the numbers
    result = ToolResult("ok", details=value)
    assert result.details == plain(value)


def test_numpy_scalars_are_json_numbers() -> None:
    np = pytest.importorskip("numpy")
    value = [np.float32(1.5), np.float16(0.1), np.int64(-3), np.uint64(2**64 - 1)]
    output = run_tool({"values": value})
    assert not output.is_error, output.text
    assert json.loads(output.text) == {"values": [1.5, float(np.float16(0.1)), -3, 2**64 - 1]}


def test_a_real_number_with_no_finite_double_is_treated_as_before() -> None:
    # non-finite: not a JSON number, so the call's output says it cannot be recorded
    output = run_tool({"x": Measure(math.inf)})
    assert output.is_error and "ran, but its result cannot be recorded" in output.text
    assert "Measure value cannot be encoded" in output.text
    # a Fraction beyond the double range: pydantic's text, as before
    huge = Fraction(10**400, 3)
    assert run_tool([huge]).text == json.dumps([str(huge)])


@pytest.mark.parametrize("number", [Refusing(), RefusingCount()], ids=["real", "integral"])
def test_a_number_whose_conversion_raises_anything_cannot_be_recorded(number: Any) -> None:
    # float() / int() raising RuntimeError: the call's one "cannot be recorded" output, not
    # the tool's failure, and ToolResult raises its documented ResultEncodingError
    output = run_tool({"x": [number]})
    assert output.is_error, output.text
    assert "give ran, but its result cannot be recorded" in output.text
    assert output.result.details["exception"] == "ResultEncodingError"
    with pytest.raises(ResultEncodingError, match="value cannot be encoded"):
        ToolResult("ok", details={"x": number})


def test_the_session_records_such_numbers_and_the_model_is_sent_them() -> None:
    def ratio(params: Any, ctx: ToolContext) -> Any:
        return {"share": Fraction(3, 4), "n": Count(7)}

    tool = Tool.from_schema(name="ratio", description="ratio", json_schema=EMPTY, execute=ratio)
    model = ScriptedModel([reply(call("ratio")), reply("done")])
    session = Session(model, [tool])
    asyncio.run(session.run("go"))
    (output,) = [i for i in session.transcript if isinstance(i, ToolOutput)]
    assert (output.is_error, output.text) == (False, '{"share":0.75,"n":7}')
    sent = [i for i in model.requests[1].transcript if isinstance(i, ToolOutput)]
    assert sent[0].text == '{"share":0.75,"n":7}'


finite = st.floats(allow_nan=False, allow_infinity=False)
reals: st.SearchStrategy[Any] = st.one_of(
    st.fractions(max_denominator=10**30).filter(lambda f: math.isfinite(float(f))),
    finite.map(Measure),
    st.integers().map(Count),
    st.integers(),
    finite,
    st.booleans(),
)
values: st.SearchStrategy[Any] = st.recursive(
    reals | st.text(max_size=5) | st.none(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=12,
)


@settings(max_examples=60, deadline=None)
@given(values)
def test_any_nesting_of_real_numbers_is_recorded_as_the_numbers_they_stand_for(
    value: Any,
) -> None:
    output = run_tool({"v": value})
    assert not output.is_error, output.text
    assert output.text == encode_json({"v": plain(value)})
    assert json.loads(output.text) == {"v": plain(value)}
