"""Prompt caching (``ModelSettings(cache=...)``) on the wire, over real HTTP.

Anthropic: breakpoints on the growing transcript, the tool list (its last eager entry)
and the system prompt, never more than 4; OpenAI Responses and Chat Completions:
``prompt_cache_key``; every adapter: tools keep the position they were first sent at.
The cache usage the server reports comes back in the run's usage.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

import tooldeck
from tooldeck import ModelRequest, ModelSettings, Session, tool
from tooldeck.providers.anthropic import AnthropicModel
from tooldeck.providers.chat_completions import ChatCompletionsModel
from tooldeck.providers.openai_responses import OpenAIResponsesModel
from tooldeck.transcript import AssistantMessage, TextPart, UserMessage

from . import test_anthropic as an
from . import test_chat_completions as cc
from . import test_openai_responses as oa
from .fake_server import FakeProvider, Reply

CACHE = ModelSettings(cache=True)


@tool(read_only=True)
def alpha(x: int) -> int:
    """First tool."""
    return x


@tool(read_only=True)
def beta(x: int) -> int:
    """Second tool."""
    return x + 1


@tool(read_only=True)
def gamma(x: int) -> int:
    """Third tool."""
    return x + 2


def marked(body: Any) -> list[str]:
    """Where the breakpoints are: a path per ``cache_control``."""
    found: list[str] = []

    def walk(value: Any, path: str) -> None:
        if isinstance(value, dict):
            if "cache_control" in value:
                found.append(path)
            for k, v in value.items():
                walk(v, f"{path}.{k}" if path else k)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, f"{path}[{i}]")

    walk({k: body[k] for k in ("tools", "system", "messages") if k in body}, "")
    return found


def anthropic_usage(read: int, write: int) -> dict[str, Any]:
    return {
        "input_tokens": 50,
        "output_tokens": 10,
        "cache_creation_input_tokens": write,
        "cache_read_input_tokens": read,
    }


def test_anthropic_breakpoints_follow_the_growing_transcript(fake_provider: FakeProvider) -> None:
    fake_provider.queue(
        Reply(an.msg(an.tool_use("toolu_1", "alpha", {"x": 1}), usage=anthropic_usage(0, 900))),
        Reply(
            an.msg(
                an.tool_use("toolu_2", "beta", {"x": 2}), id="m2", usage=anthropic_usage(900, 80)
            )
        ),
        Reply(an.msg(an.text("done"), stop="end_turn", id="m3", usage=anthropic_usage(980, 40))),
    )
    model = AnthropicModel("claude-sonnet-4-6", api_key="k", base_url=fake_provider.url)
    session = Session(model, [alpha, beta], instructions="Be brief.", settings=CACHE)
    result = asyncio.run(session.run("go"))

    assert result.usage.cache_read_tokens == 1880 and result.usage.cache_write_tokens == 1020
    first, second, third = fake_provider.bodies()
    assert first["system"] == [
        {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}
    ]
    assert marked(first) == ["tools[1]", "system[0]", "messages[0].content[0]"]
    # step 2: the new end of the transcript, and the end the previous step wrote
    assert marked(second) == [
        "tools[1]",
        "system[0]",
        "messages[0].content[0]",
        "messages[2].content[0]",
    ]
    assert marked(third) == [
        "tools[1]",
        "system[0]",
        "messages[2].content[0]",
        "messages[4].content[0]",
    ]

    # what the step before sent is, breakpoints aside, the start of this step's request
    def bare(messages: list[Any]) -> str:
        return json.dumps(messages).replace(', "cache_control": {"type": "ephemeral"}', "")

    assert bare(third["messages"][:3]) == bare(second["messages"])
    assert bare(second["messages"][:1]) == bare(first["messages"])


def test_anthropic_never_more_than_four_breakpoints_and_never_on_a_deferred_tool() -> None:
    model = AnthropicModel("claude-sonnet-4-6", api_key="k", base_url="http://127.0.0.1:9")
    transcript = [UserMessage("one"), AssistantMessage([TextPart("ok")]), UserMessage("two")]
    deferred = frozenset({"gamma"})
    body, _ = model.build_request(
        ModelRequest(transcript, [alpha, beta, gamma], CACHE, "Be brief.", deferred=deferred)
    )
    # the last eager entry is the tool search tool the adapter adds; gamma stays out
    assert [t["name"] for t in body["tools"]][2:] == ["gamma", "tool_search_tool_bm25"]
    assert marked(body) == [
        "tools[3]",
        "system[0]",
        "messages[0].content[0]",
        "messages[2].content[0]",
    ]
    own = {"type": "web_search_20250305", "name": "web_search"}
    own["cache_control"] = {"type": "ephemeral"}
    settings = ModelSettings(cache=True, extra={"tools": [own]})
    body, _ = model.build_request(
        ModelRequest(transcript, [alpha, beta, gamma], settings, "Be brief.", deferred=deferred)
    )
    # the caller's own breakpoint counts: three more fit, the transcript's first
    assert marked(body) == [
        "tools[4]",
        "system[0]",
        "messages[0].content[0]",
        "messages[2].content[0]",
    ]


def test_tools_found_later_are_appended_not_inserted() -> None:
    model = AnthropicModel("claude-sonnet-4-6", api_key="k", base_url="http://127.0.0.1:9")

    def names(tools: list[Any], settings: ModelSettings) -> list[str]:
        body, _ = model.build_request(ModelRequest([UserMessage("hi")], tools, settings))
        return [t["name"] for t in body["tools"]]

    assert names([alpha, gamma], CACHE) == ["alpha", "gamma"]
    assert names([alpha, beta, gamma], CACHE) == ["alpha", "gamma", "beta"]
    assert names([alpha, beta, gamma], ModelSettings()) == ["alpha", "beta", "gamma"]
    chat = ChatCompletionsModel("gpt-4.1", api_key="k")
    for tools, expected in (([gamma], ["gamma"]), ([alpha, gamma], ["gamma", "alpha"])):
        body, _, _ = chat.build_request(ModelRequest([UserMessage("hi")], tools, CACHE))
        assert [t["function"]["name"] for t in body["tools"]] == expected


def test_no_cache_setting_sends_no_cache_fields() -> None:
    model = AnthropicModel("claude-sonnet-4-6", api_key="k", base_url="http://127.0.0.1:9")
    body, _ = model.build_request(ModelRequest([UserMessage("hi")], [alpha], instructions="x"))
    assert marked(body) == [] and body["system"] == "x"
    responses = OpenAIResponsesModel("gpt-5.4", api_key="k")
    body, _ = responses.build_request(ModelRequest([UserMessage("hi")], [alpha]))
    assert "prompt_cache_key" not in body


def test_openai_prompt_cache_key_is_the_same_for_every_step(fake_provider: FakeProvider) -> None:
    fake_provider.queue(
        Reply(oa.response(oa.fc("call_1", "alpha", '{"x": 1}'), use=oa.usage(2000, 5))),
        Reply(oa.response(oa.msg("done"), rid="resp_2", use=oa.usage(2100, 5, cached=1920))),
        Reply(cc.completion(calls=[cc.fn_call("call_1", "alpha", '{"x": 1}')])),
        Reply(cc.completion(content="done")),
    )
    responses = OpenAIResponsesModel(
        "gpt-5.4", api_key="k", base_url=fake_provider.url + "/v1", max_retries=0
    )
    chat = ChatCompletionsModel(
        "gpt-4.1", api_key="k", base_url=fake_provider.url + "/v1", max_retries=0
    )
    ran = asyncio.run(tooldeck.run(responses, [alpha], "go", settings=CACHE))
    asyncio.run(tooldeck.run(chat, [alpha], "go", settings=ModelSettings(cache="session-42")))

    assert ran.usage.cache_read_tokens == 1920
    keys = [b.get("prompt_cache_key") for b in fake_provider.bodies()]
    assert keys[0] == keys[1] and keys[0].startswith("tooldeck-")
    assert keys[2:] == ["session-42", "session-42"]


def test_chat_flavours_other_than_openai_get_no_cache_key() -> None:
    glm = ChatCompletionsModel("glm-4.6", "glm", api_key="k")
    body, _, _ = glm.build_request(ModelRequest([UserMessage("hi")], [alpha], CACHE))
    assert "prompt_cache_key" not in body


@pytest.mark.parametrize("bad", ["", 3, None])
def test_a_bad_cache_setting_is_one_line(bad: Any) -> None:
    with pytest.raises(ValueError, match="cache must be True, False or a cache key"):
        ModelSettings(cache=bad)
