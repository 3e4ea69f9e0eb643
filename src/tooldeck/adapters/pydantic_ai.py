"""tooldeck's tools as a pydantic-ai toolset: ``Agent(model, toolsets=[TooldeckToolset(...)])``.

Every call the agent makes runs through tooldeck's dispatcher (see
:mod:`tooldeck.adapters`), with these mappings to pydantic-ai's conventions:

- the model's raw arguments reach tooldeck unparsed (the toolset's argument validator
  passes them through), so the repair ladder applies; arguments that still do not
  validate raise :class:`~pydantic_ai.ModelRetry` with tooldeck's message: pydantic-ai's
  retry, counted against the tool's ``max_retries``;
- a denial (by the policy or a human) is the tool's answer, as text: the model reads why
  and goes on (raised as ``ModelRetry`` it would end a run whose ``retries`` is 0);
- a call whose approval nobody can give now (an approver that raises
  :class:`~tooldeck.approvals.PendingApproval`) raises pydantic-ai's
  :class:`~pydantic_ai.ApprovalRequired`: the run ends with ``DeferredToolRequests``
  (give the agent ``output_type=[str, DeferredToolRequests]``), and the call approved
  in ``DeferredToolResults`` runs when the run resumes;
- the calls of one model step are one tooldeck step: one approval batch, read-only tools
  together, a tool that changes the world alone, in the model's order (no tool is marked
  ``sequential`` to pydantic-ai, so its calls reach tooldeck together and tooldeck orders
  them);
- the tools are asked for before every step: MCP servers, deferred tools with
  ``tool_search`` (a :class:`~tooldeck.plan.ToolPlanner`) and the recall tool of
  offloaded results appear when tooldeck would offer them.

Needs the ``pydantic-ai`` extra (``pip install 'tooldeck[pydantic-ai]'``).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from .._call import ResultHook
from .._extras import needs_extra
from ..approvals import ApprovalAnswer
from ..assembly import TurnContext
from ..events import EventBus
from ..loop import TIMEOUT
from ..policy.protection import Protection
from ..sources.listed import Tools
from ..transcript import ToolCall
from ._bridge import Bridge

with needs_extra("pydantic-ai"):
    from pydantic_ai import ApprovalRequired, ModelRetry, RunContext
    from pydantic_ai.tools import ToolDefinition
    from pydantic_ai.toolsets import AbstractToolset, ToolsetTool

__all__ = ["TooldeckToolset"]

_RAW = "__tooldeck_raw_arguments__"  # the key the unparsed arguments travel under
_ids = itertools.count(1)


class _PassThrough:
    """pydantic-ai's argument validator for tooldeck's tools: it keeps the model's
    arguments as they came (a JSON string unparsed), for tooldeck to validate and repair."""

    def validate_json(self, input: str | bytes | bytearray, **_: Any) -> dict[str, Any]:
        text = input if isinstance(input, str) else bytes(input).decode("utf-8", "replace")
        return {_RAW: text}

    def validate_python(self, input: Any, **_: Any) -> dict[str, Any]:
        return {_RAW: input}


_PASS_THROUGH = _PassThrough()


class TooldeckToolset(AbstractToolset[Any]):
    """tooldeck tools for a pydantic-ai agent (see the module docstring).

    ``tools`` is what ``tooldeck.Session(tools=...)`` takes: tools, sources (an
    ``McpSource``, a registry, a skill catalog, ``tooldeck.source(fn)``...), lists of them,
    or a :class:`~tooldeck.plan.ToolPlanner`. ``protect``, ``turn``, ``session_id``,
    ``timeout``, ``result_hooks``, ``guard`` and ``events`` are the Session's options of
    those names. ``max_retries``: how many times pydantic-ai lets the model retry a call
    whose arguments did not validate.
    """

    def __init__(
        self,
        tools: Tools,
        *,
        protect: Protection | None = None,
        turn: TurnContext | None = None,
        session_id: str | None = None,
        timeout: float | None = TIMEOUT,
        result_hooks: Sequence[ResultHook] = (),
        guard: bool = True,
        events: EventBus | None = None,
        max_retries: int = 1,
        id: str | None = None,
    ) -> None:
        self.bridge = Bridge(
            tools,
            protect=protect,
            turn=turn,
            session_id=session_id,
            timeout=timeout,
            result_hooks=result_hooks,
            guard=guard,
            events=events,
        )
        self.max_retries = max_retries
        self._id = id

    @property
    def id(self) -> str | None:
        return self._id

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        return {
            tool.name: ToolsetTool(
                toolset=self,
                tool_def=ToolDefinition(
                    name=tool.name,
                    description=tool.description,
                    parameters_json_schema=tool.input_schema(),
                ),
                max_retries=self.max_retries,
                args_validator=_PASS_THROUGH,
            )
            for tool in self.bridge.shown()
        }

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        raw = tool_args.get(_RAW, tool_args)
        call = ToolCall(ctx.tool_call_id or f"pydantic_ai_{next(_ids)}", name, raw)
        approved = ApprovalAnswer(True) if ctx.tool_call_approved else None
        outcome = await self.bridge.call(call, approved=approved)
        if outcome.kind == "invalid":
            raise ModelRetry(outcome.text)
        if outcome.kind == "waiting":
            raise ApprovalRequired({"tooldeck": outcome.text})
        return outcome.text
