"""Schedules on the real SQLite and PostgreSQL stores, with a fake clock (no real waits):
DST in Europe/Berlin and America/New_York, missed-slot policies after a downtime,
schedulers racing for the same slots, the unique (schedule, slot) row, the approval
display, availability, and a scheduled prompt run as a headless job and announced."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from test_workflows_support import StoreFactory, raw_query
from tooldeck import Protection, Session, Toolset, TurnContext
from tooldeck.approvals import ApprovalAnswer, ApprovalRequest
from tooldeck.jobs import JobManager, JobNotices, JobRuntime
from tooldeck.policy import Policy, SessionPolicy, approve
from tooldeck.schedules import (
    ScheduleBook,
    ScheduleError,
    Scheduler,
    Timing,
    TimingError,
    parse_timing,
    schedule_tools_source,
)
from tooldeck.testing import ScriptedModel, call, reply
from tooldeck.workflows.store import PostgresStore, SQLiteStore, WorkflowStore

pytest_plugins = ["test_workflows_support"]

BERLIN = "Europe/Berlin"


class Clock:
    """A fake clock: tests move it by hand."""

    def __init__(self, start: datetime) -> None:
        self.now = start.astimezone(UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        self.now += timedelta(**delta)
        return self.now


def local(text: str, tz: str = BERLIN) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(tz))


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def fired_slots(store: WorkflowStore, schedule_id: str, tz: str) -> list[str]:
    book = ScheduleBook(store)
    fires = await book.table.fires(schedule_id, 10_000)
    return sorted(f.slot.astimezone(ZoneInfo(tz)).isoformat() for f in fires)


async def walk(scheduler: Scheduler, clock: Clock, until: datetime, step: timedelta) -> None:
    while clock.now < until:
        clock.now = min(clock.now + step, until.astimezone(UTC))
        await scheduler.tick()


# -- DST ----------------------------------------------------------------------------------


def test_cron_across_both_dst_changes_in_berlin(make_store: StoreFactory) -> None:
    async def main() -> None:
        store = make_store()
        clock = Clock(local("2026-03-27T12:00"))
        async with store:
            book = ScheduleBook(store, clock=clock)
            daily = await book.create(
                name="daily",
                session_id="s",
                action=book.action(prompt="report"),
                timing=Timing.cron("30 2 * * *", BERLIN),
            )
            hourly = await book.create(
                name="hourly",
                session_id="s",
                action=book.action(prompt="tick"),
                timing=Timing.cron("0 * * * *", BERLIN),
            )
            scheduler = Scheduler(store, clock=clock, grace=3600)
            await walk(scheduler, clock, local("2026-03-30T12:00"), timedelta(minutes=7))
            spring = await fired_slots(store, daily.id, BERLIN)
            # 02:30 does not exist on March 29: it runs once, at 03:00 (CEST)
            assert spring == [
                "2026-03-28T02:30:00+01:00",
                "2026-03-29T03:00:00+02:00",
                "2026-03-30T02:30:00+02:00",
            ]
            hours_29 = [s for s in await fired_slots(store, hourly.id, BERLIN) if "03-29" in s]
            assert len(hours_29) == 23  # the day has 23 hours
            clock.now = local("2026-10-24T12:00").astimezone(UTC)
            await book.table.tick(daily.id, clock.now, "reset", 0)  # skip the summer
            await book.table.tick(hourly.id, clock.now, "reset", 0)
            await walk(scheduler, clock, local("2026-10-26T12:00"), timedelta(minutes=11))
            autumn = [s for s in await fired_slots(store, daily.id, BERLIN) if "-10-" in s]
            # 02:30 happens twice on October 25: it runs once, at the first
            assert autumn == ["2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"]
            hours_25 = [s for s in await fired_slots(store, hourly.id, BERLIN) if "10-25" in s]
            assert len(hours_25) == 25  # both 02:00 hours fire
            assert (
                "2026-10-25T02:00:00+02:00" in hours_25 and "2026-10-25T02:00:00+01:00" in hours_25
            )

    run(main())


def test_next_run_times_in_new_york_span_the_change() -> None:
    timing = Timing.cron("30 2 * * *", "America/New_York")
    times = timing.next_times(local("2026-03-07T12:00", "America/New_York"), 3)
    assert [t.isoformat() for t in times] == [
        "2026-03-08T03:00:00-04:00",  # 02:30 does not exist on March 8: run when the gap ends
        "2026-03-09T02:30:00-04:00",
        "2026-03-10T02:30:00-04:00",
    ]
    once = Timing.once("2026-11-01T01:30", "America/New_York")  # ambiguous: the first
    assert once.at == datetime(2026, 11, 1, 5, 30, tzinfo=UTC)


@settings(max_examples=60, deadline=None)
@given(
    start=st.datetimes(min_value=datetime(2024, 1, 1), max_value=datetime(2030, 1, 1)),
    minutes=st.integers(min_value=1, max_value=60 * 24 * 40),
    keep=st.integers(min_value=1, max_value=50),
    expr=st.sampled_from(["*/7 * * * *", "30 2 * * *", "0 * * * 1-5", "15 1,2,3 * * *"]),
    tz=st.sampled_from([BERLIN, "America/New_York", "Australia/Lord_Howe", "UTC"]),
)
def test_due_slots_match_a_plain_walk(
    start: datetime, minutes: int, keep: int, expr: str, tz: str
) -> None:
    """``due`` (the tick's view) agrees with walking ``after`` one slot at a time, and every
    slot is strictly increasing: no slot twice, in any zone."""
    timing = Timing.cron(expr, tz)
    cursor = start.replace(tzinfo=UTC)
    now = cursor + timedelta(minutes=minutes)
    walked: list[datetime] = []
    for slot in timing.after(cursor):
        if slot > now:
            break
        walked.append(slot)
    kept, total = timing.due(cursor, now, keep)
    assert total == len(walked)
    assert kept == walked[-keep:]
    assert all(a < b for a, b in itertools.pairwise(walked))


def test_interval_slots_are_exact_and_without_drift() -> None:
    anchor = datetime(2026, 1, 1, tzinfo=UTC)
    timing = Timing.interval(0.1, anchor)
    kept, total = timing.due(anchor, anchor + timedelta(hours=10), 3)
    assert total == 360_000
    assert kept[-1] == anchor + timedelta(hours=10)
    assert Timing.interval(0.1, anchor).due(anchor, anchor + timedelta(seconds=1), 100)[1] == 10


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cron": "61 * * * *"}, "invalid"),
        ({"cron": "* * *"}, "five fields"),
        ({"cron": "* * * * *", "every_seconds": 5}, "exactly one"),
        ({}, "exactly one"),
        ({"at": "tomorrow"}, "ISO"),
        ({"cron": "0 8 * * *", "tz": "Mars/Olympus"}, "time zone"),
    ],
)
def test_bad_timings_are_one_line_errors(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ScheduleError, match=message) as caught:
        parse_timing(**kwargs)
    assert "\n" not in str(caught.value)
    assert isinstance(caught.value.__cause__, TimingError | type(None))


# -- missed slots after a downtime ---------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "fired", "skipped", "how"),
    [("skip", 0, 60, set()), ("once", 1, 59, {"late"}), ("catch_up", 5, 55, {"late"})],
)
def test_missed_slot_policies_after_an_hour_of_downtime(
    make_store: StoreFactory, policy: str, fired: int, skipped: int, how: set[str]
) -> None:
    """Every minute; nothing runs for an hour; one tick then decides the 60 missed slots."""

    async def main() -> None:
        store = make_store()
        clock = Clock(datetime(2026, 5, 1, 9, 0, 30, tzinfo=UTC))
        async with store:
            book = ScheduleBook(store, clock=clock)
            s = await book.create(
                name="m",
                session_id="s",
                action=book.action(prompt="p"),
                timing=Timing.cron("* * * * *"),
                missed=policy,
                catch_up_limit=5,
            )
            scheduler = Scheduler(store, clock=clock, grace=10)
            clock.advance(seconds=40)  # 09:01:10: the 09:01 slot is on time
            (first,) = await scheduler.tick()
            assert [f.how for f in first.fired] == ["due"]
            clock.advance(hours=1, seconds=15)  # 10:01:25, 60 slots missed (10:01 too: 25 s)
            (late,) = await scheduler.tick()
            assert len(late.fired) == fired and late.skipped == skipped
            assert {f.how for f in late.fired} == how
            if policy == "catch_up":  # the newest five, oldest first
                assert [f.slot.minute for f in late.fired] == [57, 58, 59, 0, 1]
            if policy == "once":
                assert late.fired[0].slot == datetime(2026, 5, 1, 10, 1, tzinfo=UTC)
            again = await book.get(s.id)
            assert again.fired == 1 + fired and again.skipped == skipped
            jobs = raw_query(store, "SELECT COUNT(*) FROM jobs")
            assert int(str(jobs[0][0])) == 1 + fired  # one job per fired slot, no more
            clock.advance(seconds=40)  # back to normal: the 10:02 slot is on time
            (normal,) = await scheduler.tick()
            assert [(f.slot.minute, f.how) for f in normal.fired] == [(2, "due")]

    run(main())


def test_a_downtime_of_a_year_on_a_minutely_cron_is_bounded(make_store: StoreFactory) -> None:
    async def main() -> None:
        store = make_store()
        clock = Clock(datetime(2026, 1, 1, tzinfo=UTC))
        async with store:
            book = ScheduleBook(store, clock=clock)
            await book.create(
                name="y",
                session_id="s",
                action=book.action(prompt="p"),
                timing=Timing.cron("* * * * *"),
                missed="catch_up",
                catch_up_limit=3,
            )
            clock.advance(days=365, seconds=30)
            (out,) = await Scheduler(store, clock=clock, grace=10).tick()
            assert [f.slot for f in out.fired] == [
                datetime(2027, 1, 1, 0, 0, tzinfo=UTC) - timedelta(minutes=2 - i) for i in range(3)
            ]
            assert out.skipped >= 199_997  # counted up to the walk limit

    run(main())


def test_a_one_time_schedule_fires_once_and_finishes(make_store: StoreFactory) -> None:
    async def main() -> None:
        store = make_store()
        clock = Clock(local("2026-06-01T07:00"))
        async with store:
            book = ScheduleBook(store, clock=clock)
            s = await book.create(
                name="once",
                session_id="s",
                action=book.action(prompt="p"),
                timing=Timing.once("2026-06-01T08:00", BERLIN),
            )
            scheduler = Scheduler(store, clock=clock)
            await walk(scheduler, clock, local("2026-06-02T08:00"), timedelta(minutes=5))
            assert await fired_slots(store, s.id, BERLIN) == ["2026-06-01T08:00:00+02:00"]
            assert (await book.get(s.id)).state == "finished"
            with pytest.raises(ScheduleError, match="in the past"):
                await book.create(
                    name="past",
                    session_id="s",
                    action=book.action(prompt="p"),
                    timing=Timing.once("2026-06-01T08:00", BERLIN),
                )

    run(main())


# -- exactly once ------------------------------------------------------------------------


def test_schedulers_racing_in_one_process_fire_each_slot_once(make_store: StoreFactory) -> None:
    """Three schedulers on three connections tick the same moments concurrently."""

    async def main() -> None:
        store = make_store()
        clock = Clock(datetime(2026, 2, 1, tzinfo=UTC))
        async with store:
            book = ScheduleBook(store, clock=clock)
            s = await book.create(
                name="fast",
                session_id="s",
                action=book.action(prompt="p"),
                timing=parse_timing(every_seconds=1, now=clock.now),
                missed="catch_up",
                catch_up_limit=1000,
            )
            others = [make_store() for _ in range(3)]
            for o in others:
                await o.open()
            try:
                schedulers = [
                    Scheduler(o, clock=clock, owner=f"s{i}", grace=1000)
                    for i, o in enumerate(others)
                ]
                for _ in range(100):
                    clock.advance(seconds=3)
                    await asyncio.gather(*(sch.tick() for sch in schedulers))
            finally:
                for o in others:
                    await o.close()
            fires = await book.table.fires(s.id, 10_000)
            assert sorted(f.slot for f in fires) == [
                datetime(2026, 2, 1, tzinfo=UTC) + timedelta(seconds=i) for i in range(1, 301)
            ]
            rows = raw_query(store, "SELECT COUNT(*), COUNT(DISTINCT id) FROM jobs")
            assert [int(str(v)) for v in rows[0]] == [300, 300]
            assert sum(sch.stats.fired for sch in schedulers) == 300

    run(main())


def test_the_database_refuses_a_second_row_for_a_slot(make_store: StoreFactory) -> None:
    async def main() -> None:
        store = make_store()
        clock = Clock(datetime(2026, 2, 1, tzinfo=UTC))
        async with store:
            book = ScheduleBook(store, clock=clock)
            s = await book.create(
                name="x",
                session_id="s",
                action=book.action(prompt="p"),
                timing=parse_timing(every_seconds=60, now=clock.now),
            )
            clock.advance(seconds=61)
            await Scheduler(store, clock=clock).tick()
        (fire,) = raw_query(store, "SELECT schedule_id, slot FROM schedule_fires")
        _raw_duplicate(store, s.id, fire[1])

    run(main())


def _raw_duplicate(store: WorkflowStore, schedule_id: str, slot: Any) -> None:
    if isinstance(store, SQLiteStore):
        import sqlite3

        conn = sqlite3.connect(store.path)
        try:
            with pytest.raises(sqlite3.IntegrityError), conn:
                conn.execute(
                    "INSERT INTO schedule_fires VALUES (?, ?, 'due', 'j', 'raw', '2026-01-01')",
                    (schedule_id, slot),
                )
        finally:
            conn.close()
        return
    import psycopg
    from psycopg import sql

    from test_workflows_support import PG_DSN

    assert isinstance(store, PostgresStore)
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(store.schema)))
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute(
                "INSERT INTO schedule_fires VALUES (%s, %s, 'due', 'j', 'raw', now())",
                (schedule_id, slot),
            )


def test_run_now_makes_one_job(make_store: StoreFactory) -> None:
    async def main() -> None:
        store = make_store()
        clock = Clock(datetime(2026, 2, 1, tzinfo=UTC))
        async with store:
            book = ScheduleBook(store, clock=clock)
            s = await book.create(
                name="x",
                session_id="s",
                action=book.action(prompt="p"),
                timing=Timing.cron("0 8 * * *"),
            )
            fire = await book.run_now(s.id[:8])
            assert fire.how == "manual"
            with pytest.raises(ScheduleError):
                await book.run_now(s.id)  # the same instant again (fake clock)
            clock.advance(seconds=1)
            await book.run_now(s.id)
            assert (await book.get(s.id)).fired == 2

    run(main())


# -- the tools -------------------------------------------------------------------------------


class Human:
    def __init__(self) -> None:
        self.shown: list[Any] = []

    async def __call__(self, requests: Sequence[ApprovalRequest]) -> list[ApprovalAnswer]:
        self.shown.extend(r.display for r in requests)
        return [approve() for _ in requests]


def test_create_schedule_is_write_and_its_approval_shows_the_next_three_runs(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        store = SQLiteStore(tmp_path / "db.sqlite3")
        clock = Clock(local("2026-03-27T12:00"))
        async with store:
            book = ScheduleBook(store, clock=clock)
            human = Human()
            policy = SessionPolicy(Policy(), session_id="s", home=tmp_path)
            turn = TurnContext(session_id="s", home=tmp_path)
            tools = Toolset(list(schedule_tools_source(book).tools_for(turn)))
            assert tools["create_schedule"].tier == "WRITE"
            args = {
                "name": "morning report",
                "prompt": "summarise the inbox",
                "cron": "30 2 * * *",
                "time_zone": BERLIN,
            }
            session = Session(
                ScriptedModel([reply(call("create_schedule", args)), reply("done")]),
                tools,
                session_id="s",
                turn=turn,
                protect=Protection.policy(policy, approver=policy.approver(human)),
            )
            result = await session.run("schedule it")
            (shown,) = human.shown
            assert shown["next_runs"] == [
                "2026-03-28T02:30:00+01:00",
                "2026-03-29T03:00:00+02:00",
                "2026-03-30T02:30:00+02:00",
            ]
            assert shown["time_zone"] == BERLIN and "summarise the inbox" in shown["runs"]
            assert not result.tool_outputs[0].is_error
            (made,) = await book.table.list()
            assert made.session_id == "s" and made.timing.expr == "30 2 * * *"

    run(main())


def test_schedule_tools_only_on_text_turns(tmp_path: Path) -> None:
    book = ScheduleBook(SQLiteStore(tmp_path / "never-opened.sqlite3"))
    creator = schedule_tools_source(book)
    text = TurnContext(session_id="s", home=tmp_path)
    task = TurnContext(session_id="s", home=tmp_path, turn_kind="workflow_task")
    assert {t.name for t in creator.tools_for(text)} == {
        "create_schedule",
        "list_schedules",
        "cancel_schedule",
    }
    assert list(creator.tools_for(task)) == []
    assert not (tmp_path / "never-opened.sqlite3").exists()


def test_a_scheduled_prompt_runs_headless_and_its_session_is_told_once(
    make_store: StoreFactory, tmp_path: Path
) -> None:
    async def main() -> None:
        store = make_store()
        clock = Clock(datetime(2026, 2, 1, 7, 59, tzinfo=UTC))
        job_models: list[ScriptedModel] = []

        def model_for(job: Any) -> ScriptedModel:
            m = ScriptedModel(
                [
                    reply(call("write_file", {"path": "x.txt", "content": "x"})),
                    reply("inbox: 3 new"),
                ]
            )
            job_models.append(m)
            return m

        from tooldeck.builtin import load_builtin_registry

        registry = load_builtin_registry()
        runtime = JobRuntime(
            model_for=model_for,
            tools_for=lambda job: registry.toolset(TurnContext(session_id="j", home=tmp_path)),
            home=tmp_path,
        )
        async with store, JobManager(store, runtime, poll=0.02, lease=5) as manager:
            book = ScheduleBook(store, clock=clock)
            await book.create(
                name="inbox",
                session_id="chat",
                action=book.action(prompt="check the inbox"),
                timing=Timing.cron("0 8 * * *"),
            )
            clock.advance(minutes=2)
            (out,) = await Scheduler(store, clock=clock).tick()
            (fire,) = out.fired
            job = await asyncio.wait_for(manager.wait(fire.job_id), 30)
            assert job.state == "succeeded" and job.summary == "inbox: 3 new"
            assert not (tmp_path / "x.txt").exists()  # WRITE, headless: denied
            chat = Session(
                ScriptedModel([reply("thanks"), reply("ok")]),
                Toolset(),
                session_id="chat",
                notices=JobNotices(store),
            )
            await chat.run("hi")
            await chat.run("hi again")
            notes = [m for m in chat.transcript if "[tooldeck notice]" in getattr(m, "text", "")]
            assert len(notes) == 1 and "inbox: 3 new" in notes[0].text

    run(main())


def test_a_scheduled_workflow_runs_as_a_job_and_ends_with_the_run(
    make_store: StoreFactory, tmp_path: Path
) -> None:
    from tooldeck.workflows import Task, TaskRun, Workflow, WorkflowEngine
    from tooldeck.workflows.scripted import submitting

    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
        "additionalProperties": False,
    }
    flow = Workflow("nightly", [Task("count", "Count.", result=schema)])

    def task_model(run: TaskRun) -> Any:
        return submitting(run, {"n": 7})

    async def main() -> None:
        store = make_store()
        clock = Clock(datetime(2026, 2, 1, 1, 59, tzinfo=UTC))
        async with store:
            engine = WorkflowEngine(store, task_model, catalog=[flow], home=tmp_path)
            runtime = JobRuntime(model_for=lambda job: ScriptedModel([]), engine=engine)
            async with engine, JobManager(store, runtime, poll=0.02, lease=5) as manager:
                book = ScheduleBook(store, clock=clock)
                with pytest.raises(ScheduleError, match="unknown workflow"):
                    book.action(workflow="other", workflows=["nightly"])
                await book.create(
                    name="nightly",
                    session_id="chat",
                    action=book.action(workflow="nightly", inputs="{}", workflows=["nightly"]),
                    timing=Timing.cron("0 2 * * *"),
                )
                clock.advance(minutes=1)
                (out,) = await Scheduler(store, clock=clock).tick()
                job = await asyncio.wait_for(manager.wait(out.fired[0].job_id), 60)
            assert job.state == "succeeded" and job.kind == "workflow"
            wf = await engine.get(job.result["workflow_id"])
            assert wf.state == "succeeded" and wf.task("count").result == {"n": 7}
            (note,) = await JobNotices(store).take("chat")
            assert "succeeded" in note and "nightly" in note

    run(main())


def test_every_scheduler_log_event_is_documented() -> None:
    from tooldeck.cli.schedules import EVENTS

    doc = (Path(__file__).parent.parent / "docs" / "jobs-and-schedules.md").read_text()
    for event in EVENTS:
        assert f"| `{event}` |" in doc, event
