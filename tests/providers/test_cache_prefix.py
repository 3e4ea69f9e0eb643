"""Deferred loading stays cache-friendly: a tool found by search is appended, over real HTTP.

A user's session with a :class:`~tooldeck.plan.ToolPlanner` (local ``tool_search``) and
``ModelSettings(cache=True)``: the model searches, the found tool is loaded and sent from
the next step on, the model calls it. The request after the search must repeat the
request before it as a prefix, byte for byte: the tool list up to where it ended (the
found tool after it, not inserted in catalog order), the instructions, and the transcript
so far. Anthropic's ``cache_control`` markers move with the transcript and are not prompt
content (the cache matches blocks without them), so they are left out of the comparison.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tooldeck import ModelSettings, Session, tool
from tooldeck.plan import ToolPlanner
from tooldeck.providers.anthropic import AnthropicModel
from tooldeck.providers.chat_completions import ChatCompletionsModel
from tooldeck.providers.gemini import GeminiModel
from tooldeck.providers.openai_responses import OpenAIResponsesModel

from . import gemini_wire as gw
from . import test_anthropic as an
from . import test_chat_completions as cc
from . import test_openai_responses as oa
from .fake_server import FakeProvider, Reply

RAN: list[str] = []
SEARCH = json.dumps({"query": "report 7", "limit": 1})


def catalog() -> list[Any]:
    made = []
    for i in range(12):

        def run(city: str, i: int = i) -> str:
            RAN.append(f"{i}:{city}")
            return f"report {i} for {city}"

        made.append(tool(name=f"report_{i}", description=f"Weather report number {i}.")(run))
    return made


def bare(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: bare(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [bare(v) for v in value]
    return value


def name_of(entry: dict[str, Any]) -> str:
    return str((entry.get("function") or entry).get("name"))


def script(wire: str, fake: FakeProvider) -> Any:
    if wire == "anthropic":
        fake.queue(
            Reply(an.msg(an.tool_use("toolu_1", "tool_search", json.loads(SEARCH)))),
            Reply(an.msg(an.tool_use("toolu_2", "report_7", {"city": "Oslo"}), id="msg_2")),
            Reply(an.msg(an.text("Oslo: fine."), stop="end_turn", id="msg_3")),
        )
        return AnthropicModel("claude-sonnet-4-6", api_key="k", base_url=fake.url, max_retries=0)
    if wire == "openai-chat":
        fake.queue(
            Reply(cc.completion(calls=[cc.fn_call("call_1", "tool_search", SEARCH)])),
            Reply(cc.completion(calls=[cc.fn_call("call_2", "report_7", '{"city": "Oslo"}')])),
            Reply(cc.completion(content="Oslo: fine.")),
        )
        return ChatCompletionsModel("gpt-4.1", api_key="k", base_url=fake.url + "/v1")
    if wire == "gemini":
        fake.queue(
            Reply(gw.response(gw.call_part("c1", "tool_search", json.loads(SEARCH)))),
            Reply(gw.response(gw.call_part("c2", "report_7", {"city": "Oslo"}))),
            Reply(gw.response({"text": "Oslo: fine."})),
        )
        return GeminiModel(gw.MODEL, api_key="k", base_url=fake.url, max_retries=0)
    fake.queue(
        Reply(oa.response(oa.fc("call_1", "tool_search", SEARCH))),
        Reply(oa.response(oa.fc("call_2", "report_7", '{"city": "Oslo"}'), rid="resp_2")),
        Reply(oa.response(oa.msg("Oslo: fine."), rid="resp_3")),
    )
    return OpenAIResponsesModel("gpt-4.1", api_key="k", base_url=fake.url + "/v1")


def tool_list(wire: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    if wire == "gemini":
        [entry] = body["tools"]
        return list(entry["functionDeclarations"])
    return list(body["tools"])


@pytest.mark.parametrize("wire", ["anthropic", "openai-chat", "openai-responses", "gemini"])
def test_a_tool_found_by_search_extends_the_cached_prefix(
    wire: str, fake_provider: FakeProvider
) -> None:
    RAN.clear()
    model = script(wire, fake_provider)
    tools = catalog()
    planner = ToolPlanner(
        tools, model=model, threshold=4, semantic=False, core=["report_9"], search="local"
    )
    session = Session(
        model, planner, instructions="Use the tools.", settings=ModelSettings(cache=True)
    )
    result = asyncio.run(session.run("Report 7 for Oslo?"))

    assert result.output == "Oslo: fine." and RAN == ["7:Oslo"]
    before, after, _ = (bare(b) for b in fake_provider.bodies())
    # the found tool comes last, after the search tool (catalog order would put it first)
    old_tools, new_tools = tool_list(wire, before), tool_list(wire, after)
    assert [name_of(t) for t in old_tools] == ["report_9", "tool_search"]
    assert [name_of(t) for t in new_tools] == ["report_9", "tool_search", "report_7"]
    # the bytes of the old tool list (without its closing bracket) begin the new one
    old, new = json.dumps(old_tools), json.dumps(new_tools)
    assert new.startswith(old[:-1] + ", ")
    transcript = {"openai-responses": "input", "gemini": "contents"}.get(wire, "messages")
    assert after[transcript][: len(before[transcript])] == before[transcript]
    for key in ("system", "instructions", "prompt_cache_key", "systemInstruction"):
        assert after.get(key) == before.get(key)
