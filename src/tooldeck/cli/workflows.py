"""``tooldeck workflows``: run a workflow script, list runs, show one run.

- ``tooldeck workflows run FILE --inputs JSON [--db PATH | --dsn DSN] [--model SPEC]``
  runs the script's workflow with live progress. Without ``--model``, the script's own
  ``scripted_model`` (a scripted stand-in, not a real model) is used, for offline runs.
  With ``--dsn DSN --workers`` the task turns are queued for ``tooldeck worker``
  processes (DBOS) instead of running in this process.
- ``tooldeck workflows list`` lists runs, newest first.
- ``tooldeck workflows show ID`` shows a run's tasks, states, attempts and results.
- ``tooldeck workflows cancel ID`` cancels a run: running task turns stop at their next
  step, pending tasks never run, and (with ``--dsn``) its turns still queued for workers
  are cancelled in DBOS's queue too.

With ``--workers``, a run none of whose tasks a worker takes for ``--no-worker-after``
seconds (5) is reported in one line; ``--if-no-worker`` says what then: ``wait`` (keep
waiting, the run stays queued), ``cancel`` it, or ``leave`` it queued and return.

``--model`` is built once before anything runs, so a bad model string or a missing key
is one line (exit 2); a provider error during a task turn fails that task, with the
error's one line as its reason in the run's table.

The store is SQLite by default (``~/.tooldeck/workflows.sqlite3``), or ``--db PATH``,
or PostgreSQL with ``--dsn`` (also ``TOOLDECK_WORKFLOWS_DSN``).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer
from rich.console import Console
from rich.table import Table

from .._extras import needs_extra
from .report import existing_file, exit_code, json_kind, read_json, user_error

if TYPE_CHECKING:  # imported where used, so that ``--help`` loads none of the engine
    from ..workflows.engine import ModelFactory, TaskRun, WorkflowEngine
    from ..workflows.executor import TaskExecutor
    from ..workflows.queued import QueueWatch
    from ..workflows.store import WorkflowStore

__all__ = ["workflows_app"]

NoWorker = Literal["wait", "cancel", "leave"]
# ``tooldeck.workflows.store.protocol.WorkflowState``'s values, here so that typer builds
# ``--state`` without importing the store (tests/test_cli_startup.py checks they agree)
WorkflowState = Literal["pending", "running", "succeeded", "failed", "cancelled"]

workflows_app = typer.Typer(
    help="Run workflows (task turns that submit schema-checked results) and inspect runs.",
    no_args_is_help=True,
)

DbOption = Annotated[
    Path | None,
    typer.Option("--db", help="SQLite file (default ~/.tooldeck/workflows.sqlite3)."),
]
DsnOption = Annotated[
    str | None,
    typer.Option("--dsn", help="PostgreSQL DSN (or TOOLDECK_WORKFLOWS_DSN); excludes --db."),
]
SchemaOption = Annotated[
    str | None,
    typer.Option("--pg-schema", help="PostgreSQL schema for the tables (default tooldeck)."),
]


def _fail(console: Console, message: str, code: int = 2) -> typer.Exit:
    """``error: message`` on stderr, one line (``console`` is where the command prints)."""
    return user_error(message, code)


def _store(console: Console, db: Path | None, dsn: str | None, schema: str | None) -> WorkflowStore:
    from ..workflows.store import StoreError, open_store

    try:
        return open_store(db=db, dsn=dsn, schema=schema)
    except StoreError as exc:
        raise _fail(console, str(exc)) from exc


def _existing_store(
    console: Console, db: Path | None, dsn: str | None, schema: str | None
) -> WorkflowStore | None:
    """The store a read command reads; ``None`` when its default file does not exist yet.

    A read never creates anything: a ``--db`` (or ``TOOLDECK_WORKFLOWS_DB``) file that
    does not exist is an error naming it; a default file that does not exist means
    nothing has run on this machine yet.
    """
    from ..workflows.store import PostgresStore

    store = _store(console, db, dsn, schema)
    if isinstance(store, PostgresStore):
        return store
    path = Path(str(store.location))
    if path.is_file():
        return store
    if db is not None or os.environ.get("TOOLDECK_WORKFLOWS_DB"):
        where = "is a folder, not a SQLite file" if path.is_dir() else "does not exist"
        raise _fail(console, f"{path} {where}; give --db an existing workflow database")
    return None


def _inputs(console: Console, text: str) -> dict[str, Any]:
    """``--inputs``: a JSON object, or ``@FILE`` holding one (read as every file given to
    tooldeck is: size, encoding and nesting limits)."""
    from .._config_files import ConfigFileError, parse_json

    if text.startswith("@"):
        path = Path(text[1:])
        value = read_json(path, "--inputs @FILE a JSON object of the workflow's inputs")
        where = f"--inputs @{path}"
    else:
        try:
            value = parse_json(text)
        except ConfigFileError as exc:
            raise _fail(console, f"--inputs: {exc.problem}; give a JSON object") from exc
        where = "--inputs"
    if not isinstance(value, dict):
        raise _fail(console, f"{where} must be a JSON object, not {json_kind(value)}")
    return value


def _model_factory(console: Console, spec: str | None, scripted: ModelFactory | None) -> Any:
    if spec is None or spec == "scripted":
        if scripted is None:
            raise _fail(
                console,
                "the script defines no scripted_model(run) for offline runs; pass --model "
                "KIND:MODEL (e.g. openai:gpt-5.4)",
            )
        return scripted
    from ..errors import ProviderError
    from ..providers import model_from_string

    try:
        model_from_string(spec)  # fail now on a bad spec or a missing key, not in every task
    except ProviderError as exc:
        raise _fail(console, str(exc), exit_code(exc)) from exc

    def factory(run: TaskRun) -> Any:
        return model_from_string(spec)

    return factory


@workflows_app.command("run")
def run_command(
    file: Annotated[Path, typer.Argument(help="The workflow script (a Python file).")],
    inputs: Annotated[
        str, typer.Option("--inputs", "-i", help="The inputs, a JSON object (or @file.json).")
    ] = "{}",
    db: DbOption = None,
    dsn: DsnOption = None,
    pg_schema: SchemaOption = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            help="KIND:MODEL for every task (e.g. anthropic:claude-sonnet-4-6); default: the "
            "script's scripted_model (not a real model).",
        ),
    ] = None,
    workflow: Annotated[
        str | None, typer.Option("--workflow", "-w", help="Which workflow, if several.")
    ] = None,
    concurrency: Annotated[
        int, typer.Option("--concurrency", "-c", min=1, max=64, help="Tasks at once.")
    ] = 4,
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
    timeout: Annotated[
        float | None, typer.Option("--timeout", help="Give up waiting after this many seconds.")
    ] = None,
    workers: Annotated[
        bool,
        typer.Option(
            "--workers",
            help="Queue the task turns for `tooldeck worker` processes (DBOS, needs --dsn) "
            "instead of running them here; --model and --concurrency are then the workers'.",
        ),
    ] = False,
    dbos_schema: Annotated[
        str, typer.Option("--dbos-schema", help="With --workers: schema of DBOS's tables.")
    ] = "dbos",
    no_worker_after: Annotated[
        float,
        typer.Option(
            "--no-worker-after",
            min=0.5,
            help="With --workers: seconds without any task taken before it is reported.",
        ),
    ] = 5.0,
    if_no_worker: Annotated[
        NoWorker,
        typer.Option(
            "--if-no-worker",
            help="With --workers, when no worker takes a task: keep waiting (the run stays "
            "queued), cancel the run, or leave it queued and return.",
        ),
    ] = "wait",
) -> None:
    """Run a workflow script's workflow and wait for it, with live progress."""
    from ..workflows.durable import DbosUnavailable
    from ..workflows.engine import WorkflowEngine, WorkflowError
    from ..workflows.queued import QueueWatch
    from ..workflows.render import WorkflowProgress, workflow_table
    from ..workflows.script import load_script
    from ..workflows.shapes import WorkflowDefinitionError
    from ..workflows.store import PostgresStore, StoreError

    console = Console()
    if workers and not (dsn or os.environ.get("TOOLDECK_WORKFLOWS_DSN")):
        raise _fail(console, "--workers needs the workers' PostgreSQL database: --dsn DSN")
    existing_file(file, "a workflow script (a Python file defining a Workflow)")
    try:
        script = load_script(file)
        chosen = script.workflow(workflow)
    except WorkflowDefinitionError as exc:
        raise _fail(console, str(exc)) from exc
    values = _inputs(console, inputs)
    problems = chosen.input_problems(values)
    if problems:
        raise _fail(console, f"inputs for {chosen.name!r}: " + "; ".join(problems))
    factory = _no_model if workers else _model_factory(console, model, script.scripted_model)
    store = _store(console, db, dsn, pg_schema)
    executor: TaskExecutor | None = None
    if workers:
        from ..workflows.durable import DbosExecutor

        assert isinstance(store, PostgresStore)
        executor = DbosExecutor(store.dsn, dbos_schema=dbos_schema)

    left = False

    async def main() -> str:
        nonlocal left
        async with store:
            engine = WorkflowEngine(
                store,
                factory,
                catalog=[chosen],
                executor=executor,
                max_concurrency=concurrency,
                home=home,
                web_provider=web_provider,
            )
            async with engine:
                progress = WorkflowProgress(console).attach(engine.events)
                with progress:
                    workflow_id = await engine.start(chosen, values)
                    follower = asyncio.create_task(engine.follow(workflow_id)) if workers else None
                    watch = QueueWatch(store, workflow_id, after=no_worker_after)
                    try:
                        async with asyncio.timeout(timeout):
                            if workers:
                                left = await _wait_for_workers(console, engine, watch, if_no_worker)
                            else:
                                await engine.wait(workflow_id)
                            run = await engine.get(workflow_id)
                            if follower is not None and not left:  # show the last changes
                                await follower
                    except (asyncio.CancelledError, TimeoutError) as exc:
                        why = (
                            "interrupted"
                            if isinstance(exc, asyncio.CancelledError)
                            else (f"no result within {timeout:g}s")
                        )
                        await asyncio.shield(engine.cancel(workflow_id, why))
                        run = await engine.get(workflow_id)
                    finally:
                        if follower is not None:
                            follower.cancel()
                            await asyncio.gather(follower, return_exceptions=True)
                console.print(workflow_table(run))
                console.print(f"[dim]stored in {store.location}[/dim]")
                if left:
                    console.print(
                        f"{workflow_id} left queued: it starts when a worker does; "
                        f"`tooldeck workflows show {workflow_id}` follows it, "
                        f"`tooldeck workflows cancel {workflow_id}` cancels it"
                    )
                    return "queued"
                return run.state

    try:
        state = asyncio.run(main())
    except (StoreError, WorkflowError, DbosUnavailable) as exc:
        raise _fail(console, str(exc)) from exc
    except KeyboardInterrupt as exc:
        raise _fail(console, "interrupted; the run was cancelled", 130) from exc
    if state != "succeeded":
        raise typer.Exit(1)


@workflows_app.command("list")
def list_command(
    db: DbOption = None,
    dsn: DsnOption = None,
    pg_schema: SchemaOption = None,
    state: Annotated[
        WorkflowState | None,
        typer.Option("--state", help="Only runs in this state."),
    ] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, max=1000)] = 20,
) -> None:
    """List workflow runs, newest first."""
    from ..workflows.render import runs_table
    from ..workflows.store import StoreError

    console = Console()
    store = _existing_store(console, db, dsn, pg_schema)
    if store is None:
        console.print("No workflow runs yet (no workflow database on this machine).")
        return

    async def main() -> Table | None:
        async with store:
            runs = await store.list_workflows(limit=limit, state=state)
        return runs_table(runs) if runs else None

    try:
        table = asyncio.run(main())
    except StoreError as exc:
        raise _fail(console, str(exc)) from exc
    if table is None:
        console.print(f"No workflow runs in {store.location}.")
    else:
        console.print(table)


@workflows_app.command("show")
def show_command(
    workflow_id: Annotated[str, typer.Argument(help="The run's id, or a unique prefix.")],
    db: DbOption = None,
    dsn: DsnOption = None,
    pg_schema: SchemaOption = None,
    full: Annotated[bool, typer.Option("--full", help="Show whole results.")] = False,
    history: Annotated[
        bool, typer.Option("--history", help="Also show every state transition and rejection.")
    ] = False,
) -> None:
    """Show one run: a table of its tasks, states, attempts and results."""
    from ..workflows.engine import WorkflowEngine
    from ..workflows.render import workflow_table
    from ..workflows.store import StoreError

    console = Console()
    store = _existing_store(console, db, dsn, pg_schema)
    if store is None:
        raise _fail(console, f"no run {workflow_id!r}: nothing has run on this machine yet", 1)

    async def main() -> None:
        async with store:
            engine = WorkflowEngine(store, _no_model)
            try:
                wf = await engine.get(workflow_id)
            except LookupError as exc:
                raise _fail(console, str(exc), 1) from exc
            console.print(workflow_table(wf, full=full))
            if not history:
                return
            table = Table(title="transitions")
            for column in ("at", "task", "from", "to", "reason"):
                table.add_column(column, overflow="fold")
            names = {t.id: t.name for t in wf.tasks}
            for tr in await store.transitions(wf.id):
                table.add_row(
                    f"{tr.at:%H:%M:%S.%f}"[:-3],
                    names.get(tr.task_id or "", "(workflow)"),
                    tr.from_state or "",
                    tr.to_state,
                    tr.reason or "",
                )
            console.print(table)
            for t in wf.tasks:
                for r in await store.rejections(t.id):
                    console.print(
                        f"[yellow]rejected[/yellow] {t.name} submission {r.attempt} "
                        f"({r.source}): " + "; ".join(r.reasons)
                    )

    try:
        asyncio.run(main())
    except StoreError as exc:
        raise _fail(console, str(exc)) from exc


async def _wait_for_workers(
    console: Console, engine: WorkflowEngine, watch: QueueWatch, if_no_worker: NoWorker
) -> bool:
    """Wait for a run on workers, saying when none takes its tasks; ``True``: left queued."""
    workflow_id = watch.workflow_id
    waiter = asyncio.ensure_future(engine.wait(workflow_id))
    try:
        while True:
            done, _ = await asyncio.wait({waiter}, timeout=min(1.0, watch.after / 2))
            if done:
                waiter.result()
                return False
            stall = await watch.check()
            if stall is None:
                continue
            if if_no_worker == "leave":
                console.print(f"[yellow]{stall.message}[/yellow]")
                return True
            if if_no_worker == "cancel":
                console.print(f"[yellow]{stall.message}; cancelling the run[/yellow]")
                await engine.cancel(workflow_id, stall.message)
                await waiter
                return False
            console.print(
                f"[yellow]{stall.message}; the run stays queued until a worker starts "
                f"(tooldeck worker --dsn ...), or cancel it: tooldeck workflows cancel "
                f"{workflow_id}[/yellow]"
            )
            watch.reset()
    finally:
        waiter.cancel()
        await asyncio.gather(waiter, return_exceptions=True)


@workflows_app.command("cancel")
def cancel_command(
    workflow_id: Annotated[str, typer.Argument(help="The run's id, or a unique prefix.")],
    db: DbOption = None,
    dsn: DsnOption = None,
    pg_schema: SchemaOption = None,
    reason: Annotated[
        str, typer.Option("--reason", help="Why (kept in the run's history).")
    ] = "cancelled from the command line",
    dbos_schema: Annotated[
        str, typer.Option("--dbos-schema", help="Schema of DBOS's tables, for queued turns.")
    ] = "dbos",
) -> None:
    """Cancel a run: running turns stop, pending tasks never run, queued turns are dropped."""
    from ..workflows.durable import DbosUnavailable
    from ..workflows.engine import WorkflowEngine
    from ..workflows.store import StoreError

    console = Console()
    store = _existing_store(console, db, dsn, pg_schema)
    if store is None:
        raise _fail(console, f"no run {workflow_id!r}: nothing has run on this machine yet", 1)

    async def main() -> str:
        async with store:
            executor = await _queue_of(store, dbos_schema)
            engine = WorkflowEngine(store, _no_model, executor=executor)
            async with engine:
                try:
                    run = await engine.get(workflow_id)
                except LookupError as exc:
                    raise _fail(console, str(exc), 1) from exc
                outcome = await engine.cancel(run.id, reason)
                if not outcome.cancelled:
                    raise _fail(console, f"run {run.id} already {outcome.state}; not cancelled", 1)
                return (
                    f"cancelled {run.id}: {len(outcome.running)} running and "
                    f"{len(outcome.pending)} pending task(s) stopped"
                )

    try:
        console.print(asyncio.run(main()))
    except (StoreError, DbosUnavailable) as exc:
        raise _fail(console, str(exc)) from exc


async def _queue_of(store: WorkflowStore, dbos_schema: str) -> TaskExecutor | None:
    """The DBOS queue of ``store``'s database, when it has one (workers ran there)."""
    from ..workflows.store import PostgresStore, StoreError

    if not isinstance(store, PostgresStore):
        return None
    with needs_extra("postgres"):  # a PostgresStore: installed with it
        import psycopg

    try:
        async with await psycopg.AsyncConnection.connect(store.dsn, autocommit=True) as conn:
            found = await conn.execute(
                "SELECT 1 FROM pg_namespace WHERE nspname = %s", (dbos_schema,)
            )
            if await found.fetchone() is None:
                return None  # no worker ever ran here: nothing is queued
    except psycopg.Error as exc:
        raise StoreError(f"cannot read PostgreSQL at {store.location}: {exc}") from exc
    from ..workflows.durable import DbosExecutor

    return DbosExecutor(store.dsn, dbos_schema=dbos_schema)


def _no_model(run: TaskRun) -> Any:  # pragma: no cover - never called: no turn runs here
    raise RuntimeError("no model: this engine runs no task turn itself")
