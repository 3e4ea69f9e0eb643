"""``tooldeck worker``: serve workflow task turns from the DBOS queue in PostgreSQL.

``tooldeck worker --dsn DSN [--model KIND:MODEL | --script FILE] [--id ID] [-c N]`` runs
until SIGINT or SIGTERM. Start any number, on any machines that reach the database;
``tooldeck workflows run FILE --dsn DSN --workers`` hands a run's task turns to them.
``--model`` is built before the worker starts: a bad model string or a missing key is one
line (exit 2). Logs are one line each (``tooldeck -v worker ...`` adds tracebacks and
DBOS's own info lines). While it runs, the worker prints one line per change of a task it
runs (:class:`TaskLines`): claimed, a submission rejected, submitted, failed, cancelled.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from .report import VERBOSE_KEY, existing_file, log_handler, set_log_format
from .schedules import load_job_script
from .workflows import _fail, _model_factory

if TYPE_CHECKING:  # imported where used, so that ``--help`` loads none of the engine
    from ..events import Event

__all__ = ["TaskLines", "worker_command"]

# ``tooldeck.workflows.store.DEFAULT_SCHEMA``, here so that ``--help`` shows the default
# without importing the store (tests/test_cli_startup.py checks they agree)
DEFAULT_SCHEMA = "tooldeck"


@dataclass
class TaskLines:
    """One line per change of a task this worker runs, each said once.

    ``claimed`` when its turn starts here, ``submission N of M rejected``, then how it
    ended: ``submitted``, ``failed: why`` or ``cancelled``, with the turn's seconds.
    Colours only on a terminal (rich drops them otherwise): plain lines in a log file.
    """

    console: Console
    _said: set[tuple[str, str, str, int]] = field(default_factory=set)
    _started: dict[tuple[str, str], float] = field(default_factory=dict)

    def on_event(self, event: Event) -> None:
        from ..workflows.events import TaskStateChanged

        if not isinstance(event, TaskStateChanged):
            return
        key = (event.session_id, event.task, event.state, event.attempts)
        if key in self._said:
            return
        self._said.add(key)
        task = (event.session_id, event.task)
        if event.state == "running" and event.attempts == 0:
            self._started[task] = time.monotonic()
            what = "[cyan]claimed[/cyan]"
        elif event.state == "running":
            what = f"[yellow]submission {event.attempts} of {event.max_attempts} rejected[/yellow]"
        elif event.state in ("submitted", "failed", "cancelled"):
            style = {"submitted": "green", "failed": "red", "cancelled": "magenta"}[event.state]
            what = f"[{style}]{event.state}[/{style}]"
            if event.state == "failed" and event.reason:
                what += f": {escape(' '.join(event.reason.split())[:300])}"
            started = self._started.pop(task, None)
            if started is not None:
                what += f" [dim]after {time.monotonic() - started:.1f} s[/dim]"
        else:
            return
        self.console.print(
            f"{time.strftime('%H:%M:%S')} task {escape(event.task)} "
            f"[dim](run {escape(event.session_id)})[/dim] {what}",
            highlight=False,
            soft_wrap=True,
        )


def _quiet_dbos(record: logging.LogRecord) -> bool:
    """DBOS's info lines ("DBOS successfully shut down"...) only with ``-v``: without it,
    a worker that cannot start says its one real error and nothing else."""
    return record.levelno >= logging.WARNING or not record.name.startswith("dbos")


_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*: ")  # "psycopg.OperationalError: ..."


def _one_line_dbos(record: logging.LogRecord) -> bool:
    """DBOS's own lines (its handler, not ours) one line each without ``-v``: a database
    blip is an expected fault, so its traceback is for ``-v`` only. What is kept: the
    message's first line, or for a message that is a traceback, its last exception line."""
    text = record.getMessage().strip()
    lines = text.splitlines() or [""]
    head = lines[0]
    if "Traceback (most recent call last)" in text:
        head = head.split("Traceback (most recent call last)")[0].strip()
        last = [x for x in lines[1:] if _EXCEPTION_LINE.match(x)]
        if last:
            head = f"{head} {last[-1]}".strip()
    record.msg, record.args = head, ()
    record.exc_info = record.exc_text = record.stack_info = None
    return True


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
    from ..schedules.scheduler import ScheduleError
    from ..workflows.events import TaskStateChanged
    from ..workflows.shapes import WorkflowDefinitionError
    from ..workflows.store import StoreError, redact_dsn

    console = Console(stderr=True)
    dsn = dsn or os.environ.get("TOOLDECK_WORKFLOWS_DSN") or None
    if dsn is None:
        raise _fail(console, "a worker needs the PostgreSQL database: --dsn DSN")
    if model is None and script is None:
        raise _fail(
            console,
            "a worker needs a model for its turns: --model KIND:MODEL (e.g. openai:gpt-5.4), "
            "or --script FILE defining scripted_model(run) (a scripted stand-in)",
        )
    scripted = job_model = None
    if script is not None:
        existing_file(script, "a Python file defining scripted_model(run)")
        try:
            job_model, _, scripted = load_job_script(script)
        except (WorkflowDefinitionError, ScheduleError) as exc:
            raise _fail(console, str(exc)) from exc
    if jobs and model is None and job_model is None:
        raise _fail(console, "--jobs needs a model: --model KIND:MODEL or a scripted_job_model")
    if model is None and scripted is None and not jobs:
        raise _fail(
            console,
            f"{script} defines no scripted_model(run); define it there, or pass --model "
            "KIND:MODEL (e.g. openai:gpt-5.4)",
        )
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
    handler = log_handler(ctx)
    if handler is not None and not ctx.meta.get(VERBOSE_KEY):
        handler.addFilter(_quiet_dbos)
    if not ctx.meta.get(VERBOSE_KEY):
        logging.getLogger("dbos").addFilter(_one_line_dbos)
    lines = TaskLines(console)
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
        on_lost=_exit_lost,
    )

    def ready(w: Any) -> None:
        w._require_engine().events.subscribe(lines.on_event, TaskStateChanged)
        console.print(
            f"worker {w.id} ready: {redact_dsn(dsn)} (schema {pg_schema}), "
            f"{concurrency} turn(s) at once",
            highlight=False,
            soft_wrap=True,
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
            soft_wrap=True,
        )

    try:
        asyncio.run(main())
    except WorkerLost as exc:
        raise _fail(console, str(exc), 3) from exc
    except StoreError as exc:
        raise _fail(console, str(exc)) from exc


def _exit_lost(exc: Exception) -> None:
    """Exit with status 3 at once: the turns are another worker's now (see ``on_lost``)."""
    logging.shutdown()  # flush the log lines said so far
    sys.stdout.flush()
    print(f"error: {exc}", file=sys.stderr, flush=True)
    os._exit(3)


def _export_telemetry(console: Console) -> None:
    """Traces and metrics over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT says where."""
    from ..telemetry import OtelUnavailable, setup_from_env

    try:
        if setup_from_env("tooldeck-worker"):
            console.print("worker: exporting traces and metrics over OTLP", highlight=False)
    except OtelUnavailable as exc:
        console.print(f"worker: no telemetry export: {exc}", highlight=False)
