"""Typed structured output offline: the output types, the settings, ScriptedModel, the
loop's retries, ``RunResult.output_as`` and workflow results typed by their task."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NotRequired

import jsonschema_rs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema
from pydantic import BaseModel, Field, RootModel, TypeAdapter, field_validator
from typing_extensions import TypedDict  # pydantic needs it on Python < 3.12

import tooldeck
from tooldeck import ModelRequest, ModelSettings, SchemaError, StopReason, UserMessage
from tooldeck.structured import AnswerCheck, OutputType, project_output
from tooldeck.testing import ScriptedModel, call, reply
from tooldeck.transcript import AssistantMessage

# -- the four kinds of output type -------------------------------------------------------------


class Answer(BaseModel):
    answer: int


class Ticket(BaseModel):
    """A support ticket."""

    title: str = Field(min_length=1)
    priority: Literal["low", "high"]
    tags: list[str] = []
    note: str | None = None


@dataclass
class Point:
    x: int
    y: int = 0


class Movie(TypedDict):
    title: str
    year: int
    rating: NotRequired[float]


MOVIE_SCHEMA = {
    "type": "object",
    "properties": {"title": {"type": "string"}, "year": {"type": "integer"}},
    "required": ["title", "year"],
    "additionalProperties": False,
}

# (type, a valid answer, the instance it must give)
KINDS: list[tuple[Any, str, Any]] = [
    (Answer, '{"answer": 5}', Answer(answer=5)),
    (Point, '{"x": 1}', Point(1, 0)),
    (Movie, '{"title": "Heat", "year": 1995}', {"title": "Heat", "year": 1995}),
    (MOVIE_SCHEMA, '{"title": "Heat", "year": 1995}', {"title": "Heat", "year": 1995}),
]
KIND_IDS = ["pydantic", "dataclass", "typeddict", "json-schema"]
# an answer of the right JSON but the wrong shape, for each kind
WRONG = ['{"answer": "five"}', '{"y": 2}', '{"title": "Heat"}', '{"title": 1, "year": 1995}']


def turn(model: ScriptedModel, prompt: str = "q", **options: Any) -> tooldeck.RunResult:
    return asyncio.run(tooldeck.run(model, [], prompt, **options))


def test_each_kind_is_recognised_with_an_object_schema() -> None:
    kinds = [OutputType.of(t).kind for t, _, _ in KINDS]
    assert kinds == ["pydantic", "dataclass", "typeddict", "schema"]
    for t, _, _ in KINDS:
        assert OutputType.of(t).schema["type"] == "object"
    assert OutputType.of(Ticket).schema["description"] == "A support ticket."
    assert "title" not in OutputType.of(Ticket).schema["properties"]["title"]  # no field titles
    assert OutputType.of(Ticket) is OutputType.of(Ticket)  # built once per type


@pytest.mark.parametrize(
    ("source", "words"),
    [
        (int, "an output type is .*, not <class 'int'>"),
        (list[int], "an output type is"),
        ("Answer", "an output type is"),
        (RootModel[list[int]], "is not an object .*'array'"),
    ],
)
def test_what_cannot_be_an_output_type_is_one_clear_error(source: Any, words: str) -> None:
    with pytest.raises(SchemaError, match=words) as info:
        ModelSettings(output_type=source)
    assert len(info.value.problems) == 1 and "\n" not in info.value.problems[0]


def test_typing_typeddict_on_python_3_11_says_what_to_use() -> None:
    class Old(typing.TypedDict):
        a: int

    try:
        TypeAdapter(Old)
    except Exception:
        with pytest.raises(SchemaError, match=r"typing_extensions\.TypedDict"):
            ModelSettings(output_type=Old)
    else:  # Python 3.12+: pydantic takes it
        assert ModelSettings(output_type=Old).output_spec is not None


# -- ModelSettings -----------------------------------------------------------------------------


def test_output_schema_with_a_pydantic_class_is_used_not_ignored() -> None:
    """The issue: ``ModelSettings(output_schema=SomeModel)`` was accepted and did nothing."""
    settings = ModelSettings(output_schema=Answer)
    assert settings.output_spec is not None and settings.output_spec.source is Answer
    result = turn(ScriptedModel([reply('{"answer": 5}')]), settings=settings)
    assert result.structured == Answer(answer=5)


def test_settings_name_one_output_type_and_replace_keeps_it() -> None:
    with pytest.raises(ValueError, match="not both"):
        ModelSettings(output_type=Answer, output_schema=MOVIE_SCHEMA)
    same = ModelSettings(output_type=MOVIE_SCHEMA, output_schema=dict(MOVIE_SCHEMA))
    assert same.output_spec is not None
    base = ModelSettings(output_type=Answer, output_retries=4)
    copied = dataclasses.replace(base, temperature=0.5)
    assert copied.output_spec is base.output_spec and copied.output_retries == 4
    other = base.expecting(Point)
    assert other.output_spec is not None and other.output_spec.source is Point
    assert other.output_retries == 4
    assert base.expecting(None).output_spec is None
    assert ModelSettings().output_spec is None
    for bad in (-1, True, 1.5):
        with pytest.raises(ValueError, match="output_retries"):
            ModelSettings(output_type=Answer, output_retries=bad)  # type: ignore[arg-type]


# -- ScriptedModel honours it (the offline case) --------------------------------------


@pytest.mark.parametrize(("kind", "answer", "expected"), KINDS, ids=KIND_IDS)
def test_a_valid_scripted_answer_gives_the_instance(kind: Any, answer: str, expected: Any) -> None:
    model = ScriptedModel([reply(answer)])
    result = turn(model, output_type=kind)
    assert result.structured == expected
    assert type(result.structured) is type(expected)
    assert result.output == answer  # output stays the text
    assert result.stop_reason is StopReason.END_TURN and result.steps == 1
    # the message keeps the JSON data (the transcript's record), not the instance
    assert result.last_message is not None
    assert result.last_message.structured == json.loads(answer)


def test_scripted_respond_validates_like_an_adapter() -> None:
    model = ScriptedModel([reply('{"answer": 5}'), reply('{"answer": "x"}'), reply("no")])
    request = ModelRequest([UserMessage("q")], [], ModelSettings(output_type=Answer))
    good = asyncio.run(model.respond(request))
    assert good.structured == {"answer": 5} and good.stop_reason is StopReason.END_TURN
    for _ in range(2):
        bad = asyncio.run(model.respond(request))
        assert bad.structured is None and bad.stop_reason is StopReason.ERROR
        assert bad.provider_data is not None and bad.provider_data["structured_error"]


def test_scripted_model_refuses_a_bad_schema_before_the_request() -> None:
    model = ScriptedModel([reply("{}")])
    settings = ModelSettings(output_schema={"type": "array", "items": {"type": "string"}})
    with pytest.raises(SchemaError, match="object root"):
        turn(model, settings=settings)
    assert model.requests == []


# -- retries in the loop -----------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "answer", "expected"), KINDS, ids=KIND_IDS)
@pytest.mark.parametrize("first", ["not json at all", "wrong shape"])
def test_an_invalid_answer_is_sent_back_and_the_retry_succeeds(
    kind: Any, answer: str, expected: Any, first: str
) -> None:
    bad = WRONG[[k for k, _, _ in KINDS].index(kind)] if first == "wrong shape" else first
    model = ScriptedModel([reply(bad), reply(answer)])
    result = turn(model, output_type=kind)
    assert result.structured == expected
    assert result.stop_reason is StopReason.END_TURN and result.steps == 2
    assert len(model.requests) == 2
    second = model.requests[1].transcript
    # the invalid answer stays in the record, followed by the validation message
    assert isinstance(second[-2], AssistantMessage) and second[-2].text == bad
    retry = second[-1]
    assert isinstance(retry, UserMessage)
    assert retry.text.startswith("Your final answer could not be used: the structured answer")
    assert ("not JSON" in retry.text) == (first == "not json at all")
    assert [type(i).__name__ for i in result.items] == [
        "UserMessage",
        "AssistantMessage",
        "UserMessage",
        "AssistantMessage",
    ]


@pytest.mark.parametrize("retries", [0, 1, 2, 3])
def test_retries_are_bounded_then_the_turn_ends_with_a_clear_reason(retries: int) -> None:
    model = ScriptedModel([reply('{"answer": "x"}')] * (retries + 1))
    result = turn(model, output_type=Answer, output_retries=retries)
    assert len(model.requests) == retries + 1  # never more: the script would run out
    assert result.stop_reason is StopReason.ERROR and result.structured is None
    assert result.reason.startswith(f"structured output invalid after {retries} retries: ")
    assert "answer" in result.reason


def test_the_default_is_two_retries() -> None:
    model = ScriptedModel([reply("x"), reply("x"), reply("x")])
    result = turn(model, output_type=Answer)
    assert len(model.requests) == 3
    assert result.reason.startswith("structured output invalid after 2 retries")


def test_a_validator_the_schema_cannot_express_is_retried_with_its_message() -> None:
    class Span(BaseModel):
        start: int
        end: int

        @field_validator("end")
        @classmethod
        def after_start(cls, end: int, info: Any) -> int:
            if end <= info.data.get("start", end - 1):
                raise ValueError("end must be after start")
            return end

    model = ScriptedModel([reply('{"start": 5, "end": 2}'), reply('{"start": 1, "end": 2}')])
    result = turn(model, output_type=Span)
    assert result.structured == Span(start=1, end=2)
    retry = model.requests[1].transcript[-1]
    assert isinstance(retry, UserMessage) and "end must be after start" in retry.text


def test_tool_steps_are_not_answers_and_the_final_one_is() -> None:
    @tooldeck.tool(read_only=True)
    def lookup(city: str) -> int:
        """Temperature of a city."""
        return 18

    model = ScriptedModel([reply(call("lookup", {"city": "Paris"})), reply('{"answer": 18}')])
    result = asyncio.run(tooldeck.run(model, [lookup], "q", output_type=Answer))
    assert result.structured == Answer(answer=18) and result.steps == 2
    assert result.tool_outputs[0].text == "18"


@pytest.mark.parametrize(
    ("message", "stop"),
    [
        (reply(stop_reason=StopReason.REFUSAL, refusal="refusal:cyber"), StopReason.REFUSAL),
        (reply('{"answer":', stop_reason=StopReason.MAX_TOKENS), StopReason.MAX_TOKENS),
        (reply(stop_reason=StopReason.CONTENT_FILTER), StopReason.CONTENT_FILTER),
    ],
)
def test_a_refused_or_cut_answer_is_not_retried(
    message: AssistantMessage, stop: StopReason
) -> None:
    model = ScriptedModel([message])
    result = turn(model, output_type=Answer)
    assert len(model.requests) == 1 and result.stop_reason is stop and result.structured is None


def test_retries_count_against_max_steps() -> None:
    model = ScriptedModel([reply("x"), reply('{"answer": 1}')])
    result = turn(model, output_type=Answer, max_steps=1)
    assert len(model.requests) == 1 and result.reason == "max_steps (1) reached"


def test_a_session_keeps_its_output_type_across_turns() -> None:
    model = ScriptedModel([reply('{"answer": 1}'), reply("?"), reply('{"answer": 2}')])
    session = tooldeck.Session(model, [], settings=ModelSettings(output_type=Answer))
    first = asyncio.run(session.run("one"))
    second = asyncio.run(session.run("two"))
    assert (first.structured, second.structured) == (Answer(answer=1), Answer(answer=2))
    assert second.steps == 2  # its own retry budget


def test_a_model_that_does_not_check_still_gets_checked() -> None:
    """A third-party Model that ignores output_type: the loop validates the text itself."""

    class Plain:
        name = "plain"

        def __init__(self) -> None:
            self.answers = iter(['{"answer": "x"}', '{"answer": 3}'])

        async def respond(self, request: ModelRequest) -> AssistantMessage:
            return AssistantMessage([tooldeck.TextPart(next(self.answers))])

        async def stream(self, request: ModelRequest) -> Any:
            raise NotImplementedError

    result = asyncio.run(tooldeck.run(Plain(), [], "q", output_type=Answer))  # type: ignore[arg-type]
    assert result.structured == Answer(answer=3) and result.steps == 2


def test_output_as_reads_the_text_as_any_type() -> None:
    result = turn(ScriptedModel([reply('{"x": 3, "y": 4}')]))
    assert result.structured is None  # nothing was asked
    assert result.output_as(Point) == Point(3, 4)
    with pytest.raises(ValueError, match="not a valid Movie"):
        result.output_as(Movie)
    with pytest.raises(ValueError, match="not a valid Answer"):
        result.output_as(Answer)
    with pytest.raises(ValueError, match="not JSON"):
        turn(ScriptedModel([reply("hello")])).output_as(Point)


def test_the_retry_message_is_bounded() -> None:
    check = AnswerCheck(OutputType.of(Answer), 1)
    verdict = check.review(
        AssistantMessage(
            [tooldeck.TextPart("x")],
            stop_reason=StopReason.ERROR,
            provider_data={"structured_error": "e" * 10_000},
        )
    )
    assert isinstance(verdict, UserMessage) and len(verdict.text) < 1700


# -- projection and the reason when not strict ------------------------------------------------


def test_project_output_is_strict_when_nothing_is_lost_and_says_why_not() -> None:
    class Plain(BaseModel):
        title: str
        tags: list[str] = []
        note: str | None = None

    openai = project_output(Plain, "openai-responses")
    assert openai.strict and openai.reason is None
    assert sorted(openai.schema["required"]) == ["note", "tags", "title"]
    assert openai.schema["additionalProperties"] is False
    # OpenAI strict cannot enforce minLength: the schema is sent as it is, not strict
    ticket = project_output(Ticket, "openai-chat")
    assert not ticket.strict and ticket.reason is not None and "minLength" in ticket.reason

    class Free(BaseModel):
        labels: dict[str, str]

    loose = project_output(Free, "openai")
    assert not loose.strict and loose.reason is not None and "labels" in loose.reason
    assert loose.schema == dict(OutputType.of(Free).schema)  # sent as it is

    class Ranged(BaseModel):
        n: int = Field(ge=1)

    anthropic = project_output(Ranged, "anthropic")  # no non-strict mode: constraint moved
    n = anthropic.schema["properties"]["n"]
    assert anthropic.strict and "minimum" not in n and "minimum: 1" in n["description"]
    assert any("minimum" in c for c in anthropic.changes)
    assert not project_output(Free, "anthropic").strict


# -- hypothesis: answers valid under the sent schema load as the type -------------------------


class Line(BaseModel):
    sku: str
    qty: int = Field(ge=1, le=1000)


class Order(BaseModel):
    customer: str
    lines: list[Line] = Field(min_length=1, max_length=4)
    rush: bool = False
    note: str | None = None
    discount: float | None = Field(default=None, ge=0, le=1)


@dataclass
class Reading:
    sensor: str
    value: float
    unit: Literal["c", "f"] = "c"


class Person(TypedDict):
    name: str
    age: int
    email: NotRequired[str]


def _resolve(schema: Any, root: Mapping[str, Any]) -> Any:
    while isinstance(schema, Mapping) and "$ref" in schema:
        node: Any = root
        for part in schema["$ref"][2:].split("/"):
            node = node[part]
        schema = node
    return schema


def values_for(schema: Any, root: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    """Values valid against ``schema``, for the closed shapes output types produce.

    hypothesis-jsonschema's ``from_schema`` cannot generate objects with the installed
    Hypothesis, so objects, arrays, unions and ``$ref`` are built here and only leaf
    schemas are handed to it.
    """
    schema = _resolve(schema, root)
    if "anyOf" in schema:
        return st.one_of([values_for(b, root) for b in schema["anyOf"]])
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of([values_for({**schema, "type": k}, root) for k in kind])
    if kind == "object":
        props: Mapping[str, Any] = schema.get("properties", {})
        required = set(schema.get("required", ()))
        return st.fixed_dictionaries(
            {k: values_for(v, root) for k, v in props.items() if k in required},
            optional={k: values_for(v, root) for k, v in props.items() if k not in required},
        )
    if kind == "array":
        return st.lists(
            values_for(schema["items"], root),
            min_size=schema.get("minItems", 0),
            max_size=min(schema.get("maxItems", 4), 4),
        )
    leaf = {k: v for k, v in schema.items() if k not in ("description", "default", "title")}
    return from_schema(leaf)


def schema_values(schema: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    validator = jsonschema_rs.validator_for(dict(schema))
    return values_for(schema, schema).filter(validator.is_valid)


SMALL = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("kind", [Order, Reading, Person], ids=lambda k: k.__name__)
@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
def test_any_answer_the_sent_schema_allows_loads_as_the_type(kind: Any, dialect: str) -> None:
    """What a strict provider may send (nulls for optional properties included) loads."""
    spec = OutputType.of(kind)
    wire = project_output(kind, dialect).schema  # type: ignore[arg-type]
    original = TypeAdapter(kind)

    @SMALL
    @given(schema_values(wire))
    def check(value: Any) -> None:
        if dialect == "anthropic" and kind is Order:
            # constraints Anthropic cannot enforce moved into descriptions: tooldeck
            # validates them and retries, so only values that also meet them load
            try:
                Order.model_validate(value)
            except ValueError:
                with pytest.raises(ValueError):
                    spec.parse(json.dumps(value))
                return
        instance = spec.parse(json.dumps(value))
        dumped = original.dump_python(instance, mode="json")
        spec.load(dumped)  # the instance goes back through the schema and validation
        assert spec.parse(json.dumps(dumped)) == instance

    check()


@SMALL
@given(
    st.builds(
        Order,
        customer=st.text(max_size=20),
        lines=st.lists(
            st.builds(Line, sku=st.text(max_size=8), qty=st.integers(1, 1000)),
            min_size=1,
            max_size=4,
        ),
        rush=st.booleans(),
        note=st.none() | st.text(max_size=10),
        discount=st.none() | st.floats(0, 1),
    )
)
def test_random_instances_round_trip_through_a_scripted_turn(order: Order) -> None:
    model = ScriptedModel([reply(order.model_dump_json())])
    assert turn(model, output_type=Order).structured == order


# -- workflows: results typed by their task ----------------------------------------------------


class Summary(BaseModel):
    city: str
    days: int = Field(ge=1)

    @field_validator("city")
    @classmethod
    def capitalised(cls, city: str) -> str:
        if not city[:1].isupper():
            raise ValueError("city must start with a capital letter")
        return city


def _workflow() -> Any:
    from tooldeck.workflows import Task, Workflow

    return Workflow(
        "trip",
        tasks=[
            Task("summary", "Summarise.", result=Summary),
            Task("mood", "One word.", result={"type": "string", "enum": ["calm", "busy"]}),
        ],
    )


def test_workflow_results_are_instances_of_the_declared_type(tmp_path: Path) -> None:
    from tooldeck.workflows import SQLiteStore, TaskRun, WorkflowEngine
    from tooldeck.workflows.scripted import submitting

    workflow = _workflow()

    def factory(run: TaskRun) -> Any:
        if run.name == "summary":  # first refused by the validator, then accepted
            return submitting(run, {"city": "lisbon", "days": 2}, {"city": "Lisbon", "days": 2})
        return submitting(run, "calm")

    async def main() -> None:
        async with SQLiteStore(tmp_path / "wf.sqlite3") as store:
            async with WorkflowEngine(
                store, factory, home=tmp_path, memory_enabled=False, poll_interval=0.05
            ) as engine:
                run = await engine.run(workflow, {})
                assert run.state == "succeeded", run
                assert run.results == {"summary": Summary(city="Lisbon", days=2), "mood": "calm"}
                assert run.stored_results["summary"] == {"city": "Lisbon", "days": 2}
                assert run.task("summary").attempts == 2  # the validator's rejection counted
                rejected = await store.rejections(run.task("summary").id)
                assert "city must start with a capital letter" in rejected[0].reasons[0]
                again = await engine.get(run.id[:8])
                assert again.results["summary"] == Summary(city="Lisbon", days=2)
                # the store API: JSON, typed by the workflow on request
                raw = await store.get_workflow(run.id)
                assert raw is not None and raw.results["summary"] == {"city": "Lisbon", "days": 2}
                assert workflow.typed(raw).results["summary"] == Summary(city="Lisbon", days=2)
            # another engine, another process: typed once the workflow is in its catalog
            async with WorkflowEngine(store, factory, catalog=[workflow]) as other:
                assert (await other.get(run.id)).results["summary"] == Summary(
                    city="Lisbon", days=2
                )
            async with WorkflowEngine(store, factory) as unknown:
                assert (await unknown.get(run.id)).results["summary"] == {
                    "city": "Lisbon",
                    "days": 2,
                }

    asyncio.run(main())


def test_a_stored_result_that_no_longer_loads_says_so() -> None:
    task = _workflow().task("summary")
    assert task.load_result({"city": "Lisbon", "days": 2}) == Summary(city="Lisbon", days=2)
    with pytest.raises(ValueError, match="does not load as Summary"):
        task.load_result({"city": "lisbon", "days": 2})
    from tooldeck.workflows import Task, Workflow

    other = Workflow("other", tasks=[Task("a", "x", result=Summary)])
    with pytest.raises(ValueError, match="not 'other'"):
        other.typed(_record("trip"))


def _record(name: str) -> Any:
    from datetime import UTC, datetime

    from tooldeck.workflows.store.records import WorkflowRecord

    now = datetime.now(UTC)
    return WorkflowRecord("wf-1", name, {}, "succeeded", None, now, now, now)


# -- hostile answers: a retry or a clear end, never a crash -------------------------------------

HOSTILE = [
    "[" * 100_000,  # deeper than json can read
    '{"answer": ' + "[" * 5000 + "]" * 5000 + "}",
    '{"answer": 1, "tags": ' + "[" * 900 + "]" * 900 + "}",  # readable, too deep to walk
    '{"answer": NaN}',
    '{"answer": 1e999999}',
    '{"answer": "\\ud800"}',
    "9" * 5000,
    "",
]


class Tags(BaseModel):
    answer: int
    tags: list[Any] = []


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_a_hostile_answer_is_a_validation_error_on_both_checks(text: str) -> None:
    from tooldeck.providers._common import prepare_output_schema

    spec = OutputType.of(Tags)
    adapter_side = prepare_output_schema(spec.schema, "final_answer", "openai", "test")
    for check in (spec.parse, adapter_side.parse):
        try:
            check(text)
        except ValueError as exc:
            assert str(exc).startswith("the structured answer")
        else:  # only a value that truly validates may pass
            assert json.loads(text)["answer"] == 1


@pytest.mark.parametrize("text", HOSTILE[:3], ids=range(3))
def test_a_hostile_answer_gets_a_retry_not_an_exception(text: str) -> None:
    model = ScriptedModel([reply(text), reply('{"answer": 2}')])
    result = turn(model, output_type=Tags)
    assert result.structured == Tags(answer=2)
    retry = model.requests[1].transcript[-1]
    assert isinstance(retry, UserMessage)
    said = retry.text.lower()  # the parser or pydantic, whichever stops it first
    assert "nested too deeply" in said or "recursion limit" in said


@SMALL
@given(
    st.text(max_size=200)
    | st.builds(
        json.dumps,
        st.recursive(
            st.none() | st.integers() | st.text(max_size=5),
            lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
            max_leaves=20,
        ),
    )
)
def test_any_text_ends_the_turn_with_an_instance_or_a_clear_reason(text: str) -> None:
    model = ScriptedModel([reply(text)])
    result = turn(model, output_type=Tags, output_retries=0)
    if result.stop_reason is StopReason.END_TURN:
        assert isinstance(result.structured, Tags)
    else:
        assert result.stop_reason is StopReason.ERROR and result.structured is None
        assert result.reason.startswith("structured output invalid after 0 retries: ")
