"""Database blips under jobs, schedules, notices and worker leases, for real: the TCP relay
of the workflow fault tests in front of the real PostgreSQL, cut and restored.

- a job whose model answers after a cut is recorded ``succeeded``, its model called once;
- a scheduler ticking across a cut fires its slot on time (not skipped as missed);
- every store operation (workflows, jobs, schedules, notices, leases) meets a pooled
  connection the cut killed and is run again on a fresh one; an operation handed to a
  store in any other shape than a factory is refused, by both drivers;
- each retried operation recognises its own earlier write (a commit whose answer was
  lost), so running it twice is one write and the same answer;
- a job taken over after its lease lapsed is not said to have lost its process.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from test_workflows_support import PG_DSN, raw_query
from test_workflows_workers import Outage, outage
from tooldeck import Toolset
from tooldeck.approvals import allow_all
from tooldeck.jobs import JobManager, JobNotices, JobRuntime, LiveJob, NewJob
from tooldeck.jobs.store import (
    JobTable,
    op_cancel,
    op_claim,
    op_claim_pending,
    op_create_job,
    op_finish,
    op_take_notices,
    op_take_over,
)
from tooldeck.model import ModelRequest
from tooldeck.schedules import ScheduleBook, Scheduler, Timing
from tooldeck.schedules.store import (
    NewSchedule,
    ScheduleTable,
    op_create,
    op_fire_now,
    op_tick,
)
from tooldeck.testing import ScriptedModel, reply
from tooldeck.transcript import AssistantMessage
from tooldeck.workflows.store import (
    NewTask,
    PostgresStore,
    SQLiteStore,
    StoreError,
    WorkflowStore,
)
from tooldeck.workflows.store.ops import op_create_workflow, op_get_task, op_record_rejection
from tooldeck.workflows.store.protocol import Op, OpFactory, Q, now
from tooldeck.workflows.store.workers import WorkerLeases, op_take_over_lost

pytest_plugins = ["test_workflows_support"]  # the PostgreSQL fixtures

__all__ = ["outage"]  # a fixture, defined with the worker tests

RESULT = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


class Slow(ScriptedModel):
    """A scripted model that takes ``seconds`` over each answer, and counts its calls."""

    def __init__(self, answer: str, seconds: float) -> None:
        super().__init__([reply(answer)] * 4)
        self.seconds = seconds
        self.calls = 0

    async def respond(self, request: ModelRequest) -> AssistantMessage:
        self.calls += 1
        await asyncio.sleep(self.seconds)
        return await super().respond(request)


async def blip(outage: Outage, after: float, seconds: float) -> None:
    await asyncio.sleep(after)
    outage.cut()
    await asyncio.sleep(seconds)
    outage.restore()


# -- the reproduction -------------------------------------------------------------------


def test_a_job_whose_model_answered_across_a_cut_is_recorded_succeeded(
    outage: Outage, pg_schema: str
) -> None:
    """The model takes 2 s; the connection is cut for 0.3 s half a second in. Nothing else
    uses the store in between, so the end write is the first call to meet a pooled
    connection the cut killed."""

    async def main() -> None:
        model = Slow("the answer is 42", 2.0)
        store = PostgresStore(outage.dsn, schema=pg_schema)
        async with store, JobManager(store) as manager:
            job_id = await manager.start(
                NewJob(id="job-blip", session_id="s1", task="answer"),
                LiveJob(model=model, tools=Toolset(), policy=allow_all),
            )
            ended = asyncio.ensure_future(manager.wait(job_id, poll=1.0))
            await blip(outage, 0.5, 0.3)
            job = await asyncio.wait_for(ended, 30)
            assert (job.state, job.error) == ("succeeded", None)
            assert job.summary == "the answer is 42"
            assert model.calls == 1
            assert store.blips >= 1  # the end write met the dead connection and was retried

    asyncio.run(main())
    rows = raw_query(PostgresStore(PG_DSN, schema=pg_schema), "SELECT state, attempts FROM jobs")
    assert rows == [("succeeded", 1)]


def test_a_tick_across_a_cut_fires_its_slot_on_time(outage: Outage, pg_schema: str) -> None:
    """A one-time slot 1.5 s ahead, a cut of 0.3 s before it: the scheduler's tick meets a
    dead pooled connection at the slot's time. Retried, the slot fires on time; not
    retried, the loop waits a poll (3 s) and the slot, older than the grace (1 s) by then,
    is skipped as missed."""

    async def main() -> None:
        store = PostgresStore(outage.dsn, schema=pg_schema)
        async with store:
            book = ScheduleBook(store)
            at = datetime.now(UTC) + timedelta(seconds=1.5)
            made = await book.create(
                name="soon",
                session_id="s1",
                action=ScheduleBook.action(prompt="check"),
                timing=Timing.once(at),
            )
            scheduler = Scheduler(store, poll=3.0, grace=1.0)
            running = asyncio.ensure_future(scheduler.run())
            await blip(outage, 0.5, 0.3)
            await asyncio.sleep(1.5)  # past the slot: no call of this test meets the cut
            deadline = asyncio.get_running_loop().time() + 10
            while (await book.get(made.id)).state == "active":
                assert asyncio.get_running_loop().time() < deadline
                await asyncio.sleep(0.2)
            scheduler.stop()
            stats = await asyncio.wait_for(running, 10)
            assert (stats.fired, stats.skipped) == (1, 0)
            (fire,) = await book.table.fires(made.id)
            assert fire.how == "due"
            assert store.blips >= 1

    asyncio.run(main())


# -- every operation, one mechanism -------------------------------------------------------------

Step = tuple[str, Callable[[], Awaitable[Any]]]


def _steps(store: WorkflowStore) -> list[Step]:
    """One call of every public operation, in an order where each one means something."""
    jobs, schedules, leases = JobTable(store), ScheduleTable(store), WorkerLeases(store)
    now = datetime.now(UTC)
    task_a, task_b = "wf-cut:a", "wf-cut:b"
    tasks = [NewTask("a", 0, "Do a.", RESULT), NewTask("b", 1, "Do b.", RESULT)]
    hourly = NewSchedule(
        "sch-cut",
        "hourly",
        "s1",
        {"kind": "prompt", "prompt": "check"},
        Timing.interval(3600, now - timedelta(hours=4, minutes=30)),
        start=now - timedelta(hours=2),  # due: 1.5 h and 0.5 h ago
    )

    async def context() -> Any:
        task = await store.get_task(task_a)
        assert task is not None
        return await store.task_context(task)

    return [
        ("WorkflowStore.schema_version", store.schema_version),
        ("WorkflowStore.create_workflow", lambda: store.create_workflow("wf-cut", "c", {}, tasks)),
        (
            "WorkflowStore.set_workflow_state",
            lambda: store.set_workflow_state("wf-cut", "running", expect=("pending",)),
        ),
        ("WorkflowStore.claim_task", lambda: store.claim_task(task_a, "s1")),
        ("WorkflowStore.claim", lambda: store.claim(task_b, "s1")),
        ("WorkflowStore.resume_task", lambda: store.resume_task(task_b, "s2", "lost")),
        ("WorkflowStore.record_rejection", lambda: store.record_rejection(task_a, {}, ["no n"])),
        (
            "WorkflowStore.accept_result",
            lambda: store.accept_result(task_a, {"n": 1}, submission_key="k1"),
        ),
        ("WorkflowStore.get_task", lambda: store.get_task(task_a)),
        ("WorkflowStore.task_owner", lambda: store.task_owner(task_b)),
        ("WorkflowStore.task_state", lambda: store.task_state(task_b)),
        ("WorkflowStore.get_workflow", lambda: store.get_workflow("wf-cut")),
        ("WorkflowStore.workflow_state", lambda: store.workflow_state("wf-cut")),
        ("WorkflowStore.task_context", context),
        ("WorkflowStore.dependents", lambda: store.dependents("wf-cut", "a")),
        ("WorkflowStore.progress", lambda: store.progress("wf-cut")),
        ("WorkflowStore.find_workflows", lambda: store.find_workflows("wf-")),
        ("WorkflowStore.list_workflows", lambda: store.list_workflows()),
        ("WorkflowStore.transitions", lambda: store.transitions("wf-cut")),
        ("WorkflowStore.rejections", lambda: store.rejections(task_a)),
        ("WorkflowStore.count_results", lambda: store.count_results(task_a)),
        (
            "WorkflowStore.set_task_state",
            lambda: store.set_task_state(task_b, "failed", expect=("running",), reason="x"),
        ),
        ("WorkflowStore.cancel_workflow", lambda: store.cancel_workflow("wf-cut", "done")),
        ("JobTable.create", lambda: jobs.create(NewJob(id="job-c1", session_id="s1", task="t"))),
        (
            "JobTable.create",
            lambda: jobs.create(NewJob(id="job-c2", session_id="s1", task="t"), claim_for="o1"),
        ),
        ("JobTable.claim", lambda: jobs.claim("job-c1", "o1")),
        ("JobTable.heartbeat", lambda: jobs.heartbeat("o1", ["job-c1", "job-c2"])),
        ("JobTable.progress", lambda: jobs.progress("job-c1", "o1", "step 1", 1)),
        ("JobTable.take_over", lambda: jobs.take_over("job-c1", "o2", "o1 died")),
        ("JobTable.create", lambda: jobs.create(NewJob(id="job-c3", session_id="s1", task="t"))),
        ("JobTable.claim_pending", lambda: jobs.claim_pending("o1", 5)),
        ("JobTable.recover", lambda: jobs.recover(3600, "o3")),
        ("JobTable.release", lambda: jobs.release("job-c3", "o1", "its process is stopping")),
        (
            "JobTable.finish",
            lambda: jobs.finish("job-c1", "o2", "succeeded", summary="done", steps=1),
        ),
        ("JobTable.cancel", lambda: jobs.cancel("job-c2", "not needed")),
        ("JobNotices.take", lambda: JobNotices(store).take("s1")),
        ("JobTable.take_notices", lambda: jobs.take_notices("s1")),
        ("JobTable.get", lambda: jobs.get("job-c1")),
        ("JobTable.find", lambda: jobs.find("job-c")),
        ("JobTable.list", lambda: jobs.list(session_id="s1")),
        ("ScheduleTable.create", lambda: schedules.create(hourly)),
        ("ScheduleTable.active_ids", schedules.active_ids),
        ("ScheduleTable.tick", lambda: schedules.tick("sch-cut", now, "sched-1", 3 * 3600)),
        ("ScheduleTable.fire_now", lambda: schedules.fire_now("sch-cut", now, "cli")),
        ("ScheduleTable.get", lambda: schedules.get("sch-cut")),
        ("ScheduleTable.find", lambda: schedules.find("sch-")),
        ("ScheduleTable.fires", lambda: schedules.fires("sch-cut")),
        ("ScheduleTable.list", lambda: schedules.list(session_id="s1")),
        ("ScheduleTable.cancel", lambda: schedules.cancel("sch-cut")),
        ("WorkerLeases.register", lambda: leases.register("w1", "host", 1, 15)),
        ("WorkerLeases.heartbeat", lambda: leases.heartbeat("w1")),
        ("WorkerLeases.take_over_lost", lambda: leases.take_over_lost("w2", 15)),
        ("WorkerLeases.stop", lambda: leases.stop("w1", "done")),
        ("WorkerLeases.list", lambda: leases.list()),
    ]


def _operations() -> set[str]:
    """Every public store operation of every class that runs one."""
    return {
        f"{cls.__name__}.{name}"
        for cls in (WorkflowStore, JobTable, ScheduleTable, WorkerLeases, JobNotices)
        for name, member in vars(cls).items()
        if inspect.iscoroutinefunction(member)
        and not name.startswith("_")
        and name not in ("open", "close")
    }


def test_every_store_operation_rides_out_a_connection_the_cut_killed(
    outage: Outage, pg_schema: str
) -> None:
    async def main() -> None:
        store = PostgresStore(outage.dsn, schema=pg_schema, retry_for=5)
        async with store:
            steps = _steps(store)
            assert {name for name, _ in steps} == _operations()  # none left out
            answers: dict[str, Any] = {}
            for name, step in steps:
                assert not store._idle or not store._idle.empty(), name  # one to be killed
                outage.cut()
                outage.restore()
                before = store.blips
                answers[name] = await step()
                assert store.blips == before + 1, f"{name} did not meet the dead connection"
            assert answers["JobTable.claim_pending"] == ["job-c3"]
            assert answers["JobTable.finish"] is True
            assert answers["JobTable.release"] is True
            assert [job.id for job in (await JobTable(store).list(state="succeeded"))] == ["job-c1"]
            tick = answers["ScheduleTable.tick"]
            assert tick is not None and len(tick.fired) == 2

    asyncio.run(main())


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_an_operation_in_any_other_shape_is_refused(
    kind: str, tmp_path: Path, pg_schema: str
) -> None:
    """A generator cannot be run again: a store takes only a function that makes the
    operation, and says so, before touching the database."""

    async def main() -> None:
        store: WorkflowStore = (
            SQLiteStore(tmp_path / "shape.sqlite3")
            if kind == "sqlite"
            else PostgresStore(PG_DSN, schema=pg_schema)
        )
        async with store:
            op = op_get_task("wf-x:a")
            with pytest.raises(TypeError, match=r"lambda: op_x\(\.\.\.\)"):
                await store._run(op)  # type: ignore[arg-type]
            assert inspect.getgeneratorstate(op) == inspect.GEN_CREATED  # never started
            assert await store._run(lambda: op_get_task("wf-x:a")) is None

    asyncio.run(main())


def _aged(worker_id: str) -> Op[None]:
    yield Q(
        "UPDATE workers SET heartbeat_at = ? WHERE id = ?",
        (now() - timedelta(hours=1), worker_id),
    )


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_each_operation_run_again_recognises_its_own_earlier_write(
    kind: str, tmp_path: Path, pg_schema: str
) -> None:
    """What a retry after a commit whose answer was lost does: the same operation, made
    again by the same factory (so with the same ``at``), run a second time. One write,
    and the same answer twice."""

    async def main() -> None:
        store: WorkflowStore = (
            SQLiteStore(tmp_path / "twice.sqlite3")
            if kind == "sqlite"
            else PostgresStore(PG_DSN, schema=pg_schema)
        )
        jobs = JobTable(store)

        async def twice(factory: OpFactory[Any]) -> tuple[Any, Any]:
            return await store._run(factory), await store._run(factory)

        async with store:
            at = now()
            tasks = [NewTask("a", 0, "Do a.", RESULT)]
            await twice(lambda: op_create_workflow("wf-2", "t", {}, tasks, at))
            assert len(await store.list_workflows()) == 1
            await store.set_workflow_state("wf-2", "running", expect=("pending",))
            assert await store.claim_task("wf-2:a", "s1")
            at = now()
            one, two = await twice(
                lambda: op_record_rejection("wf-2:a", {}, ("no n",), None, "arguments", at)
            )
            assert (one.status, two.status, two.attempt) == ("recorded", "duplicate", 1)
            assert len(await store.rejections("wf-2:a")) == 1

            job = NewJob(id="job-2", session_id="s1", task="t", max_attempts=2)
            at = now()
            await twice(lambda: op_create_job(job, "o1", at))  # written and claimed
            assert await twice(lambda: op_claim("job-2", "o1", at)) == (1, 1)
            at = now()
            # attempts 2 of 2 after the first run: a second takeover would mark it lost
            assert await twice(lambda: op_take_over("job-2", "o2", "o1 died", at)) == (2, 2)
            for name in ("job-3", "job-4", "job-5"):
                await jobs.create(NewJob(id=name, session_id="s1", task="t"))
            at, lock = now(), kind == "postgres"
            claimed = await twice(lambda: op_claim_pending("o3", 1, lock, at))
            assert claimed == (["job-3"], ["job-3"])  # its limit holds across the two
            at = now()
            end = await twice(
                lambda: op_finish(
                    "job-2",
                    "o2",
                    "succeeded",
                    summary="ok",
                    result=None,
                    result_ref=None,
                    error=None,
                    steps=1,
                    at=at,
                )
            )
            assert end == (True, True)
            at = now()
            assert await twice(lambda: op_cancel("job-4", "no", at)) == (("cancelled", True),) * 2
            at = now()
            one, two = await twice(lambda: op_take_notices("s1", at))
            assert [j.id for j in one] == [j.id for j in two] == ["job-2", "job-4"]
            assert await jobs.take_notices("s1") == []  # a new call: announced once
            with pytest.raises(StoreError, match="job 'job-2' exists already"):
                await jobs.create(job)
            assert (await jobs.get("job-2")) is not None

            hourly = NewSchedule(
                "sch-2", "hourly", "s1", {"kind": "prompt", "prompt": "p"}, Timing.cron("0 * * * *")
            )
            at = now()
            await twice(lambda: op_create(hourly, at))
            stamp = now()
            # run-now run again answers the fire it made (not "that instant fired already")
            one, two = await twice(lambda: op_fire_now("sch-2", at, "cli", stamp))
            assert one is not None and one == two
            assert len(await ScheduleTable(store).fires("sch-2")) == 1
            assert (await ScheduleTable(store).get("sch-2")).fired == 1  # type: ignore[union-attr]
            # ... while another call at that instant is told it fired already
            assert await ScheduleTable(store).fire_now("sch-2", at, "cli") is None

            # a tick run again answers the slots it fired, so its DBOS jobs are handed over
            # (and said) even when the answer of the commit that fired them was lost
            start = now() - timedelta(hours=2, minutes=30)
            half_hourly = NewSchedule(
                "sch-3",
                "half-hourly",
                "s1",
                {"kind": "prompt", "prompt": "p", "dispatch": "dbos"},
                Timing.interval(1800, start),
                start=start,
            )
            await ScheduleTable(store).create(half_hourly)
            at, stamp, lock = now(), now(), kind == "postgres"
            one, two = await twice(lambda: op_tick("sch-3", at, "sched-1", 3 * 3600, lock, stamp))
            assert one is not None and one == two
            assert [f.how for f in one.fired] == ["due"] * 5
            assert one.dbos_jobs == tuple(f.job_id for f in one.fired)
            assert not one.more and not one.finished
            assert len(await ScheduleTable(store).fires("sch-3")) == 5
            assert (await ScheduleTable(store).get("sch-3")).fired == 5  # type: ignore[union-attr]

            leases = WorkerLeases(store)
            await leases.register("w-old", "host", 1, 15)
            await store._run(lambda: _aged("w-old"))
            at = now()
            assert await twice(lambda: op_take_over_lost("w-new", 15, at)) == (["w-old"],) * 2

    asyncio.run(main())


# -- a lease that lapsed is not a process that stopped -----------------------------------------


def test_a_job_taken_over_after_its_lease_lapsed_is_not_said_to_have_lost_its_process(
    outage: Outage, pg_schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The first manager, alive, is cut off for longer than its lease; the second takes the
    job over. Neither the row nor the log says the first one's process stopped, and the
    first one, back, writes nothing over the second's run."""
    caplog.set_level(logging.WARNING, logger="tooldeck.jobs")

    async def main() -> None:
        first_model = Slow("first", 2.5)
        second_model = Slow("second", 0.1)
        far = PostgresStore(outage.dsn, schema=pg_schema, retry_for=0.2)
        near = PostgresStore(PG_DSN, schema=pg_schema)
        async with far, near:
            first = JobManager(far, owner="first", lease=1.0, poll=0.1)
            runtime = JobRuntime(model_for=lambda job: second_model)
            second = JobManager(near, runtime, owner="second", lease=1.0, poll=0.1)
            async with first:
                await first.start(
                    NewJob(id="job-lapse", session_id="s1", task="t"),
                    LiveJob(model=first_model, tools=Toolset(), policy=allow_all),
                )
                await asyncio.sleep(0.3)  # its first step is recorded
                outage.cut()
                async with second:
                    job = await asyncio.wait_for(second.wait("job-lapse"), 30)
                    outage.restore()
                    # back, the first learns at its next heartbeat (0.2 s) the job is gone
                    await asyncio.sleep(1.5)
                    assert first.running == ()
            assert (job.state, job.owner, job.summary) == ("succeeded", "second", "second")
            again = await JobTable(near).get("job-lapse")
            assert again is not None and again.summary == "second"  # the first wrote nothing
            note = again.error or ""
            assert "no heartbeat from first for 1s" in note, note
            assert "stopped" not in note, note

    asyncio.run(main())
    said = [r.getMessage() for r in caplog.records if "job-lapse" in r.getMessage()]
    assert any("handed back" in line for line in said), said
    assert not any("process stopped" in line for line in said), said


def test_a_store_refuses_a_second_job_under_an_id_it_did_not_write(tmp_path: Path) -> None:
    async def main() -> None:
        async with SQLiteStore(tmp_path / "ids.sqlite3") as store:
            jobs = JobTable(store)
            await jobs.create(NewJob(id="job-1", session_id="s1", task="t"))
            with pytest.raises(StoreError, match="job-1"):
                await jobs.create(NewJob(id="job-1", session_id="s2", task="other"))

    asyncio.run(main())
