"""Jobs on DBOS: each job one DBOS workflow on the ``tooldeck_jobs`` queue in PostgreSQL.

:class:`DbosJobQueue` is the client side (a :class:`~tooldeck.jobs.JobManager` with
``dispatch='dbos'``, or a scheduler): ``submit`` enqueues the DBOS workflow
``tooldeck_job`` with the id ``tooldeck-job:<job id>``, so submitting a job twice
enqueues it once (the scheduler re-submits pending DBOS jobs at start-up: a crash
between writing a job and enqueueing it loses nothing). ``tooldeck worker`` processes
with a job runtime run them (:mod:`tooldeck.workflows.worker`): the job's single step
claims it and runs it; if the worker dies inside the step, DBOS runs the step again on
another worker after the lease takeover, which takes the job over (a new attempt, from
its task) or marks it lost when its attempts are spent.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from ..workflows.durable import APP_VERSION, DEFAULT_DBOS_SCHEMA, DbosUnavailable, new_client

if TYPE_CHECKING:
    from dbos import DBOSClient

__all__ = ["JOB_QUEUE", "JOB_WORKFLOW", "DbosJobQueue", "job_workflow_id"]

JOB_QUEUE = "tooldeck_jobs"
JOB_WORKFLOW = "tooldeck_job"


def job_workflow_id(job_id: str) -> str:
    """The DBOS workflow id of a job (one per job: enqueueing twice is a no-op)."""
    return f"tooldeck-job:{job_id}"


class DbosJobQueue:
    """Enqueue and cancel jobs on the DBOS queue of the PostgreSQL database at ``dsn``."""

    def __init__(self, dsn: str, *, dbos_schema: str = DEFAULT_DBOS_SCHEMA) -> None:
        self.dsn = dsn
        self.dbos_schema = dbos_schema
        self._client: DBOSClient | None = None
        self.submitted = 0

    def _get(self) -> DBOSClient:
        if self._client is None:
            self._client = new_client(self.dsn, self.dbos_schema)
        return self._client

    async def submit(self, job_id: str) -> None:
        client = await asyncio.to_thread(self._get)
        options: Any = {
            "queue_name": JOB_QUEUE,
            "workflow_name": JOB_WORKFLOW,
            "workflow_id": job_workflow_id(job_id),
            "app_version": APP_VERSION,
        }
        try:
            await client.enqueue_async(options, job_id)
        except Exception as exc:
            if "does not exist" in str(exc) or "UndefinedTable" in type(exc).__name__:
                raise DbosUnavailable(
                    f"no DBOS system tables (schema {self.dbos_schema!r}) in the database: "
                    "start a worker once first (tooldeck worker --dsn ... --jobs N)"
                ) from exc
            raise
        self.submitted += 1

    async def cancel(self, job_id: str) -> None:
        client = await asyncio.to_thread(self._get)
        await client.cancel_workflows_async([job_workflow_id(job_id)])

    async def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await asyncio.to_thread(client.destroy)
