"""The DBOS executor: task turns queued durably in PostgreSQL, run by ``tooldeck worker``.

:class:`DbosExecutor` is the :class:`~tooldeck.workflows.executor.TaskExecutor` an engine
uses when its task turns should run on worker processes (on this machine or others)
instead of in-process. It talks to DBOS's system tables only through a ``DBOSClient``:

- ``submit`` enqueues one DBOS workflow per task on the queue ``tooldeck_tasks``; its id
  is ``tooldeck-task:<task id>``, so submitting a task twice enqueues it once;
  ``submit_many`` enqueues several in one transaction (a run's first tasks);
- ``cancel`` cancels the run's queued and running DBOS workflows (a turn already running
  also sees the cancellation in the store before its next model step);
- ``join`` waits until none of the run's DBOS workflows is queued or running.

The workers (:mod:`tooldeck.workflows.worker`) register the DBOS workflow and run it;
DBOS creates its system tables when the first worker starts, so a client needs a worker
to have started once against the database. See ``docs/workflows.md``.
"""

from __future__ import annotations

import asyncio
import logging
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from .._extras import needs_extra
from ..errors import TooldeckError
from ..telemetry.propagation import carrier
from .executor import TaskFn

if TYPE_CHECKING:
    import sqlalchemy
    from dbos import DBOSClient

__all__ = [
    "APP_VERSION",
    "DBOS_APP_NAME",
    "DEFAULT_DBOS_SCHEMA",
    "QUEUE",
    "TASK_WORKFLOW",
    "DbosUnavailable",
    "dbos_url",
    "task_workflow_id",
]

_log = logging.getLogger("tooldeck.workflows")

QUEUE = "tooldeck_tasks"
TASK_WORKFLOW = "tooldeck_task_turn"
DBOS_APP_NAME = "tooldeck"
DEFAULT_DBOS_SCHEMA = "dbos"
_ACTIVE = ("ENQUEUED", "PENDING", "DELAYED")


def _package_version() -> str:
    try:
        return version("tooldeck")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0"


APP_VERSION = f"tooldeck-{_package_version()}"
"""DBOS application version shared by every worker and client of this tooldeck release.

DBOS only recovers a workflow on an executor of the same version, so it is fixed here
rather than computed from the code of the registered functions."""


class DbosUnavailable(TooldeckError, RuntimeError):
    """DBOS's system tables are not in the database yet (no worker ever ran there); a
    missing dbos package is :class:`~tooldeck.errors.MissingExtra`."""


def task_workflow_id(task_id: str) -> str:
    """The DBOS workflow id of a task's turn (one per task: enqueueing twice is a no-op)."""
    return f"tooldeck-task:{task_id}"


def _run_prefix(workflow_id: str) -> str:
    return task_workflow_id(f"{workflow_id}:")


def dbos_url(dsn: str) -> str:
    """``dsn`` (a libpq URL or ``key=value`` string) as the URL DBOS takes."""
    if dsn.startswith("postgres://"):
        return "postgresql://" + dsn[len("postgres://") :]
    if dsn.startswith("postgresql://"):
        return dsn
    with needs_extra("dbos"):
        from psycopg.conninfo import conninfo_to_dict
        from sqlalchemy.engine import URL

    parts: dict[str, Any] = {k: str(v) for k, v in conninfo_to_dict(dsn).items()}
    port = parts.pop("port", None)
    return URL.create(
        "postgresql",
        username=parts.pop("user", None),
        password=parts.pop("password", None),
        host=parts.pop("host", None),
        port=int(port) if port else None,
        database=parts.pop("dbname", None),
        query=parts,
    ).render_as_string(hide_password=False)


def client_url(dsn: str) -> str:
    """The URL a client's DBOS connections use: ``dsn`` with the store's keepalives and
    ``tcp_user_timeout`` (those it does not set itself), so that a silently dropped
    network fails the client's calls (which DBOS then retries) instead of hanging them."""
    with needs_extra("dbos"):
        from sqlalchemy.engine import make_url

    from .store.postgres import DEFAULT_NETWORK_TIMEOUT, keepalive_params

    extra = {k: str(v) for k, v in keepalive_params(DEFAULT_NETWORK_TIMEOUT, dsn).items()}
    return make_url(dbos_url(dsn)).update_query_dict(extra).render_as_string(hide_password=False)


def new_client(dsn: str, schema: str = DEFAULT_DBOS_SCHEMA) -> DBOSClient:
    with needs_extra("dbos"):
        from dbos import DBOSClient
    return DBOSClient(
        system_database_url=client_url(dsn),
        dbos_system_schema=schema,
        application_name=DBOS_APP_NAME,
        system_database_pool_size=4,
    )


class DbosExecutor:
    """Task turns as DBOS workflows on the ``tooldeck_tasks`` queue (see the module doc).

    ``dsn``: the PostgreSQL database whose DBOS system tables (schema ``dbos_schema``)
    the workers use; ``poll_interval``: how often :meth:`join` looks.
    """

    def __init__(
        self,
        dsn: str,
        *,
        dbos_schema: str = DEFAULT_DBOS_SCHEMA,
        poll_interval: float = 0.5,
    ):
        self.dsn = dsn
        self.dbos_schema = dbos_schema
        self.poll_interval = poll_interval
        self._client: DBOSClient | None = None
        self._engine: sqlalchemy.Engine | None = None  # for enqueueing many at once
        self._queued: set[str] = set()
        self.submitted = 0

    def _get_client(self) -> DBOSClient:
        if self._client is None:
            self._client = new_client(self.dsn, self.dbos_schema)
        return self._client

    def start(self, run: TaskFn) -> None:
        """Nothing to bind: the workers run the turns (``tooldeck worker``)."""

    async def submit(self, workflow_id: str, task_id: str) -> None:
        if task_id in self._queued:
            return  # enqueued from here before (DBOS would return the same workflow)
        # The run's trace context travels with the task (a worker's spans join it).
        trace = carrier()
        client = await asyncio.to_thread(self._get_client)
        try:
            await client.enqueue_async(_options(task_id), task_id, *((trace,) if trace else ()))
        except Exception as exc:
            self._raise_unavailable(exc)
            raise
        self._enqueued([task_id])

    async def submit_many(self, workflow_id: str, task_ids: list[str]) -> None:
        """:meth:`submit` for several tasks, in one transaction (one round trip per task
        instead of a transaction of three, in one thread hop): a run's first tasks."""
        todo = [t for t in dict.fromkeys(task_ids) if t not in self._queued]
        if len(todo) <= 1:
            for task_id in todo:
                await self.submit(workflow_id, task_id)
            return
        trace = carrier()
        args = (trace,) if trace else ()
        client = await asyncio.to_thread(self._get_client)
        engine = self._transactions()

        def enqueue_all() -> None:
            with engine.begin() as conn:
                for task_id in todo:  # an existing workflow is kept: a task is queued once
                    client.enqueue_in_transaction(conn, _options(task_id), task_id, *args)

        try:
            await asyncio.to_thread(enqueue_all)
        except Exception as exc:
            self._raise_unavailable(exc)
            raise
        self._enqueued(todo)

    def _transactions(self) -> sqlalchemy.Engine:
        """The engine :meth:`submit_many` enqueues in one transaction with (made once; its
        connections carry the client's keepalives, :func:`client_url`)."""
        if self._engine is None:
            with needs_extra("dbos"):
                import sqlalchemy

            self._engine = sqlalchemy.create_engine(
                client_url(self.dsn), pool_size=1, max_overflow=0, pool_pre_ping=True
            )
        return self._engine

    def _raise_unavailable(self, exc: Exception) -> None:
        """Raise :class:`DbosUnavailable` (from ``exc``) when DBOS's tables are missing."""
        if "does not exist" in str(exc) or "UndefinedTable" in type(exc).__name__:
            raise DbosUnavailable(
                f"no DBOS system tables (schema {self.dbos_schema!r}) in the database: "
                "start a worker once first (tooldeck worker --dsn ...)"
            ) from exc

    def _enqueued(self, task_ids: list[str]) -> None:
        if len(self._queued) >= 100_000:  # a long-lived worker: forget, DBOS still dedupes
            self._queued.clear()
        self._queued.update(task_ids)
        self.submitted += len(task_ids)

    async def _active_ids(self, workflow_id: str | None) -> list[str]:
        client = await asyncio.to_thread(self._get_client)
        prefix = _run_prefix(workflow_id) if workflow_id else task_workflow_id("")
        found = await client.list_workflows_async(
            workflow_id_prefix=prefix,
            status=list(_ACTIVE),
            load_input=False,
            load_output=False,
        )
        return [w.workflow_id for w in found]

    async def cancel(self, workflow_id: str, reason: str) -> None:
        ids = await self._active_ids(workflow_id)
        if ids:
            client = await asyncio.to_thread(self._get_client)
            await client.cancel_workflows_async(ids)
            _log.info("cancelled %d DBOS workflow(s) of %s: %s", len(ids), workflow_id, reason)

    async def join(self, workflow_id: str | None = None) -> None:
        # The turns run in other processes: only the database can tell when they end.
        while await self._active_ids(workflow_id):  # noqa: ASYNC110
            await asyncio.sleep(self.poll_interval)

    async def close(self) -> None:
        """Release the client (queued turns stay queued: the workers own them)."""
        if self._engine is not None:
            engine, self._engine = self._engine, None
            await asyncio.to_thread(engine.dispose)
        if self._client is not None:
            client, self._client = self._client, None
            await asyncio.to_thread(client.destroy)


def _options(task_id: str) -> Any:
    """The enqueue options of a task's turn (``EnqueueOptions``)."""
    return {
        "queue_name": QUEUE,
        "workflow_name": TASK_WORKFLOW,
        "workflow_id": task_workflow_id(task_id),
        "app_version": APP_VERSION,
    }
