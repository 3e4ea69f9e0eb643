"""Typed structured output over real HTTP: the three adapters, every output type kind.

The official SDKs talk to the local fake provider. For each adapter (OpenAI Responses
``text.format``, Chat Completions ``response_format``, Anthropic ``output_config.format``)
and each kind of output type (Pydantic model, dataclass, TypedDict, JSON Schema): the
projected schema is what goes on the wire; a valid answer gives the instance; an invalid
first answer is sent back (the retry message is in the second request body) and the
second one gives the instance; answers that stay invalid end the turn with a clear
reason after the bounded retries. Replies are built with the helpers of the adapter
test modules, which validate them against the SDK types / OpenAI's OpenAPI document.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NotRequired

import jsonschema_rs
import pytest
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

import tooldeck
from tooldeck import SchemaError, StopReason
from tooldeck.model import Model
from tooldeck.providers.anthropic import AnthropicModel
from tooldeck.providers.chat_completions import ChatCompletionsModel
from tooldeck.providers.openai_responses import OpenAIResponsesModel
from tooldeck.structured import project_output

from . import test_anthropic as anthropic_wire
from . import test_chat_completions as chat_wire
from . import test_openai_responses as responses_wire
from .fake_server import FakeProvider, Reply, assert_golden

# -- the four kinds -----------------------------------------------------------------------------


class WeatherModel(BaseModel):
    """Today's weather in one city."""

    city: str
    temp_c: int = Field(ge=-90, le=60)
    note: str | None = None


@dataclass
class WeatherData:
    city: str
    temp_c: int
    note: str | None = None


class WeatherDict(TypedDict):
    city: str
    temp_c: int
    note: NotRequired[str]


WEATHER_SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "temp_c": {"type": "integer"},
        "note": {"type": "string"},
    },
    "required": ["city", "temp_c"],
    "additionalProperties": False,
}

KINDS: dict[str, tuple[Any, Any]] = {
    "pydantic": (WeatherModel, WeatherModel(city="Paris", temp_c=18)),
    "dataclass": (WeatherData, WeatherData("Paris", 18)),
    "typeddict": (WeatherDict, {"city": "Paris", "temp_c": 18}),
    "json-schema": (WEATHER_SCHEMA, {"city": "Paris", "temp_c": 18}),
}

# -- the three adapters -------------------------------------------------------------------------


@dataclass(frozen=True)
class Wire:
    """How one adapter is built, answers, and carries the schema and the retry."""

    name: str
    dialect: str
    make: Callable[[FakeProvider], Model]
    answer: Callable[[str], Reply]
    sent_format: Callable[[dict[str, Any]], Any]  # the structured-output part of a body
    messages: Callable[[dict[str, Any]], list[Any]]  # the conversation part of a body
    check_body: Callable[[dict[str, Any]], None]
    valid: str  # a valid answer as this provider's strict mode writes it

    def expected_format(self, kind: Any) -> Any:
        projection = project_output(kind, self.dialect)  # type: ignore[arg-type]
        if self.name == "anthropic":
            return {"format": {"type": "json_schema", "schema": projection.schema}}
        spec = {"name": "final_answer", "schema": projection.schema, "strict": projection.strict}
        if self.name == "responses":
            return {"format": {"type": "json_schema", **spec}}
        return {"type": "json_schema", "json_schema": spec}


def _responses(fake: FakeProvider) -> Model:
    return OpenAIResponsesModel("gpt-5.4", api_key="test", base_url=fake.url + "/v1", max_retries=0)


def _chat(fake: FakeProvider) -> Model:
    return ChatCompletionsModel(
        "gpt-4.1", "openai", api_key="test", base_url=fake.url + "/v1", max_retries=0
    )


def _anthropic(fake: FakeProvider) -> Model:
    return AnthropicModel("claude-sonnet-4-6", api_key="test", base_url=fake.url, max_retries=0)


OPENAI_VALID = '{"city":"Paris","temp_c":18,"note":null}'  # strict: every property sent

WIRES = {
    "responses": Wire(
        "responses",
        "openai",
        _responses,
        lambda t: responses_wire.ok(responses_wire.msg(t)),
        lambda b: b["text"],
        lambda b: b["input"],
        lambda b: responses_wire.check_spec("CreateResponse", b),
        OPENAI_VALID,
    ),
    "chat": Wire(
        "chat",
        "openai",
        _chat,
        lambda t: chat_wire.reply(content=t),
        lambda b: b["response_format"],
        lambda b: b["messages"],
        lambda b: chat_wire.check_openapi("CreateChatCompletionRequest", b),
        OPENAI_VALID,
    ),
    "anthropic": Wire(
        "anthropic",
        "anthropic",
        _anthropic,
        lambda t: Reply(anthropic_wire.msg(anthropic_wire.text(t), stop="end_turn")),
        lambda b: b["output_config"],
        lambda b: b["messages"],
        lambda b: None,  # the SDK's request types are lenient: goldens check the body
        '{"city": "Paris", "temp_c": 18}',
    ),
}


async def _close(model: Model) -> None:
    close = getattr(model, "aclose", None)
    if close is not None:
        await close()
    else:  # OpenAIResponsesModel has no aclose yet: close its SDK client
        await model.client.close()  # type: ignore[attr-defined]


def turn(fake: FakeProvider, wire: Wire, **options: Any) -> tooldeck.RunResult:
    async def main() -> tooldeck.RunResult:
        model = wire.make(fake)
        try:
            return await tooldeck.run(model, [], "Weather in Paris?", **options)
        finally:
            await _close(model)

    result = asyncio.run(main())
    for body in fake.bodies():
        wire.check_body(body)
    return result


def _text_of(message: Any) -> str:
    """The text of a user or assistant message in any of the three wire shapes."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(str(part.get("text", "")) for part in content or () if isinstance(part, dict))


params_kinds = pytest.mark.parametrize("kind_name", list(KINDS))
params_wires = pytest.mark.parametrize("wire_name", list(WIRES))


# -- a valid answer -----------------------------------------------------------------------------


@params_wires
@params_kinds
def test_the_projected_schema_is_sent_and_a_valid_answer_is_the_instance(
    fake_provider: FakeProvider, wire_name: str, kind_name: str
) -> None:
    wire, (kind, expected) = WIRES[wire_name], KINDS[kind_name]
    fake_provider.queue(wire.answer(wire.valid))
    result = turn(fake_provider, wire, output_type=kind)
    assert result.structured == expected and type(result.structured) is type(expected)
    assert result.stop_reason is StopReason.END_TURN
    [body] = fake_provider.bodies()
    sent = wire.sent_format(body)
    assert sent == wire.expected_format(kind)
    spec = sent.get("format") or sent["json_schema"]
    schema = spec["schema"]
    # checked by hand, not only against project_output
    assert schema["additionalProperties"] is False and schema["type"] == "object"
    if wire.dialect == "openai":  # strict: every property required, the optional nullable
        assert spec["strict"] is True
        assert sorted(schema["required"]) == ["city", "note", "temp_c"]
        assert jsonschema_rs.validator_for(schema["properties"]["note"]).is_valid(None)
    else:  # Anthropic: always constrained, no flag; optional properties stay optional
        assert "strict" not in spec
        assert sorted(schema["required"]) == ["city", "temp_c"]
    if kind is WeatherModel:
        temp = schema["properties"]["temp_c"]
        if wire.dialect == "openai":
            assert (temp["minimum"], temp["maximum"]) == (-90, 60)
        else:  # Anthropic cannot enforce numeric bounds: moved into the description
            assert "minimum" not in temp and "maximum: 60" in temp["description"]
        assert_golden(f"structured/{wire_name}_pydantic", body)


# -- a retry that succeeds ----------------------------------------------------------------------

FIRST_ANSWERS = {
    "wrong-shape": ('{"city": "Paris"}', "temp_c"),
    "prose": ('Sure! {"city": "Paris", "temp_c": 18}', "not JSON"),
}


@params_wires
@params_kinds
@pytest.mark.parametrize("first", list(FIRST_ANSWERS))
def test_an_invalid_answer_is_sent_back_and_the_second_is_the_instance(
    fake_provider: FakeProvider, wire_name: str, kind_name: str, first: str
) -> None:
    wire, (kind, expected) = WIRES[wire_name], KINDS[kind_name]
    bad, words = FIRST_ANSWERS[first]
    fake_provider.queue(wire.answer(bad), wire.answer(wire.valid))
    result = turn(fake_provider, wire, output_type=kind)
    assert result.structured == expected
    assert result.stop_reason is StopReason.END_TURN and result.steps == 2
    first_body, second_body = fake_provider.bodies()
    assert wire.sent_format(second_body) == wire.sent_format(first_body)  # same schema again
    conversation = wire.messages(second_body)
    replayed, retry = conversation[-2], conversation[-1]
    assert replayed["role"] == "assistant" and _text_of(replayed) == bad
    assert retry["role"] == "user"
    retry_text = _text_of(retry)
    assert retry_text.startswith("Your final answer could not be used: the structured answer")
    assert words in retry_text
    assert "Reply again with only a JSON object" in retry_text


def test_a_constraint_anthropic_cannot_enforce_is_enforced_by_a_retry(
    fake_provider: FakeProvider,
) -> None:
    wire = WIRES["anthropic"]
    fake_provider.queue(wire.answer('{"city": "Paris", "temp_c": 99}'), wire.answer(wire.valid))
    result = turn(fake_provider, wire, output_type=WeatherModel)
    assert result.structured == WeatherModel(city="Paris", temp_c=18)
    retry = wire.messages(fake_provider.bodies()[1])[-1]
    assert "99 is greater than the maximum of 60" in _text_of(retry)


# -- retries that run out -----------------------------------------------------------------------


@params_wires
@params_kinds
def test_answers_that_stay_invalid_end_the_turn_after_the_retries(
    fake_provider: FakeProvider, wire_name: str, kind_name: str
) -> None:
    wire, (kind, _) = WIRES[wire_name], KINDS[kind_name]
    fake_provider.queue(wire.answer('{"city": "Paris"}'), wire.answer("no idea"))
    result = turn(fake_provider, wire, output_type=kind, output_retries=1)
    assert len(fake_provider.requests) == 2  # one answer, one retry, nothing more
    assert result.stop_reason is StopReason.ERROR and result.structured is None
    assert result.reason.startswith("structured output invalid after 1 retries: ")
    assert "not JSON" in result.reason  # why the last answer failed
    assert result.output == "no idea"


# -- not strict: the reason, and Anthropic's refusal ----------------------------------------------


class Tagged(BaseModel):
    city: str
    labels: dict[str, str]  # a free-form map: no strict mode can express it


@pytest.mark.parametrize("wire_name", ["responses", "chat"])
def test_a_schema_openai_cannot_make_strict_is_sent_as_it_is(
    fake_provider: FakeProvider, wire_name: str
) -> None:
    wire = WIRES[wire_name]
    fake_provider.queue(wire.answer('{"city": "Paris", "labels": {"sky": "grey"}}'))
    result = turn(fake_provider, wire, output_type=Tagged)
    assert result.structured == Tagged(city="Paris", labels={"sky": "grey"})
    sent = wire.sent_format(fake_provider.bodies()[0])
    spec = sent.get("format") or sent["json_schema"]
    assert spec["strict"] is False
    assert spec["schema"]["properties"]["labels"]["additionalProperties"] == {"type": "string"}
    projection = project_output(Tagged, "openai")
    assert projection.reason is not None and "labels" in projection.reason


def test_a_schema_anthropic_cannot_express_fails_before_any_request(
    fake_provider: FakeProvider,
) -> None:
    with pytest.raises(SchemaError, match="strict-compatible"):
        turn(fake_provider, WIRES["anthropic"], output_type=Tagged)
    assert fake_provider.requests == []
