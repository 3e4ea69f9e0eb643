"""Every operation of the workflow store, written once for both databases.

Each is a generator of statements (:mod:`.protocol`), run by a driver in one transaction.
The guarantees live in the database, not in Python:

- a result is stored at most once per task: ``results.task_id`` is the primary key
  (``INSERT ... ON CONFLICT DO NOTHING``), and the task only moves ``running ->
  submitted`` through a conditional ``UPDATE ... WHERE state = 'running'``; a duplicate
  delivery or a racing worker gets ``duplicate`` or ``conflict`` back, never a second row;
- a rejection is counted once per submission key (a unique index), and the attempt
  counter moves by an atomic ``attempts = attempts + 1`` on a running task only;
- every state change is a conditional update that records a transition row in the same
  transaction.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from .protocol import (
    TERMINAL_TASK_STATES,
    TERMINAL_WORKFLOW_STATES,
    Json,
    Op,
    Q,
    Rollback,
    StoreError,
    TaskState,
    WorkflowState,
    as_datetime,
    from_json,
    now,
    safe_dumps,
    written_before,
)
from .records import (
    Acceptance,
    CancelOutcome,
    Dependents,
    NewTask,
    RejectionOutcome,
    RejectionRecord,
    RunProgress,
    TaskContext,
    TaskProgress,
    TaskRecord,
    Transition,
    WorkflowRecord,
)

__all__ = [
    "TASK_COLUMNS",
    "TASK_FROM",
    "WORKFLOW_COLUMNS",
    "op_accept_result",
    "op_cancel_workflow",
    "op_claim_task",
    "op_count_results",
    "op_create_workflow",
    "op_dependents",
    "op_find_workflows",
    "op_get_task",
    "op_get_workflow",
    "op_list_workflows",
    "op_progress",
    "op_record_rejection",
    "op_rejections",
    "op_resume_task",
    "op_set_task_state",
    "op_set_workflow_state",
    "op_task_context",
    "op_task_owner",
    "op_task_state",
    "op_transitions",
    "op_workflow_state",
]

# -- the operations -----------------------------------------------------------------------------

TASK_COLUMNS = (
    "t.id, t.workflow_id, t.name, t.position, t.description, t.instructions, "
    "CAST(t.input_names AS TEXT), CAST(t.depends_on AS TEXT), CAST(t.result_schema AS TEXT), "
    "t.state, t.attempts, t.max_attempts, t.max_steps, t.session_id, t.error, t.created_at, "
    "t.updated_at, t.started_at, t.finished_at, r.task_id, CAST(r.value AS TEXT), "
    "r.submission_key, r.stored_at"
)
TASK_FROM = "tasks t LEFT JOIN results r ON r.task_id = t.id"
WORKFLOW_COLUMNS = (
    "w.id, w.name, CAST(w.inputs AS TEXT), w.state, w.error, w.created_at, w.updated_at, "
    "w.finished_at"
)


def _task(row: Sequence[Any]) -> TaskRecord:
    names = from_json(row[6])
    return TaskRecord(
        id=row[0],
        workflow_id=row[1],
        name=row[2],
        position=row[3],
        description=row[4] or "",
        instructions=row[5],
        input_names=tuple(names) if names is not None else None,
        depends_on=tuple(from_json(row[7]) or ()),
        result_schema=from_json(row[8]),
        state=row[9],
        attempts=row[10],
        max_attempts=row[11],
        max_steps=row[12],
        session_id=row[13],
        error=row[14],
        created_at=as_datetime(row[15]) or now(),
        updated_at=as_datetime(row[16]) or now(),
        started_at=as_datetime(row[17]),
        finished_at=as_datetime(row[18]),
        has_result=row[19] is not None,
        result=from_json(row[20]),
        submission_key=row[21],
        stored_at=as_datetime(row[22]),
    )


def _workflow(
    row: Sequence[Any],
    tasks: Sequence[TaskRecord] = (),
    counts: tuple[int, int] | None = None,
) -> WorkflowRecord:
    total, submitted = counts if counts is not None else (len(tasks), 0)
    if tasks:
        submitted = sum(t.state == "submitted" for t in tasks)
    return WorkflowRecord(
        id=row[0],
        name=row[1],
        inputs=from_json(row[2]),
        state=row[3],
        error=row[4],
        created_at=as_datetime(row[5]) or now(),
        updated_at=as_datetime(row[6]) or now(),
        finished_at=as_datetime(row[7]),
        tasks=tuple(tasks),
        task_count=total,
        submitted_count=submitted,
    )


def _transition(
    workflow_id: str,
    task_id: str | None,
    from_state: str | None,
    to_state: str,
    reason: str | None,
    at: datetime,
) -> Q:
    return Q(
        "INSERT INTO transitions (workflow_id, task_id, from_state, to_state, reason, at) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (workflow_id, task_id, from_state, to_state, reason, at),
    )


def op_create_workflow(
    workflow_id: str,
    name: str,
    inputs: Any,
    tasks: Sequence[NewTask],
    at: datetime | None = None,
) -> Op[None]:
    """Write the run and its tasks, created at ``at`` (a run already written at ``at``: this
    call's own earlier try; written by another call: :class:`StoreError`)."""
    at = at or now()
    if (yield from written_before("workflows", workflow_id, at, "workflow")):
        return
    yield Q(
        "INSERT INTO workflows (id, name, inputs, state, created_at, updated_at) "
        "VALUES (?, ?, ?, 'pending', ?, ?)",
        (workflow_id, name, Json(inputs), at, at),
    )
    yield _transition(workflow_id, None, None, "pending", "created", at)
    # Many rows per statement (not a round trip per task and per transition), in chunks
    # that stay under SQLite's oldest limit of 999 parameters.
    for first in range(0, len(tasks), _ROWS_PER_INSERT):
        chunk = tasks[first : first + _ROWS_PER_INSERT]
        ids = [f"{workflow_id}:{task.name}" for task in chunk]
        yield Q(
            "INSERT INTO tasks (id, workflow_id, name, position, description, instructions, "
            "input_names, depends_on, result_schema, state, attempts, max_attempts, "
            "max_steps, created_at, updated_at) VALUES "
            + ", ".join("(?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', 0, ?, ?, ?, ?)" for _ in chunk),
            tuple(
                value
                for task_id, task in zip(ids, chunk, strict=True)
                for value in (
                    task_id,
                    workflow_id,
                    task.name,
                    task.position,
                    task.description,
                    task.instructions,
                    Json(list(task.input_names)) if task.input_names is not None else None,
                    Json(list(task.depends_on)),
                    Json(task.result_schema),
                    task.max_attempts,
                    task.max_steps,
                    at,
                    at,
                )
            ),
        )
        yield Q(
            "INSERT INTO transitions (workflow_id, task_id, from_state, to_state, reason, at) "
            "VALUES " + ", ".join("(?, ?, NULL, 'pending', 'created', ?)" for _ in chunk),
            tuple(value for task_id in ids for value in (workflow_id, task_id, at)),
        )


_ROWS_PER_INSERT = 50


def op_set_workflow_state(
    workflow_id: str, to: WorkflowState, expect: Sequence[str], error: str | None
) -> Op[bool]:
    at = now()
    marks = ", ".join("?" for _ in expect)
    finished = at if to in TERMINAL_WORKFLOW_STATES else None
    row = (
        yield Q(
            f"SELECT state FROM workflows WHERE id = ? AND state IN ({marks})",
            (workflow_id, *expect),
        )
    ).one()
    if row is None:
        return False
    changed = yield Q(
        "UPDATE workflows SET state = ?, error = COALESCE(?, error), updated_at = ?, "
        f"finished_at = COALESCE(?, finished_at) WHERE id = ? AND state IN ({marks}) "
        "RETURNING id",
        (to, error, at, finished, workflow_id, *expect),
    )
    if not changed.rows:
        return False
    yield _transition(workflow_id, None, row[0], to, error, at)
    return True


def op_claim_task(task_id: str, session_id: str) -> Op[TaskRecord | None]:
    """``pending -> running`` for ``session_id``; the claimed task, ``None`` if not pending."""
    at = now()
    claimed = yield Q(
        "UPDATE tasks SET state = 'running', session_id = ?, started_at = ?, updated_at = ? "
        "WHERE id = ? AND state = 'pending' RETURNING workflow_id",
        (session_id, at, at, task_id),
    )
    row = claimed.one()
    if row is None:
        # Run again after a commit whose answer was lost: the claim is already this one's.
        return (yield from _claimed_by(task_id, session_id))
    yield _transition(row[0], task_id, "pending", "running", f"claimed by {session_id}", at)
    return (yield from op_get_task(task_id))


def _claimed_by(task_id: str, session_id: str) -> Op[TaskRecord | None]:
    mine = (
        yield Q(
            f"SELECT {TASK_COLUMNS} FROM {TASK_FROM} "
            "WHERE t.id = ? AND t.state = 'running' AND t.session_id = ?",
            (task_id, session_id),
        )
    ).one()
    return _task(mine) if mine is not None else None


def op_resume_task(task_id: str, session_id: str, reason: str) -> Op[str | None]:
    """Hand a ``running`` task to a new session (its old worker was lost).

    Returns the session that held it, or ``None`` when the task was not running. The
    transition (``running -> running``) keeps the takeover in the task's history.
    """
    at = now()
    row = (
        yield Q(
            "SELECT workflow_id, session_id FROM tasks WHERE id = ? AND state = 'running'",
            (task_id,),
        )
    ).one()
    if row is None:
        return None
    if row[1] == session_id:  # run again after a commit whose answer was lost
        return session_id
    moved = yield Q(
        "UPDATE tasks SET session_id = ?, started_at = ?, updated_at = ? "
        "WHERE id = ? AND state = 'running' AND COALESCE(session_id, '') = COALESCE(?, '') "
        "RETURNING id",
        (session_id, at, at, task_id, row[1]),
    )
    if not moved.rows:
        return None
    previous = row[1] or "(none)"
    yield _transition(
        row[0],
        task_id,
        "running",
        "running",
        f"{reason}; resumed by {session_id} (was {previous})",
        at,
    )
    return str(previous)


def op_set_task_state(
    task_id: str,
    to: TaskState,
    expect: Sequence[str],
    reason: str | None,
    owner: str | None = None,
) -> Op[bool]:
    at = now()
    marks = ", ".join("?" for _ in expect)
    mine = " AND session_id = ?" if owner is not None else ""
    extra = (owner,) if owner is not None else ()
    current = (
        yield Q(
            f"SELECT workflow_id, state FROM tasks WHERE id = ? AND state IN ({marks}){mine}",
            (task_id, *expect, *extra),
        )
    ).one()
    if current is None:
        return False
    finished = at if to in TERMINAL_TASK_STATES else None
    error = reason if to in ("failed", "cancelled") else None
    changed = yield Q(
        "UPDATE tasks SET state = ?, error = COALESCE(?, error), updated_at = ?, "
        f"finished_at = COALESCE(?, finished_at) WHERE id = ? AND state IN ({marks}){mine} "
        "RETURNING id",
        (to, error, at, finished, task_id, *expect, *extra),
    )
    if not changed.rows:
        return False
    yield _transition(current[0], task_id, current[1], to, reason, at)
    return True


def _task_state(task_id: str) -> Op[tuple[str, int, int]]:
    row = (
        yield Q("SELECT state, attempts, max_attempts FROM tasks WHERE id = ?", (task_id,))
    ).one()
    if row is None:
        raise StoreError(f"no task {task_id!r}")
    return row[0], row[1], row[2]


def op_accept_result(task_id: str, value: Any, submission_key: str) -> Op[Acceptance]:
    at = now()
    payload = Json(value)
    payload.dumps()  # not JSON (NaN, a set...): refuse before touching the database
    moved = yield Q(
        "UPDATE tasks SET state = 'submitted', attempts = attempts + 1, updated_at = ?, "
        "finished_at = ? WHERE id = ? AND state = 'running' RETURNING workflow_id, attempts",
        (at, at, task_id),
    )
    row = moved.one()
    if row is not None:
        inserted = yield Q(
            "INSERT INTO results (task_id, value, submission_key, stored_at) "
            "VALUES (?, ?, ?, ?) ON CONFLICT (task_id) DO NOTHING RETURNING task_id",
            (task_id, payload, submission_key, at),
        )
        if not inserted.rows:  # a result row without a submitted task: keep the old one
            raise Rollback(Acceptance("conflict", "running", row[1] - 1))
        yield _transition(row[0], task_id, "running", "submitted", f"result {submission_key}", at)
        return Acceptance("stored", "submitted", row[1], value)
    return (yield from _not_stored(task_id, submission_key))


def _not_stored(task_id: str, submission_key: str) -> Op[Acceptance]:
    """What a submission that stored nothing is told: the task's state and stored result."""
    found = (
        yield Q(
            "SELECT t.state, t.attempts, r.submission_key, CAST(r.value AS TEXT) "
            "FROM tasks t LEFT JOIN results r ON r.task_id = t.id WHERE t.id = ?",
            (task_id,),
        )
    ).one()
    if found is None:
        raise StoreError(f"no task {task_id!r}")
    state, attempts, key, stored = found
    if key is None:
        return Acceptance("not_running", state, attempts)
    status: Literal["duplicate", "conflict"] = "duplicate" if key == submission_key else "conflict"
    return Acceptance(status, state, attempts, from_json(stored))


def op_record_rejection(
    task_id: str,
    value: Any,
    reasons: Sequence[str],
    submission_key: str | None,
    source: str,
    at: datetime | None = None,
) -> Op[RejectionOutcome]:
    """Count one rejection, once per ``submission_key`` (without one: once per ``at``, the
    call's time, which a retry of the same call passes again)."""
    at = at or now()
    if submission_key is not None:
        same = Q(
            "SELECT attempt FROM rejections WHERE task_id = ? AND submission_key = ?",
            (task_id, submission_key),
        )
    else:
        same = Q(
            "SELECT attempt FROM rejections WHERE task_id = ? AND submission_key IS NULL "
            "AND at = ?",
            (task_id, at),
        )
    seen = (yield same).one()
    if seen is not None:
        state, _attempts, most = yield from _task_state(task_id)
        return RejectionOutcome("duplicate", seen[0], most, state == "failed", state)
    counted = (
        yield Q(
            "UPDATE tasks SET attempts = attempts + 1, updated_at = ? "
            "WHERE id = ? AND state = 'running' RETURNING workflow_id, attempts, max_attempts",
            (at, task_id),
        )
    ).one()
    if counted is None:
        state, attempts, most = yield from _task_state(task_id)
        return RejectionOutcome("not_running", attempts, most, state == "failed", state)
    workflow_id, attempt, most = counted
    inserted = yield Q(
        "INSERT INTO rejections (task_id, attempt, submission_key, value, reasons, source, at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (task_id, submission_key) DO NOTHING "
        "RETURNING id",
        (
            task_id,
            attempt,
            submission_key,
            Json(json.loads(safe_dumps(value))),
            Json(list(reasons)),
            source,
            at,
        ),
    )
    if not inserted.rows:  # the same submission raced itself: count it once
        raise Rollback(RejectionOutcome("duplicate", attempt - 1, most, False, "running"))
    failed = attempt >= most
    if failed:
        why = f"{attempt} submission(s) rejected; no attempts left (max_attempts={most})"
        yield Q(
            "UPDATE tasks SET state = 'failed', error = ?, updated_at = ?, finished_at = ? "
            "WHERE id = ? AND state = 'running'",
            (why, at, at, task_id),
        )
        yield _transition(workflow_id, task_id, "running", "failed", why, at)
    return RejectionOutcome("recorded", attempt, most, failed, "failed" if failed else "running")


def op_cancel_workflow(workflow_id: str, reason: str) -> Op[CancelOutcome]:
    at = now()
    current = (yield Q("SELECT state FROM workflows WHERE id = ?", (workflow_id,))).one()
    if current is None:
        raise StoreError(f"no workflow {workflow_id!r}")
    moved = yield Q(
        "UPDATE workflows SET state = 'cancelled', error = ?, updated_at = ?, finished_at = ? "
        "WHERE id = ? AND state IN ('pending', 'running') RETURNING id",
        (reason, at, at, workflow_id),
    )
    if not moved.rows:
        return CancelOutcome(False, state=current[0])
    yield _transition(workflow_id, None, current[0], "cancelled", reason, at)
    found: dict[str, tuple[str, ...]] = {}
    for state in ("running", "pending"):
        rows = yield Q(
            "UPDATE tasks SET state = 'cancelled', error = ?, updated_at = ?, finished_at = ? "
            "WHERE workflow_id = ? AND state = ? RETURNING id",
            (reason, at, at, workflow_id, state),
        )
        found[state] = tuple(sorted(r[0] for r in rows.rows))
        for (task_id,) in rows.rows:
            yield _transition(workflow_id, task_id, state, "cancelled", reason, at)
    return CancelOutcome(True, found["running"], found["pending"], "cancelled")


def op_get_task(task_id: str) -> Op[TaskRecord | None]:
    row = (yield Q(f"SELECT {TASK_COLUMNS} FROM {TASK_FROM} WHERE t.id = ?", (task_id,))).one()
    return _task(row) if row is not None else None


def op_task_owner(task_id: str) -> Op[tuple[str, str | None] | None]:
    row = (yield Q("SELECT state, session_id FROM tasks WHERE id = ?", (task_id,))).one()
    return (row[0], row[1]) if row is not None else None


def op_task_state(task_id: str) -> Op[str | None]:
    row = (yield Q("SELECT state FROM tasks WHERE id = ?", (task_id,))).one()
    return row[0] if row is not None else None


def op_workflow_state(workflow_id: str) -> Op[str | None]:
    row = (yield Q("SELECT state FROM workflows WHERE id = ?", (workflow_id,))).one()
    return row[0] if row is not None else None


def op_get_workflow(workflow_id: str) -> Op[WorkflowRecord | None]:
    row = (
        yield Q(f"SELECT {WORKFLOW_COLUMNS} FROM workflows w WHERE w.id = ?", (workflow_id,))
    ).one()
    if row is None:
        return None
    tasks = yield Q(
        f"SELECT {TASK_COLUMNS} FROM {TASK_FROM} WHERE t.workflow_id = ? ORDER BY t.position",
        (workflow_id,),
    )
    return _workflow(row, [_task(r) for r in tasks.rows])


def op_dependents(workflow_id: str, name: str) -> Op[Dependents | None]:
    """The run's counts and the pending tasks whose dependencies list ``name``."""
    quoted = '"' + name.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + '"'
    rows = (
        yield Q(
            "SELECT w.name, w.state, n.total, n.ended, n.submitted, n.finished, t.id, t.name, "
            "CAST(t.depends_on AS TEXT) FROM workflows w CROSS JOIN (SELECT COUNT(*) AS total, "
            "COALESCE(SUM(CASE WHEN state IN ('submitted', 'failed', 'cancelled') THEN 1 "
            "ELSE 0 END), 0) AS ended, COALESCE(SUM(CASE WHEN state = 'submitted' THEN 1 "
            "ELSE 0 END), 0) AS submitted, MAX(CASE WHEN name = ? THEN state END) AS finished "
            "FROM tasks WHERE workflow_id = ?) n "
            "LEFT JOIN tasks t ON t.workflow_id = w.id AND t.state = 'pending' "
            "AND CAST(t.depends_on AS TEXT) LIKE ? ESCAPE '\\' WHERE w.id = ? ORDER BY t.position",
            (name, workflow_id, f"%{quoted}%", workflow_id),
        )
    ).rows
    if not rows:
        return None
    first = rows[0]
    pending = [
        TaskProgress(r[6], r[7], "pending", tuple(from_json(r[8]) or ()))
        for r in rows
        if r[6] is not None
    ]
    return Dependents(
        first[0],
        first[1],
        int(first[2]),
        int(first[3]),
        int(first[4]),
        first[5],
        tuple(t for t in pending if name in t.depends_on),
    )


_FEW = 100  # dependencies read by name; more: every result of the run, then filtered


def op_task_context(workflow_id: str, depends_on: Sequence[str]) -> Op[TaskContext | None]:
    """The run's name and inputs and the results of ``depends_on`` (not every task's record)."""
    row = (
        yield Q("SELECT name, CAST(inputs AS TEXT) FROM workflows WHERE id = ?", (workflow_id,))
    ).one()
    if row is None:
        return None
    results: dict[str, Any] = {}
    if depends_on:
        wanted = set(depends_on)
        by_name = ""
        if len(wanted) <= _FEW:
            by_name = f" AND t.name IN ({', '.join('?' for _ in wanted)})"
        rows = yield Q(
            "SELECT t.name, CAST(r.value AS TEXT) FROM tasks t JOIN results r ON r.task_id = t.id "
            f"WHERE t.workflow_id = ?{by_name}",
            (workflow_id, *(sorted(wanted) if by_name else ())),
        )
        results = {name: from_json(value) for name, value in rows.rows if name in wanted}
    return TaskContext(workflow_id, row[0], from_json(row[1]), results)


def op_progress(workflow_id: str) -> Op[RunProgress | None]:
    rows = (
        yield Q(
            "SELECT w.name, w.state, t.id, t.name, t.state, CAST(t.depends_on AS TEXT) "
            "FROM workflows w LEFT JOIN tasks t ON t.workflow_id = w.id WHERE w.id = ? "
            "ORDER BY t.position",
            (workflow_id,),
        )
    ).rows
    if not rows:
        return None
    parsed: dict[str, tuple[str, ...]] = {"[]": ()}  # most tasks share a list (or none)

    def depends_on(text: str | None) -> tuple[str, ...]:
        if text is None:
            return ()
        found = parsed.get(text)
        if found is None:
            found = parsed[text] = tuple(from_json(text) or ())
        return found

    return RunProgress(
        workflow_id,
        rows[0][0],
        rows[0][1],
        tuple(TaskProgress(r[2], r[3], r[4], depends_on(r[5])) for r in rows if r[2] is not None),
    )


def op_find_workflows(prefix: str) -> Op[list[str]]:
    if not prefix or not all(c.isalnum() or c == "-" for c in prefix):
        return []  # ids are letters, digits and '-': nothing else can match (no LIKE escapes)
    rows = yield Q(
        "SELECT id FROM workflows WHERE id LIKE ? ORDER BY created_at DESC LIMIT 10",
        (prefix + "%",),
    )
    return [r[0] for r in rows.rows]


def op_list_workflows(limit: int, state: str | None) -> Op[list[WorkflowRecord]]:
    counts = (
        "(SELECT COUNT(*) FROM tasks t WHERE t.workflow_id = w.id), "
        "(SELECT COUNT(*) FROM tasks t WHERE t.workflow_id = w.id AND t.state = 'submitted')"
    )
    where, params = ("WHERE w.state = ?", (state,)) if state else ("", ())
    rows = yield Q(
        f"SELECT {WORKFLOW_COLUMNS}, {counts} FROM workflows w {where} "
        "ORDER BY w.created_at DESC, w.id LIMIT ?",
        (*params, limit),
    )
    return [_workflow(r[:8], (), (r[8], r[9])) for r in rows.rows]


def op_transitions(workflow_id: str, task_id: str | None) -> Op[list[Transition]]:
    if task_id is None:
        sql = "WHERE workflow_id = ?"
        params: tuple[Any, ...] = (workflow_id,)
    else:
        sql, params = "WHERE workflow_id = ? AND task_id = ?", (workflow_id, task_id)
    rows = yield Q(
        "SELECT workflow_id, task_id, from_state, to_state, reason, at FROM transitions "
        f"{sql} ORDER BY id",
        params,
    )
    return [Transition(r[0], r[1], r[2], r[3], r[4], as_datetime(r[5]) or now()) for r in rows.rows]


def op_rejections(task_id: str) -> Op[list[RejectionRecord]]:
    rows = yield Q(
        "SELECT task_id, attempt, submission_key, CAST(value AS TEXT), CAST(reasons AS TEXT), "
        "source, at FROM rejections WHERE task_id = ? ORDER BY attempt, id",
        (task_id,),
    )
    return [
        RejectionRecord(
            r[0],
            r[1],
            r[2],
            from_json(r[3]),
            tuple(from_json(r[4]) or ()),
            r[5],
            as_datetime(r[6]) or now(),
        )
        for r in rows.rows
    ]


def op_count_results(task_id: str) -> Op[int]:
    row = (yield Q("SELECT COUNT(*) FROM results WHERE task_id = ?", (task_id,))).one()
    return int(row[0]) if row else 0
