"""Tool search over large catalogs: the compact posting lists and the pruned top k.

The index answers a query from the first layers of its posting lists and reads deeper
only when a tool further down could still make the results (tooldeck.search.topk). These
tests hold it to two references on random catalogs: scoring every tool one by one
(same weights, no pruning), and a plain BM25F written out here from the formula.
"""

from __future__ import annotations

import math
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tooldeck.search import SearchConfig, ToolIndex, topk
from tooldeck.search.bm25f import _FIELDS, Bm25fIndex
from tooldeck.search.postings import FIRST, HashedKeys, Postings

# a small vocabulary, so words are shared by many tools: lists run past their first layer
VERBS = ["list", "get", "create", "delete", "update", "search", "send", "remove", "find"]
NOUNS = ["file", "issue", "message", "user", "bucket", "channel", "event", "order", "page"]
FILLER = ["the", "a", "new", "old", "all", "one", "for", "with", "in", "repository", "slack"]
SERVICES = ["github", "slack", "drive", "jira", "s3"]


def _catalog(rng: random.Random, size: int) -> list[dict[str, Any]]:
    tools = []
    for i in range(size):
        verb, noun = rng.choice(VERBS), rng.choice(NOUNS)
        service = rng.choice(SERVICES)
        words = rng.choices(VERBS + NOUNS + FILLER, k=rng.randint(0, 12))
        params = {
            f"{rng.choice(NOUNS)}_{k}": {"type": "string", "description": rng.choice(FILLER)}
            for k in range(rng.randint(0, 3))
        }
        tools.append(
            {
                "name": f"{service}__{verb}_{noun}_{i}",
                "description": f"{verb.title()} a {noun}. {' '.join(words)}",
                "input_schema": {"type": "object", "properties": params},
                "namespace": service,
                "namespace_description": f"The {service} service",
            }
        )
    return tools


def _query(rng: random.Random) -> str:
    return " ".join(rng.choices(VERBS + NOUNS + FILLER + SERVICES, k=rng.randint(1, 7)))


def _every_tool(lexical: Bm25fIndex, query: str, k: int, n: int) -> list[tuple[int, float]]:
    """The reference: every tool scored one by one, best first, ties in catalog order."""
    addends = lexical.addends(query)
    scored = [(i, topk.score(addends, i)) for i in range(n)]
    ranked = sorted((s for s in scored if s[1] > 0), key=lambda s: (-s[1], s[0]))
    return ranked[:k]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    size=st.integers(1, 260),
    k=st.sampled_from([1, 5, 15, 50]),
)
def test_the_pruned_top_k_is_the_top_k_of_every_tool_scored(seed: int, size: int, k: int) -> None:
    rng = random.Random(seed)
    index = ToolIndex.from_definitions(_catalog(rng, size), semantic=False)
    lexical = index._lexical
    small, numpy = topk._SMALL, topk._NUMPY
    try:
        for _ in range(6):
            query = _query(rng)
            expected = _every_tool(lexical, query, k, size)
            topk._NUMPY = False  # the pure-Python paths
            topk._SMALL = 0  # always the layered, pruned path
            assert lexical.top(query, k) == expected, query
            topk._SMALL = 10**9  # always one pass over every list
            assert lexical.top(query, k) == expected, query
    finally:
        topk._SMALL, topk._NUMPY = small, numpy


PLAIN = SearchConfig(
    synonyms=False,
    name_coverage=0.0,
    exact_name_bonus=0.0,
    phrase_bonus=0.0,
    exact_word_coverage=0.0,
    join_words=False,
    stemming=False,
)


def _bm25f(index: ToolIndex, query: str) -> dict[str, float]:
    """BM25F from the formula: a term's pseudo frequency in a tool is the sum over fields
    of weight x count / (1 - b + b x length / average length); its score is
    idf x f / (k1 + f), idf = ln(1 + (N - df + 0.5) / (df + 0.5))."""
    cfg = index.config
    lexical = index._lexical
    weights = dict(zip(_FIELDS, [cfg.name_weight, cfg.summary_weight,
                                 cfg.description_weight, cfg.param_name_weight,
                                 cfg.param_description_weight, cfg.namespace_weight,
                                 cfg.namespace_description_weight], strict=True))  # fmt: skip
    fields = [lexical._fields(index.doc(name), index.summary(name)) for name in index.names]
    n = len(fields)
    average = {f: (sum(len(d[f]) for d in fields) / n) or 1.0 for f in _FIELDS}
    terms = list(dict.fromkeys(lexical._terms(query)))
    out: dict[str, float] = {}
    for name, doc in zip(index.names, fields, strict=True):
        total = 0.0
        for t in terms:
            df = sum(1 for d in fields if any(t in d[f] for f in _FIELDS if weights[f]))
            if not df:
                continue
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            freq = sum(
                weights[f] * doc[f].count(t) / (1 - cfg.b + cfg.b * len(doc[f]) / average[f])
                for f in _FIELDS
                if weights[f] and doc[f]
            )
            if freq:
                total += idf * freq / (cfg.k1 + freq)
        if total > 0:
            out[name] = total
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), size=st.integers(1, 120))
def test_plain_bm25f_scores_and_ranks_as_the_formula_says(seed: int, size: int) -> None:
    rng = random.Random(seed)
    index = ToolIndex.from_definitions(_catalog(rng, size), config=PLAIN, semantic=False)
    for _ in range(4):
        query = _query(rng)
        reference = _bm25f(index, query)
        hits = index.search(query, 5)
        assert len(hits) == min(5, len(reference))
        # weights are kept as float32: 7 significant digits
        for hit in hits:
            assert hit.score == pytest.approx(reference[hit.name], rel=1e-5, abs=1e-4)
        # no tool left out scores clearly more than one that is in
        if hits:
            least = min(reference[h.name] for h in hits)
            shown = {h.name for h in hits}
            assert all(s <= least * (1 + 1e-5) for n, s in reference.items() if n not in shown)


def test_a_posting_list_in_layers_finds_every_tool_and_bounds_what_is_left() -> None:
    rng = random.Random(7)
    tools = 70_000  # past 65,536: tool positions take four bytes
    ids = sorted(rng.sample(range(tools), 3000))
    weights = [rng.random() * 10 for _ in ids]
    store = Postings(tools)
    k = store.add(ids, weights)
    assert store.code == "I" and store.layers(k) == 5  # 32, 128, 512, 2,048, the rest
    assert store.left(k, 0) == 3000 and store.left(k, 1) == 3000 - FIRST
    as_read = {i: w for i, w in store.items(k)}
    assert sorted(as_read) == ids
    for i, w in zip(ids, weights, strict=True):
        assert as_read[i] == pytest.approx(w, rel=1e-6)  # float32
        assert store.weight(k, i) == as_read[i]
    assert store.weight(k, 1 + max(ids)) == 0.0
    read: set[int] = set()
    for d in range(store.layers(k)):
        layer = list(store.layer(k, d))
        assert [i for i, _ in layer] == sorted(i for i, _ in layer)  # tool order
        # everything not read yet weighs at most the bound
        assert max(w for _, w in layer) == store.bound(k, d)
        read |= {i for i, _ in layer}
        left = [w for i, w in as_read.items() if i not in read]
        assert max(left, default=0.0) <= store.bound(k, d + 1)
    assert read == set(ids) and store.bound(k, store.layers(k)) == 0.0
    # one weight for every tool of a list: no weights stored, one layer
    bonus = Postings(100, const=0.5)
    j = bonus.add([3, 1, 2])
    assert list(bonus.items(j)) == [(1, 0.5), (2, 0.5), (3, 0.5)] and len(bonus.vals) == 0
    with pytest.raises(ValueError, match="one weight per tool"):
        store.add([1, 2], [1.0])


def test_names_are_found_by_hash_and_checked() -> None:
    keys = HashedKeys([("getitem", 0), ("getitem", 1), ("other", 2)], 3)
    assert sorted(keys.get("getitem")) == [0, 1] and keys.get("missing") == []
    # names that normalise alike ("get-item", "get_item") stay apart
    index = ToolIndex.from_definitions(
        [{"name": "get-item", "description": "Get an item"}, {"name": "GetItem"}],
        semantic=False,
    )
    assert "get-item" in index and "GetItem" in index
    assert "get_item" not in index and "getitem" not in index and 3 not in index
    assert index.doc("GetItem").name == "GetItem"
    with pytest.raises(KeyError):
        index.doc("get_item")
    assert {h.name for h in index.search("get_item", 5)} == {"get-item", "GetItem"}


def test_synonym_lists_kept_merged_give_the_same_results_and_stay_in_their_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(topk, "_NUMPY", False)  # the pure-Python one pass keeps them
    rng = random.Random(11)
    tools = _catalog(rng, 200)
    queries = [_query(rng) for _ in range(60)] + ["delete the file", "find a user", "get a page"]
    cold = ToolIndex.from_definitions(tools, semantic=False)
    warm = ToolIndex.from_definitions(tools, semantic=False)
    kept = warm._lexical._merged
    for query in queries:  # warm: every query asked once before
        warm.search(query, 5)
    assert len(kept) > 0 and 0 < kept.held <= kept.budget
    for query in queries:
        expected = _every_tool(cold._lexical, query, 5, len(tools))
        assert warm._lexical.top(query, 5) == expected, query
        assert cold.search(query, 5) == warm.search(query, 5), query
    # a small budget: the least recently used lists go, the rest stay within it
    kept.budget = 60
    kept.put("x~", list(range(50)), [1.0] * 50)
    kept.put("y~", list(range(50, 100)), [1.0] * 50)
    assert kept.held <= 60 and kept.get("y~") is not None and kept.get("x~") is None
    kept.put("z~", list(range(61)), [1.0] * 61)  # longer than the budget: not kept
    assert kept.get("z~") is None and kept.held <= 60
