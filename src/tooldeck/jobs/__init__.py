"""Background agent jobs: sub-agent sessions that run apart from the turn that started them.

A job is a row in the workflow store (SQLite by default, PostgreSQL at scale) before it
runs; a :class:`JobManager` runs it in this process (at most ``concurrency`` at once), or
a ``tooldeck worker`` runs it from the DBOS queue. A job inherits the policy of the
session that started it (recorded in its row, so that another process keeps to it:
:func:`record_creator`) and is headless; when it ends, that session's next turn sees one
notice (:class:`JobNotices`). See ``docs/jobs-and-schedules.md``.
"""

from ..policy.protection import deny_all
from .notices import JobNotices, job_notice
from .policy import (
    CreatorPolicyError,
    creator_policy,
    job_policy,
    record_creator,
)
from .runner import JOB_INSTRUCTIONS, JobManager, JobRuntime, LiveJob, summarise_output
from .store import JOB_STATES, TERMINAL_JOB_STATES, JobRecord, JobState, JobTable, NewJob
from .tools import JOB_TOOL_NAMES, NOT_FOR_JOBS, format_job, job_tools, job_tools_source

__all__ = [
    "JOB_INSTRUCTIONS",
    "JOB_STATES",
    "JOB_TOOL_NAMES",
    "NOT_FOR_JOBS",
    "TERMINAL_JOB_STATES",
    "CreatorPolicyError",
    "JobManager",
    "JobNotices",
    "JobRecord",
    "JobRuntime",
    "JobState",
    "JobTable",
    "LiveJob",
    "NewJob",
    "creator_policy",
    "deny_all",
    "format_job",
    "job_notice",
    "job_policy",
    "job_tools",
    "job_tools_source",
    "record_creator",
    "summarise_output",
]
