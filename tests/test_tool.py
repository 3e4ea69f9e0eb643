"""The tool contract: Tool, @tool, ToolContext, ToolResult."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field, RootModel
from pydantic.json_schema import GenerateJsonSchema

import tooldeck
from tooldeck import (
    Aborted,
    AbortSignal,
    ImagePart,
    JsonPart,
    SchemaError,
    TextPart,
    Tool,
    ToolContext,
    TooldeckError,
    ToolDefinitionError,
    ToolResult,
    tool,
    validate_arguments,
)


def test_public_names_are_importable_from_the_package() -> None:
    for name in (
        "Tool",
        "tool",
        "ToolContext",
        "ToolResult",
        "validate_arguments",
        "ValidatedArguments",
        "ArgumentError",
        "SchemaError",
        "project",
    ):
        assert hasattr(tooldeck, name), name
    assert tooldeck.schema.project is tooldeck.project


# -- docstrings -------------------------------------------------------------------------


def google(city: str, days: int = 3) -> str:
    """Forecast the weather.

    Longer text about the forecast.

    Args:
        city: The city to forecast.
        days: How many days ahead.
    """
    return city


def numpy_style(city: str, days: int = 3) -> str:
    """Forecast the weather.

    Parameters
    ----------
    city : str
        The city to forecast.
    days : int
        How many days ahead.
    """
    return city


def sphinx(city: str, days: int = 3) -> str:
    """Forecast the weather.

    :param city: The city to forecast.
    :param days: How many days ahead.
    """
    return city


@pytest.mark.parametrize("fn", [google, numpy_style, sphinx], ids=["google", "numpy", "sphinx"])
def test_docstring_styles_give_description_and_parameter_descriptions(fn: Any) -> None:
    t = tool(fn)
    assert t.name == fn.__name__
    assert t.description.startswith("Forecast the weather.")
    props = t.input_schema()["properties"]
    assert props["city"]["description"] == "The city to forecast."
    assert props["days"]["description"] == "How many days ahead."
    assert props["days"]["default"] == 3
    assert t.input_schema()["required"] == ["city"]


def test_long_description_is_kept() -> None:
    assert "Longer text about the forecast." in tool(google).description


def test_annotated_field_description_wins_over_docstring() -> None:
    def f(q: Annotated[str, Field(description="from Field")]) -> str:
        """Do it.

        Args:
            q: from docstring
        """
        return q

    assert tool(f).input_schema()["properties"]["q"]["description"] == "from Field"


def test_schema_has_no_titles_and_forbids_extra_keys() -> None:
    schema = tool(google).input_schema()
    assert "title" not in schema
    assert all("title" not in p for p in schema["properties"].values())
    assert schema["additionalProperties"] is False


def test_tool_context_parameter_is_injected_and_hidden() -> None:
    seen: dict[str, Any] = {}

    @tool
    async def whoami(greeting: str, ctx: ToolContext) -> str:
        """Say who is calling."""
        seen["ctx"] = ctx
        return f"{greeting} {ctx.tool_name} {ctx.call_id}"

    assert list(whoami.input_schema()["properties"]) == ["greeting"]
    ctx = ToolContext(call_id="call_1", tool_name="whoami", session_id="s1")
    params = validate_arguments(whoami, '{"greeting": "hi"}').params
    result = asyncio.run(whoami.invoke(params, ctx))
    assert result.text() == "hi whoami call_1"
    assert seen["ctx"] is ctx


def test_a_context_field_sent_by_the_model_is_rejected() -> None:
    @tool
    def f(x: int, ctx: ToolContext) -> int:
        """Return x."""
        return x

    with pytest.raises(tooldeck.ArgumentError):
        validate_arguments(f, '{"x": 1, "ctx": {}}')


def test_sync_tools_run_off_the_event_loop_by_default() -> None:
    threads: list[int] = []

    @tool
    def where() -> str:
        """Report the thread."""
        threads.append(threading.get_ident())
        return "ok"

    @tool(run_sync_in_thread=False)
    def inline() -> str:
        """Report the thread."""
        threads.append(threading.get_ident())
        return "ok"

    async def main() -> int:
        await where.invoke(validate_arguments(where, "").params, ToolContext())
        await inline.invoke(validate_arguments(inline, "").params, ToolContext())
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert threads[0] != loop_thread
    assert threads[1] == loop_thread


def test_async_tool_cancellation_reaches_the_tool() -> None:
    cancelled = asyncio.Event()

    @tool
    async def slow() -> str:
        """Sleep a long time."""
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "done"

    async def main() -> None:
        task = asyncio.create_task(slow.invoke(validate_arguments(slow, "").params, ToolContext()))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert cancelled.is_set()


def test_unusable_signatures_are_refused() -> None:
    def star(*args: int) -> None:
        """Bad."""

    def kw(**kwargs: int) -> None:
        """Bad."""

    def two_ctx(a: ToolContext, b: ToolContext) -> None:
        """Bad."""

    for fn in (star, kw, two_ctx):
        with pytest.raises(ToolDefinitionError):
            tool(fn)


def test_missing_description_is_refused() -> None:
    def nodoc(x: int) -> int:
        return x

    with pytest.raises(ToolDefinitionError, match="no description"):
        tool(nodoc)
    assert tool(description="Return x.")(nodoc).description == "Return x."


@pytest.mark.parametrize("name", ["", "a" * 65, "has space", "dot.name", "ümlaut", "a/b"])
def test_names_outside_the_portable_pattern_are_refused(name: str) -> None:
    with pytest.raises(ToolDefinitionError, match="must match"):
        Tool.from_function(lambda: None, name=name, description="d")


def test_name_of_64_characters_is_accepted() -> None:
    assert Tool.from_function(lambda: None, name="a" * 64, description="d").name == "a" * 64


def test_namespace_name_is_checked_too() -> None:
    with pytest.raises(ToolDefinitionError):
        Tool.from_function(lambda: None, name="x", description="d", namespace="bad name")


# -- schemas ----------------------------------------------------------------------------


def test_non_object_root_is_a_schema_error_naming_the_tool() -> None:
    with pytest.raises(SchemaError, match="'lister'"):
        Tool.from_schema(
            name="lister", description="d", json_schema={"type": "array"}, execute=lambda p, c: None
        )

    class Items(RootModel[list[int]]):
        pass

    with pytest.raises(SchemaError, match="'rooted'"):
        Tool.from_model(Items, name="rooted", description="d", execute=lambda p, c: None)


def test_invalid_json_schema_is_refused_at_definition() -> None:
    with pytest.raises(SchemaError, match="not a valid JSON Schema"):
        Tool.from_schema(
            name="bad",
            description="d",
            execute=lambda p, c: None,
            json_schema={"type": "object", "properties": {"a": {"type": 12}}},
        )


def test_external_schema_is_returned_unchanged_after_json_round_trip() -> None:
    schema = {
        "type": "object",
        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}}},
        "properties": {
            "n": {"type": "integer", "minimum": 1, "maximum": 9, "multipleOf": 2},
            "code": {"type": "string", "pattern": "^[A-Z]{3}$", "format": "uuid"},
            "at": {"$ref": "#/$defs/Point"},
            "weird": {"x-vendor": True, "examples": [1, 2]},
        },
        "required": ["n"],
    }
    original = json.dumps(schema)
    t = Tool.from_schema(name="ext", description="d", json_schema=schema, execute=lambda p, c: p)
    assert json.dumps(t.input_schema()) == original
    schema["properties"]["n"]["minimum"] = 100  # the tool keeps its own copy
    assert json.dumps(t.input_schema()) == original
    t.input_schema()["properties"].clear()  # callers get a copy, the cache is safe
    assert json.dumps(t.input_schema()) == original


def test_generated_schema_is_computed_once_per_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    # Count JSON Schema generations, whichever path makes them: @tool generates from the
    # fields without a model class, Tool(params=Model) through model_json_schema.
    calls = 0
    original = GenerateJsonSchema.generate

    def counting(self: GenerateJsonSchema, *args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(GenerateJsonSchema, "generate", counting)
    t = tool(google)

    class P(BaseModel):
        a: int

    m = Tool.from_model(P, name="m", description="d", execute=lambda p, c: p)
    for _ in range(5):
        for each in (t, m):
            each.input_schema()
            tooldeck.project(each, "openai-responses")
            tooldeck.project(each, "anthropic")
    assert calls == 2
    assert t.params is not None  # creating the model later generates no schema either
    assert calls == 2


def test_each_constructor_takes_its_own_source_and_names_the_other() -> None:
    class P(BaseModel):
        a: int

    with pytest.raises(ToolDefinitionError, match=r"Tool\.from_schema"):
        Tool.from_model({"type": "object"}, lambda p, c: None, name="x", description="d")  # type: ignore[type-var]
    with pytest.raises(ToolDefinitionError, match=r"Tool\.from_model"):
        Tool.from_schema(P, lambda p, c: None, name="x", description="d")  # type: ignore[arg-type]


def test_every_constructor_names_the_one_for_what_it_was_given() -> None:
    class P(BaseModel):
        a: int

    def add(a: int) -> int:
        """Add."""
        return a

    schema = {"type": "object"}
    wrong = [
        (lambda: Tool.from_function(P), r"a Pydantic model class: use Tool\.from_model"),
        (
            lambda: Tool.from_function(schema, name="x", description="d"),  # type: ignore[arg-type]
            r"a JSON Schema: use Tool\.from_schema",
        ),
        (
            lambda: Tool.from_model(add, name="x", description="d"),  # type: ignore[type-var]
            r"a function: use Tool\.from_function",
        ),
        (
            lambda: Tool.from_schema(add, name="x", description="d"),  # type: ignore[arg-type]
            r"a function: use Tool\.from_function",
        ),
    ]
    for make, says in wrong:
        with pytest.raises(TooldeckError, match=says) as info:
            make()
        assert "\n" not in str(info.value)


def test_the_keywords_of_the_old_constructor_name_the_new_ones() -> None:
    schema = {"type": "object"}

    def run(params: Any, ctx: ToolContext) -> str:
        return "ok"

    old = [
        (
            lambda: Tool(name="x", description="d", json_schema=schema, execute=run),  # type: ignore[call-arg]
            r"Tool\(json_schema=\.\.\.\) is Tool\.from_schema\(json_schema, execute, name=, ",
        ),
        (
            lambda: Tool(name="x", description="d", params=BaseModel, execute=run),  # type: ignore[call-arg]
            r"Tool\(params=\.\.\.\) is Tool\.from_model\(model, execute, name=, ",
        ),
        (
            lambda: Tool(name="x", description="d", execute=run),  # type: ignore[call-arg]
            r"build a Tool with Tool\.from_function, Tool\.from_model or Tool\.from_schema",
        ),
        (
            lambda: tool(json_schema=schema)(lambda: 1),  # type: ignore[call-overload]
            r"Tool\.from_function\(\) has no option 'json_schema'.*Tool\.from_schema",
        ),
        (
            lambda: Tool.from_schema(schema, run, name="x", description="d", params=1),  # type: ignore[call-arg]
            r"Tool\.from_schema\(\) has no option 'params'",
        ),
    ]
    for make, says in old:
        with pytest.raises(ToolDefinitionError, match=says) as info:
            make()
        assert "\n" not in str(info.value)
    # copies (the source combinators make them) and subclasses still build as before
    made = Tool.from_schema(schema, run, name="x", description="d")
    assert made.replace(name="y").name == "y"


def test_a_subclass_is_built_by_the_same_constructors() -> None:
    class Labelled(Tool):
        def describe_approval(self, params: Any) -> str:
            return f"greet {params.who}"

    def greet(who: str) -> str:
        """Greet someone."""
        return f"hi {who}"

    made = Labelled.from_function(greet, read_only=True)
    assert isinstance(made, Labelled) and made.name == "greet" and made.__wrapped__ is greet
    params = validate_arguments(made, '{"who": "ann"}').params
    assert made.describe_approval(params) == "greet ann"
    assert asyncio.run(made.invoke(params, ToolContext())).text() == "hi ann"


def test_constructors_keep_the_parameters_type() -> None:
    class P(BaseModel):
        a: int

    def run(params: P, ctx: ToolContext) -> int:
        return params.a  # typed: mypy checks this against P

    t = Tool.from_model(P, run, name="typed", description="d", describe_activity=lambda p: str(p.a))
    params = validate_arguments(t, '{"a": 2}').params
    assert isinstance(params, P) and t.params is P
    assert asyncio.run(t.invoke(params, ToolContext())).text() == "2"
    assert t.describe_activity(params) == "2"
    ext = Tool.from_schema({"type": "object"}, lambda p, c: sorted(p), name="e", description="d")
    assert ext.params is None and ext.external_schema


def test_tool_without_parameters_has_an_empty_object_schema() -> None:
    t = Tool.from_function(lambda: "pong", name="ping", description="Ping.")
    assert t.input_schema() == {"additionalProperties": False, "properties": {}, "type": "object"}
    assert validate_arguments(t, "").repairs == ()


# -- metadata ---------------------------------------------------------------------------


def test_execution_mode_defaults_follow_read_only() -> None:
    reader = Tool.from_function(lambda: 1, name="r", description="d", read_only=True)
    writer = Tool.from_function(lambda: 1, name="w", description="d")
    pinned = Tool.from_function(
        lambda: 1,
        name="p",
        description="d",
        read_only=True,
        execution_mode="sequential",
    )
    assert (reader.execution_mode, writer.execution_mode, pinned.execution_mode) == (
        "parallel",
        "sequential",
        "sequential",
    )
    with pytest.raises(ToolDefinitionError):
        Tool.from_function(lambda: 1, name="x", description="d", execution_mode="whenever")  # type: ignore[arg-type]


def test_activity_labels() -> None:
    @tool(
        read_only=True,
        describe_activity=lambda p: f"Reading {p.path}",
        describe_completed_activity=lambda p, r: f"Read {p.path} ({len(r.text())} chars)",
    )
    def read(path: str) -> str:
        """Read a file."""
        return "hello"

    params = validate_arguments(read, '{"path": "a.txt"}').params
    assert read.describe_activity(params) == "Reading a.txt"
    result = asyncio.run(read.invoke(params, ToolContext()))
    assert read.describe_completed_activity(params, result) == "Read a.txt (5 chars)"
    plain = Tool.from_function(lambda: 1, name="x", description="d")
    assert plain.describe_activity(None) == "Running x"
    assert plain.describe_completed_activity(None, result) is None


def test_subclass_can_override_execute() -> None:
    class Echo(Tool):
        async def execute(self, params: Any, ctx: ToolContext) -> Any:
            return params["s"]

    echo = Echo.from_schema(
        {"type": "object", "properties": {"s": {"type": "string"}}},
        name="echo",
        description="Echo the input.",
    )
    assert isinstance(echo, Echo)
    params = validate_arguments(echo, '{"s": "hi"}').params
    assert asyncio.run(echo.invoke(params, ToolContext())).text() == "hi"
    with pytest.raises(ToolDefinitionError, match="no execute"):
        Tool.from_schema({"type": "object"}, name="nothing", description="d")


# -- results ----------------------------------------------------------------------------


class Weather(BaseModel):
    temp: float
    sky: str


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("plain", "plain"),
        (None, "null"),
        ("", ""),
        ({"a": 1}, '{"a":1}'),
        ([1, "x"], '[1,"x"]'),
        (42, "42"),
        (Weather(temp=18.5, sky="cloudy"), '{"temp":18.5,"sky":"cloudy"}'),
        (TextPart("t"), "t"),
        ([TextPart("a"), JsonPart({"b": 2})], 'a\n{"b":2}'),
    ],
)
def test_plain_return_values_are_wrapped(value: Any, text: str) -> None:
    assert ToolResult.wrap(value).text() == text


def test_result_fields_and_error_constructor() -> None:
    r = ToolResult(content="done", details={"rows": 3}, terminate=True, complete_actor_event=True)
    assert ToolResult.wrap(r) is r
    assert "rows" not in r.text()  # details never reach the model's text
    err = ToolResult.error("boom", details={"trace": "..."})
    assert err.is_error and err.text() == "boom"


def test_image_part_needs_exactly_one_source() -> None:
    with pytest.raises(ValueError):
        ImagePart()
    with pytest.raises(ValueError):
        ImagePart(data="AAAA", url="https://x")
    assert "[image image/png]" in ToolResult([TextPart("a"), ImagePart(data="AAAA")]).text()


def test_context_emit_reaches_the_sink() -> None:
    events: list[Any] = []
    ctx = ToolContext(sink=events.append)
    ctx.emit({"progress": 0.5})
    assert events == [{"progress": 0.5}]
    ToolContext().emit("dropped quietly")


# -- abort signal -----------------------------------------------------------------------


def test_abort_signal_check_wait_and_children() -> None:
    async def main() -> None:
        parent = AbortSignal()
        child = parent.child()
        seen: list[str] = []
        parent.on_abort(seen.append)
        waiter = asyncio.create_task(child.wait())
        await asyncio.sleep(0)
        assert not child.aborted
        child.raise_if_aborted()
        parent.abort("user pressed stop")
        parent.abort("second reason is ignored")
        assert await asyncio.wait_for(waiter, 1) == "user pressed stop"
        assert child.aborted and child.reason == "user pressed stop"
        assert seen == ["user pressed stop"]
        with pytest.raises(Aborted):
            child.raise_if_aborted()
        late: list[str] = []
        parent.on_abort(late.append)
        assert late == ["user pressed stop"]

    asyncio.run(main())
