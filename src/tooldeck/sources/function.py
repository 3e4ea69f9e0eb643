"""A function as a tool source: ``source(fn)`` for ``fn(ctx) -> tools``, asked every turn."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import overload

from ..assembly import Source, Toolset, TurnContext
from ..tools import Tool

Make = Callable[[TurnContext], Iterable[Tool]]


class FunctionSource(Source):
    """The tools ``make(ctx)`` returns (a list of tools or a Toolset), each turn."""

    def __init__(self, make: Make, label: str | None = None) -> None:
        self.make = make
        name = getattr(make, "__qualname__", None)
        module = getattr(make, "__module__", None)
        default = f"{module}.{name}" if module and name else (name or repr(make))
        self.label = label or default

    def tools_for(self, ctx: TurnContext, /) -> Sequence[Tool]:
        made = self.make(ctx)
        if isinstance(made, Toolset):  # a Mapping: iterating it gives names
            return made.tools
        return tuple(made)

    def __repr__(self) -> str:
        return f"FunctionSource({self.label})"


@overload
def source(make: Make, /, *, label: str | None = None) -> FunctionSource: ...
@overload
def source(*, label: str | None = None) -> Callable[[Make], FunctionSource]: ...
def source(
    make: Make | None = None, /, *, label: str | None = None
) -> FunctionSource | Callable[[Make], FunctionSource]:
    """A tool source from a function of the turn: ``source(lambda ctx: [...])``, or
    ``@source`` / ``@source(label="mine")`` on ``def make(ctx: TurnContext) -> tools``.

    The function runs before every model step; ``label`` names it in errors (default:
    the function's qualified name).
    """
    if make is not None:
        return FunctionSource(make, label)

    def wrap(fn: Make) -> FunctionSource:
        return FunctionSource(fn, label)

    return wrap
