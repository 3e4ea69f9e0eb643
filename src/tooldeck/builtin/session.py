"""Session tools: a per-session ``todo`` list and a ``status`` report.

The todo list lives in ``<home>/.tooldeck/sessions/<session_id>/todo.json`` and is
rewritten atomically on every change. ``status`` reports the turn's tools, the session,
the home directory and every entry of ``TurnContext.status_sources``.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio.to_thread

from ..context import ToolContext
from ..registry import Handlers
from ..result import ToolResult
from ._common import ToolFailure, atomic_write, home_of, resolve_in_home

handlers = Handlers("session")

STATUSES = ("pending", "in_progress", "done")
MAX_ITEMS = 200
MAX_TEXT = 1_000  # characters in one item
STATUS_SOURCE_CHARS = 2_000  # one source's report is cut past this
_MARKS = {"pending": "[ ]", "in_progress": "[~]", "done": "[x]"}
_SAFE_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,99}")
_lock = threading.Lock()  # todo handlers run in worker threads


def session_dir_name(session_id: str) -> str:
    """A directory name for ``session_id``: itself when safe, else a stable hash."""
    if _SAFE_ID.fullmatch(session_id):
        return session_id
    return "s-" + hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _session_id(ctx: ToolContext) -> str:
    sid = getattr(ctx.turn, "session_id", None) or ctx.session_id
    if not sid:
        raise ToolFailure("This call has no session id, so there is no session todo list.")
    return str(sid)


def todo_path(home: Path, session_id: str) -> Path:
    """Where the todo list of ``session_id`` is stored (inside ``home``, checked)."""
    rel = f".tooldeck/sessions/{session_dir_name(session_id)}/todo.json"
    return resolve_in_home(home, rel)


def _load(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {"next_id": 1, "items": []}
    except (OSError, ValueError) as exc:
        raise ToolFailure(f"The todo list file {path} cannot be read: {exc}") from exc
    items = document.get("items") if isinstance(document, dict) else None
    if not isinstance(items, list):
        raise ToolFailure(f"The todo list file {path} is damaged (no 'items' list).")
    next_id = document.get("next_id")
    if not isinstance(next_id, int):
        next_id = 1 + max((i.get("id", 0) for i in items if isinstance(i, dict)), default=0)
    return {"next_id": next_id, "items": items}


def _save(path: Path, document: dict[str, Any]) -> None:
    data = json.dumps(document, ensure_ascii=False, indent=1).encode("utf-8")
    try:
        atomic_write(path, data)
    except OSError as exc:
        raise ToolFailure(f"Cannot save the todo list: {exc.strerror or exc}") from exc


def _counts(items: list[dict[str, Any]]) -> str:
    done = sum(1 for i in items if i.get("status") == "done")
    doing = sum(1 for i in items if i.get("status") == "in_progress")
    pending = sum(1 for i in items if i.get("status") == "pending")
    return f"{done} done, {doing} in progress, {pending} pending"


def _render(message: str, items: list[dict[str, Any]]) -> str:
    lines = [message] if message else []
    if not items:
        lines.append("The todo list is empty.")
        return "\n".join(lines)
    lines.append(f"Todo list ({len(items)} item(s): {_counts(items)}):")
    for item in items:
        mark = _MARKS.get(str(item.get("status")), "[?]")
        lines.append(f"{mark} #{item.get('id')} {item.get('text', '')}")
    return "\n".join(lines)


def _find(items: list[dict[str, Any]], item_id: int | None, action: str) -> dict[str, Any]:
    if item_id is None:
        raise ToolFailure(f"action {action!r} needs the id of the item (see the list).")
    for item in items:
        if item.get("id") == item_id:
            return item
    ids = ", ".join(f"#{i.get('id')}" for i in items) or "none"
    raise ToolFailure(f"No todo item #{item_id}. Current items: {ids}.")


def _check_length(text: str) -> None:
    if len(text.strip()) > MAX_TEXT:
        raise ToolFailure(
            f"The item text is {len(text.strip())} characters long; the limit is {MAX_TEXT}. "
            "Keep items short."
        )


@handlers("todo")
def todo(
    action: str,
    ctx: ToolContext,
    text: str | None = None,
    id: int | None = None,
    status: str | None = None,
) -> ToolResult:
    try:
        path = todo_path(home_of(ctx), _session_id(ctx))
        with _lock:
            document = _load(path)
            items: list[dict[str, Any]] = document["items"]
            message = ""
            if action == "add":
                if not text or not text.strip():
                    raise ToolFailure("action 'add' needs a non-empty text.")
                _check_length(text)
                if len(items) >= MAX_ITEMS:
                    raise ToolFailure(
                        f"The todo list already has {MAX_ITEMS} items; remove done ones first."
                    )
                item = {"id": document["next_id"], "text": text.strip(), "status": "pending"}
                if status is not None:
                    item["status"] = status
                items.append(item)
                document["next_id"] += 1
                message = f"Added #{item['id']}."
            elif action == "update":
                item = _find(items, id, action)
                if status is None and text is None:
                    raise ToolFailure("action 'update' needs a new status, a new text, or both.")
                if status is not None:
                    item["status"] = status
                if text is not None:
                    if not text.strip():
                        raise ToolFailure("The new text is empty.")
                    _check_length(text)
                    item["text"] = text.strip()
                message = f"Updated #{item['id']}."
            elif action == "remove":
                item = _find(items, id, action)
                items.remove(item)
                message = f"Removed #{item['id']}."
            elif action != "list":
                raise ToolFailure(
                    f"Unknown action {action!r}; use add, update, remove or list."
                )  # pragma: no cover - the schema's enum refuses it first
            if action != "list":
                _save(path, document)
    except ToolFailure as failure:
        return failure.result()
    return ToolResult(content=_render(message, items), details={"items": items})


# -- status --------------------------------------------------------------------------


def _clip(text: str) -> str:
    if len(text) <= STATUS_SOURCE_CHARS:
        return text
    return text[:STATUS_SOURCE_CHARS] + f"… [{len(text) - STATUS_SOURCE_CHARS} characters cut]"


def _format_value(value: Any) -> str:
    if value is None:
        return "(nothing)"
    if isinstance(value, str):
        return value.strip() or "(empty)"
    if isinstance(value, Mapping | list | tuple | int | float | bool):
        try:
            return json.dumps(value, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            return repr(value)
    return str(value)


def _source_line(name: str, text: str) -> str:
    text = _clip(text)
    if "\n" in text:
        indented = "\n".join("  " + line for line in text.splitlines())
        return f"{name}:\n{indented}"
    return f"{name}: {text}"


def _todo_summary(home: Path, session_id: str) -> str | None:
    try:
        path = todo_path(home.resolve(), session_id)
        if not path.exists():
            return None
        items = _load(path)["items"]
    except ToolFailure as failure:
        return f"Todo list: error: {failure.message}"
    return f"Todo list: {len(items)} item(s): {_counts(items)}"


@handlers("status")
async def status(ctx: ToolContext) -> ToolResult:
    turn = ctx.turn
    session_id = getattr(turn, "session_id", None) or ctx.session_id or "(unknown)"
    home = getattr(turn, "home", None)
    lines = [f"Session: {session_id}", f"Home directory: {home or '(unknown)'}"]
    toolset = ctx.toolset
    names: list[str] = list(toolset) if toolset is not None else []
    if toolset is None:
        lines.append("Tools this turn: (unknown: the call has no toolset)")
    else:
        lines.append(f"Tools this turn ({len(names)}): {', '.join(names) or '(none)'}")
    if home is not None and session_id != "(unknown)":
        summary = await anyio.to_thread.run_sync(_todo_summary, Path(home), str(session_id))
        if summary:
            lines.append(summary)

    sources: Mapping[str, Any] = getattr(turn, "status_sources", None) or {}
    outcome: dict[str, str] = {}
    for name, source in sources.items():
        try:
            value = source()
            if inspect.isawaitable(value):
                value = await value
            text = _format_value(value)
        except Exception as exc:
            outcome[name] = "error"
            lines.append(_source_line(name, f"error: {type(exc).__name__}: {exc}"))
            continue
        outcome[name] = "ok"
        lines.append(_source_line(name, text))
    details = {"session_id": session_id, "tools": names, "sources": outcome}
    return ToolResult(content="\n".join(lines), details=details)
