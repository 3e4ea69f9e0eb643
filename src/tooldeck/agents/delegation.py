"""``delegate_task``: run a sub-agent with its own toolkit through the same loop.

The child gets its own transcript and session id, a budget of steps and time, and only
the tools its agent definition resolves to, intersected with what the parent may use:
a child never receives more than its parent, and never a control tool
(``delegate_task``, ``switch_model``, workflow management) unless its definition grants
it explicitly. The spawn event carries every resolution warning.

A child never has less protection than the session that called ``delegate_task``, at
every level of nesting. The dispatcher hands each call the
:class:`~tooldeck.context.LiveProtection` of its session (policy, approver, result
hooks), and the child inherits it:

- **policy**: the caller's own :class:`~tooldeck.policy.protection.Protection`, derived with
  :meth:`~tooldeck.policy.protection.Protection.child` (a session policy's rules plus the agent's
  restrictions). An explicit ``child_policy`` can only make it stricter: it is combined
  with the inherited one and *both* must allow (deny > ask > allow);
- **approver**: the caller's, unless one is given explicitly; either way a child's call
  cannot wait for a later answer (it is denied with a message instead);
- **result hooks**: the caller's, each offload store replaced by one with the same home
  and settings for the child's session id (:func:`tooldeck.offload.defaults.child_hooks`), so
  the child's large results are guarded, stored and recallable like its parent's; a
  child whose parent had none still gets the default guard of every session;
- a tool invoked outside a dispatcher has no protection to inherit, and refuses.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from ..approvals import (
    ApprovalAnswer,
    ApprovalRequest,
    Approver,
    PendingApproval,
    PolicyHook,
    not_answered,
)
from ..assembly import Toolset
from ..context import ToolContext
from ..events import Event
from ..loop import Session
from ..model import Model
from ..offload.defaults import child_hooks
from ..policy import PolicyApprover
from ..policy.protection import Protection
from ..result import ToolResult
from ..telemetry.names import AGENT_NAME
from ..telemetry.turns import turn_attributes
from ..tools import Tool
from .toolkits import AgentDefinition, ToolkitManifest, resolve_agent_tools

__all__ = [
    "CONTROL_TOOLS",
    "SubAgentFinished",
    "SubAgentSpawned",
    "delegate_task_tool",
]

CONTROL_TOOLS = frozenset(
    {
        "delegate_task",
        "switch_model",
        "workflow",
        "show_workflow",
        "list_workflows",
        "cancel_workflow",
    }
)


@dataclass(frozen=True, slots=True)
class SubAgentSpawned(Event):
    type: ClassVar[str] = "subagent_spawned"
    agent: str
    child_session_id: str
    tools: tuple[str, ...]
    via: str
    warnings: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SubAgentFinished(Event):
    type: ClassVar[str] = "subagent_finished"
    agent: str
    child_session_id: str
    stop_reason: str
    reason: str
    steps: int


_CANNOT_WAIT = "no human could answer now, and a sub-agent's call cannot wait for a later approval"


def _child_policy(
    parent: PolicyHook | Protection,
    explicit: PolicyHook | Protection | None,
    agent: str,
    session_id: str,
) -> Protection:
    """The inherited protection's judges, made stricter (never looser) by an explicit one
    (a judge that decides as an inherited one does is not added twice)."""
    inherited = Protection.of(parent).child(agent, session_id)
    if explicit is None or explicit is parent:
        return inherited
    return inherited & Protection(Protection.of(explicit).judges)


def _cannot_wait(approver: Approver | None) -> Approver | None:
    """``approver`` for a sub-agent: a call that would wait for a later answer is denied."""
    if approver is None:
        return None
    if isinstance(approver, PolicyApprover):
        if not approver.can_wait:
            return approver
        return PolicyApprover(approver.policy, approver.ask, who=approver.who, can_wait=False)
    asked = approver

    async def approve(requests: Sequence[ApprovalRequest]) -> Sequence[ApprovalAnswer]:
        try:
            return await asked(requests)
        except PendingApproval:
            return [not_answered(_CANNOT_WAIT) for _ in requests]

    return approve


class DelegateParams(BaseModel):
    agent: str = Field(description="Name of the agent definition to run.")
    task: str = Field(description="What the sub-agent should do; include all context it needs.")
    max_steps: int | None = Field(
        default=None, ge=1, le=100, description="Step budget (defaults to the agent's budget)."
    )


def delegate_task_tool(
    agents: Mapping[str, AgentDefinition],
    manifest: ToolkitManifest,
    *,
    model_for: Callable[[AgentDefinition], Model],
    max_steps: int = 10,
    time_budget: float = 300.0,
    child_policy: Callable[[AgentDefinition, ToolContext], PolicyHook | Protection | None]
    | None = None,
    approver: Approver | None = None,
) -> Tool:
    """Build the ``delegate_task`` tool for these agents.

    The child inherits the calling session's policy and approver (see the module
    docstring). ``child_policy(agent, ctx)`` adds a policy that must allow too (it can
    only make the child stricter); ``approver`` answers the child's asks instead of the
    caller's approver.
    """
    catalog = "\n".join(f"- {a.name}: {a.description}" for a in agents.values()) or "(none)"

    async def execute(params: DelegateParams, ctx: ToolContext) -> ToolResult:
        agent = agents.get(params.agent)
        if agent is None:
            return ToolResult.error(
                f"Unknown agent {params.agent!r}. Agents: {', '.join(agents) or '(none)'}."
            )
        parent: Toolset = ctx.toolset if isinstance(ctx.toolset, Toolset) else Toolset()
        chosen = resolve_agent_tools(agent, manifest, available=parent.names)
        protection = ctx.protection
        if protection is None:
            return ToolResult.error(
                "delegate_task can only run through tooldeck's dispatcher (a Session), which "
                "tells it the policy and approver of the calling session; nothing was run."
            )
        granted = set(agent.grants)
        names = [n for n in chosen.tools if n not in CONTROL_TOOLS or n in granted]
        warnings = list(chosen.warnings)
        dropped = [n for n in chosen.tools if n in CONTROL_TOOLS and n not in granted]
        if dropped:
            warnings.append(f"agent {agent.name!r}: control tools {dropped} not granted")
        child_id = f"{ctx.session_id or 'session'}.{agent.name}.{uuid.uuid4().hex[:8]}"
        explicit = child_policy(agent, ctx) if child_policy else None
        inherited = _child_policy(protection.policy, explicit, agent.name, child_id)
        child_approver = _cannot_wait(approver if approver is not None else protection.approver)
        protect = dataclasses.replace(inherited, approver=child_approver)
        # the child is never shown a tool its policy denies outright
        hidden = [n for n in names if n in parent and not protect.visible(parent[n])]
        if hidden:
            warnings.append(f"agent {agent.name!r}: tools {hidden} denied by policy")
            names = [n for n in names if n not in hidden]
        child_tools = parent.only(names)
        turn = ctx.turn
        if turn is not None:
            turn = dataclasses.replace(turn, session_id=child_id, signal=ctx.signal.child())
        ctx.emit(
            SubAgentSpawned(
                ctx.session_id, agent.name, child_id, child_tools.names, chosen.via, tuple(warnings)
            )
        )
        session = Session(
            model_for(agent),
            child_tools,
            session_id=child_id,
            instructions=agent.instructions or None,
            max_steps=params.max_steps or max_steps,
            protect=protect,
            result_hooks=child_hooks(protection.result_hooks, child_id),
            turn=turn,
        )
        signal = turn.signal if turn is not None else ctx.signal.child()
        try:
            async with asyncio.timeout(time_budget):
                with turn_attributes({AGENT_NAME: agent.name}):  # names the child's span
                    result = await session.run(params.task, signal=signal)
        except TimeoutError:
            signal.abort("time budget exhausted")
            return ToolResult.error(
                f"Sub-agent {agent.name} ran out of its {time_budget:g}s time budget.",
                details={"agent": agent.name, "session_id": child_id, "warnings": warnings},
            )
        used = list(dict.fromkeys(o.name for o in result.tool_outputs))
        ctx.emit(
            SubAgentFinished(
                ctx.session_id,
                agent.name,
                child_id,
                result.stop_reason.value,
                result.reason,
                result.steps,
            )
        )
        details: dict[str, Any] = {
            "agent": agent.name,
            "session_id": child_id,
            "tools": list(child_tools.names),
            "tools_used": used,
            "steps": result.steps,
            "stop_reason": result.stop_reason.value,
            "reason": result.reason,
            "usage": dataclasses.asdict(result.usage),
            "warnings": warnings,
        }
        finished = result.stop_reason.value in ("end_turn", "tool_calls")
        text = result.output or f"(the sub-agent stopped without an answer: {result.reason})"
        return ToolResult(content=text, details=details, is_error=not finished)

    return Tool.from_model(
        DelegateParams,
        name="delegate_task",
        description=(
            "Hand a self-contained task to a sub-agent, which works with its own tools and "
            f"returns its final answer. Agents:\n{catalog}"
        ),
        execute=execute,
        tier="WRITE",
        describe_activity=lambda p: f"Delegating to {p.agent}",
    )
