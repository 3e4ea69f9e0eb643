"""The best ``k`` tools for a query, reading as little of the posting lists as it can.

A query's score for a tool is a sum of addends (:class:`Addend`): one per query term, and
one per bonus (phrase, exact name word, exact name). An addend is one posting list, or
the best of several (a term and its synonyms, each scaled). Summing every list of every
addend costs a pass over each list: at 50,000 tools a common word ("list", "create")
is in thousands of tools, and a query would add up tens of thousands of weights.

:func:`top` finds the same ``k`` tools, with the same scores, from far fewer:

1. it reads the first layer of each list (its highest weights, :mod:`.postings`): each
   tool read gets a partial score, a lower bound of its score;
2. a tool not read yet scores at most the sum of the tails (each list's highest weight
   not read yet); while that sum could still reach the ``k``-th best score known (the
   likeliest tools are scored exactly for it), the next layer of the list with the
   largest tail is read;
3. the tools read are then scored exactly (a binary search per layer) in the order of
   their upper bound, until the next bound is under the ``k``-th best exact score.

The scores are exact (each addend summed in query order, whatever the path), and ties
are broken by catalog position, so the result is the one a full pass gives.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from itertools import compress, repeat
from operator import ge, itemgetter
from typing import NamedTuple

from . import dense
from .merged import MergedLists
from .postings import Postings

__all__ = ["Addend", "score", "top"]

# bounds are compared with this much room, so rounding in the partial sums never prunes
# a tool that ties
_MARGIN = 1e-9
# a lookup in one layer costs about as much as reading this many postings
_LOOKUP_COST = 3
# a query whose lists hold at most this many postings in all reads them all
_SMALL = 3000
# with numpy importable, every query is one pass over its lists in numpy (.dense); off,
# the pure-Python paths below (the tests run both)
_NUMPY = True


class Addend(NamedTuple):
    """One term of a query's score: the best of ``members`` (posting list ``k`` of
    ``store``, times ``scale``) for each tool; ``label`` names it in ``explain``."""

    label: str
    members: tuple[tuple[Postings, int, float], ...]
    #: where the one-pass top k keeps this addend's lists merged (by ``label``)
    merged: MergedLists | None = None

    def weight(self, tool: int) -> float:
        best = 0.0
        for store, k, scale in self.members:
            w = store.weight(k, tool)
            if w:
                w *= scale
                if w > best:
                    best = w
        return best


def score(addends: Sequence[Addend], tool: int) -> float:
    """``tool``'s score: its addends' weights, summed in order."""
    total = 0.0
    for a in addends:
        total += a.weight(tool)
    return total


class _Reading:
    """How far one addend's lists have been read, and what they gave."""

    __slots__ = ("addend", "depths", "exact", "seen", "tail")

    def __init__(self, addend: Addend) -> None:
        self.addend = addend
        self.depths = [0] * len(addend.members)
        #: tool -> the addend's weight so far (its weight, once ``exact``)
        self.seen: dict[int, float] = {}
        # one list: a tool read is a tool whose weight is known
        self.exact = len(addend.members) == 1
        self.tail = 0.0

    def _bounds(self) -> list[float]:
        return [
            store.bound(k, d) * scale
            for (store, k, scale), d in zip(self.addend.members, self.depths, strict=True)
        ]

    def left(self) -> tuple[int, int]:
        """(tools, layers) not read yet."""
        tools = layers = 0
        for (store, k, _), d in zip(self.addend.members, self.depths, strict=True):
            tools += store.left(k, d)
            layers += store.layers(k) - d
        return tools, layers

    def read(self, partial: dict[int, float], everything: bool = False) -> None:
        """Read the next layer of the member with the highest bound left (the first
        layer of every member, the first time). ``everything``: read every layer left,
        for the tools in ``partial`` only (the others are out of the running)."""
        bounds = self._bounds()
        if everything or not self.seen:
            which = [m for m, b in enumerate(bounds) if b]
        else:
            which = [max(range(len(bounds)), key=bounds.__getitem__)]
        seen = self.seen
        get = partial.get
        if len(bounds) == 1:  # one list: no tool is read twice
            self._read_one(partial, everything)
            which = []
        for m in which:
            store, k, scale = self.addend.members[m]
            last = store.layers(k) if everything else self.depths[m] + 1
            for d in range(self.depths[m], last):
                for i, w in store.layer(k, d):
                    if everything and i not in partial:
                        continue
                    if scale != 1.0:
                        w *= scale
                    before = seen.get(i)
                    if before is None:
                        seen[i] = w
                        partial[i] = get(i, 0.0) + w
                    elif w > before:  # a better synonym
                        seen[i] = w
                        partial[i] += w - before
            self.depths[m] = last
        self.tail = max(self._bounds(), default=0.0)
        if not self.tail:
            self.exact = True

    def _read_one(self, partial: dict[int, float], everything: bool) -> None:
        """:meth:`read` for an addend of one list."""
        store, k, scale = self.addend.members[0]
        seen = self.seen
        get = partial.get
        last = store.layers(k) if everything else self.depths[0] + 1
        for d in range(self.depths[0], last):
            ids, weights = store.layer_columns(k, d)
            if scale != 1.0:
                weights = [w * scale for w in weights]
            if everything:
                for i, w in zip(ids, weights, strict=True):
                    if i in partial:
                        seen[i] = w
                        partial[i] += w
            else:
                seen.update(zip(ids, weights, strict=True))
                for i, w in zip(ids, weights, strict=True):
                    partial[i] = get(i, 0.0) + w
        self.depths[0] = last


def _everything(addends: Sequence[Addend], k: int) -> list[tuple[int, float]]:
    """:func:`top` by one pass over every list, into a score per tool of the catalog."""
    if not addends:
        return []
    n = addends[0].members[0][0].tools
    scores = [0.0] * n
    touched: set[int] = set()
    best: list[float] = []  # an addend's best weight per tool, while its lists are read
    for a in addends:
        members = a.members
        store, j, scale = members[0]
        ids, weights = store.columns(j)
        if scale != 1.0:
            weights = [w * scale for w in weights]
        if len(members) == 1:
            for i, w in zip(ids, weights, strict=True):
                scores[i] += w
            touched.update(ids)
            continue
        kept = a.merged.get(a.label) if a.merged is not None else None
        if kept is not None:
            for i, w in zip(*kept, strict=True):
                scores[i] += w
            touched.update(kept[0])
            continue
        if not best:
            best = [0.0] * n
        for i, w in zip(ids, weights, strict=True):
            best[i] = w
        read = [ids]
        for store, j, scale in members[1:]:
            ids, weights = store.columns(j)
            for i, w in zip(ids, weights, strict=True):
                w *= scale
                if w > best[i]:
                    best[i] = w
            read.append(ids)
        tools: list[int] = []
        merged: list[float] = []
        for ids in read:  # add each tool's best, once, and leave ``best`` all zeros
            for i in ids:
                w = best[i]
                if w:
                    scores[i] += w
                    best[i] = 0.0
                    tools.append(i)
                    merged.append(w)
        touched.update(tools)
        if a.merged is not None:
            a.merged.put(a.label, tools, merged)
    return _ranked(scores, touched, k)


def _ranked(scores: list[float], touched: set[int], k: int) -> list[tuple[int, float]]:
    """The ``k`` best of ``touched`` by ``scores`` (positive only), best first, equal
    scores in catalog order; the passes over every tool run in C."""
    tools = list(touched)
    if len(tools) > k:
        values = list(itemgetter(*tools)(scores))
        tools = list(compress(tools, map(ge, values, repeat(_kth(values, k)))))
    tools.sort()
    tools.sort(key=scores.__getitem__, reverse=True)  # stable: equal scores by position
    return [(i, scores[i]) for i in tools[:k] if scores[i] > 0]


def _kth(values: list[float], k: int) -> float:
    """The ``k``-th largest of ``values`` (0 with fewer)."""
    return heapq.nlargest(k, values)[-1] if len(values) >= k else 0.0


def top(addends: Sequence[Addend], k: int) -> list[tuple[int, float]]:
    """The ``k`` best (tool, score) pairs with a positive score, best first; equal scores
    in catalog order."""
    if k <= 0 or not addends:
        return []
    if _NUMPY and dense.numpy_or_none() is not None:
        return dense.top_dense(addends, k)
    if sum(s.left(j, 0) for a in addends for s, j, _ in a.members) <= _SMALL:
        return _everything(addends, k)
    readings = [_Reading(a) for a in addends]
    partial: dict[int, float] = {}
    for r in readings:
        r.read(partial)

    known: dict[int, float] = {}

    def exact(i: int) -> float:
        if i in known:
            return known[i]
        total = 0.0
        for r in readings:
            if r.exact:
                total += r.seen.get(i, 0.0) if not r.tail or i in r.seen else r.addend.weight(i)
            else:
                total += r.addend.weight(i)
        known[i] = total
        return total

    # a tool no list has given yet scores at most the sum of the tails: read deeper, the
    # largest tail first, until that sum is under the k-th best score known
    threshold = 0.0
    while True:
        open_sum = sum(r.tail for r in readings)
        if not open_sum:
            break
        values = list(partial.values())  # the likeliest: the best partial scores
        cut = _kth(values, k)
        likely = list(compress(partial, map(ge, values, repeat(cut))))[: 2 * k]
        threshold = max(threshold, _kth([exact(i) for i in likely], k))
        if open_sum < threshold * (1 - _MARGIN):
            break
        deepest = max(readings, key=lambda r: r.tail)
        deepest.read(partial)
    # the tools still in the running: a list left is read to its end when that costs less
    # than looking each of them up in it (a lookup is a binary search per layer)
    open_readings = [r for r in readings if r.tail]
    least = threshold * (1 - _MARGIN) - sum(r.tail for r in open_readings)
    running = [i for i, p in partial.items() if p >= least]
    for r in sorted(open_readings, key=lambda r: r.left()[0]):
        tools, layers = r.left()
        if tools < _LOOKUP_COST * layers * len(running):
            r.read(partial, everything=True)
            least = threshold * (1 - _MARGIN) - sum(r.tail for r in readings)
            running = [i for i in running if partial[i] >= least]
    open_readings = [r for r in readings if r.tail]
    # every tool in the running, by its upper bound; score exactly until no bound can
    # reach the k-th best
    bounds: list[tuple[float, int]] = []
    for i in running:
        p = partial[i]
        for r in open_readings:
            if not (r.exact and i in r.seen):
                p += r.tail
        bounds.append((p, i))
    bounds.sort(key=lambda b: -b[0])
    best: list[tuple[float, int]] = []  # (score, -tool): a min-heap of the k best
    for bound, i in bounds:
        if len(best) == k and bound < best[0][0] * (1 - _MARGIN):
            break
        total = exact(i)
        if total <= 0:
            continue
        item = (total, -i)
        if len(best) < k:
            heapq.heappush(best, item)
        elif item > best[0]:
            heapq.heapreplace(best, item)
    best.sort(reverse=True)
    return [(-m, s) for s, m in best]
