"""``source.renamed({old: new})``: the model sees and calls ``new``; ``old``'s code runs."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ..assembly import Source, ToolSource, TurnContext, label_of
from ..errors import ToolDefinitionError
from ..tools import TOOL_NAME_PATTERN, Tool
from ._variants import Variants


class Renamed(Source):
    """The tools of ``inner``, each named ``new_name(name)`` (for a mapping, unmapped
    names stay). A renamed tool runs what the original runs."""

    def __init__(self, inner: ToolSource, names: Mapping[str, str] | Callable[[str], str]) -> None:
        self.inner = inner
        if callable(names):
            self.new_name = names
        else:
            table = dict(names)
            bad = [n for n in table.values() if not TOOL_NAME_PATTERN.fullmatch(str(n))]
            if bad:
                raise ToolDefinitionError(
                    f"renamed: {bad[0]!r} is no tool name (letters, digits, '_' and '-', "
                    "1 to 64 characters)"
                )
            self.new_name = lambda name: table.get(name, name)
        self.label = f"{label_of(inner)}, renamed"
        self._variants = Variants(self._rename)

    def _rename(self, tool: Tool) -> Tool:
        name = self.new_name(tool.name)
        return tool if name == tool.name else tool.replace(name=name)

    def tools_for(self, ctx: TurnContext, /) -> Sequence[Tool]:
        return self._variants.of(self.inner.tools_for(ctx))
