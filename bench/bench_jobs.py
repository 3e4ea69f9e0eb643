"""Background jobs and schedules: scheduler overhead per fired slot, jobs per second,
embedded (SQLite, PostgreSQL) and on DBOS (``tooldeck worker --jobs``).

- **scheduler overhead**: one interval schedule, a fake clock moved one slot per tick, so
  every tick fires exactly one slot (the fire row and its job row, one transaction) and
  nothing else runs; also an idle tick (nothing due). Per-tick wall time, median and p90.
- **jobs per second, embedded**: N jobs (a scripted model that answers at once; not a
  real model) started through a ``JobManager`` (concurrency 8): the start rate (the
  ``start`` calls, each writing and claiming its row) and the end-to-end rate (from the
  first start until every job has ended and its result is stored).
- **jobs per second, DBOS**: N jobs enqueued with a ``DbosJobQueue``, run by one or two
  ``tooldeck worker --jobs 8`` processes started (and ready) before the clock starts.

The PostgreSQL server is TOOLDECK_TEST_PG_DSN (default
postgresql://postgres@127.0.0.1:5432/test), a fresh schema per configuration, dropped.

    uv run --group bench python bench/bench_jobs.py [--jobs 300] [--slots 400]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import BackgroundLoad, machine_lines, percentile, table, wait_for_idle
from tooldeck import Toolset
from tooldeck.approvals import allow_all
from tooldeck.jobs import JobManager, LiveJob, NewJob
from tooldeck.jobs.durable import DbosJobQueue
from tooldeck.schedules import ScheduleBook, Scheduler, parse_timing
from tooldeck.testing import ScriptedModel, reply
from tooldeck.workflows.store import PostgresStore, SQLiteStore, WorkflowStore

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tests" / "job_scripts" / "jobs.py"
DSN = os.environ.get("TOOLDECK_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
PACKAGES = ("tooldeck", "dbos", "psycopg", "cronsim")


def drop(schema: str) -> None:
    with psycopg.connect(DSN, autocommit=True) as conn:
        for name in (schema, f"{schema}_dbos"):
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def stores(tmp: Path) -> list[tuple[str, Any, str | None]]:
    schema = f"bench_jobs_{uuid.uuid4().hex[:8]}"
    return [
        ("SQLite", lambda: SQLiteStore(tmp / f"{uuid.uuid4().hex}.sqlite3"), None),
        ("PostgreSQL", lambda: PostgresStore(DSN, schema=schema), schema),
    ]


async def scheduler_ticks(store: WorkflowStore, slots: int) -> tuple[list[int], list[int]]:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    clock = [now]
    async with store:
        book = ScheduleBook(store, clock=lambda: clock[0])
        await book.create(
            name="bench",
            session_id="s",
            action=book.action(prompt="p"),
            timing=parse_timing(every_seconds=1, now=now),
        )
        scheduler = Scheduler(store, clock=lambda: clock[0])
        fired: list[int] = []
        idle: list[int] = []
        for k in range(1, slots + 1):
            clock[0] = now + timedelta(seconds=k)
            t0 = time.perf_counter_ns()
            (out,) = await scheduler.tick()
            fired.append(time.perf_counter_ns() - t0)
            assert len(out.fired) == 1
            clock[0] += timedelta(milliseconds=500)
            t0 = time.perf_counter_ns()
            (out,) = await scheduler.tick()
            idle.append(time.perf_counter_ns() - t0)
            assert not out.fired
    return fired, idle


async def embedded_jobs(store: WorkflowStore, n: int, home: Path) -> tuple[float, float]:
    prefix = uuid.uuid4().hex[:6]
    async with store, JobManager(store, concurrency=8, poll=0.01, lease=30) as manager:
        t0 = time.perf_counter()
        ids = []
        for i in range(n):
            live = LiveJob(ScriptedModel([reply(f"done {i}")]), Toolset(), allow_all, home=home)
            ids.append(
                await manager.start(NewJob(id=f"job-{prefix}-{i}", session_id="s", task="t"), live)
            )
        started = time.perf_counter() - t0
        for job_id in ids:
            job = await manager.wait(job_id, poll=0.005)
            assert job.state == "succeeded", job
        ended = time.perf_counter() - t0
    return n / started, n / ended


def start_worker(schema: str, name: str, logs: Path) -> subprocess.Popen[bytes]:
    log = logs / f"{name}.log"
    command = [
        sys.executable,
        "-c",
        "from tooldeck.cli import main; main()",
        "worker",
        "--dsn",
        DSN,
        "--script",
        str(SCRIPT),
        "--jobs",
        "8",
        "--id",
        name,
        "--pg-schema",
        schema,
        "--dbos-schema",
        f"{schema}_dbos",
        "--poll",
        "0.05",
    ]
    with log.open("wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while f"worker {name} ready" not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"worker {name} did not start:\n{log.read_text()}")
        time.sleep(0.1)
    return proc


def dbos_jobs(n: int, workers: int, logs: Path) -> tuple[float, float]:
    schema = f"bench_jobs_dbos_{uuid.uuid4().hex[:8]}"
    procs = [start_worker(schema, f"bench-j{i}", logs) for i in range(workers)]

    async def main() -> tuple[float, float]:
        store = PostgresStore(DSN, schema=schema)
        async with store:
            queue = DbosJobQueue(DSN, dbos_schema=f"{schema}_dbos")
            await asyncio.to_thread(queue._get)  # the client's connection pool, before the clock
            manager = JobManager(store, dispatch="dbos", queue=queue)
            t0 = time.perf_counter()
            ids = [
                await manager.start(NewJob(id=f"job-{i}", session_id="s", task=f"t{i}"))
                for i in range(n)
            ]
            started = time.perf_counter() - t0
            for job_id in ids:
                job = await manager.wait(job_id, poll=0.02)
                assert job.state == "succeeded", job
            ended = time.perf_counter() - t0
            await manager.close()
        return n / started, n / ended

    try:
        return asyncio.run(main())
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(60)
        drop(schema)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--slots", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    idle_note = wait_for_idle()
    load = BackgroundLoad()
    tick_rows, job_rows = [], []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for name, make, schema in stores(tmp):
            try:
                fired, idle = asyncio.run(scheduler_ticks(make(), args.slots))
                f, i = sorted(fired), sorted(idle)
                tick_rows.append(
                    [
                        name,
                        f"{percentile(f, 0.5) / 1e3:.0f}",
                        f"{percentile(f, 0.9) / 1e3:.0f}",
                        f"{percentile(i, 0.5) / 1e3:.0f}",
                        f"{1e9 / statistics.median(fired):.0f}",
                    ]
                )
                rates = [
                    asyncio.run(embedded_jobs(make(), args.jobs, tmp)) for _ in range(args.rounds)
                ]
                job_rows.append(
                    [
                        f"embedded, {name}",
                        f"{statistics.median(r[0] for r in rates):.0f}",
                        f"{statistics.median(r[1] for r in rates):.0f}",
                    ]
                )
            finally:
                if schema is not None:
                    drop(schema)
        for workers in (1, 2):
            rates = [dbos_jobs(args.jobs, workers, tmp) for _ in range(args.rounds)]
            job_rows.append(
                [
                    f"DBOS, {workers} worker(s), PostgreSQL",
                    f"{statistics.median(r[0] for r in rates):.0f}",
                    f"{statistics.median(r[1] for r in rates):.0f}",
                ]
            )
    print("\n".join(machine_lines(PACKAGES)))
    print(f"- {idle_note}; during the runs {load.report()}")
    print(f"- {args.slots} fired ticks per store; {args.jobs} jobs per run, {args.rounds} runs")
    print()
    print(
        table(
            ["store", "tick that fires one slot, median µs", "p90 µs", "idle tick µs", "slots/s"],
            tick_rows,
        )
    )
    print()
    print(table(["jobs", "started / s", "started and finished / s"], job_rows))


if __name__ == "__main__":
    main()
