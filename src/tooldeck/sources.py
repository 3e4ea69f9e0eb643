"""A session's ``tools`` as one flat list: tools next to the sources that make them.

``Session(model, [add, McpSource(...), catalog, registry, lambda ctx: [...]])``: each item
is

- a :class:`~tooldeck.Tool` (what ``@tooldeck.tool`` makes of a function);
- a :class:`~tooldeck.Toolset`, or a nested list or tuple of items;
- a :class:`~tooldeck.agents.skills.SkillCatalog` (its ``use_skill`` tool);
- a :class:`~tooldeck.registry.ToolRegistry` (every category's creator, in file order);
- a creator: a callable ``(TurnContext) -> tools`` (an
  :class:`~tooldeck.mcp.McpSource` is one), returning tools or a Toolset.

The list becomes creators for :func:`~tooldeck.assembly.assemble`, in the list's order:
the model sees the tools in that order, and a name made twice is an error naming both
items. A list of tools alone is assembled once; one with a creator before every step.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeAlias

from .agents.skills import SkillCatalog
from .assembly import AssemblyError, CreatorFn, Toolset, TurnContext, assemble, creator_name
from .registry import ToolRegistry
from .tools import Tool

__all__ = ["ToolItem", "creators_of", "tool_source"]

ToolItem: TypeAlias = Any
"""One item of a flat ``tools`` list (see the module docstring)."""


class _Fixed:
    """The creator of tools given as they are (a Tool, a Toolset)."""

    def __init__(self, tools: Sequence[Tool], where: str) -> None:
        self.tools = tuple(tools)
        self.creator_name = where

    def __call__(self, ctx: TurnContext) -> Sequence[Tool]:
        return self.tools


class _Made:
    """A creator of the list, its result made a list of tools (a Toolset's, too)."""

    def __init__(self, make: Callable[[TurnContext], Any], where: str) -> None:
        self.make = make
        self.creator_name = f"{where} ({creator_name(make)})"

    def __call__(self, ctx: TurnContext) -> Iterable[Tool]:
        made = self.make(ctx)
        if isinstance(made, Toolset):
            return made.tools
        if isinstance(made, Tool):
            return [made]
        if not isinstance(made, Iterable) or isinstance(made, str | bytes):
            kind = type(made).__name__
            raise TypeError(f"it returned a {kind}: a creator returns tools or a Toolset")
        return made


def _not_a_creator(fn: Callable[..., Any]) -> bool:
    """True for a plain function that cannot be a creator ``(TurnContext) -> tools``."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return False  # a builtin or extension callable: trust it
    positional = [
        p
        for p in signature.parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    varargs = any(p.kind is p.VAR_POSITIONAL for p in signature.parameters.values())
    required = [p for p in positional if p.default is p.empty]
    if len(required) > 1 or not (positional or varargs):
        return True
    if not positional:
        return False
    hint = positional[0].annotation
    if hint is inspect.Parameter.empty or hint is TurnContext:
        return False
    return not (isinstance(hint, str) and hint.rsplit(".", 1)[-1] == "TurnContext")


def creators_of(items: Iterable[ToolItem], where: str = "tools") -> list[CreatorFn]:
    """The creators of a flat list, in its order (nested lists flattened)."""
    found: list[CreatorFn] = []
    for index, item in enumerate(items):
        at = f"{where}[{index}]"
        if isinstance(item, Tool):
            found.append(_Fixed([item], f"{at} (tool {item.name})"))
        elif isinstance(item, Toolset):
            found.append(_Fixed(item.tools, f"{at} (a Toolset)"))
        elif isinstance(item, SkillCatalog):
            found.append(_Made(item.creator(), at))
        elif isinstance(item, ToolRegistry):
            found.extend(_Made(c, at) for c in item.creators())
        elif isinstance(item, list | tuple):
            found.extend(creators_of(item, at))
        elif callable(item):
            if _not_a_creator(item):
                name = getattr(item, "__name__", repr(item))
                raise AssemblyError(
                    f"{at} ({name}) is a plain function, not a tool: decorate it with "
                    "@tooldeck.tool, or make it a creator (TurnContext) -> tools"
                )
            found.append(_Made(item, at))
        else:
            raise AssemblyError(
                f"{at} is a {type(item).__name__}, not a tool: give Tools (@tooldeck.tool), "
                "Toolsets, an McpSource, a SkillCatalog, a ToolRegistry or a creator"
            )
    return found


def tool_source(items: Sequence[ToolItem]) -> Toolset | Callable[[TurnContext], Toolset]:
    """A flat list as a Toolset (only fixed tools) or a creator of one per step."""
    creators = creators_of(items)
    if all(isinstance(c, _Fixed) for c in creators):
        return assemble(TurnContext(session_id=""), creators)  # names checked once, now

    def assembled(ctx: TurnContext) -> Toolset:
        return assemble(ctx, creators)

    return assembled
