"""``tooldeck jobs`` and ``tooldeck schedules`` on a real SQLite file: one-line errors,
read commands that never create a database, the live view of a running job."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from tooldeck.cli import app
from tooldeck.jobs import JobTable, NewJob
from tooldeck.schedules import ScheduleBook, Timing
from tooldeck.workflows.store import SQLiteStore

runner = CliRunner()


def invoke(*args: str) -> Any:
    return runner.invoke(app, list(args), env={"COLUMNS": "200"})


def seed(db: Path) -> str:
    async def main() -> str:
        async with SQLiteStore(db) as store:
            table = JobTable(store)
            await table.create(NewJob(id="job-aaa111", session_id="chat", task="summarise"))
            await table.create(NewJob(id="job-bbb222", session_id="chat", task="running one"))
            await table.claim("job-bbb222", "me")
            book = ScheduleBook(store)
            made = await book.create(
                name="morning",
                session_id="chat",
                action=book.action(prompt="report"),
                timing=Timing.cron("0 8 * * *", "Europe/Berlin"),
            )
            return made.id

    return asyncio.run(main())


def test_read_commands_never_create_a_database(tmp_path: Path) -> None:
    db = tmp_path / "sub" / "db.sqlite3"
    home = {"COLUMNS": "200", "HOME": str(tmp_path / "home"), "TOOLDECK_WORKFLOWS_DB": ""}
    for args in (["jobs", "list"], ["schedules", "list"]):  # nothing ran on this machine yet
        result = runner.invoke(app, args, env=home)
        assert result.exit_code == 0 and "no database yet" in result.output
    by_id = (
        ["jobs", "show", "x"],
        ["jobs", "cancel", "x"],
        ["schedules", "show", "x"],
        ["schedules", "cancel", "x"],
        ["schedules", "run-now", "x"],
    )
    for args in by_id:
        result = runner.invoke(app, args, env=home)
        assert result.exit_code == 1
        assert result.output.strip().count("\n") == 0 and "error:" in result.output
    for args in (
        ["jobs", "list"],
        ["schedules", "list"],
        *by_id,
    ):  # a --db that is not there is a mistake, named
        result = invoke(*args, "--db", str(db))
        assert (result.exit_code, result.output) == (
            2,
            f"error: {db} does not exist; give --db an existing workflow database\n",
        )
    assert not db.exists() and not db.parent.exists()
    assert list(tmp_path.iterdir()) == []


def test_jobs_list_show_and_cancel(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite3"
    seed(db)
    listed = invoke("jobs", "list", "--db", str(db))
    assert listed.exit_code == 0 and "job-aaa111" in listed.output and "job-bbb222" in listed.output
    shown = invoke("jobs", "show", "job-aaa", "--db", str(db))
    assert shown.exit_code == 0 and "summarise" in shown.output and "pending" in shown.output
    missing = invoke("jobs", "show", "job-zzz", "--db", str(db))
    assert missing.exit_code == 1 and "no job 'job-zzz'" in missing.output
    ambiguous = invoke("jobs", "show", "job-", "--db", str(db))
    assert ambiguous.exit_code == 1 and "several jobs" in ambiguous.output
    cancelled = invoke("jobs", "cancel", "job-aaa111", "--db", str(db))
    assert cancelled.exit_code == 0 and "will not run" in cancelled.output
    again = invoke("jobs", "cancel", "job-aaa111", "--db", str(db))
    assert again.exit_code == 1 and "already cancelled" in again.output
    stop = invoke("jobs", "cancel", "job-bbb222", "--db", str(db))
    assert stop.exit_code == 0 and "stops at its next step" in stop.output


def test_jobs_show_follow_redraws_until_the_job_ends(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite3"
    seed(db)
    progressed = threading.Event()

    def finish() -> None:
        async def main() -> None:
            async with SQLiteStore(db) as store:
                table = JobTable(store)
                await table.progress("job-bbb222", "me", "Reading notes.md", 1)
                progressed.set()
                await asyncio.sleep(0.3)
                await table.finish("job-bbb222", "me", "succeeded", summary="all read", steps=2)

        asyncio.run(main())

    worker = threading.Thread(target=finish)
    worker.start()
    progressed.wait(30)
    result = invoke("jobs", "show", "job-bbb222", "--follow", "--interval", "0.05", "--db", str(db))
    worker.join(30)
    assert result.exit_code == 0, result.output
    assert "succeeded" in result.output and "all read" in result.output


def test_schedules_list_show_run_now_and_cancel(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite3"
    schedule_id = seed(db)
    listed = invoke("schedules", "list", "--db", str(db))
    assert listed.exit_code == 0 and schedule_id in listed.output and "morning" in listed.output
    shown = invoke("schedules", "show", schedule_id, "--db", str(db), "--next", "3")
    assert shown.exit_code == 0
    times = [line.strip() for line in shown.output.splitlines() if line.startswith("  20")]
    assert len(times) == 3 and all("T08:00:00+0" in t for t in times)
    assert all(datetime.fromisoformat(t) > datetime.now(UTC) for t in times)
    fired = invoke("schedules", "run-now", schedule_id, "--db", str(db))
    assert fired.exit_code == 0 and "job-" in fired.output
    job_id = fired.output.split("job ")[-1].strip().rstrip(".")
    assert invoke("jobs", "show", job_id, "--db", str(db)).exit_code == 0
    cancelled = invoke("schedules", "cancel", schedule_id, "--db", str(db))
    assert cancelled.exit_code == 0
    again = invoke("schedules", "cancel", schedule_id, "--db", str(db))
    assert again.exit_code == 1 and "cancelled; nothing to cancel" in again.output
