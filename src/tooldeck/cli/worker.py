"""``tooldeck worker``: serve workflow task turns from the DBOS queue in PostgreSQL.

``tooldeck worker --dsn DSN [--model KIND:MODEL | --script FILE] [--id ID] [-c N]`` runs
until SIGINT or SIGTERM. Start any number, on any machines that reach the database;
``tooldeck workflows run FILE --dsn DSN --workers`` hands a run's task turns to them.
``--model`` is built before the worker starts: a bad model string or a missing key is one
line (exit 2), as is a database it cannot reach at start. Once it serves, it prints one
line per state change (:mod:`tooldeck.cli.worker_log`, ``--log-format text|json``): its
tasks' changes (:class:`TaskLines`: claimed, recovered, rejected, submitted, failed,
cancelled), takeovers, database outages (a line when one starts, a line when it ends,
DBOS's own noise folded in between), a lost lease, and why it exits (``exiting``, the
last line). Tracebacks and DBOS's info lines only with ``tooldeck -v worker ...``.
With ``--jobs N`` it also runs background jobs from the DBOS jobs queue, each under the
policy its starting session recorded and ``--policy FILE``'s (both must allow), headless.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console

from .report import VERBOSE_KEY, existing_file, log_handler
from .schedules import load_job_script, load_runner_policy
from .worker_log import LogFormat, WorkerLog, routed
from .workflows import _fail, _model_factory

if TYPE_CHECKING:  # imported where used, so that ``--help`` loads none of the engine
    from ..events import Event

__all__ = ["TaskLines", "worker_command"]

# ``tooldeck.workflows.store.DEFAULT_SCHEMA``, here so that ``--help`` shows the default
# without importing the store (tests/test_cli_startup.py checks they agree)
DEFAULT_SCHEMA = "tooldeck"

_log = logging.getLogger("tooldeck.cli.worker")
# The loggers whose debug records carry the database's ups and downs (``db_ok``,
# ``db_retrying``): the worker's log handler needs them even without ``-v``.
_SIGNAL_LOGGERS = ("tooldeck.workflows.worker", "tooldeck.workflows.store", "tooldeck.cli.worker")


@dataclass
class TaskLines:
    """One log line per change of a task this worker runs, each said once per turn.

    ``claimed`` when its turn starts here (``recovered`` with the history's reason when
    the task was still running: ``resumed(task id)`` says why), ``rejected`` (submission
    N of M), then how it ended: ``submitted``, ``failed`` (why) or ``cancelled``, with
    the turn's seconds.
    """

    resumed: Callable[[str], str | None] = lambda task_id: None
    _said: set[tuple[str, str, str, int]] = field(default_factory=set)
    _started: dict[tuple[str, str], float] = field(default_factory=dict)

    def on_event(self, event: Event) -> None:
        from ..workflows.events import TaskStateChanged

        if not isinstance(event, TaskStateChanged):
            return
        run, name = event.session_id, event.task
        task = (run, name)
        why = None
        if event.state == "running" and event.attempts == 0:
            why = self.resumed(f"{run}:{name}")
            if task not in self._started or why is not None:  # a new turn: say it again
                self._said = {k for k in self._said if k[:2] != task}
        key = (run, name, event.state, event.attempts)
        if key in self._said:
            return
        self._said.add(key)
        fields: dict[str, Any] = {}
        level, message = logging.INFO, ""
        if event.state == "running" and event.attempts == 0:
            self._started[task] = time.monotonic()
            what = "claimed"
            if why is not None:
                what, level, message, fields["reason"] = "recovered", logging.WARNING, why, why
        elif event.state == "running":
            what, level = "rejected", logging.WARNING
            message = f"submission {event.attempts} of {event.max_attempts} rejected"
            fields.update(attempts=event.attempts, max_attempts=event.max_attempts)
            if event.reason:
                message += f": {event.reason}"
                fields["reason"] = event.reason
        elif event.state in ("submitted", "failed", "cancelled"):
            what = event.state
            level = {"submitted": logging.INFO, "failed": logging.ERROR}.get(what, logging.WARNING)
            fields.update(attempts=event.attempts, max_attempts=event.max_attempts)
            started = self._started.pop(task, None)
            if started is not None:
                fields["seconds"] = round(time.monotonic() - started, 3)
                message = f"after {fields['seconds']:.1f} s"
            if event.reason and what != "submitted":
                fields["reason"] = event.reason
                message += f"{': ' if message else ''}{event.reason}"
        else:
            return
        extra = {"event": what, "task": name, "run": run, "fields": fields}
        _log.log(level, "%s", message, extra=extra)


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
    policy: Annotated[
        list[Path] | None,
        typer.Option(
            "--policy",
            "-p",
            help="With --jobs: the organization's policy file (TOML or JSON), repeat to "
            "merge; the jobs run here must pass it as well as their creator's policy.",
        ),
    ] = None,
    log_format: Annotated[
        LogFormat,
        typer.Option(
            "--log-format",
            help="Log lines as plain text, or one JSON object per line (ts, level, worker, "
            "event, task, run, message, fields).",
        ),
    ] = "text",
) -> None:
    """Run workflow task turns queued in PostgreSQL (DBOS) until interrupted."""
    from ..schedules.scheduler import ScheduleError
    from ..workflows.events import TaskStateChanged
    from ..workflows.shapes import WorkflowDefinitionError
    from ..workflows.store import StoreError

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
    if policy and not jobs:
        raise _fail(
            console,
            "--policy sets the policy of the background jobs this worker runs: add --jobs N",
        )
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
            policy=load_runner_policy(policy),
            home=home,
            web_provider=web_provider,
        )
    from ..workflows.worker import Worker, WorkerLost  # no dbos extra: one line (CliGroup)

    verbose = bool(ctx.meta.get(VERBOSE_KEY))
    if lease <= heartbeat:
        raise _fail(
            console,
            f"--lease ({lease:g}) must be longer than --heartbeat ({heartbeat:g}); give a "
            "longer --lease or a shorter --heartbeat",
        )
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
        on_lost=lambda exc: _exit(log, str(exc), 3),  # never returns
    )
    log = WorkerLog(worker.id, fmt=log_format, verbose=verbose, lease=lease)
    lines = TaskLines(resumed=worker.resumed.get)
    started = False
    stopped_by: list[str] = []

    def ready(w: Any) -> None:
        nonlocal started
        started = True
        w._require_engine().events.subscribe(lines.on_event, TaskStateChanged)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, _stopper(worker, stopped_by, sig))
        stats = await worker.run(ready)
        log.finish()
        why = f"stopped by {stopped_by[0]}" if stopped_by else "stopped"
        _log.info(
            "%s (status 0): %d turn(s) run, took over %d lost worker(s)",
            why,
            stats.turns_finished,
            len(stats.taken_over),
            extra={
                "event": "exiting",
                "fields": {
                    "status": 0,
                    "why": why,
                    "turns": stats.turns_finished,
                    "taken_over": stats.taken_over,
                },
            },
        )

    with routed(log, log_handler(ctx), _SIGNAL_LOGGERS):
        _export_telemetry()
        try:
            asyncio.run(main())
        except WorkerLost as exc:
            _exit(log, str(exc), 3)
        except StoreError as exc:
            if not started:  # it never served: a command line that cannot work
                raise _fail(console, str(exc)) from exc
            _exit(log, str(exc), 1)


def _stopper(worker: Any, stopped_by: list[str], sig: signal.Signals) -> Callable[[], None]:
    def stop() -> None:
        stopped_by.append(sig.name)
        worker.stop()

    return stop


def _exit(log: WorkerLog, why: str, status: int) -> NoReturn:
    """The last line, then exit with ``status``. A lost lease (3) exits at once, as if
    killed (its turns are another worker's already): see ``Worker(on_lost=...)``."""
    log.finish()
    _log.error(
        "%s (status %d)",
        why,
        status,
        extra={"event": "exiting", "fields": {"status": status, "why": why}},
    )
    if status == 3:
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(3)
    raise typer.Exit(status)


def _export_telemetry() -> None:
    """Traces and metrics over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT says where."""
    from ..errors import MissingExtra
    from ..telemetry import setup_from_env

    extra = {"event": "telemetry"}
    try:
        if setup_from_env("tooldeck-worker"):
            _log.info("exporting traces and metrics over OTLP", extra=extra)
    except MissingExtra as exc:  # no otel extra
        _log.warning("no telemetry export: %s", exc, extra=extra)
