"""What ``tooldeck demo`` runs (:mod:`tooldeck.cli.demo`): the demo tools, the offline
tour and the live turn. Imported only when the demo runs, not for its ``--help``."""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, Field
from rich.console import Console
from rich.table import Table

from ..arguments import validate_arguments
from ..assembly import Toolset, TurnContext, assemble
from ..builtin import load_builtin_registry
from ..context import ToolContext
from ..errors import ArgumentError, SchemaError
from ..loop import RunResult, Session
from ..model import Model, ModelRequest
from ..plan import ToolPlanner
from ..providers import model_from_string
from ..providers.scripted import ScriptedModel, call, reply
from ..result import ToolResult
from ..schema import PROVIDERS, project
from ..telemetry.timeline import Timeline, TimelineRecorder, render
from ..tools import Tool, tool
from ..transcript import AssistantMessage, ToolOutput
from ..workflows.demo import run_demo_workflow
from .demo_gateway import gateway_tour
from .progress import TurnProgress
from .report import existing_file


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


apply_patch = Tool.from_model(
    Patch,
    name="apply_patch",
    description="Set labels on a file.",
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


def _toolset_table(console: Console, toolset: Toolset) -> None:
    table = Table(title="This turn's assembled toolset (no web provider bound: no web_fetch)")
    for column in ("tool", "from", "tier", "mode"):
        table.add_column(column)
    for t in toolset.tools:
        table.add_row(t.name, toolset.origin(t.name) or "", t.tier, t.execution_mode)
    console.print(table)


def _demo_script(request: ModelRequest) -> AssistantMessage:
    """What the scripted model says at each step, computed from the transcript so far."""
    outputs = [i for i in request.transcript if isinstance(i, ToolOutput)]
    step = sum(1 for i in request.transcript if isinstance(i, AssistantMessage))
    if step == 0:
        return reply(
            "I'll look at the notes and the data first.",
            call("read_document", {"path": "notes.md"}, call_id="call_read_notes"),
            call("grep_files", {"pattern": "TODO", "path": "."}, call_id="call_grep"),
            # a malformed call, as models do produce: a trailing comma
            call("list_files", '{"path": ".", "depth": 1,}', call_id="call_list"),
            # a tool that does not exist
            call("summarize_repo", {"path": "."}, call_id="call_unknown"),
        )
    if step == 1:
        todos = next((o.text for o in outputs if o.call_id == "call_grep"), "")
        lines = [line for line in todos.splitlines() if "TODO" in line]
        summary = "# Summary\n\nOpen items found by grep:\n" + "\n".join(
            f"- {line.strip()}" for line in lines
        )
        return reply(
            "Writing the summary, then reading it back.",
            call(
                "write_file",
                {"path": "summary.md", "content": summary + "\n"},
                call_id="call_write",
            ),
            call("read_document", {"path": "summary.md"}, call_id="call_read_back"),
        )
    wrote = next((o for o in outputs if o.call_id == "call_write"), None)
    done = "written" if wrote is not None and not wrote.is_error else "not written"
    return reply(f"Done: summary.md is {done}; {len(outputs)} tool outputs recorded.")


SEED = {
    "notes.md": "# Project notes\n\nTODO: ship the dispatcher\nTODO: write the docs\n"
    "Done: the registry\n",
    "data/values.csv": "name,value\nalpha,1\nbeta,2\n",
}


async def _agent_turn(
    console: Console, home: Path, mcp: Any = None, timelines: list[Timeline] | None = None
) -> RunResult:
    for name, text in SEED.items():
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(text)
    registry = load_builtin_registry()
    turn = TurnContext(session_id="demo", home=home)
    sources = [*registry.by_category(), *([mcp] if mcp is not None else [])]
    if mcp is not None:
        await mcp.refresh()
    toolset = assemble(turn, sources)
    _toolset_table(console, toolset)
    session = Session(ScriptedModel(_demo_script), toolset, session_id="demo", turn=turn)
    console.rule("A full agent turn (ScriptedModel: a script, not a real model)")
    progress = TurnProgress(console).attach(session.events)
    recorder = TimelineRecorder().attach(session.events)
    with progress:
        result = await session.run("Summarise the open items in my notes.")
    if timelines is not None:
        timelines.append(recorder.timeline())
    table = Table(title="Recorded outputs, one per call, in the model's order", show_lines=True)
    for column in ("call", "tool", "outcome"):
        table.add_column(column, overflow="fold")
    for output in result.tool_outputs:
        text = output.text if len(output.text) < 160 else output.text[:157] + "..."
        mark = "[red]error[/red]" if output.is_error else "[green]ok[/green]"
        repaired = f" (repaired: {', '.join(output.repairs)})" if output.repairs else ""
        table.add_row(output.call_id, output.name, f"{mark}{repaired}: {text}")
    console.print(table)
    console.print(f"[bold]final answer:[/bold] {result.output}")
    return result


LIVE_PROMPT = (
    "Read notes.md, list the open TODO items with grep_files, and write them as a bulleted "
    "list to summary.md. Then answer with one sentence."
)


async def _live_turn(console: Console, home: Path, spec: str, model: Model) -> RunResult:
    """The same turn against a real provider (``model`` is built from ``spec`` already)."""
    for name, text in SEED.items():
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(text)
    turn = TurnContext(session_id="demo-live", home=home)
    toolset = load_builtin_registry().toolset(turn)
    session = Session(
        model, toolset, session_id="demo-live", turn=turn, max_steps=8, owns_model=True
    )
    console.rule(f"A live agent turn with {spec}")
    recorder = TimelineRecorder().attach(session.events)
    async with session:
        with TurnProgress(console).attach(session.events):  # text shows as it streams
            result = await session.stream(LIVE_PROMPT).wait()
    console.print(render(recorder.timeline()))
    console.print(f"[bold]final answer:[/bold] {result.output}")
    console.print(
        f"stop reason: {result.stop_reason.value} ({result.reason}); "
        f"{result.usage.total_tokens} tokens over {result.steps} step(s)"
    )
    return result


DEMO_CATALOG = Path(__file__).resolve().parent.parent / "data" / "demo_catalog.json"


def _catalog_only(params: Any, ctx: ToolContext) -> ToolResult:
    return ToolResult.error("This tool is from the demo catalog: it is shown, never run.")


def _token_saving(console: Console) -> None:
    """What deferred loading saves on a catalog of a few hundred real tool definitions."""
    data = json.loads(DEMO_CATALOG.read_text())
    tools = [
        Tool.from_schema(
            name=t["name"],
            description=t["description"],
            json_schema=t["input_schema"],
            execute=_catalog_only,
            read_only=True,
        )
        for t in data["tools"]
    ]
    home = Path(tempfile.gettempdir())
    builtin = load_builtin_registry().toolset(TurnContext(session_id="plan", home=home))
    toolset = Toolset([*builtin.tools, *tools])
    table = Table(
        title=f"Deferred loading: {len(toolset)} tools (10 built-in + "
        f"{len(tools)} real definitions from MCP servers and public APIs)"
    )
    for column in ("model", "search", "definitions in context", "whole plan", "saved"):
        table.add_column(column)

    class _Named:  # only its name is read: which provider, which model
        def __init__(self, name: str) -> None:
            self.name = name

    for label in (
        "openai-chat:gpt-4.1",
        "openai-responses:gpt-5.4",
        "anthropic-messages:claude-sonnet-4-6",
    ):
        plan = ToolPlanner(toolset, model=_Named(label))(None)
        now, whole = plan.tokens()
        table.add_row(
            label, plan.search, f"{now:,} tokens", f"{whole:,} tokens", f"{1 - now / whole:.0%}"
        )
    console.print(table)


WHAT = (
    "tooldeck is the tool runtime for LLM agents: a library (a tool defined once for every "
    "provider, the model's arguments validated and repaired, one dispatcher with policy and "
    "approvals) and an MCP gateway, tooldeck serve (tool search, the policy, approvals and an "
    "audit log in front of any MCP client's servers)."
)


def run_demo(model: str | None, mcp: Path | None, keep: bool) -> None:
    """The offline tour, or with ``model`` one live turn (see :mod:`tooldeck.cli.demo`)."""
    console = Console()
    if mcp is not None:
        existing_file(mcp, 'an MCP config file ({"mcpServers": {...}})')
    # a bad spec or a missing key: one line, before anything is printed
    live = model_from_string(model) if model is not None else None
    console.print(WHAT, highlight=False)
    _export_telemetry(console)
    if model is not None and live is not None:
        with _demo_home(keep) as home:
            asyncio.run(_live_turn(console, Path(home), model, live))
        if keep:
            console.print(f"The demo's folder is kept: {home}", highlight=False, soft_wrap=True)
        return
    console.rule("[bold]tooldeck demo[/bold] (offline, no API keys)")
    _projection_table(console)
    _validation_table(console)
    _token_saving(console)
    timelines: list[Timeline] = []
    with _demo_home(keep) as home:
        if mcp is not None:
            from ..mcp import McpSource  # the MCP SDK loads only when a config is given

            with McpSource.from_file(mcp) as source:
                asyncio.run(_agent_turn(console, Path(home), source, timelines))
                for status in source.status():
                    console.print(f"MCP server {status.name}: {status.state}", markup=False)
        else:
            asyncio.run(_agent_turn(console, Path(home), timelines=timelines))
        asyncio.run(run_demo_workflow(console, Path(home), kept=keep))
        console.rule("The MCP gateway: tooldeck serve, and a scripted MCP client")
        gateway_tour(console, Path(home) / "gateway-demo")
    console.rule("The agent turn as a timeline (tooldeck timeline FILE shows a saved one)")
    for timeline in timelines:
        console.print(render(timeline))
    if keep:
        console.print(f"The demo's folder is kept: {home}", highlight=False, soft_wrap=True)


@contextmanager
def _demo_home(keep: bool) -> Iterator[str]:
    """A fresh folder for the demo: removed at the end, unless ``keep``."""
    if keep:
        yield tempfile.mkdtemp(prefix="tooldeck-demo-")
        return
    with tempfile.TemporaryDirectory(prefix="tooldeck-demo-") as home:
        yield home


def _export_telemetry(console: Console) -> None:
    """Traces and metrics over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT says where."""
    from ..errors import MissingExtra
    from ..telemetry import setup_from_env

    try:
        if setup_from_env("tooldeck-demo"):
            console.print("exporting traces and metrics over OTLP", style="dim")
    except MissingExtra as exc:  # no otel extra
        console.print(f"no telemetry export: {exc}", style="dim")
