"""The workflow tools of text turns (the tools of task turns are in ``task_tools``).

Text turns get ``workflow``, ``show_workflow``, ``list_workflows`` and
``cancel_workflow`` from :func:`workflow_tools_source`, a tool source that yields them only
when ``TurnContext.turn_kind == 'text'``. These tools drive a
:class:`~tooldeck.workflows.engine.WorkflowEngine`, so this module imports the engine;
the engine imports only :mod:`tooldeck.workflows.task_tools` (no circle). The task-turn
names are re-exported here for callers of earlier releases.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..assembly import TurnContext
from ..context import ToolContext
from ..result import ToolResult
from ..sources.function import FunctionSource
from ..tools import Tool
from .engine import WorkflowEngine
from .store.records import WorkflowRecord

__all__ = ["WORKFLOW_TOOL_NAMES", "format_workflow"]

WORKFLOW_TOOL_NAMES = ("workflow", "show_workflow", "list_workflows", "cancel_workflow")
_RESULT_PREVIEW = 600


# -- text turns --------------------------------------------------------------------------------


def _preview(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= _RESULT_PREVIEW else text[: _RESULT_PREVIEW - 1] + "…"


def format_workflow(wf: WorkflowRecord) -> str:
    """A workflow run as text, for the model: its state and each task's state and result."""
    done = sum(t.state == "submitted" for t in wf.tasks)
    lines = [
        f"Workflow {wf.id} ({wf.name}) is {wf.state}; {done} of {len(wf.tasks)} task(s) "
        "submitted." + (f" Reason: {wf.error}" if wf.error else "")
    ]
    for t in wf.tasks:
        head = f"- {t.name}: {t.state}, {t.attempts} of {t.max_attempts} submission(s)"
        if t.depends_on:
            head += f", after {', '.join(t.depends_on)}"
        if t.has_result:
            head += f"; result: {_preview(t.result)}"
        elif t.error:
            head += f"; {t.error}"
        lines.append(head)
    return "\n".join(lines)


class _ShowParams(BaseModel):
    workflow_id: str = Field(description="The workflow run's id (or a unique prefix of it).")


class _ListParams(BaseModel):
    state: Literal["pending", "running", "succeeded", "failed", "cancelled"] | None = Field(
        default=None, description="Only runs in this state."
    )
    limit: int = Field(default=20, ge=1, le=100, description="At most this many runs.")


class _CancelParams(BaseModel):
    workflow_id: str = Field(description="The workflow run's id (or a unique prefix of it).")
    reason: str | None = Field(default=None, description="Why it is cancelled (recorded).")


def workflow_tools(engine: WorkflowEngine) -> list[Tool]:
    """``workflow``, ``show_workflow``, ``list_workflows`` and ``cancel_workflow``."""
    catalog = engine.catalog
    tools: list[Tool] = []
    if catalog:
        listed = "\n".join(
            f"- {w.name}: {w.description or 'no description'} (tasks: "
            f"{', '.join(t.name for t in w.tasks)}; inputs: "
            f"{json.dumps(w.input_schema.get('properties', {}), ensure_ascii=False)})"
            for w in catalog.values()
        )

        async def start(params: dict[str, Any], ctx: ToolContext) -> ToolResult:
            try:
                workflow_id = await engine.start(params["name"], params.get("inputs") or {})
            except ValueError as exc:
                return ToolResult.error(str(exc))
            tasks = [t.name for t in catalog[params["name"]].tasks]
            return ToolResult(
                f"Started workflow {params['name']!r} as {workflow_id} with {len(tasks)} "
                f"task(s): {', '.join(tasks)}. It runs in the background; use show_workflow "
                "to follow it.",
                details={"workflow_id": workflow_id},
            )

        tools.append(
            Tool.from_schema(
                name="workflow",
                description=(
                    "Start a workflow by name with its inputs. Its tasks run as sub-agents "
                    "in the background, each submitting a result of a fixed shape. "
                    f"Workflows:\n{listed}"
                ),
                json_schema={
                    "type": "object",
                    "properties": {
                        "name": {
                            "type": "string",
                            "enum": list(catalog),
                            "description": "The workflow to start.",
                        },
                        "inputs": {
                            "type": "object",
                            "description": "The workflow's inputs, as its description lists.",
                        },
                    },
                    "required": ["name", "inputs"],
                    "additionalProperties": False,
                },
                execute=start,
                tier="WRITE",
                describe_activity=lambda p: f"Starting workflow {p.get('name')}",
            )
        )

    async def show(params: _ShowParams, ctx: ToolContext) -> ToolResult:
        try:
            wf = await engine.get(params.workflow_id)
        except LookupError as exc:
            return ToolResult.error(str(exc))
        return ToolResult(format_workflow(wf), details={"workflow_id": wf.id, "state": wf.state})

    async def list_runs(params: _ListParams, ctx: ToolContext) -> ToolResult:
        runs = await engine.store.list_workflows(limit=params.limit, state=params.state)
        if not runs:
            return ToolResult(
                "No workflow runs" + (f" are {params.state}." if params.state else ".")
            )
        lines = [
            f"- {w.id} {w.name}: {w.state}, {w.submitted_count}/{w.task_count} task(s) "
            f"submitted, started {w.created_at:%Y-%m-%d %H:%M:%S}"
            for w in runs
        ]
        return ToolResult("\n".join(lines), details={"ids": [w.id for w in runs]})

    async def cancel(params: _CancelParams, ctx: ToolContext) -> ToolResult:
        try:
            wf = await engine.get(params.workflow_id)
        except LookupError as exc:
            return ToolResult.error(str(exc))
        outcome = await engine.cancel(wf.id, params.reason or "cancelled by the agent")
        if not outcome.cancelled:
            return ToolResult.error(f"Workflow {wf.id} is already {outcome.state}; not cancelled.")
        return ToolResult(
            f"Cancelled workflow {wf.id}: stopped {len(outcome.running)} running task(s), "
            f"{len(outcome.pending)} pending task(s) will not run.",
            details={"running": list(outcome.running), "pending": list(outcome.pending)},
        )

    tools.append(
        Tool.from_model(
            _ShowParams,
            name="show_workflow",
            description="Show a workflow run: its state, and each task's state, attempts and "
            "result.",
            execute=show,
            read_only=True,
            describe_activity=lambda p: f"Showing workflow {p.workflow_id}",
        )
    )
    tools.append(
        Tool.from_model(
            _ListParams,
            name="list_workflows",
            description="List workflow runs, newest first.",
            execute=list_runs,
            read_only=True,
            describe_activity=lambda p: "Listing workflows",
        )
    )
    tools.append(
        Tool.from_model(
            _CancelParams,
            name="cancel_workflow",
            description="Cancel a workflow run: running tasks are stopped, pending ones never run.",
            execute=cancel,
            destructive=True,
            describe_activity=lambda p: f"Cancelling workflow {p.workflow_id}",
        )
    )
    return tools


def workflow_tools_source(engine: WorkflowEngine) -> FunctionSource:
    """A tool source: the workflow tools on text turns, nothing on any other turn."""

    cache: dict[tuple[str, ...], list[Tool]] = {}

    def create(ctx: TurnContext) -> list[Tool]:
        if ctx.turn_kind != "text":
            return []
        key = tuple(engine.catalog)  # rebuilt only when the catalog changes
        if key not in cache:
            cache.clear()
            cache[key] = workflow_tools(engine)
        return list(cache[key])

    return FunctionSource(create, "workflows")
