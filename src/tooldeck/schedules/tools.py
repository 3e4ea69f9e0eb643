"""The schedule tools of text turns: ``create_schedule``, ``list_schedules``,
``cancel_schedule``, and their tool source.

The source exists only when a scheduler is configured (it is made from a
:class:`~tooldeck.schedules.ScheduleBook`), and yields the tools only on text turns: a
workflow task turn never gets them (the dispatcher answers "unknown tool"). A scheduled
run is a headless job, so it cannot create schedules either (its tools never include
these, and ``create_schedule`` is WRITE, which headless denies).

``create_schedule`` is WRITE: a human approves it, and the approval shows what will run,
when (the next three run times in the schedule's zone) and what happens to missed runs
(:meth:`CreateScheduleTool.describe_approval`). The schedule records whose it is: the
calling session's id, its policy and its tools (:func:`tooldeck.jobs.policy.record_creator`);
every run is a job under that policy, headless, with at most those tools. A session whose
policy cannot be written down (a plain function) gets an error and no schedule.

``list_schedules`` and ``cancel_schedule`` see only the calling session's schedules (an
id prefix is looked up among them alone), as the job tools see only its jobs.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..assembly import Toolset, TurnContext
from ..context import ToolContext
from ..jobs.policy import record_creator
from ..jobs.tools import NOT_FOR_JOBS
from ..result import ToolResult
from ..sources.function import FunctionSource
from ..tools import Tool
from .scheduler import ScheduleBook, ScheduleError, parse_timing
from .store import ScheduleRecord


def _times(times: Sequence[datetime]) -> list[str]:
    return [t.isoformat(timespec="seconds") for t in times]


def format_schedule(s: ScheduleRecord, now: datetime | None = None) -> str:
    nxt = s.next_times(3, now) if s.state == "active" else []
    lines = [
        f"Schedule {s.id} ({s.name}) is {s.state}: {s.describe_action()}, "
        f"{s.timing.describe()}, missed runs: {s.missed}"
        + (f" (at most {s.catch_up_limit})" if s.missed == "catch_up" else "")
        + f"; fired {s.fired}, skipped {s.skipped}."
    ]
    if nxt:
        lines.append("Next runs: " + ", ".join(_times(nxt)))
    return "\n".join(lines)


class _CreateParams(BaseModel):
    name: str = Field(min_length=1, max_length=100, description="A short name for it.")
    prompt: str | None = Field(
        default=None,
        description="What to do at each run: a prompt for a new (headless) turn whose result "
        "is reported to this session. Give this or workflow.",
    )
    workflow: str | None = Field(default=None, description="A workflow to start at each run.")
    inputs_json: str | None = Field(
        default=None, description="The workflow's inputs, as a JSON object in a string."
    )
    cron: str | None = Field(
        default=None, description="When, as cron: minute hour day month weekday ('0 8 * * 1-5')."
    )
    every_seconds: float | None = Field(
        default=None, ge=1, le=31_622_400, description="When, as an interval in seconds."
    )
    at: str | None = Field(
        default=None, description="When, once: an ISO date and time ('2026-03-29T08:00')."
    )
    time_zone: str = Field(default="UTC", description="IANA time zone, e.g. 'Europe/Berlin'.")
    missed: Literal["skip", "once", "catch_up"] = Field(
        default="skip",
        description="Runs missed while nothing ran: skip them, run once for all, or catch "
        "up (at most catch_up_limit).",
    )
    catch_up_limit: int = Field(default=10, ge=1, le=1000)


class _CancelParams(BaseModel):
    schedule_id: str = Field(description="The schedule's id (or a unique prefix of it).")


class _ListParams(BaseModel):
    state: Literal["active", "cancelled", "finished"] | None = Field(default=None)
    limit: int = Field(default=20, ge=1, le=100)


class CreateScheduleTool(Tool):
    """``create_schedule``; its approval display shows the next three run times."""

    book: ScheduleBook
    workflows: Sequence[str] | None

    def plan(self, params: Any) -> tuple[dict[str, Any], Any]:
        action = self.book.action(
            prompt=params.prompt,
            workflow=params.workflow,
            inputs=params.inputs_json,
            workflows=self.workflows,
        )
        timing = parse_timing(
            cron=params.cron,
            every_seconds=params.every_seconds,
            at=params.at,
            tz=params.time_zone,
            now=self.book.clock(),
        )
        return action, timing

    def describe_approval(self, params: Any) -> dict[str, Any]:
        try:
            action, timing = self.plan(params)
        except ScheduleError as exc:
            return {"name": params.name, "invalid": str(exc)}
        what = (
            f"prompt: {action['prompt']}"
            if action["kind"] == "prompt"
            else f"workflow {action['workflow']} with inputs {action['inputs']}"
        )
        return {
            "name": params.name,
            "runs": what,
            "when": timing.describe(),
            "time_zone": timing.tz,
            "next_runs": _times(timing.next_times(self.book.clock(), 3)),
            "missed_runs": params.missed
            + (f" (at most {params.catch_up_limit})" if params.missed == "catch_up" else ""),
        }


def schedule_tools(book: ScheduleBook, *, workflows: Sequence[str] | None = None) -> list[Tool]:
    """The three schedule tools on ``book`` (``workflows``: the names that may be scheduled)."""

    async def create(params: _CreateParams, ctx: ToolContext) -> ToolResult:
        session_id = ctx.session_id or "session"
        if ctx.protection is None:
            return ToolResult.error(
                "create_schedule can only run through tooldeck's dispatcher (a Session), "
                "which tells it the calling session's policy; no schedule was made."
            )
        toolset = ctx.toolset if isinstance(ctx.toolset, Toolset) else Toolset()
        names = [n for n in toolset.names if n not in NOT_FOR_JOBS]
        creator = record_creator(ctx.protection.policy, session_id, names)
        if creator.get("refused"):
            return ToolResult.error(
                f"No schedule was made: its runs must keep this session's policy, and "
                f"{creator['refused']}."
            )
        turn = ctx.turn if isinstance(ctx.turn, TurnContext) else None
        try:
            action, timing = tool.plan(params)
            if turn is not None:
                action["home"] = str(turn.home)  # its runs work (and are judged) there
            made = await book.create(
                name=params.name,
                session_id=session_id,
                action=action,
                timing=timing,
                missed=params.missed,
                catch_up_limit=params.catch_up_limit,
                created_by=ctx.session_id or None,
                creator=creator,
            )
        except ScheduleError as exc:
            return ToolResult.error(str(exc))
        return ToolResult(
            "Created. " + format_schedule(made, book.clock()),
            details={"schedule_id": made.id, "next_runs": _times(made.next_times(3))},
        )

    async def list_all(params: _ListParams, ctx: ToolContext) -> ToolResult:
        found = await book.table.list(
            state=params.state, session_id=ctx.session_id or "session", limit=params.limit
        )
        if not found:
            return ToolResult("No schedules" + (f" are {params.state}." if params.state else "."))
        return ToolResult(
            "\n".join(format_schedule(s, book.clock()) for s in found),
            details={"ids": [s.id for s in found]},
        )

    async def cancel(params: _CancelParams, ctx: ToolContext) -> ToolResult:
        try:
            found, changed = await book.cancel(params.schedule_id, ctx.session_id or "session")
        except LookupError as exc:
            return ToolResult.error(str(exc))
        if not changed:
            return ToolResult.error(f"Schedule {found.id} is {found.state}; nothing to cancel.")
        return ToolResult(f"Cancelled schedule {found.id} ({found.name}); it will not run again.")

    tool = CreateScheduleTool.from_model(
        _CreateParams,
        name="create_schedule",
        description=(
            "Schedule work: a prompt run as a new headless turn (its result is reported to "
            "this session), or a workflow, on a cron expression, an interval or once, in an "
            "IANA time zone. A human approves it, seeing the next run times."
        ),
        execute=create,
        tier="WRITE",
        execution_mode="sequential",
        describe_activity=lambda p: f"Scheduling {p.name}",
    )
    tool.book = book
    tool.workflows = tuple(workflows) if workflows is not None else None
    return [
        tool,
        Tool.from_model(
            _ListParams,
            name="list_schedules",
            description="List this session's schedules with their next run times.",
            execute=list_all,
            read_only=True,
            describe_activity=lambda p: "Listing schedules",
        ),
        Tool.from_model(
            _CancelParams,
            name="cancel_schedule",
            description="Cancel a schedule: it never runs again (runs already started go on).",
            execute=cancel,
            destructive=True,
            describe_activity=lambda p: f"Cancelling schedule {p.schedule_id}",
        ),
    ]


def schedule_tools_source(
    book: ScheduleBook, *, workflows: Sequence[str] | None = None
) -> FunctionSource:
    """A tool source: the schedule tools on text turns, nothing on any other turn."""
    tools = schedule_tools(book, workflows=workflows)

    def create(ctx: TurnContext) -> list[Tool]:
        return list(tools) if ctx.turn_kind == "text" else []

    return FunctionSource(create, "schedules")
