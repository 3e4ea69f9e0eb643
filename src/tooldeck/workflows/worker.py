"""``tooldeck worker``: a process that runs workflow task turns from the DBOS queue.

Each task turn is one DBOS workflow (``tooldeck_task_turn``, id ``tooldeck-task:<task
id>``) that does two things, each retried with backoff when it raises:

1. **turn**: run the task turn (:meth:`WorkflowEngine.run_task`); its outcome is in the
   store when it ends. If the worker dies inside it, DBOS runs the workflow again on
   another worker: a task still ``running`` is handed to a new session (the takeover is a
   transition in the task's history) and its turn starts again from the prompt; a task
   already ``submitted`` is left alone, so an accepted result is never stored twice nor
   lost (the result and the state change commit in one transaction);
2. **advance**: schedule the tasks that became ready and finish the run; idempotent.

Neither is a DBOS step: the store already records what each did (a step's record would
cost two more database transactions per step and add nothing), and a workflow run again
after a crash finds it there: the turn sees its task submitted and does nothing.

Liveness: every worker renews a lease in the store's ``workers`` table. A live worker
that finds another's lease expired marks it ``lost`` (one worker wins) and has DBOS
re-enqueue the lost worker's pending workflows. A worker restarted with the same
``--id`` recovers its own pending workflows at once (DBOS does that at launch).

With a job runtime (``Worker(job_runtime=...)``, ``tooldeck worker --jobs N``) a worker
also runs background jobs from the ``tooldeck_jobs`` queue (``tooldeck_job``, one step:
:meth:`tooldeck.jobs.JobManager.run_job`); a worker without one does not listen to that
queue. A job whose worker died is taken over when DBOS runs its step again elsewhere.

DBOS keeps one instance per process, so one :class:`Worker` runs per process.

Log records (logger ``tooldeck.workflows.worker``) carry ``extra`` fields for
``tooldeck worker``'s log lines: ``event`` (``ready``, ``recovered``, ``took_over``,
``db_retrying``, ``db_ok``, ``lost_lease``, ``failed``, ``stopping``, ``unfinished``),
``task`` and ``run`` when a task is concerned, and ``fields`` (a dict).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from .._extras import needs_extra
from ..context import AbortSignal
from ..errors import TooldeckError
from ..errors import exception_line as _one_line
from ..jobs.durable import JOB_QUEUE, JOB_WORKFLOW
from ..jobs.runner import JobManager, JobRuntime
from ..telemetry.propagation import joined
from .durable import (
    APP_VERSION,
    DBOS_APP_NAME,
    DEFAULT_DBOS_SCHEMA,
    QUEUE,
    TASK_WORKFLOW,
    DbosExecutor,
    dbos_url,
)
from .engine import ModelFactory, WorkflowEngine
from .store import DEFAULT_SCHEMA, PostgresStore, redact_dsn
from .store.protocol import StoreUnavailable
from .store.workers import WorkerLeases

with needs_extra("dbos"):
    from dbos import DBOS

__all__ = ["Worker", "WorkerLost", "WorkerStats"]

_log = logging.getLogger("tooldeck.workflows.worker")
T = TypeVar("T")


def _extra(event: str, task_id: str | None = None, **fields: Any) -> dict[str, Any]:
    """The ``extra`` of a log record: what happened, to which task, with what values."""
    run, _, task = (task_id or "").rpartition(":")
    return {"event": event, "task": task or None, "run": run or None, "fields": fields}


_current: Worker | None = None


class WorkerLost(TooldeckError, RuntimeError):
    """This worker's lease ran out and another worker took its work over."""


@dataclass
class WorkerStats:
    turns_started: int = 0
    turns_finished: int = 0
    taken_over: list[str] = field(default_factory=list)


def _worker() -> Worker:
    if _current is None:
        raise RuntimeError("no tooldeck worker is running in this process")
    return _current


RETRY_SECONDS = float(os.environ.get("TOOLDECK_WORKER_RETRY_SECONDS", "2"))
"""First pause before a failed turn is run again (doubling after each try); read at import."""
TURN_ATTEMPTS = 5
NOTIFY_SECONDS = 1.0


class _GaveUp(Exception):
    """``what`` raised ``attempts`` times; ``errors``: what each try raised."""

    def __init__(self, what: str, errors: list[Exception]):
        super().__init__(f"{what} failed {len(errors)} times: {errors[-1]}")
        self.errors = errors


def _database_fault(exc: BaseException) -> bool:
    """``exc`` (or what caused it) is the database not answering: a dropped or refused
    connection, an outage longer than the store's retries, DBOS's own connection errors."""
    import psycopg
    from sqlalchemy.exc import DBAPIError

    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return False
        if isinstance(seen, StoreUnavailable | psycopg.OperationalError | psycopg.InterfaceError):
            return True
        if isinstance(seen, DBAPIError) and seen.connection_invalidated:
            return True
        if isinstance(seen, DBAPIError) and isinstance(
            seen.orig, psycopg.OperationalError | psycopg.InterfaceError
        ):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


async def _retried(what: str, call: Callable[[], Awaitable[T]], attempts: int, pause: float) -> T:
    """``await call()``, run again with backoff (``pause``, doubling) while it raises.

    What a DBOS step with retries did, without its two database transactions per step:
    the store records what a turn did, so a workflow run again after a crash needs no
    step record (see the module docstring). A try that failed because the database did
    not answer is part of an outage (``db_retrying``: the log folds it into the outage's
    two lines); any other failure is a warning of its own."""
    errors: list[Exception] = []
    while True:
        try:
            value = await call()
        except Exception as exc:
            errors.append(exc)
            if len(errors) >= attempts:
                raise _GaveUp(what, errors) from exc
            message = _one_line(exc)
            outage = _database_fault(exc)
            _log.log(
                logging.DEBUG if outage else logging.WARNING,
                "%s failed (try %d of %d), again in %gs: %s",
                what,
                len(errors),
                attempts,
                pause,
                message,
                extra=_extra("db_retrying", source=what, error=message) if outage else None,
            )
            await asyncio.sleep(pause)
            pause *= 2
        else:
            if errors and _database_fault(errors[-1]):
                _log.debug(
                    "%s succeeded after %d tries", what, len(errors) + 1, extra=_extra("db_ok")
                )
            return value


@DBOS.step(
    name="tooldeck_job_run",
    retries_allowed=True,
    interval_seconds=RETRY_SECONDS,
    max_attempts=TURN_ATTEMPTS,
)
async def _job_step(job_id: str) -> str:
    return await _worker().run_job(job_id)


@DBOS.workflow(name=JOB_WORKFLOW)
async def _job(job_id: str) -> str:
    worker = _worker()
    await worker.admit(f"job:{job_id}")
    try:
        return await _job_step(job_id)
    finally:
        worker.release(f"job:{job_id}")


@DBOS.workflow(name=TASK_WORKFLOW)
async def _task_turn(task_id: str, trace: dict[str, str] | None = None) -> str:
    """One task turn; ``trace``: the run's trace context (W3C headers), when it is traced."""
    worker = _worker()
    await worker.admit(task_id)
    with joined(trace):  # the turn's spans join the run's trace, from another process
        return await _turn_and_advance(worker, task_id)


async def _turn_and_advance(worker: Worker, task_id: str) -> str:
    try:
        try:
            state = await _retried(
                f"the turn of {task_id}",
                lambda: worker.run_turn(task_id),
                TURN_ATTEMPTS,
                RETRY_SECONDS,
            )
        except _GaveUp as exc:
            # The turn could not run at all, attempt after attempt: fail the task rather
            # than leave it running for ever, so the run can end.
            last = exc.errors[-1]
            state = await _retried(
                f"giving up {task_id}",
                lambda: worker.give_up(task_id, f"{type(last).__name__}: {last}"),
                8,
                RETRY_SECONDS,
            )
        await _retried(
            f"advancing after {task_id}", lambda: worker.advance(task_id), 8, RETRY_SECONDS / 2
        )
    finally:
        worker.release(task_id)
    return state


class Worker:
    """Runs task turns from the DBOS queue of the PostgreSQL database at ``dsn``.

    - ``model_factory``: ``(TaskRun) -> Model`` for every turn this worker runs;
    - ``worker_id``: the DBOS executor id and lease name (default host-pid-random); a
      worker restarted with the same id recovers its own unfinished turns at once;
    - ``concurrency``: turns at once on each worker (DBOS keeps one queue configuration
      in the database: the last worker to start sets it for all);
    - ``heartbeat`` / ``lease``: seconds between lease renewals / before a silent worker
      is taken over; ``poll``: how often the queue is polled;
    - ``on_lost``: called with the :class:`WorkerLost` as soon as this worker knows it
      lost its lease, before anything is shut down: a process that has nothing else to
      do ends there (``tooldeck worker`` exits with status 3 at once, as if killed: its
      turns are already another worker's, and DBOS would otherwise retry their steps
      here against a closed store for half a minute);
    - the rest configure the task turns as for :class:`WorkflowEngine`.
    """

    def __init__(
        self,
        dsn: str,
        model_factory: ModelFactory,
        *,
        worker_id: str | None = None,
        concurrency: int = 4,
        schema: str = DEFAULT_SCHEMA,
        dbos_schema: str = DEFAULT_DBOS_SCHEMA,
        heartbeat: float = 2.0,
        lease: float = 15.0,
        poll: float = 0.2,
        grace: float = 30.0,
        home: Path | str | None = None,
        web_provider: str | None = None,
        task_timeout: float = 600.0,
        tool_timeout: float | None = 120.0,
        job_runtime: JobRuntime | None = None,
        job_concurrency: int = 4,
        on_lost: Callable[[WorkerLost], None] | None = None,
    ):
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if lease <= heartbeat:
            raise ValueError("the lease must be longer than the heartbeat interval")
        self.dsn = dsn
        self.model_factory = model_factory
        self.id = worker_id or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:4]}"
        self.concurrency = concurrency
        self.schema = schema
        self.dbos_schema = dbos_schema
        self.heartbeat = heartbeat
        self.lease = lease
        self.poll = poll
        self.grace = grace
        self.engine_options: dict[str, Any] = {
            "home": home,
            "web_provider": web_provider,
            "task_timeout": task_timeout,
            "tool_timeout": tool_timeout,
        }
        self.job_runtime = job_runtime
        self.job_concurrency = job_concurrency
        self.on_lost = on_lost
        self._jobs: JobManager | None = None
        self.stats = WorkerStats()
        self._engine: WorkflowEngine | None = None
        self._store: PostgresStore | None = None
        self._leases: WorkerLeases | None = None
        self._signals: dict[str, AbortSignal] = {}  # task id -> its running turn's signal
        self._failed: dict[str, str] = {}  # task id -> why its last turn failed here
        self.resumed: dict[str, str] = {}  # task id -> why its running turn took it over
        self._stopping = asyncio.Event()
        self._parked = 0  # turns dequeued after stop() and left for another worker
        self._to_recover: set[str] = set()  # lost workers this one marked, not yet recovered
        self._flights: set[str] = set()  # DBOS workflows (turn + advance) running here
        self._idle = asyncio.Event()  # set while none is
        self._idle.set()

    # -- what the DBOS steps call -------------------------------------------------------------
    async def admit(self, task_id: str) -> None:
        """Count a DBOS workflow in flight here; a worker that is stopping never starts it.

        Dequeued while stopping, the workflow stays pending on this worker and is
        recovered elsewhere when the lease expires (or here, after a restart under the
        same id): this waits until the process ends.
        """
        if self._stopping.is_set():
            self._parked += 1
            await asyncio.Event().wait()
        self._flights.add(task_id)
        self._idle.clear()

    def release(self, task_id: str) -> None:
        self._flights.discard(task_id)
        if not self._flights:
            self._idle.set()

    async def run_turn(self, task_id: str) -> str:
        engine = self._require_engine()
        signal = AbortSignal()
        self._signals[task_id] = signal
        self.stats.turns_started += 1
        try:
            state = await engine.run_task(task_id, signal, take_over=self._why_again(task_id))
        except Exception as exc:
            # DBOS runs the step again, here: the next attempt's history says why.
            self._failed[task_id] = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            raise
        else:
            self._failed.pop(task_id, None)
        finally:
            self._signals.pop(task_id, None)
            self.resumed.pop(task_id, None)
            self.stats.turns_finished += 1
        return state or await engine.store.task_state(task_id) or "gone"

    def _why_again(self, task_id: str) -> Callable[[str | None], str]:
        """Why a task still ``running`` is taken over, for its history (what happened),
        from the session that holds it (asked only when the task is running); kept in
        :attr:`resumed` while the turn runs, for the worker's log line."""
        failed = self._failed.get(task_id)

        def why(holder: str | None) -> str:
            holder = holder or ""
            if failed is not None:
                reason = f"the turn failed on {self.id} ({failed}); it was run again"
            elif holder.endswith(f"@{self.id}"):
                reason = f"worker {self.id} restarted; DBOS recovered its unfinished turn"
            else:
                lost = holder.rsplit("@", 1)[1] if "@" in holder else "running it"
                reason = f"the worker {lost} was lost; DBOS restarted the turn on {self.id}"
            self.resumed[task_id] = reason
            return reason

        return why

    async def run_job(self, job_id: str) -> str:
        """Run one background job (the ``tooldeck_job`` step); its state at the end."""
        if self._jobs is None:
            raise RuntimeError("this worker runs no jobs (no job runtime)")
        job = await self._jobs.run_job(
            job_id, take_over=f"the worker running it was lost; DBOS restarted it on {self.id}"
        )
        return job.state if job is not None else "gone"

    async def give_up(self, task_id: str, why: str) -> str:
        engine = self._require_engine()
        reason = f"the turn failed {TURN_ATTEMPTS} times on {self.id}: {why}"[:2000]
        if not await engine.store.set_task_state(
            task_id, "failed", expect=("pending", "running"), reason=reason
        ):
            _log.info("task %s had already ended when its turn was given up", task_id)
        else:
            _log.error("%s", reason, extra=_extra("failed", task_id, reason=reason))
        return await engine.store.task_state(task_id) or "gone"

    async def advance(self, task_id: str) -> None:
        workflow_id, name = task_id.split(":", 1)
        await self._require_engine().advance(workflow_id, name)

    def _require_engine(self) -> WorkflowEngine:
        if self._engine is None:
            raise RuntimeError("the worker is not running")
        return self._engine

    # -- life cycle ---------------------------------------------------------------------------
    def stop(self) -> None:
        """Ask :meth:`run` to return (running turns get ``grace`` seconds to finish)."""
        self._stopping.set()

    async def run(self, ready: Callable[[Worker], None] | None = None) -> WorkerStats:
        """Serve the queue until :meth:`stop`; raises :class:`WorkerLost` if taken over."""
        global _current
        if _current is not None:
            raise RuntimeError("a tooldeck worker is already running in this process")
        _current = self
        lost = False
        try:
            # A store call in a turn rides out a connection blip for as long as the lease:
            # only a longer outage fails the turn (the worker runs it again).
            # A connection whose packets go unanswered (a silent network drop) fails
            # within about a third of the lease (TCP keepalives, tcp_user_timeout).
            self._store = PostgresStore(
                self.dsn,
                schema=self.schema,
                retry_for=self.lease,
                network_timeout=self.lease,
                connect_timeout=min(5.0, max(2.0, self.lease / 3)),
            )
            await self._store.open()
            self._leases = WorkerLeases(self._store)
            executor = DbosExecutor(self.dsn, dbos_schema=self.dbos_schema)
            self._engine = WorkflowEngine(
                self._store,
                self.model_factory,
                executor=executor,
                worker=self.id,
                advance_after_turn=False,  # the advance step does it, durably
                **self.engine_options,
            )
            if self.job_runtime is not None:
                self._jobs = JobManager(
                    self._store,
                    self.job_runtime,
                    concurrency=self.job_concurrency,
                    owner=self.id,
                    lease=self.lease,
                    heartbeat=self.heartbeat,
                    serve_pending=False,  # DBOS hands this worker its jobs
                )
                await self._jobs.open()
            DBOS(
                config={
                    "name": DBOS_APP_NAME,
                    "system_database_url": dbos_url(self.dsn),
                    "dbos_system_schema": self.dbos_schema,
                    "application_version": APP_VERSION,
                    "executor_id": self.id,
                    "log_level": "WARNING",
                    "db_engine_kwargs": {"connect_args": self._dbos_connect_args()},
                    # DBOS flushes notifications (of workflow events and streams, which
                    # tooldeck does not use) every 10 ms by default: a thread waking 100
                    # times a second, about 7% of a busy worker's CPU.
                    "notification_coalesce_sec": NOTIFY_SECONDS,
                }
            )
            DBOS.listen_queues([QUEUE, *([JOB_QUEUE] if self._jobs is not None else [])])
            # Launched from this thread, whose loop is running, so DBOS runs the queued
            # workflows on this loop: the store and the engine live here.
            DBOS.launch()
            await DBOS.register_queue_async(
                QUEUE,
                worker_concurrency=self.concurrency,
                polling_interval_sec=self.poll,
                on_conflict="always_update",
            )
            if self._jobs is not None:
                await DBOS.register_queue_async(
                    JOB_QUEUE,
                    worker_concurrency=self.job_concurrency,
                    polling_interval_sec=self.poll,
                    on_conflict="always_update",
                )
            # Registered (its lease starts) only now that it renews it: DBOS's launch can
            # take longer than a short lease on a loaded machine, and a worker registered
            # before it was marked lost by its peers while it was still starting.
            await self._leases.register(self.id, socket.gethostname(), os.getpid(), self.lease)
            _log.info(
                "serving %s (schema %s), %d turn(s) at once, lease %gs",
                redact_dsn(self.dsn),
                self.schema,
                self.concurrency,
                self.lease,
                extra=_extra("ready", concurrency=self.concurrency, lease=self.lease),
            )
            if ready is not None:
                ready(self)
            lost = await self._serve()
            if lost and self.on_lost is not None:
                self.on_lost(WorkerLost(self._lost_message()))
        finally:
            await self._shut_down(lost)
        if lost:
            raise WorkerLost(self._lost_message())
        return self.stats

    def _dbos_connect_args(self) -> dict[str, Any]:
        """DBOS's own connections: its default application name, and the store's
        keepalives and connect timeout (those the DSN does not set itself)."""
        assert self._store is not None
        options = {k: v for k, v in self._store.connect_params.items() if k != "autocommit"}
        return {"application_name": "dbos_transact", **options}

    def _lost_message(self) -> str:
        return f"worker {self.id} lost its lease; its turns were taken over"

    async def _serve(self) -> bool:
        """Renew the lease and take over lost workers until stopped; ``True`` if lost.

        A renewal that fails (PostgreSQL restarting, a network cut) is retried at every
        heartbeat; once the lease has run out unrenewed, other workers may have taken the
        turns over, so this worker stops as lost. A renewal that hangs (a connection that
        neither answers nor fails) counts as failed after the lease.
        """
        assert self._leases is not None
        loop = asyncio.get_running_loop()
        renewed = loop.time()
        while not self._stopping.is_set():
            try:
                alive = await asyncio.wait_for(self._leases.heartbeat(self.id), self.lease)
            except Exception as exc:
                why = _one_line(exc) if str(exc) else f"no answer within {self.lease:g}s"
                if loop.time() - renewed >= self.lease:
                    _log.error(
                        "could not renew the lease for %gs (%s); its turns are taken over",
                        self.lease,
                        why,
                        extra=_extra("lost_lease", error=why),
                    )
                    return True
                _log.warning(
                    "could not renew the lease: %s",
                    why,
                    extra=_extra("db_retrying", source="lease renewal", error=why),
                )
            else:
                if not alive:
                    _log.error(
                        "marked lost by another worker (no heartbeat within the lease of %gs); "
                        "its turns are taken over",
                        self.lease,
                        extra=_extra("lost_lease", error="marked lost"),
                    )
                    return True
                renewed = loop.time()
                _log.debug("lease renewed", extra=_extra("db_ok"))
                await self._take_over_lost()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.heartbeat)
        return False

    async def _take_over_lost(self) -> None:
        assert self._leases is not None
        try:
            self._to_recover.update(await self._leases.take_over_lost(self.id, self.lease))
        except Exception as exc:
            why = _one_line(exc)
            _log.warning(
                "could not look for lost workers: %s",
                why,
                extra=_extra("db_retrying", source="looking for lost workers", error=why),
            )
        for lost in sorted(self._to_recover):
            # Marked lost by this worker only: hand its unfinished DBOS workflows back to
            # the queue (the function DBOS's own launch-time recovery uses). Kept until it
            # succeeds: no other worker will take this one over again.
            try:
                handles = await asyncio.to_thread(DBOS._recover_pending_workflows, [lost])
            except Exception as exc:
                why = _one_line(exc)
                _log.warning(
                    "could not re-queue the turns of lost worker %s yet: %s",
                    lost,
                    why,
                    extra=_extra("db_retrying", source=f"taking over {lost}", error=why),
                )
                continue
            self._to_recover.discard(lost)
            self.stats.taken_over.append(lost)
            _log.warning(
                "lost worker %s (no heartbeat for %gs): %d turn(s) re-queued",
                lost,
                self.lease,
                len(handles),
                extra=_extra("took_over", lost=lost, turns=len(handles)),
            )

    async def _shut_down(self, lost: bool) -> None:
        global _current
        if self._flights and not lost:
            _log.info(
                "waiting up to %gs for %d running turn(s): %s",
                self.grace,
                len(self._flights),
                ", ".join(sorted(self._flights)),
                extra=_extra("stopping", running=sorted(self._flights), grace=self.grace),
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._idle.wait(), self.grace)
        busy = len(self._flights) + self._parked
        if lost:
            for signal in list(self._signals.values()):
                signal.abort("this worker lost its lease")
        with contextlib.suppress(Exception):
            if self._leases is not None and not lost and not busy:
                await self._leases.stop(self.id, "stopped")
                _log.debug("lease released", extra=_extra("db_ok"))  # it answered
        if busy:
            _log.warning(
                "%d turn(s) left unfinished (%s; %d not started): they resume when this "
                "worker's lease expires or it restarts with the same id",
                busy,
                ", ".join(sorted(self._flights)) or "none running",
                self._parked,
                extra=_extra("unfinished", running=sorted(self._flights), parked=self._parked),
            )
        try:
            if self._jobs is not None:
                await self._jobs.close(hand_back=False)
                self._jobs = None
            if self._engine is not None:
                await self._engine.executor.close()
            if self._store is not None:
                await self._store.close()
        finally:
            self._engine = None
            # DBOS made its thread pool this loop's default executor and shuts that pool
            # down: it runs on a thread of its own, and the loop gets a fresh pool after.
            loop = asyncio.get_running_loop()
            with ThreadPoolExecutor(1, thread_name_prefix="tooldeck-dbos-destroy") as own:
                await loop.run_in_executor(own, DBOS.destroy)
            loop.set_default_executor(ThreadPoolExecutor(thread_name_prefix="asyncio"))
            _current = None
