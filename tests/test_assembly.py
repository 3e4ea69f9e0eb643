"""Per-turn assembly: ordered tool sources, an immutable Toolset, no global tool set."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest

from tooldeck import Tool, source
from tooldeck.assembly import AssemblyError, Toolset, TurnContext, assemble


def make(name: str) -> Tool:
    return Tool.from_function(lambda: name, name=name, description=f"{name} tool")


@source
def todo_creator(ctx: TurnContext) -> Iterable[Tool]:
    return [make("todo")]


@source
def web_creator(ctx: TurnContext) -> Iterable[Tool]:
    return [make("web_search"), make("web_fetch")] if ctx.web_provider else []


@source
def workflow_creator(ctx: TurnContext) -> Iterable[Tool]:
    if ctx.turn_kind != "text":
        return []
    return [make(n) for n in ("workflow", "show_workflow", "list_workflows", "cancel_workflow")]


@source
def jobs_creator(ctx: TurnContext) -> Iterable[Tool]:
    return [make("start_job")] if ctx.can_create_jobs else []


CREATORS = [todo_creator, web_creator, jobs_creator, workflow_creator]


def test_order_follows_creators_and_context(tmp_path: Path) -> None:
    ctx = TurnContext(session_id="s", home=tmp_path, web_provider="exa", can_create_jobs=True)
    toolset = assemble(ctx, CREATORS)
    assert toolset.names == (
        "todo",
        "web_search",
        "web_fetch",
        "start_job",
        "workflow",
        "show_workflow",
        "list_workflows",
        "cancel_workflow",
    )
    assert toolset.origin("web_fetch") is not None and "web_creator" in toolset.origin("web_fetch")

    bare = assemble(TurnContext(session_id="s", home=tmp_path), CREATORS)
    assert bare.names == ("todo", "workflow", "show_workflow", "list_workflows", "cancel_workflow")
    task = assemble(
        TurnContext(session_id="s", home=tmp_path, turn_kind="workflow_task", web_provider="exa"),
        CREATORS,
    )
    assert task.names == ("todo", "web_search", "web_fetch")


def test_duplicate_names_name_both_creators(tmp_path: Path) -> None:
    @source
    def other_todo(ctx: TurnContext) -> Iterable[Tool]:
        return [make("todo")]

    with pytest.raises(
        AssemblyError,
        match=r"'todo' is created twice: by .*todo_creator and by "
        r".*other_todo",
    ):
        assemble(TurnContext(session_id="s", home=tmp_path), [todo_creator, other_todo])


def test_failing_creator_is_named_and_nothing_half_assembles(tmp_path: Path) -> None:
    @source
    def broken(ctx: TurnContext) -> Iterable[Tool]:
        raise OSError("rpc down")

    @source
    def not_a_tool(ctx: TurnContext) -> Iterable[Tool]:
        return ["todo"]  # type: ignore[list-item]

    ctx = TurnContext(session_id="s", home=tmp_path)
    with pytest.raises(AssemblyError, match="broken failed: rpc down"):
        assemble(ctx, [todo_creator, broken])
    with pytest.raises(AssemblyError, match="not a Tool"):
        assemble(ctx, [not_a_tool])


def test_toolset_is_immutable_and_fresh_per_turn(tmp_path: Path) -> None:
    ctx = TurnContext(session_id="s", home=tmp_path)
    first, second = assemble(ctx, CREATORS), assemble(ctx, CREATORS)
    assert first is not second and first.names == second.names
    with pytest.raises(TypeError):
        first["x"] = make("x")  # type: ignore[index]
    assert "todo" in first and first["todo"].name == "todo" and len(first) == 5
    assert first.only(["workflow", "todo", "ghost"]).names == ("todo", "workflow")
    with pytest.raises(AssemblyError):
        Toolset([make("a"), make("a")])


def test_turn_context_checks_kind_and_coerces_home(tmp_path: Path) -> None:
    ctx = TurnContext(session_id="s", home=str(tmp_path))  # type: ignore[arg-type]
    assert isinstance(ctx.home, Path)
    with pytest.raises(ValueError):
        TurnContext(session_id="s", home=tmp_path, turn_kind="chat")  # type: ignore[arg-type]
