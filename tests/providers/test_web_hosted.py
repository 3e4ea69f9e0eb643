"""Provider-hosted web search chosen by the plan: golden request bodies per provider and a
transcript round trip in which the provider's search items and citations go back exactly
as they came (and never reach the local dispatcher)."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from anthropic.types import Message
from openai.types.responses import Response

from tooldeck import Session
from tooldeck.assembly import TurnContext
from tooldeck.builtin import load_builtin_registry
from tooldeck.plan import ToolPlanner
from tooldeck.providers import AnthropicModel, OpenAIResponsesModel
from tooldeck.testing import ScriptedModel, reply
from tooldeck.transcript import AssistantMessage
from tooldeck.web import HostedSearch, SearchResult, SearchResults
from tooldeck.web.hosted import LOCAL_NAME, apply_web_mode

from .fake_server import FakeProvider, Reply, assert_golden
from .test_openai_responses import check_spec


class Local:
    """The locally bound search provider; records whether anything called it."""

    name = "local"

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def search(self, query: str, *, limit: int = 10, **_: Any) -> SearchResults:
        self.asked.append(query)
        return SearchResults(query, "local", (SearchResult("Local hit", "https://local.example/"),))


@pytest.fixture(autouse=True)
def no_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("TOOLDECK_CONFIG", "XDG_CONFIG_HOME", "TOOLDECK_WEB_SEARCH_MODE"):
        monkeypatch.delenv(name, raising=False)


def session_for(model: Any, tmp_path: Path, mode: str | None, provider: Local) -> Session:
    turn = TurnContext("s", tmp_path, web_provider=provider)
    registry = load_builtin_registry()
    web_only = registry.category("web")
    planner = ToolPlanner(web_only, model=model, web_search=mode)  # type: ignore[arg-type]
    return Session(model, planner, turn=turn)


def two_turns(session: Session, model: Any) -> None:
    async def main() -> None:
        try:
            await session.run("What is new in Python 3.14?")
            await session.run("Thanks! And the release date?")
        finally:
            await model.aclose() if hasattr(model, "aclose") else None

    asyncio.run(main())


# -- OpenAI Responses ----------------------------------------------------------------------

SEARCH_CALL = {
    "type": "web_search_call",
    "id": "ws_68a1",
    "status": "completed",
    "action": {
        "type": "search",
        "query": "Python 3.14 what's new",
        "sources": [{"type": "url", "url": "https://docs.python.org/3.14/whatsnew/3.14.html"}],
    },
}
ANSWER = {
    "type": "message",
    "id": "msg_68a2",
    "role": "assistant",
    "status": "completed",
    "content": [
        {
            "type": "output_text",
            "text": "Python 3.14 adds template strings and deferred annotations.",
            "annotations": [
                {
                    "type": "url_citation",
                    "url": "https://docs.python.org/3.14/whatsnew/3.14.html",
                    "title": "What's new in Python 3.14",
                    "start_index": 0,
                    "end_index": 59,
                }
            ],
        }
    ],
}


def openai_reply(*output: dict[str, Any], rid: str) -> Reply:
    body = {
        "id": rid,
        "object": "response",
        "created_at": 1767225600,
        "status": "completed",
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "metadata": {},
        "model": "gpt-5.4-2026-03-05",
        "output": list(output),
        "parallel_tool_calls": True,
        "temperature": None,
        "tool_choice": "auto",
        "tools": [],
        "top_p": None,
        "store": False,
        "usage": {
            "input_tokens": 900,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": 40,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 940,
        },
    }
    Response.model_validate(body)
    check_spec("Response", body)
    return Reply(body)


def openai_model(fake: FakeProvider) -> OpenAIResponsesModel:
    return OpenAIResponsesModel("gpt-5.4", api_key="test", base_url=fake.url + "/v1", max_retries=0)


def test_openai_hosted_search_replaces_the_local_tool_and_round_trips(
    fake_provider: FakeProvider, tmp_path: Path
) -> None:
    later = {**copy.deepcopy(ANSWER), "id": "msg_68a3"}
    later["content"][0].update(text="It was released in October 2025.", annotations=[])
    fake_provider.queue(
        openai_reply(SEARCH_CALL, ANSWER, rid="resp_1"), openai_reply(later, rid="resp_2")
    )
    local = Local()
    model = openai_model(fake_provider)
    session = session_for(model, tmp_path, "hosted", local)
    two_turns(session, model)

    first, second = fake_provider.bodies()
    for body in (first, second):
        check_spec("CreateResponse", body)
    assert [t.get("name", t["type"]) for t in first["tools"]] == ["web_fetch", "web_search"]
    assert first["tools"][-1] == {"type": "web_search"}
    # The provider's search item and the cited answer go back exactly as received.
    assert second["input"][1:3] == [SEARCH_CALL, ANSWER]
    assert local.asked == [] and session.transcript[1].tool_calls == []
    opaque = session.transcript[1]
    assert isinstance(opaque, AssistantMessage) and [o.kind for o in opaque.opaque] == [
        "web_search_call"
    ]
    assert_golden("web_hosted/openai_first", first)
    assert_golden("web_hosted/openai_followup", second)


def test_openai_both_keeps_the_local_tool_and_options_reach_the_entry(tmp_path: Path) -> None:
    model = OpenAIResponsesModel("gpt-5.4", api_key="test", base_url="http://127.0.0.1:9")
    tools = list(
        load_builtin_registry()
        .category("web")
        .tools_for(TurnContext("s", tmp_path, web_provider=Local()))
    )
    options = HostedSearch(allowed_domains=("docs.python.org",), search_context_size="low")
    kept, hosted = apply_web_mode(tools, model, "both", options)
    assert [t.name for t in kept] == ["web_search", "web_fetch"]  # no name clash on OpenAI
    assert hosted == (
        {
            "type": "web_search",
            "filters": {"allowed_domains": ["docs.python.org"]},
            "search_context_size": "low",
        },
    )


# -- Anthropic -----------------------------------------------------------------------------

SERVER_USE = {
    "type": "server_tool_use",
    "id": "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE",
    "name": "web_search",
    "input": {"query": "Python 3.14 what's new"},
}
RESULTS = {
    "type": "web_search_tool_result",
    "tool_use_id": "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE",
    "content": [
        {
            "type": "web_search_result",
            "url": "https://docs.python.org/3.14/whatsnew/3.14.html",
            "title": "What's new in Python 3.14",
            "encrypted_content": "EqgfCioIARgBIiQ3YTAwMjY1Mi1mZjM5LTQ1NGUtODgxNC1kNjNjNTk1ZWI3Y",
            "page_age": "October 7, 2025",
        }
    ],
}
CITED = {
    "type": "text",
    "text": "Python 3.14 adds template strings and deferred annotations.",
    "citations": [
        {
            "type": "web_search_result_location",
            "url": "https://docs.python.org/3.14/whatsnew/3.14.html",
            "title": "What's new in Python 3.14",
            "encrypted_index": "Eo8BCioIAhgBIiQyYjQ0OWJmZi1lNm",
            "cited_text": "PEP 750: Template strings. PEP 649: Deferred evaluation of annotations.",
        }
    ],
}


def anthropic_reply(*content: dict[str, Any], id: str, stop: str = "end_turn") -> Reply:
    body = {
        "id": id,
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": list(content),
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {
            "input_tokens": 2100,
            "output_tokens": 90,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "server_tool_use": {"web_search_requests": 1, "web_fetch_requests": 0},
        },
    }
    Message.model_validate(body)
    return Reply(body)


def anthropic_model(fake: FakeProvider) -> AnthropicModel:
    return AnthropicModel("claude-sonnet-4-6", api_key="test", base_url=fake.url, max_retries=0)


def test_anthropic_hosted_search_round_trips_its_blocks_and_citations(
    fake_provider: FakeProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[web]\nmode = "hosted"\n\n[web.hosted]\nmax_uses = 3\n')
    monkeypatch.setenv("TOOLDECK_CONFIG", str(config))
    content = [{"type": "text", "text": "I'll search for that."}, SERVER_USE, RESULTS, CITED]
    fake_provider.queue(
        anthropic_reply(*content, id="msg_01"),
        anthropic_reply({"type": "text", "text": "October 7, 2025."}, id="msg_02"),
    )
    local = Local()
    model = anthropic_model(fake_provider)
    session = session_for(model, tmp_path, None, local)  # the mode comes from the config file
    two_turns(session, model)

    first, second = fake_provider.bodies()
    assert first["tools"][-1] == {
        "type": "web_search_20250305",
        "name": "web_search",
        "max_uses": 3,
    }
    assert [t["name"] for t in first["tools"]] == ["web_fetch", "web_search"]
    # The whole assistant content goes back as received: server blocks and citations.
    assert second["messages"][1] == {"role": "assistant", "content": content}
    assert local.asked == []
    message = session.transcript[1]
    assert isinstance(message, AssistantMessage)
    assert (
        message.text
        == "I'll search for that.Python 3.14 adds template strings and deferred annotations."
    )
    assert_golden("web_hosted/anthropic_first", first)
    assert_golden("web_hosted/anthropic_followup", second)


def test_anthropic_both_offers_the_local_tool_under_another_name(
    fake_provider: FakeProvider, tmp_path: Path
) -> None:
    use_local = {
        "type": "tool_use",
        "id": "toolu_01",
        "name": LOCAL_NAME,
        "input": {"query": "intranet wiki python policy"},
    }
    fake_provider.queue(
        anthropic_reply(use_local, id="msg_01", stop="tool_use"),
        anthropic_reply({"type": "text", "text": "Found it."}, id="msg_02"),
    )
    local = Local()
    model = anthropic_model(fake_provider)
    session = session_for(model, tmp_path, "both", local)

    async def main() -> None:
        try:
            await session.run("Find our Python policy.")
        finally:
            await model.aclose()

    asyncio.run(main())
    first, second = fake_provider.bodies()
    names = [t["name"] for t in first["tools"]]
    assert names == [LOCAL_NAME, "web_fetch", "web_search"]
    assert first["tools"][-1] == {"type": "web_search_20250305", "name": "web_search"}
    assert local.asked == ["intranet wiki python policy"]  # the local tool ran
    result = second["messages"][2]["content"][0]
    assert result["tool_use_id"] == "toolu_01" and "Local hit" in result["content"]
    assert_golden("web_hosted/anthropic_both", first)


def test_citations_are_kept_only_for_the_same_adapter(tmp_path: Path) -> None:
    model = AnthropicModel("claude-sonnet-4-6", api_key="test", base_url="http://127.0.0.1:9")
    parsed = model.parse_message(anthropic_reply(SERVER_USE, RESULTS, CITED, id="m").body)
    assert model.build_messages([parsed])[0]["content"] == [SERVER_USE, RESULTS, CITED]
    # Another model of the same adapter still gets them (the results they cite go too).
    other = AnthropicModel("claude-opus-4-5", api_key="test", base_url="http://127.0.0.1:9")
    assert other.build_messages([parsed])[0]["content"] == [SERVER_USE, RESULTS, CITED]
    # Another provider gets the plain text only.
    openai = OpenAIResponsesModel("gpt-5.4", api_key="test", base_url="http://127.0.0.1:9")
    assert openai.input_items([parsed]) == [{"role": "assistant", "content": CITED["text"]}]


def test_a_model_without_hosted_search_keeps_the_local_tool(tmp_path: Path) -> None:
    local = Local()
    model = ScriptedModel([reply("fine")])
    turn = TurnContext("s", tmp_path, web_provider=local)
    web = load_builtin_registry().category("web")
    planner = ToolPlanner(web, model=model, web_search="hosted")
    plan = planner(turn)
    assert plan.hosted == () and [t.name for t in plan.shown] == ["web_search", "web_fetch"]
    # No web binding: no web tools, and no hosted search either.
    bare = ToolPlanner(web, model=model, web_search="hosted")
    plan = bare(TurnContext("s", tmp_path))
    assert plan.hosted == () and plan.shown == ()


def _names(tools: Sequence[Any]) -> list[str]:
    return [t.name for t in tools]


def test_anthropic_streamed_citations_are_kept_and_replayed(
    fake_provider: FakeProvider, tmp_path: Path
) -> None:
    from anthropic.types import RawMessageStreamEvent
    from pydantic import TypeAdapter

    from tooldeck.model import ModelRequest
    from tooldeck.transcript import UserMessage

    from .fake_server import SSE

    start = {
        "type": "message_start",
        "message": {
            "id": "msg_s1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-6",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 2100, "output_tokens": 1},
        },
    }
    events: list[dict[str, Any]] = [
        start,
        {"type": "content_block_start", "index": 0, "content_block": SERVER_USE},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": RESULTS},
        {"type": "content_block_stop", "index": 1},
        {
            "type": "content_block_start",
            "index": 2,
            "content_block": {"type": "text", "text": "", "citations": None},
        },
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "citations_delta", "citation": CITED["citations"][0]},
        },
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "text_delta", "text": CITED["text"]},
        },
        {"type": "content_block_stop", "index": 2},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 90},
        },
        {"type": "message_stop"},
    ]
    adapter: TypeAdapter[Any] = TypeAdapter(RawMessageStreamEvent)
    for event in events:
        adapter.validate_python(event)
    fake_provider.queue(SSE([(e["type"], e) for e in events]))
    model = anthropic_model(fake_provider)

    async def main() -> AssistantMessage:
        try:
            last = None
            async for item in model.stream(ModelRequest([UserMessage("What is new?")], [])):
                last = item
            assert isinstance(last, AssistantMessage)
            return last
        finally:
            await model.aclose()

    message = asyncio.run(main())
    assert message.text == CITED["text"]
    replayed = model.build_messages([message])[0]["content"]
    assert replayed == [SERVER_USE, RESULTS, CITED]
