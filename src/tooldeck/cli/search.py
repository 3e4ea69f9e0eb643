"""``tooldeck search``: rank a catalog of tool definitions for a free-text query."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from .report import json_kind, user_error
from .tools import SHAPE, definitions_document

if TYPE_CHECKING:  # imported in the command, so that ``--help`` loads no index
    from ..search import ToolDoc

CatalogOption = Annotated[
    Path | None,
    typer.Option(
        "--catalog",
        "-c",
        help=(
            f"A definitions file: {SHAPE} (name, description, input_schema, optional "
            "namespace and namespace_description). Default: the built-in tools."
        ),
    ),
]


def search_command(
    query: Annotated[str, typer.Argument(help="What you need, in a few words, or a tool name.")],
    catalog: CatalogOption = None,
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=1, max=100, help="How many hits to show.")
    ] = 5,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the hits as JSON instead of a table.")
    ] = False,
    explain: Annotated[
        bool, typer.Option("--explain", help="Show which query terms each hit matched.")
    ] = False,
    semantic: Annotated[
        bool | None,
        typer.Option(
            "--semantic/--no-semantic",
            help="Also rank by meaning (needs the 'semantic' extra); default: when installed.",
        ),
    ] = None,
) -> None:
    """Search a tool catalog: print the best-matching tools with their scores.

    Exits 1 when nothing matches (like grep), 2 when the catalog cannot be read.
    """
    from ..search import ToolDoc, ToolIndex

    console = Console()
    if catalog is None:
        from ..builtin import DEFINITIONS_PATH

        catalog = DEFINITIONS_PATH
    document, pointer = definitions_document(catalog)
    docs: list[ToolDoc] = []
    for i, item in enumerate(document["tools"]):
        if not isinstance(item, dict):
            raise user_error(
                f"{catalog}: {pointer}/{i} is {json_kind(item)}; each tool definition is an object"
            )
        try:
            docs.append(ToolDoc.from_definition(item))
        except ValueError as exc:
            raise user_error(f"{catalog}: {pointer}/{i}: {exc}") from exc
    started = time.perf_counter()
    try:
        index = ToolIndex(docs, semantic="auto" if semantic is None else semantic)
    except ValueError as exc:
        raise user_error(f"{catalog}: {exc}") from exc
    built = time.perf_counter()
    hits = index.search(query, limit)
    searched = time.perf_counter()

    if as_json:
        payload = [
            {
                "rank": rank,
                "name": hit.name,
                "score": hit.score,
                "namespace": index.doc(hit.name).namespace,
                "summary": index.summary(hit.name),
                **({"matched": dict(index.explain(query, hit.name))} if explain else {}),
            }
            for rank, hit in enumerate(hits, 1)
        ]
        typer.echo(json.dumps(payload, indent=2, ensure_ascii=False))
    elif hits:
        table = Table(
            title=f"{query!r}: {len(hits)} of {len(index)} tools",
            caption=(
                f"{catalog.name}: index built in {(built - started) * 1000:.0f} ms, "
                f"query took {(searched - built) * 1000:.2f} ms"
            ),
        )
        table.add_column("#", justify="right")
        table.add_column("tool", overflow="fold", min_width=12)
        table.add_column("score", justify="right")
        table.add_column("description")
        if explain:
            table.add_column("matched")
        for rank, hit in enumerate(hits, 1):
            row = [str(rank), hit.name, f"{hit.score:.3f}", index.summary(hit.name)]
            if explain:
                row.append(", ".join(f"{t} {v:.2f}" for t, v in index.explain(query, hit.name)))
            table.add_row(*row)
        console.print(table)
    else:
        console.print(f"no tools in {catalog.name} match {query!r}", highlight=False)
    if not hits:
        raise typer.Exit(1)
