"""The scheduler's tick, driven for real (a :class:`Scheduler` with a fake clock on the
real SQLite and PostgreSQL stores): every on-time slot fires whatever the missed-slot
policy and however many are due at once, the policy decides about missed slots only
(Hypothesis, against a slot-by-slot walk), and a slot that comes due while a tick runs
fires right after it, not after the poll."""

from __future__ import annotations

import asyncio
import itertools
import tempfile
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from test_schedules import BERLIN, Clock, run
from test_workflows_support import StoreFactory, raw_query
from tooldeck.schedules import ScheduleBook, Scheduler, Timing, parse_timing
from tooldeck.workflows.store import SQLiteStore

pytest_plugins = ["test_workflows_support"]


def _expected(
    timing: Timing, cursor: datetime, at: datetime, grace: float, policy: str, limit: int
) -> tuple[list[tuple[datetime, str]], int]:
    """What a tick at ``at`` must fire (slot, how) and skip, by walking the slots one by one:
    every on-time slot fires; the policy decides about the missed ones only."""
    slots = list(itertools.takewhile(lambda s: s <= at, timing.after(cursor)))
    late_before = at - timedelta(seconds=grace)
    missed = [s for s in slots if s < late_before]
    on_time = [s for s in slots if s >= late_before]
    kept = {"skip": [], "once": missed[-1:], "catch_up": missed[-limit:]}[policy]
    return [(s, "late") for s in kept] + [(s, "due") for s in on_time], len(missed) - len(kept)


TIMINGS: dict[str, tuple[Callable[[datetime], Timing], float]] = {
    "every 0.25 s": (lambda t0: Timing.interval(0.25, t0), 0.25),
    "every 7 s": (lambda t0: Timing.interval(7, t0), 7.0),
    "every minute": (lambda t0: Timing.cron("* * * * *", BERLIN), 60.0),
    "every 7 minutes": (lambda t0: Timing.cron("*/7 * * * *", "America/New_York"), 420.0),
}


@settings(max_examples=60, deadline=None)
@given(
    timing=st.sampled_from(sorted(TIMINGS)),
    policy=st.sampled_from(["skip", "once", "catch_up"]),
    limit=st.integers(min_value=1, max_value=20),
    grace=st.one_of(st.sampled_from([0.0, 1.0, 60.0]), st.floats(min_value=0, max_value=3000)),
    # in periods of the schedule; a step back is another scheduler's clock, behind
    steps=st.lists(st.floats(min_value=-3, max_value=150), min_size=1, max_size=6),
    start=st.datetimes(min_value=datetime(2025, 1, 1), max_value=datetime(2029, 1, 1)),
)
def test_ticks_fire_every_on_time_slot_and_the_policy_decides_only_missed_ones(
    timing: str, policy: str, limit: int, grace: float, steps: list[float], start: datetime
) -> None:
    """The real tick path (a Scheduler with a fake clock, a real SQLite store): whatever
    the policy and however many slots are due at once, each on-time slot fires once
    (``due``); of the missed ones, ``skip`` fires none, ``once`` the newest, ``catch_up``
    the newest ``catch_up_limit`` (``late``); the rest are counted as skipped; every fired
    slot has one fire row and one job."""
    make, period = TIMINGS[timing]
    t0 = start.replace(tzinfo=UTC)

    async def main(path: Path) -> None:
        clock = Clock(t0)
        async with SQLiteStore(path) as store:
            book = ScheduleBook(store, clock=clock)
            made = await book.create(
                name="p",
                session_id="s",
                action=book.action(prompt="p"),
                timing=make(t0),
                missed=policy,
                catch_up_limit=limit,
            )
            scheduler = Scheduler(store, clock=clock, grace=grace)
            cursor, fired, skipped = t0, [], 0
            for step in steps:
                at = clock.advance(seconds=step * period)
                want, want_skipped = _expected(made.timing, cursor, at, grace, policy, limit)
                outcomes = await scheduler.tick()
                got = [(f.slot, f.how) for o in outcomes for f in o.fired]
                assert got == want
                assert sum(o.skipped for o in outcomes) == want_skipped
                if at > cursor:
                    cursor = at
                fired += got
                skipped += want_skipped
            row = await book.get(made.id)
            assert (row.fired, row.skipped) == (len(fired), skipped)
            rows = await book.table.fires(made.id, 100_000)
            assert sorted((f.slot, f.how) for f in rows) == sorted(fired)
            (jobs,) = raw_query(store, "SELECT COUNT(*) FROM jobs")
            assert int(str(jobs[0])) == len(fired)

    with tempfile.TemporaryDirectory() as tmp:
        run(main(Path(tmp) / "db.sqlite3"))


@pytest.mark.parametrize("policy", ["skip", "once", "catch_up"])
def test_on_time_slots_are_never_dropped(make_store: StoreFactory, policy: str) -> None:
    """The issue's cases: 3 slots due, all 2.5 s old, and 20 due, 19.5 s old, with a
    grace of 60 s: all fire, whatever the policy and its catch-up limit (10)."""

    async def main() -> None:
        store = make_store()
        clock = Clock(datetime(2026, 4, 1, 12, 0, tzinfo=UTC))
        async with store:
            book = ScheduleBook(store, clock=clock)
            made = []
            for every in (1, 1):
                made.append(
                    await book.create(
                        name=f"every {every}",
                        session_id="s",
                        action=book.action(prompt="p"),
                        timing=parse_timing(every_seconds=every, now=clock.now),
                        missed=policy,
                        catch_up_limit=10,
                    )
                )
            scheduler = Scheduler(store, clock=clock, grace=60)
            clock.advance(seconds=3.5)  # slots at 1, 2, 3 s: the newest 0.5 s old
            three = await scheduler.tick()
            assert [len(o.fired) for o in three] == [3, 3]
            clock.advance(seconds=20)  # 20 more, the oldest 19.5 s old
            twenty = await scheduler.tick()
            assert [len(o.fired) for o in twenty] == [20, 20]
            assert {f.how for o in three + twenty for f in o.fired} == {"due"}
            assert all(o.skipped == 0 for o in three + twenty)
            for s in made:
                assert (await book.get(s.id)).fired == 23

    run(main())


def test_more_on_time_slots_than_one_transaction_fires_all_fire(tmp_path: Path) -> None:
    """2,500 on-time slots in one tick (an interval of 10 ms, 25 s, a grace of 30 s): the
    tick fires them in transactions of at most FIRE_LIMIT, all at the tick's instant."""
    from tooldeck.schedules.store import FIRE_LIMIT

    async def main() -> None:
        clock = Clock(datetime(2026, 4, 1, 12, 0, tzinfo=UTC))
        async with SQLiteStore(tmp_path / "db.sqlite3") as store:
            book = ScheduleBook(store, clock=clock)
            made = await book.create(
                name="fast",
                session_id="s",
                action=book.action(prompt="p"),
                timing=parse_timing(every_seconds=0.01, now=clock.now),
                missed="skip",
            )
            clock.advance(seconds=25)
            (out,) = await Scheduler(store, clock=clock, grace=30).tick()
            assert len(out.fired) == 2500 > 2 * FIRE_LIMIT and out.skipped == 0
            assert [f.slot for f in out.fired] == [
                clock.now - timedelta(milliseconds=10 * k) for k in range(2499, -1, -1)
            ]
            row = await book.get(made.id)
            assert row.cursor_at == clock.now and row.fired == 2500

    run(main())


def test_a_slot_that_comes_due_during_a_tick_fires_without_waiting_for_the_poll(
    make_store: StoreFactory,
) -> None:
    """Schedule A is due at 08:00:00, B 15 ms later; the tick that fires A takes 20 ms (the
    fake clock moves while it runs). B must fire at once, not after the poll (an hour
    here: the scheduler would sleep it, the test stops it after 20 s)."""

    async def main() -> None:
        store = make_store()
        start = datetime(2026, 4, 1, 8, 0, tzinfo=UTC)
        clock = Clock(start - timedelta(minutes=1))
        async with store:
            book = ScheduleBook(store, clock=clock)
            for name, ms in (("A", 0), ("B", 15)):
                await book.create(
                    name=name,
                    session_id="s",
                    action=book.action(prompt="p"),
                    timing=Timing.once(start + timedelta(milliseconds=ms)),
                )
            scheduler: Scheduler

            def on_fire(fires: Sequence[Any]) -> None:
                clock.advance(milliseconds=20)  # this tick took 20 ms
                if scheduler.stats.fired == 2:
                    scheduler.stop()

            scheduler = Scheduler(store, clock=clock, poll=3600, on_fire=on_fire)
            clock.now = start
            asyncio.get_running_loop().call_later(20, scheduler.stop)
            stats = await scheduler.run()
            assert [f.slot - start for f in stats.fires] == [
                timedelta(0),
                timedelta(milliseconds=15),
            ]
            assert stats.ticks == 2

    run(main())
