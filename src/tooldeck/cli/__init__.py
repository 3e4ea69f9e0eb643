"""The ``tooldeck`` command line (typer + rich)."""

from __future__ import annotations

import typer

from .demo import demo_command

app = typer.Typer(
    name="tooldeck",
    help="tooldeck: the tool runtime for LLM agents.",
    no_args_is_help=True,
    add_completion=False,
)
app.command("demo", help="Run the offline demo (no API keys, no network).")(demo_command)


@app.command("version", help="Print the installed version.")
def version_command() -> None:
    from .. import __version__

    typer.echo(__version__)


def main() -> None:
    app()
