"""``tooldeck worker``: serve workflow task turns from the DBOS queue in PostgreSQL.

``tooldeck worker --dsn DSN [--model KIND:MODEL | --script FILE] [--id ID] [-c N]`` runs
until SIGINT or SIGTERM. Start any number, on any machines that reach the database;
``tooldeck workflows run FILE --dsn DSN --workers`` hands a run's task turns to them.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from ..workflows.script import load_script
from ..workflows.shapes import WorkflowDefinitionError
from ..workflows.store import DEFAULT_SCHEMA, StoreError, redact_dsn
from .workflows import _fail, _model_factory

__all__ = ["worker_command"]


def worker_command(
    dsn: Annotated[
        str | None,
        typer.Option("--dsn", help="The PostgreSQL database (or TOOLDECK_WORKFLOWS_DSN)."),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", "-m", help="KIND:MODEL for every task turn this worker runs."),
    ] = None,
    script: Annotated[
        Path | None,
        typer.Option(
            "--script", help="A workflow script whose scripted_model(run) stands in for a model."
        ),
    ] = None,
    worker_id: Annotated[
        str | None,
        typer.Option("--id", help="Worker id; restarting with the same id resumes its turns."),
    ] = None,
    concurrency: Annotated[
        int, typer.Option("--concurrency", "-c", min=1, max=256, help="Task turns at once.")
    ] = 4,
    pg_schema: Annotated[
        str, typer.Option("--pg-schema", help="Schema of the workflow tables.")
    ] = DEFAULT_SCHEMA,
    dbos_schema: Annotated[
        str, typer.Option("--dbos-schema", help="Schema of DBOS's system tables.")
    ] = "dbos",
    lease: Annotated[
        float, typer.Option("--lease", help="Seconds of silence before a worker is taken over.")
    ] = 15.0,
    heartbeat: Annotated[
        float, typer.Option("--heartbeat", help="Seconds between lease renewals.")
    ] = 2.0,
    poll: Annotated[
        float, typer.Option("--poll", help="Seconds between looks at the queue.")
    ] = 0.2,
    grace: Annotated[
        float,
        typer.Option("--grace", help="On SIGTERM, seconds to let running turns finish."),
    ] = 30.0,
    home: Annotated[
        Path | None, typer.Option("--home", help="The task turns' home directory.")
    ] = None,
    web_provider: Annotated[
        str | None, typer.Option("--web-provider", help="Bind a web provider (web tools).")
    ] = None,
) -> None:
    """Run workflow task turns queued in PostgreSQL (DBOS) until interrupted."""
    console = Console(stderr=True)
    dsn = dsn or os.environ.get("TOOLDECK_WORKFLOWS_DSN") or None
    if dsn is None:
        raise _fail(console, "a worker needs the PostgreSQL database: --dsn DSN")
    scripted = None
    if script is not None:
        try:
            scripted = load_script(script).scripted_model
        except WorkflowDefinitionError as exc:
            raise _fail(console, str(exc)) from exc
    factory = _model_factory(console, model, scripted)
    try:
        from ..workflows.worker import Worker, WorkerLost
    except ImportError as exc:
        raise _fail(
            console, f"the worker needs DBOS: pip install 'tooldeck[dbos]' ({exc})"
        ) from exc
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    _export_telemetry(console)
    worker = Worker(
        dsn,
        factory,
        worker_id=worker_id,
        concurrency=concurrency,
        schema=pg_schema,
        dbos_schema=dbos_schema,
        lease=lease,
        heartbeat=heartbeat,
        grace=grace,
        poll=poll,
        home=home,
        web_provider=web_provider,
    )

    def ready(w: Any) -> None:
        console.print(
            f"worker {w.id} ready: {redact_dsn(dsn)} (schema {pg_schema}), "
            f"{concurrency} turn(s) at once",
            highlight=False,
        )

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, worker.stop)
        stats = await worker.run(ready)
        console.print(
            f"worker {worker.id} stopped: {stats.turns_finished} turn(s) run, "
            f"took over {len(stats.taken_over)} lost worker(s)",
            highlight=False,
        )

    try:
        asyncio.run(main())
    except WorkerLost as exc:
        raise _fail(console, str(exc), 3) from exc
    except StoreError as exc:
        raise _fail(console, str(exc)) from exc


def _export_telemetry(console: Console) -> None:
    """Traces and metrics over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT says where."""
    from ..telemetry import OtelUnavailable, setup_from_env

    try:
        if setup_from_env("tooldeck-worker"):
            console.print("worker: exporting traces and metrics over OTLP", highlight=False)
    except OtelUnavailable as exc:
        console.print(f"worker: no telemetry export: {exc}", highlight=False)
