"""Jobs and schedules across real processes (``tooldeck scheduler``), on the real SQLite
and PostgreSQL stores: three schedulers racing on a fast interval fire each slot once; a
job whose process is SIGKILLed is resumed by another process, or marked lost; what a
scheduler prints, line by line, in text and JSON, and through a database outage."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from test_workflows_support import StoreFactory
from tooldeck.jobs import JobManager, JobNotices, NewJob
from tooldeck.schedules import ScheduleBook, parse_timing
from tooldeck.workflows.store import PostgresStore, SQLiteStore, WorkflowStore

pytest_plugins = ["test_workflows_support"]

SCRIPT = Path(__file__).parent / "job_scripts" / "jobs.py"


def store_args(store: WorkflowStore) -> list[str]:
    if isinstance(store, SQLiteStore):
        return ["--db", str(store.path)]
    assert isinstance(store, PostgresStore)
    return ["--dsn", store.dsn, "--pg-schema", store.schema]


class Processes:
    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.procs: list[tuple[subprocess.Popen[bytes], Path]] = []

    def scheduler(
        self, store: WorkflowStore, name: str, *extra: str, env: dict[str, str] | None = None
    ) -> tuple[Any, Path]:
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
            proc = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
            )
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

    def kill_all(self) -> None:
        """SIGKILL to every process still running, at the end of a test (a graceful
        stop, which no test here checks at its end, costs a second or more)."""
        for proc, _ in self.procs:
            if proc.poll() is None:
                proc.kill()
        for proc, _ in self.procs:
            proc.wait(10)


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    pool = Processes(tmp_path)
    try:
        yield pool
    finally:
        pool.kill_all()


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


# -- what a scheduler prints ----------------------------------------------------------------


async def _log_scenario(store: WorkflowStore) -> tuple[str, str]:
    """Two schedules whose first tick is known whenever it comes (within a minute): one
    every 10 minutes made an hour ago (5 slots missed, skipped; the newest on time) and a
    one-time DBOS schedule a second from now (on time; no DBOS queue on SQLite)."""
    now = datetime.now(UTC)
    async with store:
        past = ScheduleBook(store, clock=lambda: now - timedelta(hours=1))
        every = await past.create(
            name="every ten",
            session_id="s",
            action=past.action(prompt="p"),
            timing=parse_timing(every_seconds=600, now=now - timedelta(hours=1)),
            missed="skip",
        )
        book = ScheduleBook(store, clock=lambda: now)
        once = await book.create(
            name="once",
            session_id="s",
            action=book.action(prompt="p", dispatch="dbos"),
            timing=parse_timing(at=(now + timedelta(seconds=1)).isoformat()),
        )
    return every.id, once.id


def _slot(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _job(schedule_id: str, slot: datetime) -> str:
    from tooldeck.schedules import slot_job_id

    return slot_job_id(schedule_id, slot)


async def _first_fires(store: WorkflowStore, *schedule_ids: str) -> dict[str, datetime]:
    async with store:
        book = ScheduleBook(store)
        return {sid: (await book.table.fires(sid))[-1].slot for sid in schedule_ids}


def _text_lines(log: Path) -> list[dict[str, Any]]:
    """Every line of a text log, parsed; a line of another shape fails the test."""
    from test_worker_logs import TEXT_LINE

    text = log.read_text()
    parsed = []
    for line in text.splitlines():
        match = TEXT_LINE.match(line)
        assert match is not None, f"not a log line: {line!r}\n{text}"
        parsed.append(match.groupdict())
    return parsed


def test_the_scheduler_log_is_one_line_per_event_in_text_and_json(
    tmp_path: Path, processes: Processes
) -> None:
    """Timestamps, INFO shown, one line per event whatever the terminal's width; the same
    lines as JSON objects with the scheduler's id and each event's fields."""
    started: dict[str, tuple[SQLiteStore, str, str, Any, Path]] = {}
    for fmt in ("text", "json"):  # side by side, each on a database of its own
        store = SQLiteStore(tmp_path / f"{fmt}.sqlite3")
        every, once = asyncio.run(_log_scenario(store))
        proc, log = processes.scheduler(
            store,
            "sch1",
            *("--jobs", "0", "--poll", "0.2", "--for", "4"),
            *(["--log-format", "json"] if fmt == "json" else []),  # text: the default
            env={"COLUMNS": "40"},
        )
        started[fmt] = store, every, once, proc, log
    for fmt, (store, every, once, proc, log) in started.items():
        assert proc.wait(60) == 0, log.read_text()
        if fmt == "text":
            said = [(x["level"], x["worker"], x["event"], x["message"]) for x in _text_lines(log)]
            fields: list[dict[str, Any]] = []
        else:
            records = [json.loads(line) for line in log.read_text().splitlines()]
            keys = {"ts", "level", "scheduler", "event", "task", "run", "message", "fields"}
            assert all(set(r) == keys for r in records), records
            assert all(r["task"] is None and r["run"] is None for r in records)
            ts = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d"
            assert all(re.fullmatch(ts, r["ts"]) for r in records), records
            said = [(r["level"], r["scheduler"], r["event"], r["message"]) for r in records]
            fields = [r["fields"] for r in records]
        slots = asyncio.run(_first_fires(store, every, once))
        every_job, once_job = _job(every, slots[every]), _job(once, slots[once])
        assert said[0] == (
            "INFO",
            "sch1",
            "ready",
            f"serving {store.path}, no jobs here, no DBOS, poll 0.2s, grace 60s",
        )
        level, who, event, message = said[-1]
        assert (level, who, event) == ("INFO", "sch1", "exiting")
        ticks = re.fullmatch(
            r"ran for 4s \(status 0\): 2 slot\(s\) fired, 5 skipped, 0 job\(s\) handed "
            r"to DBOS, (\d+) tick\(s\)",
            message,
        )
        assert ticks is not None, message
        # the two schedules' lines, each in order (which schedule comes first varies)
        mine = {sid: [x for x in said[1:-1] if sid in x[3]] for sid in (every, once)}
        assert mine[every] == [
            ("WARNING", "sch1", "skipped", f"{every}: 5 missed slot(s) skipped"),
            (
                "INFO",
                "sch1",
                "fired",
                f"{every} slot {_slot(slots[every])} (on time): job {every_job}",
            ),
        ]
        assert mine[once] == [
            (
                "INFO",
                "sch1",
                "fired",
                f"{once} slot {_slot(slots[once])} (on time): job {once_job} for DBOS",
            ),
            ("INFO", "sch1", "finished", f"{once}: its one time has fired; finished"),
            (
                "WARNING",
                "sch1",
                "not_queued",
                f"job {once_job} runs on DBOS workers, but this scheduler hands no job to "
                "DBOS (that needs PostgreSQL and a DBOS queue): it stays pending",
            ),
        ]
        assert len(said) == 2 + 2 + 3  # nothing else
        if fmt == "json":
            by_line = dict(zip(said, fields, strict=True))
            assert fields[0] == {"jobs": 0, "dbos_schema": None, "poll": 0.2, "grace": 60.0}
            assert fields[-1] == {
                "status": 0,
                "why": "ran for 4s",
                "fired": 2,
                "skipped": 5,
                "queued": 0,
                "ticks": int(ticks[1]),
            }
            assert [by_line[x] for x in mine[every]] == [
                {"schedule": every, "skipped": 5},
                {
                    "schedule": every,
                    "slot": _slot(slots[every]),
                    "how": "due",
                    "job": every_job,
                    "dispatch": "embedded",
                },
            ]
            assert [by_line[x] for x in mine[once]] == [
                {
                    "schedule": once,
                    "slot": _slot(slots[once]),
                    "how": "due",
                    "job": once_job,
                    "dispatch": "dbos",
                },
                {"schedule": once},
                {"job": once_job, "error": "no DBOS queue"},
            ]


def test_a_database_outage_is_two_lines_in_the_scheduler_log(
    pg_schema: str, processes: Processes
) -> None:
    """A scheduler (running jobs too) behind a TCP relay that is cut for 2 s: one
    ``db_retrying`` line when it starts, one ``db_back`` when it ends; the driver's
    several-line messages never make a line of their own."""
    from test_workflows_workers import Outage, wait_for

    outage = Outage()
    try:
        store = PostgresStore(outage.dsn, schema=pg_schema)

        async def create() -> None:
            async with store:
                book = ScheduleBook(store)
                await book.create(
                    name="fast",
                    session_id="s",
                    action=book.action(prompt="p"),
                    timing=parse_timing(every_seconds=0.5, now=datetime.now(UTC)),
                    missed="catch_up",
                )

        asyncio.run(create())
        # a lease well beyond the cut: on a busy machine a 3 s lease could lapse during
        # the 2 s cut and its recovery, and a job handed back is a line of its own
        options = ["--script", str(SCRIPT), "--jobs", "2", "--poll", "0.2", "--lease", "10"]
        proc, log = processes.scheduler(store, "cut", *options, env={"COLUMNS": "40"})
        processes.wait_for_line(proc, log, " fired: ")
        outage.cut()
        wait_for(lambda: " db_retrying: " in log.read_text(), "the db_retrying line")
        time.sleep(2)
        outage.restore()
        wait_for(lambda: " db_back: " in log.read_text(), "the db_back line", timeout=30)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0, log.read_text()
    finally:
        outage.cut()
    assert "Traceback" not in log.read_text()
    parsed = _text_lines(log)
    events = [x["event"] for x in parsed]
    assert events[0] == "ready" and events[-1] == "exiting", events
    assert events.count("db_retrying") == 1 and events.count("db_back") == 1, events
    assert set(events) == {"ready", "fired", "db_retrying", "db_back", "exiting"}, log.read_text()
    retrying = next(x for x in parsed if x["event"] == "db_retrying")
    assert retrying["level"] == "WARNING"
    assert re.fullmatch(
        r"database unreachable \(.+\); ticking again every 0\.2s", retrying["message"]
    ), retrying
    back = next(x for x in parsed if x["event"] == "db_back")
    assert re.fullmatch(
        r"database back after \d+\.\ds; \d+ call\(s\) of this scheduler retried",
        back["message"],
    ), back
    assert parsed[-1]["message"].startswith("stopped by SIGTERM (status 0): ")
