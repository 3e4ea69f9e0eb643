"""Near-duplicate tools from different services, shown as alternatives on one line.

Large catalogs offer the same action several times: GitHub's and GitLab's
``create_branch``, S3's ``PutObject`` and Cloud Storage's ``objects_insert``, a triangle
area in two math servers. Five ranked slots filled with one action in five services
leave no room for the request's other needs. Grouping them keeps one slot per action,
with the others named beside it, so the model still sees (and may call) each one.

Two hits are alternatives when they come from different namespaces and either have the
same name words once the namespace is stripped (``github__create_branch``,
``gitlab__create_branch``) or their tool vectors' cosine is at least
``SearchConfig.alternative_similarity``. A group never holds two tools of one namespace.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["group_alternatives", "name_key"]


def name_key(name: str, namespace: str | None, words: Sequence[str]) -> frozenset[str]:
    """The words that say what a tool does, without its service's name."""
    drop = set((namespace or "").lower().replace("-", "_").split("_"))
    return frozenset(w for w in words if w not in drop) or frozenset(words)


def group_alternatives(
    ranked: Sequence[int],
    namespaces: Mapping[int, str | None],
    keys: Mapping[int, frozenset[str]],
    vectors: Any,
    threshold: float,
    limit: int,
) -> list[list[int]]:
    """``ranked`` tools (best first) as at most ``limit`` groups; each group's first tool
    is its best, the others are its alternatives, in rank order."""
    groups: list[list[int]] = []
    for i in ranked:
        placed = False
        for group in groups:
            head = group[0]
            if namespaces[i] is None or any(namespaces[j] == namespaces[i] for j in group):
                continue
            if keys[i] == keys[head] or (
                vectors is not None and float(vectors[head] @ vectors[i]) >= threshold
            ):
                group.append(i)
                placed = True
                break
        if not placed:
            if len(groups) == limit:
                continue  # an alternative of a later group could still come; a new head not
            groups.append([i])
    return groups
