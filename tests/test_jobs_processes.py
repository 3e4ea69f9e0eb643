"""Jobs and schedules across real processes (``tooldeck scheduler``), on the real SQLite
and PostgreSQL stores: three schedulers racing on a fast interval fire each slot once; a
job whose process is SIGKILLed is resumed by another process, or marked lost."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from test_workflows_support import PG_DSN, StoreFactory
from tooldeck.jobs import JobManager, JobNotices, NewJob
from tooldeck.schedules import ScheduleBook, parse_timing
from tooldeck.workflows.store import PostgresStore, SQLiteStore, WorkflowStore

pytest_plugins = ["test_workflows_support"]

SCRIPT = Path(__file__).parent / "job_scripts" / "jobs.py"


def store_args(store: WorkflowStore) -> list[str]:
    if isinstance(store, SQLiteStore):
        return ["--db", str(store.path)]
    assert isinstance(store, PostgresStore)
    return ["--dsn", PG_DSN, "--pg-schema", store.schema]


class Processes:
    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.procs: list[tuple[subprocess.Popen[bytes], Path]] = []

    def scheduler(self, store: WorkflowStore, name: str, *extra: str) -> tuple[Any, Path]:
        log = self.log_dir / f"{name}-{len(self.procs)}.log"
        command = [
            sys.executable,
            "-c",
            "from tooldeck.cli import main; main()",
            "scheduler",
            *store_args(store),
            "--id",
            name,
            *extra,
        ]
        with log.open("wb") as out:
            proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        self.procs.append((proc, log))
        return proc, log

    @staticmethod
    def wait_for_line(proc: Any, log: Path, text: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while text not in log.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"no {text!r} in the log:\n{log.read_text()}")
            time.sleep(0.05)

    def stop_all(self) -> None:
        for proc, _ in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc, _ in self.procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    pool = Processes(tmp_path)
    try:
        yield pool
    finally:
        pool.stop_all()


def test_three_scheduler_processes_fire_each_slot_of_a_fast_interval_once(
    make_store: StoreFactory, processes: Processes
) -> None:
    store = make_store()

    async def create() -> str:
        async with store:
            book = ScheduleBook(store)
            made = await book.create(
                name="fast",
                session_id="s",
                action=book.action(prompt="p"),
                timing=parse_timing(every_seconds=0.02, now=datetime.now(UTC)),
                missed="catch_up",
                catch_up_limit=1000,
            )
            return made.id

    schedule_id = asyncio.run(create())
    started = [
        processes.scheduler(
            store, f"sch{i}", "--jobs", "0", "--poll", "0.01", "--grace", "1000", "--for", "6"
        )
        for i in range(3)
    ]
    for proc, log in started:
        assert proc.wait(90) == 0, log.read_text()

    async def check() -> None:
        async with store:
            book = ScheduleBook(store)
            s = await book.get(schedule_id)
            fires = await book.table.fires(schedule_id, 100_000)
            jobs = await JobManager(store).table.list(limit=100_000)
        anchor = s.timing.anchor
        assert anchor is not None
        slots = sorted(f.slot for f in fires)
        assert len(slots) >= 200, len(slots)  # hundreds of slots
        # every slot from the first to the last, each once: no gap, no double
        assert slots == [anchor + timedelta(milliseconds=20 * k) for k in range(1, len(slots) + 1)]
        assert len({j.id for j in jobs}) == len(jobs) == len(slots) == s.fired
        by = {f.fired_by for f in fires}
        assert len(by) >= 2, by  # they really raced for the slots

    asyncio.run(check())


@pytest.mark.parametrize("on_lost", ["resume", "mark_lost"])
def test_a_job_killed_with_its_process_is_resumed_elsewhere_or_marked_lost(
    make_store: StoreFactory, processes: Processes, on_lost: str
) -> None:
    store = make_store()

    async def create() -> None:
        async with store:
            await JobManager(store).table.create(
                NewJob(
                    id="job-hang",
                    session_id="chat",
                    task="hang, then answer",
                    on_lost=on_lost,  # type: ignore[arg-type]
                    max_attempts=2,
                )
            )

    asyncio.run(create())
    options = ["--script", str(SCRIPT), "--jobs", "2", "--lease", "1", "--poll", "0.1"]
    first, log = processes.scheduler(store, "first", *options)
    processes.wait_for_line(first, log, "job model hangs")
    first.send_signal(signal.SIGKILL)
    first.wait(10)

    async def state() -> Any:
        async with store:
            return await JobManager(store).table.get("job-hang")

    killed = asyncio.run(state())
    assert killed.state == "running" and killed.owner == "first"  # nobody noticed yet
    second, log2 = processes.scheduler(store, "second", *options)
    deadline = time.monotonic() + 60
    while (job := asyncio.run(state())).state not in ("succeeded", "lost", "failed"):
        assert time.monotonic() < deadline and second.poll() is None, log2.read_text()
        time.sleep(0.1)
    if on_lost == "resume":
        assert job.state == "succeeded" and job.attempts == 2 and job.owner == "second"
        assert job.summary == "done: hang, then answer (attempt 2)"
    else:
        assert job.state == "lost"
        assert job.error == "no heartbeat from first for 1s; seen by second", job.error

    async def notices() -> list[str]:
        async with store:
            return list(await JobNotices(store).take("chat"))

    (notice,) = asyncio.run(notices())
    assert ("succeeded" if on_lost == "resume" else "lost") in notice
    assert asyncio.run(notices()) == []


def test_scheduler_cli_errors_are_one_line(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from tooldeck.cli import main; main()",
            "scheduler",
            "--db",
            str(tmp_path / "x.sqlite3"),
            "--script",
            str(tmp_path / "missing.py"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "no script at" in result.stderr
