"""The ``agent_sessions`` tables' operations (migration 7), sans-IO like every operation of
the workflow store (:mod:`tooldeck.workflows.store.protocol`), so one driver runs them on
SQLite or PostgreSQL. The guarantees are in the SQL:

- a lease is taken by a conditional update that names the holder it replaces (``WHERE
  COALESCE(lease_owner, '') = ?``), so two claims never both win;
- a save is ``UPDATE ... WHERE revision = ? AND lease_owner = ?``: a holder that lost
  the lease, or saves over a revision it did not load, writes nothing;
- a save run again after a commit whose answer was lost recognises its own write (the
  revision it made, still under its lease).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..workflows.store.protocol import Json, Op, Q, Rollback, as_datetime, from_json

__all__ = [
    "Busy",
    "Head",
    "op_claim",
    "op_delete",
    "op_list",
    "op_release",
    "op_save",
    "op_show",
]

_HEAD = (
    "id, revision, items, CAST(usage AS TEXT), CAST(pending AS TEXT), preview, lease_owner, "
    "lease_until, created_at, updated_at, CAST(grants AS TEXT)"
)


@dataclass(frozen=True, slots=True)
class Busy:
    """The lease is another live holder's: who, and until when."""

    holder: str
    until: datetime | None


@dataclass(frozen=True, slots=True)
class Head:
    """A stored session's row, without its items."""

    id: str
    revision: int
    items: int
    usage: dict[str, Any]
    pending: dict[str, Any] | None
    preview: str
    lease_owner: str | None
    lease_until: datetime | None
    created_at: datetime | None
    updated_at: datetime | None
    grants: list[Any] | None = None

    def leased(self, at: datetime, gone: Callable[[str], bool]) -> bool:
        """Whether a live holder has the lease at ``at``."""
        owner, until = self.lease_owner, self.lease_until
        return bool(owner) and until is not None and until > at and not gone(owner or "")


def _head(row: Sequence[Any]) -> Head:
    return Head(
        id=str(row[0]),
        revision=int(row[1]),
        items=int(row[2]),
        usage=from_json(row[3]) or {},
        pending=from_json(row[4]),
        preview=str(row[5]),
        lease_owner=row[6],
        lease_until=as_datetime(row[7]),
        created_at=as_datetime(row[8]),
        updated_at=as_datetime(row[9]),
        grants=from_json(row[10]),
    )


def op_head(session_id: str) -> Op[Head | None]:
    row = (yield Q(f"SELECT {_HEAD} FROM agent_sessions WHERE id = ?", (session_id,))).one()
    return _head(row) if row is not None else None


def op_items(session_id: str) -> Op[list[Any]]:
    rows = yield Q(
        "SELECT CAST(item AS TEXT) FROM agent_session_items WHERE session_id = ? ORDER BY position",
        (session_id,),
    )
    return [from_json(r[0]) for r in rows.rows]


def op_claim(
    session_id: str,
    holder: str,
    at: datetime,
    until: datetime,
    empty_usage: dict[str, Any],
    gone: Callable[[str], bool],
) -> Op[tuple[Head, list[Any]] | Busy]:
    """Take the lease (making the session when there is none); the row and its items, or
    who holds it."""
    head = yield from op_head(session_id)
    if head is None:
        made = yield Q(
            "INSERT INTO agent_sessions (id, revision, items, usage, pending, preview, "
            "lease_owner, lease_until, created_at, updated_at) "
            "VALUES (?, 0, 0, ?, NULL, '', ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
            (session_id, Json(empty_usage), holder, until, at, at),
        )
        if made.rowcount == 1:
            head = yield from op_head(session_id)
            assert head is not None
            return head, []
        head = yield from op_head(session_id)  # made by another claim just now
        assert head is not None
    if head.lease_owner != holder and head.leased(at, gone):
        raise Rollback(Busy(head.lease_owner or "", head.lease_until))
    taken = yield Q(
        "UPDATE agent_sessions SET lease_owner = ?, lease_until = ? "
        "WHERE id = ? AND COALESCE(lease_owner, '') = ?",
        (holder, until, session_id, head.lease_owner or ""),
    )
    if taken.rowcount != 1:  # another claim came first
        raise Rollback(Busy("another holder", None))
    items = yield from op_items(session_id)
    return head, items


def op_save(
    session_id: str,
    holder: str,
    revision: int,
    unchanged: int,
    items: Sequence[Any],
    fields: dict[str, Any],
    at: datetime,
    until: datetime,
) -> Op[int | None]:
    """Write a new revision over ``revision`` (``None``: the lease or the revision is not
    this holder's any more). ``items`` are the transcript's items from ``unchanged`` on."""
    total = unchanged + len(items)
    pending, grants = fields["pending"], fields["grants"]
    done = yield Q(
        "UPDATE agent_sessions SET revision = revision + 1, items = ?, usage = ?, "
        "pending = ?, grants = ?, preview = ?, lease_until = ?, updated_at = ? "
        "WHERE id = ? AND revision = ? AND lease_owner = ?",
        (
            total,
            Json(fields["usage"]),
            None if pending is None else Json(pending),
            None if grants is None else Json(grants),
            fields["preview"],
            until,
            at,
            session_id,
            revision,
            holder,
        ),
    )
    if done.rowcount != 1:
        head = yield from op_head(session_id)
        if head is not None and (head.lease_owner, head.revision, head.updated_at) == (
            holder,
            revision + 1,
            at,
        ):  # this very save, run again after a lost answer
            return revision + 1
        raise Rollback(None)
    yield Q(
        "DELETE FROM agent_session_items WHERE session_id = ? AND position >= ?",
        (session_id, unchanged),
    )
    for offset, item in enumerate(items):
        yield Q(
            "INSERT INTO agent_session_items (session_id, position, item) VALUES (?, ?, ?)",
            (session_id, unchanged + offset, Json(item)),
        )
    return revision + 1


def op_release(session_id: str, holder: str) -> Op[bool]:
    done = yield Q(
        "UPDATE agent_sessions SET lease_owner = NULL, lease_until = NULL "
        "WHERE id = ? AND lease_owner = ?",
        (session_id, holder),
    )
    return done.rowcount == 1


def op_list(limit: int) -> Op[list[Head]]:
    rows = yield Q(
        f"SELECT {_HEAD} FROM agent_sessions ORDER BY updated_at DESC, id LIMIT ?", (limit,)
    )
    return [_head(r) for r in rows.rows]


def op_show(session_id: str) -> Op[tuple[Head, list[Any]] | None]:
    head = yield from op_head(session_id)
    if head is None:
        return None
    items = yield from op_items(session_id)
    return head, items


def op_delete(session_id: str, at: datetime, gone: Callable[[str], bool]) -> Op[Busy | bool]:
    """Delete the session unless a live holder runs a turn of it (``True``: deleted)."""
    head = yield from op_head(session_id)
    if head is None:
        return False
    if head.leased(at, gone):
        return Busy(head.lease_owner or "", head.lease_until)
    yield Q("DELETE FROM agent_session_items WHERE session_id = ?", (session_id,))
    yield Q("DELETE FROM agent_sessions WHERE id = ?", (session_id,))
    return True
