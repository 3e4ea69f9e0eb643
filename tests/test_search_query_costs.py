"""A query's constant costs cut (grouping, terms, hits): the same results as written out
from their definitions, on random catalogs with near-duplicate tools.

``search_groups`` compares precomputed numbers for the tools' name keys; the reference
here groups the ranked hits the way the definition says (tooldeck.search.alternatives),
recomputing each key as a set of words.
"""

from __future__ import annotations

import random
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tooldeck.search import SearchHit, ToolIndex
from tooldeck.search.alternatives import name_key
from tooldeck.search.text import words

VERBS = ["list", "get", "create", "delete", "send", "find", "update"]
NOUNS = ["file", "issue", "message", "branch", "user", "bucket", "Object"]
SPACES = ["github", "gitlab", "slack", "drive", "my-drive", "s3", None]


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
            rng.choices(VERBS + [n.lower() for n in NOUNS], k=rng.randint(0, 6))
        )
        tools[name] = {"name": name, "description": description, "namespace": space}
    return list(tools.values())


def _groups(index: ToolIndex, query: str, limit: int, floor: bool) -> list[list[SearchHit]]:
    """``search_groups`` from the definition: rank ``max(3 x limit, limit + 10)``, then
    each hit joins the first group whose head has its name key and none of its
    namespace, or starts a group while fewer than ``limit``."""
    hits = index.search(query, max(limit * 3, limit + 10), floor=floor)
    if limit <= 0:
        return []

    def key(name: str) -> frozenset[str]:
        doc = index.doc(name)
        return name_key(name, doc.namespace, list(words(name.split("__", 1)[-1], joined=False)))

    groups: list[list[SearchHit]] = []
    for hit in hits:
        space = index.doc(hit.name).namespace
        for group in groups:
            if space is None or any(index.doc(h.name).namespace == space for h in group):
                continue
            if key(hit.name) == key(group[0].name):
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
