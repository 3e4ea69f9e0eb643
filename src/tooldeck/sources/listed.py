"""A session's ``tools``: one source from tools, sources and lists of them, in order.

``Session(model, [add, McpSource(...), catalog, registry, source(make)])``: each item is
a :class:`~tooldeck.Tool` (what ``@tooldeck.tool`` makes of a function), a
:class:`~tooldeck.assembly.ToolSource` (a Toolset, an McpSource, a SkillCatalog, a
ToolRegistry, a function made one with :func:`~tooldeck.source`, a combinator
of any of them), or a nested list of items. The model sees the tools in the list's
order; a name given twice is an error naming both items. A list of tools and Toolsets
alone is assembled once, when it is made; one with any other source before every step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

from ..assembly import AssemblyError, Source, Toolset, ToolSource, TurnContext, assemble_labelled
from ..assembly import label_of as _label_of
from ..tools import Tool

Tools: TypeAlias = "ToolSource | Tool | Sequence[Tools]"
"""What ``tools=`` takes: a tool, a source, or a (nested) list of them."""

_HINT = (
    "give tools (@tooldeck.tool), Toolsets, an McpSource, a SkillCatalog, a ToolRegistry "
    "or a function made a source with tooldeck.source"
)


def _parts(items: Tools, where: str) -> list[tuple[str, ToolSource]]:
    if isinstance(items, Tool):
        return [(f"{where} (tool {items.name})", Toolset([items]))]
    if isinstance(items, ToolSource):
        return [(f"{where} ({_label_of(items)})", items)]
    if isinstance(items, Sequence) and not isinstance(items, str | bytes):
        found: list[tuple[str, ToolSource]] = []
        for index, item in enumerate(items):
            found.extend(_parts(item, f"{where}[{index}]"))
        return found
    if callable(items):
        name = getattr(items, "__name__", repr(items))
        raise AssemblyError(
            f"{where} ({name}) is a function, not a tool or a source: decorate a tool with "
            "@tooldeck.tool, or make a function (TurnContext) -> tools one with "
            "tooldeck.source"
        )
    raise AssemblyError(f"{where} is a {type(items).__name__}, not a tool: {_HINT}")


class ToolList(Source):
    """``tools`` as one source (see the module docstring)."""

    label = "tools"

    def __init__(self, tools: Tools, where: str = "tools") -> None:
        self.items = tools
        self._ids = tuple(map(id, tools)) if isinstance(tools, Sequence) else ()
        self.parts = _parts(tools, where) if isinstance(tools, Sequence) else _parts([tools], where)
        self.fixed: Toolset | None = None  # the toolset when every part is fixed
        if all(isinstance(s, Toolset) for _, s in self.parts):
            self.fixed = assemble_labelled(TurnContext(session_id=""), self.parts)

    def made_from(self, tools: Tools) -> bool:
        """Whether this list was made from ``tools`` as they are now (a list changed in
        place since is not)."""
        if tools is not self.items:
            return False
        return not isinstance(tools, Sequence) or tuple(map(id, tools)) == self._ids

    def toolset(self, ctx: TurnContext) -> Toolset:
        """The tools for ``ctx`` with the item each came from."""
        if self.fixed is not None:
            return self.fixed
        return assemble_labelled(ctx, self.parts)

    def tools_for(self, ctx: TurnContext, /) -> Sequence[Tool]:
        return self.toolset(ctx).tools
