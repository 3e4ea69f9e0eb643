"""A task turn's two writes as single statements, for PostgreSQL (one round trip each).

Claiming a task and accepting its result are the writes every task turn makes. The
operations in :mod:`.base` run them as transactions of several statements (``BEGIN``,
the conditional update, the transition row, ``COMMIT``: four or five round trips), which
both databases can run. PostgreSQL also runs data-modifying CTEs, so here each is one
statement that is its own transaction: the conditional update, then the rows that depend
on it, selected from the update's ``RETURNING``; nothing is written when the update
matches nothing. The guarantees are those of :mod:`.base`, decided by the same
conditional updates (``WHERE state = ...``, which a concurrent writer's commit makes
false) and the primary key of ``results``; a run again after a commit whose answer was
lost recognises its own earlier write, as there. A follow-up read, when the update
matched nothing, says why.

The SQLite store runs the operations of :mod:`.base`; the store tests run both.
"""

from __future__ import annotations

from typing import Any

from .ops import TASK_COLUMNS, _claimed_by, _not_stored, _task
from .protocol import Json, Op, Q, now
from .records import Acceptance, TaskRecord

__all__ = ["op_accept_result_atomic", "op_claim_task_atomic"]

_LOG_TRANSITION = (
    "logged AS (INSERT INTO transitions (workflow_id, task_id, from_state, to_state, reason, at) "
    "SELECT workflow_id, id, ?, ?, ?, ? FROM {source})"
)


def op_claim_task_atomic(task_id: str, session_id: str) -> Op[TaskRecord | None]:
    """:func:`.ops.op_claim_task` in one statement (and a read when it claimed nothing)."""
    at = now()
    claimed = yield Q(
        "WITH claimed AS (UPDATE tasks SET state = 'running', session_id = ?, started_at = ?, "
        "updated_at = ? WHERE id = ? AND state = 'pending' RETURNING *), "
        + _LOG_TRANSITION.format(source="claimed")
        + f" SELECT {TASK_COLUMNS} FROM claimed t LEFT JOIN results r ON r.task_id = t.id",
        (session_id, at, at, task_id, "pending", "running", f"claimed by {session_id}", at),
    )
    row = claimed.one()
    if row is not None:
        return _task(row)
    # Run again after a commit whose answer was lost: the claim is already this one's.
    return (yield from _claimed_by(task_id, session_id))


def op_accept_result_atomic(task_id: str, value: Any, submission_key: str) -> Op[Acceptance]:
    """:func:`.ops.op_accept_result` in one statement (and a read when it stored nothing).

    The task moves ``running -> submitted`` only while it has no result row, and the
    result row and the transition are written from that update's row, in the same
    statement: either all three are written or none.
    """
    at = now()
    payload = Json(value)
    payload.dumps()  # not JSON (NaN, a set...): refuse before touching the database
    moved = yield Q(
        "WITH moved AS (UPDATE tasks SET state = 'submitted', attempts = attempts + 1, "
        "updated_at = ?, finished_at = ? WHERE id = ? AND state = 'running' "
        "AND NOT EXISTS (SELECT 1 FROM results WHERE task_id = ?) "
        "RETURNING workflow_id, id, attempts), "
        "stored AS (INSERT INTO results (task_id, value, submission_key, stored_at) "
        "SELECT id, ?, ?, ? FROM moved), "
        + _LOG_TRANSITION.format(source="moved")
        + " SELECT attempts FROM moved",
        (
            at,
            at,
            task_id,
            task_id,
            payload,
            submission_key,
            at,
            "running",
            "submitted",
            f"result {submission_key}",
            at,
        ),
    )
    row = moved.one()
    if row is not None:
        return Acceptance("stored", "submitted", row[0], value)
    return (yield from _not_stored(task_id, submission_key))
