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
        self._checked: Sequence[Tool] = ()  # the last tools found free of a collision

    def _rename(self, tool: Tool) -> Tool:
        name = self.new_name(tool.name)
        return tool if name == tool.name else tool.replace(name=name)

    def tools_for(self, ctx: TurnContext, /) -> Sequence[Tool]:
        given = tuple(self.inner.tools_for(ctx))
        tools = self._variants.of(given)
        if tools is not self._checked:
            _check_collisions(given, tools)
            self._checked = tools
        return tools


def _check_collisions(given: Sequence[Tool], renamed: Sequence[Tool]) -> None:
    """Two tools of the source renamed onto one name: an error naming both."""
    first: dict[str, str] = {}
    for old, new in zip(given, renamed, strict=True):
        before = first.setdefault(new.name, old.name)
        if before != old.name:
            raise ToolDefinitionError(
                f"renamed: {before!r} and {old.name!r} would both be named {new.name!r}"
            )
