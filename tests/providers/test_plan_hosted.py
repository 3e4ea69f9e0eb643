"""Provider-hosted tool search: the plan's deferred tools on the wire (golden bodies)."""

from __future__ import annotations

import asyncio
from typing import Any

from tooldeck import Session, Tool, Toolset
from tooldeck.plan import ToolPlanner
from tooldeck.providers import AnthropicModel, OpenAIResponsesModel

from .fake_server import FakeProvider, Reply, assert_golden


def make(name: str, description: str, namespace: str | None = None) -> Tool:
    return Tool.from_schema(
        name=name,
        description=description,
        json_schema={
            "type": "object",
            "properties": {"id": {"type": "string"}},
            "required": ["id"],
            "additionalProperties": False,
        },
        execute=lambda p, c: f"{name} {p['id']}",
        read_only=True,
        namespace=namespace,
        namespace_description=f"{namespace}: customers and orders." if namespace else None,
    )


TOOLS = Toolset(
    [make("read_document", "Read a file."), make("status", "Session status.")]
    + [make(f"crm_{verb}", f"{verb} a CRM record.", "crm") for verb in ("get", "put", "drop")]
    + [make(f"ops_{i}", f"Operation {i} on the fleet.") for i in range(14)]
)


def openai_reply(text: str) -> Reply:
    return Reply(
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 1767225600,
            "status": "completed",
            "error": None,
            "incomplete_details": None,
            "instructions": None,
            "metadata": {},
            "model": "gpt-5.4",
            "parallel_tool_calls": True,
            "temperature": None,
            "tool_choice": "auto",
            "tools": [],
            "top_p": None,
            "store": False,
            "output": [
                {
                    "type": "message",
                    "id": "msg_1",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                }
            ],
            "usage": {
                "input_tokens": 5,
                "output_tokens": 2,
                "total_tokens": 7,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0},
            },
        }
    )


def anthropic_reply(text: str) -> Reply:
    return Reply(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-6",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 5, "output_tokens": 2},
        }
    )


def run(model: Any) -> ToolPlanner:
    planner = ToolPlanner(TOOLS, model=model)
    asyncio.run(Session(model, planner).run("hi"))
    return planner


def test_openai_responses_sends_deferred_functions_and_namespaces_with_tool_search(
    fake_provider: FakeProvider,
) -> None:
    fake_provider.queue(openai_reply("ok"))
    model = OpenAIResponsesModel("gpt-5.4", api_key="test", base_url=fake_provider.url + "/v1")
    planner = run(model)
    assert planner.last is not None and planner.last.search == "hosted"
    body = fake_provider.requests[0].body
    tools = body["tools"]
    eager = [t["name"] for t in tools if t.get("type") == "function" and not t.get("defer_loading")]
    assert eager == ["read_document", "status"]
    crm = next(t for t in tools if t.get("type") == "namespace")
    assert crm["name"] == "crm" and all(m["defer_loading"] for m in crm["tools"])
    assert tools[-1] == {"type": "tool_search"}
    assert_golden("plan_hosted/openai_responses_tools", tools)


def test_anthropic_sends_deferred_tools_with_the_search_tool(fake_provider: FakeProvider) -> None:
    fake_provider.queue(anthropic_reply("ok"))
    model = AnthropicModel("claude-sonnet-4-6", api_key="test", base_url=fake_provider.url)
    planner = run(model)
    assert planner.last is not None and planner.last.search == "hosted"
    tools = fake_provider.requests[0].body["tools"]
    flags = {t["name"]: t.get("defer_loading", False) for t in tools}
    assert flags["read_document"] is False and flags["status"] is False
    assert flags["crm_get"] is True and flags["ops_3"] is True
    assert tools[-1] == {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}
    assert_golden("plan_hosted/anthropic_tools", tools)


def test_an_older_model_gets_local_search(fake_provider: FakeProvider) -> None:
    fake_provider.queue(openai_reply("ok"))
    model = OpenAIResponsesModel("gpt-4.1", api_key="test", base_url=fake_provider.url + "/v1")
    planner = run(model)
    assert planner.last is not None and planner.last.search == "local"
    names = [t.get("name") for t in fake_provider.requests[0].body["tools"]]
    assert names == ["read_document", "status", "tool_search"]
