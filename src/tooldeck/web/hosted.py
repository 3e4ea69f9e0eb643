"""The model provider's own web search instead of (or beside) the local ``web_search``.

OpenAI's Responses API has a hosted ``web_search`` tool and Anthropic a ``web_search``
server tool: the provider searches, and its search items stay provider-side items in
the transcript (never sent to the local dispatcher), replayed with their citations as
the provider requires (see the adapters). A model adapter that offers one has a
``hosted_web_search(options)`` method returning its tools-array entry.

:func:`apply_web_mode` is what the tool plan does with the user's setting
(``WebConfig.mode``, ``ToolPlanner(web_search=...)``):

- ``local``: the local ``web_search`` tool only (the default);
- ``hosted``: the provider's search, and the local tool leaves the plan; a model without
  hosted search keeps the local tool;
- ``both``: both. Anthropic's server tool is named ``web_search`` like the local tool, so
  where the hosted entry takes that name the local one is offered as
  ``local_web_search``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from ..tools import Tool
from .config import HostedSearch, WebSearchMode

__all__ = ["LOCAL_NAME", "apply_web_mode", "hosted_entry"]

LOCAL_NAME = "local_web_search"
_log = logging.getLogger("tooldeck.web")
_COPY = "_tooldeck_local_web_search"  # where a tool keeps its renamed copy


def hosted_entry(model: Any, options: HostedSearch | None = None) -> dict[str, Any] | None:
    """The model's hosted web search entry, or ``None`` when its adapter has none."""
    make = getattr(model, "hosted_web_search", None)
    if not callable(make):
        return None
    entry = make(options or HostedSearch())
    return dict(entry) if isinstance(entry, Mapping) else None


def _renamed(tool: Tool) -> Tool:
    """``tool`` offered as ``local_web_search`` (one copy per tool, so plans stay stable)."""
    made = tool.__dict__.get(_COPY)
    if isinstance(made, Tool):
        return made

    async def run(params: Any, ctx: Any) -> Any:
        return await tool.invoke(params, ctx)

    made = Tool.from_schema(
        name=LOCAL_NAME,
        description=(
            f"{tool.description} This is the search service configured for this session; "
            "the model provider's own web_search tool is available too."
        ),
        json_schema=tool.schema,
        execute=run,
        read_only=tool.read_only,
        destructive=tool.destructive,
        tier=tool.tier,
        execution_mode=tool.execution_mode,
        describe_activity=tool.describe_activity,
        describe_completed_activity=tool.describe_completed_activity,
    )
    tool.__dict__[_COPY] = made
    return made


def apply_web_mode(
    tools: Sequence[Tool], model: Any, mode: WebSearchMode, options: HostedSearch | None = None
) -> tuple[list[Tool], tuple[dict[str, Any], ...]]:
    """``(tools, hosted entries)`` for one step: see the module docstring."""
    if mode == "local":
        return list(tools), ()
    entry = hosted_entry(model, options)
    if entry is None:
        _log.debug("%s has no hosted web search: the local web_search stays", model)
        return list(tools), ()
    if mode == "hosted":
        return [t for t in tools if t.name != "web_search"], (entry,)
    clash = entry.get("name") == "web_search"
    kept = [_renamed(t) if clash and t.name == "web_search" else t for t in tools]
    return kept, (entry,)
