"""Session tools: the per-session todo list and the status report."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from tooldeck import ArgumentError, ToolContext, ToolResult, validate_arguments
from tooldeck.assembly import Toolset, TurnContext
from tooldeck.builtin import load_builtin_registry
from tooldeck.builtin.session import session_dir_name


def make_turn(
    home: Path, session_id: str = "s1", sources: Mapping[str, Callable[[], Any]] | None = None
) -> TurnContext:
    return TurnContext(session_id=session_id, home=home, status_sources=dict(sources or {}))


def call(toolset: Toolset, turn: TurnContext, name: str, args: dict[str, Any]) -> ToolResult:
    tool = toolset[name]
    validated = validate_arguments(tool, json.dumps(args))
    ctx = ToolContext(
        call_id="call-1", tool_name=name, session_id=turn.session_id, turn=turn, toolset=toolset
    )
    return asyncio.run(tool.invoke(validated.params, ctx))


class Session:
    """One session's view: its turn context and toolset."""

    def __init__(self, home: Path, session_id: str, **sources: Callable[[], Any]):
        self.turn = make_turn(home, session_id, sources)
        self.toolset = load_builtin_registry().toolset(self.turn)

    def __call__(self, name: str, **args: Any) -> ToolResult:
        return call(self.toolset, self.turn, name, args)


# -- todo -----------------------------------------------------------------------------


def test_todo_add_update_remove_list(tmp_path: Path) -> None:
    s = Session(tmp_path, "s1")
    empty = s("todo", action="list")
    assert not empty.is_error and empty.text() == "The todo list is empty."

    s("todo", action="add", text="Read the code")
    s("todo", action="add", text="Write tests")
    added = s("todo", action="add", text="Ship it", status="in_progress")
    assert added.text() == (
        "Added #3.\n"
        "Todo list (3 item(s): 0 done, 1 in progress, 2 pending):\n"
        "[ ] #1 Read the code\n"
        "[ ] #2 Write tests\n"
        "[~] #3 Ship it"
    )
    done = s("todo", action="update", id=1, status="done")
    assert "Updated #1." in done.text() and "[x] #1 Read the code" in done.text()
    renamed = s("todo", action="update", id=2, text="Write more tests")
    assert "[ ] #2 Write more tests" in renamed.text()
    removed = s("todo", action="remove", id=3)
    assert removed.text().startswith("Removed #3.") and "#3" not in removed.text().split("\n", 1)[1]
    assert [i["id"] for i in removed.details["items"]] == [1, 2]
    # ids are never reused
    assert "[ ] #4 Again" in s("todo", action="add", text="Again").text()

    stored = tmp_path / ".tooldeck" / "sessions" / "s1" / "todo.json"
    document = json.loads(stored.read_text())
    assert document["next_id"] == 5
    assert [(i["id"], i["status"]) for i in document["items"]] == [
        (1, "done"),
        (2, "pending"),
        (4, "pending"),
    ]
    assert list(stored.parent.glob("*.tmp")) == []


def test_todo_errors_are_clear(tmp_path: Path) -> None:
    s = Session(tmp_path, "s1")
    s("todo", action="add", text="only")
    missing = s("todo", action="update", id=9, status="done")
    assert missing.is_error and missing.text() == "No todo item #9. Current items: #1."
    no_id = s("todo", action="remove")
    assert no_id.is_error and "needs the id" in no_id.text()
    nothing = s("todo", action="update", id=1)
    assert nothing.is_error and "needs a new status, a new text, or both" in nothing.text()
    no_text = s("todo", action="add")
    assert no_text.is_error and "needs a non-empty text" in no_text.text()
    long = s("todo", action="add", text="x" * 1001)
    assert long.is_error and "the limit is 1000" in long.text()
    with pytest.raises(ArgumentError):
        validate_arguments(s.toolset["todo"], '{"action": "update", "id": 1, "status": "later"}')
    with pytest.raises(ArgumentError):
        validate_arguments(s.toolset["todo"], '{"action": "explode"}')


def test_todo_lists_are_per_session_and_persist(tmp_path: Path) -> None:
    one, two = Session(tmp_path, "session-one"), Session(tmp_path, "session-two")
    one("todo", action="add", text="first session's item")
    two("todo", action="add", text="second session's item")
    assert "second" not in one("todo", action="list").text()
    assert "first" not in two("todo", action="list").text()
    again = Session(tmp_path, "session-one")  # a later turn, a freshly loaded registry
    assert "[ ] #1 first session's item" in again("todo", action="list").text()


def test_unsafe_session_ids_stay_inside_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    s = Session(home, "../../escape")
    assert not s("todo", action="add", text="x").is_error
    name = session_dir_name("../../escape")
    assert name.startswith("s-") and "/" not in name
    assert (home / ".tooldeck" / "sessions" / name / "todo.json").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"]


# -- status ---------------------------------------------------------------------------


def test_status_reports_tools_session_home_and_every_source(tmp_path: Path) -> None:
    def broken() -> Any:
        raise RuntimeError("store unavailable")

    async def approvals() -> list[str]:
        return ["run_bash call-7"]

    s = Session(
        tmp_path,
        "s9",
        offload=lambda: "3 outputs stored (ref-1, ref-2, ref-3)",
        broken=broken,
        approvals=approvals,
        counts=lambda: {"calls": 4},
        nothing=lambda: None,
        multi=lambda: "line one\nline two",
    )
    s("todo", action="add", text="a")
    result = s("status")
    assert not result.is_error
    lines = result.text().splitlines()
    assert lines[0] == "Session: s9"
    assert lines[1] == f"Home directory: {tmp_path}"
    assert lines[2] == (
        "Tools this turn (9): read_document, grep_files, list_files, write_file, edit_file, "
        "run_bash, todo, status, notes"
    )
    assert lines[3] == "Todo list: 1 item(s): 0 done, 0 in progress, 1 pending"
    assert lines[4:] == [
        "offload: 3 outputs stored (ref-1, ref-2, ref-3)",
        "broken: error: RuntimeError: store unavailable",
        'approvals: ["run_bash call-7"]',
        'counts: {"calls": 4}',
        "nothing: (nothing)",
        "multi:",
        "  line one",
        "  line two",
    ]
    assert result.details["sources"] == {
        "offload": "ok",
        "broken": "error",
        "approvals": "ok",
        "counts": "ok",
        "nothing": "ok",
        "multi": "ok",
    }


def test_status_without_toolset_or_sources(tmp_path: Path) -> None:
    turn = make_turn(tmp_path)
    tool = load_builtin_registry().tools["status"]
    ctx = ToolContext(call_id="c", tool_name="status", session_id="s1", turn=turn)
    result = asyncio.run(tool.invoke(validate_arguments(tool, "{}").params, ctx))
    assert result.text().splitlines() == [
        "Session: s1",
        f"Home directory: {tmp_path}",
        "Tools this turn: (unknown: the call has no toolset)",
    ]


def test_status_cuts_a_very_long_source(tmp_path: Path) -> None:
    s = Session(tmp_path, "s1", big=lambda: "z" * 10_000)
    line = s("status").text().splitlines()[-1]
    assert line.startswith("big: zzz") and line.endswith("[8000 characters cut]")
