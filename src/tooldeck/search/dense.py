"""The best ``k`` tools by one pass over every list, in numpy, when numpy is importable.

:func:`tooldeck.search.topk.top` reads as little of the posting lists as it can, in
pure Python; a long query over a large catalog (15 to 25 terms, most with synonyms, whose
lists hold tens of thousands of tools) still reads most of them, one posting at a time.
Here every list of the query is read whole, by numpy, into a score per tool of the
catalog, and the ``k`` best are cut from it: the cost is a few array operations per list
and a pass over the scores, whatever the query.

The results are the ones :mod:`.topk` gives, bit for bit: a tool's score is its
addends' weights summed in query order (starting from 0.0, as the pure-Python paths do;
adding the 0.0 of an addend that misses the tool changes nothing), an addend of several
lists is the largest of their scaled weights, each weight is the float32 stored widened
to a float64 and then scaled, and equal scores are ranked in catalog order. The
property tests drive both paths on random catalogs and compare them for equality.

Two layouts, by size: a small catalog's query fills one row per addend (a few thousand
numbers) with one scatter and sums the rows one after another; a large catalog's adds
each addend into one row of scores in turn, so it never holds more than two rows of the
catalog's width.

numpy is imported when a query first needs it (it takes tens of milliseconds, and a
search never may); :func:`numpy_or_none` says whether it is there.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

from .postings import Postings

if TYPE_CHECKING:
    from .topk import Addend

__all__ = ["numpy_or_none", "top_dense"]

# a query's addends x the catalog's tools at most this many: one row per addend
_ROWS_AT_MOST = 1 << 16
# an addend of several lists holding fewer postings than this share of the catalog is
# added list by list; more, as a whole row
_SCATTER_BELOW = 0.25
# the k-th best is first bounded from every SAMPLE-th tool's score, above this many tools
_SAMPLED_FROM = 4096
_SAMPLE = 16


@cache
def numpy_or_none() -> Any:
    """numpy, imported (None when it is not installed)."""
    try:
        import numpy
    except ImportError:
        return None
    return numpy


def _views(store: Postings) -> tuple[Any, Any, Any, memoryview, memoryview | None]:
    """The store's tool positions, weights (None: a bonus list) and per-tool factors
    (None: none) as numpy arrays over the store's own memory (no copy); and its positions
    and weights as memoryviews (slicing one costs less than slicing an array)."""
    views = store.views
    if views is None:
        np = numpy_or_none()
        ids = np.frombuffer(store.ids, dtype=np.uint16 if store.code == "H" else np.uint32)
        vals = np.frombuffer(store.vals, dtype=np.float32) if store.const is None else None
        per = None if store.per_tool is None else np.frombuffer(store.per_tool, dtype=np.float64)
        weights = memoryview(store.vals) if store.const is None else None
        views = store.views = (ids, vals, per, memoryview(store.ids), weights)
    return views  # type: ignore[no-any-return]


def _list(store: Postings, k: int, scale: float) -> tuple[Any, Any]:
    """List ``k`` of ``store``: its tools (as indices) and their weights times ``scale``,
    as 64-bit floats (the values the pure-Python paths read)."""
    np = numpy_or_none()
    ids, vals, per, _, _ = _views(store)
    lo, hi = store.span(k)
    tools = ids[lo:hi].astype(np.intp)
    if vals is not None:
        weights = vals[lo:hi].astype(np.float64)
    elif per is None:
        weights = np.full(hi - lo, store.const, dtype=np.float64)
    else:
        weights = store.const * per[tools]
    if scale != 1.0:
        weights *= scale
    return tools, weights


def top_dense(addends: Sequence[Addend], k: int) -> list[tuple[int, float]]:
    """The ``k`` best (tool, score) pairs with a positive score, best first; equal scores
    in catalog order (:func:`tooldeck.search.topk.top`, by another way)."""
    if k <= 0 or not addends:
        return []
    n = addends[0].members[0][0].tools
    small = len(addends) * n <= _ROWS_AT_MOST
    return _best(_by_rows(addends, n) if small else _in_turn(addends, n), k)


def _by_rows(addends: Sequence[Addend], n: int) -> Any:
    """Scores with one row per addend: every list scattered at once (the largest weight
    per row and tool), then the rows summed in order.

    The weighted lists' slices are joined as bytes (one copy, no array object per list);
    the bonus lists (one weight, or one weight times a per-tool factor) are scattered with
    them (the largest weight of a row and tool does not depend on the order)."""
    np = numpy_or_none()
    positions: list[memoryview] = []  # the weighted lists' tools and weights
    weights: list[memoryview] = []
    starts: list[int] = []  # each weighted list's row, as its first index in the rows
    sizes: list[int] = []
    scales: list[float] = []
    bonus: list[tuple[int, Postings, int, int, float]] = []
    code = "H"
    for row, a in enumerate(addends):
        at = row * n
        for store, k, scale in a.members:
            first, bounds = store.first, store.layer_start
            lo, hi = bounds[first[k]], bounds[first[k + 1]]
            views = store.views or _views(store)
            if views[4] is None:
                bonus.append((at, store, lo, hi, scale))
                continue
            positions.append(views[3][lo:hi])
            weights.append(views[4][lo:hi])
            starts.append(at)
            sizes.append(hi - lo)
            scales.append(scale)
            code = store.code
    where = np.array(starts, dtype=np.intp).repeat(sizes)
    where += np.frombuffer(b"".join(positions), dtype=np.uint16 if code == "H" else np.uint32)
    w = np.frombuffer(b"".join(weights), dtype=np.float32).astype(np.float64)
    if scales.count(1.0) != len(scales):
        w *= np.array(scales).repeat(sizes)
    if bonus:
        wheres, ws = [where], [w]
        for at, store, lo, hi, scale in bonus:
            ids, _, per, _, _ = store.views
            tools = ids[lo:hi]
            wheres.append(np.add(tools, at, dtype=np.intp))
            b = np.full(hi - lo, store.const) if per is None else store.const * per[tools]
            if scale != 1.0:
                b *= scale
            ws.append(b)
        where, w = np.concatenate(wheres), np.concatenate(ws)
    rows = np.zeros((len(addends), n))
    np.maximum.at(rows.reshape(-1), where, w)
    if n == 1:  # one tool: numpy.add.reduce would pair the rows up
        scores = rows[0]
        for row in rows[1:]:
            scores += row
        return scores
    # in order: reducing the first axis of a C-ordered array, numpy's inner loop runs
    # along a row (the output's stride is not 0, so no pairwise summation), and the rows
    # are added one after another from the first (the property tests hold it to that)
    return np.add.reduce(rows, axis=0)


def _in_turn(addends: Sequence[Addend], n: int) -> Any:
    """Scores by adding each addend in turn into one row; an addend of several lists
    first takes each tool's largest weight in a second row."""
    np = numpy_or_none()
    scores = np.zeros(n)
    best = None
    for a in addends:
        if len(a.members) == 1:
            ids, w = _list(*a.members[0])
            np.add.at(scores, ids, w)  # a list holds a tool once
            continue
        if best is None:
            best = np.zeros(n)
        read = []
        for member in a.members:
            ids, w = _list(*member)
            np.maximum.at(best, ids, w)
            read.append(ids)
        if sum(map(len, read)) < _SCATTER_BELOW * n:
            for ids in read:  # a tool in several lists: added once, then zero
                np.add.at(scores, ids, best[ids])
                best[ids] = 0.0
        else:
            scores += best  # 0.0 for the tools the addend misses
            best.fill(0.0)
    return scores


def _best(scores: Any, k: int) -> list[tuple[int, float]]:
    """The ``k`` best positive scores, best first, equal scores by position."""
    np = numpy_or_none()
    n = len(scores)
    if n > _SAMPLED_FROM and n > _SAMPLE * 8 * k:
        # the k-th best of some tools is at most the k-th best of all: a floor that
        # leaves a handful of candidates instead of every tool scored
        sample = scores[::_SAMPLE]
        floor = np.partition(sample, len(sample) - k)[len(sample) - k]
        found = np.flatnonzero(scores >= floor) if floor > 0 else np.flatnonzero(scores)
        cut_above = 4 * k
    else:
        # the tools the query reached (a score is never negative), then their k-th best:
        # a few hundred numbers to partition instead of the whole catalog
        found = scores.nonzero()[0]
        cut_above = k
    values = scores[found]
    if len(found) > cut_above:
        kth = np.partition(values, len(found) - k)[len(found) - k]
        keep = values >= kth
        found, values = found[keep], values[keep]
    order = np.lexsort((found, -values))[:k]
    return list(zip(found[order].tolist(), values[order].tolist(), strict=True))
