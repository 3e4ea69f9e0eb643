"""A query term and its synonyms as one list, kept a while after a query merged them.

A term with synonyms scores each tool the best of several posting lists (its own, and
each synonym's scaled down, :mod:`.bm25f`). The one-pass top k (:mod:`.topk`) merges
them for each query: two passes over every posting of every list. Stored merged for
every term they would take more room than all the other lists together, so
:class:`MergedLists` keeps the ones queries merged last: each tool's best weight (a
64-bit float, as the separate lists give it, so the scores are the same), up to a
number of postings in all, the least recently used dropped first. Queries to one
catalog share their verbs and nouns ("create", "list", "file", "message"), so many find
theirs merged.
"""

from __future__ import annotations

from array import array
from collections import OrderedDict
from threading import Lock

__all__ = ["MergedLists"]

Merged = tuple["array[int]", "array[float]"]  # (tools, their best weights)


class MergedLists:
    """Merged lists by key, most recently used last; ``budget`` postings at most."""

    def __init__(self, tools: int, budget: int) -> None:
        self.code = "H" if tools <= 1 << 16 else "I"
        self.budget = budget
        self._lists: OrderedDict[str, Merged] = OrderedDict()
        self._held = 0
        self._lock = Lock()

    def __len__(self) -> int:
        return len(self._lists)

    @property
    def held(self) -> int:
        """How many postings the lists kept hold."""
        return self._held

    def get(self, key: str) -> Merged | None:
        with self._lock:
            found = self._lists.get(key)
            if found is not None:
                self._lists.move_to_end(key)
            return found

    def put(self, key: str, tools: list[int], weights: list[float]) -> None:
        """Keep ``key``'s merged list (``tools`` distinct), dropping the least recently
        used lists to stay within the budget; a list longer than it is not kept."""
        size = len(tools)
        if size > self.budget:
            return
        kept = (array(self.code, tools), array("d", weights))
        with self._lock:
            if key in self._lists:
                return
            self._lists[key] = kept
            self._held += size
            while self._held > self.budget:
                _, (dropped, _) = self._lists.popitem(last=False)
                self._held -= len(dropped)
