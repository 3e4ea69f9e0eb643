"""The ``schedules`` and ``schedule_fires`` tables: firing each slot exactly once.

One tick of one schedule is one transaction (:func:`op_tick`): read the schedule (``FOR
UPDATE`` in PostgreSQL; SQLite serialises writers with ``BEGIN IMMEDIATE``), work out
the due slots since its cursor and what the missed-slot policy fires of them, and for
each fired slot insert the ``schedule_fires`` row *and* the job that runs it; then move
the cursor to now. Exactly-once is the database's: ``schedule_fires`` has the primary
key (schedule, slot), the insert is ``ON CONFLICT DO NOTHING``, and the job is only made
when the insert made a row, in the same transaction, under a job id derived from the
slot (a second primary key on the same fact). Any number of schedulers may tick the same
schedules at once.

A slot is *on time* when a tick first sees it at most ``grace`` seconds after its time;
every on-time slot fires (``how`` = ``due``), whatever the policy and however many are due
at once (a tick fires at most :data:`FIRE_LIMIT` of them per transaction and goes on in
the next one, at the same instant). Older slots were *missed* (nothing was running
then), and only they follow the missed-slot policy (``missed``):

- ``skip``: they are skipped (counted in ``skipped``);
- ``once``: one run stands for all of them: the newest missed slot fires (``late``), the
  rest are skipped;
- ``catch_up``: the newest ``catch_up_limit`` missed slots fire (``late``), oldest first;
  older ones are skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, TypeAlias

from ..jobs.store import NewJob, op_create_job
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
from .timing import Timing

__all__ = ["FIRE_LIMIT"]

MissedPolicy: TypeAlias = Literal["skip", "once", "catch_up"]
MISSED_POLICIES: tuple[MissedPolicy, ...] = ("skip", "once", "catch_up")

FIRE_LIMIT = 1000
"""On-time slots one transaction of a tick fires at most; the tick goes on with the rest
in another transaction (see the module docstring)."""


@dataclass(frozen=True, slots=True)
class NewSchedule:
    id: str
    name: str
    session_id: str
    action: dict[str, Any]  # {"kind": "prompt", "prompt", "agent"} | {"kind": "workflow", ...}
    timing: Timing
    missed: MissedPolicy = "skip"
    catch_up_limit: int = 10
    created_by: str | None = None
    start: datetime | None = None  # the cursor: slots after it are due (default: now)
    creator: dict[str, Any] | None = None  # whose it is (tooldeck.jobs.policy.record_creator)


@dataclass(frozen=True, slots=True)
class ScheduleRecord:
    id: str
    name: str
    session_id: str
    action: dict[str, Any]
    timing: Timing
    missed: MissedPolicy
    catch_up_limit: int
    state: str
    cursor_at: datetime
    fired: int
    skipped: int
    created_by: str | None
    created_at: datetime
    updated_at: datetime
    creator: dict[str, Any] | None = None  # None: made before migration 5, its runs refused

    def next_times(self, count: int = 3, after: datetime | None = None) -> list[datetime]:
        return self.timing.next_times(max(self.cursor_at, after or self.cursor_at), count)

    def describe_action(self) -> str:
        if self.action.get("kind") == "workflow":
            return f"workflow {self.action.get('workflow')}"
        return f"prompt {str(self.action.get('prompt', ''))[:60]!r}"


@dataclass(frozen=True, slots=True)
class Fire:
    schedule_id: str
    slot: datetime
    how: str
    job_id: str
    fired_by: str
    fired_at: datetime


@dataclass(frozen=True, slots=True)
class TickOutcome:
    """What a tick did to one schedule: the slots it fired, the missed slots it skipped,
    whether the schedule is finished, the fired jobs that run on DBOS (``dbos_jobs``), and
    whether on-time slots are left for another transaction of the tick (``more``)."""

    schedule_id: str
    fired: tuple[Fire, ...] = ()
    skipped: int = 0
    finished: bool = False
    dbos_jobs: tuple[str, ...] = ()
    more: bool = False


_COLUMNS = (
    "id, name, session_id, CAST(action AS TEXT), CAST(timing AS TEXT), tz, missed, "
    "catch_up_limit, state, cursor_at, fired, skipped, created_by, created_at, updated_at, "
    "CAST(creator AS TEXT)"
)


def _schedule(r: Any) -> ScheduleRecord:
    return ScheduleRecord(
        id=str(r[0]),
        name=str(r[1]),
        session_id=str(r[2]),
        action=from_json(r[3]) or {},
        timing=Timing.from_json(from_json(r[4]) or {}, str(r[5])),
        missed=r[6],
        catch_up_limit=int(r[7]),
        state=str(r[8]),
        cursor_at=as_datetime(r[9]) or now(),
        fired=int(r[10]),
        skipped=int(r[11]),
        created_by=r[12],
        created_at=as_datetime(r[13]) or now(),
        updated_at=as_datetime(r[14]) or now(),
        creator=from_json(r[15]),
    )


def slot_job_id(schedule_id: str, slot: datetime) -> str:
    """The id of the job a slot runs: one per (schedule, slot), like the fire row."""
    return f"job-{schedule_id}-{slot:%Y%m%dT%H%M%S%f}Z"


def slot_job(schedule: ScheduleRecord, slot: datetime, how: str) -> NewJob:
    action = schedule.action
    spec: dict[str, Any] = {"schedule": schedule.id, "slot": slot.isoformat(), "how": how}
    for key in ("max_steps", "time_budget", "home"):
        if key in action:
            spec[key] = action[key]
    if action.get("kind") == "workflow":
        spec.update(workflow=action.get("workflow"), inputs=action.get("inputs") or {})
        kind: Literal["agent", "workflow"] = "workflow"
        task = f"Run workflow {action.get('workflow')} (schedule {schedule.name})"
    else:
        kind, task = "agent", str(action.get("prompt", ""))
    # whose it is, always: a job without it (a schedule made before migration 5) is refused
    spec["creator"] = schedule.creator
    if isinstance(schedule.creator, dict) and isinstance(schedule.creator.get("tools"), list):
        spec["tools"] = schedule.creator["tools"]
    return NewJob(
        id=slot_job_id(schedule.id, slot),
        session_id=schedule.session_id,
        task=task,
        kind=kind,
        agent=action.get("agent"),
        spec=spec,
        dispatch="dbos" if action.get("dispatch") == "dbos" else "embedded",
        origin=f"schedule:{schedule.id}",
    )


def op_create(s: NewSchedule, at: datetime | None = None) -> Op[None]:
    at = at or now()
    if (yield from written_before("schedules", s.id, at, "schedule")):
        return  # this call's earlier try wrote it (its commit's answer was lost)
    yield Q(
        "INSERT INTO schedules (id, name, session_id, action, timing, tz, missed, "
        "catch_up_limit, state, cursor_at, created_by, created_at, updated_at, creator) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'active', ?, ?, ?, ?, ?)",
        (
            s.id,
            s.name,
            s.session_id,
            Json(s.action),
            Json(s.timing.to_json()),
            s.timing.tz,
            s.missed,
            s.catch_up_limit,
            s.start or at,
            s.created_by,
            at,
            at,
            Json(s.creator) if s.creator is not None else None,
        ),
    )


def _plan(
    schedule: ScheduleRecord, at: datetime, grace: float
) -> tuple[list[tuple[datetime, str]], int, bool]:
    """The slots in ``(cursor, at]`` this transaction fires, oldest first, and how
    (``late``: standing for missed ones, ``due``: on time), how many missed slots it
    skips, and whether on-time slots are left over (past :data:`FIRE_LIMIT`)."""
    timing, cursor = schedule.timing, schedule.cursor_at
    try:
        # the newest instant a missed slot can have (slots are whole microseconds)
        edge = at - timedelta(seconds=max(grace, 0.0)) - timedelta(microseconds=1)
    except OverflowError:  # a grace longer than the calendar: nothing is ever missed
        edge = cursor
    chosen: list[tuple[datetime, str]] = []
    skipped = 0
    if edge > cursor:
        keep = max(schedule.catch_up_limit, 1) if schedule.missed == "catch_up" else 1
        missed, total = timing.due(cursor, edge, keep)
        fire = missed if schedule.missed != "skip" else []
        chosen = [(slot, "late") for slot in fire]
        skipped = total - len(fire)
    on_time = timing.between(max(cursor, edge), at, FIRE_LIMIT + 1)
    chosen += [(slot, "due") for slot in on_time[:FIRE_LIMIT]]
    return chosen, skipped, len(on_time) > FIRE_LIMIT


def _ticked(schedule: ScheduleRecord, at: datetime, by: str, stamp: datetime) -> Op[TickOutcome]:
    """What this call's earlier try of :func:`op_tick` did (its commit's answer was lost):
    the slots it fired (at ``stamp``), its jobs for DBOS, whether on-time slots are left;
    the missed slots it skipped are counted in the row, not said again."""
    rows = yield Q(
        "SELECT f.slot, f.how, f.job_id, j.dispatch FROM schedule_fires f "
        "LEFT JOIN jobs j ON j.id = f.job_id "
        "WHERE f.schedule_id = ? AND f.fired_by = ? AND f.fired_at = ? ORDER BY f.slot",
        (schedule.id, by, stamp),
    )
    fired = tuple(
        Fire(schedule.id, as_datetime(r[0]) or at, str(r[1]), str(r[2]), by, stamp)
        for r in rows.rows
    )
    dbos = tuple(str(r[2]) for r in rows.rows if r[3] == "dbos")
    more = schedule.state == "active" and schedule.cursor_at < at
    return TickOutcome(schedule.id, fired, 0, schedule.state == "finished", dbos, more)


def op_tick(
    schedule_id: str,
    at: datetime,
    by: str,
    grace: float,
    lock: bool,
    stamp: datetime | None = None,
) -> Op[TickOutcome | None]:
    """One tick of one schedule (see the module docstring); ``None`` when not active.

    ``stamp``: the call's time, fixed when the call is made; it marks the fires and the
    schedule's ``updated_at`` this call writes, so a second run of the call (its commit's
    answer lost) answers what the first one fired instead of nothing."""
    stamp = stamp or now()
    row = (
        yield Q(
            f"SELECT {_COLUMNS} FROM schedules WHERE id = ?" + (" FOR UPDATE" if lock else ""),
            (schedule_id,),
        )
    ).one()
    if row is None:
        return None
    schedule = _schedule(row)
    if schedule.updated_at == stamp:  # this call's earlier try wrote it
        return (yield from _ticked(schedule, at, by, stamp))
    if schedule.state != "active":
        return None
    if at <= schedule.cursor_at:
        return TickOutcome(schedule_id)
    chosen, skipped, more = _plan(schedule, at, grace)
    fired: list[Fire] = []
    dbos: list[str] = []
    for slot, how in chosen:
        job = slot_job(schedule, slot, how)
        made = yield Q(
            "INSERT INTO schedule_fires (schedule_id, slot, how, job_id, fired_by, fired_at) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (schedule_id, slot) DO NOTHING "
            "RETURNING schedule_id",
            (schedule.id, slot, how, job.id, by, stamp),
        )
        if made.rows:
            yield from op_create_job(job)
            fired.append(Fire(schedule.id, slot, how, job.id, by, stamp))
            if job.dispatch == "dbos":
                dbos.append(job.id)
    # with on-time slots left, the cursor stops at the last one fired (the tick goes on)
    cursor = chosen[-1][0] if more else at
    finished = (
        not more
        and schedule.timing.kind == "once"
        and next(schedule.timing.after(at), None) is None
    )
    yield Q(
        "UPDATE schedules SET cursor_at = ?, fired = fired + ?, skipped = skipped + ?, "
        "state = ?, updated_at = ? WHERE id = ?",
        (cursor, len(fired), skipped, "finished" if finished else "active", stamp, schedule.id),
    )
    return TickOutcome(schedule.id, tuple(fired), skipped, finished, tuple(dbos), more)


def op_fire_now(
    schedule_id: str, at: datetime, by: str, stamp: datetime | None = None
) -> Op[Fire | None]:
    """``run-now``: one manual fire at ``at`` (its own slot; the cursor is not moved);
    ``None`` when that slot fired already, unless this call's earlier try fired it (its
    fire row says ``stamp``, the call's time fixed when it was made)."""
    stamp = stamp or now()
    row = (yield Q(f"SELECT {_COLUMNS} FROM schedules WHERE id = ?", (schedule_id,))).one()
    if row is None:
        return None
    schedule = _schedule(row)
    job = slot_job(schedule, at, "manual")
    fire = Fire(schedule.id, at, "manual", job.id, by, stamp)
    made = yield Q(
        "INSERT INTO schedule_fires (schedule_id, slot, how, job_id, fired_by, fired_at) "
        "VALUES (?, ?, 'manual', ?, ?, ?) ON CONFLICT (schedule_id, slot) DO NOTHING "
        "RETURNING schedule_id",
        (schedule.id, at, job.id, by, stamp),
    )
    if not made.rows:
        mine = yield Q(
            "SELECT job_id FROM schedule_fires WHERE schedule_id = ? AND slot = ? "
            "AND how = 'manual' AND fired_by = ? AND fired_at = ?",
            (schedule.id, at, by, stamp),
        )
        return fire if mine.rows else None
    yield from op_create_job(job)
    yield Q(
        "UPDATE schedules SET fired = fired + 1, updated_at = ? WHERE id = ?", (stamp, schedule.id)
    )
    return fire


def op_cancel(schedule_id: str) -> Op[str | None]:
    """Cancel; the state it is in after (``None``: no such schedule)."""
    yield Q(
        "UPDATE schedules SET state = 'cancelled', updated_at = ? "
        "WHERE id = ? AND state = 'active'",
        (now(), schedule_id),
    )
    row = (yield Q("SELECT state FROM schedules WHERE id = ?", (schedule_id,))).one()
    return str(row[0]) if row else None


def op_get(schedule_id: str) -> Op[ScheduleRecord | None]:
    row = (yield Q(f"SELECT {_COLUMNS} FROM schedules WHERE id = ?", (schedule_id,))).one()
    return _schedule(row) if row else None


def op_list(state: str | None, session_id: str | None, limit: int) -> Op[list[ScheduleRecord]]:
    where, params = [], []
    if state is not None:
        where.append("state = ?")
        params.append(state)
    if session_id is not None:
        where.append("session_id = ?")
        params.append(session_id)
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    rows = yield Q(
        f"SELECT {_COLUMNS} FROM schedules{clause} ORDER BY created_at DESC, id LIMIT ?",
        (*params, limit),
    )
    return [_schedule(r) for r in rows.rows]


def op_active_ids() -> Op[list[str]]:
    rows = yield Q("SELECT id FROM schedules WHERE state = 'active' ORDER BY id")
    return [str(r[0]) for r in rows.rows]


def op_fires(schedule_id: str, limit: int) -> Op[list[Fire]]:
    rows = yield Q(
        "SELECT schedule_id, slot, how, job_id, fired_by, fired_at FROM schedule_fires "
        "WHERE schedule_id = ? ORDER BY slot DESC LIMIT ?",
        (schedule_id, limit),
    )
    return [
        Fire(
            str(r[0]),
            as_datetime(r[1]) or now(),
            str(r[2]),
            str(r[3]),
            str(r[4]),
            as_datetime(r[5]) or now(),
        )
        for r in rows.rows
    ]


class ScheduleTable:
    """The schedule operations on one (opened) :class:`WorkflowStore` (each handed to the
    store as a function that makes it, so it is run again after a dropped connection)."""

    def __init__(self, store: WorkflowStore):
        self.store = store

    async def create(self, schedule: NewSchedule) -> None:
        at = now()
        await self.store._run(lambda: op_create(schedule, at))

    async def tick(
        self, schedule_id: str, at: datetime, by: str, grace: float
    ) -> TickOutcome | None:
        lock, stamp = self.store.kind == "postgres", now()
        return await self.store._run(lambda: op_tick(schedule_id, at, by, grace, lock, stamp))

    async def fire_now(self, schedule_id: str, at: datetime, by: str) -> Fire | None:
        stamp = now()
        return await self.store._run(lambda: op_fire_now(schedule_id, at, by, stamp))

    async def cancel(self, schedule_id: str) -> str | None:
        return await self.store._run(lambda: op_cancel(schedule_id))

    async def get(self, schedule_id: str) -> ScheduleRecord | None:
        return await self.store._run(lambda: op_get(schedule_id), write=False)

    async def find(self, prefix: str, session_id: str | None = None) -> list[str]:
        return await self.store._run(
            lambda: op_find_ids("schedules", prefix, session_id), write=False
        )

    async def active_ids(self) -> list[str]:
        return await self.store._run(op_active_ids, write=False)

    async def fires(self, schedule_id: str, limit: int = 100) -> list[Fire]:
        return await self.store._run(lambda: op_fires(schedule_id, limit), write=False)

    async def list(
        self, *, state: str | None = None, session_id: str | None = None, limit: int = 50
    ) -> list[ScheduleRecord]:
        return await self.store._run(lambda: op_list(state, session_id, limit), write=False)
