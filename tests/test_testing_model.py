"""``tooldeck.testing``: the smallest valid arguments made from a schema, and ``SchemaModel``,
which calls every offered tool once with them and then answers (a smoke test of a tool set).

The generator is checked the way a tool checks its arguments: every value it makes goes
through ``validate_arguments`` of a real tool (an external schema compiled by tooldeck, or
a Pydantic model from a typed function), for schemas hypothesis generates, for the 300
real tool definitions of the demo catalog and the built-in tools, and for typed functions
of many parameter types.
"""

from __future__ import annotations

import datetime
import decimal
import enum
import json
import uuid
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

import tooldeck
from tooldeck import Session, validate_arguments
from tooldeck.testing import SchemaModel, ScriptedModel, schema_arguments
from tooldeck.testing.patterns import sample_pattern

ROOT = Path(__file__).resolve().parents[1]


def _tool(schema: dict[str, Any], name: str = "t") -> tooldeck.Tool:
    return tooldeck.Tool.from_schema(schema, lambda p, ctx: p, name=name, description="A tool.")


# -- schemas hypothesis makes -------------------------------------------------------------

PATTERNS = [
    r"^[a-z]+$",
    r"^\d{3}-\d{4}$",
    r"^[A-Z]{2}[0-9]{2,4}$",
    r"^(foo|bar)-[a-f0-9]{8}$",
    r"abc",
    r"^\w+@\w+\.com$",
    r"^[^\s]+$",
    r"^v\d+(\.\d+){2}$",
    r"^#[0-9a-fA-F]{6}$",
]
FORMATS = ["date-time", "date", "email", "uri", "uuid", "ipv4", "ipv6", "hostname"]


@st.composite
def integers(draw: st.DrawFn) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "integer"}
    low = draw(st.none() | st.integers(-1000, 1000))
    if low is not None:
        schema[draw(st.sampled_from(["minimum", "exclusiveMinimum"]))] = low
    if draw(st.booleans()):
        top = (low if low is not None else -1000) + draw(st.integers(12, 500))
        schema[draw(st.sampled_from(["maximum", "exclusiveMaximum"]))] = top
    if draw(st.booleans()):
        schema["multipleOf"] = draw(st.sampled_from([2, 3, 5, 10]))
    return schema


@st.composite
def numbers(draw: st.DrawFn) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "number"}
    low = draw(st.none() | st.floats(-1e6, 1e6, allow_nan=False))
    if low is not None:
        schema[draw(st.sampled_from(["minimum", "exclusiveMinimum"]))] = low
    if draw(st.booleans()):
        top = (low if low is not None else 0.0) + draw(st.floats(1.0, 1e6))
        schema[draw(st.sampled_from(["maximum", "exclusiveMaximum"]))] = top
    if draw(st.booleans()):
        schema["multipleOf"] = draw(st.sampled_from([0.5, 0.25, 2, 7]))
    return schema


@st.composite
def strings(draw: st.DrawFn) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    which = draw(st.sampled_from(["plain", "pattern", "format"]))
    if which == "pattern":
        schema["pattern"] = draw(st.sampled_from(PATTERNS))
    elif which == "format":
        schema["format"] = draw(st.sampled_from(FORMATS))
    else:
        low = draw(st.integers(0, 12))
        schema["minLength"] = low
        if draw(st.booleans()):
            schema["maxLength"] = low + draw(st.integers(0, 5))
    return schema


json_scalars = st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=5)
leaves = st.one_of(
    integers(),
    numbers(),
    strings(),
    st.just({"type": "boolean"}),
    st.just({"type": "null"}),
    st.lists(json_scalars, min_size=1, max_size=4, unique_by=json.dumps).map(lambda v: {"enum": v}),
    json_scalars.map(lambda v: {"const": v}),
    st.just({}),
)


def _unique_safe(items: dict[str, Any]) -> bool:
    return items.get("type") in ("integer", "string") and "const" not in items


def _extend(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    names = st.text("abcdefgh_", min_size=1, max_size=6)

    @st.composite
    def objects(draw: st.DrawFn) -> dict[str, Any]:
        props = draw(st.dictionaries(names, children, max_size=4))
        required = draw(st.lists(st.sampled_from(sorted(props)), unique=True)) if props else []
        schema: dict[str, Any] = {"type": "object", "properties": props, "required": required}
        if draw(st.booleans()):
            schema["additionalProperties"] = False
        return schema

    @st.composite
    def arrays(draw: st.DrawFn) -> dict[str, Any]:
        items = draw(children)
        low = draw(st.integers(0, 3))
        schema: dict[str, Any] = {"type": "array", "items": items, "minItems": low}
        if draw(st.booleans()):
            schema["maxItems"] = low + draw(st.integers(0, 3))
        if _unique_safe(items) and "pattern" not in items and draw(st.booleans()):
            schema["uniqueItems"] = True
        return schema

    @st.composite
    def choices(draw: st.DrawFn) -> dict[str, Any]:
        branches = draw(st.lists(children, min_size=1, max_size=3))
        return {draw(st.sampled_from(["anyOf", "oneOf"])): branches}

    @st.composite
    def nullable(draw: st.DrawFn) -> dict[str, Any]:
        child = draw(strings() | integers())
        return {**child, "type": [child["type"], "null"]}

    return st.one_of(objects(), arrays(), choices(), nullable())


schemas = st.recursive(leaves, _extend, max_leaves=12)


@st.composite
def parameter_schemas(draw: st.DrawFn) -> dict[str, Any]:
    props = draw(st.dictionaries(st.text("abcdefgh", min_size=1, max_size=6), schemas, max_size=5))
    required = draw(st.lists(st.sampled_from(sorted(props)), unique=True)) if props else []
    return {"type": "object", "properties": props, "required": required}


def _satisfiable(schema: dict[str, Any]) -> bool:
    """Whether a generated schema accepts some value (oneOf branches that overlap, or an
    enum of only nulls in a oneOf, may accept none): checked by the generator's own
    answer or its error; the property below asserts on the satisfiable ones."""
    text = json.dumps(schema)
    return "oneOf" not in text


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parameter_schemas())
def test_generated_arguments_validate_against_the_tools_schema(schema: dict[str, Any]) -> None:
    tool = _tool(schema)
    try:
        arguments = schema_arguments(tool.schema)
    except ValueError:
        if _satisfiable(schema):
            raise
        return
    validated = validate_arguments(tool, json.dumps(arguments))
    assert validated.repairs == ()  # valid as made: nothing to repair


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(PATTERNS), st.integers(0, 20), st.integers(0, 30))
def test_a_sampled_pattern_matches_its_pattern(pattern: str, low: int, nth: int) -> None:
    import re

    found = sample_pattern(pattern, low, nth)
    assert found, pattern
    assert all(re.search(pattern, text) for text in found)


# -- real tool definitions ----------------------------------------------------------------


def _catalog() -> list[dict[str, Any]]:
    data = json.loads((ROOT / "src" / "tooldeck" / "data" / "demo_catalog.json").read_text())
    tools: list[dict[str, Any]] = data["tools"]
    return tools


def test_every_tool_of_the_demo_catalog_gets_valid_arguments() -> None:
    for entry in _catalog():
        tool = _tool(entry["input_schema"], entry["name"])
        arguments = schema_arguments(tool.schema)
        validate_arguments(tool, json.dumps(arguments))


def test_every_built_in_tool_gets_valid_arguments(tmp_path: Path) -> None:
    from tooldeck.builtin import load_builtin_registry

    ctx = tooldeck.TurnContext("s", home=tmp_path, web_provider="fetch", can_create_jobs=True)
    tools = load_builtin_registry().tools_for(ctx)
    assert len(tools) > 5
    for tool in tools:
        validate_arguments(tool, json.dumps(schema_arguments(tool.schema)))


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Address(BaseModel):
    street: str = Field(min_length=3)
    number: int = Field(gt=0)
    tags: list[str] = Field(default_factory=list)


@tooldeck.tool
def everything(
    when: datetime.datetime,
    day: datetime.date,
    span: datetime.timedelta,
    ident: uuid.UUID,
    amount: decimal.Decimal,
    colour: Colour,
    mode: Literal["fast", "slow"],
    address: Address,
    counts: dict[str, int],
    pair: tuple[int, str],
    scores: Annotated[list[float], Field(min_length=2)],
    code: Annotated[str, Field(pattern=r"^[A-Z]{3}-\d{2}$")],
    level: Annotated[int, Field(ge=10, le=20, multiple_of=5)],
    maybe: str | None,
    optional: int = 3,
) -> str:
    """Takes one of everything."""
    return "ok"


def test_a_typed_function_with_many_parameter_types_gets_valid_arguments() -> None:
    arguments = schema_arguments(everything.schema)
    assert set(arguments) == set(everything.schema["required"])  # only the required ones
    validated = validate_arguments(everything, json.dumps(arguments))
    assert validated.params.level in (10, 15, 20) and validated.params.address.number > 0


def test_a_schema_no_value_satisfies_is_one_line_naming_the_place() -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 5, "maximum": 3}},
        "required": ["n"],
    }
    with pytest.raises(ValueError, match=r"^\$\.n: no number found"):
        schema_arguments(schema)


# -- SchemaModel in a session --------------------------------------------------------------


@tooldeck.tool(read_only=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tooldeck.tool(read_only=True)
def shout(text: Annotated[str, Field(min_length=2)]) -> str:
    """Upper-case a text."""
    return text.upper()


@tooldeck.tool
def broken(x: int) -> str:
    """Always fails."""
    raise RuntimeError("it broke")


def test_schema_model_calls_every_tool_once_then_answers_what_each_returned() -> None:
    model = SchemaModel()
    result = Session(model, [add, shout, broken]).run_sync("smoke")
    assert json.loads(result.output) == {
        "add": "0",
        "shout": "AA",
        "broken": "broken failed: RuntimeError: it broke",
    }
    first, second = model.requests
    calls = [o for o in result.items if isinstance(o, tooldeck.ToolOutput)]
    assert [c.name for c in calls] == ["add", "shout", "broken"]  # one step, every tool once
    assert len(model.requests) == 2 and len(first.tools) == 3 and second.transcript


def test_schema_model_calls_only_the_tools_named_and_says_the_text_given() -> None:
    model = SchemaModel(tools=["shout"], text="done")
    result = Session(model, [add, shout]).run_sync("smoke")
    assert result.output == "done"
    assert [o.name for o in result.tool_outputs] == ["shout"]


def test_schema_model_streams_like_a_model() -> None:
    async def main() -> list[str]:
        kinds: list[str] = []
        stream = Session(SchemaModel(), [add]).stream("smoke")
        async for event in stream:
            kinds.append(type(event).__name__)
        assert stream.result is not None and json.loads(stream.result.output) == {"add": "0"}
        return kinds

    import asyncio

    assert "CallFinished" in asyncio.run(main())


def test_a_tool_no_arguments_satisfy_is_named() -> None:
    impossible = _tool(
        {"type": "object", "properties": {"n": {"enum": []}}, "required": ["n"]}, "never"
    )
    with pytest.raises(ValueError, match="tool never: "):
        Session(SchemaModel(), [impossible]).run_sync("smoke")


def test_scripted_model_is_exported_from_tooldeck_testing() -> None:
    from tooldeck.testing import ScriptedModel as Implementation

    assert ScriptedModel is Implementation
