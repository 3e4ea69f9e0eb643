"""Background jobs on DBOS in the real PostgreSQL: ``tooldeck worker --jobs`` processes run
queued jobs; a worker SIGKILLed in the middle of a job has it taken over by another."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from test_jobs_processes import Processes, _text_lines, processes
from test_workflows_support import PG_DSN, is_ready
from test_workflows_workers import DbosTables
from tooldeck.jobs import JobManager, JobNotices, NewJob
from tooldeck.jobs.durable import DbosJobQueue
from tooldeck.workflows.store import PostgresStore

pytest_plugins = ["test_workflows_support"]

__all__ = ["processes"]  # a fixture, defined with the scheduler process tests

SCRIPT = Path(__file__).parent / "job_scripts" / "jobs.py"


class JobWorkers:
    def __init__(self, schema: str, log_dir: Path) -> None:
        self.schema = schema
        self.dbos_schema = f"{schema}_dbos"
        self.log_dir = log_dir
        self.procs: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}
        self.tables: DbosTables | None = None

    def make_dbos_tables(self) -> None:
        """Start making DBOS's tables now, on a thread (:class:`DbosTables`)."""
        self.tables = DbosTables(self.dbos_schema)

    def start(
        self,
        worker_id: str,
        lease: float = 3.0,
        script: Path = SCRIPT,
        extra: Sequence[str] = (),
        wait: bool = True,
    ) -> None:
        """Start a worker; wait until it is ready unless ``wait`` is false (then
        :meth:`wait_ready` does: workers started side by side start in the time of one)."""
        log = self.log_dir / f"{worker_id}.log"
        command = [
            sys.executable,
            "-c",
            "from tooldeck.cli import main; main()",
            "worker",
            "--dsn",
            PG_DSN,
            "--script",
            str(script),
            "--jobs",
            "2",
            "--id",
            worker_id,
            "--pg-schema",
            self.schema,
            "--dbos-schema",
            self.dbos_schema,
            "--lease",
            str(lease),
            "--heartbeat",
            str(lease / 6),
            *extra,
        ]
        env = {**os.environ, "TOOLDECK_WORKER_RETRY_SECONDS": "0.5", "COLUMNS": "200"}
        with log.open("wb") as out:
            proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
        self.procs[worker_id] = (proc, log)
        if wait:
            self.wait_ready(worker_id)

    def wait_ready(self, worker_id: str, timeout: float = 90) -> None:
        proc, log = self.procs[worker_id]
        deadline = time.monotonic() + timeout
        if self.tables is not None:
            self.tables.wait(timeout)
        while not is_ready(log.read_text(errors="replace"), worker_id):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"worker {worker_id} did not start:\n{log.read_text()}")
            time.sleep(0.1)

    def log(self, worker_id: str) -> str:
        return self.procs[worker_id][1].read_text(errors="replace")

    def kill(self, worker_id: str) -> None:
        proc = self.procs[worker_id][0]
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

    def stop_all(self) -> None:
        for proc, _ in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc, _ in self.procs.values():
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)

    def kill_all(self) -> None:
        """SIGKILL to every worker still running, at the end of a test (see
        ``Workers.kill_all``)."""
        for proc, _ in self.procs.values():
            if proc.poll() is None:
                proc.kill()
        for proc, _ in self.procs.values():
            proc.wait(10)
        if self.tables is not None:
            self.tables.thread.join(30)


@pytest.fixture
def workers(pg_schema: str, tmp_path: Path) -> Iterator[JobWorkers]:
    """Job workers, DBOS's tables made for them while the test starts them."""
    pool = JobWorkers(pg_schema, tmp_path)
    pool.make_dbos_tables()
    try:
        yield pool
    finally:
        pool.kill_all()


@pytest.fixture
def workers_without_tables(pg_schema: str, tmp_path: Path) -> Iterator[JobWorkers]:
    """Job workers, DBOS's tables made by the first one's launch."""
    pool = JobWorkers(pg_schema, tmp_path)
    try:
        yield pool
    finally:
        pool.kill_all()


def manager_for(workers: JobWorkers, store: PostgresStore) -> JobManager:
    return JobManager(
        store, dispatch="dbos", queue=DbosJobQueue(PG_DSN, dbos_schema=workers.dbos_schema)
    )


async def wait_ended(manager: JobManager, job_id: str, within: float = 120.0) -> Any:
    async with asyncio.timeout(within):
        return await manager.wait(job_id, poll=0.1)


def test_jobs_run_on_dbos_workers_and_are_announced_once(workers: JobWorkers) -> None:
    workers.start("w1", wait=False)
    workers.start("w2", wait=False)
    workers.wait_ready("w1")
    workers.wait_ready("w2")

    async def main() -> None:
        store = PostgresStore(PG_DSN, schema=workers.schema)
        async with store:
            manager = manager_for(workers, store)
            ids = [
                await manager.start(NewJob(id=f"job-{i:02d}", session_id="chat", task=f"t{i}"))
                for i in range(12)
            ]
            ended = [await wait_ended(manager, i) for i in ids]
            assert [j.state for j in ended] == ["succeeded"] * 12
            assert {j.dispatch for j in ended} == {"dbos"}
            assert {j.owner for j in ended} <= {"w1", "w2"}
            assert all(j.attempts == 1 for j in ended)
            notes = await JobNotices(store).take("chat")
            assert len(notes) == 12 and await JobNotices(store).take("chat") == []
            await manager.close()

    asyncio.run(main())


def test_a_worker_sigkilled_mid_job_has_the_job_taken_over(workers: JobWorkers) -> None:
    workers.start("w1", wait=False)
    workers.start("w2", wait=False)
    workers.wait_ready("w1")
    workers.wait_ready("w2")

    async def main() -> None:
        store = PostgresStore(PG_DSN, schema=workers.schema)
        async with store:
            manager = manager_for(workers, store)
            job_id = await manager.start(
                NewJob(id="job-hang", session_id="chat", task="hang, then answer")
            )
            deadline = time.monotonic() + 60
            while True:
                holder = next(
                    (w for w in ("w1", "w2") if "job model hangs" in workers.log(w)), None
                )
                if holder is not None:
                    break
                assert time.monotonic() < deadline, workers.log("w1") + workers.log("w2")
                await asyncio.sleep(0.1)
            running = await manager.get(job_id)
            assert running.state == "running" and running.owner == holder
            workers.kill(holder)
            job = await wait_ended(manager, job_id)
            other = "w2" if holder == "w1" else "w1"
            assert job.state == "succeeded", job
            assert job.attempts == 2 and job.owner == other
            assert job.summary == "done: hang, then answer (attempt 2)"
            assert "lost" in (job.error or "")  # the takeover is on the record
            (note,) = await JobNotices(store).take("chat")
            assert "succeeded" in note
            await manager.close()

    asyncio.run(main())


def test_a_schedule_on_postgresql_hands_its_slots_to_dbos_workers(workers: JobWorkers) -> None:
    from datetime import UTC, datetime, timedelta

    from tooldeck.schedules import ScheduleBook, Scheduler, Timing

    workers.start("w1")

    async def main() -> None:
        store = PostgresStore(PG_DSN, schema=workers.schema)
        now = [datetime(2026, 3, 1, 6, 59, tzinfo=UTC)]
        async with store:
            book = ScheduleBook(store, clock=lambda: now[0])
            await book.create(
                name="morning",
                session_id="chat",
                action=book.action(prompt="morning report", dispatch="dbos"),
                timing=Timing.cron("0 7 * * *", "Europe/Berlin"),
                missed="catch_up",
                catch_up_limit=5,
            )
            queue = DbosJobQueue(PG_DSN, dbos_schema=workers.dbos_schema)
            scheduler = Scheduler(store, clock=lambda: now[0], queue=queue)
            now[0] += timedelta(days=3)  # three mornings (07:00 Berlin is 06:00 UTC)
            (out,) = await scheduler.tick()
            assert [f.slot.day for f in out.fired] == [2, 3, 4]
            manager = JobManager(store, dispatch="dbos", queue=queue)
            ended = [await wait_ended(manager, f.job_id) for f in out.fired]
            assert [j.state for j in ended] == ["succeeded"] * 3
            assert {j.owner for j in ended} == {"w1"} and {j.dispatch for j in ended} == {"dbos"}
            assert await scheduler.requeue() == 0  # nothing left pending
            assert len(await JobNotices(store).take("chat")) == 3
            await queue.close()

    asyncio.run(main())


def test_tooldeck_scheduler_hands_dbos_schedules_to_a_worker_started_after_it(
    workers_without_tables: JobWorkers, processes: Processes
) -> None:
    """The real ``tooldeck scheduler`` (no jobs of its own) and a real ``tooldeck worker
    --jobs``: the scheduler starts first, when DBOS has no tables yet, so its first
    hand-overs fail (said once); once the worker is up, every fired job is handed to DBOS
    and run there."""
    from datetime import UTC, datetime

    from tooldeck.schedules import ScheduleBook, parse_timing

    workers = workers_without_tables
    store = PostgresStore(PG_DSN, schema=workers.schema)

    async def create() -> str:
        async with store:
            book = ScheduleBook(store)
            made = await book.create(
                name="every half second",
                session_id="chat",
                action=book.action(prompt="tick", dispatch="dbos"),
                timing=parse_timing(every_seconds=0.5, now=datetime.now(UTC)),
                missed="catch_up",
            )
            return made.id

    schedule_id = asyncio.run(create())
    options = ["--jobs", "0", "--poll", "0.2", "--dbos-schema", workers.dbos_schema]
    proc, log = processes.scheduler(store, "sch", *options)
    processes.wait_for_line(proc, log, " not_queued: ")
    workers.start("w1")
    processes.wait_for_line(proc, log, " queued: ")

    async def ended() -> list[Any]:
        async with store:
            manager = JobManager(store)
            deadline = time.monotonic() + 90
            while True:
                jobs = [j for j in await manager.table.list(limit=1000) if j.terminal]
                if len(jobs) >= 4 or time.monotonic() > deadline:
                    return jobs
                await asyncio.sleep(0.2)

    done = asyncio.run(ended())
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0, log.read_text()

    async def everything() -> tuple[list[Any], int]:
        async with store:
            manager = JobManager(store)
            fired = (await ScheduleBook(store).get(schedule_id)).fired
            for job in await manager.table.list(limit=1000):  # every job fired runs
                await wait_ended(manager, job.id)
            return await manager.table.list(limit=1000), fired

    jobs, fired = asyncio.run(everything())
    assert len(done) >= 4 and len(jobs) == fired
    assert {j.state for j in jobs} == {"succeeded"}
    assert {j.dispatch for j in jobs} == {"dbos"} and {j.owner for j in jobs} == {"w1"}
    assert {j.origin for j in jobs} == {f"schedule:{schedule_id}"}
    said = _text_lines(log)
    events = [x["event"] for x in said]
    assert events.count("not_queued") == 1, events  # said once, not at every tick
    (refused,) = [x["message"] for x in said if x["event"] == "not_queued"]
    assert "no DBOS system tables" in refused, refused
    exiting = said[-1]["message"]
    handed = re.search(r"(\d+) job\(s\) handed to DBOS", exiting)
    assert handed is not None and int(handed[1]) == fired, exiting
