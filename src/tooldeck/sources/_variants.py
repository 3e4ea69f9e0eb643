"""Changed copies of a source's tools, made once per tool while the source gives it."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..tools import Tool

__all__ = ["Variants"]


class Variants:
    """``change(tool)`` of each tool, kept for as long as the source keeps giving the tool
    (the same copy every step, so projections and plans stay cached)."""

    def __init__(self, change: Callable[[Tool], Tool]) -> None:
        self.change = change
        self._made: dict[int, tuple[Tool, Tool]] = {}
        self._last: tuple[tuple[Tool, ...], tuple[Tool, ...]] = ((), ())

    def of(self, tools: Sequence[Tool]) -> tuple[Tool, ...]:
        given = tuple(tools)
        if given == self._last[0]:  # the same tools as last time (compared by identity)
            return self._last[1]
        made = self._made
        current: dict[int, tuple[Tool, Tool]] = {}
        out: list[Tool] = []
        for t in given:
            pair = made.get(id(t))
            if pair is None or pair[0] is not t:
                pair = (t, self.change(t))
            current[id(t)] = pair
            out.append(pair[1])
        self._made = current  # tools the source no longer gives are let go
        self._last = (given, tuple(out))
        return self._last[1]
