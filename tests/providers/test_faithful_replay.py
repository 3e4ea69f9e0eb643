"""Every adapter sends the outputs as they were when their tools returned, on every request.

The official SDK of each provider talks to a local server that speaks its wire format.
Two turns of one session: the first calls tools that return live state and change it,
the second comes after the state changed again. Both later requests must carry exactly
the texts fixed at return time, and so must the transcript and its saved form.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

import tooldeck
from tooldeck import Session, Tool, ToolContext
from tooldeck.model import Model
from tooldeck.policy._pending_json import decode_item, encode_item
from tooldeck.providers.anthropic import AnthropicModel
from tooldeck.providers.chat_completions import ChatCompletionsModel
from tooldeck.providers.openai_responses import OpenAIResponsesModel
from tooldeck.transcript import ToolOutput

from .fake_server import FakeProvider, Reply
from .test_anthropic import MODEL as ANTHROPIC_MODEL
from .test_anthropic import msg as anthropic_msg
from .test_anthropic import text as anthropic_text
from .test_anthropic import tool_use
from .test_chat_completions import completion, fn_call
from .test_openai_responses import fc, response
from .test_openai_responses import msg as responses_msg

EMPTY = {"type": "object", "properties": {}}
CALLS = [("a", "view"), ("b", "spend"), ("c", "view")]
EXPECTED = {"a": '{"balance":10,"spent":[]}', "b": "null", "c": '{"balance":7,"spent":[3]}'}


def tools(state: dict[str, Any]) -> list[Tool]:
    def view(p: Any, ctx: ToolContext) -> Any:
        return state  # live

    def spend(p: Any, ctx: ToolContext) -> None:
        state["balance"] -= 3
        state["spent"].append(3)

    return [
        Tool.from_schema(name="view", description="v", json_schema=EMPTY, execute=view),
        Tool.from_schema(name="spend", description="s", json_schema=EMPTY, execute=spend),
    ]


def responses_outputs(body: Any) -> dict[str, Any]:
    return {
        i["call_id"]: i["output"] for i in body["input"] if i.get("type") == "function_call_output"
    }


def chat_outputs(body: Any) -> dict[str, Any]:
    return {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}


def anthropic_outputs(body: Any) -> dict[str, Any]:
    found = {}
    for message in body["messages"]:
        if isinstance(message["content"], list):
            for block in message["content"]:
                if block.get("type") == "tool_result":
                    found[block["tool_use_id"]] = block.get("content", "")
    return found


def responses_case(
    fake: FakeProvider,
) -> tuple[Model, list[Reply], Callable[[Any], dict[str, Any]]]:
    model = OpenAIResponsesModel("gpt-5.4", api_key="t", base_url=fake.url + "/v1", max_retries=0)
    replies = [
        Reply(response(*(fc(cid, name, "{}") for cid, name in CALLS))),
        Reply(response(responses_msg("Done."), rid="resp_2")),
        Reply(response(responses_msg("Still."), rid="resp_3")),
    ]
    return model, replies, responses_outputs


def chat_case(fake: FakeProvider) -> tuple[Model, list[Reply], Callable[[Any], dict[str, Any]]]:
    model = ChatCompletionsModel(
        "gpt-5.4", "openai", api_key="t", base_url=fake.url + "/v1", max_retries=0
    )
    replies = [
        Reply(completion(calls=[fn_call(cid, name, "{}") for cid, name in CALLS])),
        Reply(completion(content="Done.")),
        Reply(completion(content="Still.")),
    ]
    return model, replies, chat_outputs


def anthropic_case(
    fake: FakeProvider,
) -> tuple[Model, list[Reply], Callable[[Any], dict[str, Any]]]:
    model = AnthropicModel(ANTHROPIC_MODEL, api_key="t", base_url=fake.url, max_retries=0)
    replies = [
        Reply(anthropic_msg(*(tool_use(cid, name, {}) for cid, name in CALLS))),
        Reply(anthropic_msg(anthropic_text("Done."), stop="end_turn")),
        Reply(anthropic_msg(anthropic_text("Still."), stop="end_turn")),
    ]
    return model, replies, anthropic_outputs


@pytest.mark.parametrize("case", [responses_case, chat_case, anthropic_case])
def test_every_request_carries_the_outputs_fixed_at_return_time(
    fake_provider: FakeProvider, case: Callable[..., Any]
) -> None:
    model, replies, outputs_of = case(fake_provider)
    fake_provider.queue(*replies)
    state: dict[str, Any] = {"balance": 10, "spent": []}
    session = Session(model, tools(state))

    async def main() -> None:
        await session.run("spend once, look before and after")
        state["balance"] = 1_000  # changes after the turn must reach nothing already told
        state["spent"].append("later")
        await session.run("anything else?")

    asyncio.run(main())
    bodies = fake_provider.bodies()
    assert len(bodies) == 3
    assert outputs_of(bodies[1]) == EXPECTED
    assert outputs_of(bodies[2]) == EXPECTED  # the same text on a later request
    recorded = {i.call_id: i.text for i in session.transcript if isinstance(i, ToolOutput)}
    assert recorded == EXPECTED
    saved = [decode_item(json.loads(json.dumps(encode_item(i)))) for i in session.transcript]
    assert {i.call_id: i.text for i in saved if isinstance(i, ToolOutput)} == EXPECTED
    assert tooldeck.ToolResult.wrap(state).text() != EXPECTED["c"]
