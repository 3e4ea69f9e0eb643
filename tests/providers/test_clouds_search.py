"""Anthropic's hosted tool search on Bedrock and Vertex AI, over real HTTP.

Bedrock and Vertex take the tool search tool behind the beta ``tool-search-tool-2025-10-19``
(Anthropic's tool search page, and AWS's Bedrock notebook: Invoke API only), which the
Anthropic API no longer needs (GA). Bedrock takes the beta in the body
(``anthropic_beta``: the SDK moves the ``anthropic-beta`` header there), Vertex as the
header. Bedrock offers only the regex variant, so the adapter sends
``tool_search_tool_regex`` there and BM25 elsewhere. A user's own session with a
:class:`~tooldeck.plan.ToolPlanner` runs the whole flow: the model searches, the server
expands the found tool, the model calls it, and tooldeck runs it.
"""

from __future__ import annotations

from typing import Any

import pytest

from tooldeck import ModelRequest, Session, tool
from tooldeck.plan import ToolPlanner
from tooldeck.providers.anthropic import AnthropicModel
from tooldeck.transcript import UserMessage

from .fake_server import FakeProvider, Reply
from .test_anthropic import _block_start, _message_delta, _start, _stop, _text, msg, text, tool_use
from .test_clouds_anthropic import (  # noqa: F401  (fixtures, used by name)
    _clean,
    arun,
    aws,
    calls,
    check_wire,
    cloud,
    cloud_model,
    gcp,
    service_key,
    streamed,
)

BETA = "tool-search-tool-2025-10-19"
RAN: list[str] = []


def catalog() -> list[Any]:
    made = []
    for i in range(12):

        def run(city: str, i: int = i) -> str:
            RAN.append(f"{i}:{city}")
            return f"report {i} for {city}"

        made.append(tool(name=f"report_{i}", description=f"Weather report number {i}.")(run))
    return made


def search_reply(variant: str, found: str) -> dict[str, Any]:
    return msg(
        {
            "type": "server_tool_use",
            "id": "srvtoolu_01",
            "name": f"tool_search_tool_{variant}",
            "input": {"query": "report 7"},
        },
        {
            "type": "tool_search_tool_result",
            "tool_use_id": "srvtoolu_01",
            "content": {
                "type": "tool_search_tool_search_result",
                "tool_references": [{"type": "tool_reference", "tool_name": found}],
            },
        },
        tool_use("toolu_01", found, {"city": "Oslo"}),
    )


def run_search(model: AnthropicModel, fake: FakeProvider, variant: str) -> Any:
    RAN.clear()
    fake.queue(
        Reply(search_reply(variant, "report_7")),
        Reply(msg(text("Oslo: fine."), stop="end_turn", id="msg_002")),
    )
    planner = ToolPlanner(catalog(), model=model, threshold=4, semantic=False, core=["report_0"])
    return arun(Session(model, planner).run("Report 7 for Oslo?"))


def test_hosted_search_on_a_cloud_sends_the_clouds_beta_and_variant(
    cloud: str,  # noqa: F811
    fake_provider: FakeProvider,
) -> None:
    result = run_search(cloud_model(cloud, fake_provider), fake_provider, "regex")

    assert result.output == "Oslo: fine." and RAN == ["7:Oslo"]
    variant = "regex" if cloud == "bedrock" else "bm25"
    for recorded in calls(fake_provider):
        tools = recorded.body["tools"]
        search = [t for t in tools if str(t.get("type", "")).startswith("tool_search")]
        assert search == [
            {"type": f"tool_search_tool_{variant}_20251119", "name": f"tool_search_tool_{variant}"}
        ]
        assert sum(1 for t in tools if t.get("defer_loading")) >= 8
        if cloud == "bedrock":  # InvokeModel's body field; no header reaches Bedrock
            assert BETA in recorded.body["anthropic_beta"]
        else:
            assert BETA in recorded.headers["anthropic-beta"].split(",")
    check_wire(cloud, fake_provider)


def test_the_anthropic_api_needs_no_beta_for_tool_search(fake_provider: FakeProvider) -> None:
    model = AnthropicModel(
        "claude-sonnet-4-6", api_key="k", base_url=fake_provider.url, max_retries=0
    )
    result = run_search(model, fake_provider, "bm25")

    assert result.output == "Oslo: fine." and RAN == ["7:Oslo"]
    for recorded in fake_provider.requests:
        assert "anthropic-beta" not in recorded.headers
        assert "anthropic_beta" not in recorded.body
        assert {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"} in (
            recorded.body["tools"]
        )


@pytest.mark.parametrize("deferred", [False, True])
def test_a_streamed_request_carries_the_beta_only_with_deferred_tools(
    cloud: str,  # noqa: F811
    fake_provider: FakeProvider,
    deferred: bool,
) -> None:
    tools = catalog()[:3]
    fake_provider.queue(
        streamed(
            cloud,
            _start(),
            _block_start(0, {"type": "text", "text": ""}),
            _text(0, "hi"),
            _stop(0),
            _message_delta("end_turn", 3),
            {"type": "message_stop"},
        )
    )
    model = cloud_model(cloud, fake_provider)
    names = frozenset({"report_1", "report_2"}) if deferred else frozenset()
    request = ModelRequest([UserMessage("hi")], tools, deferred=names)

    async def collect() -> list[Any]:
        return [x async for x in model.stream(request)]

    assert arun(collect())[-1].text == "hi"
    [recorded] = calls(fake_provider)
    if cloud == "bedrock":
        assert (BETA in recorded.body.get("anthropic_beta", [])) is deferred
    else:
        assert (BETA in recorded.headers.get("anthropic-beta", "")) is deferred
    check_wire(cloud, fake_provider, stream=True)


def test_the_beta_joins_the_clients_own_betas(
    gcp: None,  # noqa: F811
    fake_provider: FakeProvider,
) -> None:
    from anthropic import AsyncAnthropicVertex

    client = AsyncAnthropicVertex(
        base_url=fake_provider.url,
        max_retries=0,
        default_headers={"anthropic-beta": "context-management-2025-06-27"},
    )
    model = AnthropicModel("claude-sonnet-4-6@20260101", client=client)
    result = run_search(model, fake_provider, "bm25")

    assert RAN == ["7:Oslo"] and result.steps == 2
    for recorded in calls(fake_provider):
        betas = recorded.headers["anthropic-beta"].split(",")
        assert betas == ["context-management-2025-06-27", BETA]
