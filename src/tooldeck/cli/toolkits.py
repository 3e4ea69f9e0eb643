"""``tooldeck toolkits ...`` and ``tooldeck agents check``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.tree import Tree

from ..agents.toolkits import ToolkitError, ToolkitManifest, load_agents, resolve_agent_tools
from .report import existing_file, user_error

toolkits_app = typer.Typer(help="List and inspect toolkits.", no_args_is_help=True)
agents_app = typer.Typer(help="Check agent definitions.", no_args_is_help=True)

ManifestOption = Annotated[
    list[Path] | None,
    typer.Option("--manifest", "-m", help="A toolkits.toml loaded on top of the defaults."),
]


def _known_tools() -> list[str]:
    from ..builtin import DEFINITIONS_PATH
    from ..registry import check_document  # the schema compiler: not for ``--help``

    definitions, _ = check_document(json.loads(DEFINITIONS_PATH.read_text()))
    return [d.name for d in definitions]


def _manifest(console: Console, paths: list[Path] | None) -> ToolkitManifest:
    for path in paths or []:
        existing_file(path, "a toolkits.toml")
    try:
        return ToolkitManifest.load(*(paths or []))
    except ToolkitError as exc:
        raise user_error(str(exc)) from exc


@toolkits_app.command("list")
def list_command(manifest: ManifestOption = None) -> None:
    """Every toolkit with its description and resolved size."""
    console = Console()
    m = _manifest(console, manifest)
    table = Table(title="toolkits")
    for column in ("name", "description", "tools", "source"):
        table.add_column(column)
    for name, kit in m.toolkits.items():
        try:
            size = str(len(m.resolve(name).tools))
        except ToolkitError as exc:
            size = f"[red]{exc}[/red]"
        table.add_row(name, kit.description, size, kit.source)
    console.print(table)


@toolkits_app.command("show")
def show_command(name: str, manifest: ManifestOption = None) -> None:
    """The expansion tree and the final tool list, with warnings."""
    console = Console()
    m = _manifest(console, manifest)
    try:
        resolution = m.resolve(name)
    except ToolkitError as exc:
        raise user_error(f"{exc}; tooldeck toolkits list shows the toolkits", 1) from exc
    root = Tree(f"[bold]{name}[/bold]")
    stack = [root]
    for depth, kit in resolution.tree[1:]:
        del stack[depth:]
        node = stack[-1].add(f"{kit}: {', '.join(m.toolkits[kit].tools) or '-'}")
        stack.append(node)
    console.print(root)
    console.print("tools: " + ", ".join(resolution.tools))
    known = set(_known_tools())
    unknown = [t for t in resolution.tools if t not in known]
    if unknown:
        console.print(
            f"[yellow]warning:[/yellow] not built-in tools (they must come from "
            f"your registry or MCP servers): {', '.join(unknown)}"
        )


@agents_app.command("check")
def check_command(directory: Path, manifest: ManifestOption = None) -> None:
    """Load every agent definition in DIRECTORY and show how its tools resolve."""
    console = Console()
    if not directory.is_dir():
        what = "is a file, not a folder" if directory.exists() else "does not exist"
        raise user_error(f"{directory} {what}; give a folder of agent definitions")
    m = _manifest(console, manifest)
    agents, problems = load_agents(directory)
    if not agents and not problems:
        raise user_error(
            f"{directory} holds no agent definitions (*.md); give a folder of agent definitions"
        )
    known = _known_tools()
    table = Table(title=str(directory))
    for column in ("agent", "via", "tools", "warnings"):
        table.add_column(column, overflow="fold")
    warned = False
    for agent in agents.values():
        resolved = resolve_agent_tools(agent, m, known)
        warned = warned or bool(resolved.warnings)
        table.add_row(
            agent.name, resolved.via, ", ".join(resolved.tools), "\n".join(resolved.warnings)
        )
    console.print(table)
    for problem in problems:
        console.print(f"[red]{problem}[/red]")
    if problems:
        raise typer.Exit(1)
    if warned:
        console.print("[yellow]warnings above: those agents run without the missing tools")
