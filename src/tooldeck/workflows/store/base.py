"""The workflow store: records, outcomes, and every operation, written once for both databases.

Each operation is a generator that yields SQL statements (:class:`Q`) and receives their
rows (:class:`Rows`): it holds the logic, the SQL and the guarantees, and never touches a
connection. A driver runs one generator inside one database transaction: the SQLite
store in a worker thread (``BEGIN IMMEDIATE``), the PostgreSQL store on an async psycopg
connection. Raising :class:`Rollback` from an operation rolls the transaction back and
returns the exception's value.

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
from abc import ABC, abstractmethod
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Literal, TypeAlias, TypeVar

__all__ = [
    "TASK_STATES",
    "TERMINAL_TASK_STATES",
    "TERMINAL_WORKFLOW_STATES",
    "WORKFLOW_STATES",
    "Acceptance",
    "CancelOutcome",
    "Dependents",
    "NewTask",
    "RejectionOutcome",
    "RejectionRecord",
    "RunProgress",
    "StoreError",
    "StoreUnavailable",
    "TaskContext",
    "TaskProgress",
    "TaskRecord",
    "TaskState",
    "Transition",
    "WorkflowRecord",
    "WorkflowState",
    "WorkflowStore",
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


class StoreError(Exception):
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
    """Raised by an operation to roll its transaction back and return ``value``."""

    def __init__(self, value: Any):
        super().__init__("rollback")
        self.value = value


Op: TypeAlias = Generator[Q, Rows, T]
OpSource: TypeAlias = Op[T] | Callable[[], Op[T]]
"""An operation, or a function that makes it afresh: the store may retry only the latter
(after a dropped connection), so pass one only for an operation safe to run again."""


def make_op(source: OpSource[T]) -> Op[T]:
    """The operation of ``source`` (a generator is not callable; a factory is)."""
    return source() if callable(source) else source


def now() -> datetime:
    return datetime.now(UTC)


def _dt(value: Any) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value))


def _json(value: Any) -> Any:
    return None if value is None else json.loads(value)


# -- records -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NewTask:
    """A task as it is written when its workflow run is created."""

    name: str
    position: int
    instructions: str
    result_schema: dict[str, Any]
    depends_on: tuple[str, ...] = ()
    input_names: tuple[str, ...] | None = None
    max_attempts: int = 3
    max_steps: int = 12
    description: str = ""


@dataclass(frozen=True, slots=True)
class TaskRecord:
    id: str
    workflow_id: str
    name: str
    position: int
    description: str
    instructions: str
    input_names: tuple[str, ...] | None
    depends_on: tuple[str, ...]
    result_schema: dict[str, Any]
    state: TaskState
    attempts: int
    max_attempts: int
    max_steps: int
    session_id: str | None
    error: str | None
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    has_result: bool
    result: Any
    submission_key: str | None
    stored_at: datetime | None

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_TASK_STATES


@dataclass(frozen=True, slots=True)
class WorkflowRecord:
    id: str
    name: str
    inputs: Any
    state: WorkflowState
    error: str | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    tasks: tuple[TaskRecord, ...] = ()
    task_count: int = 0
    submitted_count: int = 0
    # task name -> stored JSON -> the declared type (set by Workflow.typed / the engine)
    loaders: Mapping[str, Callable[[Any], Any]] = field(
        default_factory=dict, compare=False, repr=False
    )

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_WORKFLOW_STATES

    def task(self, name: str) -> TaskRecord:
        for t in self.tasks:
            if t.name == name:
                return t
        raise KeyError(name)

    @property
    def results(self) -> dict[str, Any]:
        """The accepted results, by task name, as their tasks' declared types.

        A task declared with a Pydantic result type gives an instance of it when this
        record knows the workflow (records from ``WorkflowEngine.get`` / ``wait`` /
        ``run``, or ``Workflow.typed(record)``); otherwise the stored JSON.
        """
        return {
            t.name: self.loaders[t.name](t.result) if t.name in self.loaders else t.result
            for t in self.tasks
            if t.has_result
        }

    @property
    def stored_results(self) -> dict[str, Any]:
        """The accepted results, by task name, as the JSON the store keeps."""
        return {t.name: t.result for t in self.tasks if t.has_result}


@dataclass(frozen=True, slots=True)
class TaskProgress:
    id: str
    name: str
    state: TaskState
    depends_on: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RunProgress:
    """A run's and its tasks' states only: what scheduling needs, cheap to read."""

    id: str
    name: str
    state: WorkflowState
    tasks: tuple[TaskProgress, ...]

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_WORKFLOW_STATES


@dataclass(frozen=True, slots=True)
class Dependents:
    """After a task ended: its run's state and task counts, and the pending tasks that
    depend on it (what scheduling needs then, without every task's row)."""

    name: str
    state: WorkflowState
    total: int
    ended: int  # submitted, failed or cancelled
    submitted: int
    finished_state: str | None  # the state of the task that ended
    pending: tuple[TaskProgress, ...]

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_WORKFLOW_STATES


@dataclass(frozen=True, slots=True)
class TaskContext:
    """What a task turn starts from: its run's name and inputs, its dependencies' results."""

    workflow_id: str
    name: str
    inputs: Any
    results: Mapping[str, Any]  # dependency name -> its accepted result (those that have one)


@dataclass(frozen=True, slots=True)
class Transition:
    workflow_id: str
    task_id: str | None
    from_state: str | None
    to_state: str
    reason: str | None
    at: datetime


@dataclass(frozen=True, slots=True)
class RejectionRecord:
    task_id: str
    attempt: int
    submission_key: str | None
    value: Any
    reasons: tuple[str, ...]
    source: str
    at: datetime


@dataclass(frozen=True, slots=True)
class Acceptance:
    """What happened to one submission of a valid result.

    ``status``: ``stored`` (this submission's value is the task's result), ``duplicate``
    (this same submission was stored before), ``conflict`` (another submission's value
    was stored first) or ``not_running`` (the task is not running: cancelled, failed or
    not yet claimed). ``value`` is the stored value, when there is one.
    """

    status: Literal["stored", "duplicate", "conflict", "not_running"]
    state: str
    attempts: int
    value: Any = None


@dataclass(frozen=True, slots=True)
class RejectionOutcome:
    """A recorded rejection: ``attempt`` of ``max_attempts``; ``failed`` once none are left.

    ``status``: ``recorded``, ``duplicate`` (this submission key was rejected before and
    is not counted again) or ``not_running``.
    """

    status: Literal["recorded", "duplicate", "not_running"]
    attempt: int
    max_attempts: int
    failed: bool
    state: str


@dataclass(frozen=True, slots=True)
class CancelOutcome:
    cancelled: bool
    running: tuple[str, ...] = ()
    pending: tuple[str, ...] = ()
    state: str | None = None


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
    names = _json(row[6])
    return TaskRecord(
        id=row[0],
        workflow_id=row[1],
        name=row[2],
        position=row[3],
        description=row[4] or "",
        instructions=row[5],
        input_names=tuple(names) if names is not None else None,
        depends_on=tuple(_json(row[7]) or ()),
        result_schema=_json(row[8]),
        state=row[9],
        attempts=row[10],
        max_attempts=row[11],
        max_steps=row[12],
        session_id=row[13],
        error=row[14],
        created_at=_dt(row[15]) or now(),
        updated_at=_dt(row[16]) or now(),
        started_at=_dt(row[17]),
        finished_at=_dt(row[18]),
        has_result=row[19] is not None,
        result=_json(row[20]),
        submission_key=row[21],
        stored_at=_dt(row[22]),
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
        inputs=_json(row[2]),
        state=row[3],
        error=row[4],
        created_at=_dt(row[5]) or now(),
        updated_at=_dt(row[6]) or now(),
        finished_at=_dt(row[7]),
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
    workflow_id: str, name: str, inputs: Any, tasks: Sequence[NewTask]
) -> Op[None]:
    at = now()
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
    return Acceptance(status, state, attempts, _json(stored))


def op_record_rejection(
    task_id: str,
    value: Any,
    reasons: Sequence[str],
    submission_key: str | None,
    source: str,
) -> Op[RejectionOutcome]:
    at = now()
    if submission_key is not None:
        seen = (
            yield Q(
                "SELECT attempt FROM rejections WHERE task_id = ? AND submission_key = ?",
                (task_id, submission_key),
            )
        ).one()
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
        TaskProgress(r[6], r[7], "pending", tuple(_json(r[8]) or ()))
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
        results = {name: _json(value) for name, value in rows.rows if name in wanted}
    return TaskContext(workflow_id, row[0], _json(row[1]), results)


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
            found = parsed[text] = tuple(_json(text) or ())
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
    return [Transition(r[0], r[1], r[2], r[3], r[4], _dt(r[5]) or now()) for r in rows.rows]


def op_rejections(task_id: str) -> Op[list[RejectionRecord]]:
    rows = yield Q(
        "SELECT task_id, attempt, submission_key, CAST(value AS TEXT), CAST(reasons AS TEXT), "
        "source, at FROM rejections WHERE task_id = ? ORDER BY attempt, id",
        (task_id,),
    )
    return [
        RejectionRecord(
            r[0], r[1], r[2], _json(r[3]), tuple(_json(r[4]) or ()), r[5], _dt(r[6]) or now()
        )
        for r in rows.rows
    ]


def op_count_results(task_id: str) -> Op[int]:
    row = (yield Q("SELECT COUNT(*) FROM results WHERE task_id = ?", (task_id,))).one()
    return int(row[0]) if row else 0


# -- the interface ----------------------------------------------------------------------------


class WorkflowStore(ABC):
    """Where workflow runs, tasks, transitions, rejections and results are kept.

    Two implementations: :class:`~tooldeck.workflows.store.SQLiteStore` (the default, a
    file) and :class:`~tooldeck.workflows.store.PostgresStore` (psycopg 3, async). Both
    create their tables themselves through numbered migrations recorded in
    ``schema_version``. Use ``async with store:`` (or :meth:`open` / :meth:`close`).
    """

    kind: str = "store"

    @abstractmethod
    async def open(self) -> None:
        """Connect and bring the tables up to date (idempotent)."""

    @abstractmethod
    async def close(self) -> None: ...

    @abstractmethod
    async def _run(self, op: OpSource[T], *, write: bool = True) -> T:
        """Run ``op`` in one transaction and return its value (``write=False``: a read,
        which may run without a transaction when the database's isolation makes one moot).

        ``op`` given as a factory (``lambda: op_x(...)``) may be run again after a
        dropped connection; every factory passed below is idempotent for a retry after
        a commit whose answer was lost (keyed submissions, conditional updates that
        recognise their own earlier write)."""

    @property
    @abstractmethod
    def location(self) -> str:
        """Where the data lives, for messages (a path or a DSN without its password)."""

    async def __aenter__(self) -> WorkflowStore:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @abstractmethod
    async def schema_version(self) -> int: ...

    # writes
    async def create_workflow(
        self, workflow_id: str, name: str, inputs: Any, tasks: Sequence[NewTask]
    ) -> None:
        await self._run(op_create_workflow(workflow_id, name, inputs, tasks))

    async def set_workflow_state(
        self,
        workflow_id: str,
        to: WorkflowState,
        *,
        expect: Sequence[str] = ("pending", "running"),
        error: str | None = None,
    ) -> bool:
        return await self._run(lambda: op_set_workflow_state(workflow_id, to, tuple(expect), error))

    async def claim_task(self, task_id: str, session_id: str) -> bool:
        """``pending -> running`` for one worker; ``False`` when it was not pending."""
        return await self.claim(task_id, session_id) is not None

    async def claim(self, task_id: str, session_id: str) -> TaskRecord | None:
        """:meth:`claim_task`, returning the claimed task's record (``None``: not claimed)."""
        return await self._run(lambda: op_claim_task(task_id, session_id))

    async def resume_task(self, task_id: str, session_id: str, reason: str) -> str | None:
        """Give a ``running`` task whose worker was lost to ``session_id``.

        Returns the session that held it, ``None`` when the task is not running.
        """
        return await self._run(lambda: op_resume_task(task_id, session_id, reason))

    async def set_task_state(
        self,
        task_id: str,
        to: TaskState,
        *,
        expect: Sequence[str],
        reason: str | None = None,
        owner: str | None = None,
    ) -> bool:
        """Move the task to ``to`` if its state is in ``expect`` (and, given ``owner``,
        only while that session holds it)."""
        return await self._run(lambda: op_set_task_state(task_id, to, tuple(expect), reason, owner))

    async def accept_result(self, task_id: str, value: Any, *, submission_key: str) -> Acceptance:
        """Store ``value`` as the task's result, exactly once (see :class:`Acceptance`)."""
        return await self._run(lambda: op_accept_result(task_id, value, submission_key))

    async def record_rejection(
        self,
        task_id: str,
        value: Any,
        reasons: Sequence[str],
        *,
        submission_key: str | None = None,
        source: str = "control_plane",
    ) -> RejectionOutcome:
        """Count one rejected submission; the task fails when its attempts run out."""

        def op() -> Op[RejectionOutcome]:
            return op_record_rejection(task_id, value, tuple(reasons), submission_key, source)

        # Counted once per key: only a keyed rejection can be run again safely.
        return await self._run(op if submission_key is not None else op(), write=True)

    async def cancel_workflow(self, workflow_id: str, reason: str) -> CancelOutcome:
        """Cancel the run and every task not yet finished, in one transaction."""
        return await self._run(lambda: op_cancel_workflow(workflow_id, reason))

    # reads
    async def get_task(self, task_id: str) -> TaskRecord | None:
        return await self._run(lambda: op_get_task(task_id), write=False)

    async def task_owner(self, task_id: str) -> tuple[str, str | None] | None:
        """``(state, session_id)`` of a task, or ``None`` when there is no such task."""
        return await self._run(lambda: op_task_owner(task_id), write=False)

    async def task_state(self, task_id: str) -> str | None:
        return await self._run(lambda: op_task_state(task_id), write=False)

    async def get_workflow(self, workflow_id: str) -> WorkflowRecord | None:
        return await self._run(lambda: op_get_workflow(workflow_id), write=False)

    async def workflow_state(self, workflow_id: str) -> str | None:
        """The run's state only (``None`` when there is no such run)."""
        return await self._run(lambda: op_workflow_state(workflow_id), write=False)

    async def task_context(self, task: TaskRecord) -> TaskContext | None:
        """The run's name and inputs and the results of ``task``'s dependencies."""
        return await self._run(
            lambda: op_task_context(task.workflow_id, task.depends_on), write=False
        )

    async def dependents(self, workflow_id: str, name: str) -> Dependents | None:
        """The run's task counts and the pending tasks that depend on the task ``name``."""
        return await self._run(lambda: op_dependents(workflow_id, name), write=False)

    async def progress(self, workflow_id: str) -> RunProgress | None:
        """The run's state and its tasks' states and dependencies (no results)."""
        return await self._run(lambda: op_progress(workflow_id), write=False)

    async def find_workflows(self, prefix: str) -> list[str]:
        """Ids that start with ``prefix`` (newest first, at most 10)."""
        return await self._run(lambda: op_find_workflows(prefix), write=False)

    async def list_workflows(
        self, *, limit: int = 50, state: str | None = None
    ) -> list[WorkflowRecord]:
        """Runs, newest first, with task counts (``tasks`` left empty)."""
        return await self._run(lambda: op_list_workflows(limit, state), write=False)

    async def transitions(self, workflow_id: str, task_id: str | None = None) -> list[Transition]:
        return await self._run(lambda: op_transitions(workflow_id, task_id), write=False)

    async def rejections(self, task_id: str) -> list[RejectionRecord]:
        return await self._run(lambda: op_rejections(task_id), write=False)

    async def count_results(self, task_id: str) -> int:
        return await self._run(lambda: op_count_results(task_id), write=False)
