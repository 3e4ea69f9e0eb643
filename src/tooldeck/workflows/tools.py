"""The tools of workflow task turns, and the workflow tools of text turns.

A task turn does not go through per-turn assembly: :func:`task_toolset` builds its
fixed list, in this order:

1. the web tools, only when a web provider is bound (``TurnContext.web_provider``);
2. ``notes`` as a *read-only* recall tool (``get``, ``search``, ``list``), only when
   memory is enabled;
3. this task's ``submit_result`` (strict; its schema built from the stored result schema).

Nothing else: no workflow tools, no background jobs, no file writes. A call to any other
name is refused by the dispatcher as an unknown tool.

Text turns get ``workflow``, ``show_workflow``, ``list_workflows`` and
``cancel_workflow`` from :func:`workflow_tools_creator`, a creator that yields them only
when ``TurnContext.turn_kind == 'text'``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from ..assembly import Toolset, TurnContext
from ..context import ToolContext
from ..registry import ToolRegistry
from ..result import ToolResult
from ..tool import Tool
from .control import ControlPlane
from .shapes import ResultSchema, result_schema
from .store import TaskRecord, WorkflowRecord

if TYPE_CHECKING:
    from .engine import WorkflowEngine

__all__ = [
    "READ_ONLY_NOTE_ACTIONS",
    "SUBMIT_RESULT",
    "WORKFLOW_TOOL_NAMES",
    "format_workflow",
    "recall_notes_tool",
    "submit_result_tool",
    "task_toolset",
    "workflow_tools",
    "workflow_tools_creator",
]

SUBMIT_RESULT = "submit_result"
READ_ONLY_NOTE_ACTIONS = ("get", "search", "list")
WORKFLOW_TOOL_NAMES = ("workflow", "show_workflow", "list_workflows", "cancel_workflow")
_RESULT_PREVIEW = 600


# -- task turns -------------------------------------------------------------------------------


def submit_result_tool(
    task: TaskRecord,
    control: ControlPlane,
    *,
    schema: ResultSchema | None = None,
    check: Callable[[Any], list[str]] | None = None,
) -> Tool:
    """``submit_result`` for ``task``: strict, with the stored result schema as parameters.

    A rejected value returns an error output and the turn goes on; an accepted value (or
    a task that no longer takes results) ends the turn. The submission key is the
    session and call id, so the same call delivered twice is stored once. ``check``
    (the declared result type's problems) is passed to :meth:`ControlPlane.submit`.
    """
    checked = schema or result_schema(task.result_schema, f"task {task.name!r}")
    wrapped = " Put the result in `value`." if checked.wrapped else " The arguments are the result."

    async def execute(params: dict[str, Any], ctx: ToolContext) -> ToolResult:
        value = checked.unwrap(params)
        key = f"{ctx.session_id}:{ctx.call_id}"
        submission = await control.submit(task.id, value, submission_key=key, check=check)
        return submission.tool_result()

    return Tool.from_schema(
        name=SUBMIT_RESULT,
        description=(
            f"Submit the result of task {task.name!r}.{wrapped} The value must match this "
            "schema exactly; it is validated again before it is stored. If it is rejected, "
            "the error says what is wrong: fix the value and call again "
            f"(at most {task.max_attempts} submissions). An accepted result ends the task."
        ),
        json_schema=checked.tool_schema,
        execute=execute,
        strict=True,
        execution_mode="sequential",
        tier="STANDARD",
        describe_activity=lambda p: f"Submitting the result of {task.name}",
        describe_completed_activity=lambda p, r: (
            f"Result of {task.name} accepted"
            if isinstance(r.details, dict) and r.details.get("status") in ("stored", "duplicate")
            else None
        ),
    )


def recall_notes_tool(notes: Tool) -> Tool:
    """A read-only ``notes``: the same handler, limited to get, search and list."""
    schema = copy.deepcopy(dict(notes.schema))
    props = schema.get("properties", {})
    props.pop("text", None)
    if "action" in props:
        props["action"] = {
            **props["action"],
            "enum": list(READ_ONLY_NOTE_ACTIONS),
            "description": "What to do: 'get' a note by key, 'search' by text, 'list' recent.",
        }
    schema["required"] = [n for n in schema.get("required", []) if n in props]

    async def execute(params: dict[str, Any], ctx: ToolContext) -> ToolResult:
        if params.get("action") not in READ_ONLY_NOTE_ACTIONS:  # the schema refuses it first
            return ToolResult.error("notes is read-only in a workflow task.")
        return await notes.invoke(params, ctx)

    return Tool.from_schema(
        name=notes.name,
        description=(
            "Recall the persistent notes (read-only here): 'get' a whole note by key, "
            "'search' keys and texts for a substring, 'list' the most recently updated."
        ),
        json_schema=schema,
        execute=execute,
        read_only=True,
        tier="STANDARD",
        execution_mode="parallel",
        describe_activity=lambda p: f"Recalling notes ({p.get('action')})",
    )


def task_toolset(turn: TurnContext, submit: Tool, registry: ToolRegistry | None = None) -> Toolset:
    """The fixed tool list of a workflow task turn (see the module docstring)."""
    if turn.turn_kind != "workflow_task":
        raise ValueError("task_toolset is for turns of kind 'workflow_task'")
    if submit.name != SUBMIT_RESULT:
        raise ValueError(f"the task's submit tool must be named {SUBMIT_RESULT!r}")
    tools: list[Tool] = []
    origin: dict[str, str] = {}
    if registry is not None:
        if turn.web_provider is not None and "web" in registry.categories:
            for t in registry.creator("web")(turn):
                tools.append(t)
                origin[t.name] = "workflow_task:web"
        if turn.memory_enabled and "notes" in registry.tools:
            recall = recall_notes_tool(registry.tools["notes"])
            tools.append(recall)
            origin[recall.name] = "workflow_task:memory (read-only)"
    tools.append(submit)
    origin[submit.name] = "workflow_task:submit_result"
    return Toolset(tools, origin)


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
        Tool(
            name="show_workflow",
            description="Show a workflow run: its state, and each task's state, attempts and "
            "result.",
            params=_ShowParams,
            execute=show,
            read_only=True,
            describe_activity=lambda p: f"Showing workflow {p.workflow_id}",
        )
    )
    tools.append(
        Tool(
            name="list_workflows",
            description="List workflow runs, newest first.",
            params=_ListParams,
            execute=list_runs,
            read_only=True,
            describe_activity=lambda p: "Listing workflows",
        )
    )
    tools.append(
        Tool(
            name="cancel_workflow",
            description="Cancel a workflow run: running tasks are stopped, pending ones never run.",
            params=_CancelParams,
            execute=cancel,
            destructive=True,
            describe_activity=lambda p: f"Cancelling workflow {p.workflow_id}",
        )
    )
    return tools


def workflow_tools_creator(engine: WorkflowEngine) -> Callable[[TurnContext], Iterable[Tool]]:
    """A category creator: the workflow tools on text turns, nothing on any other turn."""

    cache: dict[tuple[str, ...], list[Tool]] = {}

    def create(ctx: TurnContext) -> list[Tool]:
        if ctx.turn_kind != "text":
            return []
        key = tuple(engine.catalog)  # rebuilt only when the catalog changes
        if key not in cache:
            cache.clear()
            cache[key] = workflow_tools(engine)
        return list(cache[key])

    create.creator_name = "workflows"  # type: ignore[attr-defined]
    return create
