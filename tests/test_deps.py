"""Typed dependencies (issue 34, item 3): ``Session(deps=...)`` reaches every tool as
``ctx.deps``, typed by ``ToolContext[Deps]`` (checked by the real mypy); a sub-agent's
tools get the parent's deps; a background job gets none (documented: it may run in
another process, where live objects cannot go)."""

from __future__ import annotations

import asyncio
import textwrap
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from mypy import api as mypy_api

import tooldeck
from test_typed_entry_points import ROOT
from tooldeck import Session, ToolContext, Toolset, TurnContext, tool
from tooldeck.agents.delegation import delegate_task_tool
from tooldeck.agents.toolkits import AgentDefinition, ToolkitManifest
from tooldeck.dispatch import Dispatcher
from tooldeck.model import ModelRequest
from tooldeck.testing import ScriptedModel, call, reply
from tooldeck.transcript import AssistantMessage, ToolCall, ToolOutput


@dataclass
class Db:
    rows: dict[str, int] = field(default_factory=dict)
    reads: list[str] = field(default_factory=list)

    def get(self, key: str) -> int:
        self.reads.append(key)
        return self.rows.get(key, 0)


@tool(read_only=True)
def lookup(key: str, ctx: ToolContext[Db]) -> int:
    """Look a key up in the database."""
    return ctx.deps.get(key)


def test_session_deps_reach_the_tool() -> None:
    db = Db({"apples": 3})
    model = ScriptedModel([reply(call("lookup", {"key": "apples"})), reply("3 apples")])
    session = Session(model, [lookup], deps=db)
    assert session.deps is db
    result = session.run_sync("how many apples?")
    assert result.tool_outputs[0].text == "3" and db.reads == ["apples"]
    # the tool's schema has no trace of its context parameter
    assert list(lookup.schema["properties"]) == ["key"]


def test_the_one_turn_functions_take_deps() -> None:
    db = Db({"pears": 2})
    model = ScriptedModel([reply(call("lookup", {"key": "pears"})), reply("2")])
    result = tooldeck.run_sync(model, [lookup], "pears?", deps=db)
    assert result.tool_outputs[0].text == "2"


def test_a_turn_context_with_its_own_deps_keeps_them() -> None:
    mine, sessions = Db({"k": 1}), Db({"k": 2})
    model = ScriptedModel([reply(call("lookup", {"key": "k"})), reply("ok")] * 2)
    session = Session(model, [lookup], deps=sessions)
    given = session.run_sync("k?", turn=TurnContext("s", deps=mine))
    assert given.tool_outputs[0].text == "1"
    bare = session.run_sync("k?", turn=TurnContext("s"))  # none of its own: the session's
    assert bare.tool_outputs[-1].text == "2"


def test_a_dispatcher_gives_its_turns_deps() -> None:
    db = Db({"x": 7})
    dispatcher = Dispatcher(Toolset([lookup]), turn=TurnContext("s", deps=db))
    done = asyncio.run(
        dispatcher.dispatch([ToolCall("c1", "lookup", '{"key": "x"}')], tooldeck.AbortSignal())
    )
    assert done.outputs[0].text == "7"


def test_without_deps_a_tool_sees_none() -> None:
    seen: list[object] = []

    @tool(read_only=True)
    def peek(ctx: ToolContext) -> str:
        """Peek at the deps."""
        seen.append(ctx.deps)
        return "ok"

    Session(ScriptedModel([reply(call("peek")), reply("done")]), [peek]).run_sync("go")
    assert seen == [None]
    assert ToolContext().deps is None  # a context made by hand, with no turn


def test_a_sub_agent_gets_its_parents_deps() -> None:
    db = Db({"doc": 5})
    agent = AgentDefinition.parse(
        "---\nname: helper\ndescription: Helps.\ntools: [lookup]\n---\nBe brief."
    )

    def child(request: ModelRequest) -> AssistantMessage:
        if not any(isinstance(i, ToolOutput) for i in request.transcript):
            return reply(call("lookup", {"key": "doc"}))
        return reply("child saw " + request.transcript[-1].text)  # type: ignore[union-attr]

    delegate = delegate_task_tool(
        {"helper": agent}, ToolkitManifest.load(), model_for=lambda _: ScriptedModel(child)
    )
    parent = ScriptedModel(
        [reply(call("delegate_task", {"agent": "helper", "task": "look doc up"})), reply("ok")]
    )
    session = Session(parent, Toolset([lookup, delegate]), deps=db)
    result = session.run_sync("go", turn=TurnContext("parent"))
    assert "child saw 5" in result.tool_outputs[0].text
    assert db.reads == ["doc"]


def _mypy(tmp_path: Path, source: str) -> list[str]:
    """mypy's error lines for ``source`` as a user's module, strict, with the project's cache.

    The module's name is new for each run: mypy's cache keeps a module by name, and one of
    the same name checked before from another folder had its old errors reported.
    """
    user = tmp_path / f"user_{uuid.uuid4().hex[:12]}.py"
    user.write_text(textwrap.dedent(source), encoding="utf-8")
    args = ["--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(ROOT / ".mypy_cache")]
    out, err, status = mypy_api.run(
        [*args, "--no-error-summary", "--show-absolute-path", str(user)]
    )
    assert status in (0, 1), f"mypy did not run ({status}):\n{out}\n{err}"
    return [line for line in out.splitlines() if line.startswith(f"{user}:") and ": error:" in line]


@pytest.mark.xdist_group("mypy")  # with the docs blocks: tests/test_docs_blocks.py
def test_mypy_checks_the_type_of_deps(tmp_path: Path) -> None:
    errors = _mypy(
        tmp_path,
        """
        from dataclasses import dataclass

        from tooldeck import Session, ToolContext, tool
        from tooldeck.testing import ScriptedModel


        @dataclass
        class Db:
            url: str

            def count(self) -> int:
                return 1


        @tool
        def rows(ctx: ToolContext[Db]) -> int:
            \"\"\"Count rows.\"\"\"
            return ctx.deps.count()


        @tool
        def wrong(ctx: ToolContext[Db]) -> int:
            \"\"\"Misuse the deps.\"\"\"
            ctx.deps.counts()
            return 0


        @tool
        def untyped(ctx: ToolContext) -> str:
            \"\"\"No deps type: anything goes.\"\"\"
            return str(ctx.deps)


        session = Session(ScriptedModel([]), [rows], deps=Db("sqlite://"))
        url: str = session.deps.url
        number: int = session.deps.url
        """,
    )
    text = "\n".join(errors)
    assert len(errors) == 2, text
    assert ':25: error: "Db" has no attribute "counts"' in text
    assert ':37: error: Incompatible types in assignment (expression has type "str"' in text


def test_an_adapter_gives_its_turns_deps_to_the_tools() -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel

    from tooldeck.adapters.pydantic_ai import TooldeckToolset

    db = Db({"a": 4})
    toolset = TooldeckToolset([lookup], turn=TurnContext("adapted", deps=db))
    agent = Agent(TestModel(), toolsets=[toolset])
    result = agent.run_sync("look a up")
    assert db.reads and "4" in str(result.output)
