"""notes: the SQLite-backed persistent memory."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

from tooldeck import ToolContext, ToolResult, validate_arguments
from tooldeck.assembly import TurnContext
from tooldeck.builtin import load_builtin_registry


def notes(home: Path, session_id: str = "s1", **args: Any) -> ToolResult:
    """Call notes through a freshly loaded registry, as a new turn would."""
    turn = TurnContext(session_id=session_id, home=home)
    toolset = load_builtin_registry().toolset(turn)
    tool = toolset["notes"]
    validated = validate_arguments(tool, json.dumps(args))
    ctx = ToolContext(
        call_id="call-1", tool_name="notes", session_id=session_id, turn=turn, toolset=toolset
    )
    return asyncio.run(tool.invoke(validated.params, ctx))


def test_notes_save_get_list_delete(tmp_path: Path) -> None:
    empty = notes(tmp_path, action="list")
    assert not empty.is_error and "no notes yet" in empty.text()
    saved = notes(tmp_path, action="save", key="user-prefs", text="Likes short answers.\nUses vim.")
    assert saved.text() == "Saved new note 'user-prefs' (30 characters)."
    updated = notes(tmp_path, action="save", key="user-prefs", text="Likes short answers.")
    assert updated.text().startswith("Updated note 'user-prefs'")
    notes(tmp_path, action="save", key="build", text="Run make, then make test.")

    got = notes(tmp_path, action="get", key="user-prefs")
    assert got.text().startswith("Note 'user-prefs' (updated ")
    assert got.text().endswith("):\nLikes short answers.")
    listing = notes(tmp_path, action="list")
    assert listing.text().startswith("Notes (2 in all, most recently updated first):")
    assert set(listing.details["keys"]) == {"user-prefs", "build"}

    assert notes(tmp_path, action="delete", key="build").text() == "Deleted note 'build'."
    gone = notes(tmp_path, action="get", key="build")
    assert gone.is_error and "No note with key 'build'" in gone.text()
    again = notes(tmp_path, action="delete", key="build")
    assert again.is_error and "nothing was deleted" in again.text()


def test_notes_search_is_a_substring_match_over_keys_and_texts(tmp_path: Path) -> None:
    notes(tmp_path, action="save", key="deploy", text="Use the staging cluster first.")
    notes(tmp_path, action="save", key="staging_url", text="https://staging.example")
    notes(tmp_path, action="save", key="discount", text="Give 100% off to nobody.")
    found = notes(tmp_path, action="search", query="STAGING")
    assert set(found.details["keys"]) == {"deploy", "staging_url"}
    assert "- deploy (updated " in found.text()
    percent = notes(tmp_path, action="search", query="100%")
    assert percent.details["keys"] == ["discount"]  # % is literal, not a wildcard
    assert notes(tmp_path, action="search", query="%").details["keys"] == ["discount"]
    assert notes(tmp_path, action="search", query="_").details["keys"] == ["staging_url"]
    none = notes(tmp_path, action="search", query="kubernetes")
    assert not none.is_error and none.text() == "No notes match 'kubernetes' (3 note(s) in all)."
    limited = notes(tmp_path, action="list", limit=1)
    assert len(limited.details["keys"]) == 1 and "[More than 1 shown" in limited.text()


def test_notes_persist_across_registry_reloads_and_sessions(tmp_path: Path) -> None:
    notes(tmp_path, "morning", action="save", key="fact", text="The sky is blue.")
    later = notes(tmp_path, "evening", action="get", key="fact")  # new registry, new session
    assert later.text().endswith("The sky is blue.")
    database = tmp_path / ".tooldeck" / "notes.sqlite3"
    with sqlite3.connect(database) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("SELECT key, text FROM notes").fetchall() == [
            ("fact", "The sky is blue.")
        ]


def test_notes_argument_errors(tmp_path: Path) -> None:
    assert "needs a non-empty key" in notes(tmp_path, action="save", text="x").text()
    assert "needs a non-empty text" in notes(tmp_path, action="save", key="k").text()
    assert "needs a non-empty query" in notes(tmp_path, action="search").text()
    big = notes(tmp_path, action="save", key="k", text="x" * 20_001)
    assert big.is_error and "the limit is 20000" in big.text()


def test_notes_only_exist_with_memory_enabled(tmp_path: Path) -> None:
    registry = load_builtin_registry()
    off = registry.toolset(TurnContext(session_id="s", home=tmp_path, memory_enabled=False))
    assert "notes" not in off
    assert "notes" in registry.toolset(TurnContext(session_id="s", home=tmp_path))


def test_notes_report_an_unusable_database_location(tmp_path: Path) -> None:
    (tmp_path / ".tooldeck").write_text("not a directory")
    result = notes(tmp_path, action="list")
    assert result.is_error and result.text().startswith("The notes database failed:")
