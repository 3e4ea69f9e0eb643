"""OpenAIResponsesModel over real HTTP (and real SSE) against the local fake provider.

Every request body the SDK sends is compared with a hand-reviewed golden file and, when
PyYAML is importable, validated against OpenAI's published OpenAPI description
(``CreateResponse``); every canned reply is validated against ``Response`` (and the
stream events against ``ResponseStreamEvent``), so the fixtures stay realistic.
"""

from __future__ import annotations

import asyncio
import copy
import functools
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, Literal, TypeVar

import jsonschema_rs
import openai
import pytest

import tooldeck
from tooldeck import (
    AssistantMessage,
    ImagePart,
    OpaqueItem,
    SchemaError,
    StopReason,
    TextPart,
    Tool,
    ToolCall,
    ToolOutput,
    ToolResult,
    Usage,
    UserMessage,
    tool,
)
from tooldeck.errors import ProviderError, ProviderUnavailable
from tooldeck.events import Event, EventBus, TurnFinished
from tooldeck.model import Model, ModelDelta, ModelRequest, ModelSettings
from tooldeck.providers.openai_responses import OpenAIResponsesModel

from .fake_server import SSE, FakeProvider, Reply, assert_golden

T = TypeVar("T")
MODEL = "gpt-5.4"
SNAPSHOT = "gpt-5.4-2026-03-05"
SPEC = Path("/work/shared/reference/openai-openapi.yml")

# -- tools ----------------------------------------------------------------------------

RAN: list[str] = []


@tool(read_only=True)
def get_weather(city: str, unit: Literal["c", "f"] | None = None) -> dict[str, Any]:
    """Get current weather for a city."""
    RAN.append(f"get_weather:{city}")
    return {"temp_c": 18, "sky": "cloudy"}


@tool(read_only=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    RAN.append(f"add:{a}+{b}")
    return a + b


@tool(read_only=True, namespace="crm", namespace_description="CRM: customers and orders.")
def get_customer(customer_id: str) -> dict[str, Any]:
    """Look up one customer by id."""
    RAN.append(f"get_customer:{customer_id}")
    return {"id": customer_id, "name": "Ada"}


@tool(read_only=True)
def screenshot() -> list[Any]:
    """Take a screenshot of the page."""
    RAN.append("screenshot")
    return [TextPart("the page"), ImagePart(data="iVBORw0KGgo=", mime_type="image/png")]


# -- the OpenAPI description (optional) ------------------------------------------------


@functools.cache
def _spec() -> dict[str, Any] | None:
    try:
        import yaml
    except ImportError:
        return None
    if not SPEC.exists():
        return None
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with SPEC.open() as f:
        doc: dict[str, Any] = yaml.load(f, Loader=loader)
    return doc


@functools.cache
def _validator(name: str) -> Any:
    doc = _spec()
    if doc is None:
        return None
    root = {"$ref": f"#/components/schemas/{name}", "components": doc["components"]}
    return jsonschema_rs.validator_for(root)


def check_spec(name: str, value: Any) -> None:
    validator = _validator(name)
    if validator is None:
        return
    errors = [f"{list(e.instance_path)}: {e.message[:300]}" for e in validator.iter_errors(value)]
    assert not errors, f"not a valid {name}: {errors[:3]}"


# -- canned replies --------------------------------------------------------------------


def usage(i: int = 10, o: int = 5, reasoning: int = 0, cached: int = 0) -> dict[str, Any]:
    return {
        "input_tokens": i,
        "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
        "output_tokens": o,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": i + o,
    }


def response(
    *output: dict[str, Any],
    status: str = "completed",
    reason: str | None = None,
    rid: str = "resp_1",
    model: str = SNAPSHOT,
    use: dict[str, Any] | None = None,
    error: dict[str, Any] | None = None,
) -> dict[str, Any]:
    body = {
        "id": rid,
        "object": "response",
        "created_at": 1767225600,
        "status": status,
        "error": error,
        "incomplete_details": {"reason": reason} if reason else None,
        "instructions": None,
        "metadata": {},
        "model": model,
        "output": list(output),
        "parallel_tool_calls": True,
        "temperature": None,
        "tool_choice": "auto",
        "tools": [],
        "top_p": None,
        "store": False,
        "usage": use or usage(),
    }
    check_spec("Response", body)
    return body


def ok(*output: dict[str, Any], **kwargs: Any) -> Reply:
    return Reply(response(*output, **kwargs))


def fc(
    call_id: str,
    name: str,
    arguments: str,
    *,
    fid: str | None = None,
    status: str = "completed",
    namespace: str | None = None,
) -> dict[str, Any]:
    item: dict[str, Any] = {
        "type": "function_call",
        "id": fid or f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": status,
    }
    if namespace:
        item["namespace"] = namespace
    return item


def msg(*texts: str, mid: str = "msg_1", phase: str | None = None) -> dict[str, Any]:
    item: dict[str, Any] = {
        "type": "message",
        "id": mid,
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": t, "annotations": []} for t in texts],
    }
    if phase:
        item["phase"] = phase
    return item


def reasoning(rid: str = "rs_1", enc: str = "gAAAAB-encrypted-1") -> dict[str, Any]:
    return {
        "type": "reasoning",
        "id": rid,
        "summary": [{"type": "summary_text", "text": "Need the weather tool."}],
        "encrypted_content": enc,
    }


def sse_for(final: dict[str, Any], *, terminal: str = "response.completed", chunk: int = 4) -> SSE:
    """A realistic event sequence for ``final``: added, deltas, done per item, terminal."""
    events: list[dict[str, Any]] = []
    created = {**final, "status": "in_progress", "output": [], "incomplete_details": None}
    del created["usage"]
    events.append({"type": "response.created", "response": created})
    for index, item in enumerate(final["output"]):
        start = copy.deepcopy(item)
        if item["type"] == "function_call":
            start.update(arguments="", status="in_progress")
        elif item["type"] == "message":
            start.update(content=[], status="in_progress")
        elif item["type"] == "reasoning":
            start.pop("encrypted_content", None)  # only the done copy is complete
        events.append({"type": "response.output_item.added", "output_index": index, "item": start})
        if item["type"] == "reasoning":
            for s_index, summary in enumerate(item.get("summary") or []):
                events.append(
                    {
                        "type": "response.reasoning_summary_text.delta",
                        "item_id": item["id"],
                        "output_index": index,
                        "summary_index": s_index,
                        "delta": summary["text"],
                    }
                )
        if item["type"] == "function_call":
            args = item["arguments"]
            for at in range(0, len(args), chunk):
                events.append(
                    {
                        "type": "response.function_call_arguments.delta",
                        "item_id": item["id"],
                        "output_index": index,
                        "delta": args[at : at + chunk],
                    }
                )
        elif item["type"] == "message":
            for c_index, content in enumerate(item["content"]):
                text = content.get("text", "")
                for at in range(0, len(text), chunk):
                    events.append(
                        {
                            "type": "response.output_text.delta",
                            "item_id": item["id"],
                            "output_index": index,
                            "content_index": c_index,
                            "delta": text[at : at + chunk],
                            "logprobs": [],
                        }
                    )
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    events.append({"type": terminal, "response": final})
    for number, event in enumerate(events):
        event["sequence_number"] = number
        check_spec("ResponseStreamEvent", event)
    return SSE([(e["type"], e) for e in events])


# -- fixtures and helpers --------------------------------------------------------------


_LOOP: list[asyncio.Runner] = []


def aio(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the test's one event loop (an SDK client's pool is bound to it)."""
    return _LOOP[-1].run(coro)


@pytest.fixture
def fake(fake_provider: FakeProvider) -> Iterator[FakeProvider]:
    """The fake provider; afterwards every request body must be a valid CreateResponse."""
    RAN.clear()
    with asyncio.Runner() as runner:
        _LOOP.append(runner)
        try:
            yield fake_provider
        finally:
            _LOOP.pop()
    for recorded in fake_provider.requests:
        assert recorded.path == "/v1/responses"
        assert recorded.headers["authorization"] == "Bearer test"
        check_spec("CreateResponse", recorded.body)


def make(fake: FakeProvider, model: str = MODEL, **kwargs: Any) -> OpenAIResponsesModel:
    kwargs.setdefault("max_retries", 0)
    return OpenAIResponsesModel(model, api_key="test", base_url=fake.url + "/v1", **kwargs)


def respond(model: OpenAIResponsesModel, request: ModelRequest) -> AssistantMessage:
    return aio(model.respond(request))


def stream(model: OpenAIResponsesModel, request: ModelRequest) -> list[Any]:
    async def collect() -> list[Any]:
        return [x async for x in model.stream(request)]

    return aio(collect())


def run(model: Model, tools: list[Tool], prompt: str, **kwargs: Any) -> tooldeck.RunResult:
    return aio(tooldeck.run(model, tools, prompt, **kwargs))


def golden(name: str, body: Any) -> None:
    assert_golden(f"openai_responses/{name}", body)


def ask(*items: Any, tools: tuple[Tool, ...] = (get_weather,), **kwargs: Any) -> ModelRequest:
    return ModelRequest(list(items), list(tools), **kwargs)


# -- scenarios -------------------------------------------------------------------------


def test_protocol_and_names(fake: FakeProvider) -> None:
    model = make(fake)
    assert isinstance(model, Model)
    assert model.name == "openai-responses:gpt-5.4"
    assert (model.provider, model.adapter) == ("openai", "openai-responses")


def test_single_call(fake: FakeProvider) -> None:
    fake.queue(
        ok(
            fc("call_1", "get_weather", '{"city":"Paris","unit":null}'),
            use=usage(90, 40, reasoning=24, cached=16),
        )
    )
    message = respond(make(fake), ask(UserMessage("What's the weather in Paris?")))
    golden("single_call", fake.bodies()[0])
    assert message.stop_reason is StopReason.TOOL_CALLS
    assert message.parts == [
        ToolCall("call_1", "get_weather", '{"city":"Paris","unit":null}', item_id="fc_call_1")
    ]
    assert message.usage == Usage(90, 40, reasoning_tokens=24, cache_read_tokens=16, requests=1)
    assert (message.provider, message.adapter, message.model) == (
        "openai",
        "openai-responses",
        MODEL,  # the model asked for, not the snapshot the API answered with
    )
    assert message.provider_data == {"response_model": SNAPSHOT}
    assert message.response_id == "resp_1"


def test_parallel_calls_in_order_answered_by_call_id(fake: FakeProvider) -> None:
    fake.queue(
        ok(
            msg("Checking both cities."),
            fc("call_a", "get_weather", '{"city":"Paris","unit":"c"}'),
            fc("call_b", "get_weather", '{"city":"Oslo","unit":null}'),
        ),
        ok(msg("Paris and Oslo are both 18C and cloudy.", mid="msg_2"), rid="resp_2"),
    )
    result = run(make(fake), [get_weather], "Weather in Paris and Oslo?")
    assert result.stop_reason is StopReason.END_TURN and result.steps == 2
    assert sorted(RAN) == ["get_weather:Oslo", "get_weather:Paris"]
    first = result.items[1]
    assert isinstance(first, AssistantMessage)
    assert [type(p).__name__ for p in first.parts] == ["TextPart", "ToolCall", "ToolCall"]
    assert [c.call_id for c in first.tool_calls] == ["call_a", "call_b"]
    golden("parallel_calls_followup", fake.bodies()[1])


def test_malformed_arguments_become_an_error_output(fake: FakeProvider) -> None:
    fake.queue(
        ok(fc("call_1", "get_weather", '{"city": Paris}')),
        ok(msg("Sorry, retrying is not needed."), rid="resp_2"),
    )
    model = make(fake)
    parsed = model.parse_response(response(fc("call_1", "get_weather", '{"city": Paris}')))
    assert parsed.tool_calls[0].arguments == '{"city": Paris}'  # kept raw; the dispatcher judges
    result = run(model, [get_weather], "Weather in Paris?")
    assert RAN == []
    [output] = result.tool_outputs
    assert output.is_error and "Invalid arguments for get_weather" in output.text
    second = fake.bodies()[1]
    [sent] = [i for i in second["input"] if i.get("type") == "function_call_output"]
    assert sent == {"type": "function_call_output", "call_id": "call_1", "output": output.text}
    sent["output"] = "<the dispatcher's argument error>"  # its wording belongs to arguments.py
    golden("malformed_arguments_followup", second)


def test_refusal_runs_no_tool_and_keeps_no_free_text(fake: FakeProvider) -> None:
    refusal_text = "I can't help with writing malware for that exploit."
    refused = msg("Here is")
    refused["content"].append({"type": "refusal", "refusal": refusal_text})
    fake.queue(ok(refused, fc("call_1", "get_weather", '{"city":"Paris","unit":null}')))
    result = run(make(fake), [get_weather], "Do something bad.")
    assert RAN == []
    assert result.stop_reason is StopReason.REFUSAL
    message = result.last_message
    assert message is not None and message.stop_reason is StopReason.REFUSAL
    assert message.refusal == "refusal:cyber"
    assert "malware" not in repr(result.items) and "help with" not in repr(result.items)
    assert result.tool_outputs[0].is_error and "refused" in result.tool_outputs[0].text
    assert len(fake.requests) == 1


def test_truncated_function_call_is_never_executed(fake: FakeProvider) -> None:
    fake.queue(
        ok(
            reasoning(),
            fc("call_1", "get_weather", '{"city":"Par', status="incomplete"),
            status="incomplete",
            reason="max_output_tokens",
        )
    )
    result = run(
        make(fake), [get_weather], "Weather?", settings=ModelSettings(max_output_tokens=64)
    )
    assert RAN == []
    assert result.stop_reason is StopReason.MAX_TOKENS
    message = result.last_message
    assert message is not None
    assert message.stop_reason is StopReason.MAX_TOKENS
    assert message.tool_calls[0].incomplete
    assert message.provider_data == {
        "response_model": SNAPSHOT,
        "status": "incomplete",
        "incomplete_reason": "max_output_tokens",
    }
    assert "Not executed" in result.tool_outputs[0].text
    golden("max_output_tokens", fake.bodies()[0])


def test_incomplete_response_marks_every_call_incomplete(fake: FakeProvider) -> None:
    model = make(fake)
    data = response(
        fc("call_1", "get_weather", '{"city":"Paris","unit":null}'),
        status="incomplete",
        reason="max_output_tokens",
    )
    assert model.parse_response(data).tool_calls[0].incomplete
    unknown = response(msg("Partial"), status="incomplete")
    unknown["incomplete_details"] = {"reason": "max_messages"}  # a newer, unlisted reason
    assert model.parse_response(unknown).stop_reason is StopReason.MAX_TOKENS
    filtered = response(msg("Part"), status="incomplete", reason="content_filter")
    assert model.parse_response(filtered).stop_reason is StopReason.CONTENT_FILTER
    failed = response(status="failed", error={"code": "server_error", "message": "boom"})
    message = model.parse_response(failed)
    assert message.stop_reason is StopReason.ERROR
    assert message.provider_data is not None
    assert message.provider_data["error"] == {"code": "server_error", "message": "boom"}
    assert fake.requests == []


def test_reasoning_carried_verbatim_across_two_steps(fake: FakeProvider) -> None:
    thought = reasoning()
    thought["status"] = "completed"
    thought["future_field"] = {"kept": [1, 2]}  # unknown fields survive the round trip
    fake.queue(
        ok(thought, fc("call_1", "get_weather", '{"city":"Paris","unit":null}')),
        ok(reasoning("rs_2", "gAAAAB-encrypted-2"), msg("18C and cloudy."), rid="resp_2"),
    )
    model = make(fake, reasoning_effort="medium", reasoning_summary="auto")
    result = run(model, [get_weather], "What's the weather in Paris?")
    assert result.output == "18C and cloudy." and RAN == ["get_weather:Paris"]
    first = result.items[1]
    assert isinstance(first, AssistantMessage)
    assert first.opaque == [
        OpaqueItem("openai", "openai-responses", MODEL, "reasoning", thought, model_bound=True)
    ]
    second = fake.bodies()[1]
    assert second["input"][1] == thought  # verbatim, before its function call
    assert second["input"][2]["id"] == "fc_call_1"
    golden("reasoning_two_steps", second)


def test_reasoning_dropped_on_model_switch(fake: FakeProvider) -> None:
    fake.queue(
        ok(reasoning(), msg("Let me check.", phase="commentary"), fc("call_1", "get_weather", "{}"))
    )
    first = respond(make(fake), ask(UserMessage("Weather in Paris?")))
    transcript = [
        UserMessage("Weather in Paris?"),
        first,
        ToolOutput("call_1", "get_weather", ToolResult('{"temp_c":18}')),
    ]
    fake.queue(ok(msg("18C.", mid="msg_9"), rid="resp_9", model="gpt-5.4-mini"))
    respond(make(fake, "gpt-5.4-mini"), ask(*transcript))
    second = fake.bodies()[1]
    assert not [i for i in second["input"] if i.get("type") == "reasoning"]
    assert all("id" not in i for i in second["input"])
    golden("model_switch", second)
    # the same transcript to the same model keeps reasoning and ids
    fake.queue(ok(msg("18C.", mid="msg_9"), rid="resp_9"))
    respond(make(fake), ask(*transcript))
    again = fake.bodies()[2]["input"]
    assert [i.get("type") for i in again] == [
        None,
        "reasoning",
        "message",
        "function_call",
        "function_call_output",
    ]
    assert again[2]["id"] == "msg_1" and again[2]["phase"] == "commentary"
    assert again[3]["id"] == "fc_call_1"


def test_hosted_tool_search_items_kept_and_resent_never_dispatched(fake: FakeProvider) -> None:
    search_call = {
        "type": "tool_search_call",
        "id": "tsc_1",
        "call_id": None,
        "execution": "server",
        "arguments": {"paths": ["crm"]},
        "status": "completed",
    }
    search_output = {
        "type": "tool_search_output",
        "id": "tso_1",
        "call_id": None,
        "execution": "server",
        "status": "completed",
        "tools": [
            {
                "type": "namespace",
                "name": "crm",
                "description": "CRM: customers and orders.",
                "tools": [
                    {
                        "type": "function",
                        "name": "get_customer",
                        "description": "Look up one customer by id.",
                        "parameters": {
                            "type": "object",
                            "properties": {"customer_id": {"type": "string"}},
                            "required": ["customer_id"],
                            "additionalProperties": False,
                        },
                        "strict": True,
                        "defer_loading": True,
                    }
                ],
            }
        ],
    }
    call = fc("call_1", "get_customer", '{"customer_id":"c42"}', namespace="crm")
    fake.queue(ok(search_call, search_output, call))
    model = make(fake)
    first = respond(
        model,
        ask(
            UserMessage("Who is c42?"), tools=(get_customer,), deferred=frozenset({"get_customer"})
        ),
    )
    golden("tool_search_deferred", fake.bodies()[0])
    assert [p.kind for p in first.opaque] == ["tool_search_call", "tool_search_output"]
    assert all(not p.model_bound for p in first.opaque)
    assert first.opaque[0].data == search_call and first.opaque[1].data == search_output
    assert first.tool_calls[0].namespace == "crm"
    assert first.stop_reason is StopReason.TOOL_CALLS
    # through the loop: only the function call reaches the dispatcher
    RAN.clear()
    fake.queue(ok(search_call, search_output, call), ok(msg("Ada."), rid="resp_2"))
    result = run(model, [get_customer], "Who is c42?")
    assert RAN == ["get_customer:c42"] and len(result.tool_outputs) == 1
    followup = fake.bodies()[2]
    assert followup["input"][1:4] == [search_call, search_output, {**call, "namespace": "crm"}]
    golden("tool_search_followup", followup)
    # another model of the same adapter still gets the hosted items (not model-bound)
    fake.queue(ok(msg("Ada."), rid="resp_3", model="gpt-5.4-mini"))
    respond(make(fake, "gpt-5.4-mini"), ask(*result.items, tools=(get_customer,)))
    other = fake.bodies()[3]["input"]
    assert other[1:3] == [search_call, search_output]
    assert other[3] == {
        "type": "function_call",
        "call_id": "call_1",
        "name": "get_customer",
        "arguments": '{"customer_id":"c42"}',
        "namespace": "crm",
    }


def test_web_search_call_kept_verbatim(fake: FakeProvider) -> None:
    search = {
        "type": "web_search_call",
        "id": "ws_1",
        "status": "completed",
        "action": {"type": "search", "query": "weather paris today"},
    }
    answer = msg("It is 18C in Paris.")
    answer["content"][0]["annotations"] = [
        {
            "type": "url_citation",
            "url": "https://weather.example/paris",
            "title": "Paris weather",
            "start_index": 0,
            "end_index": 19,
        }
    ]
    fake.queue(ok(search, answer), ok(msg("You're welcome.", mid="msg_2"), rid="resp_2"))
    model = make(fake, hosted_tools=[{"type": "web_search"}])
    first = respond(model, ask(UserMessage("Weather in Paris?"), tools=()))
    assert first.stop_reason is StopReason.END_TURN and first.text == "It is 18C in Paris."
    [opaque] = first.opaque
    assert opaque.kind == "web_search_call" and opaque.data == search and not opaque.model_bound
    respond(model, ask(UserMessage("Weather in Paris?"), first, UserMessage("Thanks!"), tools=()))
    second = fake.bodies()[1]
    assert second["input"][1] == search
    assert second["input"][2] == answer  # same model: the message item goes back as it came
    golden("web_search_followup", second)


def test_unknown_items_are_opaque_and_resent(fake: FakeProvider) -> None:
    future = {"type": "future_item", "id": "fi_1", "payload": {"a": [1, 2]}}
    model = make(fake)
    data = response(msg("Hi."))
    data["output"].insert(0, future)
    data["output"][1]["content"].append({"type": "future_content", "x": 1})
    message = model.parse_response(data)
    assert message.text == "Hi." and message.stop_reason is StopReason.END_TURN
    assert message.opaque == [
        OpaqueItem("openai", "openai-responses", MODEL, "future_item", future, model_bound=False)
    ]
    assert model.input_items([message])[0] == future
    no_type = model.parse_response(response(msg("x")) | {"output": [{"id": "odd"}]})
    assert no_type.opaque[0].kind == "unknown" and no_type.opaque[0].data == {"id": "odd"}


def test_foreign_history_is_sent_without_ids(fake: FakeProvider) -> None:
    anthropic = AssistantMessage(
        parts=[
            OpaqueItem("anthropic", "anthropic", "claude", "thinking", {"type": "thinking"}),
            TextPart("Let me look."),
            TextPart(" One moment."),
            ToolCall("toolu_1", "get_weather", {"city": "Paris", "unit": None}, item_id="x"),
        ],
        stop_reason=StopReason.TOOL_CALLS,
        provider="anthropic",
        adapter="anthropic",
        model="claude",
    )
    outputs = ToolOutput("toolu_1", "get_weather", ToolResult.wrap({"temp_c": 18}))
    fake.queue(ok(msg("18C.")))
    respond(make(fake), ask(UserMessage("Weather?"), anthropic, outputs))
    body = fake.bodies()[0]
    assert body["input"][1:] == [
        {"role": "assistant", "content": "Let me look. One moment."},
        {
            "type": "function_call",
            "call_id": "toolu_1",
            "name": "get_weather",
            "arguments": '{"city":"Paris","unit":null}',
        },
        {"type": "function_call_output", "call_id": "toolu_1", "output": '{"temp_c":18}'},
    ]
    golden("foreign_history", body)


def test_images_in_user_input_and_tool_output(fake: FakeProvider) -> None:
    fake.queue(
        ok(fc("call_1", "screenshot", "{}")),
        ok(msg("A page."), rid="resp_2"),
    )
    model = make(fake)
    session = tooldeck.Session(model, [screenshot])
    aio(session.run("What is on the page?"))
    second = fake.bodies()[1]
    assert second["input"][-1] == {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": [
            {"type": "input_text", "text": "the page"},
            {
                "type": "input_image",
                "image_url": "data:image/png;base64,iVBORw0KGgo=",
                "detail": "auto",
            },
        ],
    }
    user = UserMessage([TextPart("And this?"), ImagePart(url="https://example.com/a.png")])
    fake.queue(ok(msg("A cat."), rid="resp_3"))
    respond(model, ask(*session.transcript, user, tools=(screenshot,)))
    third = fake.bodies()[2]
    assert third["input"][-1] == {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "And this?"},
            {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "auto"},
        ],
    }
    golden("images", third)


def test_settings_tool_choice_and_passthrough(fake: FakeProvider) -> None:
    fake.queue(ok(fc("call_1", "add", '{"a":1,"b":2}')))
    settings = ModelSettings(
        tool_choice="add",
        parallel_tool_calls=False,
        max_output_tokens=512,
        temperature=0.2,
        extra={"prompt_cache_key": "session-1", "metadata": {"run": "t"}},
    )
    model = make(fake, reasoning_effort="low")
    respond(
        model,
        ask(
            UserMessage("1+2?"),
            tools=(add, get_weather),
            settings=settings,
            instructions="Be brief.",
        ),
    )
    golden("settings", fake.bodies()[0])
    for choice in ("none", "required", "auto"):
        fake.queue(ok(msg("ok")))
        respond(model, ask(UserMessage("x"), settings=ModelSettings(tool_choice=choice)))
        assert fake.bodies()[-1]["tool_choice"] == choice
    with pytest.raises(ValueError, match="not among this request's tools"):
        respond(model, ask(UserMessage("x"), settings=ModelSettings(tool_choice="nope")))
    fake.queue(ok(msg("ok")))
    respond(model, ask(UserMessage("no tools"), tools=()))
    assert not {"tools", "tool_choice", "parallel_tool_calls"} & set(fake.bodies()[-1])
    assert len(fake.requests) == 5


def test_tool_schema_error_before_any_request(fake: FakeProvider) -> None:
    bad = Tool.from_schema(
        name="bad",
        description="A strict tool with a schema strict mode rejects.",
        json_schema={
            "type": "object",
            "properties": {"x": {"not": {"type": "string"}}},
            "required": ["x"],
        },
        strict=True,
        execute=lambda params, ctx: None,
    )
    with pytest.raises(SchemaError):
        respond(make(fake), ask(UserMessage("x"), tools=(bad,)))
    assert fake.requests == []


def test_429_with_retry_after_then_success(fake: FakeProvider) -> None:
    fake.queue(
        Reply(
            {"error": {"message": "Rate limit reached", "type": "requests", "code": None}},
            429,
            {"retry-after-ms": "10"},
        ),
        ok(msg("Done.")),
    )
    message = respond(make(fake, max_retries=1), ask(UserMessage("hi")))
    assert message.text == "Done."
    assert len(fake.requests) == 2 and fake.bodies()[0] == fake.bodies()[1]


def test_500_raises_after_retries_and_the_turn_finishes_with_error(fake: FakeProvider) -> None:
    def server_error() -> Reply:
        body = {"error": {"message": "The server had an error", "type": "server_error"}}
        return Reply(body, 500, {"retry-after-ms": "1"})

    fake.queue(server_error(), server_error())
    with pytest.raises(ProviderUnavailable) as info:
        respond(make(fake, max_retries=1), ask(UserMessage("hi")))
    assert isinstance(info.value.__cause__, openai.InternalServerError)
    assert len(fake.requests) == 2
    bus = EventBus()
    seen: list[Event] = []
    bus.subscribe(seen.append)
    fake.queue(server_error())
    with pytest.raises(ProviderUnavailable):
        run(make(fake), [get_weather], "hi", events=bus)
    finished = [e for e in seen if isinstance(e, TurnFinished)]
    assert len(finished) == 1 and finished[0].stop_reason is StopReason.ERROR
    assert "ProviderUnavailable" in finished[0].reason
    assert len(fake.requests) == 3


SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "temp_c": {"type": "number"},
        "note": {"type": "string"},
    },
    "required": ["city", "temp_c"],
    "additionalProperties": False,
}


def test_structured_output(fake: FakeProvider) -> None:
    settings = ModelSettings(output_schema=SCHEMA, output_schema_name="weather_report")
    fake.queue(ok(msg('{"city":"Paris","temp_c":18,"note":null}')))
    model = make(fake)
    message = respond(model, ask(UserMessage("Report."), settings=settings))
    golden("structured_output", fake.bodies()[0])
    assert fake.bodies()[0]["text"]["format"]["strict"] is True
    # strict made "note" required-and-nullable; its null means "absent"
    assert message.structured == {"city": "Paris", "temp_c": 18}
    assert message.stop_reason is StopReason.END_TURN
    # a bad answer ends the turn with ERROR and says why (no retry left); nothing raises
    fake.queue(ok(msg('{"city":"Paris"}')))
    no_retry = ModelSettings(output_schema=SCHEMA, output_retries=0)
    result = run(model, [get_weather], "Report.", settings=no_retry)
    assert result.stop_reason is StopReason.ERROR and result.structured is None
    assert result.reason.startswith("structured output invalid after 0 retries")
    assert result.last_message is not None and result.last_message.provider_data is not None
    assert "temp_c" in result.last_message.provider_data["structured_error"]
    fake.queue(ok(msg("not json")))
    broken = respond(model, ask(UserMessage("Report."), settings=settings))
    assert broken.stop_reason is StopReason.ERROR
    assert broken.provider_data is not None
    assert "not JSON" in broken.provider_data["structured_error"]
    # tool calls are not a final answer: no parsing
    fake.queue(ok(fc("call_1", "get_weather", '{"city":"Paris","unit":null}')))
    step = respond(model, ask(UserMessage("Report."), settings=settings))
    assert step.stop_reason is StopReason.TOOL_CALLS and step.structured is None


def test_structured_output_bad_root_makes_no_request(fake: FakeProvider) -> None:
    settings = ModelSettings(output_schema={"anyOf": [{"type": "string"}, {"type": "number"}]})
    with pytest.raises(SchemaError, match="object root"):
        respond(make(fake), ask(UserMessage("x"), settings=settings))
    assert fake.requests == []


def test_streaming_text_and_a_tool_call(fake: FakeProvider) -> None:
    final = response(
        reasoning(),
        msg("Checking the weather."),
        fc("call_1", "get_weather", '{"city":"Paris","unit":null}'),
    )
    fake.queue(sse_for(final))
    model = make(fake)
    events = stream(model, ask(UserMessage("Weather in Paris?")))
    golden("stream_request", fake.bodies()[0])
    *deltas, message = events
    assert all(isinstance(d, ModelDelta) for d in deltas)
    text = "".join(d.text for d in deltas if d.kind == "text")
    args = "".join(d.text for d in deltas if d.kind == "tool_call")
    assert text == "Checking the weather."
    assert [d.text for d in deltas if d.kind == "reasoning"] == ["Need the weather tool."]
    assert args == '{"city":"Paris","unit":null}'
    assert {(d.call_id, d.name, d.index) for d in deltas if d.kind.startswith("tool_call")} == {
        ("call_1", "get_weather", 0)
    }
    assert next(d.kind for d in deltas if d.kind.startswith("tool_call")) == "tool_call_start"
    assert isinstance(message, AssistantMessage)
    assert message == model.parse_response(final)
    assert message.opaque[0].data["encrypted_content"] == "gAAAAB-encrypted-1"


def test_streaming_takes_items_from_output_item_done(fake: FakeProvider) -> None:
    full = response(reasoning(), fc("call_1", "get_weather", "{}"))
    events = list(sse_for(full).events)
    terminal = copy.deepcopy(events[-1])
    terminal[1]["response"]["output"] = []  # a terminal response without its items
    fake.queue(SSE([*events[:-1], terminal]))
    message = stream(make(fake), ask(UserMessage("x")))[-1]
    assert isinstance(message, AssistantMessage)
    assert [p.kind for p in message.opaque] == ["reasoning"]
    assert message.opaque[0].data == reasoning() and message.tool_calls[0].call_id == "call_1"


def test_streaming_truncated_call_and_errors(fake: FakeProvider) -> None:
    final = response(
        fc("call_1", "get_weather", '{"city":"Pa', status="incomplete"),
        status="incomplete",
        reason="max_output_tokens",
    )
    fake.queue(sse_for(final, terminal="response.incomplete"))
    message = stream(make(fake), ask(UserMessage("x")))[-1]
    assert isinstance(message, AssistantMessage)
    assert message.stop_reason is StopReason.MAX_TOKENS and message.tool_calls[0].incomplete
    error = {
        "type": "error",
        "code": "server_error",
        "message": "stream broke",
        "param": None,
        "sequence_number": 0,
    }
    check_spec("ResponseStreamEvent", error)
    fake.queue(SSE([("error", error)]))
    with pytest.raises(ProviderUnavailable, match="stream broke") as info:
        stream(make(fake), ask(UserMessage("x")))
    assert isinstance(info.value.__cause__, openai.APIError)
    cut = list(sse_for(response(msg("Hello"))).events)[:-1]
    fake.queue(SSE(cut))
    with pytest.raises(ProviderError, match="before a terminal") as info:
        stream(make(fake), ask(UserMessage("x")))
    assert isinstance(info.value.__cause__, openai.APIError)


def test_full_multi_step_loop(fake: FakeProvider) -> None:
    fake.queue(
        ok(
            reasoning(),
            fc("call_1", "get_weather", '{"city":"Paris","unit":"c"}'),
            use=usage(100, 20, reasoning=8),
        ),
        ok(
            reasoning("rs_2", "gAAAAB-encrypted-2"),
            fc("call_2", "add", '{"a":18,"b":2}'),
            rid="resp_2",
            use=usage(150, 10),
        ),
        ok(msg("It is 18C; plus 2 makes 20."), rid="resp_3", use=usage(200, 12, cached=128)),
    )
    result = run(
        make(fake, reasoning_effort="medium"),
        [get_weather, add],
        "Weather in Paris, then add 2 to the temperature.",
        instructions="Use the tools.",
    )
    assert result.output == "It is 18C; plus 2 makes 20."
    assert result.stop_reason is StopReason.END_TURN and result.steps == 3
    assert RAN == ["get_weather:Paris", "add:18+2"]
    assert result.usage == Usage(450, 42, reasoning_tokens=8, cache_read_tokens=128, requests=3)
    assert [o.text for o in result.tool_outputs] == ['{"temp_c":18,"sky":"cloudy"}', "20"]
    bodies = fake.bodies()
    assert all(b["tools"] == bodies[0]["tools"] for b in bodies)  # re-sent every request
    assert all(b["instructions"] == "Use the tools." and b["store"] is False for b in bodies)
    golden("loop_step3", bodies[2])


def test_one_model_across_two_event_loops(fake: FakeProvider) -> None:
    # Two asyncio.run calls: the SDK's keep-alive pool is bound to the first loop, so the
    # model makes itself a fresh client for the second one.
    fake.queue(ok(msg("one")), ok(msg("two")))
    model = make(fake)
    first = asyncio.run(model.respond(ask(UserMessage("x"))))
    second = asyncio.run(model.respond(ask(UserMessage("y"))))
    assert (first.text, second.text) == ("one", "two")


def test_a_body_that_is_not_json_raises(fake: FakeProvider) -> None:
    fake.queue(Reply("<html>bad gateway</html>"))
    with pytest.raises(ProviderError, match="not a JSON object") as info:
        respond(make(fake), ask(UserMessage("x")))
    assert isinstance(info.value.__cause__, openai.APIError)


def test_client_options(fake: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    fake.queue(ok(msg("env key")), ok(msg("own client")))
    from_env = OpenAIResponsesModel(MODEL, base_url=fake.url + "/v1", max_retries=0, timeout=5)
    assert respond(from_env, ask(UserMessage("x"))).text == "env key"
    client = openai.AsyncOpenAI(api_key="test", base_url=fake.url + "/v1", max_retries=0)
    own = OpenAIResponsesModel(MODEL, client=client)
    assert own.client is client
    assert respond(own, ask(UserMessage("x"))).text == "own client"
