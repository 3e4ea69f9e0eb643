"""``tooldeck tools ...``: check, list and show tool definitions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from ..errors import SchemaError
from .report import json_kind, read_json, user_error

# imported where used, so that ``--help`` loads none of the registry, and ``tooldeck
# serve`` (which reads a definitions file with this module) none of rich
if TYPE_CHECKING:
    from rich.console import Console

    from ..registry import Definition, RegistryError

# ``tooldeck.schema.Provider``'s values, here so that typer builds ``--provider`` without
# importing the schema module (tests/test_cli_startup.py checks they agree)
Provider = Literal["openai-responses", "openai-chat", "anthropic"]

app = typer.Typer(help="Check, list and show tool definitions.", no_args_is_help=True)

CategoryOption = Annotated[
    list[str] | None,
    typer.Option("--category", "-c", help="A category module to bind handlers from (repeat)."),
]
DefinitionsOption = Annotated[
    Path | None,
    typer.Option("--definitions", "-d", help="A definitions.json (default: the built-in tools)."),
]


def _builtin() -> tuple[Path, list[str]]:
    from ..builtin import CATEGORY_MODULES, DEFINITIONS_PATH

    return DEFINITIONS_PATH, list(CATEGORY_MODULES)


def _categories_for(path: Path, given: list[str] | None) -> list[str]:
    if given:
        return given
    builtin_path, modules = _builtin()
    return modules if path.resolve() == builtin_path.resolve() else []


SHAPE = 'a JSON list of tool definitions, or an object with a "tools" list'


def definitions_document(path: Path) -> tuple[dict[str, Any], str]:
    """The definitions file at ``path`` as ``{"tools": [...], ...}``, and the JSON pointer
    of its list (``""`` for a bare list, ``"/tools"``): the one rule for every command
    that reads tool definitions (``tools``, ``search --catalog``). Anything else is one
    line naming the file and what is wrong where (exit 2)."""
    data = read_json(path, f"a definitions file: {SHAPE}")
    if isinstance(data, list):
        return {"tools": data}, ""
    if isinstance(data, dict) and isinstance(data.get("tools"), list):
        return data, "/tools"
    if isinstance(data, dict):
        where = f"/tools is {json_kind(data['tools'])}" if "tools" in data else 'no "tools"'
    else:
        where = f"the top level (/) is {json_kind(data)}"
    raise user_error(f"{path}: {where}; give {SHAPE}")


def _definitions(path: Path | None, categories: list[str] | None) -> list[Definition]:
    """Definitions to display; with category modules the handlers are bound and checked."""
    from ..registry import RegistryError, ToolRegistry, check_document

    path = path or _builtin()[0]
    document, _ = definitions_document(path)
    modules = _categories_for(path, categories)
    if modules:
        return list(ToolRegistry.from_document(document, modules, source=str(path)).definitions)
    definitions, problems = check_document(document)
    if problems:
        raise RegistryError(str(path), problems)
    return definitions


def _shorten(problem: str, limit: int = 300) -> str:
    problem = " ".join(problem.split())
    return problem if len(problem) <= limit else problem[: limit - 1] + "…"


def _fail(console: Console, exc: RegistryError) -> None:
    """A file whose definitions cannot be used by a command that is not ``check``: one line."""
    raise user_error(
        f"{exc.source}: {len(exc.problems)} problem(s) in the definitions, the first: "
        f"{_shorten(exc.problems[0], 160)}; see them all with tooldeck tools check {exc.source}"
    )


@app.command("check")
def check_command(
    path: Annotated[Path, typer.Argument(help=f"A definitions file: {SHAPE}.")],
    category: CategoryOption = None,
) -> None:
    """Check a definitions file: print every problem (exit 1), or a summary."""
    from rich.console import Console

    from ..registry import RegistryError, ToolRegistry, check_document

    console = Console()
    document, _ = definitions_document(path)
    modules = _categories_for(path, category)
    try:
        if modules:
            registry = ToolRegistry.from_document(document, modules, source=str(path))
            definitions = list(registry.definitions)
        else:
            definitions, problems = check_document(document)
            if problems:
                raise RegistryError(str(path), problems)
    except RegistryError as exc:
        console.print(f"[red]{exc.source}: {len(exc.problems)} problem(s)[/red]", highlight=False)
        for problem in exc.problems:
            console.print(f"  - {_shorten(problem)}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None
    by_category: dict[str, int] = {}
    for d in definitions:
        by_category[d.category] = by_category.get(d.category, 0) + 1
    summary = ", ".join(f"{c}: {n}" for c, n in by_category.items())
    console.print(f"[green]ok[/green] {path}: {len(definitions)} tools ({summary})")
    if not modules:
        console.print("handlers not checked: pass --category MODULE to bind and check them")


def _flags(d: Definition) -> dict[str, Any]:
    raw = d.raw
    read_only = bool(raw.get("read_only", False))
    return {
        "tier": raw.get("tier") or ("STANDARD" if read_only else "WRITE"),
        "mode": raw.get("execution_mode") or ("parallel" if read_only else "sequential"),
        "read_only": read_only,
        "deferred": bool(raw.get("defer_loading", False)),
    }


@app.command("list")
def list_command(definitions: DefinitionsOption = None, category: CategoryOption = None) -> None:
    """List tools: name, category, tier, mode, read-only, deferred."""
    from rich.console import Console
    from rich.table import Table

    from ..registry import RegistryError

    console = Console()
    try:
        found = _definitions(definitions, category)
    except RegistryError as exc:
        _fail(console, exc)
        return
    table = Table(title=str(definitions or "built-in tools"))
    for column in ("name", "category", "tier", "mode", "read-only", "deferred"):
        table.add_column(column)
    for d in found:
        f = _flags(d)
        table.add_row(
            d.name,
            d.category,
            f["tier"],
            f["mode"],
            "yes" if f["read_only"] else "no",
            "yes" if f["deferred"] else "no",
        )
    console.print(table)


@app.command("show")
def show_command(
    name: str,
    provider: Annotated[
        Provider, typer.Option("--provider", "-p", help="The provider whose schema to show.")
    ] = "openai-responses",
    definitions: DefinitionsOption = None,
    category: CategoryOption = None,
) -> None:
    """Print the schema a provider is sent for one tool, with the strict decision."""
    from rich.console import Console

    from ..registry import RegistryError, unbound_tool
    from ..schema import project

    console = Console()
    try:
        found = {d.name: d for d in _definitions(definitions, category)}
    except RegistryError as exc:
        _fail(console, exc)
        return
    if name not in found:
        raise user_error(
            f"no tool {name!r} in {definitions or 'the built-in tools'}; one of {', '.join(found)}",
            1,
        )
    try:
        projection = project(unbound_tool(found[name]), provider)
    except SchemaError as exc:
        raise user_error(f"{name} cannot be projected for {provider}: {exc}", 1) from exc
    decision = "strict" if projection.strict else f"not strict ({projection.reason})"
    console.print(f"{name} for {provider}: {decision}", markup=False)
    for change in projection.changes:
        console.print(f"  - {change}", markup=False, highlight=False)
    console.print_json(json.dumps(projection.entry))
