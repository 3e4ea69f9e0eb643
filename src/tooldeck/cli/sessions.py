"""``tooldeck sessions``: list, show and delete stored sessions (``Session(store=...)``).

They live in the workflow store's database (``--db`` / ``--dsn`` / ``--pg-schema``, or
``$TOOLDECK_WORKFLOWS_DB`` / ``$TOOLDECK_WORKFLOWS_DSN``, else
``~/.tooldeck/workflows.sqlite3``). ``list`` and ``show`` only read: with no database yet
they say so and create nothing.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from .jobs import open_existing
from .workflows import DbOption, DsnOption, SchemaOption, _fail

if TYPE_CHECKING:
    from ..sessions import SessionInfo
    from ..transcript import Item

__all__ = ["sessions_app"]

sessions_app = typer.Typer(
    help="List, show and delete stored sessions (Session(store=...)).", no_args_is_help=True
)

IdArgument = Annotated[str, typer.Argument(help="The session's id.")]


def _state(info: SessionInfo) -> str:
    if info.running:
        return f"running ({info.running})"
    return "waiting for approval" if info.waiting else "idle"


def _when(info: SessionInfo) -> str:
    return f"{info.updated_at:%Y-%m-%d %H:%M:%S}" if info.updated_at else ""


def _item(item: Item) -> str:
    from ..transcript import AssistantMessage, ToolOutput, UserMessage

    if isinstance(item, UserMessage):
        return f"user: {item.text}"
    if isinstance(item, AssistantMessage):
        calls = [
            f"{c.name}({c.arguments if isinstance(c.arguments, str) else json.dumps(c.arguments)})"
            for c in item.tool_calls
        ]
        return "assistant: " + " ".join([item.text, *calls]).strip()
    assert isinstance(item, ToolOutput)
    return f"{'error' if item.is_error else 'output'} {item.name}: {item.text}"


def _run(console: Console, db: Any, dsn: str | None, schema: str | None, work: Any) -> Any:
    """``work(store)`` on the configured store (``None``: there is no database yet)."""
    from ..sessions import SessionBusy, SessionStore
    from ..workflows.store import StoreError

    found = open_existing(console, db, dsn, schema)
    if found is None:
        return None
    store = SessionStore(found)

    async def main() -> Any:
        async with store:
            return await work(store)

    try:
        return asyncio.run(main())
    except (StoreError, SessionBusy, ValueError) as exc:
        raise _fail(console, str(exc)) from exc


@sessions_app.command("list")
def list_command(
    db: DbOption = None,
    dsn: DsnOption = None,
    pg_schema: SchemaOption = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=1000, help="At most this many.")] = 50,
) -> None:
    """List stored sessions, the most recently saved first."""
    console = Console()
    infos = _run(console, db, dsn, pg_schema, lambda s: s.sessions(limit=limit))
    if not infos:
        console.print(
            "No stored sessions."
            if infos is not None
            else "No stored sessions: there is no database yet."
        )
        return
    table = Table(title="sessions")
    for column in ("id", "items", "state", "saved (UTC)", "last prompt"):
        table.add_column(column)
    for info in infos:
        table.add_row(info.session_id, str(info.items), _state(info), _when(info), info.preview)
    console.print(table)


@sessions_app.command("show")
def show_command(
    session_id: IdArgument,
    db: DbOption = None,
    dsn: DsnOption = None,
    pg_schema: SchemaOption = None,
) -> None:
    """Show one stored session: its state, usage and transcript."""
    console = Console()
    found = _run(console, db, dsn, pg_schema, lambda s: s.show(session_id))
    if found is None:
        raise _fail(console, f"no stored session {session_id!r}; `tooldeck sessions list`", 1)
    info, items = found
    usage = info.usage
    console.print(
        f"session {info.session_id}: {_state(info)}, {info.items} items, saved "
        f"{_when(info)} UTC, {usage.requests} requests, {usage.input_tokens} input "
        f"and {usage.output_tokens} output tokens",
        markup=False,
        highlight=False,
    )
    for item in items:
        console.print(_item(item), markup=False, highlight=False)


@sessions_app.command("delete")
def delete_command(
    session_id: IdArgument,
    db: DbOption = None,
    dsn: DsnOption = None,
    pg_schema: SchemaOption = None,
) -> None:
    """Delete a stored session (refused while a turn of it runs)."""
    console = Console()
    done = _run(console, db, dsn, pg_schema, lambda s: s.delete(session_id))
    if not done:
        raise _fail(console, f"no stored session {session_id!r}; `tooldeck sessions list`", 1)
    console.print(f"deleted session {session_id}")
