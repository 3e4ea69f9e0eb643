"""The ``tooldeck`` command line (typer + rich).

``tooldeck -v COMMAND`` (or ``TOOLDECK_VERBOSE=1``) shows tracebacks and debug logs;
without it an error is one line (see :mod:`tooldeck.cli.report`).
"""

from __future__ import annotations

from typing import Annotated

import typer

from .approve import approve_command
from .demo import demo_command
from .jobs import jobs_app
from .mcp import app as mcp_app
from .policy import policy_app
from .report import HANDLER_KEY, VERBOSE_KEY, CliGroup, cli_logging
from .schedules import scheduler_command, schedules_app
from .search import search_command
from .serve import serve_command
from .timeline import timeline_command
from .toolkits import agents_app, toolkits_app
from .tools import app as tools_app
from .worker import worker_command
from .workflows import workflows_app

app = typer.Typer(
    name="tooldeck",
    help="tooldeck: the tool runtime for LLM agents.",
    no_args_is_help=True,
    add_completion=False,
    cls=CliGroup,
)


@app.callback()
def _options(
    ctx: typer.Context,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            "-v",
            envvar="TOOLDECK_VERBOSE",
            help="Show tracebacks and debug logs (errors are one line without it).",
        ),
    ] = False,
) -> None:
    ctx.meta[VERBOSE_KEY] = verbose
    ctx.meta[HANDLER_KEY] = ctx.with_resource(cli_logging(verbose))


app.command(
    "demo",
    help="Run the offline demo (no API keys, no network), or with --model one live turn.",
)(demo_command)
app.add_typer(tools_app, name="tools")
app.add_typer(toolkits_app, name="toolkits")
app.add_typer(agents_app, name="agents")
app.command("search", help="Search a catalog of tool definitions for a need, ranked.")(
    search_command
)
app.add_typer(mcp_app, name="mcp")
app.add_typer(workflows_app, name="workflows")
app.command("worker", help="Run workflow task turns from the DBOS queue in PostgreSQL.")(
    worker_command
)
app.add_typer(jobs_app, name="jobs")
app.add_typer(schedules_app, name="schedules")
app.command("scheduler", help="Fire due schedules and run the jobs they make.")(scheduler_command)
app.add_typer(policy_app, name="policy")
app.command("timeline", help="Show a saved turn or an OTLP/JSON trace as a timeline.")(
    timeline_command
)
app.command("serve", help="Serve the tools of MCP servers as one MCP server (stdio or HTTP).")(
    serve_command
)
app.command("approve", help="Answer the calls a waiting run needs approved (writes answers).")(
    approve_command
)


@app.command("version", help="Print the installed version.")
def version_command() -> None:
    from .. import __version__

    typer.echo(__version__)


def main() -> None:
    app()
