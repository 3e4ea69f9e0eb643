"""tooldeck's tools in LangChain / LangGraph (``tooldeck.adapters.langchain``): a LangGraph
graph of an agent node (LangChain's ``GenericFakeChatModel``, answering from a list of
messages) and LangGraph's ``ToolNode`` running the tools, asynchronously and synchronously.

Each scenario of the issue: a valid call, a repaired call (``null`` for an absent optional),
an invalid call answered with an error ``ToolMessage`` and called again, a denied call, an
approval (one batch for a step's calls), an offloaded result read back by the ref id the
answer gives, and a parallel batch.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

import tooldeck
from tooldeck import ApprovalAnswer, ApprovalRequest, Protection, TurnContext
from tooldeck.adapters.langchain import langchain_tools

Answer = AIMessage | Callable[[list[BaseMessage]], AIMessage]


def calls(*made: tuple[str, str, dict[str, Any]]) -> AIMessage:
    """An AIMessage calling tools: (call id, name, arguments) each."""
    return AIMessage("", tool_calls=[{"name": n, "args": a, "id": i} for i, n, a in made])


def agent_graph(answers: Sequence[Answer], tools: list[Any]) -> Any:
    """An agent node (the fake chat model) and a ToolNode, looping until no tool call."""
    seen: list[list[BaseMessage]] = []

    def script() -> Iterator[AIMessage]:
        for answer in answers:
            yield answer if isinstance(answer, AIMessage) else answer(seen[-1])

    model = GenericFakeChatModel(messages=script())

    def agent(state: MessagesState) -> dict[str, list[BaseMessage]]:
        seen.append(list(state["messages"]))
        return {"messages": [model.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile()


def tool_messages(state: dict[str, Any]) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in state["messages"] if isinstance(m, ToolMessage)}


def run(answers: Sequence[Answer], tools: list[Any], *, sync: bool = False) -> dict[str, Any]:
    graph = agent_graph(answers, tools)
    state = {"messages": [HumanMessage("go")]}
    if sync:
        result: dict[str, Any] = graph.invoke(state)
    else:
        result = asyncio.run(graph.ainvoke(state))
    return result


@tooldeck.tool(read_only=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tooldeck.tool(read_only=True)
def greet(name: str, title: str = "") -> str:
    """Greet someone, with a title if given."""
    return f"hello {title + ' ' if title else ''}{name}"


written: list[str] = []


@tooldeck.tool
def write_note(text: str) -> str:
    """Write a note (a WRITE tool: it changes the world)."""
    written.append(text)
    return f"wrote {text!r}"


@pytest.fixture(autouse=True)
def _fresh_notes() -> None:
    written.clear()


@pytest.mark.parametrize("sync", [False, True], ids=["ainvoke", "invoke"])
def test_a_valid_call_runs_and_its_text_is_the_tool_message(sync: bool) -> None:
    state = run(
        [calls(("c1", "add", {"a": 2, "b": 3})), AIMessage("five")],
        langchain_tools([add]),
        sync=sync,
    )
    message = tool_messages(state)["c1"]
    assert (message.content, message.status, message.name) == ("5", "success", "add")
    assert message.artifact == {"tooldeck": "ok", "repairs": []}
    assert state["messages"][-1].content == "five"


def test_a_null_for_an_absent_optional_is_repaired_and_runs() -> None:
    state = run(
        [calls(("c1", "greet", {"name": "Ada", "title": None})), AIMessage("ok")],
        langchain_tools([greet]),
    )
    message = tool_messages(state)["c1"]
    assert (message.content, message.status) == ("hello Ada", "success")  # None: absent


def test_an_invalid_call_is_an_error_message_and_the_model_calls_again() -> None:
    state = run(
        [
            calls(("c1", "add", {"a": "one"})),
            calls(("c2", "add", {"a": 1, "b": 1})),
            AIMessage("two"),
        ],
        langchain_tools([add]),
    )
    first, second = tool_messages(state)["c1"], tool_messages(state)["c2"]
    assert first.status == "error"
    assert str(first.content).startswith("Invalid arguments for add: ")
    assert "$.b: required property missing" in str(first.content)
    assert (second.content, second.status) == ("2", "success")


def test_a_denied_call_is_an_error_message_and_the_graph_goes_on() -> None:
    def refuse(request: ApprovalRequest) -> ApprovalAnswer:
        return ApprovalAnswer(False, "not today")

    tools = langchain_tools([write_note], protect=Protection.ask("WRITE", approver=refuse))
    state = run([calls(("c1", "write_note", {"text": "hi"})), AIMessage("understood")], tools)
    message = tool_messages(state)["c1"]
    assert (message.content, message.status) == ("Denied by the user: not today", "error")
    assert state["messages"][-1].content == "understood"
    assert written == []


def test_the_calls_of_one_step_are_approved_in_one_batch() -> None:
    batches: list[list[str]] = []

    async def approve(requests: Sequence[ApprovalRequest]) -> list[ApprovalAnswer]:
        batches.append([r.call.call_id for r in requests])
        return [ApprovalAnswer(r.call.call_id != "c2", "no to the second") for r in requests]

    tools = langchain_tools([add, write_note], protect=Protection.ask("WRITE", approver=approve))
    state = run(
        [
            calls(
                ("c1", "write_note", {"text": "one"}),
                ("c0", "add", {"a": 1, "b": 1}),
                ("c2", "write_note", {"text": "two"}),
                ("c3", "write_note", {"text": "three"}),
            ),
            AIMessage("done"),
        ],
        tools,
    )
    assert batches == [["c1", "c2", "c3"]]  # one step, one batch, the model's order
    answers = {i: (m.content, m.status) for i, m in tool_messages(state).items()}
    assert answers == {
        "c1": ("wrote 'one'", "success"),
        "c0": ("2", "success"),
        "c2": ("Denied by the user: no to the second", "error"),
        "c3": ("wrote 'three'", "success"),
    }
    assert written == ["one", "three"]


def test_a_large_result_is_offloaded_and_read_back_by_its_ref_id(tmp_path: Path) -> None:
    lines = [f"line {i:05d} " + "x" * 60 for i in range(3000)]  # ~200,000 characters

    @tooldeck.tool(read_only=True)
    def dump() -> str:
        """A large report."""
        return "\n".join(lines)

    refs: list[str] = []

    def read_back(messages: list[BaseMessage]) -> AIMessage:
        [summary] = [m for m in messages if isinstance(m, ToolMessage)]
        assert len(str(summary.content)) < 20_000 and "line 00000" in str(summary.content)
        refs.extend(re.findall(r"ref_[0-9a-f]+", str(summary.content)))
        return calls(("c2", "recall_tool_result", {"ref_id": refs[0], "offset": 0}))

    tools = langchain_tools([dump], turn=TurnContext("offload-session", home=tmp_path))
    assert [t.name for t in tools] == ["dump", "recall_tool_result"]
    state = run([calls(("c1", "dump", {})), read_back, AIMessage("read")], tools)
    page = tool_messages(state)["c2"]
    assert page.status == "success" and "line 00000" in str(page.content)
    assert f'next page: recall_tool_result(ref_id="{refs[0]}"' in str(page.content)


def test_the_recall_tool_before_any_result_is_stored_says_so(tmp_path: Path) -> None:
    tools = langchain_tools([add], turn=TurnContext("s", home=tmp_path))
    call = {"ref_id": "ref_0123456789abcdef", "offset": 0}
    state = run([calls(("c1", "recall_tool_result", call)), AIMessage("ok")], tools)
    message = tool_messages(state)["c1"]
    assert message.status == "error"
    assert "recall_tool_result is not available yet" in str(message.content)


def test_read_only_calls_of_one_step_run_together() -> None:
    arrived: list[str] = []
    both = asyncio.Event()

    @tooldeck.tool(read_only=True)
    async def wait_for_peer(name: str) -> str:
        """Waits until the other call of the step has started too."""
        arrived.append(name)
        if len(arrived) == 2:
            both.set()
        await asyncio.wait_for(both.wait(), 5)
        return f"{name} met its peer"

    state = run(
        [
            calls(
                ("c1", "wait_for_peer", {"name": "left"}),
                ("c2", "wait_for_peer", {"name": "right"}),
            ),
            AIMessage("met"),
        ],
        langchain_tools([wait_for_peer]),
    )
    answers = {i: m.content for i, m in tool_messages(state).items()}
    assert answers == {"c1": "left met its peer", "c2": "right met its peer"}


def test_a_missing_extra_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib
    import sys

    from tooldeck.errors import MissingExtra

    monkeypatch.setitem(sys.modules, "langchain_core", None)
    monkeypatch.delitem(sys.modules, "langchain_core.tools", raising=False)
    monkeypatch.delitem(sys.modules, "tooldeck.adapters.langchain", raising=False)
    with pytest.raises(MissingExtra) as caught:
        importlib.import_module("tooldeck.adapters.langchain")
    assert str(caught.value) == (
        "tooldeck tools in LangChain and LangGraph need the langchain extra "
        "(no module named 'langchain_core.tools'): pip install 'tooldeck[langchain]'"
    )
