"""How late a slot fires when it comes due while the scheduler is ticking (issue 30).

A real :class:`~tooldeck.schedules.Scheduler` on the real clock (``run()``, ``poll`` 1 s)
and a real store: schedule A fires every second, schedule B every second ``--offset``
seconds after A (15 ms by default), and ``--idle N`` schedules that are never due (a
yearly cron) make each tick take longer than the offset, so B's slot comes due while
the tick that fired A is still running. The delay of a slot is its fire row's
``fired_at`` minus the slot; the table gives the median and p90 per schedule, and the
median length of a tick that fired A.

    uv run --group bench python bench/bench_slot_delay.py [--store sqlite|postgres]
        [--offset 0.015] [--idle 40] [--seconds 20]

PostgreSQL: TOOLDECK_TEST_PG_DSN (default postgresql://postgres@127.0.0.1:5432/test), a
fresh schema, dropped after.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import BackgroundLoad, machine_lines, percentile, table, wait_for_idle
from tooldeck.schedules import ScheduleBook, Scheduler, Timing, parse_timing
from tooldeck.workflows.store import PostgresStore, SQLiteStore, WorkflowStore

DSN = os.environ.get("TOOLDECK_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")


class TimedScheduler(Scheduler):
    """A scheduler that notes how long each tick that fired something took."""

    ticks: list[float]

    async def tick(self, at: datetime | None = None) -> Any:
        started = time.perf_counter()
        outcomes = await super().tick(at)
        if any(o.fired for o in outcomes):
            self.ticks.append(time.perf_counter() - started)
        return outcomes


async def measure(store: WorkflowStore, offset: float, idle: int, seconds: float) -> list[str]:
    async with store:
        book = ScheduleBook(store)
        start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
        ids = {}
        for name, shift in (("A", 0.0), ("B", offset)):
            made = await book.create(
                name=name,
                session_id="bench",
                action=book.action(prompt="p"),
                timing=parse_timing(every_seconds=1, now=start + timedelta(seconds=shift)),
                missed="skip",
            )
            ids[name] = made.id
        for i in range(idle):
            await book.create(
                name=f"idle{i}",
                session_id="bench",
                action=book.action(prompt="p"),
                timing=Timing.cron("0 0 1 1 *"),
            )
        scheduler = TimedScheduler(store, poll=1.0, grace=60)
        scheduler.ticks = []
        loop = asyncio.get_running_loop()
        loop.call_later(seconds + 2, scheduler.stop)
        await scheduler.run()
        rows = []
        for name, schedule_id in ids.items():
            fires = await book.table.fires(schedule_id, 10_000)
            delays = sorted((f.fired_at - f.slot).total_seconds() for f in fires)
            rows.append(
                [
                    f"{name} (+{0 if name == 'A' else offset * 1000:g} ms)",
                    str(len(delays)),
                    f"{statistics.median(delays):.3f}",
                    f"{percentile(delays, 0.9):.3f}",
                    f"{max(delays):.3f}",
                ]
            )
        tick = statistics.median(scheduler.ticks) * 1000 if scheduler.ticks else 0.0
        return [
            table(["schedule", "slots fired", "median delay s", "p90 s", "max s"], rows),
            "",
            f"median tick that fired a slot: {tick:.1f} ms ({idle} idle schedules)",
        ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--offset", type=float, default=0.015)
    parser.add_argument("--idle", type=int, default=40)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    print(f"- {wait_for_idle()}")
    for line in machine_lines(("tooldeck", "psycopg", "cronsim")):
        print(line)
    schema = f"bench_delay_{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as tmp:
        store: WorkflowStore = (
            SQLiteStore(Path(tmp) / "db.sqlite3")
            if args.store == "sqlite"
            else PostgresStore(DSN, schema=schema)
        )
        load = BackgroundLoad()
        lines = asyncio.run(measure(store, args.offset, args.idle, args.seconds))
        busy = load.report()
        if args.store == "postgres":
            import psycopg
            from psycopg import sql

            with psycopg.connect(DSN, autocommit=True) as conn:
                conn.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
                )
    print(f"- store: {args.store}; offset {args.offset:g} s; {busy}")
    print()
    print("\n".join(lines))


if __name__ == "__main__":
    main()
