"""Model strings, and `tooldeck demo --model` against a real local HTTP server."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from tooldeck.cli import app
from tooldeck.providers import (
    AnthropicModel,
    ChatCompletionsModel,
    OpenAIResponsesModel,
    model_from_string,
)

from .fake_server import SSE, FakeProvider, Reply


def test_model_strings_pick_the_adapter(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OPENAI_API_KEY", "OPENROUTER_API_KEY", "ZAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.setenv(var, "test-key")
    assert isinstance(model_from_string("openai:gpt-5.4"), OpenAIResponsesModel)
    assert isinstance(model_from_string("anthropic:claude-sonnet-4-6"), AnthropicModel)
    for spec, provider in [
        ("openai-chat:gpt-4.1", "openai"),
        ("openrouter:anthropic/claude-sonnet-4.5", "openrouter"),
        ("glm:glm-4.6", "glm"),
    ]:
        model = model_from_string(spec)
        assert isinstance(model, ChatCompletionsModel) and model.name.startswith(provider)
    with pytest.raises(ValueError, match="KIND:MODEL"):
        model_from_string("gpt-5.4")
    with pytest.raises(ValueError, match="KIND:MODEL"):
        model_from_string("mistral:large")
    with pytest.raises(ValueError, match="pass base_url= or set TOOLDECK_BASE_URL"):
        model_from_string("compatible:llama3")


def chat(message: dict[str, object], finish: str) -> Reply:
    return Reply(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1767225600,
            "model": "local-model",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": finish,
                    "logprobs": None,
                    "message": {"role": "assistant", "refusal": None, **message},
                }
            ],
            "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
        }
    )


def chat_stream(message: dict[str, object], finish: str) -> SSE:
    """The reply of ``chat(message, finish)`` as a Chat Completions stream (the demo streams)."""
    body = chat(message, finish).body
    top = {k: body[k] for k in ("id", "created", "model")}
    delta = {k: v for k, v in body["choices"][0]["message"].items() if v is not None}
    if "tool_calls" in delta:
        delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(delta["tool_calls"])]
    chunks = [
        {**top, "object": "chat.completion.chunk", "choices": [c]}
        for c in (
            {"index": 0, "delta": delta, "finish_reason": None},
            {"index": 0, "delta": {}, "finish_reason": finish},
        )
    ]
    chunks.append({**top, "object": "chat.completion.chunk", "choices": [], "usage": body["usage"]})
    return SSE([*((None, c) for c in chunks), (None, "[DONE]")])


def test_demo_runs_a_live_turn_against_a_compatible_server(
    fake_provider: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLDECK_BASE_URL", fake_provider.url + "/v1")
    fake_provider.queue(
        chat_stream(
            {
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "read_document", "arguments": '{"path": "notes.md"}'},
                    }
                ],
            },
            "tool_calls",
        ),
        chat_stream({"content": "There are two open TODO items."}, "stop"),
    )
    result = CliRunner().invoke(
        app, ["demo", "--model", "compatible:local-model"], env={"COLUMNS": "160"}
    )
    assert result.exit_code == 0, result.output
    assert "There are two open TODO items." in result.output
    assert "stop reason: end_turn" in result.output
    second = fake_provider.requests[1].body
    tool_message = next(m for m in second["messages"] if m["role"] == "tool")
    assert tool_message["tool_call_id"] == "call_1"
    assert "TODO: ship the dispatcher" in tool_message["content"]
