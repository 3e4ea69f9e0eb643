"""Cache reads and writes reach usage and telemetry for every provider, over real HTTP.

Each provider reports its prompt cache in its own usage fields: Anthropic
``cache_read_input_tokens`` / ``cache_creation_input_tokens`` (also on Bedrock and
Vertex), OpenAI ``cached_tokens`` / ``cache_write_tokens`` under the input or prompt
details (also on Azure), Gemini ``cachedContentTokenCount`` (its implicit or explicit
cache; Gemini reports no writes). A turn against the local server speaking that format
must put them in ``RunResult.usage`` and on both the ``chat`` and ``invoke_agent`` spans
(``gen_ai.usage.cache_read.input_tokens``, ``gen_ai.usage.cache_creation.input_tokens``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from openai import AsyncAzureOpenAI

import tooldeck
from test_telemetry_support import Recorded, attrs, otel  # noqa: F401  (fixture)
from tooldeck import ModelSettings
from tooldeck.providers.anthropic import AnthropicModel
from tooldeck.providers.chat_completions import ChatCompletionsModel
from tooldeck.providers.gemini import GeminiModel
from tooldeck.providers.openai_responses import OpenAIResponsesModel

from . import gemini_wire as gw
from . import test_anthropic as an
from . import test_chat_completions as cc
from . import test_openai_responses as oa
from .fake_server import FakeProvider, Reply

READ = "gen_ai.usage.cache_read.input_tokens"
WRITE = "gen_ai.usage.cache_creation.input_tokens"


def anthropic(fake: FakeProvider) -> Any:
    usage = {
        "input_tokens": 40,
        "output_tokens": 5,
        "cache_read_input_tokens": 900,
        "cache_creation_input_tokens": 300,
    }
    fake.queue(Reply(an.msg(an.text("hi"), stop="end_turn", usage=usage)))
    return AnthropicModel("claude-sonnet-4-6", api_key="k", base_url=fake.url, max_retries=0)


def chat(fake: FakeProvider) -> Any:
    usage = {
        "prompt_tokens": 1240,
        "completion_tokens": 5,
        "total_tokens": 1245,
        "prompt_tokens_details": {"cached_tokens": 900, "cache_write_tokens": 300},
    }
    fake.queue(Reply(cc.completion(content="hi", usage=usage)))
    return ChatCompletionsModel("gpt-4.1", api_key="k", base_url=fake.url + "/v1")


def responses_usage() -> dict[str, Any]:
    use = oa.usage(1240, 5, cached=900)
    use["input_tokens_details"]["cache_write_tokens"] = 300
    return use


def responses(fake: FakeProvider) -> Any:
    fake.queue(Reply(oa.response(oa.msg("hi"), use=responses_usage())))
    return OpenAIResponsesModel("gpt-4.1", api_key="k", base_url=fake.url + "/v1")


def azure(fake: FakeProvider) -> Any:
    fake.queue(Reply(oa.response(oa.msg("hi"), use=responses_usage())))
    client = AsyncAzureOpenAI(
        azure_endpoint=fake.url, api_key="az", api_version="2025-04-01-preview", max_retries=0
    )
    return OpenAIResponsesModel("my-deployment", client=client)


def gemini(fake: FakeProvider) -> Any:
    usage = {
        "promptTokenCount": 1240,
        "candidatesTokenCount": 5,
        "cachedContentTokenCount": 900,
        "totalTokenCount": 1245,
    }
    fake.queue(Reply(gw.checked_response(gw.response({"text": "hi"}, usage=usage))))
    return GeminiModel(gw.MODEL, api_key="k", base_url=fake.url, max_retries=0)


WIRES = {
    "anthropic": (anthropic, 300),
    "openai-chat": (chat, 300),
    "openai-responses": (responses, 300),
    "azure-responses": (azure, 300),
    "gemini": (gemini, 0),
}


@pytest.mark.parametrize("wire", sorted(WIRES))
def test_cache_reads_and_writes_reach_usage_and_spans(
    wire: str,
    fake_provider: FakeProvider,
    otel: Recorded,  # noqa: F811
) -> None:
    make, written = WIRES[wire]
    result = asyncio.run(tooldeck.run(make(fake_provider), [], "hi"))

    assert result.output == "hi"
    assert (result.usage.cache_read_tokens, result.usage.cache_write_tokens) == (900, written)
    turn = otel.one("invoke_agent")
    [chat_span] = [s for s in otel.spans if s.name.startswith("chat ")]
    for span in (turn, chat_span):
        seen = attrs(span)
        assert seen[READ] == 900
        assert seen.get(WRITE, 0) == written


def test_an_explicit_gemini_cache_is_sent_by_name(fake_provider: FakeProvider) -> None:
    """A ``cachedContents/...`` made by the user goes in the body as given (docs)."""
    model = gemini(fake_provider)
    settings = ModelSettings(cache=True, extra={"cachedContent": "cachedContents/tools-v1"})
    result = asyncio.run(tooldeck.run(model, [], "hi", settings=settings))

    assert result.usage.cache_read_tokens == 900
    [body] = fake_provider.bodies()
    gw.check_request(body)
    assert body["cachedContent"] == "cachedContents/tools-v1"
