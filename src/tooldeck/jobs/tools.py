"""The background job tools of text turns: ``start_job``, ``job_status``, ``list_jobs``,
``cancel_job``, and their tool source.

The source (:func:`job_tools_source`) yields the tools only on a turn that can create
jobs (``TurnContext.can_create_jobs``) and is a text turn; a workflow task turn never
gets them (its tool list is fixed, and the dispatcher answers "unknown tool"), nor does a
job's own turn (``can_create_jobs=False``): a job cannot start jobs.

``start_job`` is WRITE (like ``delegate_task``): starting work that goes on unwatched is
approved by the human of the session, whose policy then applies to every call of the job,
headless. The job gets the calling turn's tools, limited to its agent's toolkit when an
agent is named, without control tools (delegation, workflows, jobs, schedules).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..agents.delegation import CONTROL_TOOLS
from ..agents.toolkits import AgentDefinition, ToolkitManifest, resolve_agent_tools
from ..assembly import Toolset, TurnContext
from ..context import ToolContext
from ..model import Model
from ..result import ToolResult
from ..sources.function import FunctionSource
from ..tools import Tool
from .policy import record_creator
from .runner import JobManager, LiveJob
from .store import JobRecord, NewJob

JOB_TOOL_NAMES = ("start_job", "job_status", "list_jobs", "cancel_job")
SCHEDULE_TOOL_NAMES = ("create_schedule", "list_schedules", "cancel_schedule")
NOT_FOR_JOBS = frozenset({*CONTROL_TOOLS, *JOB_TOOL_NAMES, *SCHEDULE_TOOL_NAMES})
"""Tools a job never gets, whatever its agent's toolkit says."""


def format_job(job: JobRecord, *, full: bool = False) -> str:
    """A job as text, for the model."""
    head = f"Job {job.id}" + (f" ({job.agent})" if job.agent else "") + f" is {job.state}"
    head += f", attempt {job.attempts} of {job.max_attempts}, {job.steps} step(s)."
    lines = [head, f"Task: {job.task}"]
    if job.state == "running" and job.progress:
        lines.append(f"Now: {job.progress}")
    if job.cancel_requested and not job.terminal:
        lines.append("Cancellation requested; it stops at its next step.")
    if job.error:
        lines.append(f"Note: {job.error}")
    if job.terminal:
        output = job.result.get("output") if isinstance(job.result, dict) else None
        if full and isinstance(output, str) and output:
            lines.append("Result:\n" + output)
        elif job.summary:
            lines.append(f"Summary: {job.summary}")
        if job.result_ref:
            lines.append(f"Recall reference: {job.result_ref}")
    return "\n".join(lines)


class _StartParams(BaseModel):
    task: str = Field(
        min_length=1,
        description="What the job should do, with all the context it needs: it runs on its "
        "own, without this conversation.",
    )
    agent: str | None = Field(
        default=None, description="The agent definition to run it as (default: a general job)."
    )
    toolkit: str | None = Field(
        default=None, description="Limit the job to this toolkit's tools (default: yours)."
    )
    max_steps: int | None = Field(default=None, ge=1, le=200, description="Step budget.")
    time_budget_seconds: int | None = Field(
        default=None, ge=1, le=86_400, description="Time budget in seconds."
    )


class _IdParams(BaseModel):
    job_id: str = Field(description="The job's id (or a unique prefix of it).")


class _ListParams(BaseModel):
    state: Literal["pending", "running", "succeeded", "failed", "cancelled", "lost"] | None = Field(
        default=None, description="Only jobs in this state."
    )
    limit: int = Field(default=20, ge=1, le=100, description="At most this many jobs.")


class _CancelParams(BaseModel):
    job_id: str = Field(description="The job's id (or a unique prefix of it).")
    reason: str | None = Field(default=None, description="Why it is cancelled (recorded).")


def job_tools(
    manager: JobManager,
    *,
    model_for: Callable[[AgentDefinition | None], Model],
    agents: Mapping[str, AgentDefinition] | None = None,
    manifest: ToolkitManifest | None = None,
    max_steps: int = 20,
    time_budget: float = 900.0,
) -> list[Tool]:
    """The four job tools on ``manager``; jobs run ``model_for(agent)`` models."""
    agents = dict(agents or {})
    catalog = "\n".join(f"- {a.name}: {a.description}" for a in agents.values())

    async def start(params: _StartParams, ctx: ToolContext) -> ToolResult:
        agent = agents.get(params.agent) if params.agent else None
        if params.agent and agent is None:
            return ToolResult.error(
                f"Unknown agent {params.agent!r}. Agents: {', '.join(agents) or '(none)'}."
            )
        protection = ctx.protection
        if protection is None:
            return ToolResult.error(
                "start_job can only run through tooldeck's dispatcher (a Session), which "
                "tells it the calling session's policy; no job was started."
            )
        parent: Toolset = ctx.toolset if isinstance(ctx.toolset, Toolset) else Toolset()
        warnings: list[str] = []
        names = list(parent.names)
        if agent is not None and manifest is not None:
            chosen = resolve_agent_tools(agent, manifest, available=parent.names)
            names, warnings = list(chosen.tools), list(chosen.warnings)
        if params.toolkit:
            if manifest is None or params.toolkit not in manifest.toolkits:
                known = ", ".join(manifest.toolkits) if manifest is not None else "none"
                return ToolResult.error(f"Unknown toolkit {params.toolkit!r}. Toolkits: {known}.")
            allowed = set(manifest.resolve(params.toolkit).tools)
            names = [n for n in names if n in allowed]
        names = [n for n in names if n not in NOT_FOR_JOBS]
        turn = ctx.turn if isinstance(ctx.turn, TurnContext) else None
        home: Path | None = turn.home if turn is not None else None
        live = LiveJob(
            model=model_for(agent),
            tools=parent.only(names),
            policy=protection.policy,
            result_hooks=tuple(protection.result_hooks),
            parent_hooks=tuple(protection.result_hooks),
            home=home,
            instructions=(agent.instructions if agent and agent.instructions else None),
            web_provider=turn.web_provider if turn is not None else None,
        )
        session_id = ctx.session_id or "session"
        creator = record_creator(protection.policy, session_id, names)
        if creator.get("refused") and manager.dispatch == "dbos":
            return ToolResult.error(
                f"no job was started: a worker runs it, under this session's policy, and "
                f"{creator['refused']}"
            )
        job_id = manager.new_id()
        spec: dict[str, Any] = {
            "toolkit": params.toolkit,
            "max_steps": params.max_steps or max_steps,
            "time_budget": float(params.time_budget_seconds or time_budget),
            "tools": names,
            "creator": creator,  # if it runs elsewhere (resumed), under this policy
        }
        if home is not None:
            spec["home"] = str(home)
        await manager.start(
            NewJob(
                id=job_id,
                session_id=session_id,
                task=params.task,
                agent=agent.name if agent else None,
                spec=spec,
                origin="tool",
            ),
            live,
        )
        text = (
            f"Started background job {job_id}. It runs on its own (headless: tools that need "
            "approval are refused); you will be told when it ends. Use job_status to follow "
            "it, cancel_job to stop it."
        )
        if warnings:
            text += " Warnings: " + "; ".join(warnings)
        return ToolResult(text, details={"job_id": job_id, "tools": names, "warnings": warnings})

    async def own(job_id: str, ctx: ToolContext) -> JobRecord:
        """The calling session's job ``job_id``: another session's jobs are not its to see."""
        return await manager.get(job_id, ctx.session_id or "session")

    async def status(params: _IdParams, ctx: ToolContext) -> ToolResult:
        try:
            job = await own(params.job_id, ctx)
        except LookupError as exc:
            return ToolResult.error(str(exc))
        return ToolResult(
            format_job(job, full=True), details={"job_id": job.id, "state": job.state}
        )

    async def list_jobs(params: _ListParams, ctx: ToolContext) -> ToolResult:
        jobs = await manager.table.list(
            session_id=ctx.session_id or "session", state=params.state, limit=params.limit
        )
        if not jobs:
            return ToolResult("No jobs" + (f" are {params.state}." if params.state else "."))
        lines = [
            f"- {j.id}: {j.state}, {j.steps} step(s), started {j.created_at:%Y-%m-%d %H:%M:%S}"
            f" — {json.dumps(j.task[:80], ensure_ascii=False)}"
            for j in jobs
        ]
        return ToolResult("\n".join(lines), details={"ids": [j.id for j in jobs]})

    async def cancel(params: _CancelParams, ctx: ToolContext) -> ToolResult:
        try:
            job = await own(params.job_id, ctx)
        except LookupError as exc:
            return ToolResult.error(str(exc))
        state, changed = await manager.cancel(job.id, params.reason or "cancelled by the agent")
        if not changed:
            return ToolResult.error(f"Job {job.id} is already {state}; not cancelled.")
        if state == "running":
            return ToolResult(f"Job {job.id} is told to stop; it stops at its next step.")
        return ToolResult(f"Cancelled job {job.id}; it will not run.")

    agents_text = f" Agents:\n{catalog}" if catalog else ""
    return [
        Tool.from_model(
            _StartParams,
            name="start_job",
            description=(
                "Start a background job: a sub-agent that works on a self-contained task "
                "while this conversation goes on. You are told when it ends, with a "
                f"summary and a reference to its whole result.{agents_text}"
            ),
            execute=start,
            tier="WRITE",
            execution_mode="sequential",
            describe_activity=lambda p: "Starting a background job",
        ),
        Tool.from_model(
            _IdParams,
            name="job_status",
            description="A background job's state, progress and (once ended) its result.",
            execute=status,
            read_only=True,
            describe_activity=lambda p: f"Checking job {p.job_id}",
        ),
        Tool.from_model(
            _ListParams,
            name="list_jobs",
            description="List this session's background jobs, newest first.",
            execute=list_jobs,
            read_only=True,
            describe_activity=lambda p: "Listing jobs",
        ),
        Tool.from_model(
            _CancelParams,
            name="cancel_job",
            description="Cancel a background job: a pending one never runs, a running one "
            "stops at its next step.",
            execute=cancel,
            destructive=True,
            describe_activity=lambda p: f"Cancelling job {p.job_id}",
        ),
    ]


def job_tools_source(
    manager: JobManager,
    *,
    model_for: Callable[[AgentDefinition | None], Model],
    agents: Mapping[str, AgentDefinition] | None = None,
    manifest: ToolkitManifest | None = None,
    **options: Any,
) -> FunctionSource:
    """A tool source: the job tools on text turns that can create jobs, else nothing."""
    tools = job_tools(manager, model_for=model_for, agents=agents, manifest=manifest, **options)

    def create(ctx: TurnContext) -> list[Tool]:
        if not ctx.can_create_jobs or ctx.turn_kind != "text":
            return []
        return list(tools)

    return FunctionSource(create, "background_jobs")
