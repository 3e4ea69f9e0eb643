"""The fixed tools of a workflow task turn: ``submit_result``, read-only ``notes``, web.

A task turn does not go through per-turn assembly: :func:`task_toolset` builds its
fixed list, in this order:

1. the web tools, only when a web provider is bound (``TurnContext.web_provider``);
2. ``notes`` as a *read-only* recall tool (``get``, ``search``, ``list``), only when
   memory is enabled;
3. this task's ``submit_result`` (strict; its schema built from the stored result schema).

Nothing else: no workflow tools, no background jobs, no schedules, no file writes. A call
to any other name is refused by the dispatcher as an unknown tool.

This module sits below the engine (which builds every task turn from it); the workflow
tools of *text* turns (:mod:`tooldeck.workflows.tools`) sit above the engine, which they
drive. Keeping the two apart is what keeps the engine and the tools out of an import
circle.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from typing import Any

from ..assembly import Toolset, TurnContext
from ..context import ToolContext
from ..registry import ToolRegistry
from ..result import ToolResult
from ..tools import Tool
from .control import ControlPlane
from .shapes import ResultSchema, result_schema
from .store.protocol import StoreUnavailable
from .store.records import TaskRecord

__all__ = ["READ_ONLY_NOTE_ACTIONS"]

SUBMIT_RESULT = "submit_result"
READ_ONLY_NOTE_ACTIONS = ("get", "search", "list")


def submit_result_tool(
    task: TaskRecord,
    control: ControlPlane,
    *,
    schema: ResultSchema | None = None,
    check: Callable[[Any], list[str]] | None = None,
    unavailable: Callable[[StoreUnavailable], ToolResult] | None = None,
) -> Tool:
    """``submit_result`` for ``task``: strict, with the stored result schema as parameters.

    A rejected value returns an error output and the turn goes on; an accepted value (or
    a task that no longer takes results) ends the turn. The submission key is the
    session and call id, so the same call delivered twice is stored once. ``check``
    (the declared result type's problems) is passed to :meth:`ControlPlane.submit`.
    ``unavailable``: what a submission the store could not take (the database away for
    longer than the store retries) returns instead of raising; the engine ends the turn
    there and fails the turn (run again), so the model never handles a database fault.
    """
    checked = schema or result_schema(task.result_schema, f"task {task.name!r}")
    wrapped = " Put the result in `value`." if checked.wrapped else " The arguments are the result."

    async def execute(params: dict[str, Any], ctx: ToolContext) -> ToolResult:
        value = checked.unwrap(params)
        key = f"{ctx.session_id}:{ctx.call_id}"
        try:
            submission = await control.submit(
                task.id, value, submission_key=key, check=check, task=task
            )
        except StoreUnavailable as exc:
            if unavailable is None:
                raise
            return unavailable(exc)
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


@functools.lru_cache(maxsize=64)
def recall_notes_tool(notes: Tool) -> Tool:
    """A read-only ``notes``: the same handler, limited to get, search and list.

    Made once per ``notes`` tool (every task turn of a process uses the same one; a tool
    hashes and compares by identity)."""
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
            for t in registry.category("web").tools_for(turn):
                tools.append(t)
                origin[t.name] = "workflow_task:web"
        if turn.memory_enabled and "notes" in registry.tools:
            recall = recall_notes_tool(registry.tools["notes"])
            tools.append(recall)
            origin[recall.name] = "workflow_task:memory (read-only)"
    tools.append(submit)
    origin[submit.name] = "workflow_task:submit_result"
    return Toolset(tools, origin)
