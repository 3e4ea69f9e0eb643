"""The store's sans-IO protocol: states, errors, statements and their rows.

An operation of the workflow store (:mod:`.ops`) is a generator that yields SQL statements
(:class:`Q`) and receives their rows (:class:`Rows`): it holds the logic, the SQL and the
guarantees, and never touches a connection. A driver runs one generator inside one
database transaction: the SQLite store in a worker thread (``BEGIN IMMEDIATE``), the
PostgreSQL store on an async psycopg connection. Raising :class:`Rollback` from an
operation rolls the transaction back and returns the exception's value.

A store is handed an :data:`OpFactory` (``lambda: op_x(...)``), never the generator
itself: a driver may make the operation again after a dropped connection, so every
operation, of every table (runs, jobs, schedules, leases), rides out a blip the same way.
:func:`make_op` refuses any other shape with a ``TypeError``. Each operation is written to
be run again after a commit whose answer was lost: it recognises its own earlier write
(a conditional update that already holds, a key it inserted, or the call's time, fixed
when the call was made, in the row it wrote).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, TypeAlias, TypeVar

from ...errors import TooldeckError

__all__ = [
    "Json",
    "Op",
    "OpFactory",
    "Q",
    "Rollback",
    "Rows",
    "as_datetime",
    "check_factory",
    "dumps",
    "from_json",
    "make_op",
    "now",
    "op_find_ids",
    "safe_dumps",
    "written_before",
]

TaskState: TypeAlias = Literal["pending", "running", "submitted", "failed", "cancelled"]
WorkflowState: TypeAlias = Literal["pending", "running", "succeeded", "failed", "cancelled"]
TASK_STATES: tuple[TaskState, ...] = ("pending", "running", "submitted", "failed", "cancelled")
WORKFLOW_STATES: tuple[WorkflowState, ...] = (
    "pending",
    "running",
    "succeeded",
    "failed",
    "cancelled",
)
TERMINAL_TASK_STATES = frozenset({"submitted", "failed", "cancelled"})
TERMINAL_WORKFLOW_STATES = frozenset({"succeeded", "failed", "cancelled"})

T = TypeVar("T")


class StoreError(TooldeckError):
    """The store cannot do what was asked (unknown id, bad configuration, no server)."""


class StoreUnavailable(StoreError):
    """The database could not be reached, or kept dropping the connection, for too long.

    Raised by a store that retries an operation across a connection blip once its retry
    window is spent. A workflow turn lets it through (a failed step, retried by its
    executor) instead of showing it to the model as a tool error.
    """


# -- the sans-IO protocol ----------------------------------------------------------------------


class Json:
    """A JSON parameter: text in SQLite, ``jsonb`` in PostgreSQL."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value

    def dumps(self) -> str:
        return dumps(self.value)


def dumps(value: Any) -> str:
    """Compact, strict JSON (no NaN or infinity: they are not JSON)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def safe_dumps(value: Any) -> str:
    """JSON for anything, for records of what a model sent (never raises)."""
    try:
        return dumps(value)
    except (TypeError, ValueError):
        return json.dumps(repr(value))


@dataclass(frozen=True, slots=True)
class Q:
    """One statement. ``?`` marks a parameter (the PostgreSQL driver rewrites it)."""

    sql: str
    params: tuple[Any, ...] = ()


@dataclass(frozen=True, slots=True)
class Rows:
    rows: list[tuple[Any, ...]]
    rowcount: int

    def one(self) -> tuple[Any, ...] | None:
        return self.rows[0] if self.rows else None


class Rollback(Exception):
    """Raised by an operation to roll its transaction back and return ``value``.

    Not an error, so not a :class:`~tooldeck.errors.TooldeckError` (deliberately: an
    operation's own ``except TooldeckError`` must not swallow it); it never leaves the
    store that runs the operation.
    """

    def __init__(self, value: Any):
        super().__init__("rollback")
        self.value = value


Op: TypeAlias = Generator[Q, Rows, T]
OpFactory: TypeAlias = Callable[[], Op[T]]
"""A function that makes an operation afresh (``lambda: op_x(...)``): what a store runs,
and runs again after a dropped connection."""

_SHAPE = (
    "a store operation is passed as a function that makes it (lambda: op_x(...)), so the "
    "store can run it again after a dropped connection; got {what}"
)


def check_factory(factory: OpFactory[T]) -> None:
    """``TypeError`` unless ``factory`` is a function (a generator, already made, is not):
    checked before a store touches the database."""
    if not callable(factory) or isinstance(factory, Generator):
        raise TypeError(_SHAPE.format(what=type(factory).__name__))


def make_op(factory: OpFactory[T]) -> Op[T]:
    """A fresh operation from ``factory`` (``TypeError`` for any other shape)."""
    check_factory(factory)
    op = factory()
    if not isinstance(op, Generator):
        raise TypeError(_SHAPE.format(what=f"a function that returned {type(op).__name__}"))
    return op


def now() -> datetime:
    return datetime.now(UTC)


def written_before(table: str, row_id: str, at: datetime, what: str) -> Op[bool]:
    """Whether the row ``row_id`` of ``table`` was written at ``at`` (its ``created_at``):
    by an earlier try of the same call, whose commit's answer was lost. ``False`` when
    there is no such row; :class:`StoreError` when another call wrote it."""
    row = (yield Q(f"SELECT created_at FROM {table} WHERE id = ?", (row_id,))).one()
    if row is None:
        return False
    if as_datetime(row[0]) == at:
        return True
    raise StoreError(f"{what} {row_id!r} exists already")


def op_find_ids(table: str, prefix: str, session_id: str | None = None) -> Op[list[str]]:
    """The newest ten ids of ``table`` that start with ``prefix`` (LIKE's wildcards in it
    taken literally); with ``session_id``, only that session's rows (a session sees its
    own)."""
    pattern = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    mine = "" if session_id is None else " AND session_id = ?"
    rows = yield Q(
        f"SELECT id FROM {table} WHERE id LIKE ? ESCAPE '\\'{mine} "
        "ORDER BY created_at DESC LIMIT 10",
        (pattern,) if session_id is None else (pattern, session_id),
    )
    return [str(r[0]) for r in rows.rows]


def as_datetime(value: Any) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value))


def from_json(value: Any) -> Any:
    return None if value is None else json.loads(value)
