"""``tooldeck schedules`` (list, show, cancel, run-now) and ``tooldeck scheduler``.

- ``tooldeck schedules list``: schedules with their next run time;
- ``tooldeck schedules show ID``: one schedule, its next run times and recent fires;
- ``tooldeck schedules cancel ID``: it never fires again;
- ``tooldeck schedules run-now ID``: fire it once, now (a job is made at once);
- ``tooldeck scheduler``: the embedded scheduler: ticks every schedule of the store
  and, with a model (``--model`` or ``--script FILE`` defining ``scripted_job_model(job)``),
  runs the jobs the fired slots made (and any other pending job) in this process; on
  PostgreSQL it hands the jobs of schedules with ``dispatch: "dbos"`` to the DBOS queue
  of the ``tooldeck worker --jobs`` processes (their ``--dbos-schema``). Run any number
  of them on one database: each slot fires once. Each job runs under the
  policy its schedule recorded of the session that made it (and ``--policy FILE``'s too:
  both must allow), headless, with at most that session's tools. Its log is the worker's
  (:mod:`tooldeck.cli.worker_log`): one line per event (:data:`EVENTS`), text or JSON.
"""

from __future__ import annotations

import asyncio
import logging
import runpy
import signal
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias

import typer
from rich.console import Console
from rich.table import Table

from .jobs import open_existing
from .report import VERBOSE_KEY, log_handler
from .worker_log import LogFormat, WorkerLog, routed
from .workflows import DbOption, DsnOption, SchemaOption, _fail, _store

if TYPE_CHECKING:  # imported where used, so that ``--help`` loads none of the stores
    from ..jobs.runner import JobManager
    from ..schedules.scheduler import Scheduler
    from ..schedules.store import ScheduleRecord
    from ..workflows.definition import Workflow
    from ..workflows.store import WorkflowStore

__all__ = ["scheduler_command", "schedules_app"]

EVENTS: dict[str, str] = {
    "ready": "the scheduler ticks the store's schedules (where, jobs at once, DBOS or not)",
    "fired": "a slot fired: the schedule, the slot (UTC), on time or late, the job it made",
    "skipped": "a tick skipped missed slots of a schedule (its missed-slot policy)",
    "finished": "a one-time schedule fired its slot and is finished",
    "not_queued": "a job for DBOS workers could not be handed to DBOS (why): tried again "
    "every poll, or never when there is no DBOS queue (a SQLite store)",
    "queued": "pending DBOS jobs handed to DBOS after a failed try, or at start",
    "refused": "a job run here was not run under its creator's policy (why): it ends failed",
    "tick_failed": "a tick failed for another reason than the database (why); tried again",
    "db_retrying": "the database stopped answering: ticks are tried again every poll",
    "db_back": "the database answers again: the outage's length and what was folded",
    "db_still_down": "the scheduler exits during an outage: its length and what was folded",
    "exiting": "the last line: why the scheduler exits, its exit status and its counts",
    "dbos": "a line of DBOS's own, outside an outage",
    "log": "any other log line, e.g. of the jobs run here (its logger in fields)",
}

_log = logging.getLogger("tooldeck.cli.scheduler")
# The loggers whose debug records carry the database's ups and downs (``db_ok``,
# ``db_retrying``): the log handler needs them even without ``-v``.
_SIGNAL_LOGGERS = ("tooldeck.schedules", "tooldeck.workflows.store", "tooldeck.cli.scheduler")

schedules_app = typer.Typer(
    help="Inspect, cancel and fire schedules (cron, interval, once).", no_args_is_help=True
)

ScheduleState: TypeAlias = Literal["active", "cancelled", "finished"]

IdArgument = Annotated[str, typer.Argument(help="The schedule's id, or a unique prefix.")]


def _times(s: ScheduleRecord, count: int) -> list[str]:
    from ..schedules.scheduler import utc_now

    return [t.isoformat(timespec="seconds") for t in s.next_times(count, utc_now())]


def schedules_table(found: list[ScheduleRecord]) -> Table:
    table = Table(title="schedules")
    for column in ("id", "name", "state", "runs", "when", "missed", "fired", "skipped", "next"):
        table.add_column(column, overflow="fold")
    for s in found:
        nxt = _times(s, 1) if s.state == "active" else []
        table.add_row(
            s.id,
            s.name,
            s.state,
            s.describe_action(),
            s.timing.describe(),
            s.missed,
            str(s.fired),
            str(s.skipped),
            nxt[0] if nxt else "",
        )
    return table


def runs_as(s: ScheduleRecord) -> str:
    """Whose power the schedule's runs have, or why they are refused."""
    from ..jobs.policy import CreatorPolicyError, creator_policy, creator_tools

    try:
        creator_policy(s.creator, s.session_id)
        tools = creator_tools(s.creator)
    except CreatorPolicyError as exc:
        return f"runs: refused, none will run: {exc}"
    limit = "any tools the runner has" if tools is None else f"{len(tools)} tool(s)"
    return (
        f"runs as: session {s.session_id}, under its policy as recorded when it was made "
        f"(and the runner's --policy), headless, with {limit}"
    )


def _run(console: Console, coro: Any) -> Any:
    from ..workflows.store import StoreError

    try:
        return asyncio.run(coro)
    except StoreError as exc:
        raise _fail(console, str(exc)) from exc


@schedules_app.command("list")
def list_command(
    db: DbOption = None,
    dsn: DsnOption = None,
    pg_schema: SchemaOption = None,
    state: Annotated[
        ScheduleState | None, typer.Option("--state", help="Only schedules in this state.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, max=1000)] = 50,
) -> None:
    """List schedules with their next run time."""
    from ..schedules.store import ScheduleTable

    console = Console()
    store = open_existing(console, db, dsn, pg_schema)
    if store is None:
        console.print("No schedules: there is no database yet.")
        return

    async def main() -> list[ScheduleRecord]:
        async with store:
            return await ScheduleTable(store).list(state=state, limit=limit)

    found = _run(console, main())
    console.print(schedules_table(found) if found else f"No schedules in {store.location}.")


def _store_of(
    console: Console, schedule_id: str, db: Path | None, dsn: str | None, pg_schema: str | None
) -> WorkflowStore:
    """The existing store that holds ``schedule_id``, or a one-line error (a read never
    creates the database)."""
    store = open_existing(console, db, dsn, pg_schema)
    if store is None:
        raise _fail(console, f"no schedule {schedule_id!r}: there is no database yet", 1)
    return store


@schedules_app.command("show")
def show_command(
    schedule_id: IdArgument,
    db: DbOption = None,
    dsn: DsnOption = None,
    pg_schema: SchemaOption = None,
    count: Annotated[int, typer.Option("--next", min=1, max=100, help="Run times shown.")] = 5,
) -> None:
    """Show a schedule: what it runs, whose it is, when next, and its recent fires."""
    from ..jobs.store import JobTable
    from ..schedules.scheduler import ScheduleBook

    console = Console()
    store = _store_of(console, schedule_id, db, dsn, pg_schema)

    async def main() -> None:
        async with store:
            book = ScheduleBook(store)
            try:
                s = await book.get(schedule_id)
            except LookupError as exc:
                raise _fail(console, str(exc), 1) from exc
            console.print(schedules_table([s]))
            console.print(runs_as(s), highlight=False)
            if s.state == "active":
                console.print(f"next {count} run(s) ({s.timing.tz}):")
                for t in _times(s, count):
                    console.print(f"  {t}")
            fires = await book.table.fires(s.id, 20)
            if fires:
                jobs = JobTable(store)
                table = Table(title="recent fires")
                for column in ("slot (UTC)", "how", "job", "by", "job state", "why"):
                    table.add_column(column, overflow="fold")
                for f in fires:
                    job = await jobs.get(f.job_id)
                    table.add_row(
                        f.slot.isoformat(timespec="seconds"),
                        f.how,
                        f.job_id,
                        f.fired_by,
                        job.state if job is not None else "gone",
                        (job.error or "") if job is not None else "",
                    )
                console.print(table)

    _run(console, main())


@schedules_app.command("cancel")
def cancel_command(
    schedule_id: IdArgument,
    db: DbOption = None,
    dsn: DsnOption = None,
    pg_schema: SchemaOption = None,
) -> None:
    """Cancel a schedule: it never fires again."""
    from ..schedules.scheduler import ScheduleBook

    console = Console()
    store = _store_of(console, schedule_id, db, dsn, pg_schema)

    async def main() -> tuple[ScheduleRecord, bool]:
        async with store:
            try:
                return await ScheduleBook(store).cancel(schedule_id)
            except LookupError as exc:
                raise _fail(console, str(exc), 1) from exc

    found, changed = _run(console, main())
    if not changed:
        raise _fail(console, f"schedule {found.id} is {found.state}; nothing to cancel", 1)
    console.print(f"Cancelled schedule {found.id} ({found.name}).")


@schedules_app.command("run-now")
def run_now_command(
    schedule_id: IdArgument,
    db: DbOption = None,
    dsn: DsnOption = None,
    pg_schema: SchemaOption = None,
) -> None:
    """Fire a schedule once, now: its job is made at once (a scheduler or worker runs it)."""
    from ..schedules.scheduler import ScheduleBook, ScheduleError

    console = Console()
    store = _store_of(console, schedule_id, db, dsn, pg_schema)

    async def main() -> Any:
        async with store:
            try:
                return await ScheduleBook(store).run_now(schedule_id)
            except (LookupError, ScheduleError) as exc:
                raise _fail(console, str(exc), 1) from exc

    fire = _run(console, main())
    console.print(f"Fired schedule {fire.schedule_id}: job {fire.job_id}.")


def load_job_script(path: Path) -> tuple[Callable[[Any], Any] | None, list[Workflow], Any]:
    """A Python file's ``scripted_job_model(job)``, workflows and ``scripted_model(run)``."""
    from ..schedules.scheduler import ScheduleError
    from ..workflows.definition import Workflow

    if not path.is_file():
        raise ScheduleError(f"no script at {path}")
    namespace = runpy.run_path(str(path), run_name="__tooldeck_jobs__")
    model = namespace.get("scripted_job_model")
    if model is not None and not callable(model):
        raise ScheduleError(f"{path}: scripted_job_model must be a function")
    workflows = [v for v in namespace.values() if isinstance(v, Workflow)]
    scripted = namespace.get("scripted_model")
    if scripted is not None and not callable(scripted):
        raise ScheduleError(f"{path}: scripted_model must be a function")
    return model, workflows, scripted


def load_runner_policy(paths: list[Path] | None) -> Any:
    """The ``--policy`` files of a process that runs jobs, as a headless session policy
    (``None`` without any); a file that cannot be used is one ``error:`` line, exit 2."""
    if not paths:
        return None
    from ..policy import SessionPolicy
    from .policy import _load

    return SessionPolicy(_load(Console(stderr=True), paths), session_id="runner", headless=True)


def scheduler_command(
    ctx: typer.Context,
    db: DbOption = None,
    dsn: DsnOption = None,
    pg_schema: SchemaOption = None,
    script: Annotated[
        Path | None,
        typer.Option("--script", help="A file defining scripted_job_model(job) (and workflows)."),
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", "-m", help="KIND:MODEL for the jobs run here.")
    ] = None,
    jobs: Annotated[
        int, typer.Option("--jobs", "-j", min=0, max=256, help="Jobs at once here (0: none).")
    ] = 4,
    home: Annotated[Path | None, typer.Option("--home", help="The jobs' home directory.")] = None,
    poll: Annotated[float, typer.Option("--poll", help="Most seconds between ticks.")] = 1.0,
    grace: Annotated[
        float, typer.Option("--grace", help="Seconds late a slot still counts as on time.")
    ] = 60.0,
    lease: Annotated[
        float, typer.Option("--lease", help="Seconds before a silent job runner is presumed dead.")
    ] = 30.0,
    owner: Annotated[str | None, typer.Option("--id", help="This scheduler's name.")] = None,
    policy: Annotated[
        list[Path] | None,
        typer.Option(
            "--policy",
            "-p",
            help="The organization's policy file (TOML or JSON), repeat to merge: the jobs "
            "run here must pass it as well as their creator's recorded policy.",
        ),
    ] = None,
    run_for: Annotated[
        float | None, typer.Option("--for", help="Stop after this many seconds.")
    ] = None,
    dbos_schema: Annotated[
        str,
        typer.Option(
            "--dbos-schema",
            help="With --dsn: the schema of DBOS's tables, as the workers' --dbos-schema; "
            "jobs of schedules with dispatch 'dbos' go to the DBOS queue there.",
        ),
    ] = "dbos",
    log_format: Annotated[
        LogFormat,
        typer.Option(
            "--log-format",
            help="Log lines as plain text, or one JSON object per line (ts, level, scheduler, "
            "event, task, run, message, fields).",
        ),
    ] = "text",
) -> None:
    """Fire due schedules (and run the jobs they make) until interrupted."""
    from ..jobs.runner import JobManager, JobRuntime
    from ..schedules.scheduler import ScheduleError, Scheduler, default_owner
    from ..workflows.store import PostgresStore, StoreError

    console = Console(stderr=True)
    runner_policy = load_runner_policy(policy)
    store = _store(console, db, dsn, pg_schema)
    job_model: Any = None
    workflows: list[Workflow] = []
    task_model: Any = None
    if script is not None:
        try:
            job_model, workflows, task_model = load_job_script(script)
        except ScheduleError as exc:
            raise _fail(console, str(exc)) from exc
    if model is not None:
        from ..providers import model_from_string

        try:
            model_from_string(model)
        except ValueError as exc:
            raise _fail(console, str(exc)) from exc

        def job_model(job: Any) -> Any:
            return model_from_string(model)

    name = owner or default_owner()
    log = WorkerLog(
        name,
        role="scheduler",
        fmt=log_format,
        verbose=bool(ctx.meta.get(VERBOSE_KEY)),
        lease=lease,
        retry=f"ticking again every {poll:g}s",
    )
    started = False
    stopped_by: list[str] = []

    async def main() -> None:
        async with store:
            queue = None
            if isinstance(store, PostgresStore):
                from ..jobs.durable import DbosJobQueue

                queue = DbosJobQueue(store.dsn, dbos_schema=dbos_schema)
            manager: JobManager | None = None
            if jobs and job_model is not None:
                engine = None
                if workflows and task_model is not None:
                    from ..workflows.engine import WorkflowEngine

                    engine = WorkflowEngine(store, task_model, catalog=workflows, home=home)
                from ..builtin import load_builtin_registry
                from ..jobs.runner import registry_tools

                runtime = JobRuntime(
                    model_for=job_model,
                    tools_for=registry_tools(load_builtin_registry(), home),
                    policy=runner_policy,
                    home=home,
                    engine=engine,
                )
                manager = JobManager(
                    store, runtime, concurrency=jobs, owner=name, lease=lease, poll=poll
                )
                await manager.open()
            scheduler = Scheduler(
                store,
                owner=name,
                poll=poll,
                grace=grace,
                queue=queue,
                on_fire=(lambda fired: manager._wake.set()) if manager is not None else None,
            )
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(
                    sig, _stopper(scheduler, stopped_by, f"stopped by {sig.name}")
                )
            if run_for is not None:
                loop.call_later(run_for, _stopper(scheduler, stopped_by, f"ran for {run_for:g}s"))

            def ready(s: Scheduler) -> None:
                nonlocal started
                started = True
                runs = (
                    f"running up to {jobs} job(s) here" if manager is not None else "no jobs here"
                )
                to_dbos = f"DBOS jobs to schema {dbos_schema}" if queue is not None else "no DBOS"
                _log.info(
                    "serving %s, %s, %s, poll %gs, grace %gs",
                    store.location,
                    runs,
                    to_dbos,
                    poll,
                    grace,
                    extra={
                        "event": "ready",
                        "fields": {
                            "jobs": jobs if manager is not None else 0,
                            "dbos_schema": dbos_schema if queue is not None else None,
                            "poll": poll,
                            "grace": grace,
                        },
                    },
                )

            try:
                stats = await scheduler.run(ready)
            finally:
                if manager is not None:
                    await manager.close()
                if queue is not None:
                    await queue.close()
            log.finish()
            why = stopped_by[0] if stopped_by else "stopped"
            _log.info(
                "%s (status 0): %d slot(s) fired, %d skipped, %d job(s) handed to DBOS, %d tick(s)",
                why,
                stats.fired,
                stats.skipped,
                stats.queued,
                stats.ticks,
                extra={
                    "event": "exiting",
                    "fields": {
                        "status": 0,
                        "why": why,
                        "fired": stats.fired,
                        "skipped": stats.skipped,
                        "queued": stats.queued,
                        "ticks": stats.ticks,
                    },
                },
            )

    with routed(log, log_handler(ctx), _SIGNAL_LOGGERS):
        try:
            asyncio.run(main())
        except StoreError as exc:
            if not started:  # it never served: a command line that cannot work
                raise _fail(console, str(exc)) from exc
            log.finish()
            _log.error(
                "%s (status 1)",
                exc,
                extra={"event": "exiting", "fields": {"status": 1, "why": str(exc)}},
            )
            raise typer.Exit(1) from exc


def _stopper(scheduler: Scheduler, stopped_by: list[str], why: str) -> Callable[[], None]:
    def stop() -> None:
        stopped_by.append(why)
        scheduler.stop()

    return stop
