"""The memory tool: ``notes``, a small persistent key/value memory in SQLite.

Notes live in ``<home>/.tooldeck/notes.sqlite3`` (WAL mode), so they outlast the session
and the process. The table is created on first use. Every call opens its own connection:
handlers run in worker threads, and a connection is never shared between them.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from ..context import ToolContext
from ..registry import Handlers
from ..result import ToolResult
from ._common import ToolFailure, home_of, resolve_in_home

handlers = Handlers("memory")

NOTES_PATH = ".tooldeck/notes.sqlite3"  # relative to the agent's home
SNIPPET_CHARS = 160
MAX_KEY = 200  # characters
MAX_TEXT = 20_000  # characters
MAX_QUERY = 200  # characters
_CREATE = """
CREATE TABLE IF NOT EXISTS notes (
    key TEXT PRIMARY KEY,
    text TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
)
"""


def notes_path(home: Path) -> Path:
    return resolve_in_home(home, NOTES_PATH)


@contextlib.contextmanager
def _connect(path: Path) -> Iterator[sqlite3.Connection]:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=10.0)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(_CREATE)
        yield conn
    finally:
        conn.close()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _like(term: str) -> str:
    escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _snippet(text: str, term: str | None = None) -> str:
    flat = " ".join(text.split())
    start = 0
    if term:
        at = flat.lower().find(term.lower())
        if at > SNIPPET_CHARS // 2:
            start = at - SNIPPET_CHARS // 3
    piece = flat[start : start + SNIPPET_CHARS]
    return ("…" if start else "") + piece + ("…" if start + SNIPPET_CHARS < len(flat) else "")


def _need(value: str | None, what: str, action: str, limit: int) -> str:
    if value is None or not value.strip():
        raise ToolFailure(f"action {action!r} needs a non-empty {what}.")
    value = value.strip()
    if len(value) > limit:
        raise ToolFailure(f"The {what} is {len(value)} characters long; the limit is {limit}.")
    return value


@handlers("notes")
def notes(
    action: str,
    ctx: ToolContext,
    key: str | None = None,
    text: str | None = None,
    query: str | None = None,
    limit: int = 20,
) -> ToolResult:
    try:
        path = notes_path(home_of(ctx))
        with _connect(path) as conn:
            if action == "save":
                k = _need(key, "key", action, MAX_KEY)
                _need(text, "text", action, MAX_TEXT)
                assert text is not None
                now = _now()
                with conn:
                    existed = conn.execute("SELECT 1 FROM notes WHERE key = ?", (k,)).fetchone()
                    conn.execute(
                        "INSERT INTO notes (key, text, created_at, updated_at) "
                        "VALUES (?, ?, ?, ?) ON CONFLICT(key) DO UPDATE SET "
                        "text = excluded.text, updated_at = excluded.updated_at",
                        (k, text, now, now),
                    )
                verb = "Updated" if existed else "Saved new"
                return ToolResult(
                    content=f"{verb} note {k!r} ({len(text)} characters).",
                    details={"key": k, "created": not existed},
                )
            if action == "get":
                k = _need(key, "key", action, MAX_KEY)
                row = conn.execute(
                    "SELECT text, updated_at FROM notes WHERE key = ?", (k,)
                ).fetchone()
                if row is None:
                    raise ToolFailure(
                        f"No note with key {k!r}. Use action 'list' or 'search' to find keys."
                    )
                return ToolResult(
                    content=f"Note {k!r} (updated {row[1]}):\n{row[0]}", details={"key": k}
                )
            if action == "delete":
                k = _need(key, "key", action, MAX_KEY)
                with conn:
                    deleted = conn.execute("DELETE FROM notes WHERE key = ?", (k,)).rowcount
                if not deleted:
                    raise ToolFailure(f"No note with key {k!r}; nothing was deleted.")
                return ToolResult(content=f"Deleted note {k!r}.", details={"key": k})
            total = conn.execute("SELECT COUNT(*) FROM notes").fetchone()[0]
            if action == "search":
                term = _need(query, "query", action, MAX_QUERY)
                pattern = _like(term)
                rows = conn.execute(
                    "SELECT key, text, updated_at FROM notes "
                    "WHERE key LIKE ? ESCAPE '\\' OR text LIKE ? ESCAPE '\\' "
                    "ORDER BY updated_at DESC, key LIMIT ?",
                    (pattern, pattern, limit + 1),
                ).fetchall()
                head = f"Notes matching {term!r}"
                empty = f"No notes match {term!r} ({total} note(s) in all)."
            elif action == "list":
                term = None
                rows = conn.execute(
                    "SELECT key, text, updated_at FROM notes ORDER BY updated_at DESC, key LIMIT ?",
                    (limit + 1,),
                ).fetchall()
                head = f"Notes ({total} in all, most recently updated first)"
                empty = "There are no notes yet. Save one with action 'save'."
            else:  # pragma: no cover - the schema's enum refuses it first
                raise ToolFailure(f"Unknown action {action!r}.")
    except ToolFailure as failure:
        return failure.result()
    except (sqlite3.Error, OSError) as exc:
        return ToolResult.error(f"The notes database failed: {exc}")

    if not rows:
        return ToolResult(content=empty, details={"keys": []})
    more = len(rows) > limit
    rows = rows[:limit]
    lines = [f"{head}:"]
    lines += [f"- {r[0]} (updated {r[2]}): {_snippet(r[1], term)}" for r in rows]
    if more:
        lines.append(f"[More than {limit} shown; narrow the search or raise limit.]")
    lines.append("[Use action 'get' with a key to read a whole note.]")
    return ToolResult(content="\n".join(lines), details={"keys": [r[0] for r in rows]})
