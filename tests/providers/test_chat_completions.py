"""ChatCompletionsModel over real HTTP (and real SSE) against the local fake provider.

Request bodies are compared with hand-reviewed golden files written from the wire
reference (providers.md sections 3-5); OpenAI-flavour bodies and responses are also
validated against OpenAI's published OpenAPI description when PyYAML is available.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any, Literal

import jsonschema_rs
import openai
import pytest

import tooldeck
from tooldeck import (
    AssistantMessage,
    ImagePart,
    ModelRequest,
    ModelSettings,
    OpaqueItem,
    SchemaError,
    Session,
    StopReason,
    TextPart,
    ToolCall,
    ToolOutput,
    ToolResult,
    Toolset,
    Usage,
    UserMessage,
    tool,
)
from tooldeck.errors import ProviderUnavailable
from tooldeck.model import ModelDelta
from tooldeck.providers.chat_completions import ChatCompletionsModel
from tooldeck.result import ContentPart
from tooldeck.transcript import Item

from .fake_server import SSE, FakeProvider, Reply, assert_golden

Flavour = Literal["openai", "openrouter", "glm", "compatible"]
FLAVOURS: tuple[Flavour, ...] = ("openai", "openrouter", "glm", "compatible")
PATHS = {"openai": "/v1", "openrouter": "/api/v1", "glm": "/api/paas/v4", "compatible": "/v1"}
MODELS = {
    "openai": "gpt-4.1",
    "openrouter": "anthropic/claude-sonnet-4.5",
    "glm": "glm-4.6",
    "compatible": "qwen3-8b",
}
OPENAPI = Path("/work/shared/reference/openai-openapi.yml")

# -- tools ------------------------------------------------------------------------------

RAN: list[tuple[str, dict[str, Any]]] = []


@tool(read_only=True)
def get_weather(city: str, unit: Literal["c", "f"] = "c") -> dict[str, Any]:
    """Get current weather for a city.

    Args:
        city: The city name.
        unit: Temperature unit.
    """
    RAN.append(("get_weather", {"city": city, "unit": unit}))
    return {"city": city, "temp_c": 18, "sky": "cloudy"}


@tool(read_only=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    RAN.append(("add", {"a": a, "b": b}))
    return a + b


PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 40).decode()


@tool(read_only=True)
def screenshot() -> ToolResult:
    """Take a screenshot."""
    RAN.append(("screenshot", {}))
    return ToolResult([TextPart("the screen"), ImagePart(data=PNG, mime_type="image/png")])


TOOLS = Toolset([get_weather, add])


@pytest.fixture(autouse=True)
def _clear_ran() -> Iterator[None]:
    RAN.clear()
    yield
    RAN.clear()


# -- wire builders ------------------------------------------------------------------------

_ids = itertools.count(1)


def fn_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


USAGE = {"prompt_tokens": 80, "completion_tokens": 20, "total_tokens": 100}


def completion(
    flavour: Flavour = "openai",
    *,
    content: str | None = None,
    calls: Sequence[Mapping[str, Any]] = (),
    finish: str | None = None,
    usage: Mapping[str, Any] | None = None,
    message: Mapping[str, Any] | None = None,
    choice: Mapping[str, Any] | None = None,
    top: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A response body in the flavour's shape (providers.md 3.7, 4 and 5)."""
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    if flavour == "openai":
        msg.update({"refusal": None, "annotations": []})
    if calls:
        msg["tool_calls"] = list(calls)
    msg.update(message or {})
    finish = finish or ("tool_calls" if calls else "stop")
    body: dict[str, Any] = {
        "id": f"chatcmpl-{next(_ids):03d}",
        "object": "chat.completion",
        "created": 1767225600,
        "model": MODELS[flavour],
        "choices": [
            {
                "index": 0,
                "finish_reason": finish,
                "logprobs": None,
                "message": msg,
                **(choice or {}),
            }
        ],
        "usage": dict(usage or USAGE),
    }
    if flavour == "glm":
        body["request_id"] = "req-glm-1"
    body.update(top or {})
    if flavour == "openai":
        check_openapi("CreateChatCompletionResponse", body)
    return body


def reply(flavour: Flavour = "openai", **kwargs: Any) -> Reply:
    return Reply(completion(flavour, **kwargs))


def chunk(
    delta: Mapping[str, Any] | None = None,
    finish: str | None = None,
    *,
    flavour: Flavour = "openai",
    usage: Mapping[str, Any] | None = None,
    choice: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "chatcmpl-stream",
        "object": "chat.completion.chunk",
        "created": 1767225600,
        "model": MODELS[flavour],
        "choices": [],
    }
    if delta is not None or finish is not None:
        body["choices"] = [
            {"index": 0, "delta": dict(delta or {}), "finish_reason": finish, **(choice or {})}
        ]
    if usage is not None:
        body["usage"] = dict(usage)
    if flavour == "openai":
        check_openapi("CreateChatCompletionStreamResponse", body)
    return body


def sse(*chunks: dict[str, Any]) -> SSE:
    return SSE([*((None, c) for c in chunks), (None, "[DONE]")])


# -- OpenAPI checks ---------------------------------------------------------------------


@cache
def _openapi_root() -> dict[str, Any] | None:
    try:
        import yaml
    except ImportError:  # PyYAML is not a dependency; the goldens still apply
        return None
    if not OPENAPI.exists():
        return None
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    doc = yaml.load(OPENAPI.read_text(), Loader=loader)

    def fix(node: Any) -> None:
        """YAML reads 2**63-1 bounds as strings; ``nullable`` is OpenAPI 3.0 for ``null``."""
        if isinstance(node, dict):
            if node.get("nullable") is True and isinstance(node.get("type"), str):
                node["type"] = [node["type"], "null"]
                if isinstance(node.get("enum"), list):
                    node["enum"] = [*node["enum"], None]
            for key, value in node.items():
                if key in ("minimum", "maximum") and isinstance(value, str):
                    node[key] = float(value)
                else:
                    fix(value)
        elif isinstance(node, list):
            for value in node:
                fix(value)

    fix(doc)
    return {"components": {"schemas": doc["components"]["schemas"]}}


@cache
def _validator(name: str) -> Any:
    root = _openapi_root()
    if root is None:
        return None
    return jsonschema_rs.validator_for({**root, "$ref": f"#/components/schemas/{name}"})


def check_openapi(name: str, value: Any) -> None:
    validator = _validator(name)
    if validator is None:
        return
    errors = [f"{list(e.instance_path)}: {e.message[:300]}" for e in validator.iter_errors(value)]
    assert not errors, f"{name} does not match OpenAI's OpenAPI description: {errors}"


# -- helpers ------------------------------------------------------------------------------


def make(
    fake: FakeProvider, flavour: Flavour = "openai", model: str | None = None, **kwargs: Any
) -> ChatCompletionsModel:
    kwargs.setdefault("max_retries", 0)
    return ChatCompletionsModel(
        model or MODELS[flavour],
        flavour,
        api_key="test",
        base_url=fake.url + PATHS[flavour],
        **kwargs,
    )


def run_turn(
    fake: FakeProvider,
    flavour: Flavour = "openai",
    prompt: str = "What's the weather in Paris?",
    tools: Any = TOOLS,
    model_kwargs: Mapping[str, Any] | None = None,
    **options: Any,
) -> tooldeck.RunResult:
    async def main() -> tooldeck.RunResult:
        async with make(fake, flavour, **(model_kwargs or {})) as model:
            return await tooldeck.run(model, tools, prompt, **options)

    return asyncio.run(main())


def respond(
    fake: FakeProvider, request: ModelRequest, flavour: Flavour = "openai", **kwargs: Any
) -> AssistantMessage:
    async def main() -> AssistantMessage:
        async with make(fake, flavour, **kwargs) as model:
            return await model.respond(request)

    return asyncio.run(main())


def stream(
    fake: FakeProvider, request: ModelRequest, flavour: Flavour = "openai"
) -> tuple[list[ModelDelta], AssistantMessage]:
    async def main() -> tuple[list[ModelDelta], AssistantMessage]:
        deltas: list[ModelDelta] = []
        final: AssistantMessage | None = None
        async with make(fake, flavour) as model:
            async for event in model.stream(request):
                if isinstance(event, AssistantMessage):
                    final = event
                else:
                    assert final is None, "nothing may follow the final message"
                    deltas.append(event)
        assert final is not None
        return deltas, final

    return asyncio.run(main())


def bodies(fake: FakeProvider, flavour: Flavour) -> list[Any]:
    for recorded in fake.requests:
        assert recorded.path == PATHS[flavour] + "/chat/completions"
        assert recorded.headers.get("authorization") == "Bearer test"
        if flavour == "openai":
            check_openapi("CreateChatCompletionRequest", recorded.body)
    return fake.bodies()


def request_of(*items: Any, tools: Sequence[Any] = (get_weather,), **settings: Any) -> ModelRequest:
    return ModelRequest(list(items), list(tools), ModelSettings(**settings))


# -- one call, every flavour -------------------------------------------------------------


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_single_call(fake_provider: FakeProvider, flavour: Flavour) -> None:
    # strict (OpenAI-style) tools get every key, null for "not given"; GLM's are not strict
    arguments = '{"city":"Paris"}' if flavour == "glm" else '{"city":"Paris","unit":null}'
    fake_provider.queue(
        reply(flavour, calls=[fn_call("call_001", "get_weather", arguments)]),
        reply(flavour, content="It is 18 °C and cloudy in Paris."),
    )
    result = run_turn(
        fake_provider,
        flavour,
        instructions="You are a weather assistant.",
        settings=ModelSettings(max_output_tokens=256),
    )
    assert RAN == [("get_weather", {"city": "Paris", "unit": "c"})]
    assert result.stop_reason is StopReason.END_TURN
    assert result.output == "It is 18 °C and cloudy in Paris."
    assert result.steps == 2
    assert result.usage == Usage(160, 40, requests=2)
    first = result.items[1]
    assert isinstance(first, AssistantMessage)
    assert (first.provider, first.adapter, first.model) == (flavour, "openai-chat", MODELS[flavour])
    assert first.tool_calls == [ToolCall("call_001", "get_weather", arguments)]
    assert first.stop_reason is StopReason.TOOL_CALLS
    assert first.response_id is not None and first.response_id.startswith("chatcmpl-")
    sent = bodies(fake_provider, flavour)
    assert sent[0]["tools"] == sent[1]["tools"], "tools are re-sent on every request"
    assert_golden(f"chat_completions/{flavour}_single_call", sent)


def test_flavour_token_field_and_strict(fake_provider: FakeProvider) -> None:
    """The differences the goldens show, spelled out."""
    for flavour in FLAVOURS:
        fake_provider.queue(reply(flavour, content="ok"))
        respond(fake_provider, request_of(UserMessage("hi"), max_output_tokens=9), flavour)
    openai_, openrouter, glm, compatible = fake_provider.bodies()
    assert openai_["max_completion_tokens"] == 9 and "max_tokens" not in openai_
    for body in (openrouter, glm, compatible):
        assert body["max_tokens"] == 9 and "max_completion_tokens" not in body
    assert openai_["tools"][0]["function"]["strict"] is True
    assert "strict" not in glm["tools"][0]["function"]
    assert glm["tools"][0]["function"]["parameters"] == get_weather.schema
    assert "parallel_tool_calls" not in glm


# -- parallel calls -------------------------------------------------------------------------


@pytest.mark.parametrize("flavour", ["openai", "glm"])
def test_parallel_calls_answered_by_id(fake_provider: FakeProvider, flavour: Flavour) -> None:
    fake_provider.queue(
        reply(
            flavour,
            calls=[
                fn_call("call_b", "add", '{"a":2,"b":3}'),
                fn_call("call_a", "get_weather", '{"city":"Oslo","unit":"c"}'),
            ],
        ),
        reply(flavour, content="5, and Oslo is cloudy."),
    )
    result = run_turn(fake_provider, flavour, "Add 2 and 3, and the weather in Oslo?")
    assert sorted(name for name, _ in RAN) == ["add", "get_weather"]
    assert result.output == "5, and Oslo is cloudy."
    sent = bodies(fake_provider, flavour)
    follow = sent[1]["messages"]
    assert [m["role"] for m in follow] == ["user", "assistant", "tool", "tool"]
    answers = {m["tool_call_id"]: m["content"] for m in follow[2:]}
    assert answers == {"call_b": "5", "call_a": '{"city":"Oslo","temp_c":18,"sky":"cloudy"}'}
    assert_golden(f"chat_completions/{flavour}_parallel_calls", sent)


def test_parallel_tool_calls_false_and_forced_choice(fake_provider: FakeProvider) -> None:
    fake_provider.queue(reply(content="ok"), reply(content="ok"), reply(content="ok"))
    for choice in ("required", "none", "add"):
        respond(
            fake_provider,
            request_of(
                UserMessage("x"),
                tools=[get_weather, add],
                tool_choice=choice,
                parallel_tool_calls=False,
            ),
        )
    sent = bodies(fake_provider, "openai")
    assert [b["tool_choice"] for b in sent] == [
        "required",
        "none",
        {"type": "function", "function": {"name": "add"}},
    ]
    assert all(b["parallel_tool_calls"] is False for b in sent)


def test_glm_accepts_only_auto(
    fake_provider: FakeProvider, caplog: pytest.LogCaptureFixture
) -> None:
    fake_provider.queue(reply("glm", content="ok"))
    with caplog.at_level(logging.WARNING, "tooldeck.providers.chat_completions"):
        message = respond(
            fake_provider, request_of(UserMessage("x"), tool_choice="get_weather"), "glm"
        )
    assert fake_provider.bodies()[0]["tool_choice"] == "auto"
    assert message.provider_data is not None
    assert message.provider_data["tool_choice"] == {"requested": "get_weather", "sent": "auto"}
    assert "only tool_choice 'auto'" in caplog.text


def test_unknown_forced_tool_fails_before_the_network(fake_provider: FakeProvider) -> None:
    with pytest.raises(ValueError, match="names no tool"):
        respond(fake_provider, request_of(UserMessage("x"), tool_choice="nope"))
    assert fake_provider.requests == []


def test_no_tools_sends_no_tool_fields(fake_provider: FakeProvider) -> None:
    fake_provider.queue(reply(content="hello"))
    respond(fake_provider, request_of(UserMessage("hi"), tools=[]))
    assert fake_provider.bodies()[0] == {
        "model": "gpt-4.1",
        "messages": [{"role": "user", "content": "hi"}],
    }


# -- malformed arguments ------------------------------------------------------------------


def test_malformed_arguments_become_an_error_output(fake_provider: FakeProvider) -> None:
    fake_provider.queue(
        reply(calls=[fn_call("call_bad", "add", "a=2 and b=three")]),
        reply(content="Sorry, let me stop there."),
    )
    result = run_turn(fake_provider, prompt="Add 2 and three.")
    assert RAN == []
    output = result.tool_outputs[0]
    assert output.call_id == "call_bad" and output.is_error
    sent = bodies(fake_provider, "openai")
    tool_message = sent[1]["messages"][2]
    assert tool_message == {"role": "tool", "tool_call_id": "call_bad", "content": output.text}
    assert sent[1]["messages"][1]["tool_calls"][0]["function"]["arguments"] == "a=2 and b=three"
    assert result.output == "Sorry, let me stop there."
    # the error text is the dispatcher's (asserted above); the golden pins the shape
    tool_message["content"] = "<the dispatcher's error output for call_bad>"
    assert_golden("chat_completions/openai_malformed_arguments", sent)


# -- refusal ----------------------------------------------------------------------------


REFUSAL = "I can't help with writing malware."


@pytest.mark.parametrize("flavour", ["openai", "openrouter"])
def test_refusal_runs_no_tool_and_keeps_no_text(
    fake_provider: FakeProvider, flavour: Flavour
) -> None:
    fake_provider.queue(
        reply(
            flavour,
            content="Here is how you would start...",
            calls=[fn_call("call_r", "get_weather", '{"city":"Paris","unit":null}')],
            message={"refusal": REFUSAL},
            finish="stop",
        )
    )
    result = run_turn(fake_provider, flavour, "Write malware.")
    assert RAN == []
    assert result.stop_reason is StopReason.REFUSAL
    assert result.reason.startswith("refusal:cyber")
    message = result.last_message
    assert message is not None
    assert message.refusal == "refusal:cyber"
    assert message.text == ""
    everything = repr(result.items)
    assert REFUSAL not in everything and "Here is how" not in everything
    assert [o.call_id for o in result.tool_outputs] == ["call_r"]
    assert result.tool_outputs[0].is_error
    assert len(fake_provider.requests) == 1


# -- truncation ---------------------------------------------------------------------------


@pytest.mark.parametrize("flavour", ["openai", "glm"])
def test_length_truncation_never_executes(fake_provider: FakeProvider, flavour: Flavour) -> None:
    fake_provider.queue(
        reply(
            flavour,
            calls=[
                fn_call("call_ok", "add", '{"a":1,"b":2}'),
                fn_call("call_cut", "get_weather", '{"city":"Par'),
            ],
            finish="length",
        )
    )
    result = run_turn(fake_provider, flavour, settings=ModelSettings(max_output_tokens=16))
    assert RAN == []
    assert result.stop_reason is StopReason.MAX_TOKENS
    message = result.last_message
    assert message is not None and message.stop_reason is StopReason.MAX_TOKENS
    assert [c.incomplete for c in message.tool_calls] == [True, True]
    assert [o.call_id for o in result.tool_outputs] == ["call_ok", "call_cut"]
    assert all(o.text.startswith("Not executed") for o in result.tool_outputs)
    assert len(fake_provider.requests) == 1


# -- reasoning replay ---------------------------------------------------------------------

DETAILS: list[dict[str, Any]] = [
    {
        "type": "reasoning.text",
        "text": "The user wants the weather; call get_weather.",
        "signature": "sig-abc",
        "id": None,
        "format": "anthropic-claude-v1",
        "index": 0,
    },
    {
        "type": "reasoning.encrypted",
        "data": "ZW5jcnlwdGVk",
        "id": "rs_1",
        "format": "anthropic-claude-v1",
        "index": 1,
    },
]
GLM_REASONING = "The user wants weather in Beijing, so I call get_weather."


def test_openrouter_reasoning_details_replayed_verbatim(fake_provider: FakeProvider) -> None:
    fake_provider.queue(
        reply(
            "openrouter",
            content="",
            calls=[fn_call("toolu_01", "get_weather", '{"city":"Boston","unit":"f"}')],
            message={"reasoning": "The user wants the weather...", "reasoning_details": DETAILS},
            choice={"native_finish_reason": "tool_use"},
            top={"provider": "Anthropic"},
        ),
        reply("openrouter", content="Boston: 64 °F."),
    )
    result = run_turn(
        fake_provider,
        "openrouter",
        "Weather in Boston?",
        model_kwargs={"extra_body": {"reasoning": {"max_tokens": 2000}}},
    )
    first = result.items[1]
    assert isinstance(first, AssistantMessage)
    assert first.opaque == [
        OpaqueItem("openrouter", "openai-chat", MODELS["openrouter"], "reasoning_details", DETAILS)
    ]
    assert first.provider_data is not None
    assert first.provider_data["native_finish_reason"] == "tool_use"
    assert first.provider_data["provider"] == "Anthropic"
    sent = bodies(fake_provider, "openrouter")
    assistant = sent[1]["messages"][1]
    assert assistant["reasoning_details"] == DETAILS
    assert "reasoning" not in assistant
    assert all(b["reasoning"] == {"max_tokens": 2000} for b in sent)
    assert_golden("chat_completions/openrouter_reasoning", sent)


def test_glm_reasoning_content_replayed_verbatim(fake_provider: FakeProvider) -> None:
    fake_provider.queue(
        reply(
            "glm",
            content="",
            calls=[fn_call("call_1", "get_weather", '{"city":"Beijing"}')],
            message={"reasoning_content": GLM_REASONING},
        ),
        reply("glm", content="Beijing: 25 °C."),
    )
    result = run_turn(
        fake_provider,
        "glm",
        "Weather in Beijing?",
        model_kwargs={"extra_body": {"thinking": {"type": "enabled"}}},
    )
    assert RAN == [("get_weather", {"city": "Beijing", "unit": "c"})]
    first = result.items[1]
    assert isinstance(first, AssistantMessage)
    assert first.opaque[0].kind == "reasoning_content" and first.opaque[0].data == GLM_REASONING
    assert first.provider_data is not None and first.provider_data["request_id"] == "req-glm-1"
    sent = bodies(fake_provider, "glm")
    assert sent[1]["messages"][1]["reasoning_content"] == GLM_REASONING
    assert all(b["thinking"] == {"type": "enabled"} for b in sent)
    assert_golden("chat_completions/glm_reasoning", sent)


def test_reasoning_dropped_on_model_switch(fake_provider: FakeProvider) -> None:
    fake_provider.queue(
        reply(
            "openrouter",
            calls=[fn_call("toolu_01", "get_weather", '{"city":"Boston","unit":"f"}')],
            message={"reasoning_details": DETAILS},
        ),
        reply("openrouter", content="Boston: 64 °F."),
        reply("openrouter", content="Also cloudy."),
    )

    async def main() -> None:
        async with (
            make(fake_provider, "openrouter") as claude,
            make(fake_provider, "openrouter", "openai/gpt-5") as gpt,
        ):
            session = Session(claude, TOOLS)
            await session.run("Weather in Boston?")
            session.model = gpt
            await session.run("And the sky?")

    asyncio.run(main())
    sent = bodies(fake_provider, "openrouter")
    assert sent[1]["messages"][1]["reasoning_details"] == DETAILS  # same model: kept
    switched = sent[2]
    assert switched["model"] == "openai/gpt-5"
    assistant = switched["messages"][1]
    assert "reasoning_details" not in assistant
    assert assistant["tool_calls"] == [
        fn_call("toolu_01", "get_weather", '{"city":"Boston","unit":"f"}')
    ]
    assert_golden("chat_completions/openrouter_model_switch", switched)


def test_reasoning_never_crosses_providers() -> None:
    """GLM reasoning is not sent to OpenRouter, even under the same model name."""
    glm_turn = AssistantMessage(
        parts=[
            OpaqueItem("glm", "openai-chat", "glm-4.6", "reasoning_content", GLM_REASONING),
            ToolCall("call_1", "get_weather", '{"city":"Beijing"}'),
        ],
        stop_reason=StopReason.TOOL_CALLS,
        provider="glm",
        adapter="openai-chat",
        model="glm-4.6",
    )
    items: list[Item] = [
        UserMessage("Weather?"),
        glm_turn,
        ToolOutput("call_1", "get_weather", ToolResult("25 °C")),
    ]
    request = ModelRequest(items, [get_weather])
    to_router = ChatCompletionsModel("glm-4.6", "openrouter", api_key="x")
    to_glm = ChatCompletionsModel("glm-4.6", "glm", api_key="x")
    assert "reasoning_content" not in to_router.build_messages(request)[1]
    assert to_glm.build_messages(request)[1]["reasoning_content"] == GLM_REASONING


# -- GLM and OpenRouter finish reasons -------------------------------------------------------


@pytest.mark.parametrize(
    ("finish", "stop"),
    [("sensitive", StopReason.CONTENT_FILTER), ("network_error", StopReason.ERROR)],
)
def test_glm_finish_reasons(fake_provider: FakeProvider, finish: str, stop: StopReason) -> None:
    fake_provider.queue(
        reply("glm", content="", calls=[fn_call("call_1", "add", '{"a":1,"b":2}')], finish=finish)
    )
    result = run_turn(fake_provider, "glm", "Add 1 and 2.")
    assert RAN == []
    assert result.stop_reason is stop
    message = result.last_message
    assert message is not None and message.provider_data is not None
    assert message.provider_data["finish_reason"] == finish
    assert result.tool_outputs[0].text.startswith("Not executed")


def test_openrouter_error_finish_reason(fake_provider: FakeProvider) -> None:
    error = {"code": 502, "message": "upstream provider error"}
    fake_provider.queue(
        reply(
            "openrouter",
            content="Partial",
            finish="error",
            choice={"native_finish_reason": "MALFORMED_FUNCTION_CALL", "error": error},
        )
    )
    result = run_turn(fake_provider, "openrouter")
    assert result.stop_reason is StopReason.ERROR
    message = result.last_message
    assert message is not None and message.provider_data is not None
    assert message.provider_data["native_finish_reason"] == "MALFORMED_FUNCTION_CALL"
    assert message.provider_data["error"] == error


@pytest.mark.parametrize("flavour", ["compatible", "glm"])
def test_unknown_finish_reason_is_an_error(fake_provider: FakeProvider, flavour: Flavour) -> None:
    fake_provider.queue(reply(flavour, content="…", finish="model_context_window_exceeded"))
    message = respond(fake_provider, request_of(UserMessage("x")), flavour)
    assert message.stop_reason is StopReason.ERROR
    assert message.provider_data is not None
    assert message.provider_data["finish_reason"] == "model_context_window_exceeded"


def test_content_filter(fake_provider: FakeProvider) -> None:
    fake_provider.queue(reply(content="", finish="content_filter"))
    assert respond(fake_provider, request_of(UserMessage("x"))).stop_reason is (
        StopReason.CONTENT_FILTER
    )


def test_glm_mcp_call_is_kept_but_never_dispatched(fake_provider: FakeProvider) -> None:
    mcp = {
        "id": "call_mcp",
        "type": "mcp",
        "mcp": {"type": "mcp_call", "server_label": "docs", "name": "search", "output": "ok"},
    }
    fake_provider.queue(
        reply("glm", calls=[mcp, fn_call("call_fn", "add", '{"a":1,"b":1}')]),
        reply("glm", content="2"),
    )
    result = run_turn(fake_provider, "glm", "Add 1 and 1.")
    assert RAN == [("add", {"a": 1, "b": 1})]
    first = result.items[1]
    assert isinstance(first, AssistantMessage)
    assert [c.call_id for c in first.tool_calls] == ["call_fn"]
    assert first.opaque == [
        OpaqueItem("glm", "openai-chat", "glm-4.6", "tool_call.mcp", mcp, model_bound=False)
    ]
    assert [o.call_id for o in result.tool_outputs] == ["call_fn"]
    follow = bodies(fake_provider, "glm")[1]["messages"]
    assert follow[1]["tool_calls"] == [fn_call("call_fn", "add", '{"a":1,"b":1}')]


# -- usage ----------------------------------------------------------------------------------


def test_usage_mapping(fake_provider: FakeProvider) -> None:
    usage = {
        "prompt_tokens": 120,
        "completion_tokens": 30,
        "total_tokens": 150,
        "prompt_tokens_details": {"cached_tokens": 100, "cache_write_tokens": 7},
        "completion_tokens_details": {"reasoning_tokens": 12},
        "cost": 0.0012,
        "is_byok": False,
    }
    fake_provider.queue(reply("openrouter", content="ok", usage=usage))
    message = respond(fake_provider, request_of(UserMessage("x")), "openrouter")
    assert message.usage == Usage(120, 30, 12, 100, 7, 1)
    assert message.provider_data is not None and message.provider_data["cost"] == 0.0012


# -- errors ---------------------------------------------------------------------------------


def test_429_is_retried_after_retry_after_ms(fake_provider: FakeProvider) -> None:
    fake_provider.queue(
        Reply(
            {"error": {"message": "slow down", "type": "rate_limit"}},
            429,
            {"retry-after-ms": "10"},
        ),
        reply(content="done"),
    )
    message = respond(fake_provider, request_of(UserMessage("x")), max_retries=2)
    assert message.text == "done"
    assert len(fake_provider.requests) == 2
    assert fake_provider.bodies()[0] == fake_provider.bodies()[1]


def _server_errors(n: int) -> list[Reply]:
    error = {"error": {"message": "boom", "type": "server_error"}}
    return [Reply(error, 500, {"retry-after-ms": "10"}) for _ in range(n)]


def test_500_raises_after_retries(fake_provider: FakeProvider) -> None:
    fake_provider.queue(*_server_errors(3))
    with pytest.raises(ProviderUnavailable, match="after 2 retries") as info:
        respond(fake_provider, request_of(UserMessage("x")), max_retries=2)
    assert isinstance(info.value.__cause__, openai.InternalServerError)
    assert len(fake_provider.requests) == 3


def test_500_propagates_through_run(fake_provider: FakeProvider) -> None:
    fake_provider.queue(*_server_errors(2))
    with pytest.raises(ProviderUnavailable):
        run_turn(fake_provider, model_kwargs={"max_retries": 1})
    assert RAN == []
    assert len(fake_provider.requests) == 2


def test_missing_output_fails_before_the_network(fake_provider: FakeProvider) -> None:
    turn = AssistantMessage(
        parts=[ToolCall("c1", "add", "{}"), ToolCall("c2", "add", "{}")],
        stop_reason=StopReason.TOOL_CALLS,
    )
    request = request_of(
        UserMessage("x"), turn, ToolOutput("c2", "add", ToolResult("1")), UserMessage("y")
    )
    with pytest.raises(ValueError, match="c1"):
        respond(fake_provider, request)
    assert fake_provider.requests == []


# -- structured output ------------------------------------------------------------------------

ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "temp_c": {"type": "number"}},
    "required": ["city", "temp_c"],
    "additionalProperties": False,
}


@pytest.mark.parametrize("flavour", ["openai", "glm"])
def test_structured_output(fake_provider: FakeProvider, flavour: Flavour) -> None:
    fake_provider.queue(
        reply(flavour, calls=[fn_call("call_1", "get_weather", '{"city":"Paris","unit":null}')]),
        reply(flavour, content='{"city":"Paris","temp_c":18}'),
    )
    settings = ModelSettings(output_schema=ANSWER_SCHEMA, output_schema_name="weather_report")
    result = run_turn(fake_provider, flavour, settings=settings)
    assert result.structured == {"city": "Paris", "temp_c": 18}
    assert result.last_message is not None and result.last_message.structured == result.structured
    sent = bodies(fake_provider, flavour)
    assert all("response_format" in b for b in sent)
    assert_golden(f"chat_completions/{flavour}_structured", sent[0])


def test_structured_output_that_does_not_validate(fake_provider: FakeProvider) -> None:
    fake_provider.queue(reply(content='{"city":"Paris"}'))
    message = respond(fake_provider, request_of(UserMessage("x"), output_schema=ANSWER_SCHEMA))
    assert message.structured is None
    assert message.stop_reason is StopReason.ERROR
    assert message.provider_data is not None
    assert "temp_c" in message.provider_data["structured_error"]


def test_structured_output_optional_property_answered_null(fake_provider: FakeProvider) -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "note": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    }
    fake_provider.queue(reply(content='{"city":"Paris","note":null}'))
    message = respond(fake_provider, request_of(UserMessage("x"), output_schema=schema))
    sent = fake_provider.bodies()[0]["response_format"]["json_schema"]["schema"]
    assert sent["required"] == ["city", "note"]  # strict: optional sent as nullable
    assert message.structured == {"city": "Paris"}


@pytest.mark.parametrize(
    "schema", [{"type": "array", "items": {"type": "string"}}, {"anyOf": [{"type": "object"}]}]
)
def test_bad_output_schema_root_fails_before_the_network(
    fake_provider: FakeProvider, schema: dict[str, Any]
) -> None:
    with pytest.raises(SchemaError, match="object root"):
        run_turn(fake_provider, settings=ModelSettings(output_schema=schema))
    assert fake_provider.requests == []


def test_tool_schema_error_fails_before_the_network(fake_provider: FakeProvider) -> None:
    @tool(strict=True)
    def picky(values: dict[str, int]) -> str:
        """Needs an open object, which strict mode cannot express."""
        return "x"

    with pytest.raises(SchemaError):
        run_turn(fake_provider, tools=Toolset([picky]))
    assert fake_provider.requests == []


# -- transcript details -------------------------------------------------------------------------


def test_dict_arguments_from_another_provider_are_sent_as_a_string() -> None:
    anthropic_turn = AssistantMessage(
        parts=[
            OpaqueItem("anthropic", "anthropic", "claude", "thinking", {"thinking": "hm"}),
            TextPart("Let me check."),
            ToolCall("toolu_1", "get_weather", {"city": "Paris", "unit": "c"}),
        ],
        stop_reason=StopReason.TOOL_CALLS,
        provider="anthropic",
        adapter="anthropic",
        model="claude",
    )
    items: list[Item] = [
        UserMessage("Weather?"),
        anthropic_turn,
        ToolOutput("toolu_1", "get_weather", ToolResult("18 °C")),
    ]
    model = ChatCompletionsModel("gpt-4.1", api_key="x")
    messages = model.build_messages(ModelRequest(items, [get_weather], instructions="Be brief."))
    assert messages == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [
                fn_call("toolu_1", "get_weather", '{"city": "Paris", "unit": "c"}'),
            ],
        },
        {"role": "tool", "tool_call_id": "toolu_1", "content": "18 °C"},
    ]


def test_image_tool_output_is_described_in_text(fake_provider: FakeProvider) -> None:
    fake_provider.queue(
        reply(calls=[fn_call("call_s", "screenshot", "{}")]),
        reply(content="I see the screen."),
    )
    run_turn(fake_provider, prompt="Look.", tools=Toolset([screenshot]))
    tool_message = bodies(fake_provider, "openai")[1]["messages"][2]
    assert tool_message["tool_call_id"] == "call_s"
    assert isinstance(tool_message["content"], str)
    assert tool_message["content"].startswith("the screen\n[image (image/png, inline, 48 bytes)")
    assert PNG not in tool_message["content"]


def test_user_content_parts(fake_provider: FakeProvider) -> None:
    fake_provider.queue(reply(content="A cat."))
    content: list[ContentPart] = [
        TextPart("What is this?"),
        ImagePart(url="https://example.com/cat.png"),
    ]
    respond(fake_provider, request_of(UserMessage(content)))
    assert bodies(fake_provider, "openai")[0]["messages"][0]["content"] == [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
    ]


def test_refusal_turn_is_not_replayed_as_empty_message() -> None:
    refused = AssistantMessage(
        stop_reason=StopReason.REFUSAL,
        refusal="refusal:cyber",
        provider="openai",
        adapter="openai-chat",
        model="gpt-4.1",
    )
    model = ChatCompletionsModel("gpt-4.1", api_key="x")
    messages = model.build_messages(ModelRequest([UserMessage("a"), refused, UserMessage("b")], []))
    assert [m["role"] for m in messages] == ["user", "user"]


# -- streaming --------------------------------------------------------------------------------


def _same_as_respond(
    fake: FakeProvider, streamed: AssistantMessage, body: dict[str, Any], flavour: Flavour
) -> None:
    """The streamed message equals the one respond() makes from the equivalent body."""
    fake.queue(Reply(body))
    plain = respond(fake, request_of(UserMessage("x")), flavour)
    assert streamed.parts == plain.parts
    assert streamed.stop_reason == plain.stop_reason
    assert streamed.usage == plain.usage
    assert streamed.provider_data == plain.provider_data


def test_stream_text(fake_provider: FakeProvider) -> None:
    fake_provider.queue(
        sse(
            chunk({"role": "assistant", "content": ""}),
            chunk({"content": "Hello"}),
            chunk({"content": ", world"}),
            chunk({}, "stop"),
            chunk(usage=USAGE),
        )
    )
    deltas, message = stream(
        fake_provider, request_of(UserMessage("hi"), max_output_tokens=50), "openai"
    )
    assert [(d.kind, d.text) for d in deltas] == [("text", "Hello"), ("text", ", world")]
    assert message.text == "Hello, world"
    assert message.stop_reason is StopReason.END_TURN
    assert message.usage == Usage(80, 20, requests=1)
    sent = bodies(fake_provider, "openai")[0]
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert_golden("chat_completions/openai_stream", sent)
    _same_as_respond(
        fake_provider,
        message,
        completion(content="Hello, world", top={"id": "chatcmpl-stream"}),
        "openai",
    )


def test_stream_interleaved_parallel_calls(fake_provider: FakeProvider) -> None:
    fake_provider.queue(
        sse(
            chunk({"role": "assistant", "content": None}),
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_a",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": ""},
                        }
                    ]
                }
            ),
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": 1,
                            "id": "call_b",
                            "type": "function",
                            "function": {"name": "add", "arguments": '{"a":'},
                        }
                    ]
                }
            ),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":'}}]}),
            chunk({"tool_calls": [{"index": 1, "function": {"arguments": '2,"b":3}'}}]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Oslo","unit":null}'}}]}),
            chunk({}, "tool_calls"),
            chunk(usage=USAGE),
        )
    )
    deltas, message = stream(fake_provider, request_of(UserMessage("x"), tools=[get_weather, add]))
    assert [(d.kind, d.index, d.call_id, d.name, d.text) for d in deltas] == [
        ("tool_call_start", 0, "call_a", "get_weather", ""),
        ("tool_call_start", 1, "call_b", "add", ""),
        ("tool_call", 1, "call_b", "add", '{"a":'),
        ("tool_call", 0, "call_a", "get_weather", '{"city":'),
        ("tool_call", 1, "call_b", "add", '2,"b":3}'),
        ("tool_call", 0, "call_a", "get_weather", '"Oslo","unit":null}'),
    ]
    assert message.tool_calls == [
        ToolCall("call_a", "get_weather", '{"city":"Oslo","unit":null}'),
        ToolCall("call_b", "add", '{"a":2,"b":3}'),
    ]
    assert message.stop_reason is StopReason.TOOL_CALLS
    _same_as_respond(
        fake_provider,
        message,
        completion(
            calls=[
                fn_call("call_a", "get_weather", '{"city":"Oslo","unit":null}'),
                fn_call("call_b", "add", '{"a":2,"b":3}'),
            ],
            top={"id": "chatcmpl-stream"},
        ),
        "openai",
    )


def test_stream_glm_reasoning_deltas(fake_provider: FakeProvider) -> None:
    glm_usage = {
        **USAGE,
        "prompt_tokens_details": {"cached_tokens": 8},
        "completion_tokens_details": {"reasoning_tokens": 11},
    }
    fake_provider.queue(
        sse(
            chunk({"role": "assistant", "reasoning_content": "The user wants"}, flavour="glm"),
            chunk({"reasoning_content": " weather in Beijing."}, flavour="glm"),
            chunk(
                {
                    "tool_calls": [
                        {"index": 0, **fn_call("call_1", "get_weather", '{"city":"Beijing"}')}
                    ]
                },
                flavour="glm",
            ),
            chunk({}, "tool_calls", flavour="glm", usage=glm_usage),
        )
    )
    deltas, message = stream(fake_provider, request_of(UserMessage("x")), "glm")
    assert [(d.kind, d.text) for d in deltas] == [
        ("reasoning", "The user wants"),
        ("reasoning", " weather in Beijing."),
        ("tool_call_start", ""),
        ("tool_call", '{"city":"Beijing"}'),
    ]
    assert message.opaque == [
        OpaqueItem(
            "glm",
            "openai-chat",
            "glm-4.6",
            "reasoning_content",
            "The user wants weather in Beijing.",
        )
    ]
    assert message.tool_calls == [ToolCall("call_1", "get_weather", '{"city":"Beijing"}')]
    assert message.usage == Usage(80, 20, 11, 8, 0, 1)
    sent = bodies(fake_provider, "glm")[0]
    assert sent["stream"] is True and "stream_options" not in sent
    assert_golden("chat_completions/glm_stream", sent)
    _same_as_respond(
        fake_provider,
        message,
        completion(
            "glm",
            content=None,
            calls=[fn_call("call_1", "get_weather", '{"city":"Beijing"}')],
            message={"reasoning_content": "The user wants weather in Beijing."},
            usage=glm_usage,
            top={"id": "chatcmpl-stream", "request_id": None},
        ),
        "glm",
    )


def test_stream_openrouter_reasoning_details_merged(fake_provider: FakeProvider) -> None:
    text, encrypted = DETAILS
    fragments = [
        {**text, "text": "The user wants the weather; ", "signature": None},
        {"type": "reasoning.text", "text": "call get_weather.", "index": 0},
        {"type": "reasoning.text", "text": "", "signature": "sig-abc", "index": 0},
        encrypted,
    ]
    fake_provider.queue(
        sse(
            chunk(
                {
                    "role": "assistant",
                    "reasoning": "The user wants the weather; ",
                    "reasoning_details": fragments[:1],
                },
                flavour="openrouter",
            ),
            chunk(
                {"reasoning": "call get_weather.", "reasoning_details": fragments[1:2]},
                flavour="openrouter",
            ),
            chunk({"reasoning_details": fragments[2:]}, flavour="openrouter"),
            chunk({"content": "Calling."}, flavour="openrouter"),
            chunk(
                {
                    "tool_calls": [
                        {"index": 0, **fn_call("toolu_01", "get_weather", '{"city":"Boston"}')}
                    ]
                },
                flavour="openrouter",
            ),
            chunk(
                {}, "tool_calls", flavour="openrouter", choice={"native_finish_reason": "tool_use"}
            ),
            chunk(usage=USAGE, flavour="openrouter"),
        )
    )
    deltas, message = stream(fake_provider, request_of(UserMessage("x")), "openrouter")
    assert [d.text for d in deltas if d.kind == "reasoning"] == [
        "The user wants the weather; ",
        "call get_weather.",
    ]
    assert message.opaque[0].kind == "reasoning_details"
    assert message.opaque[0].data == DETAILS
    assert message.text == "Calling."
    _same_as_respond(
        fake_provider,
        message,
        completion(
            "openrouter",
            content="Calling.",
            calls=[fn_call("toolu_01", "get_weather", '{"city":"Boston"}')],
            message={
                "reasoning": "The user wants the weather; call get_weather.",
                "reasoning_details": DETAILS,
            },
            choice={"native_finish_reason": "tool_use"},
            top={"id": "chatcmpl-stream"},
        ),
        "openrouter",
    )


def test_stream_truncated_call_is_incomplete(fake_provider: FakeProvider) -> None:
    fake_provider.queue(
        sse(
            chunk({"tool_calls": [{"index": 0, **fn_call("call_1", "get_weather", '{"ci')}]}),
            chunk({}, "length"),
        )
    )
    _, message = stream(fake_provider, request_of(UserMessage("x")))
    assert message.stop_reason is StopReason.MAX_TOKENS
    assert message.tool_calls == [ToolCall("call_1", "get_weather", '{"ci', incomplete=True)]
    assert message.usage == Usage(requests=1)


def test_stream_refusal(fake_provider: FakeProvider) -> None:
    fake_provider.queue(
        sse(
            chunk({"refusal": "I can't help with "}),
            chunk({"refusal": "malware."}),
            chunk({}, "stop"),
        )
    )
    deltas, message = stream(fake_provider, request_of(UserMessage("x")))
    assert deltas == []
    assert message.stop_reason is StopReason.REFUSAL and message.refusal == "refusal:cyber"
    assert message.parts == []


def test_stream_without_finish_reason_is_an_error(fake_provider: FakeProvider) -> None:
    fake_provider.queue(sse(chunk({"content": "Hel"})))
    _, message = stream(fake_provider, request_of(UserMessage("x")))
    assert message.stop_reason is StopReason.ERROR
    assert message.text == "Hel"


# -- a full loop --------------------------------------------------------------------------------


def test_full_multi_step_loop(fake_provider: FakeProvider) -> None:
    fake_provider.queue(
        reply(calls=[fn_call("call_1", "get_weather", '{"city":"Paris","unit":null}')]),
        reply(
            content="Paris is 18 °C. Adding the offset.",
            calls=[fn_call("call_2", "add", '{"a":18,"b":4}')],
            finish="tool_calls",
        ),
        reply(content="It will be 22 °C."),
    )
    result = run_turn(
        fake_provider,
        prompt="Weather in Paris, plus 4 degrees?",
        instructions="Use the tools.",
    )
    assert RAN == [
        ("get_weather", {"city": "Paris", "unit": "c"}),
        ("add", {"a": 18, "b": 4}),
    ]
    assert result.steps == 3
    assert result.output == "It will be 22 °C."
    assert result.usage == Usage(240, 60, requests=3)
    assert [type(i).__name__ for i in result.items] == [
        "UserMessage",
        "AssistantMessage",
        "ToolOutput",
        "AssistantMessage",
        "ToolOutput",
        "AssistantMessage",
    ]
    sent = bodies(fake_provider, "openai")
    assert len({json.dumps(b["tools"]) for b in sent}) == 1
    assert [len(b["messages"]) for b in sent] == [2, 4, 6]
    assert_golden("chat_completions/openai_multi_step", sent[2])


# -- construction -----------------------------------------------------------------------------


def test_api_keys_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENROUTER_API_KEY", "ZAI_API_KEY", "ZHIPUAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("ZHIPUAI_API_KEY", "zhipu")
    glm = ChatCompletionsModel("glm-4.6", "glm")
    assert glm.client.api_key == "zhipu"
    assert str(glm.client.base_url).rstrip("/") == "https://api.z.ai/api/paas/v4"
    monkeypatch.setenv("ZAI_API_KEY", "zai")
    assert ChatCompletionsModel("glm-4.6", "glm").client.api_key == "zai"
    monkeypatch.setenv("OPENROUTER_API_KEY", "or")
    router = ChatCompletionsModel("x/y", "openrouter")
    assert router.client.api_key == "or"
    assert str(router.client.base_url).rstrip("/") == "https://openrouter.ai/api/v1"
    assert (router.name, router.provider, router.adapter) == (
        "openrouter:x/y",
        "openrouter",
        "openai-chat",
    )
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        ChatCompletionsModel("gpt-4.1")
    with pytest.raises(ValueError, match="base_url"):
        ChatCompletionsModel("m", "compatible")
    with pytest.raises(ValueError, match="unknown flavour"):
        ChatCompletionsModel("m", "bedrock")  # type: ignore[arg-type]


def test_headers(fake_provider: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_ORG_ID", "org-secret")
    fake_provider.queue(reply("openrouter", content="a"), reply("compatible", content="b"))

    async def main() -> None:
        async with ChatCompletionsModel(
            "x/y",
            "openrouter",
            api_key="test",
            base_url=fake_provider.url + "/api/v1",
            referer="https://tooldeck.dev",
            title="tooldeck tests",
        ) as router:
            await router.respond(request_of(UserMessage("x")))
        async with ChatCompletionsModel(
            "qwen3-8b", "compatible", base_url=fake_provider.url + "/v1"
        ) as local:
            await local.respond(request_of(UserMessage("x")))

    asyncio.run(main())
    router_headers, local_headers = (r.headers for r in fake_provider.requests)
    assert router_headers["http-referer"] == "https://tooldeck.dev"
    assert router_headers["x-openrouter-title"] == "tooldeck tests"
    assert router_headers["authorization"] == "Bearer test"
    assert "openai-organization" not in router_headers
    assert "authorization" not in local_headers


def test_given_client_is_used(fake_provider: FakeProvider) -> None:
    fake_provider.queue(reply(content="via client"))

    async def main() -> AssistantMessage:
        client = openai.AsyncOpenAI(api_key="test", base_url=fake_provider.url + "/v1")
        async with ChatCompletionsModel("gpt-4.1", client=client) as model:
            return await model.respond(request_of(UserMessage("x")))

    assert asyncio.run(main()).text == "via client"


def test_settings_extra_overrides_constructor_extra(fake_provider: FakeProvider) -> None:
    fake_provider.queue(reply("openrouter", content="ok"))
    request = ModelRequest(
        [UserMessage("x")],
        [],
        ModelSettings(temperature=0.2, extra={"provider": {"only": ["anthropic"]}}),
    )
    respond(
        fake_provider,
        request,
        "openrouter",
        extra_body={"provider": {"order": ["x"]}, "reasoning": {"effort": "low"}},
    )
    body = fake_provider.bodies()[0]
    assert body["provider"] == {"only": ["anthropic"]}
    assert body["reasoning"] == {"effort": "low"}
    assert body["temperature"] == 0.2


def test_is_a_model() -> None:
    model: Callable[..., Any] = ChatCompletionsModel
    assert isinstance(model("gpt-4.1", api_key="x"), tooldeck.Model)
