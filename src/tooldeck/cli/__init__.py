"""The ``tooldeck`` command line (typer + rich)."""

from __future__ import annotations

import typer

from .approve import approve_command
from .demo import demo_command
from .mcp import app as mcp_app
from .policy import policy_app
from .search import search_command
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
)
app.command("demo", help="Run the offline demo (no API keys, no network).")(demo_command)
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
app.add_typer(policy_app, name="policy")
app.command("timeline", help="Show a saved turn or an OTLP/JSON trace as a timeline.")(
    timeline_command
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
