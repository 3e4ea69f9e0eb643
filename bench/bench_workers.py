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
        [--workers 0,1,2,4] [--floor 1,4] [--no-wait]

``--floor`` adds rows for DBOS workflows that do nothing (``bench/_dbos_noop.py``), run by
the same number of DBOS workers configured as ``tooldeck worker`` configures them: DBOS's
own cost per workflow and the workers' polling, under which no task turn can go.
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
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _dbos_noop import run_noop
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


def local_ports(pids: list[int]) -> set[int]:
    """The local TCP ports of the sockets the processes ``pids`` hold (Linux /proc)."""
    inodes: set[str] = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    target = os.readlink(fd)
                    if target.startswith("socket:["):
                        inodes.add(target[8:-1])
    ports: set[int] = set()
    for listing in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(listing).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[9] in inodes:
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def backend_cpu(schema: str, pids: list[int]) -> dict[int, float]:
    """CPU seconds of each PostgreSQL backend serving this configuration's connections:
    those tagged with its ``application_name`` and those of the processes ``pids`` (DBOS
    names its connections ``dbos_transact``, whoever opens them)."""
    with psycopg.connect(DSN, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid, application_name, client_port FROM pg_stat_activity "
            "WHERE application_name LIKE %s OR application_name = 'dbos_transact'",
            (f"{schema}.%",),
        ).fetchall()
    ports = local_ports(pids)
    out = {}
    for pid, name, port in rows:
        if name == "dbos_transact" and port not in ports:
            continue  # another process's DBOS (another benchmark, a test)
        with contextlib.suppress(OSError):  # the server on another host: not measured
            out[pid] = cpu_seconds(pid)
    return out


def start_worker(
    n: int, schema: str, tasks: int, concurrency: int, poll: float, logs: Path
) -> subprocess.Popen[bytes]:
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
    return _started(f"bench-w{n}", command, env, logs / f"{schema}-w{n}.log")


def start_noop_worker(
    n: int, schema: str, concurrency: int, poll: float, logs: Path
) -> subprocess.Popen[bytes]:
    """A DBOS worker whose workflow does nothing (bench/_dbos_noop.py): the floor."""
    command = [
        sys.executable,
        str(Path(__file__).resolve().parent / "_dbos_noop.py"),
        "worker",
        tagged(schema, f"w{n}"),
        f"{schema}_dbos",
        f"bench-noop-w{n}",
        str(concurrency),
        str(poll),
    ]
    return _started(f"bench-noop-w{n}", command, dict(os.environ), logs / f"{schema}-w{n}.log")


def _started(
    name: str, command: list[str], env: dict[str, str], log: Path
) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 120
    while f"worker {name} ready" not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"worker {name} did not start:\n{log.read_text()}")
        time.sleep(0.1)
    return proc


class Spent:
    """CPU spent from now on by the workers, this process (the client) and PostgreSQL."""

    def __init__(self, schema: str, procs: list[subprocess.Popen[bytes]]):
        self.schema, self.procs = schema, procs
        self.pids = [os.getpid(), *(p.pid for p in procs)]
        self.pg0 = backend_cpu(schema, self.pids)
        self.own0 = time.process_time()
        self.workers0 = sum(cpu_seconds(p.pid) for p in procs)

    def now(self) -> dict[str, float]:
        pg1 = backend_cpu(self.schema, self.pids)
        return {
            "workers": sum(cpu_seconds(p.pid) for p in self.procs) - self.workers0,
            "client": time.process_time() - self.own0,
            "postgres": sum(t - self.pg0.get(pid, 0.0) for pid, t in pg1.items()),
        }


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
                spent = await asyncio.to_thread(Spent, schema, procs)
                for _ in range(rounds):
                    times.append(await one_run(engine, workflow))
                cpu.update(await asyncio.to_thread(spent.now))

    _run_and_stop(main, procs, schema)
    return _summary(times, cpu, tasks, rounds, workers)


def measure_floor(
    workers: int, tasks: int, rounds: int, concurrency: int, poll: float, logs: Path
) -> dict[str, float]:
    """As :func:`measure`, with DBOS workflows that do nothing (no turn, no store)."""
    schema = f"bench_noop_{uuid.uuid4().hex[:8]}"
    procs = [start_noop_worker(i, schema, concurrency, poll, logs) for i in range(workers)]
    times: list[float] = []
    cpu: dict[str, float] = {}

    async def main() -> None:
        dsn, dbos_schema = tagged(schema, "client"), f"{schema}_dbos"
        await run_noop(dsn, dbos_schema, 1)
        spent = await asyncio.to_thread(Spent, schema, procs)
        for _ in range(rounds):
            times.append(await run_noop(dsn, dbos_schema, tasks + 1))
        cpu.update(await asyncio.to_thread(spent.now))

    _run_and_stop(main, procs, schema)
    return _summary(times, cpu, tasks, rounds, workers)


def _run_and_stop(
    main: Callable[[], Coroutine[Any, Any, None]], procs: list[subprocess.Popen[bytes]], schema: str
) -> None:
    try:
        asyncio.run(main())
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()
        drop(schema)


def _summary(
    times: list[float], cpu: dict[str, float], tasks: int, rounds: int, workers: int
) -> dict[str, float]:
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
    parser.add_argument(
        "--floor",
        default="",
        help="worker counts to run no-op DBOS workflows with (the floor), e.g. 1,4",
    )
    args = parser.parse_args()
    idle = "idle check skipped" if args.no_wait else wait_for_idle()
    load = BackgroundLoad()
    rows = []
    configs = [(int(n), False) for n in args.workers.split(",") if n]
    configs += [(int(n), True) for n in args.floor.split(",") if n]
    with tempfile.TemporaryDirectory() as tmp:
        for workers, floor in configs:
            how = measure_floor if floor else measure
            r = how(workers, args.tasks, args.rounds, args.concurrency, args.poll, Path(tmp))
            if floor:
                label = f"floor: {workers} worker(s), DBOS workflow that does nothing"
            elif workers == 0:
                label = "in-process (AsyncioExecutor)"
            else:
                label = f"{workers} worker(s), DBOS"
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
