"""A query's constant costs cut (grouping, terms, hits): the same results as written out
from their definitions, on random catalogs with near-duplicate tools.

``search_groups`` compares precomputed numbers for the tools' name keys; the reference
here groups the ranked hits the way the definition says (tooldeck.search.alternatives),
recomputing each key as a set of words. ``addends`` reads a query's terms, their numbers
and its plain words from chunks kept between queries; the reference analyses the whole
query each time, as the index did before.
"""

from __future__ import annotations

import random
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tooldeck.search import SearchConfig, SearchHit, ToolIndex, bm25f, dense, topk
from tooldeck.search.alternatives import name_key
from tooldeck.search.bm25f import Bm25fIndex
from tooldeck.search.postings import Postings
from tooldeck.search.text import STOPWORDS, stem, words
from tooldeck.search.topk import Addend

VERBS = ["list", "get", "create", "delete", "send", "find", "update"]
NOUNS = ["file", "issue", "message", "branch", "user", "bucket", "Object"]
SPACES = ["github", "gitlab", "slack", "drive", "my-drive", "s3", None]
PROSE = ["timezone", "worklog", "pull", "request", "the", "of"]  # joined words, phrases


def _catalog(rng: random.Random, size: int) -> list[dict[str, Any]]:
    """Tools named alike across services (``github__create_branch``,
    ``gitlab__create_branch``, ``createBranch`` without a namespace), so groups form."""
    tools: dict[str, dict[str, Any]] = {}
    while len(tools) < size:
        verb, noun, space = rng.choice(VERBS), rng.choice(NOUNS), rng.choice(SPACES)
        shape = rng.randrange(4)
        base = (
            f"{verb}_{noun}",
            f"{verb}{noun.title()}",
            f"{verb}_{noun}_{rng.choice(SPACES[:-1])}",
            f"{noun}_{verb}",
        )[shape]
        name = f"{space}__{base}" if space and rng.random() < 0.8 else base
        description = f"{verb.title()} a {noun.lower()} " + " ".join(
            rng.choices(VERBS + [n.lower() for n in NOUNS] + PROSE, k=rng.randint(0, 6))
        )
        tools[name] = {"name": name, "description": description, "namespace": space}
    return list(tools.values())


def _groups(index: ToolIndex, query: str, limit: int, floor: bool) -> list[list[SearchHit]]:
    """``search_groups`` from the definition: rank ``max(3 x limit, limit + 10)``, then
    each hit joins the first group whose head has its name key (or, with tool vectors, a
    cosine of at least ``alternative_similarity`` with it) and none of its namespace, or
    starts a group while fewer than ``limit``."""
    hits = index.search(query, max(limit * 3, limit + 10), floor=floor)
    if limit <= 0:
        return []

    def key(name: str) -> frozenset[str]:
        doc = index.doc(name)
        return name_key(name, doc.namespace, list(words(name.split("__", 1)[-1], joined=False)))

    def near(a: str, b: str) -> bool:
        if not index.semantic:
            return False
        va, vb = index.vector_of([a, b])
        return float(va @ vb) >= index.config.alternative_similarity

    groups: list[list[SearchHit]] = []
    for hit in hits:
        space = index.doc(hit.name).namespace
        for group in groups:
            if space is None or any(index.doc(h.name).namespace == space for h in group):
                continue
            if key(hit.name) == key(group[0].name) or near(group[0].name, hit.name):
                group.append(hit)
                break
        else:
            if len(groups) < limit:
                groups.append([hit])
    return groups


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    size=st.integers(1, 150),
    limit=st.sampled_from([1, 2, 3, 5, 8]),
    floor=st.booleans(),
)
def test_groups_are_the_definitions(seed: int, size: int, limit: int, floor: bool) -> None:
    rng = random.Random(seed)
    tools = _catalog(rng, size)
    index = ToolIndex.from_definitions(tools, semantic=False)
    queries = [" ".join(rng.choices(VERBS + NOUNS + ["a", "the"], k=rng.randint(1, 5)))]
    queries += [rng.choice(tools)["name"], "branch", "zzqx", ""]
    for query in queries:
        expected = _groups(index, query, limit, floor)
        assert index.search_groups(query, limit, floor=floor) == expected, query
    assert index.search_groups("branch", 0) == []


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    size=st.integers(1, 80),
    similarity=st.sampled_from([0.3, 0.6, 0.9]),
)
def test_groups_with_tool_vectors_are_the_definitions(
    seed: int, size: int, similarity: float
) -> None:
    pytest.importorskip("wordllama")
    rng = random.Random(seed)
    config = SearchConfig(alternative_similarity=similarity)
    index = ToolIndex.from_definitions(_catalog(rng, size), config=config, cache=False)
    assert index.semantic
    for query in ["create a branch", "send a message to a user", "list files"]:
        assert index.search_groups(query, 4) == _groups(index, query, 4, False), query


def test_a_catalog_with_alternatives_groups_them() -> None:
    """The property test above can only fail if groups form: here they do."""
    rng = random.Random(3)
    index = ToolIndex.from_definitions(_catalog(rng, 120), semantic=False)
    groups = index.search_groups("create a branch", 5)
    assert any(len(g) > 1 for g in groups)
    assert groups == _groups(index, "create a branch", 5, False)
    # a namespace-less head takes alternatives; a namespace-less hit joins no group
    bare = ToolIndex.from_definitions(
        [
            {"name": "create_branch", "description": "Create a branch"},
            {
                "name": "github__create_branch",
                "description": "Create a branch",
                "namespace": "github",
            },
            {"name": "createBranch", "description": "Create a branch"},
        ],
        semantic=False,
    )
    names = [[h.name for h in g] for g in bare.search_groups("create branch", 5)]
    assert names == [["create_branch", "github__create_branch"], ["createBranch"]]


# -- a query's terms and addends -------------------------------------------------------
def _addends_by_definition(lexical: Bm25fIndex, query: str) -> list[Addend]:
    """``Bm25fIndex.addends`` as first written: terms from ``_terms``, numbers looked up
    one by one, words from ``words``; no chunk kept between queries."""
    terms = list(dict.fromkeys(lexical._terms(query)))[: lexical.config.max_query_terms]
    number = lexical._term_ids.get
    numbers = [number(t) for t in terms]
    store, expansions, merged = lexical._postings, lexical._expansions, lexical._merged
    plan: list[Addend] = []
    counted = set(numbers)
    for t, j in zip(terms, numbers, strict=True):
        expansion = expansions.get(t)
        if expansion is not None and expansion.single:
            plan.append(Addend(f"{t}~", expansion.members, merged))
            counted.update([m[1] for m in expansion.members])
        elif j is not None:
            plan.append(Addend(t, ((store, j, 1.0),)))
    for a, b in pairwise(terms):
        expansion = expansions.get(f"{a} {b}")
        if expansion is not None:
            synonyms = [m[1] for m in expansion.members]
            if counted.isdisjoint(synonyms):
                plan.append(Addend(f"{a} {b}~", expansion.members, merged))
                counted.update(synonyms)
    keys, count = list(lexical._pair_keys), len(lexical._term_ids)
    for (a, ja), (b, jb) in pairwise(zip(terms, numbers, strict=True)):
        if ja is not None and jb is not None and ja * count + jb in keys:
            j = keys.index(ja * count + jb)
            plan.append(Addend(f'"{a} {b}"', ((lexical._pairs, j, 1.0),)))
    plain = [w for w in words(query, joined=False) if w not in STOPWORDS]
    for w in dict.fromkeys(plain):
        if w in lexical._raw_words:
            plan.append(Addend(f"'{w}'", ((lexical._raw, lexical._raw_words[w], 1.0),)))
    for a, b in pairwise(plain) if lexical.config.join_words else ():
        if a + b in lexical._vocabulary:
            joined = stem(a + b) if lexical.config.stemming else a + b
            if (j := number(joined)) is not None and j not in counted:
                counted.add(j)
                plan.append(Addend(joined, ((store, j, 1.0),)))
    return plan


QUERY_WORDS = [*VERBS, *NOUNS, "a", "the", "pull", "request", "work", "log", "time", "zone"]
QUERY_WORDS += ["createBranch", "S3", "get-item", "x2y", "Ünïcode", "ß", "__", "v2", "s3__list"]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    chunks=st.lists(st.sampled_from(QUERY_WORDS) | st.text(max_size=10), max_size=30),
    separators=st.sampled_from([" ", "_", ", ", "-", "."]),
    stemming=st.booleans(),
)
def test_addends_are_the_definitions(
    seed: int, chunks: list[str], separators: str, stemming: bool
) -> None:
    rng = random.Random(seed)
    config = SearchConfig(stemming=stemming, max_query_terms=rng.choice([3, 48]))
    index = ToolIndex.from_definitions(_catalog(rng, 60), semantic=False, config=config)
    lexical = index._lexical
    query = separators.join(chunks)
    for _ in range(2):  # the second time from the chunks kept
        assert lexical.addends(query) == _addends_by_definition(lexical, query), query
    expected = _addends_by_definition(lexical, query)
    lexical._query_chunks.clear()
    assert lexical.addends(query) == expected


def test_chunks_kept_for_queries_stay_within_their_bound() -> None:
    index = ToolIndex.from_definitions(_catalog(random.Random(1), 40), semantic=False)
    lexical = index._lexical
    many = " ".join(f"word{i}x" for i in range(bm25f._QUERY_CHUNKS + 500))
    assert lexical.addends(many) == _addends_by_definition(lexical, many)
    assert len(lexical._query_chunks) == bm25f._QUERY_CHUNKS
    assert lexical.addends("create branch") == _addends_by_definition(lexical, "create branch")
    assert lexical.addends("create branch")  # not kept, still analysed


@pytest.mark.parametrize(
    "query",
    [
        "work log",
        "work the log",  # a stopword between: still one joined word
        "create a pull request for the time zone",
        "s3__list createBranch get-item v2 x2y",
        "list list LIST files file",
        "",
    ],
)
def test_addends_of_joined_words_phrases_and_identifiers(query: str) -> None:
    index = ToolIndex.from_definitions(_catalog(random.Random(2), 80), semantic=False)
    lexical = index._lexical
    expected = _addends_by_definition(lexical, query)
    assert lexical.addends(query) == expected
    assert lexical.addends(query) == expected  # from the chunks kept
    labels = {a.label for a in lexical.addends("work the log time zone")}
    assert "worklog" in labels  # a joined word is there to be found


# -- the numpy path sums a tool's addends in query order ---------------------------------
@pytest.mark.parametrize("tools", [1, 2, 3, 17, 300])
def test_numpy_sums_the_addends_one_after_another(tools: int) -> None:
    """A large weight, then many small ones: added in order each small one is lost (half
    a unit in the last place, rounded to even), summed in pairs they add up. The
    numpy row layout's one reduce over its rows must give the order's sum."""
    numpy = pytest.importorskip("numpy")
    store = Postings(tools)
    every = list(range(tools))
    big = Addend("big", ((store, store.add(every, [1e16] * tools), 1.0),))
    small = [Addend(f"s{j}", ((store, store.add(every, [0.5] * tools), 1.0),)) for j in range(12)]
    addends = [big, *small]
    first = float(numpy.float32(1e16))
    assert first + 6.0 != first  # the small ones summed first would show
    expected = [(i, first) for i in every]
    assert [(i, topk.score(addends, i)) for i in every] == expected
    assert topk.top(addends, tools) == expected  # numpy's row layout
    assert dense.top_dense(addends, tools) == expected
    monkey = pytest.MonkeyPatch()
    with monkey.context() as m:
        m.setattr(topk, "_NUMPY", False)
        assert topk.top(addends, tools) == expected
