"""delegate_task: a real sub-agent run limited to its toolkit, within its parent's tools."""

from __future__ import annotations

import asyncio
from typing import Any

from tooldeck import Toolset, tool
from tooldeck.agents.delegation import SubAgentSpawned, delegate_task_tool
from tooldeck.agents.toolkits import AgentDefinition, ToolkitManifest
from tooldeck.events import Event, ToolEvent
from tooldeck.loop import Session
from tooldeck.model import ModelRequest
from tooldeck.testing import ScriptedModel, call, reply
from tooldeck.transcript import AssistantMessage, ToolOutput

RAN: list[str] = []


def make(name: str, read_only: bool = True) -> Any:
    @tool(name=name, read_only=read_only)
    def handler(path: str = "") -> str:
        """A test tool."""
        RAN.append(name)
        return f"{name}({path})"

    return handler


PARENT = [make("read_document"), make("grep_files"), make("write_file", read_only=False)]

RESEARCHER = AgentDefinition.parse(
    "---\nname: researcher\ndescription: Reads things.\ntoolkit: _default\n---\nBe brief."
)
TYPO = AgentDefinition.parse("---\nname: typo\ntoolkit: comon_read\n---\n")


def child_script(request: ModelRequest) -> AssistantMessage:
    outputs = [i for i in request.transcript if isinstance(i, ToolOutput)]
    if not outputs:
        return reply(call("read_document", {"path": "a.md"}), call("write_file", {"path": "x"}))
    return reply("child done: " + " | ".join(o.text for o in outputs))


def test_subagent_runs_with_only_its_toolkit() -> None:
    RAN.clear()
    child_model = ScriptedModel(child_script)
    delegate = delegate_task_tool(
        {"researcher": RESEARCHER, "typo": TYPO},
        ToolkitManifest.load(),
        model_for=lambda agent: child_model,
    )
    parent_model = ScriptedModel(
        [
            reply(call("delegate_task", {"agent": "researcher", "task": "read a.md"})),
            reply("parent done"),
        ]
    )
    session = Session(parent_model, Toolset([*PARENT, delegate]), session_id="parent")
    events: list[Event] = []
    session.events.subscribe(events.append)
    result = asyncio.run(session.run("go"))

    assert result.output == "parent done"
    assert RAN == ["read_document"]  # write_file is not in the _default toolkit
    child_request = child_model.requests[0]
    assert [t.name for t in child_request.tools] == ["read_document", "grep_files"]
    assert child_request.instructions == "Be brief."
    out = result.tool_outputs[0]
    assert not out.is_error
    assert "read_document(a.md)" in out.text and "Unknown tool 'write_file'" in out.text
    details = out.result.details
    assert details["tools_used"] == ["read_document", "write_file"]
    assert details["session_id"].startswith("parent.researcher.")
    spawned = [
        e.payload
        for e in events
        if isinstance(e, ToolEvent) and isinstance(e.payload, SubAgentSpawned)
    ]
    assert spawned and spawned[0].tools == ("read_document", "grep_files")
    assert "delegate_task" not in spawned[0].tools  # control tools are never inherited


def test_typo_falls_back_with_a_visible_warning_and_never_exceeds_the_parent() -> None:
    child_model = ScriptedModel([reply("ok")])
    delegate = delegate_task_tool(
        {"typo": TYPO}, ToolkitManifest.load(), model_for=lambda a: child_model
    )
    parent_model = ScriptedModel(
        [reply(call("delegate_task", {"agent": "typo", "task": "t"})), reply("done")]
    )
    # the parent itself may only read documents: the child can never get grep_files
    session = Session(parent_model, Toolset([PARENT[0], delegate]))
    events: list[Event] = []
    session.events.subscribe(events.append)
    result = asyncio.run(session.run("go"))
    spawned = next(e.payload for e in events if isinstance(e, ToolEvent))
    assert spawned.tools == ("read_document",)
    joined = " ".join(spawned.warnings)
    assert "did you mean 'common_read'" in joined and "['grep_files'] do not exist" in joined
    assert result.tool_outputs[0].result.details["warnings"] == list(spawned.warnings)


def test_unknown_agent_and_time_budget() -> None:
    @tool(read_only=True)
    async def slow() -> str:
        """Sleep."""
        await asyncio.sleep(10)
        return "late"

    agent = AgentDefinition.parse("---\nname: slowpoke\ntools: [slow]\n---\n")
    delegate = delegate_task_tool(
        {"slowpoke": agent},
        ToolkitManifest.load(),
        model_for=lambda a: ScriptedModel([reply(call("slow"))]),
        time_budget=0.1,
    )
    parent = ScriptedModel(
        [
            reply(
                call("delegate_task", {"agent": "nobody", "task": "t"}),
                call("delegate_task", {"agent": "slowpoke", "task": "t"}),
            ),
            reply("done"),
        ]
    )
    result = asyncio.run(Session(parent, Toolset([slow, delegate])).run("go"))
    first, second = result.tool_outputs
    assert first.is_error and "Unknown agent 'nobody'" in first.text
    assert second.is_error and "time budget" in second.text
