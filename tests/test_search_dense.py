"""The top k in numpy (tooldeck.search.dense): the same ranked tools and scores as scoring
every tool one by one, and as the pure-Python paths, on random catalogs and queries.

Scores are compared for equality, not within a tolerance: the numpy path sums the same
float64 numbers in the same order, so a difference in the last bit (which could swap two
tools of nearly equal score) is a failure. Both of its layouts (one row per addend; one
row, addend after addend) and both ways of adding an addend of several lists are driven,
through the real index (``ToolIndex.search``, ``search_groups``, the exact-name bonus).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from test_search_scale import _catalog, _every_tool, _query
from tooldeck.search import SearchHit, ToolIndex, dense, topk
from tooldeck.search.postings import Postings

numpy = pytest.importorskip("numpy")


@contextmanager
def _paths(**values: Any) -> Iterator[None]:
    """Set the paths' switches (``numpy`` in topk, the rest in dense) for a block."""
    where = {"numpy": (topk, "_NUMPY")}
    old = {}
    for name, value in values.items():
        module, attr = where.get(name, (dense, name))
        old[module, attr] = getattr(module, attr)
        setattr(module, attr, value)
    try:
        yield
    finally:
        for (module, attr), value in old.items():
            setattr(module, attr, value)


# the numpy path's layouts: by rows; in turn, adding a many-list addend sparsely or densely
LAYOUTS = [
    {"_ROWS_AT_MOST": 1 << 40},
    {"_ROWS_AT_MOST": 0, "_SCATTER_BELOW": 0.0},
    {"_ROWS_AT_MOST": 0, "_SCATTER_BELOW": 1e9, "_SAMPLED_FROM": 0},
]


def _queries(rng: random.Random, tools: list[dict[str, Any]]) -> list[str]:
    out = [_query(rng) for _ in range(5)]
    named = rng.choice(tools)["name"]
    out.append(f"{_query(rng)} {named}")  # an exact name: the bonus list, built per query
    out.append(" ".join(_query(rng) for _ in range(6)))  # long: many addends
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    size=st.integers(1, 400),
    k=st.sampled_from([1, 3, 5, 15, 50]),
)
def test_numpy_top_k_is_every_tool_scored_exactly(seed: int, size: int, k: int) -> None:
    rng = random.Random(seed)
    tools = _catalog(rng, size)
    index = ToolIndex.from_definitions(tools, semantic=False)
    lexical = index._lexical
    for query in _queries(rng, tools):
        expected = _every_tool(lexical, query, k, size)
        with _paths(numpy=False):
            pure = lexical.top(query, k, exact_bonus=True)
            pure_hits = index.search(query, k), index.search_groups(query, 3, floor=True)
        for layout in LAYOUTS:
            with _paths(**layout):
                assert lexical.top(query, k) == expected, (query, layout)
                assert lexical.top(query, k, exact_bonus=True) == pure, (query, layout)
                hits = index.search(query, k), index.search_groups(query, 3, floor=True)
                assert hits == pure_hits, (query, layout)


def test_a_large_catalog_gives_the_pure_python_results_on_every_path() -> None:
    """Past the row layout's size, with the sampled floor of the k-th best, on queries
    whose lists hold thousands of tools."""
    rng = random.Random(5)
    tools = _catalog(rng, 6000)
    index = ToolIndex.from_definitions(tools, semantic=False)
    lexical = index._lexical
    queries = _queries(rng, tools) + _queries(rng, tools) + ["list", "zzz unknown", ""]
    assert any(len(lexical.addends(q)) * len(tools) > dense._ROWS_AT_MOST for q in queries)
    for query in queries:
        with _paths(numpy=False):
            expected = [lexical.top(query, k, exact_bonus=True) for k in (1, 5, 15, 200)]
            found = index.search_groups(query, 5, floor=True)
        for layout in [{}, *LAYOUTS]:
            with _paths(**layout):
                got = [lexical.top(query, k, exact_bonus=True) for k in (1, 5, 15, 200)]
                assert got == expected, (query, layout)
                assert index.search_groups(query, 5, floor=True) == found


def test_ties_are_ranked_in_catalog_order() -> None:
    """Tools with the same text score the same: the earlier one first, on every path."""
    tools = [
        {"name": f"copy_{i}", "description": "Send a message to a channel."} for i in range(300)
    ]
    index = ToolIndex.from_definitions(tools, semantic=False)
    with _paths(numpy=False):
        expected = index.search("send a message", 7)
    assert [h.name for h in expected] == [f"copy_{i}" for i in range(7)]
    for layout in LAYOUTS:
        with _paths(**layout):
            assert index.search("send a message", 7) == expected


def test_hostile_queries_and_limits() -> None:
    rng = random.Random(9)
    tools = _catalog(rng, 300)
    index = ToolIndex.from_definitions(tools, semantic=False)
    words = " ".join(rng.choices(["list", "file", "send", "x" * 500, "é", "__", "0"], k=3000))
    for query, k in [(words, 5), ("list file", 10**6), ("list", 1), ("\x00 \u200b", 5)]:
        with _paths(numpy=False):
            expected = index.search(query, k)
        assert index.search(query, k) == expected
    assert index.search("list file", 0) == [] and index._lexical.top("", 5) == []


def test_queries_from_threads_at_once_get_their_own_results() -> None:
    rng = random.Random(3)
    tools = _catalog(rng, 1500)
    index = ToolIndex.from_definitions(tools, semantic=False)
    queries = [_query(rng) for _ in range(40)]
    with _paths(numpy=False):
        expected = [index.search(q, 5) for q in queries]
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda q: index.search(q, 5), queries * 4))
    assert got == expected * 4


def test_a_list_added_after_a_query_read_the_store() -> None:
    """numpy views share the store's memory; an array viewed cannot grow, so adding a
    list lets go of them first."""
    store = Postings(10)
    k = store.add([1, 2, 3], [0.5, 1.5, 1.0])
    addend = topk.Addend("t", ((store, k, 1.0),))
    assert dense.top_dense([addend], 2) == [(2, 1.5), (3, 1.0)]
    assert store.views is not None
    j = store.add([4], [2.0])
    assert dense.top_dense([topk.Addend("u", ((store, j, 2.0),)), addend], 9) == [
        (4, 4.0),
        (2, 1.5),
        (3, 1.0),
        (1, 0.5),
    ]


_WITHOUT_NUMPY = """
import json, sys
sys.modules["numpy"] = None  # not installed
from tooldeck.search import ToolIndex, dense
tools, queries = json.load(sys.stdin)
index = ToolIndex.from_definitions(tools, semantic=False)
assert dense.numpy_or_none() is None
print(json.dumps([[list(h) for h in index.search(q, 5)] for q in queries]))
"""


def test_without_numpy_the_same_results() -> None:
    """numpy is optional: without it the pure-Python paths answer, with the same hits."""
    rng = random.Random(21)
    tools = _catalog(rng, 800)
    queries = [_query(rng) for _ in range(30)] + [tools[17]["name"]]
    index = ToolIndex.from_definitions(tools, semantic=False)
    assert dense.numpy_or_none() is numpy
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_NUMPY],
        input=json.dumps([tools, queries]),
        capture_output=True,
        text=True,
        check=True,
    )
    got = [[SearchHit(*h) for h in hits] for hits in json.loads(done.stdout)]
    assert got == [index.search(q, 5) for q in queries]
