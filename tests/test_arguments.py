"""``validate_arguments``: raw model arguments in, validated parameters (or ArgumentError) out.

Covers the input kinds (JSON text, Anthropic's parsed object, None, anything else), the
mapping of "absent" nulls, the model message, and properties: valid JSON round-trips
unchanged, nothing but ArgumentError ever escapes, and a truncated text is refused or
yields a part of the original, never an invented value.

hypothesis-jsonschema's ``from_schema`` cannot generate objects with the installed
Hypothesis (``'many' object has no attribute 'more'``), so objects, arrays, unions and
``$ref`` are generated here and only leaf schemas are handed to ``from_schema``.
"""

from __future__ import annotations

import datetime
import json
import re
import types
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Literal

import jsonschema_rs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema
from pydantic import BaseModel, ConfigDict, Field, create_model

from tooldeck import ArgumentError, Tool, ValidatedArguments, tool, validate_arguments
from tooldeck._repair import RUNGS

LADDER = (*RUNGS, "double_encoded")


def _noop(params: Any, ctx: Any) -> None:
    return None


def external(name: str, schema: dict[str, Any]) -> Tool:
    return Tool.from_schema(
        name=name, description=f"{name} tool.", json_schema=schema, execute=_noop
    )


# -- tools ---------------------------------------------------------------------------------


class Address(BaseModel):
    model_config = ConfigDict(extra="forbid")
    city: str
    zip: str = "00000"  # optional, rejects null


class Item(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    qty: int = Field(1, ge=0, le=1000)
    tag: str | None = None  # optional, accepts null: null stays null
    color: str = "red"  # optional, rejects null: null means absent


class Order(BaseModel):
    model_config = ConfigDict(extra="forbid")
    items: list[Item] = Field(max_length=4)
    ship_to: Address | None = None
    gift: Item | None = None
    extras: list[Item] | None = None
    by_name: dict[str, Item] = Field(default_factory=dict)
    mode: Literal["fast", "slow"] = "fast"
    ratio: float = Field(0.5, ge=-1e6, le=1e6)
    priority: int = 0


ORDER = Tool.from_model(Order, name="order", description="Place an order.", execute=_noop)


class Exact(BaseModel):
    """No optional property that rejects null: validated on the fast path."""

    model_config = ConfigDict(extra="forbid")
    a: int
    b: str
    c: list[int] = Field(max_length=5)
    d: bool | None


EXACT = Tool.from_model(Exact, name="exact", description="All required.", execute=_noop)


@tool
def read_file(path: str, limit: int = 100, encoding: str | None = "utf-8") -> str:
    """Read a file.

    Args:
        path: The file to read.
        limit: How many lines.
        encoding: The text encoding, or null for bytes.
    """
    return path


@tool
def ping() -> str:
    """Check the connection."""
    return "pong"


NO_PARAMS = Tool.from_function(lambda: None, name="nothing", description="Takes no arguments.")
EMPTY_SCHEMA = external("empty_schema", {"type": "object", "properties": {}})

FILES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "minLength": 1},
        "limit": {"type": "integer", "minimum": 0, "maximum": 1000, "default": 100},
        "recursive": {"type": "boolean"},
        "encoding": {"type": ["string", "null"]},
    },
    "required": ["path"],
    "additionalProperties": False,
}
ORDER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "$defs": {
        "item": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "qty": {"type": "integer", "minimum": 1},
                "tags": {
                    "type": "array",
                    "items": {"type": "string", "maxLength": 8},
                    "maxItems": 3,
                },
                "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                "color": {"type": "string"},
            },
            "required": ["name"],
            "additionalProperties": False,
        },
        "address": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
            },
            "required": ["city"],
        },
    },
    "properties": {
        "items": {"type": "array", "items": {"$ref": "#/$defs/item"}, "minItems": 1, "maxItems": 4},
        "ship_to": {"$ref": "#/$defs/address"},
        "gift": {"anyOf": [{"$ref": "#/$defs/item"}, {"type": "null"}]},
        "wrapped": {"allOf": [{"$ref": "#/$defs/item"}], "description": "an item"},
        "by_name": {"type": "object", "additionalProperties": {"$ref": "#/$defs/item"}},
        "priority": {"enum": ["low", "high", None]},
        "count": {"type": "integer"},
    },
    "required": ["items"],
}
MIXED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "value": {"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 5}]},
        "meta": {"type": "object", "additionalProperties": {"type": "number"}},
        "anything": {"description": "any JSON value"},
        "positive": {"minimum": 0},
        "const": {"const": "x"},
        "ratio": {"type": "number"},
        "flags": {"type": "array", "items": {"type": "boolean"}},
    },
}
TREE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "v": {"type": "integer"},
                "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2},
            },
            "required": ["v"],
        }
    },
    "properties": {"tree": {"$ref": "#/$defs/node"}},
}
FREE_SCHEMA: dict[str, Any] = {"type": "object"}

FILES = external("files", FILES_SCHEMA)
EXT_ORDER = external("ext_order", ORDER_SCHEMA)
MIXED = external("mixed", MIXED_SCHEMA)
TREE = external("tree", TREE_SCHEMA)
FREE = external("free", FREE_SCHEMA)
EXTERNAL_TOOLS = [FILES, EXT_ORDER, MIXED, TREE, FREE]
PYDANTIC_TOOLS = [ORDER, EXACT, read_file]
ALL_TOOLS = [*PYDANTIC_TOOLS, *EXTERNAL_TOOLS, ping, NO_PARAMS, EMPTY_SCHEMA]


def dumped(params: Any) -> Any:
    """Params as JSON data (Pydantic models as they were given, without defaults)."""
    if isinstance(params, BaseModel):
        return json.loads(params.model_dump_json(exclude_unset=True))
    return params


def same(a: Any, b: Any) -> bool:
    """Equality that also compares JSON types (True is not 1, 1 is not 1.0)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(same, a, b))
    return type(a) is type(b) and a == b


def part_of(result: Any, original: Any) -> bool:
    """``result`` is ``original`` with some object keys left out, at any depth.

    Arrays, strings, numbers and literals must be exactly the original's: only an object
    can legitimately lose its trailing keys (closed after a complete value).
    """
    if isinstance(result, dict):
        return isinstance(original, dict) and all(
            k in original and part_of(v, original[k]) for k, v in result.items()
        )
    return same(result, original)


# -- generating values from a JSON Schema -------------------------------------------------------

JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10)
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


def _resolve(schema: Any, root: Mapping[str, Any]) -> Any:
    while isinstance(schema, Mapping) and "$ref" in schema:
        node: Any = root
        for part in schema["$ref"][2:].split("/"):
            node = node[part]
        schema = node
    return schema


def values_for(schema: Any, root: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    """Values valid against ``schema`` (for the subset of JSON Schema used in this file)."""
    if isinstance(schema, Mapping) and "$ref" in schema:
        return st.deferred(lambda: values_for(_resolve(schema, root), root))
    if schema is True or schema == {} or not isinstance(schema, Mapping):
        return JSON_VALUES
    if "allOf" in schema and len(schema["allOf"]) == 1:
        return values_for(schema["allOf"][0], root)
    if "anyOf" in schema or "oneOf" in schema:
        return st.one_of([values_for(b, root) for b in schema.get("anyOf") or schema["oneOf"]])
    if "enum" in schema or "const" in schema:
        return from_schema(dict(schema))
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of([values_for({**schema, "type": k}, root) for k in kind])
    if kind == "object" or "properties" in schema:
        props: Mapping[str, Any] = schema.get("properties", {})
        required = set(schema.get("required", ()))
        fixed = st.fixed_dictionaries(
            {k: values_for(v, root) for k, v in props.items() if k in required},
            optional={k: values_for(v, root) for k, v in props.items() if k not in required},
        )
        extra = schema.get("additionalProperties", True)
        if extra is False:
            return fixed
        extra_values = JSON_VALUES if extra is True else values_for(extra, root)
        more = st.dictionaries(
            st.text(max_size=6).filter(lambda k: k not in props), extra_values, max_size=3
        )
        return st.tuples(fixed, more).map(lambda pair: {**pair[1], **pair[0]})
    if kind == "array":
        return st.lists(
            values_for(schema.get("items", True), root),
            min_size=schema.get("minItems", 0),
            max_size=schema.get("maxItems", 4),
        )
    if kind in ("string", "integer", "number", "boolean", "null"):
        return from_schema(dict(schema))
    if kind is None:
        return JSON_VALUES
    raise AssertionError(f"unsupported schema {schema!r}")


def schema_values(schema: Mapping[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    validator = jsonschema_rs.validator_for(dict(schema))
    return values_for(schema, schema).filter(validator.is_valid)


VALUE_STRATEGIES: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    t.name: schema_values(t.schema) for t in [*EXTERNAL_TOOLS, *PYDANTIC_TOOLS]
}
TOOLS_BY_NAME = {t.name: t for t in [*EXTERNAL_TOOLS, *PYDANTIC_TOOLS]}


def encodings(value: Any) -> list[str]:
    return [
        json.dumps(value),
        json.dumps(value, separators=(",", ":")),
        json.dumps(value, indent=2),
        json.dumps(value, indent="\t", ensure_ascii=False, sort_keys=True),
        json.dumps(value, separators=(" , ", " : "), ensure_ascii=False),
        "\n  " + json.dumps(value) + " \r\n",
    ]


def error(t: Tool, raw: Any) -> ArgumentError:
    with pytest.raises(ArgumentError) as info:
        validate_arguments(t, raw)
    return info.value


_VALIDATORS: dict[str, Any] = {}


def _validator(t: Tool) -> Any:
    """The tool's schema compiled once (by its name: the tools here have unique names)."""
    if t.name not in _VALIDATORS:
        _VALIDATORS[t.name] = jsonschema_rs.validator_for(dict(t.schema))
    return _VALIDATORS[t.name]


def check_contract(t: Tool, raw: Any) -> ValidatedArguments | None:
    """Whatever ``raw`` is: ValidatedArguments or ArgumentError, and their invariants."""
    try:
        result = validate_arguments(t, raw)
    except ArgumentError as err:
        assert len(err.model_message) <= 500
        assert err.model_message.startswith(f"Invalid arguments for {t.name}")
        assert err.tool == t.name
        assert err.problems
        assert set(err.repairs) <= set(LADDER)
        return None
    assert isinstance(result, ValidatedArguments)
    used = list(result.repairs)
    assert len(set(used)) == len(used)
    assert [LADDER.index(r) for r in used] == sorted(LADDER.index(r) for r in used)
    if isinstance(raw, str) and raw.strip():
        try:
            parsed: Any = json.loads(raw)
            parses = True
        except (ValueError, RecursionError):
            parses = False
        if parses:  # valid JSON is never repaired (a JSON string may be decoded once)
            assert used in ([], ["double_encoded"])
            assert (used == []) == isinstance(parsed, dict)
        else:
            assert used, "text json.loads rejects was accepted without a repair"
    if t.params is None:
        assert isinstance(result.params, dict)
        assert _validator(t).is_valid(result.params)
    else:
        assert isinstance(result.params, t.params)
    return result


# -- input kinds ---------------------------------------------------------------------------


@pytest.mark.parametrize("t", [ping, NO_PARAMS, EMPTY_SCHEMA, FREE])
@pytest.mark.parametrize("raw", ["", "   ", "\n", None, "{}", " {} ", {}])
def test_empty_arguments_for_a_tool_without_parameters(t: Tool, raw: Any) -> None:
    result = validate_arguments(t, raw)
    assert result.repairs == ()
    assert dumped(result.params) == {}


@pytest.mark.parametrize("raw", ["", None, "  "])
def test_empty_arguments_for_a_tool_with_required_parameters(raw: Any) -> None:
    with pytest.raises(ArgumentError) as info:
        validate_arguments(read_file, raw)
    assert "$.path: required property missing" in info.value.model_message
    with pytest.raises(ArgumentError) as info:
        validate_arguments(FILES, raw)
    assert '"path" is a required property' in info.value.model_message


def test_empty_arguments_use_defaults() -> None:
    result = validate_arguments(ORDER, '{"items": []}')
    assert result.params == Order(items=[])
    assert validate_arguments(external("opt", {"type": "object"}), "").params == {}


@pytest.mark.parametrize("raw", [[], [{"path": "x"}], 42, 1.5, True, b'{"path": "x"}', ("path",)])
def test_non_string_non_mapping_input_is_an_error(raw: Any) -> None:
    for t in (read_file, FILES):
        with pytest.raises(ArgumentError) as info:
            validate_arguments(t, raw)
        assert f"$: expected a JSON object, got {type(raw).__name__}" in info.value.model_message
        assert info.value.repairs == ()


def test_non_mapping_objects_are_errors() -> None:
    with pytest.raises(ArgumentError) as info:
        validate_arguments(FILES, object())  # type: ignore[arg-type]
    assert "got object" in info.value.model_message


@pytest.mark.parametrize(
    "raw",
    [
        {"path": "a.txt", "limit": 5},
        OrderedDict(path="a.txt", limit=5),
        types.MappingProxyType({"path": "a.txt", "limit": 5}),
    ],
)
def test_anthropic_parsed_object(raw: Mapping[str, Any]) -> None:
    result = validate_arguments(read_file, raw)
    assert result.repairs == ()
    assert result.params.path == "a.txt" and result.params.limit == 5
    ext = validate_arguments(FILES, raw)
    assert ext.params == {"path": "a.txt", "limit": 5} and ext.repairs == ()


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        ({1: "x"}, "$: a key is not a string but int"),
        ({"path": "p", "encoding": {None: 1}}, "$.encoding: a key is not a string but NoneType"),
        ({"path": object()}, "$.path: not a JSON value but object"),
        ({"path": "p", "x\udc00": 1}, "$: a key is not valid Unicode"),
    ],
)
def test_a_mapping_that_is_not_json_is_an_error(raw: dict[Any, Any], where: str) -> None:
    # jsonschema_rs refuses such data with ValueError; that must not escape
    assert where in error(FILES, raw).model_message
    assert check_contract(read_file, raw) is None


def test_a_mapping_is_not_coerced_through_json() -> None:
    # JSON would turn the key 1 into "1" and a tuple into a list: Python mode decides.
    err = error(ORDER, {"items": [], "by_name": {1: {"name": "x"}}})
    assert "$.by_name" in err.model_message and "valid string" in err.model_message
    assert validate_arguments(ORDER, {"items": ({"name": "x"},)}).params.items == [Item(name="x")]


def test_anthropic_object_is_never_repaired_or_decoded() -> None:
    # A string value that looks like broken JSON is data, not something to repair.
    raw = {"path": '{"a": 1,', "encoding": "```json\n{}\n```"}
    assert validate_arguments(FILES, raw).params == raw
    with pytest.raises(ArgumentError) as info:
        validate_arguments(FILES, {"path": "x", "limit": "5"})
    assert "$.limit" in info.value.model_message and '"5"' in info.value.model_message


def test_anthropic_object_and_text_agree() -> None:
    value = {"items": [{"name": "a", "qty": 2, "color": None}], "priority": None}
    from_text = validate_arguments(ORDER, json.dumps(value))
    from_object = validate_arguments(ORDER, value)
    assert from_text == from_object
    assert from_object.params.items[0].color == "red"
    assert value == {"items": [{"name": "a", "qty": 2, "color": None}], "priority": None}


def test_valid_json_is_returned_unchanged_without_repairs() -> None:
    value = {"items": [{"name": "x", "qty": 3, "tags": ["a"], "note": None}], "count": 7}
    for raw in encodings(value):
        result = validate_arguments(EXT_ORDER, raw)
        assert same(result.params, value) and result.repairs == ()


def test_strict_models_accept_json_strings_on_every_path() -> None:
    # JSON has no datetime or UUID: a strict model takes them as strings from JSON. The
    # fast path (model_validate_json) does; text needing null mapping, repaired text and
    # Anthropic's parsed object must too.
    class Strict(BaseModel):
        model_config = ConfigDict(strict=True, extra="forbid")
        when: datetime.datetime
        id: uuid.UUID

    class StrictWithOptional(Strict):
        note: str = "-"

    value = {"when": "2024-05-01T12:00:00Z", "id": "12345678-1234-5678-1234-567812345678"}
    for model in (Strict, StrictWithOptional):
        t = Tool.from_model(model, name="strict", description="Strict.", execute=_noop)
        text = json.dumps(value)
        for raw in (text, value, text[:-1], text[:-1] + ",}", f"```json\n{text}\n```"):
            result = validate_arguments(t, raw)
            assert result.params.id == uuid.UUID(value["id"])
            assert result.params.when.year == 2024
        with pytest.raises(ArgumentError) as info:
            validate_arguments(t, {"when": "2024-05-01", "id": 5})
        assert "$.id" in info.value.model_message
    # strictness is kept: a number is not a string
    strict_int = create_model("StrictInt", __config__=ConfigDict(strict=True), n=(int, ...))
    t = Tool.from_model(strict_int, name="strict_int", description="Strict.", execute=_noop)
    for raw in ('{"n": "5"}', {"n": "5"}, '{"n": "5",}'):
        with pytest.raises(ArgumentError):
            validate_arguments(t, raw)


def test_lone_surrogates_never_escape_as_unicode_errors() -> None:
    # jsonschema_rs cannot take a key with an unpaired surrogate: an ArgumentError, with
    # the path, not a UnicodeEncodeError.
    err = error(EXT_ORDER, '{"items": [{"name": "a"}], "by_name": {"k\\udf28": {}}}')
    assert "$.by_name: a key is not valid Unicode" in err.model_message
    check_contract(EXT_ORDER, '{"items": [{"name": "\\udf28"}], "count": "x"}')


def test_lone_surrogates_are_still_accepted() -> None:
    # json.loads accepts "\ud800"; pydantic-core's JSON parser does not. Same answer on
    # every path: the value json.loads produced.
    raw = '{"path": "\\ud800", "limit": null}'
    assert validate_arguments(read_file, raw).params.path == "\ud800"
    assert validate_arguments(read_file, json.loads(raw)).params.path == "\ud800"


def test_deeply_nested_arguments_are_an_argument_error() -> None:
    for depth in (50, 900, 990, 3000):
        raw = '{"tree": ' + '{"v": 1, "kids": [' * depth + '{"v": 2}' + "]}" * depth + "}"
        check_contract(TREE, raw)
        check_contract(FREE, raw)
        check_contract(ORDER, '{"items": [], "extras": ' + "[" * depth + "]" * depth + "}")
    nested: dict[str, Any] = {"v": 1}
    for _ in range(3000):
        nested = {"v": 1, "kids": [nested]}
    check_contract(TREE, {"tree": nested})


# -- null means absent -----------------------------------------------------------------------


def test_null_for_an_optional_non_nullable_property_means_absent() -> None:
    result = validate_arguments(read_file, '{"path": "a", "limit": null}')
    assert result.params.limit == 100 and result.repairs == ()
    assert "limit" not in result.params.model_fields_set


def test_null_for_a_nullable_property_stays_null() -> None:
    result = validate_arguments(read_file, '{"path": "a", "encoding": null}')
    assert result.params.encoding is None
    ext = validate_arguments(FILES, '{"path": "a", "encoding": null, "limit": null}')
    assert ext.params == {"path": "a", "encoding": None}


def test_null_for_a_required_property_is_an_error() -> None:
    with pytest.raises(ArgumentError) as info:
        validate_arguments(read_file, '{"path": null}')
    assert "$.path" in info.value.model_message and "null" in info.value.model_message
    with pytest.raises(ArgumentError) as info:
        validate_arguments(FILES, '{"path": null}')
    assert "$.path" in info.value.model_message and "null" in info.value.model_message


def test_nulls_in_nested_pydantic_models() -> None:
    raw = {
        "items": [{"name": "a", "qty": None, "tag": None, "color": None}],
        "ship_to": {"city": "Oslo", "zip": None},
        "gift": {"name": "g", "color": None},
        "extras": [{"name": "e", "color": None, "qty": None}],
        "by_name": {"k": {"name": "m", "color": None}},
        "mode": None,
        "ratio": None,
        "priority": None,
    }
    for given_raw in (raw, json.dumps(raw)):
        order = validate_arguments(ORDER, given_raw).params
        assert order.items == [Item(name="a", tag=None)]
        assert order.items[0].qty == 1 and order.items[0].color == "red"
        assert order.ship_to == Address(city="Oslo")
        assert order.gift == Item(name="g")
        assert order.extras == [Item(name="e")]
        assert order.by_name == {"k": Item(name="m")}
        assert (order.mode, order.ratio, order.priority) == ("fast", 0.5, 0)
    # a nullable union keeps its null
    assert validate_arguments(ORDER, '{"items": [], "gift": null}').params.gift is None
    assert validate_arguments(ORDER, '{"items": [], "extras": null}').params.extras is None


def test_nulls_in_external_schemas() -> None:
    raw = {
        "items": [{"name": "a", "qty": None, "note": None, "color": None}],
        "ship_to": {"city": "Oslo", "zip": None},
        "gift": {"name": "g", "qty": None},
        "wrapped": {"name": "w", "qty": None},
        "by_name": {"k": {"name": "m", "qty": None}},
        "priority": None,
        "count": None,
    }
    result = validate_arguments(EXT_ORDER, json.dumps(raw))
    assert result.params == {
        "items": [{"name": "a", "note": None}],
        "ship_to": {"city": "Oslo"},
        "gift": {"name": "g"},
        "wrapped": {"name": "w"},
        "by_name": {"k": {"name": "m"}},
        "priority": None,
    }
    assert result.repairs == ()
    assert validate_arguments(EXT_ORDER, '{"items": [{"name": "a"}], "gift": null}').params == {
        "items": [{"name": "a"}],
        "gift": None,
    }


def test_null_for_a_property_without_type_is_a_value() -> None:
    # {} or {"minimum": 0} accepts null: the null is the model's value, not "absent".
    raw = '{"anything": null, "positive": null, "value": null, "ratio": null, "const": null}'
    assert validate_arguments(MIXED, raw).params == {"anything": None, "positive": None}


def test_nulls_inside_arrays_of_scalars_are_not_dropped() -> None:
    with pytest.raises(ArgumentError) as info:
        validate_arguments(MIXED, '{"flags": [true, null]}')
    assert "$.flags[1]" in info.value.model_message


def test_null_mapping_does_not_touch_strings_or_unknown_keys() -> None:
    assert validate_arguments(read_file, '{"path": "null"}').params.path == "null"
    with pytest.raises(ArgumentError) as info:
        validate_arguments(read_file, '{"path": "a", "other": null}')
    assert "$.other: unexpected property" in info.value.model_message


def test_null_mapping_through_recursive_refs() -> None:
    raw = '{"tree": {"v": 1, "kids": [{"v": 2, "kids": null}, {"v": 3, "kids": [{"v": 4}]}]}}'
    assert validate_arguments(TREE, raw).params == {
        "tree": {"v": 1, "kids": [{"v": 2}, {"v": 3, "kids": [{"v": 4}]}]}
    }


# -- the model message -----------------------------------------------------------------------


def test_model_message_names_path_expected_and_got() -> None:
    items = [{"name": "a"}, {"name": "b"}, {"name": 123}]
    err = error(ORDER, {"items": items})
    assert "$.items[2].name" in err.model_message
    assert "valid string" in err.model_message and "got 123" in err.model_message
    err = error(EXT_ORDER, {"items": items})
    assert '$.items[2].name: 123 is not of type "string"' in err.model_message

    items = [{"name": "a"}, {"name": "b"}, {"qty": 2}]
    err = error(ORDER, {"items": items})
    assert "$.items[2].name: required property missing" in err.model_message
    err = error(EXT_ORDER, {"items": items})
    assert '$.items[2]: "name" is a required property' in err.model_message

    err = error(ORDER, {"items": [], "x": 1})
    assert "$.x: unexpected property" in err.model_message
    err = error(FILES, {"path": "p", "x": 1})
    assert "$: Additional properties are not allowed ('x' was unexpected)" in err.model_message

    err = error(ORDER, {"items": [], "mode": "warp"})
    assert "$.mode" in err.model_message and "'fast' or 'slow'" in err.model_message
    assert '"warp"' in err.model_message


def test_model_message_with_many_problems() -> None:
    err = error(ORDER, {"items": [{}] * 4, "x": 1})
    message = err.model_message
    assert len(message) <= 500
    assert "$.items[0].name: required property missing" in message
    assert "; and 1 more" in message
    assert len(err.problems) == 5


def test_model_message_stays_short_with_hundreds_of_errors() -> None:
    props = {f"field_{i:03d}": {"type": "integer"} for i in range(300)}
    big = external("big", {"type": "object", "properties": props, "required": list(props)})
    err = error(big, "{}")
    assert len(err.model_message) <= 500
    assert len(err.problems) == 300
    assert '"field_000" is a required property' in err.model_message
    assert "more" in err.model_message

    bad = {k: "x" * 300 for k in props}
    err = error(big, json.dumps(bad))
    assert len(err.model_message) <= 500
    assert "$.field_000" in err.model_message and 'is not of type "integer"' in err.model_message

    model = create_model(
        "Wide",
        __config__=ConfigDict(extra="forbid"),
        **{f"f{i}": (int, ...) for i in range(300)},  # type: ignore[call-overload]
    )
    wide = Tool.from_model(model, name="w" * 64, description="Wide.", execute=_noop)
    for raw in ("{}", '{"f0": "a",}', json.dumps({f"f{i}": "y" * 500 for i in range(300)})):
        err = error(wide, raw)
        assert len(err.model_message) <= 500
        assert err.model_message.startswith("Invalid arguments for " + "w" * 64)
        assert "$.f0" in err.model_message


def test_model_message_keeps_expected_when_got_is_huge() -> None:
    for value in ("z" * 5000, {"k": "v" * 5000}, list(range(2000))):
        err = error(FILES, {"path": "p", "limit": value})
        message = err.model_message
        assert len(message) <= 500
        assert "$.limit" in message and 'is not of type "integer"' in message
        err = error(read_file, {"path": "p", "limit": value})
        message = err.model_message
        assert len(message) <= 500
        assert "$.limit" in message and "valid integer" in message and "got" in message
    err = error(read_file, {"path": ["x" * 5000] * 3})
    assert len(err.model_message) <= 500
    assert "$.path: Input should be a valid string, got " in err.model_message


def test_model_message_for_a_long_enum() -> None:
    options = [f"option_{i}" for i in range(400)]
    t = external("choose", {"type": "object", "properties": {"pick": {"enum": options}}})
    err = error(t, '{"pick": "nope"}')
    assert len(err.model_message) <= 500
    assert '$.pick: "nope" is not one of' in err.model_message


def test_model_message_for_a_deep_path() -> None:
    err = error(TREE, '{"tree": ' + '{"v": 1, "kids": [' * 60 + '{"v": "x"}' + "]}" * 60 + "}")
    assert len(err.model_message) <= 500
    assert err.model_message.count("[0]") >= 10 and '"x"' in err.model_message


def test_model_message_for_unparseable_text() -> None:
    err = error(FILES, '{"path": "a.txt", "limit": 1')
    assert err.model_message.startswith("Invalid arguments for files: $: not valid JSON: ")
    assert "line 1 column" in err.model_message
    assert "ends in a number that may have been cut" in err.model_message
    assert err.model_message.endswith("Fix and call again.")


# -- properties ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [t.name for t in EXTERNAL_TOOLS])
@given(data=st.data())
def test_valid_values_round_trip_unchanged_external(name: str, data: st.DataObject) -> None:
    t = TOOLS_BY_NAME[name]
    value = data.draw(VALUE_STRATEGIES[name])
    for raw in encodings(value):
        result = validate_arguments(t, raw)
        assert result.repairs == ()
        assert same(result.params, value), (raw, result.params)
    assert same(validate_arguments(t, value).params, value)


@pytest.mark.parametrize("name", [t.name for t in PYDANTIC_TOOLS])
@given(data=st.data())
def test_valid_values_round_trip_unchanged_pydantic(name: str, data: st.DataObject) -> None:
    t = TOOLS_BY_NAME[name]
    value = data.draw(VALUE_STRATEGIES[name])
    expected = t.params.model_validate(value)  # type: ignore[union-attr]
    for raw in encodings(value):
        result = validate_arguments(t, raw)
        assert result.repairs == ()
        assert result.params == expected
        assert dumped(result.params) == value  # what was given, and nothing else
    assert validate_arguments(t, value).params == expected


def test_round_trip_generated_through_st_builds() -> None:
    items = st.builds(
        Item,
        name=st.text(max_size=5),
        qty=st.integers(0, 1000),
        tag=st.none() | st.text(max_size=3),
    )

    @given(st.builds(Order, items=st.lists(items, max_size=3), priority=st.integers(-5, 5)))
    def check(order: Order) -> None:
        raw = order.model_dump_json()
        for text in (raw, json.dumps(json.loads(raw), indent=1)):
            result = validate_arguments(ORDER, text)
            assert result.params == order and result.repairs == ()

    check()


JSONISH = st.text(alphabet="{}[]\",:0123456789.eE-+truefalsnTFN '`\n\\", max_size=60)


@st.composite
def mutated_json(draw: st.DrawFn) -> str:
    name = draw(st.sampled_from(sorted(VALUE_STRATEGIES)))
    text = draw(st.sampled_from(encodings(draw(VALUE_STRATEGIES[name]))))
    for _ in range(draw(st.integers(1, 3))):
        if not text:
            break
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, min(len(text), i + 5)))
        kind = draw(st.sampled_from(["delete", "insert", "duplicate", "truncate", "wrap"]))
        if kind == "delete":
            text = text[:i] + text[j:]
        elif kind == "insert":
            text = text[:i] + draw(st.text(alphabet="{}[]\",:'`\\ nTFx#", max_size=3)) + text[i:]
        elif kind == "duplicate":
            text = text[:j] + text[i:j] + text[j:]
        elif kind == "truncate":
            text = text[:i]
        else:
            before, after = draw(
                st.sampled_from([("```json\n", "\n```"), ("Sure: ", " ok"), ("", "}")])
            )
            text = before + text + after
    return text


@pytest.mark.parametrize("t", [ORDER, EXACT, read_file, EXT_ORDER, MIXED, FREE])
@given(raw=st.text() | JSONISH | mutated_json())
def test_arbitrary_text_only_ever_raises_argument_error(t: Tool, raw: str) -> None:
    check_contract(t, raw)


@pytest.mark.parametrize("t", [ORDER, EXT_ORDER, FREE])
@given(raw=JSON_VALUES | st.dictionaries(st.text(max_size=5), JSON_VALUES, max_size=4))
def test_arbitrary_objects_only_ever_raise_argument_error(t: Tool, raw: Any) -> None:
    check_contract(t, raw)
    check_contract(t, json.dumps(raw))
    check_contract(t, repr(raw))


_TOKEN = re.compile(
    r'\s+|"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null|[{}\[\],:]'
)


def closable_cuts(text: str) -> set[int]:
    """Where ``text`` (JSON) may be cut and closed without inventing anything.

    An independent oracle for close_brackets: only right after a complete string value,
    literal or closed bracket, with nothing but objects left open (no array, whose later
    elements may be lost), trailing whitespace included.
    """
    closable: set[int] = set()
    stack: list[str] = []
    last = ""  # "value" (string value, literal, closer), "key", or punctuation
    pos = 0
    for match in _TOKEN.finditer(text):
        assert match.start() == pos, text
        pos = match.end()
        token = match.group()
        if token.isspace():
            if match.start() in closable:
                closable.update(range(match.start(), match.end() + 1))
            continue
        if token in "{[":
            stack.append(token)
            last = token
        elif token in "}]":
            stack.pop()
            last = "value"
        elif token in ",:":
            last = token
        elif token.startswith('"'):
            last = "key" if stack[-1:] == ["{"] and last in ("{", ",") else "value"
        else:
            last = "number" if token[-1].isdigit() else "value"
        if stack and "[" not in stack and last == "value":
            closable.add(match.end())
    assert pos == len(text)
    return closable


def _texts(value: dict[str, Any]) -> list[tuple[str, int | None]]:
    """Encodings of ``value`` and where the JSON starts in each (None: not JSON)."""
    compact = json.dumps(value)
    prose = "Sure, here are the arguments: "
    return [
        (compact, 0),
        (json.dumps(value, indent=2), 0),
        (f"```json\n{compact}\n```", len("```json\n")),
        (prose + compact, len(prose)),
        (repr(value), None),
    ]


@pytest.mark.parametrize("name", ["ext_order", "mixed", "tree", "order", "read_file"])
@settings(max_examples=100)
@given(data=st.data())
def test_truncation_never_invents(name: str, data: st.DataObject) -> None:
    t = TOOLS_BY_NAME[name]
    value = data.draw(VALUE_STRATEGIES[name])
    validator = jsonschema_rs.validator_for(dict(t.schema))
    required = set(t.schema.get("required", ()))
    for text, start in _texts(value):
        cuts = (
            range(len(text))
            if len(text) <= 300
            else sorted(
                set(data.draw(st.lists(st.integers(0, len(text) - 1), min_size=30, max_size=30)))
            )
        )
        json_text = text[start:].removesuffix("\n```") if start is not None else ""
        closable = closable_cuts(json_text)
        for cut in cuts:
            result = check_contract(t, text[:cut])
            if start is not None and start < cut < start + len(json_text):
                # inside the JSON: accepted only where closing brackets invents nothing
                assert result is None or cut - start in closable, text[:cut]
            if result is None:
                continue
            got = dumped(result.params)
            assert part_of(got, value), (text[:cut], got)
            assert required <= got.keys()
            if t.params is None:
                assert validator.is_valid(got)
