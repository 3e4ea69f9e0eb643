"""Posting lists in flat arrays: which tools hold a term, and how much it is worth to each.

The lexical index of a 50,000-tool catalog holds a few million (term, tool) weights; as
Python tuples of ints and floats they would take hundreds of megabytes. :class:`Postings`
keeps all its lists in a few :mod:`array` arrays instead: tool positions as 2-byte
unsigned ints (4-byte beyond 65,536 tools) and weights as 4-byte floats (a weight is read
back as the nearest float32: 7 significant digits). A list whose weights are all one
value (a bonus), or one value times a per-tool number, stores no weights at all.

A list is stored in **layers**, highest weights first: its best ``FIRST`` tools, the
next ``4 x FIRST``, the next ``16 x FIRST``..., each layer in tool order (a binary
search finds a tool in it). A query reads the first layers and goes deeper only while
the bounds say a tool further down could still make its results (:mod:`.topk`).
:class:`HashedKeys` maps string keys to tools in two arrays.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["FIRST", "HashedKeys", "Postings", "Terms"]

#: tools in a list's first layer; each next layer is four times the one before
FIRST = 32


def _offsets() -> array[int]:
    out = array("I")
    if out.itemsize < 4:  # pragma: no cover (every platform tooldeck runs on has 4)
        out = array("L")
    return out


class Postings:
    """Posting lists, numbered in the order they were added.

    Weights: each list's own (``const`` None, the default); or every posting is worth
    ``const`` (``per_tool`` None), or ``const`` times ``per_tool[tool]``.
    """

    def __init__(
        self, tools: int, *, const: float | None = None, per_tool: Sequence[float] | None = None
    ) -> None:
        self.tools = tools
        self.code = "H" if tools <= 1 << 16 else "I"
        self.ids: array[int] = array(self.code)
        self.vals: array[float] = array("f")
        self.const = const
        self.per_tool = array("d", per_tool) if per_tool is not None else None
        #: list k's layers are layer_start[first[k]:first[k + 1] + 1] (their bounds in ids)
        self.first = _offsets()
        self.first.append(0)
        self.layer_start = _offsets()
        self.layer_start.append(0)
        #: each layer's highest weight
        self.layer_top: array[float] = array("d")
        #: numpy views of the arrays, made by the first query that reads them (:mod:`.dense`)
        self.views: Any = None

    def add(self, ids: Sequence[int], vals: Sequence[float] | None = None) -> int:
        """Append a list (``ids`` distinct); its number."""
        self.views = None  # an array viewed cannot grow
        if self.const is None:
            if vals is None or len(vals) != len(ids):
                raise ValueError("a weighted posting list needs one weight per tool")
            weights: Sequence[float] = array("f", vals)  # as they will be read back
        elif self.per_tool is None:
            weights = [self.const] * len(ids)
        else:
            c, per = self.const, self.per_tool
            weights = [c * per[i] for i in ids]
        if self.per_tool is None and self.const is not None:
            order = sorted(range(len(ids)), key=ids.__getitem__)
            cuts = [len(ids)]  # one weight: one layer
        else:
            order = sorted(range(len(ids)), key=lambda j: (-weights[j], ids[j]))
            cuts = []
            size, end = FIRST, 0
            while end < len(ids):
                end = min(end + size, len(ids))
                cuts.append(end)
                size *= 4
        begin = 0
        for end in cuts:
            layer = sorted(order[begin:end], key=ids.__getitem__)
            self.ids.extend(ids[j] for j in layer)
            if self.const is None:
                self.vals.extend(weights[j] for j in layer)
            self.layer_top.append(weights[order[begin]])
            self.layer_start.append(len(self.ids))
            begin = end
        self.first.append(len(self.layer_start) - 1)
        return len(self.first) - 2

    def __len__(self) -> int:
        return len(self.first) - 1

    def layers(self, k: int) -> int:
        return self.first[k + 1] - self.first[k]

    def _weights(self, lo: int, hi: int) -> Sequence[float]:
        if self.const is None:
            return self.vals[lo:hi]
        if self.per_tool is None:
            return [self.const] * (hi - lo)
        c, per = self.const, self.per_tool
        return [c * per[i] for i in self.ids[lo:hi]]

    def layer(self, k: int, d: int) -> Iterable[tuple[int, float]]:
        """(tool, weight) of layer ``d`` of list ``k``."""
        return zip(*self.layer_columns(k, d), strict=True)

    def layer_columns(self, k: int, d: int) -> tuple[Sequence[int], Sequence[float]]:
        """(tools, weights) of layer ``d`` of list ``k``."""
        at = self.first[k] + d
        lo, hi = self.layer_start[at], self.layer_start[at + 1]
        return self.ids[lo:hi], self._weights(lo, hi)

    def left(self, k: int, d: int) -> int:
        """How many tools layers ``d`` and deeper of list ``k`` hold."""
        return self.layer_start[self.first[k + 1]] - self.layer_start[self.first[k] + d]

    def items(self, k: int) -> Iterable[tuple[int, float]]:
        """(tool, weight) of list ``k``, layer by layer."""
        return zip(*self.columns(k), strict=True)

    def span(self, k: int) -> tuple[int, int]:
        """Where list ``k`` is in ``ids`` (and ``vals``): its first and past-last index."""
        return self.layer_start[self.first[k]], self.layer_start[self.first[k + 1]]

    def columns(self, k: int) -> tuple[Sequence[int], Sequence[float]]:
        """(tools, weights) of list ``k``, layer by layer."""
        lo, hi = self.layer_start[self.first[k]], self.layer_start[self.first[k + 1]]
        return self.ids[lo:hi], self._weights(lo, hi)

    def bound(self, k: int, d: int) -> float:
        """The highest weight in layers ``d`` and deeper of list ``k`` (0: none left)."""
        at = self.first[k] + d
        return self.layer_top[at] if at < self.first[k + 1] else 0.0

    def weight(self, k: int, tool: int) -> float:
        """Tool ``tool``'s weight in list ``k`` (0 when the list does not hold it)."""
        ids, starts = self.ids, self.layer_start
        for at in range(self.first[k], self.first[k + 1]):
            lo, hi = starts[at], starts[at + 1]
            j = bisect_left(ids, tool, lo, hi)
            if j < hi and ids[j] == tool:
                if self.const is None:
                    return self.vals[j]
                return self.const if self.per_tool is None else self.const * self.per_tool[tool]
        return 0.0

    def compact(self) -> None:
        """Let go of the arrays' spare room once every list is in."""
        self.views = None
        for name in ("ids", "vals", "first", "layer_start", "layer_top"):
            old = getattr(self, name)
            setattr(self, name, array(old.typecode, old))


class HashedKeys:
    """Which tools a string key names, as two arrays: the keys' hashes (32 bits), sorted,
    and their tools. Hashes collide: the caller checks each tool it gets back."""

    def __init__(self, pairs: Iterable[tuple[str, int]], tools: int) -> None:
        rows = sorted((hash(key) & 0xFFFFFFFF, tool) for key, tool in pairs)
        self.hashes = _offsets()
        self.hashes.extend(h for h, _ in rows)
        self.tools = array("H" if tools <= 1 << 16 else "I", (t for _, t in rows))

    def get(self, key: str) -> list[int]:
        h = hash(key) & 0xFFFFFFFF
        j = bisect_left(self.hashes, h)
        out = []
        while j < len(self.hashes) and self.hashes[j] == h:
            out.append(self.tools[j])
            j += 1
        return out

    def __len__(self) -> int:
        return len(self.hashes)


class Terms:
    """The index's terms, numbered in sorted order, in three arrays and one string: the
    terms' hashes (sorted, with each one's number) and the terms end to end. A dict of
    50,000 terms would take about 7 MB; this takes a fifth of that."""

    def __init__(self, terms: Sequence[str]) -> None:
        self._text = "".join(terms)
        self._ends = _offsets()
        end = 0
        for t in terms:
            end += len(t)
            self._ends.append(end)
        rows = sorted((hash(t), j) for j, t in enumerate(terms))
        self._hashes = array("q", (h for h, _ in rows))
        self._numbers = _offsets()
        self._numbers.extend(j for _, j in rows)

    def __len__(self) -> int:
        return len(self._ends)

    def term(self, j: int) -> str:
        return self._text[self._ends[j - 1] if j else 0 : self._ends[j]]

    def get(self, term: str) -> int | None:
        """The number of ``term`` (None: not a term of the index)."""
        h = hash(term)
        hashes = self._hashes
        j = bisect_left(hashes, h)
        while j < len(hashes) and hashes[j] == h:
            number = self._numbers[j]
            if self.term(number) == term:
                return number
            j += 1
        return None

    def __contains__(self, term: object) -> bool:
        return isinstance(term, str) and self.get(term) is not None
