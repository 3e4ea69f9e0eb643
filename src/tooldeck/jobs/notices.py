"""The notice of an ended job, for the next turn of the session that started it.

:class:`JobNotices` is the session's :class:`~tooldeck._notices.NoticeSource`
(``Session(notices=JobNotices(store))``): each ended job of the session is announced
exactly once, in one item that says its state, a short summary and where the whole
result is (the offload store's recall reference, and ``job_status``). The job rows are
marked announced in the statement that reads them (:func:`~tooldeck.jobs.store.op_take_notices`),
so the guarantee holds across processes.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._notices import NOTICE_PREFIX
from ..workflows.store.base import WorkflowStore
from .store import JobRecord, JobTable


def job_notice(job: JobRecord) -> str:
    """The notice text of an ended job."""
    what = f"background job {job.id}" + (f" ({job.agent})" if job.agent else "")
    lines = [f"{NOTICE_PREFIX} {what} ended: {job.state}."]
    if job.summary:
        lines.append(f"Summary: {job.summary}")
    if job.error and job.state != "succeeded":
        lines.append(f"Reason: {job.error}")
    where = [f"job_status(job_id={job.id!r})"]
    if job.result_ref:
        where.insert(0, f"recall_tool_result(ref_id={job.result_ref!r})")
    lines.append("Full result: " + " or ".join(where) + ".")
    return "\n".join(lines)


class JobNotices:
    """A session's notices of its ended jobs, each handed out once (see the module doc)."""

    def __init__(self, store: WorkflowStore) -> None:
        self.table = JobTable(store)

    async def take(self, session_id: str) -> Sequence[str]:
        return [job_notice(job) for job in await self.table.take_notices(session_id)]
