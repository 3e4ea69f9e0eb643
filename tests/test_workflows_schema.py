"""Result schemas (closed shapes, accepted and rejected with paths), strict projection of
submit_result for every provider, workflow definitions and workflow scripts."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

import jsonschema_rs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, RootModel

from tooldeck.assembly import TurnContext
from tooldeck.builtin import load_builtin_registry
from tooldeck.schema import PROVIDERS, project, project_tools
from tooldeck.workflows import (
    ResultSchemaError,
    Task,
    TaskRecord,
    Workflow,
    WorkflowDefinitionError,
    load_script,
    result_schema,
    submit_result_tool,
    task_toolset,
)
from tooldeck.workflows.control import ControlPlane
from tooldeck.workflows.shapes import WRAPPED_PROPERTY

SCRIPTS = Path(__file__).parent / "workflow_scripts"
REGISTRY = load_builtin_registry()


def obj(**props: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": props,
        "required": list(props),
        "additionalProperties": False,
    }


class Color(StrEnum):
    red = "red"
    blue = "blue"


class Line(BaseModel):
    sku: str = Field(pattern=r"^[A-Z]{3}-\d+$")
    quantity: int = Field(ge=1, le=1000)
    price: float = Field(gt=0)


class Order(BaseModel):
    """An order with lines."""

    customer: str
    color: Color
    kind: Literal["new", "repeat"]
    channel: Literal["web"]
    lines: list[Line] = Field(min_length=1, max_length=50)
    gift: Line | None = None
    note: str | None
    rush: bool = False


ACCEPTED: list[tuple[str, Any]] = [
    ("flat object", obj(name={"type": "string"}, age={"type": "integer"})),
    ("empty object", obj()),
    ("nested object", obj(a=obj(b=obj(c={"type": "boolean"})))),
    ("array of objects", obj(items={"type": "array", "items": obj(x={"type": "number"})})),
    (
        "array of arrays",
        obj(m={"type": "array", "items": {"type": "array", "items": {"type": "integer"}}}),
    ),
    ("string enum", obj(level={"type": "string", "enum": ["low", "high"]})),
    ("untyped enum", obj(level={"enum": ["low", 2, True]})),
    ("integer enum", obj(n={"type": "integer", "enum": [1, 2, 3]})),
    ("const", obj(kind={"const": "fixed"})),
    ("nullable type list", obj(name={"type": ["string", "null"]})),
    ("nullable anyOf", obj(name={"anyOf": [{"type": "string"}, {"type": "null"}]})),
    ("nullable anyOf, null first", obj(name={"anyOf": [{"type": "null"}, {"type": "integer"}]})),
    ("nullable enum", obj(level={"type": ["string", "null"], "enum": ["a", "b", None]})),
    ("nullable object", obj(o={"anyOf": [obj(x={"type": "string"}), {"type": "null"}]})),
    (
        "nullable object, type list",
        obj(o={**obj(x={"type": "string"}), "type": ["object", "null"]}),
    ),
    ("nullable array", obj(xs={"type": ["array", "null"], "items": {"type": "string"}})),
    (
        "string constraints",
        obj(
            code={"type": "string", "minLength": 2, "maxLength": 8, "pattern": "^[a-z]+$"},
            when={"type": "string", "format": "date"},
            site={"type": "string", "format": "uri"},
        ),
    ),
    (
        "number constraints",
        obj(
            score={"type": "number", "minimum": 0, "maximum": 1, "multipleOf": 0.5},
            rank={"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 100},
        ),
    ),
    (
        "array bounds",
        obj(tags={"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 5}),
    ),
    (
        "annotations",
        {**obj(a={"type": "string", "title": "A", "description": "an a"}), "title": "R"},
    ),
    (
        "defs and refs",
        {
            **obj(a={"$ref": "#/$defs/A"}, b={"$ref": "#/$defs/A"}),
            "$defs": {"A": obj(x={"type": "string"})},
        },
    ),
    ("root array", {"type": "array", "items": obj(x={"type": "string"})}),
    ("root string", {"type": "string", "maxLength": 100}),
    ("root integer", {"type": "integer"}),
    ("root boolean", {"type": "boolean"}),
    ("root enum", {"enum": ["yes", "no"]}),
    ("root nullable", {"type": ["number", "null"]}),
    ("root nullable object", {"anyOf": [obj(x={"type": "string"}), {"type": "null"}]}),
    ("pydantic model", Order),
    ("pydantic nested", Line),
    (
        "sixteen nullable values",
        obj(**{f"f{i}": {"type": ["string", "null"]} for i in range(16)}),
    ),
    (
        "ten levels",
        {
            "type": "array",
            "items": {
                "type": "array",
                "items": {
                    "type": "array",
                    "items": {
                        "type": "array",
                        "items": {
                            "type": "array",
                            "items": {
                                "type": "array",
                                "items": {
                                    "type": "array",
                                    "items": {"type": "array", "items": {"type": "string"}},
                                },
                            },
                        },
                    },
                },
            },
        },
    ),
]


class OpenModel(BaseModel):
    model_config = ConfigDict(extra="allow")
    a: int


class MapModel(BaseModel):
    name: str
    labels: dict[str, str]


class AnyModel(BaseModel):
    payload: Any


class UnionModel(BaseModel):
    value: int | str


class TupleModel(BaseModel):
    pair: tuple[int, str]


class Tree(BaseModel):
    name: str
    children: list[Tree]


class Wrapper(RootModel[list[int]]):
    pass


REJECTED: list[tuple[str, Any, str]] = [
    (
        "no additionalProperties",
        {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
        "$: an object must set additionalProperties: false",
    ),
    (
        "additionalProperties true",
        {**obj(a={"type": "string"}), "additionalProperties": True},
        "$: additionalProperties must be false",
    ),
    (
        "free-form map",
        obj(m={"type": "object", "additionalProperties": {"type": "string"}}),
        "$.m: additionalProperties must be false",
    ),
    (
        "optional property",
        {**obj(a={"type": "string"}, b={"type": "string"}), "required": ["a"]},
        "$.b: optional property",
    ),
    (
        "object without properties",
        {"type": "object", "additionalProperties": False},
        "$: an object needs fixed 'properties'",
    ),
    (
        "required names a missing property",
        {**obj(a={"type": "string"}), "required": ["a", "zz"]},
        "'required' names 'zz'",
    ),
    ("array without items", obj(xs={"type": "array"}), "$.xs: an array needs 'items'"),
    (
        "tuple items",
        obj(xs={"type": "array", "items": [{"type": "string"}]}),
        "$.xs: tuple 'items'",
    ),
    (
        "prefixItems",
        obj(xs={"type": "array", "items": {"type": "string"}, "prefixItems": [{"type": "string"}]}),
        "$.xs: 'prefixItems' is not supported",
    ),
    (
        "union of two shapes",
        obj(v={"anyOf": [{"type": "string"}, {"type": "integer"}]}),
        "$.v: 'anyOf' is only supported as a nullable variant",
    ),
    (
        "oneOf",
        obj(v={"oneOf": [{"type": "string"}, {"type": "integer"}]}),
        "$.v: 'oneOf' is only supported",
    ),
    ("allOf", obj(v={"allOf": [{"type": "string"}]}), "$.v: 'allOf' is not supported"),
    ("not", obj(v={"type": "string", "not": {"const": "x"}}), "$.v: 'not' is not supported"),
    (
        "type list of two kinds",
        obj(v={"type": ["string", "integer"]}),
        "$.v: type ['string', 'integer']",
    ),
    ("null alone", obj(v={"type": "null"}), "$.v: 'null' alone"),
    ("no type", obj(v={"description": "anything"}), "$.v: no 'type'"),
    ("true schema", obj(v=True), "$.v: a schema must be an object"),
    ("enum of objects", obj(v={"enum": [{"a": 1}]}), "$.v: 'enum' values must be"),
    (
        "enum value of the wrong type",
        obj(v={"type": "integer", "enum": [1, "two"]}),
        "$.v: 'enum' value 'two'",
    ),
    (
        "nullable of nullable",
        obj(v={"anyOf": [{"type": ["string", "null"]}, {"type": "null"}]}),
        "$.v: a nullable variant of a nullable value",
    ),
    (
        "patternProperties",
        {**obj(a={"type": "string"}), "patternProperties": {"^x": {"type": "string"}}},
        "$: 'patternProperties' is not supported",
    ),
    (
        "minProperties",
        {**obj(a={"type": "string"}), "minProperties": 1},
        "$: 'minProperties' is not supported",
    ),
    (
        "uniqueItems",
        obj(xs={"type": "array", "items": {"type": "string"}, "uniqueItems": True}),
        "$.xs: 'uniqueItems' is not supported",
    ),
    (
        "deep offender",
        obj(a=obj(b={"type": "array", "items": obj(c={"type": "object"})})),
        "$.a.b[].c: an object",
    ),
    (
        "recursive ref",
        {**obj(node={"$ref": "#/$defs/N"}), "$defs": {"N": obj(next={"$ref": "#/$defs/N"})}},
        "recursive reference",
    ),
    ("external ref", obj(a={"$ref": "https://example.com/s.json"}), "does not point into $defs"),
    ("unknown type", obj(a={"type": "date"}), "$.a: unknown type 'date'"),
    ("bad pattern", obj(a={"type": "string", "pattern": "(unclosed"}), "not a usable JSON Schema"),
    (
        "too deep for OpenAI",
        {
            "type": "array",
            "items": {
                "type": "array",
                "items": {
                    "type": "array",
                    "items": {
                        "type": "array",
                        "items": {
                            "type": "array",
                            "items": {
                                "type": "array",
                                "items": {
                                    "type": "array",
                                    "items": {
                                        "type": "array",
                                        "items": {
                                            "type": "array",
                                            "items": {"type": "array", "items": {"type": "string"}},
                                        },
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
        "nesting levels exceed OpenAI's limit",
    ),
    (
        "too many nullable values for Anthropic",
        obj(**{f"f{i}": {"type": ["string", "null"]} for i in range(17)}),
        "17 nullable values exceed Anthropic",
    ),
    (
        "too many enum values for OpenAI",
        obj(v={"type": "integer", "enum": list(range(1001))}),
        "enum values exceed OpenAI's limit",
    ),
    ("pydantic extra allow", OpenModel, "$: additionalProperties must be false"),
    ("pydantic dict field", MapModel, "$.labels: additionalProperties must be false"),
    ("pydantic Any field", AnyModel, "$.payload: no 'type'"),
    ("pydantic union field", UnionModel, "$.value: 'anyOf' is only supported"),
    ("pydantic tuple field", TupleModel, "$.pair: 'prefixItems' is not supported"),
    ("pydantic recursive model", Tree, "recursive reference"),
]


def _task_record(schema: dict[str, Any], name: str = "t") -> TaskRecord:
    from datetime import UTC, datetime

    now = datetime.now(UTC)
    return TaskRecord(
        id=f"wf-x:{name}", workflow_id="wf-x", name=name, position=0, description="",
        instructions="do it", input_names=None, depends_on=(), result_schema=schema,
        state="running", attempts=0, max_attempts=3, max_steps=5, session_id=None, error=None,
        created_at=now, updated_at=now, started_at=now, finished_at=None, has_result=False,
        result=None, submission_key=None, stored_at=None,
    )  # fmt: skip


def _submit_tool(source: Any) -> Any:
    checked = result_schema(source)
    return submit_result_tool(_task_record(checked.schema), ControlPlane(None), schema=checked)  # type: ignore[arg-type]


@pytest.mark.parametrize(("label", "source"), ACCEPTED, ids=[a[0] for a in ACCEPTED])
def test_closed_shapes_are_accepted_and_project_strict_for_every_provider(
    label: str, source: Any
) -> None:
    checked = result_schema(source)
    assert "$defs" not in checked.schema and "$ref" not in str(checked.schema)
    jsonschema_rs.meta.validate(checked.schema)
    tool = _submit_tool(source)
    assert tool.strict is True
    for provider in PROVIDERS:
        projection = project(tool, provider)
        assert projection.strict, (provider, projection.reason)
        assert projection.entry.get("strict", True) is True
    # The whole task toolset (web, read-only notes, submit_result) projects too.
    turn = TurnContext("s", Path("."), web_provider="test", turn_kind="workflow_task")
    toolset = task_toolset(turn, tool, REGISTRY)
    assert toolset.names == ("web_fetch", "notes", "submit_result")
    for provider in PROVIDERS:
        _, projections = project_tools(toolset.tools, provider)
        submit = next(p for p in projections if p.tool == "submit_result")
        assert submit.strict, provider


@pytest.mark.parametrize(("label", "source", "expected"), REJECTED, ids=[r[0] for r in REJECTED])
def test_open_shapes_are_rejected_with_the_offending_path(
    label: str, source: Any, expected: str
) -> None:
    with pytest.raises(ResultSchemaError) as info:
        result_schema(source, "task 'x'")
    message = str(info.value)
    assert expected in message, message
    assert message.startswith("task 'x': result schema not supported")
    assert all(p.startswith("$") for p in info.value.problems)


def test_every_problem_is_listed_at_once() -> None:
    bad = obj(
        a={"type": "object", "properties": {}},
        b={"type": "array"},
        c={"anyOf": [{"type": "string"}, {"type": "integer"}]},
    )
    with pytest.raises(ResultSchemaError) as info:
        result_schema(bad)
    paths = [p.split(":")[0] for p in info.value.problems]
    assert paths == ["$.a", "$.b", "$.c"]


def test_a_rootmodel_and_other_sources_are_refused() -> None:
    with pytest.raises(WorkflowDefinitionError, match="RootModel"):
        result_schema(Wrapper)
    with pytest.raises(WorkflowDefinitionError, match="JSON Schema"):
        result_schema(["not", "a", "schema"])  # type: ignore[arg-type]


def test_pydantic_models_are_closed_and_every_field_is_required() -> None:
    schema = result_schema(Order).schema
    assert schema["additionalProperties"] is False
    assert schema["required"] == list(schema["properties"])
    assert "default" not in str(schema)
    gift = schema["properties"]["gift"]
    assert gift["anyOf"][0]["additionalProperties"] is False
    assert schema["properties"]["color"] == {"enum": ["red", "blue"], "type": "string"}
    # A value produced by the model class validates against the stored schema.
    order = Order(
        customer="Ada", color=Color.red, kind="new", channel="web",
        lines=[Line(sku="ABC-1", quantity=2, price=9.5)], note=None,
    )  # fmt: skip
    assert jsonschema_rs.validator_for(schema).is_valid(order.model_dump(mode="json"))


def test_object_roots_are_the_arguments_and_other_roots_are_wrapped() -> None:
    plain = result_schema(obj(a={"type": "string"}))
    assert not plain.wrapped and plain.tool_schema == plain.schema
    assert plain.unwrap({"a": "x"}) == {"a": "x"}
    wrapped = result_schema({"type": "array", "items": {"type": "integer"}})
    assert wrapped.wrapped
    assert wrapped.tool_schema["properties"][WRAPPED_PROPERTY] == wrapped.schema
    assert wrapped.tool_schema["required"] == [WRAPPED_PROPERTY]
    assert wrapped.unwrap({WRAPPED_PROPERTY: [1, 2]}) == [1, 2]


def test_a_stored_schema_checks_again_unchanged() -> None:
    for _, source in ACCEPTED:
        checked = result_schema(source)
        assert result_schema(checked.schema).schema == checked.schema


# -- random closed shapes: always projectable, values from them always valid -----------------

_scalars = st.sampled_from(
    [
        {"type": "string"},
        {"type": "string", "maxLength": 20},
        {"type": "string", "format": "date-time"},
        {"type": "integer", "minimum": 0},
        {"type": "number", "maximum": 10},
        {"type": "boolean"},
        {"enum": ["a", "b", "c"]},
        {"type": "integer", "enum": [1, 2]},
    ]
)


def _nullable(s: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [s, {"type": "null"}]}


_names = st.text(alphabet="abcdefghij_", min_size=1, max_size=8)
_shapes = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.dictionaries(_names, inner, max_size=4).map(lambda props: obj(**props)),
        inner.map(lambda s: {"type": "array", "items": s, "maxItems": 3}),
        inner.map(_nullable),
    ),
    max_leaves=8,
)


def _fix_double_nullable(s: Any) -> Any:
    """``anyOf[anyOf[x, null], null]`` is not a closed shape; keep one level."""
    if isinstance(s, dict):
        if "anyOf" in s and "anyOf" in s["anyOf"][0]:
            return _fix_double_nullable(s["anyOf"][0])
        return {k: _fix_double_nullable(v) for k, v in s.items()}
    if isinstance(s, list):
        return [_fix_double_nullable(v) for v in s]
    return s


@settings(max_examples=50, deadline=None)
@given(_shapes.map(_fix_double_nullable))
def test_every_generated_closed_shape_projects_strict_for_openai_and_anthropic(
    shape: dict[str, Any],
) -> None:
    tool = _submit_tool(shape)
    for provider in PROVIDERS:
        assert project(tool, provider).strict


def _values(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values of a closed shape (hypothesis-jsonschema cannot generate objects here)."""
    if "anyOf" in schema:
        return st.one_of(st.none(), _values(schema["anyOf"][0]))
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema["type"]
    if kind == "object":
        props = {k: _values(v) for k, v in schema["properties"].items()}
        return st.fixed_dictionaries(props)
    if kind == "array":
        return st.lists(_values(schema["items"]), max_size=schema.get("maxItems", 3))
    if kind == "string":
        if schema.get("format") == "date-time":
            return st.datetimes().map(lambda d: d.isoformat() + "Z")
        return st.text(max_size=schema.get("maxLength", 30))
    if kind == "integer":
        return st.integers(min_value=schema.get("minimum"), max_value=schema.get("maximum"))
    if kind == "number":
        return st.floats(max_value=schema.get("maximum"), allow_nan=False, allow_infinity=False)
    return st.booleans()


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_values_of_a_generated_shape_pass_the_control_plane_check(data: st.DataObject) -> None:
    shape = _fix_double_nullable(data.draw(_shapes))
    checked = result_schema(shape)
    value = data.draw(_values(checked.schema))
    assert ControlPlane(None).problems(checked.schema, value) == []  # type: ignore[arg-type]
    tool = _submit_tool(shape)
    from tooldeck import validate_arguments

    arguments = {WRAPPED_PROPERTY: value} if checked.wrapped else value
    assert checked.unwrap(validate_arguments(tool, arguments).params) == value


# -- workflow definitions --------------------------------------------------------------------

STRING = {"type": "string"}


def test_tasks_are_ordered_by_dependency() -> None:
    wf = Workflow(
        "w",
        [
            Task("c", "c", STRING, depends_on=["a", "b"]),
            Task("b", "b", STRING, depends_on="a"),
            Task("a", "a", STRING),
        ],
    )
    assert [t.name for t in wf.tasks] == ["a", "b", "c"]
    assert wf.task("b").depends_on == ("a",)


@pytest.mark.parametrize(
    ("tasks", "message"),
    [
        ([Task("a", "x", STRING), Task("a", "y", STRING)], "two tasks named 'a'"),
        ([Task("a", "x", STRING, depends_on=["zz"])], "depends on unknown task 'zz'"),
        ([Task("a", "x", STRING, depends_on=["a"])], "depends on itself"),
        (
            [
                Task("a", "x", STRING, depends_on=["c"]),
                Task("b", "x", STRING, depends_on=["a"]),
                Task("c", "x", STRING, depends_on=["b"]),
            ],
            "cycle: a -> c -> b -> a",
        ),
        ([Task("a", "x", STRING, inputs=["nope"])], "wants input 'nope'"),
        ([], "has no tasks"),
    ],
)
def test_bad_workflows_are_refused_when_defined(tasks: list[Task], message: str) -> None:
    with pytest.raises(WorkflowDefinitionError, match=message.replace("(", r"\(")):
        Workflow("w", tasks, inputs={"type": "object", "properties": {"topic": STRING}})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "1abc"}, "task name '1abc'"),
        ({"name": "has space"}, "task name"),
        ({"instructions": "  "}, "instructions must be a text"),
        ({"max_attempts": 0}, "max_attempts must be an integer from 1 to 100"),
        ({"max_steps": 101}, "max_steps must be"),
        ({"result": {"type": "object"}}, "result schema not supported"),
    ],
)
def test_bad_tasks_are_refused_when_defined(kwargs: dict[str, Any], message: str) -> None:
    args = {"name": "t", "instructions": "do", "result": STRING, **kwargs}
    with pytest.raises(WorkflowDefinitionError, match=message):
        Task(**args)


def test_workflow_inputs_are_validated_with_paths() -> None:
    wf = Workflow(
        "w",
        [Task("a", "x", STRING)],
        inputs={
            "type": "object",
            "properties": {"n": {"type": "integer", "minimum": 1}},
            "required": ["n"],
        },
    )
    assert wf.input_problems({"n": 2}) == []
    assert wf.input_problems({"n": 0}) == ["$.n: 0 is less than the minimum of 1"]
    assert "required" in wf.input_problems({})[0]
    with pytest.raises(WorkflowDefinitionError, match="must be an object"):
        Workflow("w", [Task("a", "x", STRING)], inputs={"type": "string"})


def test_workflow_scripts_load_and_bad_ones_name_the_path() -> None:
    script = load_script(SCRIPTS / "research_brief.py")
    wf = script.workflow()
    assert wf.name == "research_brief" and script.scripted_model is not None
    assert [t.name for t in wf.tasks] == ["benefits", "drawbacks", "outline", "verdict"]
    with pytest.raises(WorkflowDefinitionError, match="no workflow named 'x'"):
        script.workflow("x")
    with pytest.raises(ResultSchemaError, match=r"\$\.labels: additionalProperties must be false"):
        load_script(SCRIPTS / "bad_result_schema.py")
    with pytest.raises(WorkflowDefinitionError, match="no workflow script"):
        load_script(SCRIPTS / "missing.py")


def test_property_names_that_look_like_keywords_are_kept() -> None:
    class Odd(BaseModel):
        title: str
        default: int
        definitions: list[str]

    schema = result_schema(Odd).schema
    assert list(schema["properties"]) == ["title", "default", "definitions"]
    raw = obj(title={"type": "string"}, default={"type": "string"}, definitions={"type": "string"})
    assert list(result_schema(raw).schema["properties"]) == ["title", "default", "definitions"]
