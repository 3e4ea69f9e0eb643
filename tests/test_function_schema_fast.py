"""The model-free schema path of ``@tool`` against the model-based one it replaces.

``tooldeck._function_schema`` generates a function tool's JSON Schema without creating
the Pydantic model class, which is created on first use. These tests pin the promise
that this changes nothing a user can see: the schema is byte-identical (same keys, same
order) to what ``create_model`` + ``model_json_schema`` with plain pydantic produce, over
a broad list of annotation kinds and over generated combinations; the generator's speed
overrides give pydantic's own output; the model is the one validation always used; and
the cases the fast path does not trust still go through the model at definition time.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import inspect
import json
import keyword
import threading
import uuid
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, NamedTuple, NotRequired, Optional, Union

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import (
    AfterValidator,
    AnyUrl,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    SecretStr,
    WithJsonSchema,
    conint,
    constr,
    create_model,
)
from pydantic.json_schema import GenerateJsonSchema
from typing_extensions import TypedDict

from tooldeck import ToolContext, tool, validate_arguments
from tooldeck._function_schema import inspect_function
from tooldeck._parameters import schema_of
from tooldeck.errors import ArgumentError, ToolDefinitionError


class _PlainNoTitles(GenerateJsonSchema):
    """What tooldeck used before: pydantic's generator, field titles off, nothing else."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def _reference(model: type[BaseModel]) -> dict[str, Any]:
    """The schema the old code generated for a parameters model (see tool._model_schema)."""
    schema: dict[str, Any] = model.model_json_schema(schema_generator=_PlainNoTitles)
    schema.pop("title", None)
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/") and len(schema) == 2:
        defs = dict(schema["$defs"])
        root = dict(defs[ref.removeprefix("#/$defs/")])
        root.pop("title", None)
        schema = {**root, "$defs": defs}
    return schema


def _old_model(fn: Callable[..., Any], name: str) -> type[BaseModel]:
    """The parameters model exactly as the old ``inspect_function`` created it."""
    fields = inspect_function(fn, name).params.fields
    return create_model(
        f"{name}Params",
        __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=False),
        **fields,
    )


def _function(params: Sequence[tuple[str, Any, Any]], doc: str) -> Callable[..., Any]:
    """A function with these ``(name, annotation, default)`` parameters and docstring."""

    def fn(**kwargs: Any) -> Any:
        return kwargs

    fn.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=d, annotation=a)
            for n, a, d in params
        ]
    )
    fn.__annotations__ = {n: a for n, a, _ in params}
    fn.__doc__ = doc
    return fn


def _dumps(schema: Any) -> str:
    return json.dumps(schema, default=repr)  # order-sensitive: byte-identical or not


def _check(fn: Callable[..., Any], name: str = "probe") -> dict[str, Any]:
    sig = inspect_function(fn, name)
    assert sig.schema is not None, "the fast path should apply here"
    old = _reference(_old_model(fn, name))
    assert _dumps(sig.schema) == _dumps(old)
    t = tool(fn, name=name)
    assert _dumps(t.schema) == _dumps(old)
    assert t._params is None  # the model is not created by defining or projecting
    import tooldeck

    tooldeck.project(t, "openai-responses")
    tooldeck.project(t, "anthropic")
    assert t._params is None
    assert _dumps(_reference(t.params)) == _dumps(old)  # type: ignore[arg-type]
    return sig.schema


# -- the annotation kinds -----------------------------------------------------------------


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Point(BaseModel):
    """A point."""

    x: int
    y: int = 0


class Node(BaseModel):
    value: int
    children: list[Node] = []


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: int = 9


class Dog(BaseModel):
    kind: Literal["dog"]
    good: bool = True


class Movie(TypedDict):
    title: str
    year: NotRequired[int]


@dataclasses.dataclass
class Span:
    start: int
    end: int = 10


class Pair(NamedTuple):
    a: int
    b: str


def _same_name_models() -> tuple[type[BaseModel], type[BaseModel]]:
    first = create_model("Item", a=(int, ...))
    second = create_model("Item", b=(str, ...))
    return first, second


ItemA, ItemB = _same_name_models()

KINDS: list[tuple[str, Any, Any]] = [
    ("int", int, inspect.Parameter.empty),
    ("float", float, inspect.Parameter.empty),
    ("str", str, inspect.Parameter.empty),
    ("bool", bool, inspect.Parameter.empty),
    ("bytes", bytes, inspect.Parameter.empty),
    ("any", Any, inspect.Parameter.empty),
    ("object", object, inspect.Parameter.empty),
    ("int default", int, 3),
    ("int big default", int, 2**70),
    ("float default", float, 1.5),
    ("float int default", float, 1),
    ("float integral default", float, 2.0),
    ("float inf default", float, float("inf")),
    ("float nan default", float, float("nan")),
    ("str default", str, "any"),
    ("str empty default", str, ""),
    ("bool default", bool, False),
    ("optional int", Optional[int], None),  # noqa: UP045 - the old spelling on purpose
    ("int or none", int | None, None),
    ("int or none required", int | None, inspect.Parameter.empty),
    ("str or none default str", str | None, "x"),
    ("union", Union[int, str], inspect.Parameter.empty),  # noqa: UP007
    ("union 3", int | str | list[int], 5),
    ("literal str", Literal["a", "b"], inspect.Parameter.empty),
    ("literal int", Literal[1, 2, 3], 2),
    ("literal bool", Literal[True], True),
    ("literal mixed", Literal["a", 1, None], None),
    ("literal or none", Literal["x", "y"] | None, None),
    ("enum", Color, inspect.Parameter.empty),
    ("enum default", Color, Color.GREEN),
    ("int enum", Level, Level.LOW),
    ("list int", list[int], inspect.Parameter.empty),
    ("list str default", list[str], ["a", "b"]),
    ("list empty default", list[str], []),
    ("list or none", list[str] | None, None),
    ("dict", dict[str, int], inspect.Parameter.empty),
    ("dict nested", dict[str, list[float]], {"a": [1.0]}),
    ("tuple", tuple[int, str], inspect.Parameter.empty),
    ("tuple default", tuple[int, str], (1, "a")),
    ("tuple variadic", tuple[int, ...], ()),
    ("set", set[str], inspect.Parameter.empty),
    ("set default", set[str], {"b", "a"}),
    ("frozenset", frozenset[int], frozenset({3, 1, 2})),
    ("sequence", Sequence[int], inspect.Parameter.empty),
    ("mapping", Mapping[str, str], inspect.Parameter.empty),
    ("date", dt.date, inspect.Parameter.empty),
    ("date default", dt.date, dt.date(2024, 1, 2)),
    ("datetime", dt.datetime, inspect.Parameter.empty),
    ("time", dt.time, dt.time(10, 30)),
    ("timedelta", dt.timedelta, dt.timedelta(seconds=90)),
    ("decimal", decimal.Decimal, decimal.Decimal("1.25")),
    ("uuid", uuid.UUID, inspect.Parameter.empty),
    ("path", Path, Path("a/b")),
    ("url", AnyUrl, inspect.Parameter.empty),
    ("secret", SecretStr, inspect.Parameter.empty),
    ("model", Point, inspect.Parameter.empty),
    ("model default", Point, Point(x=1)),
    ("model or none", Point | None, None),
    ("list of models", list[Point], inspect.Parameter.empty),
    ("recursive model", Node, inspect.Parameter.empty),
    (
        "discriminated union",
        Annotated[Cat | Dog, Field(discriminator="kind")],
        inspect.Parameter.empty,
    ),
    ("plain union of models", Cat | Dog, inspect.Parameter.empty),
    ("typed dict", Movie, inspect.Parameter.empty),
    ("dataclass", Span, inspect.Parameter.empty),
    ("named tuple", Pair, inspect.Parameter.empty),
    ("ge le", Annotated[int, Field(ge=0, le=10)], inspect.Parameter.empty),
    ("gt lt default", Annotated[float, Field(gt=0, lt=1)], 0.5),
    ("multiple of", Annotated[float, Field(multiple_of=0.5)], inspect.Parameter.empty),
    (
        "str constraints",
        Annotated[str, Field(min_length=1, max_length=5, pattern=r"^[a-z]+$")],
        "ab",
    ),
    (
        "list constraints",
        Annotated[list[int], Field(min_length=1, max_length=3)],
        inspect.Parameter.empty,
    ),
    (
        "annotated description",
        Annotated[str, Field(description="from the annotation")],
        inspect.Parameter.empty,
    ),
    ("annotated title", Annotated[str, Field(title="Explicit title")], inspect.Parameter.empty),
    ("annotated examples", Annotated[int, Field(examples=[1, 2])], 1),
    (
        "annotated extra",
        Annotated[int, Field(json_schema_extra={"x-unit": "s"})],
        inspect.Parameter.empty,
    ),
    ("annotated default", Annotated[int, Field(default=7)], inspect.Parameter.empty),
    ("default factory", Annotated[list[int], Field(default_factory=list)], inspect.Parameter.empty),
    ("alias", Annotated[int, Field(alias="Alias")], inspect.Parameter.empty),
    ("deprecated", Annotated[int, Field(deprecated=True)], 1),
    ("field default", int, Field(5, description="from Field()")),
    ("field only constraints", int, Field(ge=1)),
    ("conint", conint(ge=1, le=5), 2),
    ("constr", constr(min_length=2), inspect.Parameter.empty),
    ("after validator", Annotated[int, AfterValidator(lambda v: v)], inspect.Parameter.empty),
    ("with json schema", Annotated[int, WithJsonSchema({"type": "integer", "format": "x"})], 1),
    ("nested optional", Optional[list[Optional[Point]]], None),  # noqa: UP045
    ("same-named models", tuple[ItemA, ItemB], inspect.Parameter.empty),  # type: ignore[valid-type]
]


@pytest.mark.parametrize(("label", "annotation", "default"), KINDS, ids=[k[0] for k in KINDS])
@pytest.mark.parametrize("documented", [True, False], ids=["doc", "nodoc"])
def test_each_annotation_kind_gives_the_model_schema(
    label: str, annotation: Any, default: Any, documented: bool
) -> None:
    doc = "Probe one kind.\n\nArgs:\n    value: What the docstring says.\n    other: Another."
    fn = _function(
        [("value", annotation, default), ("other", int, 1)],
        doc if documented else "Probe one kind.",
    )
    _check(fn)


def test_all_kinds_in_one_function() -> None:
    required = [
        (f"p{i}", a, d) for i, (_, a, d) in enumerate(KINDS) if d is inspect.Parameter.empty
    ]
    optional = [
        (f"p{i}", a, d) for i, (_, a, d) in enumerate(KINDS) if d is not inspect.Parameter.empty
    ]
    doc = "All kinds.\n\nArgs:\n" + "".join(
        f"    {n}: Parameter {n}.\n" for n, _, _ in required + optional if n != "p3"
    )
    _check(_function(required + optional, doc))


def test_a_realistic_tool_with_context_and_numpy_docstring() -> None:
    def search(
        query: str,
        ctx: ToolContext,
        limit: Annotated[int, Field(ge=1, le=50)] = 10,
        since: dt.date | None = None,
        kinds: list[Literal["doc", "code"]] | None = None,
    ) -> list[str]:
        """Search the notes.

        Parameters
        ----------
        query : str
            Words to look for.
        limit : int
            How many results.
        """
        return []

    schema = _check(search, "search")
    assert "ctx" not in schema["properties"]


def test_sphinx_docstring() -> None:
    def send(to: str, body: str = "") -> str:
        """Send a message.

        :param to: The recipient.
        :param body: The text.
        """
        return to

    _check(send, "send")


# -- generated combinations ---------------------------------------------------------------

_SIMPLE: list[tuple[Any, list[Any]]] = [
    (int, [0, -3, 2**40]),
    (float, [1.5, 0.0, -2.25, 1]),
    (str, ["", "x", "ünïcode"]),
    (bool, [True, False]),
    (int | None, [None, 4]),
    (str | None, [None, "s"]),
    (list[str], [[], ["a"]]),
    (list[int] | None, [None, [1]]),
    (dict[str, int], [{}, {"k": 1}]),
    (Literal["alpha", "beta"], ["alpha"]),
    (Literal[1, 2] | None, [None, 1]),
    (dt.date, [dt.date(2020, 5, 17)]),
    (Color, [Color.RED]),
    (Point, [Point(x=2, y=3)]),
    (Annotated[int, Field(ge=0)], [0, 5]),
    (Annotated[str, Field(description="annotated")], ["a"]),
]


@st.composite
def _signatures(draw: st.DrawFn) -> tuple[list[tuple[str, Any, Any]], str]:
    count = draw(st.integers(min_value=0, max_value=6))
    names = draw(
        st.lists(
            st.from_regex(r"[a-z][a-z0-9]{0,7}(_[a-z0-9]{1,5})?", fullmatch=True),
            min_size=count,
            max_size=count,
            unique=True,
        ).filter(
            lambda ns: all(not n.startswith("model_") and not keyword.iskeyword(n) for n in ns)
        )
    )
    params: list[tuple[str, Any, Any]] = []
    optional_started = False
    for name in names:
        annotation, defaults = draw(st.sampled_from(_SIMPLE))
        with_default = optional_started or draw(st.booleans())
        if with_default:
            optional_started = True
            default = draw(st.sampled_from(defaults))
            if draw(st.integers(0, 4)) == 0:
                default = Field(default, description="via Field()")
        else:
            default = inspect.Parameter.empty
        params.append((name, annotation, default))
    described = draw(st.lists(st.sampled_from(names), unique=True)) if names else []
    doc = "A generated tool.\n\nLonger text.\n"
    if described:
        doc += "\nArgs:\n" + "".join(f"    {n}: About {n}.\n" for n in described)
    return params, doc


@settings(max_examples=150, deadline=None)
@given(_signatures())
def test_generated_signatures_give_the_model_schema(
    case: tuple[list[tuple[str, Any, Any]], str],
) -> None:
    params, doc = case
    _check(_function(params, doc))


# -- the generator's speed overrides ------------------------------------------------------


class Inner(BaseModel):
    when: dt.datetime
    tags: set[str] = {"b", "a"}


class Outer(BaseModel):
    model_config = ConfigDict(json_schema_mode_override="serialization")

    inner: Inner
    ratio: float = float("inf")
    point: Point | None = None
    code: Annotated[int, PlainSerializer(str, return_type=str)] = 1  # differs by mode


class Described(BaseModel):
    """A described model."""

    name: Annotated[str, Field(description="Name.")] = "n"
    level: Level = Level.HIGH
    color: Color | None = None
    span: Span | None = None


@pytest.mark.parametrize("model", [Point, Node, Outer, Described, Inner, Cat])
def test_schema_of_a_params_model_is_pydantics(model: type[BaseModel]) -> None:
    assert _dumps(schema_of(model)) == _dumps(_reference(model))


# -- the model behind the schema ----------------------------------------------------------


def test_the_lazy_model_validates_like_the_old_one() -> None:
    def book(room: Literal["a", "b"], seats: Annotated[int, Field(ge=1)] = 2) -> str:
        """Book a room.

        Args:
            room: Which room.
            seats: How many seats.
        """
        return f"{room}{seats}"

    t = tool(book)
    assert t._params is None
    args = validate_arguments(t, '{"room": "a"}')
    assert t._params is not None and isinstance(args.params, t.params)
    assert t.params.__name__ == "BookParams" and t.params.model_config["extra"] == "forbid"
    assert (args.params.room, args.params.seats) == ("a", 2)
    with pytest.raises(ArgumentError) as caught:
        validate_arguments(t, '{"room": "c", "seats": 0, "x": 1}')
    old = tool(book)  # a fresh tool forced to create its model before validating
    assert old.params is not None
    with pytest.raises(ArgumentError) as caught_old:
        validate_arguments(old, '{"room": "c", "seats": 0, "x": 1}')
    assert caught.value.model_message == caught_old.value.model_message


def test_the_model_is_created_once_even_from_two_threads() -> None:
    def ping(host: str) -> str:
        """Ping a host."""
        return host

    def read(t: Any, start: threading.Barrier, seen: list[Any]) -> None:
        start.wait()
        seen.append(t.params)

    for _ in range(20):
        t = tool(ping)
        seen: list[Any] = []
        start = threading.Barrier(4)
        threads = [threading.Thread(target=read, args=(t, start, seen)) for _ in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert len({id(m) for m in seen}) == 1


def test_setting_params_replaces_the_lazy_model() -> None:
    def ping(host: str) -> str:
        """Ping a host."""
        return host

    t = tool(ping)
    t.params = Point
    assert t.params is Point


# -- where the fast path steps aside ------------------------------------------------------


class Opaque:
    """Not a type pydantic knows (arbitrary types are not allowed)."""


@pytest.mark.parametrize(
    "params",
    [
        [("json", str, inspect.Parameter.empty)],  # a deprecated BaseModel method
        [("copy", bool, False)],
        [("schema", str, "s")],
        [("model_name", str, inspect.Parameter.empty)],  # the protected namespace
        [("model_dump", str, inspect.Parameter.empty)],
        [("limit", ClassVar[int], 3)],  # a class variable on a model, not a field
    ],
    ids=["json", "copy", "schema", "model_prefix", "model_dump", "classvar"],
)
def test_names_and_annotations_a_class_treats_specially_use_the_model(
    params: list[tuple[str, Any, Any]],
) -> None:
    fn = _function(params, "Special.")
    with warnings.catch_warnings(record=True) as old_warnings:
        warnings.simplefilter("always")
        try:
            old: Any = _reference(
                create_model(
                    "SpecialParams",
                    __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=False),
                    **{n: (a, ... if d is inspect.Parameter.empty else d) for n, a, d in params},
                )
            )
        except Exception as exc:
            old = repr(exc)
    with warnings.catch_warnings(record=True) as new_warnings:
        warnings.simplefilter("always")
        try:
            t = tool(fn, name="special")
            new: Any = t.schema
            assert t._params is not None  # created at definition, as before
        except ToolDefinitionError as exc:
            new = repr(exc.__cause__)
    assert _dumps(new) == _dumps(old)
    assert [str(w.message) for w in new_warnings] == [str(w.message) for w in old_warnings]


def test_unusable_annotations_still_fail_at_definition() -> None:
    def use(thing: Opaque) -> str:
        """Use a thing."""
        return "ok"

    with pytest.raises(ToolDefinitionError, match="parameters cannot be modelled") as caught:
        tool(use)
    assert "Opaque" in str(caught.value)
