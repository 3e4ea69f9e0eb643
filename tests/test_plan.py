"""The tool plan: threshold, core set, namespaces, local search loading, policy filtering."""

from __future__ import annotations

import asyncio
from typing import Any

from tooldeck import Session, Tool, Toolset
from tooldeck.events import Event
from tooldeck.model import ModelRequest
from tooldeck.plan import ToolPlanned, ToolPlanner, hosted_search_for
from tooldeck.testing import ScriptedModel, call, reply
from tooldeck.transcript import AssistantMessage, ToolOutput

DESCRIPTIONS = {
    "read_document": "Read a text file page by page.",
    "grep_files": "Search file contents with a regular expression.",
    "status": "Show what this session has.",
    "create_invoice": "Create a customer invoice with line items and a due date.",
    "refund_payment": "Refund a card payment, fully or partly.",
    "list_customers": "List customers of the shop, newest first.",
    "send_email": "Send an email message to a recipient.",
    "resize_image": "Resize an image to a given width and height.",
    "translate_text": "Translate text into another language.",
    "delete_everything": "Delete every file. Dangerous.",
}


def make(name: str, description: str, namespace: str | None = None) -> Tool:
    return Tool.from_schema(
        name=name,
        description=description,
        json_schema={"type": "object", "properties": {"q": {"type": "string"}}},
        execute=lambda p, c: f"{name} ran",
        read_only=True,
        namespace=namespace,
        namespace_description=f"{namespace} tools" if namespace else None,
    )


def catalog(extra: int = 20) -> Toolset:
    tools = [make(n, d) for n, d in DESCRIPTIONS.items()]
    tools += [make(f"filler_{i}", f"Filler operation number {i} on widgets.") for i in range(extra)]
    return Toolset(tools)


def test_under_the_threshold_everything_is_eager() -> None:
    plan = ToolPlanner(catalog(extra=0))(None)
    assert plan.search == "none" and plan.deferred == frozenset()
    assert len(plan.shown) == len(DESCRIPTIONS) and not any(e.deferred for e in plan.entries)


def test_over_the_threshold_core_stays_eager_and_the_rest_is_searchable() -> None:
    plan = ToolPlanner(catalog())(None)
    assert plan.search == "local"
    shown = [t.name for t in plan.shown]
    assert shown == ["read_document", "grep_files", "status", "tool_search"]
    assert plan.executable.names == tuple(shown)
    why = {e.name: e.why for e in plan.entries}
    assert why["read_document"] == "core set: always loaded"
    assert why["create_invoice"] == "over the threshold of 16 tools"
    planner = ToolPlanner(catalog(), threshold=100)
    assert planner(None).search == "none"


def test_a_namespace_is_deferred_as_a_whole() -> None:
    tools = [
        *catalog().tools,
        make("crm_get", "Get a CRM record.", "crm"),
        make("crm_put", "Store a CRM record.", "crm"),
    ]
    plan = ToolPlanner(Toolset(tools))(None)
    why = {e.name: e.why for e in plan.entries}
    assert why["crm_get"] == why["crm_put"] == "namespace 'crm' deferred as a whole"


def test_policy_denied_tools_are_absent_from_plan_and_dispatcher() -> None:
    planner = ToolPlanner(catalog(extra=0), visible=lambda t: t.name != "delete_everything")
    plan = planner(None)
    assert "delete_everything" not in plan.executable
    assert "delete_everything" not in [t.name for t in plan.shown]
    assert plan.denied == ("delete_everything",)
    model = ScriptedModel([reply(call("delete_everything", {})), reply("ok")])
    result = asyncio.run(Session(model, planner).run("go"))
    assert result.tool_outputs[0].is_error
    assert "Unknown tool 'delete_everything'" in result.tool_outputs[0].text
    assert all("delete_everything" not in [t.name for t in r.tools] for r in model.requests)


def script(request: ModelRequest) -> AssistantMessage:
    steps = sum(isinstance(i, AssistantMessage) for i in request.transcript)
    if steps == 0:
        # calling a deferred tool before searching: not callable yet
        return reply(
            call("refund_payment", {"q": "early"}),
            call("tool_search", {"query": "refund a card payment"}),
        )
    if steps == 1:
        return reply(call("refund_payment", {"q": "order 7"}))
    outputs = [i for i in request.transcript if isinstance(i, ToolOutput)]
    return reply(f"done: {outputs[-1].text}")


def test_local_search_loads_a_tool_that_the_next_step_calls() -> None:
    model = ScriptedModel(script)
    planner = ToolPlanner(catalog(), model=model)
    session = Session(model, planner)
    events: list[Event] = []
    session.events.subscribe(events.append, ToolPlanned)
    result = asyncio.run(session.run("refund order 7"))

    first, second = model.requests[0], model.requests[1]
    assert "refund_payment" not in [t.name for t in first.tools]
    assert "refund_payment" in [t.name for t in second.tools]
    early, search, later = result.tool_outputs[:3]
    assert early.is_error and "Unknown tool 'refund_payment'" in early.text
    assert "refund_payment" in search.text
    assert not later.is_error and later.text == "refund_payment ran"
    assert result.output == "done: refund_payment ran"
    assert planner.loaded["refund_payment"] == "loaded by tool_search at step 1"
    assert "refund_payment" in planner.last.executable  # type: ignore[union-attr]
    plans: list[Any] = events
    assert plans[0].search == "local" and "refund_payment" in plans[0].deferred
    assert "refund_payment" in plans[1].loaded
    assert plans[0].eager_tokens < plans[0].plan_tokens


def test_hosted_search_support_is_read_from_the_model_name() -> None:
    class Named:
        def __init__(self, name: str) -> None:
            self.name = name

    assert hosted_search_for(Named("openai-responses:gpt-5.4")) == "openai-responses"
    assert hosted_search_for(Named("openai-responses:gpt-5.6-mini")) == "openai-responses"
    assert hosted_search_for(Named("openai-responses:gpt-5.2")) is None
    assert hosted_search_for(Named("openai-responses:gpt-4.1")) is None
    assert hosted_search_for(Named("anthropic-messages:claude-sonnet-4-6")) == "anthropic"
    assert hosted_search_for(Named("anthropic-messages:claude-opus-5-5")) == "anthropic"
    assert hosted_search_for(Named("anthropic-messages:claude-3-5-haiku")) is None
    assert hosted_search_for(Named("openai:gpt-5.4")) is None  # a chat adapter
    assert hosted_search_for(Named("scripted")) is None
