"""``source.filtered(keep)``: only the tools ``keep(tool)`` is true for."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..assembly import Source, ToolSource, TurnContext, label_of
from ..tools import Tool


class Filtered(Source):
    """The tools of ``inner`` that ``keep`` keeps, in their order."""

    def __init__(self, inner: ToolSource, keep: Callable[[Tool], bool]) -> None:
        self.inner = inner
        self.keep = keep
        self.label = f"{label_of(inner)}, filtered"

    def tools_for(self, ctx: TurnContext, /) -> Sequence[Tool]:
        return tuple(t for t in self.inner.tools_for(ctx) if self.keep(t))
