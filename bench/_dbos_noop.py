"""The floor of a task turn on DBOS queues: a DBOS workflow that does nothing.

``python bench/_dbos_noop.py worker DSN DBOS_SCHEMA ID CONCURRENCY POLL`` serves the queue
``bench_noop`` with the workflow ``bench_noop`` (it returns its argument: no step, no
store), configured as ``tooldeck worker`` configures DBOS, and prints ``ready`` once it
listens. :func:`run_noop` enqueues N such workflows in one transaction (as
``DbosExecutor.submit_many`` does for a run's first tasks) and waits until DBOS has
recorded every one's end: what is left is DBOS's own cost per workflow (enqueue, dequeue,
the record of its end) and the workers' polling.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid

QUEUE = "bench_noop"


def serve(dsn: str, dbos_schema: str, worker_id: str, concurrency: int, poll: float) -> None:
    from dbos import DBOS

    from tooldeck.workflows.durable import APP_VERSION, dbos_url
    from tooldeck.workflows.worker import NOTIFY_SECONDS

    @DBOS.workflow(name="bench_noop")
    async def noop(n: int) -> int:
        return n

    async def main() -> None:
        DBOS(
            config={
                "name": "tooldeck-bench",
                "system_database_url": dbos_url(dsn),
                "dbos_system_schema": dbos_schema,
                "application_version": APP_VERSION,
                "executor_id": worker_id,
                "log_level": "WARNING",
                "notification_coalesce_sec": NOTIFY_SECONDS,
            }
        )
        DBOS.listen_queues([QUEUE])
        DBOS.launch()
        await DBOS.register_queue_async(
            QUEUE,
            worker_concurrency=concurrency,
            polling_interval_sec=poll,
            on_conflict="always_update",
        )
        print(f"worker {worker_id} ready", flush=True)
        await asyncio.Event().wait()  # until SIGTERM

    asyncio.run(main())


async def run_noop(dsn: str, dbos_schema: str, n: int) -> float:
    """Enqueue ``n`` no-op workflows and wait until all ended; the seconds it took."""
    import sqlalchemy
    from dbos import DBOSClient

    from tooldeck.workflows.durable import APP_VERSION, dbos_url

    client = DBOSClient(
        system_database_url=dbos_url(dsn),
        dbos_system_schema=dbos_schema,
        application_name="tooldeck-bench",
    )
    engine = sqlalchemy.create_engine(dbos_url(dsn), pool_size=1)
    prefix = f"noop-{uuid.uuid4().hex[:8]}-"

    def enqueue() -> None:
        with engine.begin() as conn:
            for i in range(n):
                options = {
                    "queue_name": QUEUE,
                    "workflow_name": "bench_noop",
                    "workflow_id": f"{prefix}{i}",
                    "app_version": APP_VERSION,
                }
                client.enqueue_in_transaction(conn, options, i)  # type: ignore[arg-type]

    try:
        t0 = time.perf_counter()
        await asyncio.to_thread(enqueue)

        async def unfinished() -> bool:
            return bool(
                await client.list_workflows_async(
                    workflow_id_prefix=prefix,
                    status=["ENQUEUED", "PENDING"],
                    load_input=False,
                    load_output=False,
                )
            )

        while await unfinished():  # noqa: ASYNC110 - only the database can tell
            await asyncio.sleep(0.05)
        return time.perf_counter() - t0
    finally:
        engine.dispose()
        client.destroy()


if __name__ == "__main__" and sys.argv[1:2] == ["worker"]:
    dsn, schema, worker_id, concurrency, poll = sys.argv[2:7]
    serve(dsn, schema, worker_id, int(concurrency), float(poll))
