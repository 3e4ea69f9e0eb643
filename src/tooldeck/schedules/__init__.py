"""Schedules: run a prompt (as a headless job) or a workflow on a cron expression, an
interval or once, in an IANA time zone, each due slot exactly once.

Schedules and their fired slots live in the workflow store (SQLite by default,
PostgreSQL at scale); the database's unique (schedule, slot) key makes a slot fire once
however many :class:`Scheduler` processes run. See ``docs/jobs-and-schedules.md``.
"""

from .scheduler import (
    ScheduleBook,
    ScheduleError,
    Scheduler,
    SchedulerStats,
    parse_timing,
    utc_now,
)
from .store import (
    MISSED_POLICIES,
    Fire,
    MissedPolicy,
    NewSchedule,
    ScheduleRecord,
    ScheduleTable,
    TickOutcome,
    slot_job_id,
)
from .timing import Timing, TimingError
from .tools import CreateScheduleTool, format_schedule, schedule_tools, schedule_tools_source

__all__ = [
    "MISSED_POLICIES",
    "CreateScheduleTool",
    "Fire",
    "MissedPolicy",
    "NewSchedule",
    "ScheduleBook",
    "ScheduleError",
    "ScheduleRecord",
    "ScheduleTable",
    "Scheduler",
    "SchedulerStats",
    "TickOutcome",
    "Timing",
    "TimingError",
    "format_schedule",
    "parse_timing",
    "schedule_tools",
    "schedule_tools_source",
    "slot_job_id",
    "utc_now",
]
