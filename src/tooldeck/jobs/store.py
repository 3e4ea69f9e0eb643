"""The ``jobs`` table of the workflow store: every state change a conditional update.

Jobs live in the same database as workflow runs (SQLite by default, PostgreSQL at
scale; migration 3), written with the same sans-IO operations
(:mod:`tooldeck.workflows.store.protocol`), so one driver runs them on either database.
The guarantees are in the SQL, not in Python:

- a job runs under one owner at a time: ``pending -> running`` is ``UPDATE ... WHERE
  state = 'pending'``, a takeover names the owner it replaces, and every later write
  (progress, the end) says ``AND owner = ?``, so a runner that lost its job writes
  nothing;
- a running job's owner renews ``heartbeat_at``; a job whose heartbeat is older than the
  lease is either handed back to ``pending`` (``on_lost = 'resume'``, attempts left) or
  marked ``lost`` with the reason, in one statement each: never silently gone. The reason
  says what is known (no heartbeat from that owner for so long), not why: a lapsed lease
  may be a process that stopped or one cut off from the database;
- the notification of an ended job is taken once: ``UPDATE ... SET notified_at = ? WHERE
  notified_at IS NULL ... RETURNING`` reads and marks in one statement, so two turns of
  the same session, in two processes, never both get it.

Each operation may be run twice (the store runs it again after a dropped connection, and
a commit's answer can be lost): the call's time ``at``, fixed when the call is made,
marks what it writes (``created_at``, ``heartbeat_at`` of a claim, ``finished_at``,
``notified_at``), so a second run recognises its own first one and answers the same.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, Protocol, TypeAlias, TypeVar

from ..workflows.store.base import WorkflowStore
from ..workflows.store.protocol import (
    Json,
    Op,
    Q,
    as_datetime,
    from_json,
    now,
    op_find_ids,
    written_before,
)

__all__ = ["by_id_or_prefix"]

JobState: TypeAlias = Literal["pending", "running", "succeeded", "failed", "cancelled", "lost"]
JOB_STATES: tuple[JobState, ...] = (
    "pending",
    "running",
    "succeeded",
    "failed",
    "cancelled",
    "lost",
)
TERMINAL_JOB_STATES = frozenset({"succeeded", "failed", "cancelled", "lost"})
_TERMINAL_SQL = "('succeeded', 'failed', 'cancelled', 'lost')"


@dataclass(frozen=True, slots=True)
class NewJob:
    """A job as it is written when it is started (by a tool, a schedule, or the CLI)."""

    id: str
    session_id: str
    task: str
    kind: Literal["agent", "workflow"] = "agent"
    agent: str | None = None
    spec: dict[str, Any] | None = None
    dispatch: Literal["embedded", "dbos"] = "embedded"
    max_attempts: int = 2
    on_lost: Literal["resume", "mark_lost"] = "resume"
    origin: str = "tool"


@dataclass(frozen=True, slots=True)
class JobRecord:
    id: str
    session_id: str
    kind: str
    agent: str | None
    task: str
    spec: dict[str, Any]
    state: JobState
    dispatch: str
    owner: str | None
    heartbeat_at: datetime | None
    attempts: int
    max_attempts: int
    on_lost: str
    cancel_requested: bool
    progress: str | None
    steps: int
    summary: str | None
    result: Any
    result_ref: str | None
    error: str | None
    origin: str
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    notified_at: datetime | None

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_JOB_STATES


_COLUMNS = (
    "id, session_id, kind, agent, task, CAST(spec AS TEXT), state, dispatch, owner, "
    "heartbeat_at, attempts, max_attempts, on_lost, cancel_requested, progress, steps, "
    "summary, CAST(result AS TEXT), result_ref, error, origin, created_at, updated_at, "
    "started_at, finished_at, notified_at"
)


def _job(r: Sequence[Any]) -> JobRecord:
    return JobRecord(
        id=str(r[0]),
        session_id=str(r[1]),
        kind=str(r[2]),
        agent=r[3],
        task=str(r[4]),
        spec=from_json(r[5]) or {},
        state=r[6],
        dispatch=str(r[7]),
        owner=r[8],
        heartbeat_at=as_datetime(r[9]),
        attempts=int(r[10]),
        max_attempts=int(r[11]),
        on_lost=str(r[12]),
        cancel_requested=bool(r[13]),
        progress=r[14],
        steps=int(r[15]),
        summary=r[16],
        result=from_json(r[17]),
        result_ref=r[18],
        error=r[19],
        origin=str(r[20]),
        created_at=as_datetime(r[21]) or now(),
        updated_at=as_datetime(r[22]) or now(),
        started_at=as_datetime(r[23]),
        finished_at=as_datetime(r[24]),
        notified_at=as_datetime(r[25]),
    )


def op_create_job(
    job: NewJob, claim_for: str | None = None, at: datetime | None = None
) -> Op[None]:
    """Write ``job`` at ``at`` (and claim it for ``claim_for``); a job already written at
    ``at`` is this call's own (a retry); under another call's id,
    :class:`~tooldeck.workflows.store.StoreError`."""
    at = at or now()
    if (yield from written_before("jobs", job.id, at, "job")):
        if claim_for is not None:
            yield from op_claim(job.id, claim_for, at)
        return
    yield Q(
        "INSERT INTO jobs (id, session_id, kind, agent, task, spec, state, dispatch, "
        "attempts, max_attempts, on_lost, origin, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, 0, ?, ?, ?, ?, ?)",
        (
            job.id,
            job.session_id,
            job.kind,
            job.agent,
            job.task,
            Json(job.spec or {}),
            job.dispatch,
            job.max_attempts,
            job.on_lost,
            job.origin,
            at,
            at,
        ),
    )
    if claim_for is not None:
        yield from op_claim(job.id, claim_for, at)


def _claimed_at(job_id: str, owner: str, at: datetime) -> Op[int | None]:
    """The attempt of a claim (or takeover) this call made at ``at`` already: its
    ``heartbeat_at``, which only the owner renews, and it does not know the job yet."""
    row = (
        yield Q(
            "SELECT attempts FROM jobs WHERE id = ? AND state = 'running' AND owner = ? "
            "AND heartbeat_at = ?",
            (job_id, owner, at),
        )
    ).one()
    return int(row[0]) if row else None


def op_claim(job_id: str, owner: str, at: datetime | None = None) -> Op[int | None]:
    """``pending -> running`` for ``owner``; the attempt number, ``None`` if not pending."""
    at = at or now()
    rows = yield Q(
        "UPDATE jobs SET state = 'running', owner = ?, heartbeat_at = ?, updated_at = ?, "
        "attempts = attempts + 1, started_at = COALESCE(started_at, ?) "
        "WHERE id = ? AND state = 'pending' AND cancel_requested = 0 RETURNING attempts",
        (owner, at, at, at, job_id),
    )
    row = rows.one()
    if row is not None:
        return int(row[0])
    return (yield from _claimed_at(job_id, owner, at))


def op_take_over(
    job_id: str, owner: str, reason: str, at: datetime | None = None
) -> Op[int | None]:
    """A ``running`` job whose runner died goes to ``owner`` (attempts left) or ``lost``.

    For a durable executor (DBOS) that runs the job's step again after a crash. Returns
    the new attempt number, or ``None`` when the job is not running (or was marked lost
    now: no attempts left).
    """
    at = at or now()
    mine = yield from _claimed_at(job_id, owner, at)  # this call's earlier try took it
    if mine is not None:
        return mine
    lost = yield Q(
        "UPDATE jobs SET state = 'lost', finished_at = ?, updated_at = ?, error = ? "
        "WHERE id = ? AND state = 'running' AND attempts >= max_attempts RETURNING id",
        (at, at, f"{reason}; no attempts left", job_id),
    )
    if lost.rows:
        return None
    rows = yield Q(
        "UPDATE jobs SET owner = ?, heartbeat_at = ?, updated_at = ?, attempts = attempts + 1, "
        "error = ? WHERE id = ? AND state = 'running' RETURNING attempts",
        (owner, at, at, reason, job_id),
    )
    row = rows.one()
    return int(row[0]) if row else None


def op_claim_pending(
    owner: str, limit: int, skip_locked: bool, at: datetime | None = None
) -> Op[list[str]]:
    """Claim up to ``limit`` embedded pending jobs, oldest first; their ids (with those
    this call's earlier try claimed at ``at``)."""
    at = at or now()
    earlier = yield Q(
        "SELECT id FROM jobs WHERE state = 'running' AND owner = ? AND heartbeat_at = ? "
        "AND dispatch = 'embedded'",
        (owner, at),
    )
    mine = [str(r[0]) for r in earlier.rows]
    limit -= len(mine)
    if limit <= 0:
        return sorted(mine)
    # The pick is a CTE that PostgreSQL runs once: as ``id IN (SELECT ... LIMIT ? FOR
    # UPDATE SKIP LOCKED)`` its planner may run the subquery again for each row it
    # updates, each time past the rows already taken, and claim every pending job.
    pick = " MATERIALIZED" if skip_locked else ""
    lock = " FOR UPDATE SKIP LOCKED" if skip_locked else ""
    rows = yield Q(
        f"WITH picked AS{pick} (SELECT id FROM jobs WHERE state = 'pending' "
        "AND dispatch = 'embedded' AND cancel_requested = 0 "
        f"ORDER BY created_at, id LIMIT ?{lock}) "
        "UPDATE jobs SET state = 'running', owner = ?, heartbeat_at = ?, updated_at = ?, "
        "attempts = attempts + 1, started_at = COALESCE(started_at, ?) "
        "WHERE state = 'pending' AND cancel_requested = 0 AND id IN (SELECT id FROM picked) "
        "RETURNING id",
        (limit, owner, at, at, at),
    )
    return sorted(mine + [str(r[0]) for r in rows.rows])


def op_heartbeat(owner: str, job_ids: Sequence[str]) -> Op[dict[str, bool]]:
    """Renew ``owner``'s leases; ``{job id: cancel requested}`` for the jobs it still holds."""
    if not job_ids:
        return {}
    marks = ", ".join("?" for _ in job_ids)
    rows = yield Q(
        f"UPDATE jobs SET heartbeat_at = ? WHERE owner = ? AND state = 'running' AND id IN "
        f"({marks}) RETURNING id, cancel_requested",
        (now(), owner, *job_ids),
    )
    return {str(r[0]): bool(r[1]) for r in rows.rows}


Recovered: TypeAlias = list[tuple[str, str]]


def op_recover(lease: float, by: str) -> Op[tuple[Recovered, Recovered]]:
    """Embedded jobs whose owner stopped renewing: back to pending, or marked lost.

    Returns ``(resumed, lost)``: ``(job id, the reason written)`` each. The reason names
    the owner and the lease, not a cause: a process that stopped and one cut off from the
    database look the same from here. DBOS jobs are recovered by DBOS (the workers'
    takeover) and are left alone here.
    """
    at = now()
    expired = at - timedelta(seconds=lease)
    silent = f" for {lease:g}s"
    # SET reads the row as it was: ``owner`` is the one whose lease lapsed.
    lost = yield Q(
        "UPDATE jobs SET state = 'lost', finished_at = ?, updated_at = ?, "
        "error = 'no heartbeat from ' || COALESCE(owner, '(nobody)') || ? || "
        "CASE WHEN on_lost = 'mark_lost' THEN '' ELSE ' and no attempts left' END || ? "
        "WHERE state = 'running' AND dispatch = 'embedded' AND heartbeat_at < ? "
        "AND (on_lost = 'mark_lost' OR attempts >= max_attempts) RETURNING id, error",
        (at, at, silent, f"; seen by {by}", expired),
    )
    resumed = yield Q(
        "UPDATE jobs SET state = 'pending', owner = NULL, updated_at = ?, "
        "error = 'handed back: no heartbeat from ' || COALESCE(owner, '(nobody)') || ? "
        "WHERE state = 'running' AND dispatch = 'embedded' AND heartbeat_at < ? "
        "RETURNING id, error",
        (at, f"{silent}; seen by {by}", expired),
    )
    return (
        sorted((str(r[0]), str(r[1])) for r in resumed.rows),
        sorted((str(r[0]), str(r[1])) for r in lost.rows),
    )


def op_release(job_id: str, owner: str, why: str) -> Op[bool]:
    """Hand a job ``owner`` holds back to ``pending`` (its process is stopping)."""
    rows = yield Q(
        "UPDATE jobs SET state = 'pending', owner = NULL, updated_at = ?, error = ?, "
        "attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END "  # not a failure
        "WHERE id = ? AND owner = ? AND state = 'running' AND cancel_requested = 0 RETURNING id",
        (now(), f"handed back: {why}", job_id, owner),
    )
    return bool(rows.rows)


def op_progress(job_id: str, owner: str, label: str | None, steps: int) -> Op[bool]:
    rows = yield Q(
        "UPDATE jobs SET progress = ?, steps = ?, heartbeat_at = ?, updated_at = ? "
        "WHERE id = ? AND owner = ? AND state = 'running' RETURNING cancel_requested",
        (label, steps, now(), now(), job_id, owner),
    )
    row = rows.one()
    return row is None or bool(row[0])  # True: stop (gone, taken over or cancel requested)


def op_finish(
    job_id: str,
    owner: str,
    state: JobState,
    *,
    summary: str | None,
    result: Any,
    result_ref: str | None,
    error: str | None,
    steps: int,
    at: datetime | None = None,
) -> Op[bool]:
    """Write the end of a job ``owner`` holds; ``True`` when written (now, or at ``at`` by
    this call's earlier try), ``False`` when the job is no longer this owner's."""
    at = at or now()
    rows = yield Q(
        # a takeover's or a resumption's note stays when the end adds none: the history
        "UPDATE jobs SET state = ?, summary = ?, result = ?, result_ref = ?, "
        "error = COALESCE(?, error), "
        "steps = ?, finished_at = ?, updated_at = ?, progress = NULL "
        "WHERE id = ? AND owner = ? AND state = 'running' RETURNING id",
        (
            state,
            summary,
            Json(result) if result is not None else None,
            result_ref,
            error,
            steps,
            at,
            at,
            job_id,
            owner,
        ),
    )
    if rows.rows:
        return True
    written = yield Q(
        "SELECT id FROM jobs WHERE id = ? AND owner = ? AND state = ? AND finished_at = ?",
        (job_id, owner, state, at),
    )
    return bool(written.rows)


def op_cancel(job_id: str, reason: str, at: datetime | None = None) -> Op[tuple[str, bool] | None]:
    """Cancel: a pending job at once, a running one by request (its runner stops it).

    Returns ``(state, changed)``, ``None`` when there is no such job (``changed`` too
    when this call's earlier try, at ``at``, made the change).
    """
    at = at or now()
    done = yield Q(
        "UPDATE jobs SET state = 'cancelled', cancel_requested = 1, error = ?, "
        "finished_at = ?, updated_at = ? WHERE id = ? AND state = 'pending' RETURNING id",
        (reason, at, at, job_id),
    )
    if done.rows:
        return "cancelled", True
    asked = yield Q(
        "UPDATE jobs SET cancel_requested = 1, error = ?, updated_at = ? "
        "WHERE id = ? AND state = 'running' AND cancel_requested = 0 RETURNING id",
        (reason, at, job_id),
    )
    if asked.rows:
        return "running", True
    row = (
        yield Q(
            "SELECT state, cancel_requested, error, updated_at FROM jobs WHERE id = ?", (job_id,)
        )
    ).one()
    if row is None:
        return None
    mine = bool(row[1]) and row[2] == reason and as_datetime(row[3]) == at
    return str(row[0]), mine


def op_take_notices(session_id: str, at: datetime | None = None) -> Op[list[JobRecord]]:
    """The session's ended jobs not yet announced, marked announced (at ``at``) in the same
    statement; with the ones this call's earlier try marked at ``at``."""
    at = at or now()
    rows = yield Q(
        f"UPDATE jobs SET notified_at = ? WHERE session_id = ? "
        "AND (notified_at IS NULL OR notified_at = ?) "
        f"AND state IN {_TERMINAL_SQL} RETURNING {_COLUMNS}",
        (at, session_id, at),
    )
    return sorted((_job(r) for r in rows.rows), key=lambda j: (j.finished_at or j.created_at, j.id))


def op_get(job_id: str) -> Op[JobRecord | None]:
    row = (yield Q(f"SELECT {_COLUMNS} FROM jobs WHERE id = ?", (job_id,))).one()
    return _job(row) if row else None


def op_list(session_id: str | None, state: str | None, limit: int) -> Op[list[JobRecord]]:
    where, params = [], []
    if session_id is not None:
        where.append("session_id = ?")
        params.append(session_id)
    if state is not None:
        where.append("state = ?")
        params.append(state)
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    rows = yield Q(
        f"SELECT {_COLUMNS} FROM jobs{clause} ORDER BY created_at DESC, id LIMIT ?",
        (*params, limit),
    )
    return [_job(r) for r in rows.rows]


class _Owned(Protocol):
    @property
    def session_id(self) -> str: ...


R = TypeVar("R", bound=_Owned)


async def by_id_or_prefix(
    get: Callable[[str], Awaitable[R | None]],
    find: Callable[[str, str | None], Awaitable[list[str]]],
    ident: str,
    session_id: str | None,
    noun: str,
) -> R:
    """A row (a job, a schedule: ``noun``) by id or unique id prefix, read with ``get``
    and ``find``; ``LookupError`` when there is none. ``session_id``: only that session's
    rows are looked at (an ambiguous prefix names none of another session's)."""
    found = await get(ident)
    if found is not None and session_id in (None, found.session_id):
        return found
    ids = await find(ident, session_id)
    if len(ids) == 1:
        again = await get(ids[0])
        if again is not None:
            return again
    if len(ids) > 1:
        raise LookupError(f"{ident!r} matches several {noun}s: {', '.join(ids)}")
    raise LookupError(f"no {noun} {ident!r}" + (" in this session" if session_id else ""))


class JobTable:
    """The job operations on one (opened) :class:`WorkflowStore`.

    Each call hands the store a function that makes its operation, with the call's time
    fixed (``at``), so the store can run it again after a dropped connection and the
    operation recognises its own earlier write.
    """

    def __init__(self, store: WorkflowStore):
        self.store = store

    @property
    def _skip_locked(self) -> bool:
        return self.store.kind == "postgres"

    async def create(self, job: NewJob, *, claim_for: str | None = None) -> None:
        """Write ``job``; with ``claim_for``, claimed for that owner in the same transaction."""
        at = now()
        await self.store._run(lambda: op_create_job(job, claim_for, at))

    async def claim(self, job_id: str, owner: str) -> int | None:
        at = now()
        return await self.store._run(lambda: op_claim(job_id, owner, at))

    async def take_over(self, job_id: str, owner: str, reason: str) -> int | None:
        at = now()
        return await self.store._run(lambda: op_take_over(job_id, owner, reason, at))

    async def claim_pending(self, owner: str, limit: int) -> list[str]:
        if limit <= 0:
            return []
        at, skip_locked = now(), self._skip_locked
        return await self.store._run(lambda: op_claim_pending(owner, limit, skip_locked, at))

    async def heartbeat(self, owner: str, job_ids: Sequence[str]) -> dict[str, bool]:
        ids = tuple(job_ids)
        return await self.store._run(lambda: op_heartbeat(owner, ids))

    async def recover(self, lease: float, by: str) -> tuple[Recovered, Recovered]:
        """``(resumed, lost)``: ``(job id, reason)`` of each job whose lease lapsed."""
        return await self.store._run(lambda: op_recover(lease, by))

    async def release(self, job_id: str, owner: str, why: str) -> bool:
        """Hand a job ``owner`` holds back to ``pending`` (``why``: its process is stopping)."""
        return await self.store._run(lambda: op_release(job_id, owner, why))

    async def progress(self, job_id: str, owner: str, label: str | None, steps: int) -> bool:
        return await self.store._run(lambda: op_progress(job_id, owner, label, steps))

    async def finish(
        self,
        job_id: str,
        owner: str,
        state: JobState,
        *,
        summary: str | None = None,
        result: Any = None,
        result_ref: str | None = None,
        error: str | None = None,
        steps: int = 0,
        retry_for: float | None = None,
    ) -> bool:
        """Write the job's end (``retry_for``: how long to keep trying across dropped
        connections, when longer than the store's own window is worth it)."""
        at = now()
        return await self.store._run(
            lambda: op_finish(
                job_id,
                owner,
                state,
                summary=summary,
                result=result,
                result_ref=result_ref,
                error=error,
                steps=steps,
                at=at,
            ),
            retry_for=retry_for,
        )

    async def cancel(self, job_id: str, reason: str) -> tuple[str, bool] | None:
        at = now()
        return await self.store._run(lambda: op_cancel(job_id, reason, at))

    async def take_notices(self, session_id: str) -> list[JobRecord]:
        at = now()
        return await self.store._run(lambda: op_take_notices(session_id, at))

    async def get(self, job_id: str) -> JobRecord | None:
        return await self.store._run(lambda: op_get(job_id), write=False)

    async def find(self, prefix: str, session_id: str | None = None) -> list[str]:
        return await self.store._run(lambda: op_find_ids("jobs", prefix, session_id), write=False)

    async def list(
        self, *, session_id: str | None = None, state: str | None = None, limit: int = 50
    ) -> list[JobRecord]:
        return await self.store._run(lambda: op_list(session_id, state, limit), write=False)
