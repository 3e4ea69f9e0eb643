"""A run nobody serves, and cancelling runs: ``QueueWatch``, ``tooldeck workflows cancel``,
and ``tooldeck workflows run --workers`` with no live worker (real PostgreSQL, a real
worker process started once so DBOS's tables exist, then stopped)."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from typer.testing import CliRunner

from test_workflows_support import PG_DSN
from test_workflows_workers import SCRIPT, Workers, query, workers
from tooldeck.cli import app
from tooldeck.workflows.queued import QueueWatch
from tooldeck.workflows.store import NewTask, SQLiteStore
from tooldeck.workflows.store.protocol import Op, Q
from tooldeck.workflows.store.workers import WorkerLeases

pytest_plugins = ["test_workflows_support"]  # the PostgreSQL fixtures

__all__ = ["workers"]  # the fixture, defined with the worker tests

RESULT = {
    "type": "object",
    "properties": {"n": {"type": "integer"}},
    "required": ["n"],
    "additionalProperties": False,
}
ENV = {"TOOLDECK_WORKFLOWS_DSN": "", "TOOLDECK_WORKFLOWS_DB": "", "COLUMNS": "200"}


async def _new_run(store: SQLiteStore, run_id: str) -> None:
    await store.create_workflow(
        run_id, "queued", {}, [NewTask(n, i, "Do it.", RESULT) for i, n in enumerate("ab")]
    )
    await store.set_workflow_state(run_id, "running", expect=("pending",))


def test_queue_watch_reports_a_run_nobody_takes(tmp_path: Path) -> None:
    now = [100.0]
    clock: Callable[[], float] = lambda: now[0]  # noqa: E731

    async def main() -> None:
        async with SQLiteStore(tmp_path / "w.sqlite3") as store:
            await _new_run(store, "wf-q")
            watch = QueueWatch(store, "wf-q", after=5, clock=clock)
            assert await watch.check() is None
            now[0] += 4
            assert await watch.check() is None
            now[0] += 2
            stall = await watch.check()
            assert stall is not None and stall.alive == 0
            assert stall.message == "no worker has taken a task of wf-q for 6s (workers alive: 0)"
            watch.reset()
            assert await watch.check() is None
            assert await store.claim_task("wf-q:a", "s1")  # a worker took one
            now[0] += 60
            assert await watch.check() is None  # running: not stalled however long
            await store.set_task_state("wf-q:a", "failed", expect=("running",), reason="x")
            now[0] += 1
            assert await watch.check() is None  # a change restarts the count
            now[0] += 5
            assert await watch.check() is not None
            await store.cancel_workflow("wf-q", "enough")
            assert await watch.check() is None  # finished

    asyncio.run(main())


def test_only_workers_with_a_fresh_heartbeat_count_as_alive(tmp_path: Path) -> None:
    now = [100.0]

    async def main() -> None:
        async with SQLiteStore(tmp_path / "w.sqlite3") as store:
            await _new_run(store, "wf-s")
            leases = WorkerLeases(store)
            await leases.register("live", "h", 1, lease=3)
            await leases.register("killed", "h", 2, lease=3)  # then SIGKILLed: no renewal
            await leases.register("old", "h", 3)  # an older release: no lease recorded
            await leases.register("gone", "h", 4, lease=3)
            await leases.stop("gone", "stopped")
            ago = (datetime.now(UTC) - timedelta(seconds=12)).isoformat()
            await store._run(lambda: _set_heartbeat("killed", ago))
            await store._run(lambda: _set_heartbeat("old", ago))  # within the 15 s assumed
            watch = QueueWatch(store, "wf-s", after=5, clock=lambda: now[0])
            assert await watch.check() is None
            now[0] += 6
            stall = await watch.check()
            assert stall is not None
            assert (stall.alive, [w for w, _ in stall.stale]) == (2, ["killed"])
            assert stall.message == (
                "no worker has taken a task of wf-s for 6s (workers alive: 2, the last "
                "heartbeat 0 s ago; 1 worker's heartbeat is 12 s old (killed))"
            )
            await store._run(lambda: _set_heartbeat("live", ago))
            await store._run(lambda: _set_heartbeat("old", "2000-01-01T00:00:00+00:00"))
            stall = await watch.check()
            assert stall is not None and stall.alive == 0
            assert stall.message.endswith(
                "(workers alive: 0; 3 workers' heartbeats are 12-"
                f"{max(age for _, age in stall.stale):.0f} s old (killed, live, old))"
            ), stall.message

    asyncio.run(main())


def _set_heartbeat(worker_id: str, at: str) -> Op[None]:
    yield Q("UPDATE workers SET heartbeat_at = ? WHERE id = ?", (at, worker_id))


def _restart(row_id: int, task_id: str, reason: str) -> Op[None]:
    yield Q(
        "INSERT INTO transitions (id, workflow_id, task_id, from_state, to_state, reason, at) "
        "VALUES (?, 'wf-f', ?, 'running', 'running', ?, '2026-12-02T00:00:00+00:00')",
        (row_id, task_id, reason),
    )


def test_following_notes_each_restart_once_though_they_commit_out_of_order(
    tmp_path: Path,
) -> None:
    """Workers commit transitions of different tasks out of id order: a row with a higher
    id (b's takeover) can be visible before a lower one (a's). The follower notes each
    restart once, none skipped, none twice (row ids given here, as two workers' commits
    would land them)."""
    from tooldeck.events import Event
    from tooldeck.workflows.events import TaskNote
    from tooldeck.workflows.follow import follow_run

    notes: list[tuple[str, str]] = []

    async def emit(event: Event) -> None:
        if isinstance(event, TaskNote):
            notes.append((event.task, event.text))

    async def main() -> None:
        async with SQLiteStore(tmp_path / "f.sqlite3") as store:
            await store.create_workflow(
                "wf-f", "follow", {}, [NewTask(n, i, "Do it.", RESULT) for i, n in enumerate("ab")]
            )
            await store.set_workflow_state("wf-f", "running", expect=("pending",))
            follower = asyncio.create_task(follow_run(store, emit, "wf-f", poll_interval=0.02))
            await store._run(lambda: _restart(1001, "wf-f:b", "b taken over"))
            await asyncio.sleep(0.2)  # the follower has seen b's restart alone
            await store._run(lambda: _restart(1000, "wf-f:a", "a taken over"))
            await store._run(lambda: _restart(1002, "wf-f:b", "b again"))
            await asyncio.sleep(0.2)
            await store.cancel_workflow("wf-f", "enough")
            await asyncio.wait_for(follower, 10)

    asyncio.run(main())
    assert sorted(notes) == [
        ("a", "turn restarted: a taken over"),
        ("b", "turn restarted: b again"),
        ("b", "turn restarted: b taken over"),
    ]
    assert notes.index(("b", "turn restarted: b taken over")) < notes.index(
        ("b", "turn restarted: b again")
    )


def test_cancel_a_run_from_the_command_line(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite3"

    async def make() -> None:
        async with SQLiteStore(db) as store:
            await _new_run(store, "wf-cancelme1")
            assert await store.claim_task("wf-cancelme1:a", "s1")

    asyncio.run(make())
    runner = CliRunner()
    result = runner.invoke(
        app, ["workflows", "cancel", "wf-cancel", "--db", str(db), "--reason", "wrong inputs"]
    )
    assert result.exit_code == 0, result.output
    assert result.output == "cancelled wf-cancelme1: 1 running and 1 pending task(s) stopped\n"
    again = runner.invoke(app, ["workflows", "cancel", "wf-cancelme1", "--db", str(db)])
    assert (again.exit_code, again.output) == (
        1,
        "error: run wf-cancelme1 already cancelled; not cancelled\n",
    )
    missing = runner.invoke(app, ["workflows", "cancel", "wf-nope", "--db", str(db)])
    assert (missing.exit_code, missing.output) == (1, "error: no workflow run 'wf-nope'\n")

    async def check() -> None:
        async with SQLiteStore(db) as store:
            wf = await store.get_workflow("wf-cancelme1")
            assert wf is not None and wf.state == "cancelled" and wf.error == "wrong inputs"
            assert {t.state for t in wf.tasks} == {"cancelled"}

    asyncio.run(check())


def _run_on_workers(workers: Workers, *extra: str) -> tuple[int, str, float]:
    started = time.monotonic()
    result = CliRunner().invoke(
        app,
        [*workers.run_args(SCRIPT), "--no-worker-after", "2", *extra],
        env={**ENV, "TOOLDECK_TEST_ITEMS": "3"},
    )
    return result.exit_code, result.output, time.monotonic() - started


def test_a_run_with_no_live_worker_is_reported_and_left_queued_or_cancelled(
    workers: Workers,
) -> None:
    workers.start("once", items=3, lease=1.2)  # registers its lease, then is killed:
    workers.kill("once")  # still marked alive, its heartbeat stops
    # no wait here: the report comes 2 s after the run starts, when its heartbeat is
    # older than its lease of 1.2 s

    code, output, took = _run_on_workers(workers, "--if-no-worker", "leave")
    assert code == 1, output
    found = re.search(r"\(workers alive: 0; 1 worker's heartbeat is (\d+) s old \(once\)\)", output)
    assert "no worker has taken a task of wf-" in output and found, output
    assert int(found[1]) >= 1
    assert took < 15, took  # reported within seconds (the report comes after 2 s)
    (workflow_id,) = [w for (w,) in query(workers, "SELECT id FROM workflows")]
    assert f"{workflow_id} left queued" in output
    assert f"tooldeck workflows cancel {workflow_id}" in output
    assert query(workers, "SELECT state FROM workflows") == [("running",)]  # still queued
    queued = query(
        workers,
        f"SELECT count(*) FROM {workers.dbos_schema}.workflow_status WHERE status = 'ENQUEUED'",
    )
    assert queued == [(3,)]

    result = CliRunner().invoke(
        app,
        [
            "workflows",
            "cancel",
            workflow_id[:8],
            "--dsn",
            PG_DSN,
            "--pg-schema",
            workers.schema,
            "--dbos-schema",
            workers.dbos_schema,
        ],
        env=ENV,
    )
    assert result.exit_code == 0, result.output
    assert result.output == f"cancelled {workflow_id}: 0 running and 4 pending task(s) stopped\n"
    statuses = query(
        workers, f"SELECT status, count(*) FROM {workers.dbos_schema}.workflow_status GROUP BY 1"
    )
    assert dict(statuses).get("ENQUEUED", 0) == 0 and dict(statuses)["CANCELLED"] == 3

    code, output, _ = _run_on_workers(workers, "--if-no-worker", "cancel")
    assert code == 1, output
    assert "cancelling the run" in output and "cancelled" in output
    states = dict(query(workers, "SELECT state, count(*) FROM workflows GROUP BY 1"))
    assert states == {"cancelled": 2}
