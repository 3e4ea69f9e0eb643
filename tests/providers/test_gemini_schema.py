"""Tool schemas projected to Gemini's JSON Schema subset: what is kept, rewritten, dropped
(and said where), the reasons recorded, and properties over arbitrary schemas."""

from __future__ import annotations

import copy
import json
from typing import Annotated, Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs
from pydantic import BaseModel, Field

from tooldeck import tool
from tooldeck.errors import SchemaError
from tooldeck.providers._gemini_schema import (
    SUPPORTED,
    project_gemini,
    project_gemini_tools,
    project_schema,
)

_NESTING = ("items", "prefixItems", "anyOf", "oneOf", "additionalProperties")


def _keys(schema: Any) -> set[str]:
    """Every keyword of ``schema`` reached through the keywords that nest schemas Gemini
    takes (property and $defs names excluded; inside a dropped keyword is not reached)."""
    found: set[str] = set()
    if isinstance(schema, dict):
        for key, value in schema.items():
            found.add(key)
            if key in ("properties", "$defs") and isinstance(value, dict):
                for sub in value.values():
                    found |= _keys(sub)
            elif key in _NESTING and isinstance(value, (dict, list)):
                found |= _keys(value)
    elif isinstance(schema, list):
        for item in schema:
            found |= _keys(item)
    return found


class Address(BaseModel):
    street: str
    city: str


@tool
def book(
    code: Annotated[str, Field(pattern=r"^[A-Z]{3}$", description="IATA code")],
    seats: Annotated[int, Field(gt=0, le=9)],
    kind: Literal["one-way", "return"],
    address: Address,
    tags: Annotated[list[str], Field(max_length=3)] = [],  # noqa: B006
    note: str | None = None,
) -> str:
    """Book a flight."""
    return "ok"


def test_dropped_constraints_are_told_in_descriptions_and_recorded() -> None:
    projection = project_gemini(book)
    params = projection.parameters
    assert _keys(params) <= SUPPORTED
    code = params["properties"]["code"]
    assert code == {"type": "string", "description": "IATA code (pattern: " + r'"^[A-Z]{3}$")'}
    seats = params["properties"]["seats"]
    assert seats["maximum"] == 9 and "exclusiveMinimum" not in seats
    assert seats["description"] == "(exclusiveMinimum: 0)"
    assert params["properties"]["kind"]["enum"] == ["one-way", "return"]
    assert params["properties"]["address"] == {"$ref": "#/$defs/Address"}
    assert params["$defs"]["Address"]["required"] == ["street", "city"]
    assert params["properties"]["note"]["anyOf"] == [{"type": "string"}, {"type": "null"}]
    assert set(projection.dropped) == {
        "$.properties.code.pattern",
        "$.properties.seats.exclusiveMinimum",
    }
    assert projection.reason is not None
    assert "$.properties.code.pattern" in projection.reason
    assert projection.reason.startswith("not Gemini's schema subset")
    assert "pattern" in book.schema["properties"]["code"]  # the tool's own schema is whole


def test_a_schema_gemini_takes_whole_has_no_reason() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    projection = project_gemini(add)
    assert projection.reason is None and projection.dropped == ()
    assert projection.entry == {
        "name": "add",
        "description": "Add.",
        "parametersJsonSchema": add.schema,
    }
    assert project_gemini(add) is projection  # cached on the tool


def test_rewrites_that_keep_what_is_accepted() -> None:
    schema = {
        "type": "object",
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "properties": {
            "mode": {"const": "fast", "default": "fast"},
            "shape": {"oneOf": [{"$ref": "#/definitions/Box"}, {"type": "string"}]},
            "flag": {"enum": [True, False]},
        },
        "definitions": {"Box": {"type": "object", "properties": {"w": {"type": "number"}}}},
    }
    before = copy.deepcopy(schema)
    projected = project_schema(schema)
    assert schema == before  # never mutated
    props = projected.schema["properties"]
    assert props["mode"] == {"enum": ["fast"]}
    assert props["shape"] == {"anyOf": [{"$ref": "#/$defs/Box"}, {"type": "string"}]}
    assert projected.schema["$defs"] == before["definitions"]
    assert "$schema" not in projected.schema
    # an enum of booleans is not Gemini's: dropped, and said
    assert "enum" not in props["flag"] and props["flag"]["description"] == "(enum: [true,false])"
    assert projected.dropped == ("$.properties.flag.enum (only strings and numbers)",)
    assert any("sent as anyOf" in c for c in projected.changes)


def test_nothing_but_dollar_keywords_beside_a_ref() -> None:
    projected = project_schema(
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/A", "description": "an A"}}}
    )
    assert projected.schema["properties"]["a"] == {"$ref": "#/$defs/A"}
    assert projected.dropped == ("$.properties.a.description (beside $ref)",)


def test_a_name_gemini_refuses_is_a_schema_error_before_any_request() -> None:
    @tool(name="1st-tool")
    def first() -> str:
        """First."""
        return ""

    with pytest.raises(SchemaError, match="start with a letter"):
        project_gemini(first)
    with pytest.raises(SchemaError, match="two tools with this name"):
        project_gemini_tools([book, book])


# -- properties over arbitrary schemas ---------------------------------------------------

_KEYWORDS = [
    "type",
    "description",
    "pattern",
    "minLength",
    "maxLength",
    "minimum",
    "exclusiveMaximum",
    "multipleOf",
    "format",
    "title",
    "default",
    "examples",
    "uniqueItems",
    "not",
    "allOf",
    "if",
    "const",
    "enum",
    "minProperties",
    "patternProperties",
    "dependentRequired",
]
_scalars = hs.one_of(
    hs.none(), hs.booleans(), hs.integers(-5, 5), hs.text(max_size=5), hs.floats(0, 1)
)


def _schemas() -> hs.SearchStrategy[Any]:
    leaf = hs.dictionaries(hs.sampled_from(_KEYWORDS), _scalars, max_size=4)
    return hs.recursive(
        leaf,
        lambda inner: hs.one_of(
            hs.fixed_dictionaries(
                {"properties": hs.dictionaries(hs.text(min_size=1, max_size=4), inner, max_size=3)}
            ),
            hs.fixed_dictionaries({"items": inner}),
            hs.fixed_dictionaries({"anyOf": hs.lists(inner, max_size=3)}),
            hs.fixed_dictionaries({"oneOf": hs.lists(inner, max_size=3)}),
            hs.fixed_dictionaries({"allOf": hs.lists(inner, max_size=2)}),
            hs.fixed_dictionaries({"$ref": hs.just("#/$defs/X"), "description": hs.text()}),
            hs.dictionaries(hs.sampled_from(_KEYWORDS), _scalars, max_size=3),
        ),
        max_leaves=12,
    )


@settings(max_examples=200, deadline=None)
@given(_schemas())
def test_any_schema_projects_to_the_subset_and_says_what_it_dropped(schema: Any) -> None:
    before = json.dumps(schema, sort_keys=True)
    projected = project_schema(schema)
    assert json.dumps(schema, sort_keys=True) == before  # the input is never changed
    assert _keys(projected.schema) <= SUPPORTED | {"description"}
    json.dumps(projected.schema)  # plain JSON
    # every keyword the subset lacks is either an annotation change or recorded as dropped
    recorded = " ".join(projected.dropped) + " " + " ".join(projected.changes)
    for key in _keys(schema) - SUPPORTED - {"oneOf"}:
        assert f".{key}" in recorded, key
    assert (projected.reason is None) == (not projected.dropped)
