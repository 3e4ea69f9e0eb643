"""The ``tooldeck`` command line (typer + rich).

``tooldeck -v COMMAND`` (or ``TOOLDECK_VERBOSE=1``) shows tracebacks and debug logs;
without it an error is one line (see :mod:`tooldeck.cli.report`).

Each command's module is imported only when that command runs: ``tooldeck --help`` lists
the commands from :data:`COMMANDS` alone, without loading a provider SDK, MCP, DBOS or
pydantic (``tests/test_cli_startup.py`` holds it to that).

The command is the ``cli`` extra (typer, rich): the ``tooldeck`` script enters through
:mod:`tooldeck.__main__`, which says so in one line when the extra is missing.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Annotated, Any

from .._extras import needs_extra

with needs_extra("cli"):  # every module of this package needs it: one line when missing
    import typer
    from typer.core import TyperCommand

from ._help import print_group_help, tidy_help
from .report import HANDLER_KEY, VERBOSE_KEY, CliGroup, cli_logging

__all__ = ["COMMANDS", "LazyCommand", "app", "load_command", "main"]


@dataclass(frozen=True, slots=True)
class LazyCommand:
    """A command known by name and help until it runs: ``target`` is ``module:attribute``
    in this package, a ``typer.Typer`` (a group) or a command function."""

    target: str
    help: str


COMMANDS: dict[str, LazyCommand] = {
    "demo": LazyCommand(
        "demo:demo_command",
        "Run the offline demo (no API keys, no network), or with --model one live turn.",
    ),
    "tools": LazyCommand("tools:app", "Check, list and show tool definitions."),
    "toolkits": LazyCommand("toolkits:toolkits_app", "List and inspect toolkits."),
    "agents": LazyCommand("toolkits:agents_app", "Check agent definitions."),
    "search": LazyCommand(
        "search:search_command", "Search a catalog of tool definitions for a need, ranked."
    ),
    "mcp": LazyCommand(
        "mcp:app",
        "List MCP servers from a config file, call their tools, fetch their prompts and "
        "resources, log in.",
    ),
    "workflows": LazyCommand(
        "workflows:workflows_app",
        "Run workflows (task turns that submit schema-checked results) and inspect runs.",
    ),
    "worker": LazyCommand(
        "worker:worker_command", "Run workflow task turns from the DBOS queue in PostgreSQL."
    ),
    "jobs": LazyCommand("jobs:jobs_app", "Inspect and cancel background agent jobs."),
    "sessions": LazyCommand(
        "sessions:sessions_app", "List, show and delete stored sessions (Session(store=...))."
    ),
    "schedules": LazyCommand(
        "schedules:schedules_app", "Inspect, cancel and fire schedules (cron, interval, once)."
    ),
    "scheduler": LazyCommand(
        "schedules:scheduler_command", "Fire due schedules and run the jobs they make."
    ),
    "policy": LazyCommand(
        "policy:policy_app",
        "Explain and check access-control policies; list and revoke approve-always grants.",
    ),
    "timeline": LazyCommand(
        "timeline:timeline_command", "Show a saved turn or an OTLP/JSON trace as a timeline."
    ),
    "serve": LazyCommand(
        "serve:serve_command",
        "Serve the tools of MCP servers as one MCP server (stdio or HTTP).",
    ),
    "approve": LazyCommand(
        "approve:approve_command",
        "Answer the calls a waiting run needs approved (writes answers).",
    ),
}


def load_command(name: str) -> Any:
    """The real click command behind ``COMMANDS[name]`` (imports its module)."""
    entry = COMMANDS[name]
    module, attribute = entry.target.split(":")
    target = getattr(importlib.import_module(f"{__name__}.{module}"), attribute)
    if isinstance(target, typer.Typer):
        command: Any = typer.main.get_group(target)
    else:
        single = typer.Typer(add_completion=False)
        single.command(name, help=entry.help)(target)
        command = typer.main.get_command(single)
    command.name = name
    return tidy_help(command)


class _Placeholder(TyperCommand):
    """What ``--help`` lists for a command whose module is not imported yet."""


class _LazyGroup(CliGroup):
    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        known = dict(self.commands)
        self.commands.clear()  # in COMMANDS' order, then the eager ones (version)
        for name, entry in COMMANDS.items():
            self.commands[name] = _Placeholder(name, help=entry.help)
        self.commands.update(known)
        tidy_help(self)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        print_group_help(self, ctx)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name, command, rest = super().resolve_command(ctx, args)
        if isinstance(command, _Placeholder) and name is not None:
            command = self.commands[name] = load_command(name)
        return name, command, rest


app = typer.Typer(
    name="tooldeck",
    help="tooldeck: the tool runtime for LLM agents.",
    no_args_is_help=True,
    add_completion=False,
    cls=_LazyGroup,
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


@app.command("version", help="Print the installed version.")
def version_command() -> None:
    from .. import __version__

    typer.echo(__version__)


def main() -> None:
    app()
