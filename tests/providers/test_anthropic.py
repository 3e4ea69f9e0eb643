"""AnthropicModel against a real local HTTP/SSE server speaking the Messages API.

The official SDK client talks to ``fake_provider`` over real HTTP. Response bodies are
validated with the SDK's own (strict) models; request bodies are compared with hand-reviewed
golden files (``golden/anthropic/*.json``), since the SDK's request types are lenient.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
from collections.abc import AsyncIterator, Coroutine, Iterator, Sequence
from typing import Any, ClassVar, TypeVar

import anthropic
import pytest
from anthropic.types import Message, RawMessageStreamEvent
from pydantic import TypeAdapter

import tooldeck
from tooldeck import (
    ImagePart,
    ModelRequest,
    ModelSettings,
    SchemaError,
    Session,
    StopReason,
    TextPart,
    Tool,
    ToolResult,
    tool,
)
from tooldeck.errors import ProviderUnavailable
from tooldeck.model import ModelDelta
from tooldeck.providers.anthropic import ADAPTER, PROVIDER, AnthropicModel
from tooldeck.transcript import (
    AssistantMessage,
    Item,
    OpaqueItem,
    ToolCall,
    ToolOutput,
    Usage,
    UserMessage,
)

from .fake_server import SSE, FakeProvider, Reply, assert_golden

MODEL = "claude-sonnet-4-6"
T = TypeVar("T")
RAN: list[tuple[str, Any]] = []


@tool(read_only=True)
def get_weather(city: str) -> dict[str, Any]:
    """Get current weather for a city."""
    RAN.append(("get_weather", city))
    return {"temp_c": 18, "sky": "cloudy"}


@tool(read_only=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    RAN.append(("add", (a, b)))
    return a + b


@tool(read_only=True)
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    RAN.append(("multiply", (a, b)))
    return a * b


@tool
def write_file(path: str, content: str) -> str:
    """Write a text file."""
    RAN.append(("write_file", path))
    return "written"


@tool(read_only=True)
def web_search(query: str) -> str:
    """A local tool with the server tool's name (a request may not carry both)."""
    RAN.append(("web_search", query))
    return "local result"


class _Loop:
    """One event loop per test: the SDK's connections belong to the loop that opened them."""

    runner: asyncio.Runner | None = None
    models: ClassVar[list[AnthropicModel]] = []


@pytest.fixture(autouse=True)
def _loop() -> Iterator[None]:
    RAN.clear()
    with asyncio.Runner() as runner:
        _Loop.runner = runner
        try:
            yield
        finally:
            for m in _Loop.models:
                runner.run(m.aclose())
            _Loop.models.clear()
            _Loop.runner = None


def arun(coro: Coroutine[Any, Any, T]) -> T:
    assert _Loop.runner is not None
    return _Loop.runner.run(coro)


# -- helpers -------------------------------------------------------------------------------

_EVENT = TypeAdapter(RawMessageStreamEvent)


def msg(
    *content: dict[str, Any],
    stop: str = "tool_use",
    id: str = "msg_001",
    model: str = MODEL,
    usage: dict[str, Any] | None = None,
    validate: bool = True,
    **extra: Any,
) -> dict[str, Any]:
    """A Messages API response body, checked against the SDK's Message model."""
    body = {
        "id": id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": list(content),
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage
        or {
            "input_tokens": 400,
            "output_tokens": 60,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
        **extra,
    }
    if validate:
        Message.model_validate(body)
    return body


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_use(id: str, name: str, input: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": name, "input": input}


def sse(*events: dict[str, Any]) -> SSE:
    """A real SSE reply; every event is validated with the SDK's stream event types."""
    for event in events:
        if event["type"] != "ping":  # not part of the SDK's event union; skipped by clients
            _EVENT.validate_python(event)
    return SSE([(e["type"], e) for e in events])


def model(fake: FakeProvider, name: str = MODEL, **options: Any) -> AnthropicModel:
    """A model on the fake server (no retries unless asked), closed after the test."""
    options.setdefault("max_retries", 0)
    made = AnthropicModel(name, api_key="test", base_url=fake.url, **options)
    _Loop.models.append(made)
    return made


def offline(**options: Any) -> AnthropicModel:
    """A model used only to build requests and parse responses (it never connects)."""
    made = AnthropicModel(MODEL, api_key="test", base_url="http://127.0.0.1:9", **options)
    _Loop.models.append(made)
    return made


def run(m: AnthropicModel, tools: Sequence[Tool], prompt: str, **kw: Any) -> tooldeck.RunResult:
    return arun(tooldeck.run(m, list(tools), prompt, **kw))


def respond(m: AnthropicModel, request: ModelRequest) -> AssistantMessage:
    return arun(m.respond(request))


def collect(m: AnthropicModel, request: ModelRequest) -> list[ModelDelta | AssistantMessage]:
    async def main() -> list[ModelDelta | AssistantMessage]:
        stream: AsyncIterator[ModelDelta | AssistantMessage] = m.stream(request)
        return [x async for x in stream]

    return arun(main())


def dump(items: Sequence[Item]) -> str:
    return repr(items)


THINKING = {
    "type": "thinking",
    "thinking": "The user wants the weather; I should call get_weather for Paris.",
    "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds",
}
REDACTED = {
    "type": "redacted_thinking",
    "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP",
}
SERVER_USE = {
    "type": "server_tool_use",
    "id": "srvtoolu_01",
    "name": "web_search",
    "input": {"query": "Paris weather today"},
}
SEARCH_RESULT = {
    "type": "web_search_tool_result",
    "tool_use_id": "srvtoolu_01",
    "content": [
        {
            "type": "web_search_result",
            "url": "https://weather.example/paris",
            "title": "Paris weather",
            "encrypted_content": "EqgfCioIARgBIiQ3YTAwMjY1Mi1mZjM5LTQ1NGUtODgxNC1kNjNjNTk1ZWI3Y",
            "page_age": "2 hours ago",
        }
    ],
}


# -- requests and the basic round trip -------------------------------------------------------


def test_single_call_matches_the_reference_example(fake_provider: FakeProvider) -> None:
    fake_provider.queue(
        Reply(
            msg(
                text("I'll check the weather in Paris."),
                tool_use("toolu_001", "get_weather", {"city": "Paris"}),
            )
        ),
        Reply(msg(text("It is 18°C and cloudy in Paris."), stop="end_turn", id="msg_002")),
    )
    result = run(
        model(fake_provider, max_tokens=1024), [get_weather], "What's the weather in Paris?"
    )

    assert result.output == "It is 18°C and cloudy in Paris."
    assert result.stop_reason is StopReason.END_TURN and result.steps == 2
    assert RAN == [("get_weather", "Paris")]
    assert result.usage == Usage(800, 120, requests=2)
    first = result.items[1]
    assert isinstance(first, AssistantMessage)
    assert (first.provider, first.adapter, first.model) == (PROVIDER, ADAPTER, MODEL)
    assert first.response_id == "msg_001" and first.stop_reason is StopReason.TOOL_CALLS
    assert first.tool_calls[0].arguments == {"city": "Paris"}  # an object, not a string

    recorded = fake_provider.requests[0]
    assert (recorded.method, recorded.path) == ("POST", "/v1/messages")
    # providers.md (SDK 0.121) shows x-api-key; the installed SDK sends the key as a bearer
    # token. Either way the key is the one given, and an API version is always pinned.
    headers = recorded.headers
    assert headers.get("x-api-key") == "test" or headers.get("authorization") == "Bearer test"
    assert headers["anthropic-version"]
    assert_golden("anthropic/single_call", fake_provider.bodies())


def test_parallel_calls_answered_in_one_user_message(fake_provider: FakeProvider) -> None:
    fake_provider.queue(
        Reply(
            msg(
                tool_use("toolu_01", "get_weather", {"city": "Paris"}),
                tool_use("toolu_02", "get_weather", {"city": "London"}),
            )
        ),
        Reply(msg(text("Both are 18°C."), stop="end_turn", id="msg_002")),
    )
    result = run(model(fake_provider), [get_weather], "Weather in Paris and London?")

    assert sorted(RAN) == [("get_weather", "London"), ("get_weather", "Paris")]
    second = fake_provider.bodies()[1]["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    results = second[2]["content"]
    assert [(b["type"], b["tool_use_id"]) for b in results] == [
        ("tool_result", "toolu_01"),
        ("tool_result", "toolu_02"),
    ]
    assert result.output == "Both are 18°C."
    assert_golden("anthropic/parallel_calls", fake_provider.bodies())


def test_input_violating_the_schema_goes_back_as_an_error_result(
    fake_provider: FakeProvider,
) -> None:
    fake_provider.queue(
        Reply(msg(tool_use("toolu_01", "get_weather", {"town": "Paris"}))),
        Reply(msg(text("Sorry, retrying is not needed."), stop="end_turn", id="msg_002")),
    )
    result = run(model(fake_provider), [get_weather], "Weather?")

    assert RAN == []  # execute never sees invalid input
    output = result.tool_outputs[0]
    assert output.call_id == "toolu_01" and output.is_error
    block = fake_provider.bodies()[1]["messages"][2]["content"][0]
    assert block["type"] == "tool_result" and block["tool_use_id"] == "toolu_01"
    assert block["is_error"] is True
    assert block["content"] == output.text and "city" in block["content"]
    assert_golden("anthropic/malformed_arguments", fake_provider.bodies())


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        (ModelSettings(), {"type": "auto"}),
        (ModelSettings(tool_choice="required"), {"type": "any"}),
        (ModelSettings(tool_choice="none"), {"type": "none"}),
        (ModelSettings(tool_choice="get_weather"), {"type": "tool", "name": "get_weather"}),
        (
            ModelSettings(parallel_tool_calls=False),
            {"type": "auto", "disable_parallel_tool_use": True},
        ),
        (
            ModelSettings(tool_choice="required", parallel_tool_calls=False),
            {"type": "any", "disable_parallel_tool_use": True},
        ),
        (
            ModelSettings(tool_choice="get_weather", parallel_tool_calls=False),
            {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True},
        ),
    ],
)
def test_tool_choice_mapping(settings: ModelSettings, expected: dict[str, Any]) -> None:
    m = offline()
    body, _ = m.build_request(ModelRequest([UserMessage("hi")], [get_weather], settings))
    assert body["tool_choice"] == expected


def test_settings_and_instructions_on_the_wire(fake_provider: FakeProvider) -> None:
    fake_provider.queue(Reply(msg(text("ok"), stop="end_turn")))
    m = model(fake_provider)
    settings = ModelSettings(
        tool_choice="required",
        parallel_tool_calls=False,
        max_output_tokens=2048,
        temperature=0.2,
        extra={"metadata": {"user_id": "u-1"}},
    )
    request = ModelRequest(
        [UserMessage("hi")],
        [get_weather, add],
        settings,
        instructions="Be brief.",
        deferred=frozenset({"add"}),
    )
    respond(m, request)
    body = fake_provider.bodies()[0]
    assert body["system"] == "Be brief." and body["max_tokens"] == 2048
    assert body["tools"][1]["defer_loading"] is True and "defer_loading" not in body["tools"][0]
    assert_golden("anthropic/settings", body)


def test_no_tools_sends_neither_tools_nor_tool_choice() -> None:
    body, _ = offline().build_request(ModelRequest([UserMessage("hi")], []))
    assert body == {
        "model": MODEL,
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": "hi"}],
    }


def test_tool_schema_error_raises_before_any_request(fake_provider: FakeProvider) -> None:
    walk = Tool.from_schema(
        name="walk",
        description="Walks a tree.",
        json_schema={
            "type": "object",
            "properties": {"tree": {"$ref": "#/$defs/node"}},
            "required": ["tree"],
            "additionalProperties": False,
            "$defs": {
                "node": {
                    "type": "object",
                    "properties": {"child": {"$ref": "#/$defs/node"}},
                    "additionalProperties": False,
                }
            },
        },
        execute=lambda params, ctx: "ok",
        strict=True,  # recursive schemas are outside Anthropic's strict subset
    )
    m = model(fake_provider)
    request = ModelRequest([UserMessage("hi")], [walk])
    with pytest.raises(SchemaError):
        respond(m, request)
    with pytest.raises(SchemaError):
        collect(m, request)
    assert fake_provider.requests == []


# -- stop reasons ----------------------------------------------------------------------------


def test_refusal_runs_no_tool_and_keeps_no_free_text(fake_provider: FakeProvider) -> None:
    explanation = "This request could enable the development of malware."
    refused_text = "I can't help with writing that exploit."
    fake_provider.queue(
        Reply(
            msg(
                text(refused_text),
                tool_use("toolu_01", "write_file", {"path": "x.py", "content": "..."}),
                stop="refusal",
                stop_details={"type": "refusal", "category": "cyber", "explanation": explanation},
            )
        ),
        Reply(msg(text("Sure, here is a poem."), stop="end_turn", id="msg_002")),
    )
    session = Session(model(fake_provider), [write_file])
    result = arun(session.run("Write me an exploit."))

    assert RAN == []
    assert result.stop_reason is StopReason.REFUSAL
    assert result.reason == "refusal:cyber; 1 call(s) not executed"
    last = result.last_message
    assert last is not None and last.refusal == "refusal:cyber"
    assert last.text == "" and result.output == ""
    assert last.provider_data == {
        "stop_reason": "refusal",
        "stop_details": {"type": "refusal", "category": "cyber"},
    }
    assert result.tool_outputs[0].is_error and "Not executed" in result.tool_outputs[0].text
    for secret in (explanation, refused_text, "malware", "exploit that"):
        assert secret not in dump(result.items)

    # The next turn replays the refused call with its "not executed" result, and no text.
    arun(session.run("Then write a poem."))
    replay = json.dumps(fake_provider.bodies()[1])
    assert explanation not in replay and refused_text not in replay
    assert_golden("anthropic/refusal", fake_provider.bodies())


def test_refusal_without_a_category() -> None:
    m = offline()
    message = m.parse_message(
        msg(text("No."), stop="refusal", stop_details={"type": "refusal", "category": None})
    )
    assert message.refusal == "refusal:unspecified" and message.parts == []


def test_max_tokens_truncated_tool_use_is_never_executed(fake_provider: FakeProvider) -> None:
    fake_provider.queue(
        Reply(
            msg(
                text("Writing the file."),
                tool_use("toolu_01", "write_file", {"path": "notes.txt"}),
                stop="max_tokens",
            )
        )
    )
    result = run(model(fake_provider), [write_file], "Write notes.")

    assert RAN == []
    assert result.stop_reason is StopReason.MAX_TOKENS and result.steps == 1
    last = result.last_message
    assert last is not None and [c.incomplete for c in last.tool_calls] == [True]
    assert result.tool_outputs[0].is_error
    assert len(fake_provider.requests) == 1


def test_max_tokens_mid_stream_keeps_the_partial_arguments(fake_provider: FakeProvider) -> None:
    partial = '{"path": "notes.txt", "content": "Dear di'
    fake_provider.queue(
        sse(
            _start(),
            _block_start(
                0, {"type": "tool_use", "id": "toolu_01", "name": "write_file", "input": {}}
            ),
            _json(0, partial[:12]),
            _json(0, partial[12:]),
            {"type": "content_block_stop", "index": 0},
            _message_delta("max_tokens", 64),
            {"type": "message_stop"},
        )
    )
    *_, final = collect(model(fake_provider), ModelRequest([UserMessage("go")], [write_file]))
    assert isinstance(final, AssistantMessage)
    assert final.stop_reason is StopReason.MAX_TOKENS
    call = final.tool_calls[0]
    assert call.incomplete and call.arguments == partial  # never executed, kept for the record
    # Replayed to Anthropic the half-written call carries an empty object, never a guess.
    again = offline().build_messages([UserMessage("go"), final])
    assert again[1]["content"][0]["input"] == {}


@pytest.mark.parametrize(
    ("raw", "stop"),
    [
        ("end_turn", StopReason.END_TURN),
        ("stop_sequence", StopReason.END_TURN),
        ("tool_use", StopReason.TOOL_CALLS),
        ("max_tokens", StopReason.MAX_TOKENS),
        ("model_context_window_exceeded", StopReason.MAX_TOKENS),
        ("pause_turn", StopReason.PAUSE_TURN),
        ("refusal", StopReason.REFUSAL),
    ],
)
def test_stop_reason_mapping(raw: str, stop: StopReason) -> None:
    message = offline().parse_message(msg(tool_use("toolu_01", "add", {"a": 1, "b": 2}), stop=raw))
    assert message.stop_reason is stop
    assert message.provider_data is not None and message.provider_data["stop_reason"] == raw
    assert message.tool_calls[0].incomplete is (stop is StopReason.MAX_TOKENS)


def test_unknown_stop_reason_and_unknown_blocks_never_crash(fake_provider: FakeProvider) -> None:
    weird = {"type": "hologram", "payload": {"nested": [1, 2, 3]}, "note": None}
    fake_provider.queue(
        Reply(msg(text("Hmm."), weird, stop="quantum_collapse", validate=False)),
    )
    result = run(model(fake_provider), [add], "go")
    last = result.last_message
    assert last is not None
    assert last.stop_reason is StopReason.ERROR and result.stop_reason is StopReason.ERROR
    assert last.provider_data == {"stop_reason": "quantum_collapse"}
    opaque = last.opaque[0]
    assert (opaque.kind, opaque.data, opaque.model_bound) == ("hologram", weird, False)


# -- thinking, server tools, pause_turn --------------------------------------------------------


def test_thinking_is_replayed_verbatim_first(fake_provider: FakeProvider) -> None:
    fake_provider.queue(
        Reply(msg(THINKING, tool_use("toolu_01", "get_weather", {"city": "Paris"}))),
        Reply(msg(text("18°C and cloudy."), stop="end_turn", id="msg_002")),
    )
    m = model(fake_provider, max_tokens=4096, thinking={"type": "enabled", "budget_tokens": 2048})
    result = run(m, [get_weather], "What's the weather in Paris?")

    first = result.items[1]
    assert isinstance(first, AssistantMessage)
    thinking = first.opaque[0]
    assert (thinking.kind, thinking.model_bound, thinking.data) == ("thinking", True, THINKING)
    assistant = fake_provider.bodies()[1]["messages"][1]
    assert assistant["role"] == "assistant"
    assert assistant["content"][0] == THINKING  # complete, unmodified, first
    assert assistant["content"][1]["type"] == "tool_use"
    assert_golden("anthropic/thinking_two_steps", fake_provider.bodies())


def test_redacted_thinking_is_preserved(fake_provider: FakeProvider) -> None:
    fake_provider.queue(
        Reply(msg(THINKING, REDACTED, tool_use("toolu_01", "get_weather", {"city": "Paris"}))),
        Reply(msg(text("Done."), stop="end_turn", id="msg_002")),
    )
    m = model(fake_provider, thinking={"type": "enabled", "budget_tokens": 2048})
    run(m, [get_weather], "Weather?")
    content = fake_provider.bodies()[1]["messages"][1]["content"]
    assert content[:2] == [THINKING, REDACTED]
    assert_golden("anthropic/redacted_thinking", fake_provider.bodies())


def test_thinking_dropped_on_a_model_switch_server_blocks_kept(
    fake_provider: FakeProvider,
) -> None:
    fake_provider.queue(
        Reply(
            msg(
                THINKING,
                SERVER_USE,
                SEARCH_RESULT,
                text("Searching done; checking the local service."),
                tool_use("toolu_01", "get_weather", {"city": "Paris"}),
            )
        ),
        Reply(msg(text("18°C."), stop="end_turn", id="msg_002")),
        Reply(msg(text("Still 18°C."), stop="end_turn", id="msg_003", model="claude-opus-4-6")),
    )
    session = Session(model(fake_provider), [get_weather])
    arun(session.run("Weather in Paris?"))
    session.model = model(fake_provider, "claude-opus-4-6")
    arun(session.run("And now?"))

    same_model = fake_provider.bodies()[1]["messages"][1]["content"]
    assert [b["type"] for b in same_model] == [
        "thinking",
        "server_tool_use",
        "web_search_tool_result",
        "text",
        "tool_use",
    ]
    switched = fake_provider.bodies()[2]
    assert switched["model"] == "claude-opus-4-6"
    content = switched["messages"][1]["content"]
    assert [b["type"] for b in content] == [
        "server_tool_use",
        "web_search_tool_result",
        "text",
        "tool_use",
    ]
    assert content[0] == SERVER_USE and content[1] == SEARCH_RESULT
    assert "signature" not in json.dumps(switched)
    assert_golden("anthropic/model_switch", switched)


def test_server_tool_blocks_preserved_and_never_dispatched(fake_provider: FakeProvider) -> None:
    fake_provider.queue(
        Reply(
            msg(
                text("Let me search."),
                SERVER_USE,
                SEARCH_RESULT,
                tool_use("toolu_01", "get_weather", {"city": "Paris"}),
                usage={
                    "input_tokens": 900,
                    "output_tokens": 80,
                    "server_tool_use": {"web_search_requests": 1, "web_fetch_requests": 0},
                },
            )
        ),
        Reply(msg(text("18°C."), stop="end_turn", id="msg_002")),
    )
    m = model(fake_provider, server_tools=[{"type": "web_search_20250305", "name": "web_search"}])
    result = run(m, [get_weather], "Weather in Paris?")

    assert RAN == [("get_weather", "Paris")]
    # Had the server-side call been dispatched, it would have an ("unknown tool") output.
    assert [o.call_id for o in result.tool_outputs] == ["toolu_01"]
    first = result.items[1]
    assert isinstance(first, AssistantMessage)
    assert [(o.kind, o.model_bound) for o in first.opaque] == [
        ("server_tool_use", False),
        ("web_search_tool_result", False),
    ]
    assert first.opaque[1].data == SEARCH_RESULT
    second = fake_provider.bodies()[1]
    assert second["messages"][1]["content"][1:3] == [SERVER_USE, SEARCH_RESULT]
    assert second["tools"][-1] == {"type": "web_search_20250305", "name": "web_search"}
    assert_golden("anthropic/server_tools", fake_provider.bodies())


def test_a_function_tool_may_not_share_a_server_tool_name(fake_provider: FakeProvider) -> None:
    m = model(fake_provider, server_tools=[{"type": "web_search_20250305", "name": "web_search"}])
    with pytest.raises(SchemaError, match="web_search"):
        run(m, [get_weather, web_search], "Weather in Paris?")
    assert fake_provider.requests == [] and RAN == []


def test_tool_search_result_kept_opaque(fake_provider: FakeProvider) -> None:
    search_use = {
        "type": "server_tool_use",
        "id": "srvtoolu_02",
        "name": "tool_search_tool_regex",
        "input": {"query": "weather"},
    }
    search_result = {
        "type": "tool_search_tool_result",
        "tool_use_id": "srvtoolu_02",
        "content": {
            "type": "tool_search_tool_search_result",
            "tool_references": [{"type": "tool_reference", "tool_name": "get_weather"}],
        },
    }
    fake_provider.queue(
        Reply(
            msg(search_use, search_result, tool_use("toolu_01", "get_weather", {"city": "Oslo"}))
        ),
        Reply(msg(text("Cold."), stop="end_turn", id="msg_002")),
    )
    search_tool = {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"}
    m = model(fake_provider, server_tools=[search_tool])
    session = Session(m, [add, get_weather])
    # The loop builds its own requests; check deferral on a direct request as well.
    body, _ = m.build_request(
        ModelRequest([UserMessage("x")], [add, get_weather], deferred=frozenset({"get_weather"}))
    )
    assert body["tools"][1]["defer_loading"] is True and body["tools"][2] == search_tool
    arun(session.run("Weather in Oslo?"))
    assert RAN == [("get_weather", "Oslo")]
    assert fake_provider.bodies()[1]["messages"][1]["content"][:2] == [search_use, search_result]


def test_pause_turn_is_sent_back_as_is(fake_provider: FakeProvider) -> None:
    fake_provider.queue(
        Reply(msg(text("Searching."), SERVER_USE, SEARCH_RESULT, stop="pause_turn")),
        Reply(msg(text("It is 18°C in Paris."), stop="end_turn", id="msg_002")),
    )
    m = model(fake_provider, server_tools=[{"type": "web_search_20250305", "name": "web_search"}])
    result = run(m, [get_weather], "Weather in Paris?")

    assert result.steps == 2 and result.stop_reason is StopReason.END_TURN
    assert result.output == "It is 18°C in Paris."
    first = result.items[1]
    assert isinstance(first, AssistantMessage) and first.stop_reason is StopReason.PAUSE_TURN
    second = fake_provider.bodies()[1]["messages"]
    assert [m["role"] for m in second] == ["user", "assistant"]
    assert second[1]["content"] == [text("Searching."), SERVER_USE, SEARCH_RESULT]
    assert_golden("anthropic/pause_turn", fake_provider.bodies())


# -- transcripts from elsewhere --------------------------------------------------------------


def test_foreign_transcript_is_translated_and_its_opaque_items_dropped(
    fake_provider: FakeProvider, caplog: pytest.LogCaptureFixture
) -> None:
    reasoning = OpaqueItem(
        "openai", "openai-responses", "gpt-5.4", "reasoning", {"type": "reasoning", "id": "rs_1"}
    )
    foreign = AssistantMessage(
        parts=[
            reasoning,
            TextPart("Adding."),
            ToolCall("call_a", "add", '{"a": 2, "b": 3}', item_id="fc_1"),
            ToolCall("call_b", "add", '{"a": 2, "b": '),
        ],
        stop_reason=StopReason.TOOL_CALLS,
        provider="openai",
        adapter="openai-responses",
        model="gpt-5.4",
    )
    transcript: list[Item] = [
        UserMessage("Add things."),
        foreign,
        ToolOutput("call_a", "add", ToolResult.wrap(5)),
        ToolOutput("call_b", "add", ToolResult.error("arguments are not valid JSON")),
        UserMessage("Now tell me."),
    ]
    fake_provider.queue(Reply(msg(text("5."), stop="end_turn")))
    with caplog.at_level(logging.WARNING, logger="tooldeck.providers.anthropic"):
        respond(model(fake_provider), ModelRequest(transcript, [add]))
    assert "call_b" in caplog.text  # the unparsable arguments are noted

    messages = fake_provider.bodies()[0]["messages"]
    assert messages[1]["content"] == [
        text("Adding."),
        tool_use("call_a", "add", {"a": 2, "b": 3}),
        tool_use("call_b", "add", {}),
    ]
    # Results first, then the user's text, in the same user message.
    assert [b["type"] for b in messages[2]["content"]] == ["tool_result", "tool_result", "text"]
    assert "reasoning" not in json.dumps(messages)
    assert_golden("anthropic/foreign_transcript", fake_provider.bodies()[0])


def test_message_building_rules() -> None:
    m = offline()
    image = ImagePart(data="iVBORw0KGgo=", mime_type="image/png")
    ours = m.parse_message(
        msg(
            tool_use("toolu_1", "get_weather", {"city": "Paris"}),
            tool_use("toolu_2", "get_weather", {"city": "Rome"}),
        )
    )
    transcript: list[Item] = [
        UserMessage("First question."),
        AssistantMessage(parts=[TextPart("I refuse.")], stop_reason=StopReason.REFUSAL),
        UserMessage([TextPart("Look:"), ImagePart(url="https://img.example/a.png")]),
        ours,
        ToolOutput("toolu_1", "get_weather", ToolResult([TextPart("Chart:"), image])),
        ToolOutput("toolu_2", "get_weather", ToolResult("")),
        UserMessage("Thanks."),
        UserMessage("One more thing."),
        # Another model's thinking alone leaves nothing to send: the message is skipped.
        AssistantMessage(
            parts=[OpaqueItem(PROVIDER, ADAPTER, "claude-other", "thinking", THINKING)],
            provider=PROVIDER,
            adapter=ADAPTER,
            model="claude-other",
        ),
        UserMessage("Still there?"),
    ]
    messages = m.build_messages(transcript)
    assert messages == [
        {"role": "user", "content": "First question."},
        {"role": "assistant", "content": [text("I refuse.")]},
        {
            "role": "user",
            "content": [
                text("Look:"),
                {"type": "image", "source": {"type": "url", "url": "https://img.example/a.png"}},
            ],
        },
        {
            "role": "assistant",
            "content": [
                tool_use("toolu_1", "get_weather", {"city": "Paris"}),
                tool_use("toolu_2", "get_weather", {"city": "Rome"}),
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [
                        text("Chart:"),
                        {
                            "type": "image",
                            "source": {
                                "type": "base64",
                                "media_type": "image/png",
                                "data": "iVBORw0KGgo=",
                            },
                        },
                    ],
                },
                {"type": "tool_result", "tool_use_id": "toolu_2"},
                text("Thanks."),
                text("One more thing."),
                text("Still there?"),
            ],
        },
    ]


def test_consecutive_assistant_messages_are_merged() -> None:
    """After a pause_turn continuation the transcript holds two assistant messages in a row."""
    m = offline()
    paused = m.parse_message(msg(text("Searching."), SERVER_USE, SEARCH_RESULT, stop="pause_turn"))
    resumed = m.parse_message(
        msg(text("Now locally."), tool_use("toolu_1", "add", {"a": 1, "b": 2}))
    )
    messages = m.build_messages(
        [
            UserMessage("go"),
            paused,
            resumed,
            ToolOutput("toolu_1", "add", ToolResult.wrap(3)),
        ]
    )
    assert [x["role"] for x in messages] == ["user", "assistant", "user"]
    assert [b["type"] for b in messages[1]["content"]] == [
        "text",
        "server_tool_use",
        "web_search_tool_result",
        "text",
        "tool_use",
    ]


def test_tool_use_replayed_exactly_as_received(fake_provider: FakeProvider) -> None:
    block = {**tool_use("toolu_01", "add", {"a": 1, "b": 2}), "caller": {"type": "direct"}}
    m = offline()
    message = m.parse_message(msg(block))
    assert m.build_messages([UserMessage("x"), message])[1]["content"] == [block]
    # To another provider's record the extra fields would mean nothing: rebuilt minimal.
    elsewhere = AssistantMessage(parts=message.parts, provider="openai", adapter="openai-chat")
    assert m.build_messages([UserMessage("x"), elsewhere])[1]["content"] == [
        tool_use("toolu_01", "add", {"a": 1, "b": 2})
    ]


def test_usage_mapping() -> None:
    message = offline().parse_message(
        msg(
            text("hi"),
            stop="end_turn",
            usage={
                "input_tokens": 12,
                "output_tokens": 40,
                "cache_read_input_tokens": 1000,
                "cache_creation_input_tokens": 300,
                "output_tokens_details": {"thinking_tokens": 25},
            },
        )
    )
    assert message.usage == Usage(12, 40, 25, 1000, 300, 1)


def test_response_model_alias_still_replays_thinking() -> None:
    m = offline()
    message = m.parse_message(
        msg(THINKING, tool_use("toolu_1", "add", {"a": 1, "b": 1}), model=MODEL + "-20260101")
    )
    assert message.model == MODEL  # the model this adapter asked for decides replay
    assert message.provider_data is not None
    assert message.provider_data["response_model"] == MODEL + "-20260101"
    assert m.build_messages([UserMessage("x"), message])[1]["content"][0] == THINKING


# -- errors --------------------------------------------------------------------------------


def test_429_is_retried_after_retry_after_ms(fake_provider: FakeProvider) -> None:
    error = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
    fake_provider.queue(
        Reply(error, status=429, headers={"retry-after-ms": "10"}),
        Reply(msg(text("Hello."), stop="end_turn")),
    )
    message = respond(model(fake_provider, max_retries=2), ModelRequest([UserMessage("hi")], []))
    assert message.text == "Hello."
    assert len(fake_provider.requests) == 2
    assert fake_provider.bodies()[0] == fake_provider.bodies()[1]


def test_500_raises_after_retries_and_propagates_through_run(fake_provider: FakeProvider) -> None:
    error = {"type": "error", "error": {"type": "api_error", "message": "Internal server error"}}
    fake_provider.queue(
        *[Reply(error, status=500, headers={"retry-after-ms": "10"}) for _ in range(2)]
    )
    with pytest.raises(ProviderUnavailable, match="after 1 retry") as info:
        respond(model(fake_provider, max_retries=1), ModelRequest([UserMessage("hi")], []))
    assert isinstance(info.value.__cause__, anthropic.InternalServerError)
    assert len(fake_provider.requests) == 2

    fake_provider.queue(Reply(error, status=500, headers={"retry-after-ms": "10"}))
    with pytest.raises(ProviderUnavailable):
        run(model(fake_provider, max_retries=0), [add], "hi")
    assert RAN == []


def test_error_event_in_a_stream_raises(fake_provider: FakeProvider) -> None:
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    fake_provider.queue(SSE([("message_start", _start()), ("error", overloaded)]))
    with pytest.raises(ProviderUnavailable, match="529 overloaded_error: Overloaded") as info:
        collect(model(fake_provider), ModelRequest([UserMessage("hi")], []))
    cause = info.value.__cause__
    assert isinstance(cause, anthropic.APIStatusError) and cause.body == overloaded


# -- structured output -----------------------------------------------------------------------

ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "temp_c": {"type": "integer"}},
    "required": ["city", "temp_c"],
    "additionalProperties": False,
}


def test_structured_output(fake_provider: FakeProvider) -> None:
    fake_provider.queue(
        Reply(msg(tool_use("toolu_01", "get_weather", {"city": "Paris"}))),
        Reply(msg(text('{"city": "Paris", "temp_c": 18}'), stop="end_turn", id="msg_002")),
    )
    settings = ModelSettings(output_schema=ANSWER_SCHEMA, output_schema_name="weather")
    result = run(model(fake_provider), [get_weather], "Weather in Paris?", settings=settings)

    assert result.structured == {"city": "Paris", "temp_c": 18}
    for body in fake_provider.bodies():
        assert body["output_config"] == {"format": {"type": "json_schema", "schema": ANSWER_SCHEMA}}
    assert_golden("anthropic/structured_output", fake_provider.bodies())


def test_structured_output_that_does_not_validate_is_not_returned() -> None:
    m = offline()
    _, structured = m.build_request(
        ModelRequest([UserMessage("x")], [], ModelSettings(output_schema=ANSWER_SCHEMA))
    )
    message = m.parse_message(msg(text('{"city": "Paris"}'), stop="end_turn"), structured)
    assert message.structured is None and message.stop_reason is StopReason.ERROR
    assert (
        message.provider_data is not None and "temp_c" in message.provider_data["structured_error"]
    )


def test_structured_output_extra_output_config_is_merged() -> None:
    m = offline()
    settings = ModelSettings(
        output_schema=ANSWER_SCHEMA, extra={"output_config": {"effort": "low"}}
    )
    body, _ = m.build_request(ModelRequest([UserMessage("x")], [], settings))
    assert body["output_config"] == {
        "effort": "low",
        "format": {"type": "json_schema", "schema": ANSWER_SCHEMA},
    }


def test_structured_output_bad_root_fails_before_any_request(fake_provider: FakeProvider) -> None:
    settings = ModelSettings(output_schema={"type": "array", "items": {"type": "string"}})
    m = model(fake_provider)
    request = ModelRequest([UserMessage("x")], [get_weather], settings)
    with pytest.raises(SchemaError):
        respond(m, request)
    with pytest.raises(SchemaError):
        collect(m, request)
    with pytest.raises(SchemaError):
        run(m, [get_weather], "x", settings=settings)
    assert fake_provider.requests == []


# -- streaming -------------------------------------------------------------------------------


def _start(model: str = MODEL, id: str = "msg_001") -> dict[str, Any]:
    return {
        "type": "message_start",
        "message": {
            "id": id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": 400,
                "output_tokens": 1,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        },
    }


def _block_start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def _delta(index: int, delta: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": delta}


def _json(index: int, partial: str) -> dict[str, Any]:
    return _delta(index, {"type": "input_json_delta", "partial_json": partial})


def _text(index: int, value: str) -> dict[str, Any]:
    return _delta(index, {"type": "text_delta", "text": value})


def _stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def _message_delta(stop: str, output_tokens: int) -> dict[str, Any]:
    return {
        "type": "message_delta",
        "delta": {"stop_reason": stop, "stop_sequence": None},
        "usage": {"output_tokens": output_tokens},
    }


def _same_as_non_streaming(
    fake: FakeProvider, stream: SSE, full: dict[str, Any], request: ModelRequest, **options: Any
) -> list[ModelDelta]:
    fake.queue(stream, Reply(full))
    m = model(fake, **options)
    *deltas, streamed = collect(m, request)
    plain = respond(m, request)
    assert isinstance(streamed, AssistantMessage)
    assert streamed == plain
    assert fake.bodies()[0] == {**fake.bodies()[1], "stream": True}
    assert all(isinstance(d, ModelDelta) for d in deltas)
    return [d for d in deltas if isinstance(d, ModelDelta)]


def test_stream_text(fake_provider: FakeProvider) -> None:
    stream = sse(
        _start(),
        _block_start(0, {"type": "text", "text": ""}),
        {"type": "ping"},
        _text(0, "Hello"),
        _text(0, ", world."),
        _stop(0),
        _message_delta("end_turn", 12),
        {"type": "message_stop"},
    )
    full = msg(
        text("Hello, world."),
        stop="end_turn",
        usage={
            "input_tokens": 400,
            "output_tokens": 12,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    )
    deltas = _same_as_non_streaming(
        fake_provider, stream, full, ModelRequest([UserMessage("hi")], [])
    )
    assert deltas == [ModelDelta("text", "Hello"), ModelDelta("text", ", world.")]


def test_stream_interleaved_tool_calls(fake_provider: FakeProvider) -> None:
    stream = sse(
        _start(),
        _block_start(0, {"type": "text", "text": ""}),
        _text(0, "Checking both."),
        _stop(0),
        _block_start(1, tool_use("toolu_01", "get_weather", {})),
        _block_start(2, tool_use("toolu_02", "get_weather", {})),
        _json(1, '{"city": '),
        _json(2, '{"ci'),
        _json(2, 'ty": "London"}'),
        _json(1, '"Paris"}'),
        _stop(2),
        _stop(1),
        _message_delta("tool_use", 60),
        {"type": "message_stop"},
    )
    full = msg(
        text("Checking both."),
        tool_use("toolu_01", "get_weather", {"city": "Paris"}),
        tool_use("toolu_02", "get_weather", {"city": "London"}),
    )
    request = ModelRequest([UserMessage("Paris and London?")], [get_weather])
    deltas = _same_as_non_streaming(fake_provider, stream, full, request)
    calls = [(d.kind, d.index, d.call_id, d.text) for d in deltas if d.kind != "text"]
    assert calls == [
        ("tool_call_start", 0, "toolu_01", ""),
        ("tool_call_start", 1, "toolu_02", ""),
        ("tool_call", 0, "toolu_01", '{"city": '),
        ("tool_call", 1, "toolu_02", '{"ci'),
        ("tool_call", 1, "toolu_02", 'ty": "London"}'),
        ("tool_call", 0, "toolu_01", '"Paris"}'),
    ]
    assert all(d.name == "get_weather" for d in deltas if d.kind != "text")
    assert_golden("anthropic/stream_tools", fake_provider.bodies()[0])


def test_stream_thinking_and_signature(fake_provider: FakeProvider) -> None:
    half = len(THINKING["thinking"]) // 2
    stream = sse(
        _start(),
        _block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        _delta(0, {"type": "thinking_delta", "thinking": THINKING["thinking"][:half]}),
        _delta(0, {"type": "thinking_delta", "thinking": THINKING["thinking"][half:]}),
        _delta(0, {"type": "signature_delta", "signature": THINKING["signature"]}),
        _stop(0),
        _block_start(1, REDACTED),
        _stop(1),
        _block_start(2, tool_use("toolu_01", "get_weather", {})),
        _json(2, '{"city": "Paris"}'),
        _stop(2),
        _message_delta("tool_use", 60),
        {"type": "message_stop"},
    )
    full = msg(THINKING, REDACTED, tool_use("toolu_01", "get_weather", {"city": "Paris"}))
    request = ModelRequest([UserMessage("Weather?")], [get_weather])
    thinking = {"type": "enabled", "budget_tokens": 2048}
    deltas = _same_as_non_streaming(fake_provider, stream, full, request, thinking=thinking)
    assert "".join(d.text for d in deltas if d.kind == "reasoning") == THINKING["thinking"]

    # The streamed message replays the assembled thinking block verbatim.
    fake_provider.queue(stream)
    m = model(fake_provider, thinking=thinking)
    *_, streamed = collect(m, request)
    assert isinstance(streamed, AssistantMessage)
    replay = m.build_messages([UserMessage("Weather?"), streamed])
    assert replay[1]["content"][:2] == [THINKING, REDACTED]


def test_stream_server_tool_blocks(fake_provider: FakeProvider) -> None:
    stream = sse(
        _start(),
        _block_start(0, {**SERVER_USE, "input": {}}),
        _json(0, json.dumps(SERVER_USE["input"])),
        _stop(0),
        _block_start(1, SEARCH_RESULT),
        _stop(1),
        _block_start(2, {"type": "text", "text": ""}),
        _text(2, "Found it."),
        _stop(2),
        _message_delta("end_turn", 60),
        {"type": "message_stop"},
    )
    full = msg(SERVER_USE, SEARCH_RESULT, text("Found it."), stop="end_turn")
    full["usage"]["output_tokens"] = 60
    deltas = _same_as_non_streaming(
        fake_provider, stream, full, ModelRequest([UserMessage("Search")], [])
    )
    assert [d.kind for d in deltas] == ["text"]  # server-side input is not a local call


def test_stream_refusal_keeps_only_the_category(fake_provider: FakeProvider) -> None:
    explanation = "The request could enable the development of malware."
    fake_provider.queue(
        sse(
            _start(),
            _block_start(0, {"type": "text", "text": ""}),
            _text(0, "Here is how to build the exp"),
            _stop(0),
            {
                "type": "message_delta",
                "delta": {
                    "stop_reason": "refusal",
                    "stop_sequence": None,
                    "stop_details": {
                        "type": "refusal",
                        "category": "cyber",
                        "explanation": explanation,
                    },
                },
                "usage": {"output_tokens": 9},
            },
            {"type": "message_stop"},
        )
    )
    *_, final = collect(model(fake_provider), ModelRequest([UserMessage("x")], []))
    assert isinstance(final, AssistantMessage)
    assert final.stop_reason is StopReason.REFUSAL and final.refusal == "refusal:cyber"
    assert final.parts == [] and explanation not in repr(final)


def test_stream_cut_off_before_its_end_is_an_error(fake_provider: FakeProvider) -> None:
    fake_provider.queue(
        sse(
            _start(),
            _block_start(0, tool_use("toolu_01", "add", {})),
            _json(0, '{"a": 1'),
        )
    )
    *_, final = collect(model(fake_provider), ModelRequest([UserMessage("x")], [add]))
    assert isinstance(final, AssistantMessage)
    assert final.stop_reason is StopReason.ERROR
    assert final.provider_data == {"stop_reason": None}
    call = final.tool_calls[0]
    assert call.incomplete and call.arguments == '{"a": 1'  # kept for the record, never run


def test_stream_two_steps_by_hand(fake_provider: FakeProvider) -> None:
    """A streaming consumer can drive the same transcript the loop builds."""
    fake_provider.queue(
        sse(
            _start(),
            _block_start(0, tool_use("toolu_01", "add", {})),
            _json(0, '{"a": 2, "b": 3}'),
            _stop(0),
            _message_delta("tool_use", 20),
            {"type": "message_stop"},
        ),
        sse(
            _start(id="msg_002"),
            _block_start(0, {"type": "text", "text": ""}),
            _text(0, "5"),
            _stop(0),
            _message_delta("end_turn", 3),
            {"type": "message_stop"},
        ),
    )
    m = model(fake_provider)
    transcript: list[Item] = [UserMessage("2+3?")]
    *_, first = collect(m, ModelRequest(transcript, [add]))
    assert isinstance(first, AssistantMessage)
    transcript += [first, ToolOutput("toolu_01", "add", ToolResult.wrap(5))]
    *_, second = collect(m, ModelRequest(transcript, [add]))
    assert isinstance(second, AssistantMessage) and second.text == "5"
    assert fake_provider.bodies()[1]["messages"][1:] == [
        {"role": "assistant", "content": [tool_use("toolu_01", "add", {"a": 2, "b": 3})]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "5"}],
        },
    ]


# -- the whole loop ----------------------------------------------------------------------------


def test_multi_step_loop_with_real_tools(fake_provider: FakeProvider) -> None:
    fake_provider.queue(
        Reply(msg(text("First the sum."), tool_use("toolu_01", "add", {"a": 2, "b": 3}))),
        Reply(
            msg(
                tool_use("toolu_02", "multiply", {"a": 5, "b": 4}),
                tool_use("toolu_03", "get_weather", {"city": "Paris"}),
                id="msg_002",
            )
        ),
        Reply(msg(text("(2+3)*4 = 20, and Paris is 18°C."), stop="end_turn", id="msg_003")),
    )
    result = run(
        model(fake_provider),
        [add, multiply, get_weather],
        "Compute (2+3)*4 and tell me the Paris weather.",
        instructions="Use the tools.",
    )
    assert result.output == "(2+3)*4 = 20, and Paris is 18°C."
    assert result.steps == 3 and result.stop_reason is StopReason.END_TURN
    assert [o.text for o in result.tool_outputs] == ["5", "20", '{"temp_c":18,"sky":"cloudy"}']
    assert RAN[0] == ("add", (2, 3))
    assert sorted(RAN[1:]) == [("get_weather", "Paris"), ("multiply", (5, 4))]
    assert result.usage.requests == 3
    last = fake_provider.bodies()[2]
    assert [m["role"] for m in last["messages"]] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    assert all(b["tools"] == last["tools"] for b in fake_provider.bodies())  # re-sent each time
    assert_golden("anthropic/multi_step_loop", fake_provider.bodies())


def test_model_protocol() -> None:
    m = offline()
    assert isinstance(m, tooldeck.Model)
    assert m.name == f"anthropic-messages:{MODEL}"
    assert (m.provider, m.adapter) == ("anthropic", "anthropic-messages")


def test_replayed_blocks_are_copies() -> None:
    """Opaque data is a copy: mutating the parsed message never changes what we sent back."""
    m = offline()
    body = msg(THINKING, tool_use("toolu_1", "add", {"a": 1, "b": 2}))
    original = copy.deepcopy(body)
    message = m.parse_message(body)
    m.build_messages([UserMessage("x"), message])[1]["content"][0]["thinking"] = "changed"
    assert message.opaque[0].data == THINKING and body == original
