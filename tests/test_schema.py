"""Schemas the model sees, and their projection for each provider.

Covers ``Tool.input_schema()`` and ``tooldeck.schema.project`` / ``project_tools`` against
the wire formats in providers.md (sections 1.1, 1.8, 1.11, 2, 3.1, 6.1, 6.8, 10).
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Callable, Iterator
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

import jsonschema_rs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema
from pydantic import BaseModel, ConfigDict, Field, create_model

from tooldeck import SchemaError, Tool, ToolDefinitionError, tool
from tooldeck._strict import Dialect, convert
from tooldeck.schema import (
    ANTHROPIC_MAX_OPTIONAL_PARAMS,
    ANTHROPIC_MAX_STRICT_TOOLS,
    ANTHROPIC_MAX_UNION_PARAMS,
    PROVIDERS,
    Projection,
    project,
    project_tools,
)

OPENAI = ("openai-responses", "openai-chat")
DIALECTS: tuple[Dialect, ...] = ("openai", "anthropic")
OPENAPI_SPEC = Path("/work/shared/reference/openai-openapi.yml")


def _noop(params: Any, ctx: Any) -> None:
    return None


def make(name: str = "t", *, params: Any = None, schema: Any = None, **options: Any) -> Tool:
    if schema is not None:
        return Tool.from_schema(
            name=name, description=f"The {name} tool.", json_schema=schema, execute=_noop, **options
        )
    if params is None:
        return Tool.from_function(
            lambda: None, name=name, description=f"The {name} tool.", **options
        )
    return Tool.from_model(params, _noop, name=name, description=f"The {name} tool.", **options)


def obj(
    props: dict[str, Any], required: list[str] | None = None, *, defs: dict[str, Any] | None = None
) -> dict[str, Any]:
    """An object schema; every property required unless ``required`` says otherwise."""
    names = list(props) if required is None else required
    schema: dict[str, Any] = {"type": "object", "properties": props, "required": names}
    if defs is not None:
        schema["$defs"] = defs
    return schema


def subschemas(schema: Any) -> Iterator[dict[str, Any]]:
    """Every schema node in ``schema``: itself, properties, items, unions, definitions."""
    if not isinstance(schema, dict):
        return
    yield schema
    for sub in (schema.get("properties") or {}).values():
        yield from subschemas(sub)
    if isinstance(schema.get("items"), dict):
        yield from subschemas(schema["items"])
    for key in ("anyOf", "oneOf", "allOf"):
        for sub in schema.get(key) or ():
            yield from subschemas(sub)
    for key in ("$defs", "definitions"):
        for sub in (schema.get(key) or {}).values():
            yield from subschemas(sub)


def is_object_node(node: dict[str, Any]) -> bool:
    kind = node.get("type")
    return kind == "object" or (isinstance(kind, list) and "object" in kind) or "properties" in node


def assert_openai_strict_shape(schema: dict[str, Any]) -> None:
    """providers.md §2 structural rules 1-3, on every object of the converted schema."""
    assert schema["type"] == "object"
    assert "anyOf" not in schema and "oneOf" not in schema
    for node in subschemas(schema):
        assert "oneOf" not in node and "allOf" not in node
        assert "title" not in node and "default" not in node and "discriminator" not in node
        if is_object_node(node):
            assert node["additionalProperties"] is False, node
            assert node["required"] == list(node["properties"]), node


def accepts_null(schema: dict[str, Any]) -> bool:
    return jsonschema_rs.validator_for(schema).is_valid(None)


# -- models -------------------------------------------------------------------------------
class Unit(StrEnum):
    C = "c"
    F = "f"


class Address(BaseModel):
    street: str
    city: str
    postcode: str | None = None


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: int = 9


class Dog(BaseModel):
    kind: Literal["dog"]
    good: bool = True


class TreeNode(BaseModel):
    label: str
    children: list[TreeNode] = []


class FlatOrder(BaseModel):
    """A rich model: nested models, Optional, enums, Literal, lists, constraints, unions."""

    customer: str = Field(description="Customer id.")
    address: Address
    billing: Address | None = None
    unit: Unit = Unit.C
    priority: Literal["low", "high"] = "low"
    quantity: int = Field(ge=1)
    tags: list[str] = Field(default_factory=list, max_length=5)
    pet: Annotated[Cat | Dog, Field(discriminator="kind")]


class Order(FlatOrder):
    """The same, with a recursive model inside."""

    tree: TreeNode | None = None


class Weather(BaseModel):
    city: str
    unit: Literal["c", "f"] | None = None


# The Responses entry of providers.md §1.11, exactly.
WEATHER_RESPONSES_STRICT = {
    "type": "function",
    "name": "get_weather",
    "description": "Get current weather for a city.",
    "strict": True,
    "parameters": {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "unit": {"anyOf": [{"type": "string", "enum": ["c", "f"]}, {"type": "null"}]},
        },
        "required": ["city", "unit"],
        "additionalProperties": False,
    },
}

EXTERNAL_WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
    "required": ["city"],
}

# Everything JSON Schema can say that no strict subset can, plus constraints.
EXOTIC: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "both": {"allOf": [{"type": "string"}, {"minLength": 2}]},
        "anything_but_null": {"not": {"type": "null"}},
        "conditional": {
            "type": "object",
            "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
            "if": {"required": ["a"]},
            "then": {"required": ["b"]},
        },
        "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]},
        "code": {"type": "string", "pattern": "^(?!x)[a-z]+(?<=z)$"},
        # (no remote "$ref": a tool refuses one when defined, tests/test_schema_compile.py;
        # projecting one is covered by test_external_ref_is_never_strict)
        "count": {"type": "integer", "minimum": 1, "maximum": 10},
        "when": {"type": "string", "format": "date-time"},
        "site": {"type": "string", "format": "uri"},
        "point": {"$ref": "#/$defs/Point"},
    },
    "required": ["labels", "count"],
    "$defs": {"Point": obj({"x": {"type": "number"}, "y": {"type": "number"}})},
}
EXOTIC_INCOMPATIBLE = {
    "openai": ["$.labels", "$.both", "$.anything_but_null", "$.conditional", "$.pair"],
    "anthropic": ["$.labels", "$.anything_but_null", "$.conditional", "$.pair"],
}


# -- input_schema ---------------------------------------------------------------------------
def test_generated_schema_is_an_object_without_titles() -> None:
    t = make("order", params=Order)
    schema = t.input_schema()
    assert schema["type"] == "object"
    assert schema["required"] == ["customer", "address", "quantity", "pet"]
    assert schema["properties"]["quantity"] == {"minimum": 1, "type": "integer"}
    assert schema["properties"]["tags"]["maxItems"] == 5
    assert "title" not in schema
    assert all("title" not in n for n in subschemas(schema["properties"]["address"]))
    # a private copy each time
    schema["properties"].clear()
    assert t.input_schema()["properties"]


@pytest.mark.parametrize(
    "root",
    [
        {"type": "array", "items": {"type": "string"}},
        {"type": "string"},
        {"anyOf": [obj({"a": {"type": "string"}}), obj({"b": {"type": "string"}})]},
        {"properties": {"a": {"type": "string"}}},
        {"type": ["object", "null"], "properties": {}},
    ],
)
def test_non_object_root_is_rejected_naming_the_tool(root: dict[str, Any]) -> None:
    with pytest.raises(SchemaError) as info:
        make("bad_root", schema=root)
    assert info.value.tool == "bad_root"
    assert "'bad_root'" in str(info.value)
    assert any("type: object" in p for p in info.value.problems)


def test_rootmodel_params_are_rejected() -> None:
    from pydantic import RootModel

    with pytest.raises(SchemaError) as info:
        make("listy", params=RootModel[list[int]])
    assert info.value.tool == "listy"


def test_recursive_model_can_be_the_root() -> None:
    t = make("tree", params=TreeNode)
    assert t.input_schema()["type"] == "object"


def test_external_schema_is_returned_byte_for_byte() -> None:
    original = copy.deepcopy(EXOTIC)
    for t in (
        make("exotic", schema=original),
        Tool.from_schema(name="exotic", description="d", json_schema=original, execute=_noop),
    ):
        assert json.dumps(t.input_schema()) == json.dumps(json.loads(json.dumps(EXOTIC)))
    # later edits to the caller's dict change nothing
    original["properties"]["count"]["minimum"] = 5
    original["required"].append("site")
    assert make("exotic", schema=EXOTIC).input_schema() == EXOTIC
    assert t.input_schema() == EXOTIC


def test_generated_schema_is_computed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    class Once(BaseModel):
        a: int
        b: str | None = None

    calls = []
    real = Once.model_json_schema

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(Once, "model_json_schema", counting)
    t = make("once", params=Once)
    for _ in range(5):  # five turns
        t.input_schema()
        project_tools([t], "openai-responses")
        for provider in PROVIDERS:
            project(t, provider)
    assert len(calls) == 1


@pytest.mark.parametrize(
    "name", ["", "a" * 65, "get weather", "get.weather", "mcp/tool", "naïve", "a:b", "tool\t"]
)
def test_bad_tool_names_are_refused_at_definition(name: str) -> None:
    with pytest.raises(ToolDefinitionError):
        make(name, params=Weather)
    with pytest.raises(ToolDefinitionError):
        make("fine", params=Weather, namespace=name)

    def fn(city: str) -> str:
        """Doc."""
        return city

    if name:  # tool(name="") falls back to the function's name
        with pytest.raises(ToolDefinitionError):
            tool(name=name)(fn)


def test_tool_name_with_trailing_newline_is_refused() -> None:
    with pytest.raises(ToolDefinitionError):
        make("get_weather\n", params=Weather)


@pytest.mark.parametrize("name", ["a", "a" * 64, "get-weather_2", "GET_Weather"])
def test_good_tool_names_are_accepted(name: str) -> None:
    t = make(name, params=Weather)
    for provider in PROVIDERS:
        p = project(t, provider)
        assert (p.entry["function"] if provider == "openai-chat" else p.entry)["name"] == name


# -- exact entries (providers.md examples) ---------------------------------------------------
@pytest.mark.parametrize("source", ["pydantic", "external"])
def test_get_weather_entries_match_providers_md(source: str) -> None:
    about = {"name": "get_weather", "description": "Get current weather for a city."}
    t = (
        Tool.from_model(Weather, _noop, strict=True, **about)
        if source == "pydantic"
        else Tool.from_schema(EXTERNAL_WEATHER, _noop, strict=True, **about)
    )
    responses = project(t, "openai-responses")
    assert responses.entry == WEATHER_RESPONSES_STRICT
    assert list(responses.parameters["properties"]) == ["city", "unit"]  # key order kept
    assert responses.strict is True and responses.reason is None
    assert any("unit: optional, sent as required and nullable" in c for c in responses.changes)

    chat = project(t, "openai-chat")
    assert chat.entry == {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get current weather for a city.",
            "parameters": WEATHER_RESPONSES_STRICT["parameters"],
            "strict": True,
        },
    }

    anthropic = project(t, "anthropic")
    unit = (
        {"anyOf": [{"type": "string", "enum": ["c", "f"]}, {"type": "null"}]}
        if source == "pydantic"
        else {"type": "string", "enum": ["c", "f"]}
    )
    assert anthropic.entry == {
        "name": "get_weather",
        "description": "Get current weather for a city.",
        "input_schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": unit},
            "required": ["city"],
            "additionalProperties": False,
        },
        "strict": True,
    }
    assert anthropic.optional_params == 1
    assert anthropic.union_params == (1 if source == "pydantic" else 0)


def test_single_required_field_matches_providers_md_1_1() -> None:
    class City(BaseModel):
        city: str

    t = Tool.from_model(
        City,
        name="get_weather",
        description="Get current weather for a city.",
        execute=_noop,
    )
    parameters = {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    }
    assert project(t, "openai-responses").entry == {
        "type": "function",
        "name": "get_weather",
        "description": "Get current weather for a city.",
        "parameters": parameters,
        "strict": True,
    }
    assert project(t, "anthropic").entry["input_schema"] == parameters


def test_tool_without_params_projects_an_empty_closed_object() -> None:
    t = make("ping")
    for provider in PROVIDERS:
        p = project(t, provider)
        assert p.strict is True
        assert p.parameters == {
            "type": "object",
            "properties": {},
            "required": [],
            "additionalProperties": False,
        }


def test_unknown_provider_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unknown provider"):
        project(make("x", params=Weather), "gemini")
    with pytest.raises(ValueError, match="unknown provider"):
        project_tools([make("x", params=Weather)], "gemini")


# -- strict decisions -----------------------------------------------------------------------
def test_strict_false_leaves_the_schema_alone() -> None:
    for t in (make("order", params=Order, strict=False), make("exotic", schema=EXOTIC)):
        for provider in PROVIDERS:
            p = project(t, provider, strict=False)
            assert p.strict is False and p.reason and p.changes == ()
            assert p.parameters == t.input_schema()
            if provider == "anthropic":
                assert p.entry.get("strict") is None  # omitted means non-strict
            else:
                holder = p.entry["function"] if provider == "openai-chat" else p.entry
                assert holder["strict"] is False  # sent explicitly
    t = make("order", params=Order, strict=False)
    assert project(t, "openai-responses").strict is False  # the tool's own setting
    assert project(t, "openai-responses", strict=True).strict is True  # an explicit override


def test_strict_true_lists_every_incompatibility() -> None:
    t = make("exotic", schema=EXOTIC, strict=True)
    for provider in PROVIDERS:
        dialect = "anthropic" if provider == "anthropic" else "openai"
        with pytest.raises(SchemaError) as info:
            project(t, provider)
        err = info.value
        assert err.tool == "exotic" and err.provider == provider
        for path in EXOTIC_INCOMPATIBLE[dialect]:
            assert any(p.startswith(path + ":") for p in err.problems), (provider, path)
            assert path in str(err)
        # every problem carries a JSON path
        assert all(p.startswith("$") for p in err.problems)
    # nothing was cached for the failure; a retry fails the same way
    with pytest.raises(SchemaError):
        project(t, "openai-responses")


def test_strict_none_falls_back_with_the_reason() -> None:
    t = make("exotic", schema=EXOTIC)
    for provider in PROVIDERS:
        dialect = "anthropic" if provider == "anthropic" else "openai"
        p = project(t, provider)
        assert p.strict is False
        assert p.parameters == EXOTIC  # sent as it is
        assert p.reason is not None and p.reason.startswith("not strict-compatible")
        for path in EXOTIC_INCOMPATIBLE[dialect]:
            assert path + ":" in p.reason
        if provider != "anthropic":
            holder = p.entry["function"] if provider == "openai-chat" else p.entry
            assert holder["strict"] is False


def test_strict_is_decided_per_provider() -> None:
    class Sized(BaseModel):
        count: int = Field(ge=1, le=10)
        tags: list[str] = Field(min_length=2, max_length=5)

    t = make("sized", params=Sized)
    # OpenAI keeps minimum/maximum/minItems/maxItems: strict, nothing lost.
    for provider in OPENAI:
        p = project(t, provider)
        assert p.strict is True and p.reason is None
        assert p.parameters["properties"]["count"] == {
            "minimum": 1,
            "maximum": 10,
            "type": "integer",
        }
        assert p.parameters["properties"]["tags"]["minItems"] == 2
    # Anthropic cannot enforce them: strict=None stays non-strict, with the reason.
    auto = project(t, "anthropic")
    assert auto.strict is False and "strict" not in auto.entry
    assert auto.reason is not None
    for path, moved in (
        ("$.count", "minimum: 1"),
        ("$.count", "maximum: 10"),
        ("$.tags", "minItems: 2"),
        ("$.tags", "maxItems: 5"),
    ):
        assert f"{path}: Anthropic strict cannot enforce" in auto.reason
        assert moved in auto.reason.split(f"{path}: ")[1].split(";")[0]
    # strict=True accepts the loss: moved into the description and recorded.
    forced = project(t, "anthropic", strict=True)
    assert forced.strict is True and forced.entry["strict"] is True
    count = forced.parameters["properties"]["count"]
    assert set(count) == {"type", "description"}
    assert count["description"].startswith("Constraints: ")
    assert "minimum: 1" in count["description"] and "maximum: 10" in count["description"]
    tags = forced.parameters["properties"]["tags"]
    assert "minItems" not in tags and "maxItems" not in tags
    lossy = [c for c in forced.changes if "Anthropic strict cannot enforce" in c]
    assert [c.split(":")[0] for c in lossy] == ["$.count", "$.tags"]
    assert "minimum: 1" in lossy[0] and "minItems: 2" in lossy[1]


def test_description_keeps_the_authors_text_before_moved_constraints() -> None:
    schema = obj({"n": {"type": "integer", "description": "How many.", "multipleOf": 2}})
    p = project(make("n", schema=schema), "anthropic", strict=True)
    assert p.parameters["properties"]["n"]["description"] == (
        "How many. (Constraints: multipleOf: 2.)"
    )
    assert project(make("n", schema=schema), "openai-responses").parameters == {
        **schema,
        "additionalProperties": False,
    }


def test_anthropic_min_items_zero_or_one_only() -> None:
    schema = obj(
        {
            "one": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "zero": {"type": "array", "items": {"type": "string"}, "minItems": 0},
            "two": {"type": "array", "items": {"type": "string"}, "minItems": 2},
        }
    )
    t = make("arrays", schema=schema)
    auto = project(t, "anthropic")
    assert auto.strict is False and auto.reason is not None
    assert "$.two: Anthropic strict cannot enforce minItems: 2" in auto.reason
    assert "$.one" not in auto.reason and "$.zero" not in auto.reason
    forced = project(t, "anthropic", strict=True).parameters["properties"]
    assert forced["one"]["minItems"] == 1 and forced["zero"]["minItems"] == 0
    assert "minItems" not in forced["two"]


@pytest.mark.parametrize(
    ("prop", "openai_ok", "anthropic_ok"),
    [
        ({"type": "string", "format": "uri"}, False, True),  # uri: Anthropic only
        ({"type": "string", "format": "uuid"}, True, True),
        ({"type": "string", "pattern": "^[a-z]+$"}, True, True),
        ({"type": "string", "pattern": "^(?=a)\\w+$"}, True, False),  # lookahead
        ({"type": "string", "pattern": "(?<!x)y"}, True, False),  # lookbehind
        ({"type": "string", "pattern": "(a)\\1"}, True, False),  # backreference
        ({"type": "string", "pattern": "\\bword\\b"}, True, False),  # \b
        ({"type": "string", "maxLength": 5}, False, False),  # unconfirmed for OpenAI
        ({"type": "number", "exclusiveMinimum": 0, "multipleOf": 0.5}, True, False),
        ({"type": "array", "items": {"type": "integer"}, "maxItems": 3}, True, False),
    ],
)
def test_lossless_or_lossy_per_provider(
    prop: dict[str, Any], openai_ok: bool, anthropic_ok: bool
) -> None:
    schema = obj({"v": prop})
    expected: tuple[tuple[Dialect, bool], ...] = (
        ("openai", openai_ok),
        ("anthropic", anthropic_ok),
    )
    for dialect, ok in expected:
        conv = convert(schema, dialect)
        assert conv.incompatible == []
        assert (conv.lossy == []) is ok, (dialect, conv.lossy)
        assert conv.schema is not None
        kept = {k: v for k, v in prop.items() if k not in ("type", "items")}
        if ok:
            assert all(conv.schema["properties"]["v"][k] == v for k, v in kept.items())
        else:
            assert "Constraints:" in conv.schema["properties"]["v"]["description"]


def test_unconstrained_values_cannot_be_strict() -> None:
    class Loose(BaseModel):
        payload: Any = Field(None, description="Any JSON.")
        extra: dict[str, int] = {}

    t = make("loose", params=Loose)
    for provider in PROVIDERS:
        with pytest.raises(SchemaError) as info:
            project(t, provider, strict=True)
        problems = info.value.problems
        assert any(p.startswith("$.payload: an unconstrained value") for p in problems)
        assert any(p.startswith("$.extra: additionalProperties must be false") for p in problems)
        assert project(t, provider).strict is False
    untyped_map = obj({"m": {"additionalProperties": {"type": "string"}}})
    for dialect in DIALECTS:
        conv = convert(untyped_map, dialect)
        assert any(
            p.startswith("$.m: additionalProperties must be false") for p in conv.incompatible
        )


def test_root_union_and_bare_arrays_are_incompatible() -> None:
    assert convert({"anyOf": [obj({})]}, "openai").incompatible[0].startswith("$: the root")
    conv = convert(obj({"xs": {"type": "array"}, "t": {"type": "array", "items": [{}]}}), "openai")
    assert any("$.xs: an array without 'items'" in p for p in conv.incompatible)
    assert any("$.t: tuple 'items'" in p for p in conv.incompatible)


# -- OpenAI strict conversion ---------------------------------------------------------------
def test_openai_strict_conversion_of_a_rich_model() -> None:
    t = make("order", params=Order)
    for provider in OPENAI:
        p = project(t, provider)
        assert p.strict is True, p.reason
        schema = p.parameters
        assert_openai_strict_shape(schema)
        jsonschema_rs.meta.validate(schema)
        props = schema["properties"]
        # optional fields become nullable unions; required ones stay non-nullable
        defs = {"$defs": schema["$defs"]}
        for name in ("billing", "unit", "priority", "tags", "tree"):
            assert accepts_null({**props[name], **defs}), name
        for name in ("customer", "address", "quantity", "pet"):
            assert not accepts_null({**props[name], **defs}), name
        assert props["unit"] == {"anyOf": [{"$ref": "#/$defs/Unit"}, {"type": "null"}]}
        assert props["priority"] == {
            "anyOf": [{"enum": ["low", "high"], "type": "string"}, {"type": "null"}]
        }
        assert props["quantity"] == {"minimum": 1, "type": "integer"}
        assert props["tags"] == {
            "maxItems": 5,
            "type": ["array", "null"],
            "items": {"type": "string"},
        }
        assert props["customer"] == {"description": "Customer id.", "type": "string"}
        # a discriminated union is sent as anyOf over closed branches
        assert props["pet"] == {"anyOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}]}
        assert schema["$defs"]["Cat"]["required"] == ["kind", "lives"]
        # recursion is allowed for OpenAI (§2): the $ref stays
        assert schema["$defs"]["TreeNode"]["properties"]["children"]["items"] == {
            "$ref": "#/$defs/TreeNode"
        }
        assert any("'oneOf' sent as 'anyOf'" in c for c in p.changes)


ORDERS = [
    Order(
        customer="c1",
        address=Address(street="1 Main", city="Paris"),
        quantity=3,
        pet=Cat(kind="cat"),
    ),
    Order(
        customer="c2",
        address=Address(street="2 Side", city="Oslo", postcode="0150"),
        billing=Address(street="PO 1", city="Oslo"),
        unit=Unit.F,
        priority="high",
        quantity=1,
        tags=["a", "b"],
        pet=Dog(kind="dog", good=False),
        tree=TreeNode(label="r", children=[TreeNode(label="k")]),
    ),
]


def resolve(ref: str, root: dict[str, Any]) -> Any:
    target: Any = root
    for part in ref.removeprefix("#").strip("/").split("/"):
        if part:
            target = target[part]
    return target


def fill_absent(value: Any, schema: Any, root: dict[str, Any]) -> Any:
    """``value`` with every absent property present as ``null`` and unknown keys dropped.

    This is what a model constrained by the OpenAI strict schema sends for a value that is
    valid for the original schema (tooldeck maps the nulls back to "absent").
    """
    if isinstance(schema, dict) and "$ref" in schema:
        return fill_absent(value, resolve(schema["$ref"], root), root)
    if not isinstance(schema, dict):
        return value
    for key in ("anyOf", "oneOf"):
        if key in schema:
            defs: dict[str, Any] = {k: root[k] for k in ("$defs", "definitions") if k in root}
            for branch in schema[key]:
                if jsonschema_rs.validator_for({**branch, **defs}).is_valid(value):
                    return fill_absent(value, branch, root)
            return value
    if isinstance(value, dict) and "properties" in schema:
        return {
            name: fill_absent(value[name], sub, root) if name in value else None
            for name, sub in schema["properties"].items()
        }
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [fill_absent(v, schema["items"], root) for v in value]
    return value


@pytest.mark.parametrize("order", ORDERS)
def test_openai_strict_accepts_what_the_model_may_send(order: Order) -> None:
    t = make("order", params=Order)
    original = t.input_schema()
    strict = project(t, "openai-responses").parameters
    value = order.model_dump(mode="json", exclude_unset=True)
    assert jsonschema_rs.validator_for(original).is_valid(value)
    sent = fill_absent(value, original, original)
    assert jsonschema_rs.validator_for(strict).is_valid(sent), sent
    # a full dump (every key present, None for unset optionals) is accepted as well
    assert jsonschema_rs.validator_for(strict).is_valid(order.model_dump(mode="json"))


def test_openai_strict_recursion_via_root_ref() -> None:
    schema = obj({"name": {"type": "string"}, "child": {"$ref": "#"}}, required=["name"])
    for provider in OPENAI:
        p = project(make("rec", schema=schema), provider)
        assert p.strict is True
        assert p.parameters["properties"]["child"] == {"anyOf": [{"$ref": "#"}, {"type": "null"}]}
    assert project(make("rec", schema=schema), "anthropic").strict is False


def test_openai_strict_keeps_nullable_properties_as_they_are() -> None:
    schema = obj(
        {
            "a": {"type": ["string", "null"]},
            "b": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "c": {"enum": ["x", None]},
            "d": {"type": "integer"},
            "e": {"const": "k"},
        },
        required=["a"],
    )
    props = convert(schema, "openai").schema["properties"]  # type: ignore[index]
    assert props["a"] == {"type": ["string", "null"]}
    assert props["b"] == {"anyOf": [{"type": "integer"}, {"type": "null"}]}
    assert props["c"] == {"enum": ["x", None]}
    assert props["d"] == {"type": ["integer", "null"]}
    assert props["e"] == {"anyOf": [{"const": "k"}, {"type": "null"}]}


# -- OpenAI limits (providers.md §2) ------------------------------------------------------------
def openai_problems(schema: dict[str, Any]) -> list[str]:
    return convert(schema, "openai").incompatible


def chain(levels: int) -> dict[str, Any]:
    """``levels`` nested objects (the root included) around an integer."""
    schema: dict[str, Any] = {"type": "integer"}
    for _ in range(levels):
        schema = obj({"c": schema})
    return schema


def test_openai_property_limit() -> None:
    at = obj({f"p{i}": {"type": "boolean"} for i in range(5000)})
    assert openai_problems(at) == []
    # counted over nested objects and definitions too
    over = obj(
        {
            **{f"p{i}": {"type": "boolean"} for i in range(4998)},
            "inner": obj({"q": {"type": "boolean"}}),
            "r": {"$ref": "#/$defs/R"},
        },
        defs={"R": obj({"s": {"type": "boolean"}})},
    )
    assert any("5002 properties exceed OpenAI's limit of 5,000" in p for p in openai_problems(over))


def test_openai_nesting_limit() -> None:
    assert openai_problems(chain(9)) == []
    assert any(
        "nesting levels exceed OpenAI's limit of 10" in p for p in openai_problems(chain(11))
    )
    # through arrays as well
    deep = obj({"xs": {"type": "array", "items": chain(11)}})
    assert any("nesting levels" in p for p in openai_problems(deep))
    t = make("deep", schema=chain(11))
    auto = project(t, "openai-responses")
    assert auto.strict is False and auto.reason is not None and "nesting" in auto.reason
    with pytest.raises(SchemaError, match="nesting levels"):
        project(t, "openai-chat", strict=True)


def enum_values(count: int, width: int, prefix: str = "") -> list[str]:
    return [f"{prefix}{i:05d}".ljust(width, "x") for i in range(count)]


def test_openai_enum_value_limit() -> None:
    at = obj(
        {
            "a": {"type": "string", "enum": enum_values(500, 5)},
            "b": {"type": "string", "enum": enum_values(500, 5)},
        }
    )
    assert openai_problems(at) == []
    over = copy.deepcopy(at)
    over["properties"]["c"] = {"type": "string", "enum": ["z"]}
    over["required"].append("c")
    assert any(
        "1001 enum values exceed OpenAI's limit of 1,000" in p for p in openai_problems(over)
    )


def test_openai_large_enum_character_limit() -> None:
    # a single enum of more than 250 values may total at most 15,000 characters
    assert openai_problems(obj({"e": {"type": "string", "enum": enum_values(251, 59)}})) == []
    problems = openai_problems(obj({"e": {"type": "string", "enum": enum_values(251, 60)}}))
    assert any("$.e: an enum of over 250 values" in p for p in problems)
    # 250 values are not limited this way
    assert openai_problems(obj({"e": {"type": "string", "enum": enum_values(250, 100)}})) == []


def test_openai_total_string_limit() -> None:
    # property names + definition names + enum values + const values <= 120,000
    def build(extra: int) -> dict[str, Any]:
        props: dict[str, Any] = {
            "n" * 1000 + f"{i:03d}": {"type": "boolean"} for i in range(100)
        }  # 100,300
        props["e"] = {"type": "string", "enum": enum_values(10, 1000)}  # 1 + 10,000
        props["k"] = {"const": "k" * 3000}  # 1 + 3,000
        props["r"] = {"$ref": "#/$defs/" + "D" * 6000}  # 1
        defs = {"D" * 6000: {"type": "string"}}  # 6,000
        total = 100_300 + 10_001 + 3_001 + 1 + 6_000
        props["pad" + "p" * (120_000 - total - 3 + extra)] = {"type": "boolean"}
        return obj(props, defs=defs)

    assert openai_problems(build(0)) == []
    problems = openai_problems(build(1))
    assert any("120001 characters of names, enum and const values" in p for p in problems)


def test_limits_make_strict_none_non_strict() -> None:
    t = make("wide", schema=obj({f"p{i}": {"type": "boolean"} for i in range(5001)}))
    for provider in OPENAI:
        p = project(t, provider)
        assert p.strict is False and p.reason is not None and "5,000" in p.reason
        with pytest.raises(SchemaError, match="5,000"):
            project(t, provider, strict=True)


# -- Anthropic subset (providers.md §6.8) --------------------------------------------------------
def test_anthropic_keeps_optional_fields_optional() -> None:
    p = project(make("order", params=FlatOrder), "anthropic", strict=True)
    schema = p.parameters
    assert schema["required"] == ["customer", "address", "quantity", "pet"]
    for node in subschemas(schema):
        if is_object_node(node):
            assert node["additionalProperties"] is False
    assert schema["$defs"]["Address"]["required"] == ["street", "city"]
    assert "postcode" in schema["$defs"]["Address"]["properties"]


def test_anthropic_rejects_recursion_everywhere() -> None:
    cases = {
        "pydantic": make("order", params=Order).input_schema(),
        "root": obj({"child": {"$ref": "#"}}, required=[]),
        "def_to_root": obj(
            {"a": {"$ref": "#/$defs/A"}}, defs={"A": obj({"back": {"$ref": "#"}}, [])}
        ),
        "mutual": {
            **obj({"a": {"$ref": "#/definitions/A"}}),
            "definitions": {
                "A": obj({"b": {"$ref": "#/definitions/B"}}, []),
                "B": obj({"a": {"$ref": "#/definitions/A"}}, []),
            },
        },
        "pointer": obj({"y": obj({"again": {"$ref": "#/properties/y"}}, [])}, required=[]),
        "unused_def": obj({}, defs={"L": obj({"next": {"$ref": "#/$defs/L"}}, [])}),
    }
    for label, schema in cases.items():
        problems = convert(schema, "anthropic").incompatible
        assert any("recursive schema" in p for p in problems), label
        assert convert(schema, "openai").incompatible == [], label


def test_anthropic_reports_every_cycle() -> None:
    schema = obj(
        {"a": {"$ref": "#/$defs/A"}, "b": {"$ref": "#/$defs/B"}},
        defs={
            "A": obj({"a": {"$ref": "#/$defs/A"}}, []),
            "B": obj({"b": {"$ref": "#/$defs/B"}}, []),
        },
    )
    problems = convert(schema, "anthropic").incompatible
    assert any("#/$defs/A -> #/$defs/A" in p for p in problems)
    assert any("#/$defs/B -> #/$defs/B" in p for p in problems)


def test_anthropic_non_recursive_refs_are_fine() -> None:
    schema = obj(
        {"a": {"$ref": "#/$defs/A"}, "also": {"$ref": "#/$defs/A"}},
        defs={"A": obj({"b": {"$ref": "#/$defs/B"}}), "B": obj({"x": {"type": "string"}})},
    )
    conv = convert(schema, "anthropic")
    assert conv.incompatible == [] and conv.lossy == []


def test_anthropic_all_of() -> None:
    scalar = obj({"code": {"allOf": [{"type": "string"}, {"pattern": "^[A-Z]+$"}]}})
    p = project(make("code", schema=scalar), "anthropic")
    assert p.strict is True
    assert p.parameters["properties"]["code"] == scalar["properties"]["code"]

    with_ref = obj({"x": {"allOf": [{"$ref": "#/$defs/X"}]}}, defs={"X": obj({})})
    assert (
        "$.x: 'allOf' with '$ref' is not supported" in convert(with_ref, "anthropic").incompatible
    )

    # Closing each object of an allOf separately would reject every real value.
    merged = obj({"x": {"allOf": [obj({"a": {"type": "string"}}), obj({"b": {"type": "string"}})]}})
    conv = convert(merged, "anthropic")
    assert any(p.startswith("$.x: 'allOf' combining object") for p in conv.incompatible)
    with pytest.raises(SchemaError):
        project(make("merged", schema=merged), "anthropic", strict=True)


def test_anthropic_scalar_enums_only() -> None:
    schema = obj({"e": {"enum": [{"a": 1}, "b"]}, "k": {"const": [1, 2]}})
    problems = convert(schema, "anthropic").incompatible
    assert "$.e: Anthropic strict allows scalar enum only" in problems
    assert "$.k: Anthropic strict allows scalar const only" in problems


def test_external_ref_is_never_strict() -> None:
    schema = obj({"r": {"$ref": "other.json#/Thing"}})
    for dialect in DIALECTS:
        problems = convert(schema, dialect).incompatible
        assert problems == ["$.r: external $ref 'other.json#/Thing' cannot be strict"]


def test_anthropic_counts_optional_and_union_parameters() -> None:
    class Counted(BaseModel):
        a: str
        b: str = "x"  # optional
        c: int | None = None  # optional, union
        d: int | str  # union
        e: list[int | None] = []  # optional, union inside

    p = project(make("counted", params=Counted), "anthropic")
    assert p.strict is True
    assert (p.optional_params, p.union_params) == (3, 3)


# -- Anthropic per-request limits (project_tools) --------------------------------------------------
class _City(BaseModel):
    city: str


def simple_tools(count: int, prefix: str, **options: Any) -> list[Tool]:
    return [make(f"{prefix}{i}", params=_City, **options) for i in range(count)]


def test_anthropic_twenty_strict_tools_per_request() -> None:
    tools = simple_tools(ANTHROPIC_MAX_STRICT_TOOLS + 1, "auto")
    entries, projections = project_tools(tools, "anthropic")
    assert [p.strict for p in projections] == [True] * 20 + [False]
    assert "strict" not in entries[-1] and all(e["strict"] is True for e in entries[:20])
    last = projections[-1]
    assert last.reason is not None and "per-request strict limits" in last.reason
    # the same tools stay strict for OpenAI, which has no such limit
    _, openai = project_tools(tools, "openai-responses")
    assert all(p.strict for p in openai)


def test_anthropic_explicit_strict_gets_the_budget_first() -> None:
    auto = simple_tools(ANTHROPIC_MAX_STRICT_TOOLS, "auto")
    explicit = simple_tools(2, "explicit", strict=True)
    off = simple_tools(3, "off", strict=False)
    entries, projections = project_tools([*auto, *off, *explicit], "anthropic")
    by_name = {p.tool: p for p in projections}
    assert by_name["explicit0"].strict and by_name["explicit1"].strict
    assert [by_name[f"auto{i}"].strict for i in range(20)] == [True] * 18 + [False] * 2
    assert not any(by_name[f"off{i}"].strict for i in range(3))  # and they cost nothing
    assert sum(1 for e in entries if e.get("strict")) == 20
    assert [e["name"] for e in entries] == [t.name for t in [*auto, *off, *explicit]]


def test_anthropic_explicit_strict_beyond_the_budget_raises() -> None:
    tools = simple_tools(ANTHROPIC_MAX_STRICT_TOOLS + 2, "s", strict=True)
    with pytest.raises(SchemaError) as info:
        project_tools(tools, "anthropic")
    assert info.value.provider == "anthropic"
    assert [p.split(":")[0] for p in info.value.problems] == ["s20", "s21"]


def test_anthropic_optional_parameter_budget() -> None:
    five_optional = create_model(
        "FiveOptional",
        **{f"o{i}": (str, "x") for i in range(5)},  # type: ignore[call-overload]
    )
    tools = [make(f"opt{i}", params=five_optional) for i in range(5)]
    _, projections = project_tools(tools, "anthropic")
    assert ANTHROPIC_MAX_OPTIONAL_PARAMS == 24
    assert [p.strict for p in projections] == [True] * 4 + [False]  # 20 fit, 25 do not
    with pytest.raises(SchemaError, match="opt4"):
        project_tools(
            [make(f"opt{i}", params=five_optional, strict=True) for i in range(5)], "anthropic"
        )
    too_many = create_model(
        "TooMany",
        **{f"o{i}": (str, "x") for i in range(25)},  # type: ignore[call-overload]
    )
    _, alone = project_tools([make("alone", params=too_many)], "anthropic")
    assert alone[0].strict is False and alone[0].reason


def test_anthropic_union_parameter_budget() -> None:
    four_unions = create_model(
        "FourUnions",
        **{f"u{i}": (int | str, ...) for i in range(4)},  # type: ignore[call-overload]
    )
    tools = [make(f"uni{i}", params=four_unions) for i in range(5)]
    _, projections = project_tools(tools, "anthropic")
    assert ANTHROPIC_MAX_UNION_PARAMS == 16
    assert [p.union_params for p in projections[:4]] == [4] * 4
    assert [p.strict for p in projections] == [True] * 4 + [False]


# -- namespaces and deferral (providers.md §1.1, §1.8) --------------------------------------------
def test_namespaces_group_tools_for_responses() -> None:
    get = make("get_customer", params=_City, namespace="crm", namespace_description="CRM ops.")
    put = make("put_customer", params=_City, namespace="crm")
    lone = make("lone", params=_City)
    bill = make("bill", params=_City, namespace="billing", namespace_description="Billing.")
    entries, projections = project_tools([lone, get, bill, put], "openai-responses")
    assert [e.get("name") for e in entries] == ["lone", "crm", "billing"]
    assert entries[1] == {
        "type": "namespace",
        "name": "crm",
        "description": "CRM ops.",
        "tools": [project(get, "openai-responses").entry, project(put, "openai-responses").entry],
    }
    assert entries[2]["tools"][0]["name"] == "bill"
    assert len(projections) == 4
    # other providers have no namespaces: flat entries in the given order
    for provider in ("openai-chat", "anthropic"):
        flat, _ = project_tools([lone, get, bill, put], provider)
        names = [e["function"]["name"] if provider == "openai-chat" else e["name"] for e in flat]
        assert names == ["lone", "get_customer", "bill", "put_customer"]


def test_namespace_description_may_come_from_any_member() -> None:
    first = make("a", params=_City, namespace="ns")
    second = make("b", params=_City, namespace="ns", namespace_description="Later.")
    entries, _ = project_tools([first, second], "openai-responses")
    assert entries[0]["description"] == "Later."


def test_namespace_without_description_is_an_error() -> None:
    tools = [make("a", params=_City, namespace="ns"), make("b", params=_City, namespace="ns")]
    with pytest.raises(SchemaError, match="ns"):
        project_tools(tools, "openai-responses")


def test_deferred_tools() -> None:
    get = make("get_customer", params=_City, namespace="crm", namespace_description="CRM.")
    lone = make("lone", params=_City)
    keep = make("keep", params=_City)
    deferred = ["get_customer", "lone"]
    entries, _ = project_tools([get, lone, keep], "openai-responses", deferred=deferred)
    crm, lone_entry, keep_entry = entries
    assert "defer_loading" not in crm  # on the member functions only (§1.1)
    assert crm["tools"][0]["defer_loading"] is True
    assert lone_entry["defer_loading"] is True
    assert "defer_loading" not in keep_entry
    entries, _ = project_tools([get, lone, keep], "anthropic", deferred=deferred)
    assert [e.get("defer_loading") for e in entries] == [True, True, None]
    entries, _ = project_tools([get, lone, keep], "openai-chat", deferred=deferred)
    assert all("defer_loading" not in e and "defer_loading" not in e["function"] for e in entries)
    # deferral does not leak into the non-deferred projection of the same tool
    assert "defer_loading" not in project(lone, "openai-responses").entry


def test_duplicate_names_in_one_request() -> None:
    tools = [make("same", params=_City), make("same", params=Weather)]
    for provider in PROVIDERS:
        with pytest.raises(SchemaError, match="two tools with this name"):
            project_tools(tools, provider)


# -- caching and immutability -------------------------------------------------------------
ALL_TOOLS: dict[str, Callable[[], Tool]] = {
    "order": lambda: make("order", params=Order),
    "weather": lambda: make("get_weather", params=Weather),
    "exotic": lambda: make("exotic", schema=EXOTIC),
    "external_weather": lambda: make("ext_weather", schema=EXTERNAL_WEATHER),
    "recursive": lambda: make("rec", schema=obj({"n": {"$ref": "#"}}, required=[])),
    "ns": lambda: make("ns_tool", params=Weather, namespace="ns", namespace_description="NS."),
}


@pytest.mark.parametrize("which", sorted(ALL_TOOLS))
def test_projection_is_cached_and_never_mutates_the_tool(which: str) -> None:
    t = ALL_TOOLS[which]()
    before = json.dumps(t.input_schema())
    shared = t.schema
    for provider in PROVIDERS:
        for strict in (None, False, True):
            try:
                first = project(t, provider, strict=strict)
            except SchemaError:
                continue
            assert project(t, provider, strict=strict) is first
            assert project(t, provider, strict=strict, defer=True) is project(
                t, provider, strict=strict, defer=True
            )
            json.dumps(first.entry)  # plain JSON
            jsonschema_rs.meta.validate(first.parameters)
        project_tools([t], provider, deferred=[t.name])
    assert json.dumps(t.input_schema()) == before
    assert t.schema is shared and json.dumps(t.schema) == before


def test_project_tools_reuses_cached_entries() -> None:
    tools = [make("a", params=Weather), make("b", params=Order)]
    first, _ = project_tools(tools, "openai-chat")
    second, _ = project_tools(tools, "openai-chat")
    assert all(x is y for x, y in zip(first, second, strict=True))
    assert first[0] is project(tools[0], "openai-chat").entry


def test_projection_parameters_property() -> None:
    t = make("w", params=Weather)
    for provider in PROVIDERS:
        p = project(t, provider)
        assert isinstance(p, Projection) and p.provider == provider and p.tool == "w"
        holder = p.entry["function"] if provider == "openai-chat" else p.entry
        key = "input_schema" if provider == "anthropic" else "parameters"
        assert p.parameters is holder[key]


# -- shape checks against the OpenAI OpenAPI spec -----------------------------------------------
@pytest.fixture(scope="module")
def openapi() -> dict[str, Any]:
    yaml = pytest.importorskip("yaml")
    if not OPENAPI_SPEC.exists():
        pytest.skip("openai-openapi.yml not available")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with OPENAPI_SPEC.open() as f:
        schemas: dict[str, Any] = yaml.load(f, Loader=loader)["components"]["schemas"]
    return schemas


def spec_validator(schemas: dict[str, Any], name: str) -> Any:
    return jsonschema_rs.validator_for(
        {"$ref": f"#/components/schemas/{name}", "components": {"schemas": schemas}}
    )


def spec_errors(validator: Any, instance: Any) -> list[str]:
    return [e.message for e in validator.iter_errors(instance)]


def all_entries(provider: str) -> list[dict[str, Any]]:
    """Every kind of entry tooldeck produces for ``provider``."""
    entries: list[dict[str, Any]] = []
    tools = [factory() for factory in ALL_TOOLS.values()]
    for t in tools:
        for strict in (None, False, True):
            for defer in (False, True):
                with contextlib.suppress(SchemaError):  # e.g. strict=True on EXOTIC
                    entries.append(project(t, provider, strict=strict, defer=defer).entry)
    grouped, _ = project_tools(tools, provider, deferred=["order", "ns_tool"])
    return entries + grouped


def test_responses_entries_match_the_openapi_spec(openapi: dict[str, Any]) -> None:
    tools_array = spec_validator(openapi, "ToolsArray")
    function = spec_validator(openapi, "FunctionToolParam")
    namespace = spec_validator(openapi, "NamespaceToolParam")
    function_keys = set(openapi["FunctionToolParam"]["properties"])
    namespace_keys = set(openapi["NamespaceToolParam"]["properties"])
    entries = all_entries("openai-responses")
    assert any(e["type"] == "namespace" for e in entries)
    assert spec_errors(tools_array, entries) == []
    for entry in entries:
        if entry["type"] == "namespace":
            assert spec_errors(namespace, entry) == []
            assert set(entry) <= namespace_keys
            members = entry["tools"]
        else:
            members = [entry]
        for member in members:
            assert spec_errors(function, member) == [], member["name"]
            assert set(member) <= function_keys
            assert isinstance(member["strict"], bool)  # always explicit (providers.md §1.1)


def test_chat_entries_match_the_openapi_spec(openapi: dict[str, Any]) -> None:
    validator = spec_validator(openapi, "ChatCompletionTool")
    tool_keys = set(openapi["ChatCompletionTool"]["properties"])
    function_keys = set(openapi["FunctionObject"]["properties"])
    for entry in all_entries("openai-chat"):
        assert spec_errors(validator, entry) == []
        assert set(entry) <= tool_keys and set(entry["function"]) <= function_keys
        assert isinstance(entry["function"]["strict"], bool)


def test_anthropic_entries_have_the_documented_shape() -> None:
    documented = {
        *("type", "name", "description", "input_schema", "strict", "defer_loading"),
        *("cache_control", "eager_input_streaming", "input_examples", "allowed_callers"),
    }
    for entry in all_entries("anthropic"):
        assert set(entry) <= documented
        assert entry["input_schema"]["type"] == "object"
        assert entry.get("strict", True) is True  # sent only when strict
        assert entry.get("defer_loading", True) is True


# -- property: OpenAI strict conversion of Pydantic-like schemas ------------------------------
_SCALAR_SCHEMAS: list[dict[str, Any]] = [
    {"type": "string"},
    {"type": "integer"},
    {"type": "number"},
    {"type": "boolean"},
    {"type": "string", "enum": ["a", "b", "c"]},
    {"type": "string", "const": "k"},
    {"type": "string", "pattern": "^[a-z]{1,4}$"},
    {"type": "string", "format": "date"},
    {"type": "integer", "minimum": 0, "maximum": 9},
    {"type": "string", "maxLength": 3, "description": "Short."},
    {"type": ["string", "null"]},
    {"anyOf": [{"type": "integer"}, {"type": "null"}]},
    {"anyOf": [{"type": "integer"}, {"type": "string"}], "default": 1},
    {"$ref": "#/$defs/Point"},
]
_SCALARS = st.sampled_from(_SCALAR_SCHEMAS)
_NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True)
_POINT = obj({"x": {"type": "number"}, "y": {"type": "number", "default": 0}}, required=["x"])


@st.composite
def _objects(draw: st.DrawFn, children: st.SearchStrategy[dict[str, Any]]) -> dict[str, Any]:
    props = draw(st.dictionaries(_NAMES, children, max_size=4))
    required = [name for name in props if draw(st.booleans())]
    schema: dict[str, Any] = {"type": "object", "properties": props}
    empty_required: bool = draw(st.booleans())  # Pydantic omits an empty "required"
    if required or empty_required:
        schema["required"] = required
    if draw(st.booleans()):
        schema["additionalProperties"] = False  # model_config extra="forbid"
    if draw(st.booleans()):
        schema["title"] = "Model"
    return schema


def _extend(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(
        _objects(children),
        _objects(children).map(lambda o: {"anyOf": [o, {"type": "null"}], "default": None}),
        children.map(lambda c: {"type": "array", "items": c, "maxItems": 3}),
    )


def values_for(schema: dict[str, Any], root: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values valid for ``schema``.

    hypothesis_jsonschema 0.23.1 cannot generate objects with the installed Hypothesis
    (``AttributeError: 'many' object has no attribute 'more'``), so objects, arrays, unions
    and references are composed here and only the leaves come from ``from_schema``.
    """
    if "$ref" in schema:
        return values_for(resolve(schema["$ref"], root), root)
    if "anyOf" in schema:
        return st.one_of([values_for(branch, root) for branch in schema["anyOf"]])
    if schema.get("type") == "object":
        props = schema["properties"]
        required = schema.get("required", [])
        return st.fixed_dictionaries(
            {n: values_for(sub, root) for n, sub in props.items() if n in required},
            optional={n: values_for(sub, root) for n, sub in props.items() if n not in required},
        )
    if schema.get("type") == "array":
        return st.lists(values_for(schema["items"], root), max_size=schema["maxItems"])
    return from_schema(schema)


_ROOTS = _objects(st.recursive(_SCALARS, _extend, max_leaves=8)).map(
    lambda s: {**s, "$defs": {"Point": _POINT}}
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_openai_strict_conversion_property(data: st.DataObject) -> None:
    schema = data.draw(_ROOTS, label="schema")
    frozen = json.dumps(schema)
    conv = convert(schema, "openai")
    assert json.dumps(schema) == frozen  # never mutates its input
    assert conv.incompatible == []
    assert conv.schema is not None
    assert_openai_strict_shape(conv.schema)
    jsonschema_rs.meta.validate(conv.schema)
    value = data.draw(values_for(schema, schema), label="value")
    assert jsonschema_rs.validator_for(schema).is_valid(value)
    sent = fill_absent(value, schema, schema)
    validator = jsonschema_rs.validator_for(conv.schema)
    assert validator.is_valid(sent), (sent, [e.message for e in validator.iter_errors(sent)])


class _Forbid(BaseModel):
    model_config = ConfigDict(extra="forbid")
    a: int
    b: str | None = None


def test_extra_forbid_models_are_already_closed() -> None:
    p = project(make("forbid", params=_Forbid), "openai-responses")
    assert p.strict is True
    assert not any("set additionalProperties false" in c for c in p.changes)
    assert p.parameters["additionalProperties"] is False
