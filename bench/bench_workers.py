"""Workers on DBOS queues: throughput of trivial tasks with 1, 2 and 4 worker processes,
and the cost per task against the in-process asyncio executor.

Each configuration runs the same workflow: N independent trivial tasks (a scripted model
that submits at once; no delay) plus one task that depends on all of them, stored in the
real PostgreSQL at TOOLDECK_TEST_PG_DSN (default postgresql://postgres@127.0.0.1:5432/test),
in a fresh schema per configuration (dropped at the end). Workers are started (and ready)
before the clock starts; the clock runs from ``engine.start`` until the run is finished.
CPU is the workers' own (utime + stime from /proc) or this process's for in-process;
"client" is this process (starting the run, enqueueing, waiting) and "PostgreSQL" the
server backends of every connection of the configuration (tagged by ``application_name``),
all per task, so a row says where a task's CPU goes on a machine whose cores are shared.

    uv run --group bench python bench/bench_workers.py [--tasks 200] [--rounds 3]
        [--workers 0,1,2,4] [--no-wait]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import BackgroundLoad, machine_lines, table, wait_for_idle
from tooldeck.workflows import AsyncioExecutor, WorkflowEngine, load_script
from tooldeck.workflows.durable import DbosExecutor
from tooldeck.workflows.store import PostgresStore

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tests" / "workflow_scripts" / "fan_out.py"
DSN = os.environ.get("TOOLDECK_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
PACKAGES = ("tooldeck", "dbos", "psycopg", "sqlalchemy")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tagged(schema: str, who: str) -> str:
    """The DSN with an ``application_name`` that finds this connection's backends."""
    return make_conninfo(DSN, application_name=f"{schema}.{who}")


def backend_cpu(schema: str) -> dict[int, float]:
    """CPU seconds of each PostgreSQL backend serving this configuration's connections."""
    with psycopg.connect(DSN, autocommit=True) as conn:
        pids = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name LIKE %s",
            (f"{schema}.%",),
        ).fetchall()
    out = {}
    for (pid,) in pids:
        with contextlib.suppress(OSError):  # the server on another host: not measured
            out[pid] = cpu_seconds(pid)
    return out


def start_worker(
    n: int, schema: str, tasks: int, concurrency: int, poll: float, logs: Path
) -> subprocess.Popen[bytes]:
    log = logs / f"{schema}-w{n}.log"
    env = {**os.environ, "TOOLDECK_TEST_ITEMS": str(tasks), "TOOLDECK_TEST_STEP_DELAY": "0"}
    command = [
        sys.executable,
        "-c",
        "from tooldeck.cli import main; main()",
        "worker",
        "--dsn",
        tagged(schema, f"w{n}"),
        "--script",
        str(SCRIPT),
        "--id",
        f"bench-w{n}",
        "--pg-schema",
        schema,
        "--dbos-schema",
        f"{schema}_dbos",
        "--concurrency",
        str(concurrency),
        "--poll",
        str(poll),
    ]
    with log.open("wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 120
    while f"worker bench-w{n} ready" not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"worker {n} did not start:\n{log.read_text()}")
        time.sleep(0.1)
    return proc


async def one_run(engine: WorkflowEngine, workflow: object, tasks: int | None = None) -> float:
    """One run of ``workflow`` (or of a ``tasks``-item one, to warm up); its seconds."""
    if tasks is not None:
        os.environ["TOOLDECK_TEST_ITEMS"] = str(tasks)
        workflow = load_script(SCRIPT).workflow()
    t0 = time.perf_counter()
    workflow_id = await engine.start(workflow)  # type: ignore[arg-type]
    run = await engine.wait(workflow_id)
    elapsed = time.perf_counter() - t0
    if run.state != "succeeded" or run.submitted_count != len(run.tasks):
        raise SystemExit(f"run {workflow_id} ended {run.state}: {run.error}")
    return elapsed


def drop(schema: str) -> None:
    with psycopg.connect(DSN, autocommit=True) as conn:
        for name in (schema, f"{schema}_dbos"):
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def measure(
    workers: int, tasks: int, rounds: int, concurrency: int, poll: float, logs: Path
) -> dict[str, float]:
    os.environ["TOOLDECK_TEST_ITEMS"] = str(tasks)
    workflow = load_script(SCRIPT).workflow()
    schema = f"bench_workers_{uuid.uuid4().hex[:8]}"
    procs = [start_worker(i, schema, tasks, concurrency, poll, logs) for i in range(workers)]
    times: list[float] = []
    cpu: dict[str, float] = {}

    async def main() -> None:
        store = PostgresStore(tagged(schema, "client"), schema=schema)
        executor = (
            DbosExecutor(tagged(schema, "client"), dbos_schema=f"{schema}_dbos")
            if workers
            else AsyncioExecutor(concurrency)
        )
        model = load_script(SCRIPT).scripted_model
        assert model is not None
        async with store:
            engine = WorkflowEngine(store, model, executor=executor, memory_enabled=False)
            async with engine:
                await one_run(engine, workflow, 1)  # opens the client's connections
                pg0 = await asyncio.to_thread(backend_cpu, schema)
                own0 = time.process_time()
                workers0 = sum(cpu_seconds(p.pid) for p in procs)
                for _ in range(rounds):
                    times.append(await one_run(engine, workflow))
                cpu["workers"] = sum(cpu_seconds(p.pid) for p in procs) - workers0
                cpu["client"] = time.process_time() - own0
                pg1 = await asyncio.to_thread(backend_cpu, schema)
                cpu["postgres"] = sum(t - pg0.get(pid, 0.0) for pid, t in pg1.items())

    try:
        asyncio.run(main())
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(60)
        drop(schema)
    per_run = tasks + 1
    best = statistics.median(times)
    done = per_run * rounds
    turns = cpu["workers"] if workers else cpu["client"]
    return {
        "median_s": best,
        "min_s": min(times),
        "tasks_per_s": per_run / best,
        "ms_per_task": 1000 * best / per_run,
        "cpu_ms_per_task": 1000 * turns / done,
        "client_ms_per_task": 1000 * cpu["client"] / done if workers else 0.0,
        "pg_ms_per_task": 1000 * cpu["postgres"] / done,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=8, help="turns at once per worker")
    parser.add_argument("--poll", type=float, default=0.2, help="workers' queue polling (s)")
    parser.add_argument(
        "--workers", default="0,1,2,4", help="worker counts to run (0: in-process executor)"
    )
    parser.add_argument("--no-wait", action="store_true", help="do not wait for an idle machine")
    args = parser.parse_args()
    idle = "idle check skipped" if args.no_wait else wait_for_idle()
    load = BackgroundLoad()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for workers in (int(n) for n in args.workers.split(",")):
            r = measure(workers, args.tasks, args.rounds, args.concurrency, args.poll, Path(tmp))
            label = "in-process (AsyncioExecutor)" if workers == 0 else f"{workers} worker(s), DBOS"
            rows.append(
                [
                    label,
                    f"{r['median_s']:.2f}",
                    f"{r['tasks_per_s']:.0f}",
                    f"{r['ms_per_task']:.1f}",
                    f"{r['cpu_ms_per_task']:.1f}",
                    f"{r['client_ms_per_task']:.1f}" if workers else "(same)",
                    f"{r['pg_ms_per_task']:.1f}",
                ]
            )
            print(f"# {label}: {r}", file=sys.stderr)
    print("## Workers on DBOS queues (`bench/bench_workers.py`)\n")
    print("\n".join(machine_lines(PACKAGES)))
    print(f"- {idle}; during the runs {load.report()}")
    print(
        f"- {args.tasks} trivial tasks + 1 dependent task per run, {args.rounds} runs per row, "
        f"{args.concurrency} turns at once per worker (and in-process), queue polled every "
        f"{args.poll:g} s\n"
    )
    print(
        table(
            [
                "executor",
                "median run (s)",
                "tasks/s",
                "wall ms per task",
                "CPU ms per task: turn runners",
                "client",
                "PostgreSQL",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
