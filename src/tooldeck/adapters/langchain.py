"""tooldeck's tools as LangChain tools: ``ToolNode(langchain_tools(...))``, or the ``tools``
of a ``create_agent``-style agent.

Every call runs through tooldeck's dispatcher (see :mod:`tooldeck.adapters`). A chat model
parses the model's arguments into a dict before LangChain sees them (arguments that are
not JSON become the message's ``invalid_tool_calls`` and never reach a tool), so the JSON
repairs do not apply; the rest does: a double-encoded object, ``null`` for an absent
optional, validation against the tool's schema. LangChain's conventions:

- a result is the ``ToolMessage``'s content;
- every call that did not run to a result (its arguments invalid, denied by the policy or
  a human, waiting for an approval nobody can give now, failed) is a ``ToolMessage`` with
  ``status="error"`` and tooldeck's text (what to fix, or why): the model reads it and
  may call again, which is LangChain's retry;
- a result's ``ToolMessage`` carries an ``artifact``: ``{"tooldeck": "ok", "repairs": [...]}``
  (the repairs tooldeck made to the arguments);
- the calls of one ``ToolNode`` step run as one tooldeck step when the node runs
  asynchronously (``ainvoke``/``astream``: one approval batch, read-only tools together,
  a tool that changes the world alone, in the model's order); a synchronous node runs each
  call in a worker thread, each its own step;
- the tools are made when :func:`langchain_tools` is called (deferred ones and the recall
  tool included, as for openai-agents): a tool tooldeck does not offer now answers that it
  is not available yet.

Needs the ``langchain`` extra (``pip install 'tooldeck[langchain]'``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from .._call import ResultHook, error
from .._extras import needs_extra
from .._sync import block_on
from ..assembly import TurnContext
from ..events import EventBus
from ..loop import TIMEOUT
from ..offload import RECALL_TOOL_NAME
from ..policy.protection import Protection
from ..sources.listed import Tools
from ..tools import Tool
from ..transcript import ToolCall
from ._bridge import Bridge, Outcome

with needs_extra("langchain"):
    from langchain_core.tools import BaseTool, ToolException

__all__ = ["langchain_tools"]

_CALL = "__tooldeck_call__"  # the keyword the host's call id and arguments travel under


def langchain_tools(
    tools: Tools,
    *,
    protect: Protection | None = None,
    turn: TurnContext | None = None,
    session_id: str | None = None,
    timeout: float | None = TIMEOUT,
    result_hooks: Sequence[ResultHook] = (),
    guard: bool = True,
    events: EventBus | None = None,
) -> list[BaseTool]:
    """LangChain tools for ``tools`` (see the module docstring).

    ``tools`` is what ``tooldeck.Session(tools=...)`` takes; ``protect``, ``turn``,
    ``session_id``, ``timeout``, ``result_hooks``, ``guard`` and ``events`` are the
    Session's options of those names. The tools share one bridge.
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
    return [TooldeckTool.of(bridge, tool) for tool in every.values()]


class TooldeckTool(BaseTool):
    """One tooldeck tool as a LangChain tool; its calls go through the shared bridge."""

    bridge: Any = None  # the Bridge (a pydantic field of the tool: kept as it is)
    handle_tool_error: bool = True  # ToolException -> a ToolMessage with status="error"
    response_format: Literal["content", "content_and_artifact"] = "content_and_artifact"

    @classmethod
    def of(cls, bridge: Bridge, tool: Tool) -> TooldeckTool:
        return cls(
            name=tool.name,
            description=tool.description,
            args_schema=tool.input_schema(),
            bridge=bridge,
        )

    def _to_args_and_kwargs(
        self, tool_input: str | dict[str, Any], tool_call_id: str | None
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        # the arguments as the model gave them, and the host's call id, to tooldeck
        return (), {_CALL: (tool_call_id, tool_input)}

    def _run(self, **kwargs: Any) -> tuple[str, dict[str, Any]]:
        return block_on(self._arun(**kwargs), instead="await tool.ainvoke(...)")

    async def _arun(self, **kwargs: Any) -> tuple[str, dict[str, Any]]:
        call_id, arguments = kwargs[_CALL]
        bridge: Bridge = self.bridge
        call = ToolCall(call_id or f"langchain_{id(kwargs)}", self.name, arguments)
        if self.name not in bridge.offered(bridge.session_id):
            outcome = Outcome(
                error(call, f"{self.name} is not available yet: find it with tool_search."),
                "unknown",
            )
        else:
            outcome = await bridge.call(call)
        if outcome.kind != "ok":
            raise ToolException(outcome.text)
        artifact = {"tooldeck": outcome.kind, "repairs": list(outcome.output.repairs)}
        return outcome.text, artifact
