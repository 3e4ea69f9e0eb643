"""What a function or Pydantic tool accepts is what its advertised schema says.

The schema a model is shown is the contract: ``"3"`` is not an integer, ``0`` and
``"no"`` are not booleans, and a tool must not take them although pydantic's lax mode
would. The property test builds random ``@tool`` functions from a set of annotation
kinds, sends random JSON values, and compares acceptance with jsonschema_rs on the
advertised schema; the only differences allowed are the documented ones (README, "The
argument contract"), each checked to be exactly that.
"""

from __future__ import annotations

import datetime
import decimal
import enum
import inspect
import json
import math
import uuid
from typing import Annotated, Any, Literal

import jsonschema_rs
import pytest
from hypothesis import event, given, note
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema
from pydantic import BaseModel, ConfigDict, Field

from tooldeck import ArgumentError, Tool, tool, validate_arguments
from tooldeck._nulls import drop_absent_nulls


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Point(BaseModel):
    x: int
    y: float = 0.0


class LaxPoint(BaseModel):
    model_config = ConfigDict(strict=False)  # the user's own choice: does not loosen
    x: int
    on: bool = False


# (annotation, a valid default or inspect.Parameter.empty, whether JSON Schema's
# "format" is involved: then pydantic's parser decides which strings it takes)
KINDS: list[tuple[Any, Any, bool]] = [
    (int, inspect.Parameter.empty, False),
    (int, 0, False),
    (float, 1.5, False),
    (bool, False, False),
    (str, inspect.Parameter.empty, False),
    (int | None, None, False),
    (str | None, None, False),
    (int | str, 1, False),
    (Literal["a", "b"], "a", False),
    (Literal[1, 2], 1, False),
    (Literal[True], True, False),
    (Color, Color.RED, False),
    (Level, Level.LOW, False),
    (list[int], inspect.Parameter.empty, False),
    (list[str], [], False),
    (tuple[int, str], inspect.Parameter.empty, False),
    (set[int], inspect.Parameter.empty, False),
    (frozenset[str], frozenset(), False),
    (dict[str, int], inspect.Parameter.empty, False),
    (dict[str, bool], {}, False),
    (Annotated[int, Field(ge=0, le=10)], 5, False),
    (Annotated[str, Field(min_length=2, max_length=4)], "ab", False),
    (Annotated[str, Field(pattern="^x+$")], "x", False),
    (Annotated[int, Field(strict=False)], 0, False),  # does not loosen either
    (Annotated[float, Field(gt=0)], 1.0, False),
    (Point, inspect.Parameter.empty, False),
    (LaxPoint, inspect.Parameter.empty, False),
    (list[Point], [], False),
    (datetime.datetime, inspect.Parameter.empty, True),
    (datetime.date, inspect.Parameter.empty, True),
    (uuid.UUID, inspect.Parameter.empty, True),
    (bytes, b"", True),
]

_made = 0


def function_tool(kinds: list[tuple[Any, Any, bool]]) -> Tool:
    """A ``@tool`` over a function with one keyword parameter per kind."""
    global _made
    _made += 1
    parameters = [
        inspect.Parameter(f"p{i}", inspect.Parameter.KEYWORD_ONLY, annotation=a, default=d)
        for i, (a, d, _f) in enumerate(kinds)
    ]

    def fn(**kwargs: Any) -> Any:
        return kwargs

    fn.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    fn.__annotations__ = {p.name: p.annotation for p in parameters}
    fn.__doc__ = "A generated tool."
    return tool(name=f"generated_{_made}")(fn)


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)
# What lax validation would take and a schema does not: the coercions of the issue.
NEAR_MISSES = st.sampled_from(
    [
        *("3", "3.5", "no", "off", "yes", "on", "true", "false", "1", "0", "", "red", "RED"),
        *(0, 1, 2, 3.0, 1.5, True, False, None, 1e300, [1, 1], ["x", "x"], [1, "a"]),
        *({"x": "1"}, {"x": 1, "y": "2"}, {"x": 1.0}, {"x": 1, "on": "no"}, {"x": 1, "on": 0}),
        *("2024-05-01T12:00:00Z", "2024-05-01", "12345678-1234-5678-1234-567812345678", "a"),
    ]
)


def valid_for(schema: Any, root: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values ``schema`` takes, for the pydantic-generated schemas of KINDS.

    (hypothesis_jsonschema generates the leaves; it cannot generate objects with the
    installed Hypothesis, see tests/test_schema.py.)
    """
    if not isinstance(schema, dict) or not schema:
        return JSON
    if "$ref" in schema:
        name = schema["$ref"].removeprefix("#/$defs/")
        return st.deferred(lambda: valid_for(root["$defs"][name], root))
    if "anyOf" in schema:
        return st.one_of([valid_for(branch, root) for branch in schema["anyOf"]])
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        required = set(schema.get("required", ()))
        if not props:
            extra = schema.get("additionalProperties", True)
            return st.dictionaries(st.text(max_size=4), valid_for(extra, root), max_size=3)
        return st.fixed_dictionaries(
            {n: valid_for(sub, root) for n, sub in props.items() if n in required},
            optional={n: valid_for(sub, root) for n, sub in props.items() if n not in required},
        )
    if kind == "array":
        if "prefixItems" in schema:
            return st.tuples(*(valid_for(s, root) for s in schema["prefixItems"])).map(list)
        items = st.lists(valid_for(schema.get("items", {}), root), max_size=3)
        if schema.get("uniqueItems"):
            return items.map(lambda xs: list({json.dumps(x): x for x in xs}.values()))
        return items
    if schema.get("format") == "binary":
        return st.text(max_size=5)
    return from_schema(schema)


def schema_says(t: Tool) -> Any:
    # 2020-12, as advertised: "format" is an annotation, not an assertion
    return jsonschema_rs.validator_for(t.input_schema())


def whole_floats_as_ints(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and math.isfinite(value):
        return int(value)
    if isinstance(value, list):
        return [whole_floats_as_ints(v) for v in value]
    if isinstance(value, dict):
        return {k: whole_floats_as_ints(v) for k, v in value.items()}
    return value


def accepts(t: Tool, raw: Any) -> tuple[bool, ArgumentError | None]:
    try:
        validate_arguments(t, raw)
    except ArgumentError as err:
        return False, err
    return True, None


@st.composite
def tool_and_value(draw: st.DrawFn) -> tuple[list[tuple[Any, Any, bool]], Tool, dict[str, Any]]:
    kinds = draw(st.lists(st.sampled_from(KINDS), min_size=1, max_size=4))
    t = function_tool(kinds)
    schema = t.input_schema()
    value: dict[str, Any] = {}
    for name, sub in schema["properties"].items():
        choice = draw(st.sampled_from(["valid"] * 5 + ["near", "json", "absent"]))
        if choice == "valid":
            value[name] = draw(valid_for(sub, schema))
        elif choice == "near":
            value[name] = draw(NEAR_MISSES)
        elif choice == "json":
            value[name] = draw(JSON)
    if draw(st.integers(0, 9)) == 0:
        value["extra"] = draw(JSON)
    return kinds, t, value


@given(tool_and_value())
def test_a_function_tool_accepts_exactly_what_its_schema_says(
    case: tuple[list[tuple[Any, Any, bool]], Tool, dict[str, Any]],
) -> None:
    kinds, t, value = case
    schema = t.input_schema()
    note(json.dumps(schema))
    # Documented: null for an optional property that does not take null means "absent".
    seen = drop_absent_nulls(value, schema, schema)
    valid = schema_says(t).is_valid(seen)
    text = json.dumps(value)
    trailing = text[:-1] + ",}" if value else " {}}"  # a repair: the slow path
    outcomes = [accepts(t, raw) for raw in (text, value, trailing)]
    assert len({ok for ok, _ in outcomes}) == 1, (value, outcomes)  # every path agrees
    accepted, err = outcomes[0]
    if not valid:
        assert not accepted, f"accepted what the schema forbids: {value}"
        event("schema forbids, tool refuses")
        return
    if accepted:
        event("schema allows, tool accepts")
        return
    # The documented exceptions, each exactly: a whole number written with a fraction
    # (3.0) for an integer, and format strings pydantic's parser does not take.
    assert err is not None
    rewritten = whole_floats_as_ints(value)
    ok, rest = accepts(t, rewritten)
    if ok:
        event("documented: a whole number as 3.0 for an integer")
        return
    if rewritten != value:  # both exceptions at once: what is left must be formats
        assert rest is not None
        err = rest
        event("documented: 3.0 for an integer, and a format string")
    formats = {f"$.p{i}" for i, (_a, _d, fmt) in enumerate(kinds) if fmt}
    problems = [p.split(":")[0] for p in err.problems]
    assert problems and all(p.split("[")[0] in formats for p in problems), err.problems
    event("documented: a format string pydantic's parser refuses")


# -- the coercions of the issue, one by one ----------------------------------------------------
@tool
def settings(count: int = 0, enabled: bool = True, ratio: float = 1.0) -> str:
    """Change settings."""
    return f"{count} {enabled} {ratio}"


def _echo(params: Any, ctx: Any) -> str:
    return str(params)


class SettingsParams(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=False)  # explicitly lax: not honoured
    count: int = 0
    enabled: bool = True


SETTINGS_MODEL = Tool.from_model(
    SettingsParams, name="settings_model", description="Change settings.", execute=_echo
)
EXTERNAL = Tool.from_schema(
    name="settings_ext", description="d", json_schema=settings.input_schema(), execute=_echo
)


@pytest.mark.parametrize(
    "value",
    [
        {"count": "3"},
        {"count": False},
        {"count": True},
        {"count": "0"},
        {"enabled": "no"},
        {"enabled": "off"},
        {"enabled": "false"},
        {"enabled": 0},
        {"enabled": 1},
        {"enabled": "yes"},
        {"ratio": "1.5"},
        {"ratio": True},
    ],
)
def test_values_the_schema_forbids_are_refused_on_every_path(value: dict[str, Any]) -> None:
    text = json.dumps(value)
    for t in (settings, SETTINGS_MODEL, EXTERNAL):
        if t is SETTINGS_MODEL and "ratio" in value:
            continue
        assert not schema_says(t).is_valid(value)
        # the fast path, a parsed object (Anthropic), text that needs repair, text with a
        # null to map (the slow path)
        for raw in (text, value, text[:-1] + ",}", text[:-1] + ', "count": null}'):
            if raw == text[:-1] + ', "count": null}' and "count" in value:
                continue
            with pytest.raises(ArgumentError) as info:
                validate_arguments(t, raw)
            key = next(iter(value))
            assert f"$.{key}" in info.value.model_message


def test_a_lone_surrogate_does_not_open_a_lax_path() -> None:
    # pydantic-core's JSON parser refuses "\ud800"; the value used to be validated in lax
    # Python mode then, where "5" passed for an integer.
    @tool
    def note_it(text: str, limit: int = 10, when: datetime.datetime | None = None) -> str:
        """Note it."""
        return text

    for raw in ('{"text": "\\ud800", "limit": "5"}', {"text": "\ud800", "limit": "5"}):
        with pytest.raises(ArgumentError) as info:
            validate_arguments(note_it, raw)
        assert "$.limit" in info.value.model_message
    # still accepted when valid, and JSON's own forms still work beside a surrogate
    raw = '{"text": "\\ud800", "limit": 5, "when": "2024-05-01T12:00:00Z"}'
    params = validate_arguments(note_it, raw).params
    assert params.text == "\ud800" and params.limit == 5 and params.when.year == 2024


def test_strict_literals_enums_and_sets_still_match_the_schema() -> None:
    @tool
    def choose(level: Literal[1, 2] = 1, on: Literal[True] = True, tags: set[int] = set()) -> str:  # noqa: B006
        """Choose."""
        return "ok"

    for value in ({"level": True}, {"on": 1}, {"tags": [1, 1]}, {"level": 1.5}):
        for raw in (json.dumps(value), value):
            with pytest.raises(ArgumentError):
                validate_arguments(choose, raw)
    params = validate_arguments(choose, '{"level": 2, "on": true, "tags": [3, 1]}').params
    assert params.level == 2 and params.on is True and params.tags == {1, 3}

    @tool
    def paint(color: Color, level: Level = Level.LOW) -> str:
        """Paint."""
        return "ok"

    assert validate_arguments(paint, '{"color": "red", "level": 2}').params.level is Level.HIGH
    for raw in (
        '{"color": "RED"}',
        '{"color": "red", "level": true}',
        '{"color": "red", "level": "2"}',
    ):
        with pytest.raises(ArgumentError):
            validate_arguments(paint, raw)


def test_json_forms_strict_mode_keeps() -> None:
    # Strict for JSON is not strict for Python: JSON carries these as strings, lists and
    # ints, and the schema says so (string + format, array, number).
    @tool
    def forms(
        when: datetime.datetime,
        day: datetime.date,
        span: datetime.timedelta,
        id: uuid.UUID,
        amount: decimal.Decimal,
        pair: tuple[int, str],
        tags: frozenset[str],
        ratio: float,
        blob: bytes,
        color: Color,
    ) -> str:
        """All the forms."""
        return "ok"

    value: dict[str, Any] = {
        "when": "2024-05-01T12:00:00+02:00",
        "day": "2024-05-01",
        "span": "PT1H30M",
        "id": "12345678-1234-5678-1234-567812345678",
        "amount": "10.25",
        "pair": [1, "a"],
        "tags": ["x", "y"],
        "ratio": 2,
        "blob": "abc",
        "color": "blue",
    }
    for raw in (json.dumps(value), value):
        p = validate_arguments(forms, raw).params
        assert p.when.hour == 12 and p.day.day == 1 and p.span.seconds == 5400
        assert p.id == uuid.UUID(value["id"]) and p.amount == decimal.Decimal("10.25")
        assert p.pair == (1, "a") and p.tags == frozenset({"x", "y"}) and p.ratio == 2.0
        assert p.blob == b"abc" and p.color is Color.BLUE
    assert schema_says(forms).is_valid(value)


def test_the_documented_exceptions() -> None:
    @tool
    def count_to(n: int, ratio: float = 1.0) -> str:
        """Count."""
        return "ok"

    # A whole number written with a fraction is an integer to JSON Schema; the tool
    # asks for 3 (the model is told so).
    assert schema_says(count_to).is_valid({"n": 3.0})
    with pytest.raises(ArgumentError, match=r"\$\.n: Input should be a valid integer"):
        validate_arguments(count_to, '{"n": 3.0}')
    # Not JSON numbers: refused for a float parameter of a function tool.
    for raw in (
        '{"n": 1, "ratio": NaN}',
        '{"n": 1, "ratio": Infinity}',
        '{"n": 1, "ratio": 1e400}',
    ):
        with pytest.raises(ArgumentError, match=r"\$\.ratio"):
            validate_arguments(count_to, raw)

    @tool
    def at(when: datetime.datetime) -> str:
        """At."""
        return "ok"

    # "format" is an annotation in the advertised schema (JSON Schema 2020-12): pydantic's
    # ISO 8601 parser decides, taking a local time and refusing what is no date-time.
    assert validate_arguments(at, '{"when": "2024-05-01T12:00:00"}').params.when.tzinfo is None
    assert schema_says(at).is_valid({"when": "soon"})
    with pytest.raises(ArgumentError):
        validate_arguments(at, '{"when": "soon"}')
