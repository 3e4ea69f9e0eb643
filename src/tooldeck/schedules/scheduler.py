"""The scheduler loop, and :class:`ScheduleBook`: making, reading and cancelling schedules.

A :class:`Scheduler` ticks every active schedule of a store (each tick one transaction,
:func:`tooldeck.schedules.store.op_tick`), then sleeps until the soonest slot after any
schedule's cursor (at most ``poll`` seconds; not at all when one came due during the
tick). A fired slot becomes a job row in the same transaction; the job is run by a job
manager (this process's, if it serves pending jobs; ``tooldeck scheduler`` runs one) or,
for DBOS schedules, is enqueued on the jobs queue right after the commit (and again at
every start and after a failed hand-over: DBOS deduplicates by the job's id, so a crash
between the commit and the enqueue loses nothing). Any number of schedulers can run
against one database: the database decides who fires each slot.

The clock is a parameter (``clock() -> aware datetime``), so tests move time by hand,
across a daylight-saving change or a week of downtime, without sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..errors import TooldeckError, exception_line
from ..jobs.policy import record_creator
from ..jobs.store import JobTable, by_id_or_prefix
from ..workflows.store.base import WorkflowStore
from ..workflows.store.protocol import StoreUnavailable
from .store import (
    MISSED_POLICIES,
    Fire,
    NewSchedule,
    ScheduleRecord,
    ScheduleTable,
    TickOutcome,
)
from .timing import Timing, TimingError

__all__ = ["default_owner"]

_log = logging.getLogger("tooldeck.schedules")


def utc_now() -> datetime:
    return datetime.now(UTC)


class ScheduleError(TooldeckError, ValueError):
    """A schedule request that cannot be carried out; the message says what to fix."""


@dataclass
class SchedulerStats:
    ticks: int = 0
    fired: int = 0
    skipped: int = 0
    queued: int = 0  # jobs handed to DBOS
    fires: list[Fire] = field(default_factory=list)


def default_owner() -> str:
    """A scheduler's name when none is given: host, process id and a random suffix."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:4]}"


def _extra(event: str, **fields: Any) -> dict[str, Any]:
    """The ``extra`` of a log record: what happened, with what values (the shape of
    ``tooldeck scheduler``'s log, :mod:`tooldeck.cli.worker_log`)."""
    return {"event": event, "fields": fields}


def _iso(slot: datetime) -> str:
    return slot.astimezone(UTC).isoformat().replace("+00:00", "Z")


class Scheduler:
    """Fires the due slots of every active schedule in ``store`` (see the module doc).

    ``grace``: seconds after its time a slot still counts as on time (older ones were
    missed and follow the schedule's missed-slot policy); ``queue``: a
    :class:`~tooldeck.jobs.durable.DbosJobQueue` for schedules whose jobs run on DBOS;
    ``on_fire(fires)``: told after each tick that fired something (e.g. to wake a job
    manager).

    It logs (logger ``tooldeck.schedules``) one record per fired slot (``fired``), per
    schedule that skipped missed slots (``skipped``) or finished (``finished``), per
    hand-over to DBOS that failed (``not_queued``) or succeeded late (``queued``), and per
    failed tick (``db_retrying`` when the database did not answer, else ``tick_failed``);
    each record's ``extra`` names its event and values.
    """

    def __init__(
        self,
        store: WorkflowStore,
        *,
        clock: Callable[[], datetime] = utc_now,
        owner: str | None = None,
        poll: float = 1.0,
        grace: float = 60.0,
        queue: Any = None,
        on_fire: Callable[[Sequence[Fire]], Any] | None = None,
    ) -> None:
        self.store = store
        self.table = ScheduleTable(store)
        self.jobs = JobTable(store)
        self.clock = clock
        self.owner = owner or default_owner()
        self.poll = poll
        self.grace = grace
        self.queue = queue
        self.on_fire = on_fire
        self.stats = SchedulerStats()
        self._stop = asyncio.Event()
        self._unsent: str | None = None  # why pending DBOS jobs are not handed over yet

    async def tick(self, at: datetime | None = None) -> list[TickOutcome]:
        """One pass over the active schedules at ``at`` (default: the clock)."""
        at = (at or self.clock()).astimezone(UTC)
        outcomes: list[TickOutcome] = []
        for schedule_id in await self.table.active_ids():
            outcome = await self._tick_one(schedule_id, at)
            if outcome is not None:
                outcomes.append(outcome)
                self._say(outcome)
        fired = [f for o in outcomes for f in o.fired]
        self.stats.ticks += 1
        self.stats.fired += len(fired)
        self.stats.skipped += sum(o.skipped for o in outcomes)
        self.stats.fires.extend(fired)
        if len(self.stats.fires) > 10_000:
            del self.stats.fires[:5_000]
        if fired:
            await self._hand_over(outcomes, fired)
        return outcomes

    async def _tick_one(self, schedule_id: str, at: datetime) -> TickOutcome | None:
        """One schedule at ``at``: one transaction, or several when more on-time slots
        are due than one fires (:data:`~tooldeck.schedules.store.FIRE_LIMIT`)."""
        parts: list[TickOutcome] = []
        while True:
            outcome = await self.table.tick(schedule_id, at, self.owner, self.grace)
            if outcome is None:
                break
            parts.append(outcome)
            if not outcome.more:
                break
        if not parts:
            return None
        return TickOutcome(
            schedule_id,
            tuple(f for p in parts for f in p.fired),
            sum(p.skipped for p in parts),
            parts[-1].finished,
            tuple(j for p in parts for j in p.dbos_jobs),
        )

    @staticmethod
    def _say(outcome: TickOutcome) -> None:
        if outcome.skipped:
            _log.warning(
                "%s: %d missed slot(s) skipped",
                outcome.schedule_id,
                outcome.skipped,
                extra=_extra("skipped", schedule=outcome.schedule_id, skipped=outcome.skipped),
            )
        for fire in outcome.fired:
            dispatch = "dbos" if fire.job_id in outcome.dbos_jobs else "embedded"
            when = "on time" if fire.how == "due" else fire.how
            _log.info(
                "%s slot %s (%s): job %s%s",
                fire.schedule_id,
                _iso(fire.slot),
                when,
                fire.job_id,
                " for DBOS" if dispatch == "dbos" else "",
                extra=_extra(
                    "fired",
                    schedule=fire.schedule_id,
                    slot=_iso(fire.slot),
                    how=fire.how,
                    job=fire.job_id,
                    dispatch=dispatch,
                ),
            )
        if outcome.finished:
            _log.info(
                "%s: its one time has fired; finished",
                outcome.schedule_id,
                extra=_extra("finished", schedule=outcome.schedule_id),
            )

    async def _hand_over(self, outcomes: Sequence[TickOutcome], fired: Sequence[Fire]) -> None:
        for job_id in (j for o in outcomes for j in o.dbos_jobs):
            if self.queue is None:
                _log.warning(
                    "job %s runs on DBOS workers, but this scheduler hands no job to DBOS "
                    "(that needs PostgreSQL and a DBOS queue): it stays pending",
                    job_id,
                    extra=_extra("not_queued", job=job_id, error="no DBOS queue"),
                )
            elif self._unsent is None:  # else the next round hands every pending one over
                try:
                    await self.queue.submit(job_id)
                except Exception as exc:
                    self._not_sent(exc)
                else:
                    self.stats.queued += 1
        if self.on_fire is not None:
            maybe = self.on_fire(fired)
            if asyncio.iscoroutine(maybe):
                await maybe

    def _not_sent(self, exc: BaseException) -> None:
        """A hand-over to DBOS failed: said once (again when the reason changes), and
        every pending DBOS job is handed over at the next round (:meth:`requeue`)."""
        why = exception_line(exc)
        if why != self._unsent:
            _log.warning(
                "pending DBOS jobs not handed to DBOS yet, again in %gs: %s",
                self.poll,
                why,
                extra=_extra("not_queued", error=why),
            )
        self._unsent = why

    async def requeue(self) -> int:
        """Enqueue every pending DBOS job again (DBOS deduplicates by the job's id), so a
        job whose row was written by a process that died before enqueueing it still runs."""
        if self.queue is None:
            return 0
        pending = await self.jobs.list(state="pending", limit=10_000)
        count = 0
        for job in pending:
            if job.dispatch == "dbos":
                await self.queue.submit(job.id)
                count += 1
        return count

    async def _requeue_unsent(self) -> None:
        try:
            count = await self.requeue()
        except StoreUnavailable:
            raise  # the database is away: the tick's failure says so
        except Exception as exc:
            self._not_sent(exc)
            return
        self._unsent = None
        self.stats.queued += count
        if count:
            _log.info(
                "%d pending DBOS job(s) handed to DBOS",
                count,
                extra=_extra("queued", jobs=count),
            )

    def stop(self) -> None:
        self._stop.set()

    async def _pause(self) -> None:
        """Sleep until the soonest slot not yet ticked, at most ``poll`` seconds: none at
        all when a slot came due while the tick ran (it is after its schedule's cursor)."""
        wait = self.poll
        now = self.clock()
        for schedule in await self.table.list(state="active", limit=1000):
            upcoming = next(schedule.timing.after(schedule.cursor_at), None)
            if upcoming is not None:
                wait = min(wait, max(0.0, (upcoming - now).total_seconds()))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), max(wait, 0.001))

    async def run(self, ready: Callable[[Scheduler], None] | None = None) -> SchedulerStats:
        """Tick until :meth:`stop`; a tick that fails (database away) is retried. With a
        queue, every pending DBOS job is handed to DBOS first (and again after a hand-over
        failed: DBOS deduplicates)."""
        self._stop.clear()
        if self.queue is not None:
            self._unsent = "not yet tried"
        if ready is not None:
            ready(self)
        while not self._stop.is_set():
            try:
                if self._unsent is not None:
                    await self._requeue_unsent()
                await self.tick()
                _log.debug("tick done", extra=_extra("db_ok"))
                await self._pause()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                why = exception_line(exc)
                event = "db_retrying" if isinstance(exc, StoreUnavailable) else "tick_failed"
                _log.warning(
                    "tick failed, again in %gs: %s",
                    self.poll,
                    why,
                    extra=_extra(event, source="tick", error=why),
                )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), self.poll)
        return self.stats


def parse_timing(
    *,
    cron: str | None = None,
    every_seconds: float | None = None,
    at: str | None = None,
    tz: str = "UTC",
    now: datetime | None = None,
) -> Timing:
    """The :class:`Timing` of exactly one of ``cron``, ``every_seconds`` and ``at``."""
    given = [k for k, v in (("cron", cron), ("every_seconds", every_seconds), ("at", at)) if v]
    if len(given) != 1:
        raise ScheduleError(
            "give exactly one of cron (e.g. '0 8 * * *'), every_seconds or at (an ISO time)"
            + (f"; got {', '.join(given)}" if given else "")
        )
    try:
        if cron:
            return Timing.cron(cron, tz)
        if every_seconds:
            return Timing.interval(every_seconds, (now or utc_now()), tz)
        assert at is not None
        return Timing.once(at, tz)
    except TimingError as exc:
        raise ScheduleError(str(exc)) from exc


class ScheduleBook:
    """Schedules in one store: create (validated), list, show, cancel, run now."""

    def __init__(self, store: WorkflowStore, *, clock: Callable[[], datetime] = utc_now) -> None:
        self.store = store
        self.table = ScheduleTable(store)
        self.clock = clock

    @staticmethod
    def action(
        *,
        prompt: str | None = None,
        workflow: str | None = None,
        inputs: Any = None,
        agent: str | None = None,
        dispatch: str = "embedded",
        workflows: Sequence[str] | None = None,
    ) -> dict[str, Any]:
        """The stored action of exactly one of ``prompt`` and ``workflow``."""
        if bool(prompt) == bool(workflow):
            raise ScheduleError("give exactly one of prompt (a new turn) or workflow (a run)")
        if dispatch not in ("embedded", "dbos"):
            raise ScheduleError("dispatch must be 'embedded' or 'dbos'")
        if prompt:
            out: dict[str, Any] = {"kind": "prompt", "prompt": prompt, "dispatch": dispatch}
            if agent:
                out["agent"] = agent
            return out
        if workflows is not None and workflow not in workflows:
            raise ScheduleError(
                f"unknown workflow {workflow!r} (known: {', '.join(workflows) or 'none'})"
            )
        if isinstance(inputs, str):
            try:
                inputs = json.loads(inputs) if inputs.strip() else {}
            except json.JSONDecodeError as exc:
                raise ScheduleError(f"inputs are not JSON: {exc}") from exc
        if not isinstance(inputs or {}, dict):
            raise ScheduleError("a workflow's inputs must be a JSON object")
        return {
            "kind": "workflow",
            "workflow": workflow,
            "inputs": inputs or {},
            "dispatch": dispatch,
        }

    async def create(
        self,
        *,
        name: str,
        session_id: str,
        action: dict[str, Any],
        timing: Timing,
        missed: str = "skip",
        catch_up_limit: int = 10,
        created_by: str | None = None,
        creator: dict[str, Any] | None = None,
    ) -> ScheduleRecord:
        """A new schedule of session ``session_id``; ``creator``: whose it is, as
        :func:`tooldeck.jobs.policy.record_creator` records it (default: that session
        with the empty policy, the tiers decide, and no limit on its tools)."""
        if missed not in MISSED_POLICIES:
            raise ScheduleError(f"missed must be one of {', '.join(MISSED_POLICIES)}")
        if not 1 <= catch_up_limit <= 1000:
            raise ScheduleError("catch_up_limit must be between 1 and 1000")
        now = self.clock()
        if timing.kind == "once" and timing.at is not None and timing.at <= now:
            raise ScheduleError(f"{timing.describe()} is in the past")
        schedule_id = f"sch-{uuid.uuid4().hex[:10]}"
        await self.table.create(
            NewSchedule(
                schedule_id,
                name,
                session_id,
                action,
                timing,
                missed,
                catch_up_limit,
                created_by,
                start=now,
                creator=creator if creator is not None else record_creator(None, session_id),
            )
        )
        made = await self.table.get(schedule_id)
        assert made is not None
        return made

    async def get(self, schedule_id: str, session_id: str | None = None) -> ScheduleRecord:
        """A schedule by id or unique id prefix; ``LookupError`` when there is none.

        ``session_id``: only that session's schedules are looked at (an ambiguous prefix
        names none of another session's)."""
        return await by_id_or_prefix(
            self.table.get, self.table.find, schedule_id, session_id, "schedule"
        )

    async def cancel(
        self, schedule_id: str, session_id: str | None = None
    ) -> tuple[ScheduleRecord, bool]:
        found = await self.get(schedule_id, session_id)
        state = await self.table.cancel(found.id)
        return found, state == "cancelled" and found.state == "active"

    async def run_now(
        self, schedule_id: str, by: str = "cli", session_id: str | None = None
    ) -> Fire:
        found = await self.get(schedule_id, session_id)
        fire = await self.table.fire_now(found.id, self.clock().astimezone(UTC), by)
        if fire is None:
            raise ScheduleError(f"schedule {found.id} fired at this very instant already")
        return fire
