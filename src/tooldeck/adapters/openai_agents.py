"""tooldeck's tools as openai-agents function tools: ``Agent(tools=function_tools(...))``.

Every call the agent makes runs through tooldeck's dispatcher (see
:mod:`tooldeck.adapters`). openai-agents hands a function tool the model's raw argument
string, so tooldeck's repair ladder applies as it does in a Session. Its conventions:

- a tool's answer is text; an error the model should see is text too (raising would end
  the run). So arguments that do not validate, even repaired, answer with tooldeck's
  message (what to fix), and the model calls again: openai-agents' retry; a denial (by the
  policy or a human) answers with why; a call whose approval nobody can give now answers
  that it was not executed;
- each tool's parameters are its OpenAI Responses projection
  (:func:`tooldeck.schema.project`): strict where tooldeck makes the schema strict (an
  optional parameter becomes nullable, and tooldeck reads the model's ``null`` as "absent"),
  as it is otherwise;
- the calls of one model step are one tooldeck step: one approval batch, read-only tools
  together, a tool that changes the world alone, in the model's order;
- the tool list is made when :func:`function_tools` is called: every tool the source gives
  then, deferred ones included (a :class:`~tooldeck.plan.ToolPlanner`), and the recall tool
  of offloaded results; each is enabled (``is_enabled``) only while tooldeck offers it, so
  a deferred tool appears once ``tool_search`` found it and the recall tool once a result
  is stored. A tool a source adds later needs a new :func:`function_tools`.

Needs the ``openai-agents`` extra (``pip install 'tooldeck[openai-agents]'``).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from .._call import ResultHook
from .._extras import needs_extra
from ..assembly import TurnContext
from ..events import EventBus
from ..loop import TIMEOUT
from ..offload import RECALL_TOOL_NAME
from ..policy.protection import Protection
from ..schema import project
from ..sources.listed import Tools
from ..tools import Tool
from ..transcript import ToolCall
from ._bridge import Bridge

with needs_extra("openai-agents"):
    from agents import FunctionTool, RunContextWrapper
    from agents.tool_context import ToolContext

__all__ = ["function_tools"]

_ids = itertools.count(1)


def function_tools(
    tools: Tools,
    *,
    protect: Protection | None = None,
    turn: TurnContext | None = None,
    session_id: str | None = None,
    timeout: float | None = TIMEOUT,
    result_hooks: Sequence[ResultHook] = (),
    guard: bool = True,
    events: EventBus | None = None,
) -> list[FunctionTool]:
    """openai-agents ``FunctionTool`` s for ``tools`` (see the module docstring).

    ``tools`` is what ``tooldeck.Session(tools=...)`` takes; ``protect``, ``turn``,
    ``session_id``, ``timeout``, ``result_hooks``, ``guard`` and ``events`` are the
    Session's options of those names. The tools share one bridge: the calls of a step
    are dispatched together.
    """
    bridge = Bridge(
        tools,
        protect=protect,
        turn=turn,
        session_id=session_id,
        timeout=timeout,
        result_hooks=result_hooks,
        guard=guard,
        events=events,
    )
    plan = bridge.plan()
    every: dict[str, Tool] = {t.name: t for t in (*plan.shown, *plan.planned)}
    store = bridge.guard.store
    if store is not None and bridge.guard.adds_tools and RECALL_TOOL_NAME not in every:
        every[RECALL_TOOL_NAME] = store.recall_tool
    return [_function_tool(bridge, tool) for tool in every.values()]


class _Offered:
    """``is_enabled`` for one tool: whether tooldeck offers it now (planned once per
    model step of the run, see :meth:`Bridge.offered`)."""

    def __init__(self, bridge: Bridge, name: str) -> None:
        self.bridge = bridge
        self.name = name

    def __call__(self, ctx: RunContextWrapper[Any], agent: Any) -> bool:
        return self.name in self.bridge.offered(id(ctx))


def _function_tool(bridge: Bridge, tool: Tool) -> FunctionTool:
    projection = project(tool, "openai-responses")

    async def invoke(ctx: ToolContext[Any], arguments: str) -> str:
        call = ToolCall(ctx.tool_call_id or f"openai_agents_{next(_ids)}", tool.name, arguments)
        outcome = await bridge.call(call)
        return outcome.text

    return FunctionTool(
        name=tool.name,
        description=tool.description,
        params_json_schema=dict(projection.parameters),
        on_invoke_tool=invoke,
        strict_json_schema=projection.strict,
        is_enabled=_Offered(bridge, tool.name),
    )
