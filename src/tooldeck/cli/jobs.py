"""``tooldeck jobs``: list, show (with live progress) and cancel background jobs.

- ``tooldeck jobs list [--state S] [--session ID]``: jobs, newest first;
- ``tooldeck jobs show ID [--follow]``: one job; ``--follow`` redraws it until it ends;
- ``tooldeck jobs cancel ID``: a pending job never runs, a running one stops at its next
  step (its runner reads the request at its next heartbeat or model step).

The store is the workflow store (``--db PATH``, ``--dsn DSN``, or the environment, as for
``tooldeck workflows``). Read commands never create a database that is not there.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from .workflows import DbOption, DsnOption, SchemaOption, _existing_store, _fail

if TYPE_CHECKING:  # imported where used, so that ``--help`` loads none of the stores
    from ..jobs.store import JobRecord, JobTable
    from ..workflows.store import WorkflowStore

__all__ = ["jobs_app", "open_existing"]

# ``tooldeck.jobs.store.JobState``'s values, here so that typer builds ``--state``
# without importing the store (tests/test_cli_startup.py checks they agree)
JobState = Literal["pending", "running", "succeeded", "failed", "cancelled", "lost"]

jobs_app = typer.Typer(help="Inspect and cancel background agent jobs.", no_args_is_help=True)


def open_existing(
    console: Console, db: Path | None, dsn: str | None, schema: str | None
) -> WorkflowStore | None:
    """The configured store, or ``None`` when the default SQLite file does not exist yet
    (a read command then reports that nothing is there, and creates nothing); a ``--db``
    file that does not exist is an error naming it."""
    return _existing_store(console, db, dsn, schema)


def _state(state: str) -> Text:
    from ..workflows.render import STATE_STYLES

    styles = {**STATE_STYLES, "lost": "magenta"}
    return Text(state, style=styles.get(state, ""))


def jobs_table(jobs: list[JobRecord]) -> Table:
    table = Table(title="jobs")
    for column in (
        "id",
        "state",
        "session",
        "agent",
        "attempts",
        "steps",
        "started",
        "now / summary",
    ):
        table.add_column(column, overflow="fold")
    for j in jobs:
        table.add_row(
            j.id,
            _state(j.state),
            j.session_id,
            j.agent or j.kind,
            f"{j.attempts}/{j.max_attempts}",
            str(j.steps),
            f"{j.created_at:%Y-%m-%d %H:%M:%S}",
            (j.progress if j.state == "running" else j.summary or j.error) or "",
        )
    return table


def job_view(job: JobRecord, *, spinner: str = "") -> Group:
    table = Table(show_header=False, title=f"job {job.id}")
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    state = _state(job.state)
    if job.state == "running" and spinner:
        state = Text.assemble(state, f" {spinner}")
    rows: list[tuple[str, str | Text]] = [
        ("state", state),
        ("session", job.session_id),
        ("origin", job.origin),
        ("task", job.task),
        ("attempt", f"{job.attempts} of {job.max_attempts} (on lost: {job.on_lost})"),
        ("steps", str(job.steps)),
        ("runs on", f"{job.dispatch}" + (f", {job.owner}" if job.owner else "")),
        ("started", f"{job.created_at:%Y-%m-%d %H:%M:%S}"),
    ]
    if job.state == "running" and job.progress:
        rows.append(("now", job.progress))
    if job.heartbeat_at and job.state == "running":
        rows.append(("heartbeat", f"{job.heartbeat_at:%H:%M:%S}"))
    if job.cancel_requested and not job.terminal:
        rows.append(("cancel", "requested"))
    if job.finished_at:
        rows.append(("ended", f"{job.finished_at:%Y-%m-%d %H:%M:%S}"))
    if job.error:
        rows.append(("note", job.error))
    if job.summary:
        rows.append(("summary", job.summary))
    if job.result_ref:
        rows.append(("recall", job.result_ref))
    rows.append(("announced", "yes" if job.notified_at else "not yet"))
    for name, value in rows:
        table.add_row(name, value)
    return Group(table)


async def _find(table: JobTable, job_id: str) -> JobRecord:
    from ..jobs.runner import JobManager

    manager = JobManager(table.store)
    return await manager.get(job_id)


@jobs_app.command("list")
def list_command(
    db: DbOption = None,
    dsn: DsnOption = None,
    pg_schema: SchemaOption = None,
    state: Annotated[
        JobState | None, typer.Option("--state", help="Only jobs in this state.")
    ] = None,
    session: Annotated[
        str | None, typer.Option("--session", help="Only jobs of this session.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, max=1000)] = 20,
) -> None:
    """List background jobs, newest first."""
    from ..jobs.store import JobTable
    from ..workflows.store import StoreError

    console = Console()
    store = open_existing(console, db, dsn, pg_schema)
    if store is None:
        console.print("No jobs: there is no database yet.")
        return

    async def main() -> list[JobRecord]:
        async with store:
            return await JobTable(store).list(session_id=session, state=state, limit=limit)

    try:
        jobs = asyncio.run(main())
    except StoreError as exc:
        raise _fail(console, str(exc)) from exc
    if not jobs:
        console.print(f"No jobs in {store.location}.")
    else:
        console.print(jobs_table(jobs))


@jobs_app.command("show")
def show_command(
    job_id: Annotated[str, typer.Argument(help="The job's id, or a unique prefix.")],
    db: DbOption = None,
    dsn: DsnOption = None,
    pg_schema: SchemaOption = None,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Redraw the job live until it ends.")
    ] = False,
    full: Annotated[bool, typer.Option("--full", help="Print the whole result too.")] = False,
    interval: Annotated[float, typer.Option("--interval", help="Seconds between redraws.")] = 0.5,
) -> None:
    """Show one job; with --follow, its live progress until it ends."""
    from ..jobs.store import JobTable
    from ..workflows.store import StoreError

    console = Console()
    store = open_existing(console, db, dsn, pg_schema)
    if store is None:
        raise _fail(console, f"no job {job_id!r}: there is no database yet", 1)

    async def main() -> JobRecord:
        async with store:
            table = JobTable(store)
            try:
                job = await _find(table, job_id)
            except LookupError as exc:
                raise _fail(console, str(exc), 1) from exc
            if not follow or job.terminal:
                console.print(job_view(job))
                return job
            frames = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
            with Live(job_view(job), console=console, refresh_per_second=8) as live:
                while not job.terminal:
                    await asyncio.sleep(interval)
                    again = await table.get(job.id)
                    if again is None:
                        break
                    job = again
                    live.update(job_view(job, spinner=frames[int(time.monotonic() * 8) % 10]))
            return job

    try:
        job = asyncio.run(main())
    except StoreError as exc:
        raise _fail(console, str(exc)) from exc
    except KeyboardInterrupt as exc:
        raise _fail(console, "interrupted (the job goes on)", 130) from exc
    if full and isinstance(job.result, dict) and job.result.get("output"):
        console.print(str(job.result["output"]), markup=False, highlight=False)


@jobs_app.command("cancel")
def cancel_command(
    job_id: Annotated[str, typer.Argument(help="The job's id, or a unique prefix.")],
    db: DbOption = None,
    dsn: DsnOption = None,
    pg_schema: SchemaOption = None,
    reason: Annotated[
        str, typer.Option("--reason", help="Why (recorded).")
    ] = "cancelled from the CLI",
) -> None:
    """Cancel a job: a pending one never runs, a running one stops at its next step."""
    from ..jobs.store import JobTable
    from ..workflows.store import StoreError

    console = Console()
    store = open_existing(console, db, dsn, pg_schema)
    if store is None:
        raise _fail(console, f"no job {job_id!r}: there is no database yet", 1)

    async def main() -> tuple[str, str, bool]:
        async with store:
            table = JobTable(store)
            try:
                job = await _find(table, job_id)
            except LookupError as exc:
                raise _fail(console, str(exc), 1) from exc
            outcome = await table.cancel(job.id, reason)
            assert outcome is not None
            return job.id, *outcome

    try:
        found, state, changed = asyncio.run(main())
    except StoreError as exc:
        raise _fail(console, str(exc)) from exc
    if not changed:
        raise _fail(console, f"job {found} is already {state}; nothing to cancel", 1)
    if state == "running":
        console.print(f"Job {found} is told to stop; it stops at its next step.")
    else:
        console.print(f"Cancelled job {found}; it will not run.")
