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

from collections.abc import Hashable, Sequence
from typing import Any

__all__ = ["group_alternatives", "name_key"]


def name_key(name: str, namespace: str | None, words: Sequence[str]) -> frozenset[str]:
    """The words that say what a tool does, without its service's name."""
    drop = set((namespace or "").lower().replace("-", "_").split("_"))
    return frozenset(w for w in words if w not in drop) or frozenset(words)


def group_alternatives(
    ranked: Sequence[int],
    namespaces: Sequence[str | None],
    keys: Sequence[Hashable],
    vectors: Any,
    threshold: float,
    limit: int,
) -> list[list[int]]:
    """``ranked`` tools (best first) as at most ``limit`` groups of their positions in
    ``ranked``; each group's first is its best, the others are its alternatives, in rank
    order. ``namespaces`` and ``keys`` are the ranked tools' (by position): two keys are
    equal when the tools' name keys (:func:`name_key`) are."""
    groups: list[list[int]] = []
    spaces: list[set[str | None]] = []  # each group's namespaces
    # without vectors a tool joins only a group whose head has its key: the groups by
    # their head's key, in order, instead of every group tried
    by_key: dict[Hashable, list[int]] | None = {} if vectors is None else None
    for p, space in enumerate(namespaces):
        key = keys[p]
        placed = False
        if space is not None:
            candidates = range(len(groups)) if by_key is None else by_key.get(key, ())
            for g in candidates:
                held = spaces[g]
                if space in held:
                    continue
                head = groups[g][0]
                if key == keys[head] or (
                    vectors is not None
                    and float(vectors[ranked[head]] @ vectors[ranked[p]]) >= threshold
                ):
                    groups[g].append(p)
                    held.add(space)
                    placed = True
                    break
        if not placed:
            if len(groups) == limit:
                continue  # an alternative of a later group could still come; a new head not
            if by_key is not None:
                by_key.setdefault(key, []).append(len(groups))
            groups.append([p])
            spaces.append({space})
    return groups
