"""``tooldeck demo``: an offline tour of the tool contract.

Shows a few tools projected for each provider with the strict decision and its reason,
then feeds malformed argument strings (the kind models really produce) through
``validate_arguments`` and prints which repair rungs fixed each and which were refused.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, Field
from rich.console import Console
from rich.table import Table

from ..arguments import validate_arguments
from ..context import ToolContext
from ..errors import ArgumentError, SchemaError
from ..schema import PROVIDERS, project
from ..tool import Tool, tool


class Unit(StrEnum):
    c = "c"
    f = "f"


@tool(read_only=True, describe_activity=lambda p: f"Checking the weather in {p.city}")
def get_weather(city: str, unit: Unit | None = None) -> dict[str, Any]:
    """Get the current weather for a city.

    Args:
        city: City name, e.g. "Paris".
        unit: Temperature unit; the city's usual unit when omitted.
    """
    return {"city": city, "temp": 18, "unit": (unit or Unit.c).value}


@tool(read_only=True)
def search_docs(
    query: Annotated[str, Field(min_length=2, description="What to look for.")],
    limit: Annotated[int, Field(ge=1, le=50, description="How many hits.")] = 5,
) -> list[str]:
    """Search the documentation and return matching page titles."""
    return [f"{query} #{i}" for i in range(limit)]


class Patch(BaseModel):
    path: str
    labels: dict[str, str] = Field(description="Free-form labels to set.")


def _apply_patch(params: Patch, ctx: ToolContext) -> str:
    return f"patched {params.path}"


apply_patch = Tool(
    name="apply_patch",
    description="Set labels on a file.",
    params=Patch,
    execute=_apply_patch,
    destructive=True,
)

run_query = Tool.from_schema(
    name="run_query",
    description="Run a read-only SQL query against the reporting database.",
    json_schema={
        "type": "object",
        "properties": {
            "sql": {"type": "string", "pattern": "^(?i)select\\b"},
            "max_rows": {"type": "integer", "minimum": 1, "maximum": 1000},
        },
        "required": ["sql"],
        "additionalProperties": False,
    },
    execute=lambda params, ctx: {"rows": []},
    read_only=True,
)

DEMO_TOOLS = [get_weather, search_docs, apply_patch, run_query]

MALFORMED: list[tuple[str, str]] = [
    ("valid", '{"city": "Paris", "unit": "c"}'),
    ("code fence", '```json\n{"city": "Paris"}\n```'),
    ("prose around", 'Sure, here are the arguments: {"city": "Oslo"} Hope that helps!'),
    ("trailing comma", '{"city": "Rome", "unit": "f",}'),
    ("surplus closer", '{"city": "Lima"}}'),
    ("missing closer", '{"city": "Kyiv", "unit": "c"'),
    ("python literal", "{'city': 'Bern', 'unit': None}"),
    ("encoded twice", json.dumps(json.dumps({"city": "Cairo"}))),
    ("strict null", '{"city": "Quito", "unit": null}'),
    ("cut in a string", '{"city": "San Fran'),
    ("cut after comma", '{"city": "Nice",'),
    ("wrong type", '{"city": 42, "unit": "kelvin"}'),
    ("not an object", '["Paris"]'),
]


def _projection_table(console: Console) -> None:
    table = Table(title="Tools as each provider sees them", show_lines=True)
    table.add_column("tool")
    table.add_column("provider")
    table.add_column("strict")
    table.add_column("why / what changed", overflow="fold")
    for t in DEMO_TOOLS:
        for provider in PROVIDERS:
            try:
                p = project(t, provider)
            except SchemaError as exc:  # pragma: no cover - demo tools are all projectable
                table.add_row(t.name, provider, "[red]error", str(exc))
                continue
            note = p.reason or "; ".join(c for c in p.changes if "dropped" not in c) or "as is"
            mark = "[green]yes" if p.strict else "[yellow]no"
            table.add_row(t.name, provider, mark, note)
    console.print(table)
    entry = project(get_weather, "openai-responses").entry
    console.print("[bold]get_weather for OpenAI Responses (strict):[/bold]")
    console.print_json(json.dumps(entry))


def _validation_table(console: Console) -> None:
    table = Table(title="Malformed arguments for get_weather", show_lines=True)
    table.add_column("case")
    table.add_column("raw arguments", overflow="fold")
    table.add_column("outcome", overflow="fold")
    for label, raw in MALFORMED:
        try:
            result = validate_arguments(get_weather, raw)
        except ArgumentError as exc:
            table.add_row(label, raw, f"[red]refused[/red]: {exc.model_message}")
            continue
        params = result.params.model_dump(mode="json")
        rungs = ", ".join(result.repairs) or "none"
        table.add_row(label, raw, f"[green]ok[/green] {json.dumps(params)}  repairs: {rungs}")
    console.print(table)


def demo_command() -> None:
    console = Console()
    console.rule("[bold]tooldeck demo[/bold] (offline, no API keys)")
    _projection_table(console)
    _validation_table(console)
