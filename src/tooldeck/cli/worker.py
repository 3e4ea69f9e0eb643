"""``tooldeck worker``: serve workflow task turns from the DBOS queue in PostgreSQL.

``tooldeck worker --dsn DSN [--model KIND:MODEL | --script FILE] [--id ID] [-c N]`` runs
until SIGINT or SIGTERM. Start any number, on any machines that reach the database;
``tooldeck workflows run FILE --dsn DSN --workers`` hands a run's task turns to them.
``--model`` is built before the worker starts: a bad model string or a missing key is one
line (exit 2). Logs are one line each (``tooldeck -v worker ...`` adds tracebacks).
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

from ..schedules.scheduler import ScheduleError
from ..workflows.shapes import WorkflowDefinitionError
from ..workflows.store import DEFAULT_SCHEMA, StoreError, redact_dsn
from .report import set_log_format
from .schedules import load_job_script
from .workflows import _fail, _model_factory

__all__ = ["worker_command"]


def _no_task_model(run: Any) -> Any:
    raise RuntimeError("this worker has no model for task turns (it was started for jobs)")


def worker_command(
    ctx: typer.Context,
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
        str | None,
        typer.Option(
            "--web-provider",
            help="Bind a web provider: brave, tavily, searxng, ddgs or auto (docs/web.md).",
        ),
    ] = None,
    jobs: Annotated[
        int,
        typer.Option(
            "--jobs",
            min=0,
            max=256,
            help="Also run background jobs from the DBOS jobs queue, this many at once "
            "(their model: --model, or the script's scripted_job_model(job)).",
        ),
    ] = 0,
) -> None:
    """Run workflow task turns queued in PostgreSQL (DBOS) until interrupted."""
    console = Console(stderr=True)
    dsn = dsn or os.environ.get("TOOLDECK_WORKFLOWS_DSN") or None
    if dsn is None:
        raise _fail(console, "a worker needs the PostgreSQL database: --dsn DSN")
    scripted = job_model = None
    if script is not None:
        try:
            job_model, _, scripted = load_job_script(script)
        except (WorkflowDefinitionError, ScheduleError) as exc:
            raise _fail(console, str(exc)) from exc
    if jobs and model is None and job_model is None:
        raise _fail(console, "--jobs needs a model: --model KIND:MODEL or a scripted_job_model")
    factory = (
        _model_factory(console, model, scripted)
        if model is not None or scripted is not None or not jobs
        else _no_task_model
    )
    if model is not None and jobs:
        task_factory = factory
        job_model = lambda job: task_factory(None)  # noqa: E731
    runtime = None
    if jobs:
        from ..jobs.runner import JobRuntime

        assert job_model is not None
        from ..builtin import load_builtin_registry
        from ..jobs.runner import registry_tools

        runtime = JobRuntime(
            model_for=job_model,
            tools_for=registry_tools(load_builtin_registry(), home),
            home=home,
            web_provider=web_provider,
        )
    try:
        from ..workflows.worker import Worker, WorkerLost
    except ImportError as exc:
        raise _fail(
            console, f"the worker needs DBOS: pip install 'tooldeck[dbos]' ({exc})"
        ) from exc
    set_log_format(ctx, "%(asctime)s %(levelname)s %(message)s", logging.INFO)
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
        job_runtime=runtime,
        job_concurrency=max(jobs, 1),
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
