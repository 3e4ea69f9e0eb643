"""Database faults inside task turns, for real: a TCP relay to PostgreSQL that is cut and
restored (every connection dropped, new ones refused), and ``pg_terminate_backend`` on the
store's own connections. No fake database anywhere.

- the PostgreSQL store rides out a blip shorter than its retry window (stale pooled
  connections are dropped, the operation is run again) and raises one-line
  :class:`StoreUnavailable` after a longer one;
- every operation a turn retries is idempotent for a commit whose answer was lost;
- a turn whose submission outlasts the retries stops with ``StoreUnavailable`` (a failed
  step for its durable executor), not with a tool error for the model, and the next run of
  the step stores the result once;
- a ``tooldeck worker`` behind the relay finishes every task across a 0.5 s cut.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from test_workflows_support import PG_DSN
from test_workflows_workers import (
    Client,
    Outage,
    Workers,
    assert_every_result_stored_once,
    client_of,
    outage,
    query,
    running_on,
    wait_for,
    workers,
)
from tooldeck.model import ModelRequest
from tooldeck.testing import ScriptedModel, call, reply
from tooldeck.transcript import AssistantMessage
from tooldeck.workflows import StoreUnavailable, TaskRun, WorkflowEngine
from tooldeck.workflows.scripted import submitting
from tooldeck.workflows.store import (
    NewTask,
    PostgresStore,
    SQLiteStore,
    WorkflowStore,
)
from tooldeck.workflows.task_tools import SUBMIT_RESULT

pytest_plugins = ["test_workflows_support"]  # the PostgreSQL fixtures

__all__ = ["client_of", "outage", "workers"]  # fixtures used here, defined with the worker tests

RESULT = {
    "type": "object",
    "properties": {"n": {"type": "integer"}},
    "required": ["n"],
    "additionalProperties": False,
}


def later(seconds: float, action: Callable[[], None]) -> threading.Timer:
    timer = threading.Timer(seconds, action)
    timer.start()
    return timer


async def new_run(store: WorkflowStore, run_id: str, names: list[str]) -> None:
    await store.create_workflow(
        run_id, "faults", {}, [NewTask(n, i, f"Do {n}.", RESULT) for i, n in enumerate(names)]
    )
    await store.set_workflow_state(run_id, "running", expect=("pending",))


def test_a_cut_shorter_than_the_retry_window_is_ridden_out(outage: Outage, pg_schema: str) -> None:
    async def main() -> None:
        store = PostgresStore(outage.dsn, schema=pg_schema, retry_for=5)
        async with store:
            await new_run(store, "wf-blip", ["a", "b", "c", "d"])
            # Several pooled connections, all idle when the relay drops them.
            await asyncio.gather(*(store.get_task(f"wf-blip:{n}") for n in "abcd"))
            outage.cut()
            timer = later(0.5, outage.restore)
            started = time.monotonic()
            claimed = await asyncio.gather(
                *(store.claim_task(f"wf-blip:{n}", f"s-{n}") for n in "abcd")
            )
            took = time.monotonic() - started
            timer.join()
            assert claimed == [True] * 4
            assert 0.4 < took < 4, took
            assert store.blips >= 1
            accepted = await asyncio.gather(
                *(store.accept_result(f"wf-blip:{n}", {"n": 1}, submission_key=n) for n in "abcd")
            )
            assert [a.status for a in accepted] == ["stored"] * 4

    asyncio.run(main())


def test_a_cut_longer_than_the_retry_window_is_one_line(outage: Outage, pg_schema: str) -> None:
    async def main() -> None:
        store = PostgresStore(outage.dsn, schema=pg_schema, retry_for=1)
        async with store:
            await new_run(store, "wf-long", ["a"])
            outage.cut()
            started = time.monotonic()
            with pytest.raises(StoreUnavailable) as raised:
                await store.get_task("wf-long:a")
            assert 0.9 < time.monotonic() - started < 4
            message = str(raised.value)
            assert "\n" not in message and "unreachable for 1s" in message, message
            outage.restore()
            found = await store.get_task("wf-long:a")  # the store works again at once
            assert found is not None and found.state == "pending"

    asyncio.run(main())


def test_terminated_backends_are_replaced(pg_schema: str) -> None:
    async def main() -> None:
        store = PostgresStore(PG_DSN, schema=pg_schema, retry_for=5)
        async with store:
            await new_run(store, "wf-kill", ["a", "b"])
            await asyncio.gather(store.get_task("wf-kill:a"), store.get_task("wf-kill:b"))
            pids = [c.info.backend_pid for c in store._all]
            assert pids
            with psycopg.connect(PG_DSN, autocommit=True) as admin:
                for pid in pids:
                    admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            assert await store.claim_task("wf-kill:a", "s-a")
            assert {c.info.backend_pid for c in store._all}.isdisjoint(pids)

    asyncio.run(main())


def _store(kind: str, tmp_path: Path, schema: str) -> WorkflowStore:
    if kind == "sqlite":
        return SQLiteStore(tmp_path / "faults.sqlite3")
    return PostgresStore(PG_DSN, schema=schema)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_the_retried_operations_recognise_their_own_earlier_write(
    kind: str, tmp_path: Path, pg_schema: str
) -> None:
    """Run twice, as after a commit whose answer was lost: the same outcome, one write."""

    async def main() -> None:
        async with _store(kind, tmp_path, pg_schema) as store:
            await new_run(store, "wf-again", ["a"])
            task = "wf-again:a"
            assert await store.claim_task(task, "s1")
            assert await store.claim_task(task, "s1")  # its own claim
            assert not await store.claim_task(task, "s2")  # someone else's
            assert await store.resume_task(task, "s3", "lost") == "s1"
            assert await store.resume_task(task, "s3", "lost") == "s3"  # already its own
            first = await store.accept_result(task, {"n": 1}, submission_key="k")
            again = await store.accept_result(task, {"n": 1}, submission_key="k")
            assert (first.status, again.status) == ("stored", "duplicate")
            assert await store.count_results(task) == 1
            moves = await store.transitions("wf-again", task)
            history = [(t.from_state, t.to_state) for t in moves]
            assert history == [
                (None, "pending"),
                ("pending", "running"),
                ("running", "running"),
                ("running", "submitted"),
            ]

    asyncio.run(main())


def _cutting_model(run: TaskRun, outage: Outage, cuts: list[int]) -> ScriptedModel:
    """A scripted model (not a real one) that cuts the relay just before it submits."""

    def script(request: ModelRequest) -> AssistantMessage:
        if any(isinstance(item, AssistantMessage) for item in request.transcript):
            return reply("Done.")
        if cuts:
            cuts.pop()
            outage.cut()
        return reply("Submitting.", call(SUBMIT_RESULT, {"n": 7}))

    return ScriptedModel(script, name="scripted:cutting")


def test_a_submission_the_store_cannot_take_fails_the_step_not_the_model(
    outage: Outage, pg_schema: str
) -> None:
    cuts = [1]  # the first turn cuts the relay; the second runs with the database back
    seen: list[Any] = []

    def model(run: TaskRun) -> ScriptedModel:
        seen.append(run.session_id)
        return _cutting_model(run, outage, cuts)

    async def main() -> None:
        store = PostgresStore(outage.dsn, schema=pg_schema, retry_for=0.5)
        async with store:
            engine = WorkflowEngine(store, model, memory_enabled=False, advance_after_turn=False)
            await new_run(store, "wf-step", ["a"])
            with pytest.raises(StoreUnavailable):
                await engine.run_task("wf-step:a", take_over="a durable executor's retry")
            outage.restore()
            task = await store.get_task("wf-step:a")
            assert task is not None and task.state == "running"  # not failed: run it again
            assert task.attempts == 0  # nothing the model did counted
            await engine.run_task("wf-step:a", take_over="the step failed; run again")
            task = await store.get_task("wf-step:a")
            assert task is not None and task.state == "submitted" and task.result == {"n": 7}
            assert await store.count_results("wf-step:a") == 1
            assert await store.rejections("wf-step:a") == []
            await engine.close()

    asyncio.run(main())
    assert len(seen) == 2


def test_a_worker_behind_a_cut_relay_finishes_every_task(
    workers: Workers, client_of: Callable[..., Client], outage: Outage
) -> None:
    items = 8
    proc = workers.start("blip", lease=8, delay=0.3, items=items, dsn=outage.dsn, wait=False)
    client = client_of(workers, items=items)
    workers.wait_ready("blip")
    workflow_id = client.start()
    wait_for(
        lambda: query(workers, "SELECT count(*) FROM tasks WHERE state = 'running'")[0][0] >= 3,
        "turns in flight",
    )
    outage.cut()
    time.sleep(0.5)
    outage.restore()
    run = client.wait(workflow_id)
    assert_every_result_stored_once(workers, run, items, parked_ok=True)
    assert query(workers, "SELECT count(*) FROM rejections") == [(0,)]
    failed = query(workers, "SELECT count(*) FROM transitions WHERE to_state = 'failed'")
    assert failed == [(0,)]
    assert proc.poll() is None
    # Ridden out inside the steps: no turn was run again (no takeover of its own turn).
    again = "SELECT count(*) FROM transitions WHERE from_state = 'running' AND to_state = 'running'"
    assert query(workers, again) == [(0,)]
    workers.stop_all()
    log = "".join(p.read_text() for p in workers.log_dir.glob("blip-*.log"))
    assert "Traceback" not in log and "sqlalche.me" not in log, log[-3000:]
    # the cut is one line when it starts and one when it ends, DBOS's own lines counted
    assert log.count(" db_retrying: ") == log.count(" db_back: ") == 1, log[-3000:]
    assert " dbos: " not in log


# -- a crash after a rejection ---------------------------------------------------------------

REJECT_SCRIPT = Path(__file__).parent / "workflow_scripts" / "reject_then_hang.py"
BOUNDED = {**RESULT, "properties": {"n": {"type": "integer", "minimum": 10}}}


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_the_turn_that_takes_over_is_told_the_earlier_rejections(
    kind: str, tmp_path: Path, pg_schema: str
) -> None:
    prompts: list[str] = []

    def model(run: TaskRun) -> ScriptedModel:
        prompts.append(run.prompt)
        return submitting(run, {"n": 12})

    async def main() -> None:
        async with _store(kind, tmp_path, pg_schema) as store:
            await store.create_workflow(
                "wf-rej", "faults", {}, [NewTask("a", 0, "Pick.", BOUNDED, max_attempts=3)]
            )
            await store.set_workflow_state("wf-rej", "running", expect=("pending",))
            # What the dead worker's turn left: the task running, one rejection counted.
            assert await store.claim_task("wf-rej:a", "wf-rej.a.dead@w1")
            engine = WorkflowEngine(store, model, memory_enabled=False, advance_after_turn=False)
            await engine.control.submit("wf-rej:a", {"n": 3}, submission_key="dead:c1")
            await engine.run_task("wf-rej:a", take_over="the worker running it was lost")
            task = await store.get_task("wf-rej:a")
            assert task is not None and task.state == "submitted" and task.result == {"n": 12}
            assert task.attempts == 2  # the model's rejection and its accepted result
            assert len(await store.rejections("wf-rej:a")) == 1
            await engine.close()

    asyncio.run(main())
    (prompt,) = prompts
    assert "were rejected" in prompt and "its worker was lost" in prompt
    assert '- attempt 1: {"n":3}' in prompt
    assert "$.n: 3 is less than the minimum of 10" in prompt
    assert "(2 of 3 submissions left)" in prompt


def test_a_fresh_turn_is_told_nothing_about_rejections(tmp_path: Path) -> None:
    prompts: list[str] = []

    def model(run: TaskRun) -> ScriptedModel:
        prompts.append(run.prompt)
        return submitting(run, {"n": 12})

    async def main() -> None:
        async with SQLiteStore(tmp_path / "fresh.sqlite3") as store:
            await store.create_workflow("wf-new", "faults", {}, [NewTask("a", 0, "Pick.", BOUNDED)])
            engine = WorkflowEngine(store, model, memory_enabled=False, advance_after_turn=False)
            await engine.run_task("wf-new:a")
            await engine.close()

    asyncio.run(main())
    assert "rejected" not in prompts[0] and "(at most 3 submissions)" in prompts[0]


def test_a_worker_killed_after_a_rejection_hands_it_to_the_next_turn(
    workers: Workers, client_of: Callable[..., Client]
) -> None:
    workers.start("first", lease=3, items=1, script=REJECT_SCRIPT, wait=False)
    client = client_of(workers, items=1, script=REJECT_SCRIPT)
    workers.wait_ready("first")
    workflow_id = client.start()
    wait_for(lambda: query(workers, "SELECT count(*) FROM rejections") == [(1,)], "a rejection")
    workers.kill("first")  # SIGKILL, its turn hanging after the rejection
    workers.start("second", lease=3, items=1, script=REJECT_SCRIPT)
    run = client.wait(workflow_id)
    assert run.state == "succeeded", run.error
    task = run.task("pick")
    # The successor saw the reason and fixed the value: no second rejection, no attempt
    # spent on the crash (one rejected, one accepted).
    assert task.result["n"] == 10 and "less than the minimum of 10" in task.result["saw"]
    assert task.attempts == 2
    assert query(workers, "SELECT count(*) FROM rejections") == [(1,)]
    taken = query(
        workers,
        "SELECT reason FROM transitions WHERE from_state = 'running' AND to_state = 'running'",
    )
    assert len(taken) == 1 and "(was " in taken[0][0] and "@first)" in taken[0][0]


# -- a worker that knows it lost its lease ---------------------------------------------------


def test_a_paused_worker_taken_over_exits_within_seconds_of_waking(
    workers: Workers, client_of: Callable[..., Client]
) -> None:
    paused = workers.start("paused", lease=3, concurrency=2, delay=1.0, items=6, wait=False)
    workers.start("awake", lease=3, concurrency=2, delay=1.0, items=6, wait=False)
    client = client_of(workers, items=6)
    workers.wait_ready("paused")
    workers.wait_ready("awake")
    workflow_id = client.start()
    wait_for(lambda: running_on(workers, "paused") >= 1, "a turn running on the paused worker")
    paused.send_signal(signal.SIGSTOP)
    try:
        wait_for(
            lambda: query(workers, "SELECT state FROM workers WHERE id = 'paused'") == [("lost",)],
            "the paused worker marked lost",
        )
    finally:
        paused.send_signal(signal.SIGCONT)
    woke = time.monotonic()
    code = paused.wait(30)
    took = time.monotonic() - woke
    print(f"lost worker exited {took:.2f}s after waking")
    assert code == 3
    assert took < 3.0, took  # measured: 0.26 s (before: 30 s of step retries)
    try:
        run = client.wait(workflow_id, timeout=60)
    except TimeoutError:
        tasks = query(workers, "SELECT name, state, session_id FROM tasks ORDER BY position")
        dbos = query(
            workers,
            f"SELECT workflow_uuid, status, executor_id FROM {workers.dbos_schema}.workflow_status",
        )
        raise AssertionError(f"the run stalled: tasks {tasks}; DBOS {dbos}") from None
    assert_every_result_stored_once(workers, run, 6)
    log = "".join(p.read_text() for p in workers.log_dir.glob("paused-*.log"))
    assert "Traceback" not in log, log[-3000:]


def test_dbos_lines_are_one_line_each_without_verbose() -> None:
    from tooldeck.cli.worker_log import dbos_line

    text = (
        "Exception polling schedules: Traceback (most recent call last):\n"
        '  File "x.py", line 1, in f\n'
        "psycopg.OperationalError: connection failed: Connection refused\n"
        "\tIs the server running on that host?\n"
        "(Background on this error at: https://sqlalche.me/e/21/e3q8)"
    )
    assert dbos_line(text) == (
        "Exception polling schedules: psycopg.OperationalError: connection failed: "
        "Connection refused"
    )
    assert dbos_line("a b\nmore") == "a b"
    assert dbos_line("Traceback (most recent call last):\n  File x") == (
        "Traceback (most recent call last):"
    )


def test_an_outage_longer_than_the_lease_hands_the_turns_to_a_worker_that_can_reach_it(
    workers: Workers, client_of: Callable[..., Client], outage: Outage
) -> None:
    cut = workers.start(
        "cut", lease=3, concurrency=2, delay=0.5, items=8, dsn=outage.dsn, wait=False
    )
    workers.start("direct", lease=3, concurrency=2, delay=0.5, items=8, wait=False)
    client = client_of(workers, items=8)
    workers.wait_ready("cut")
    workers.wait_ready("direct")
    workflow_id = client.start()
    wait_for(lambda: running_on(workers, "cut") >= 1, "a turn running behind the relay")
    outage.cut()  # and never restored: for this worker the database is gone
    started = time.monotonic()
    assert cut.wait(30) == 3  # it could not renew its lease: lost, exits at once
    took = time.monotonic() - started
    print(f"cut-off worker exited {took:.2f}s after the cut")
    assert took < 3 + 3, took  # the lease, then a heartbeat at most
    run = client.wait(workflow_id)
    assert_every_result_stored_once(workers, run, 8, parked_ok=True)
    failed = query(workers, "SELECT count(*) FROM transitions WHERE to_state = 'failed'")
    assert failed == [(0,)]
    assert query(workers, "SELECT count(*) FROM rejections") == [(0,)]
    log = "".join(p.read_text() for p in workers.log_dir.glob("cut-*.log"))
    assert "Traceback" not in log, log[-3000:]
    assert " lost_lease: could not renew the lease for 3s (" in log
    assert log.rstrip().endswith(
        " ERROR cut exiting: worker cut lost its lease; its turns were taken over (status 3)"
    )
