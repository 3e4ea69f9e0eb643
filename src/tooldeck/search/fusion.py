"""Fusing the lexical and the semantic ranking into one.

BM25F is sharp when the query uses the tool's words and blind when it does not; cosine
between embeddings is the reverse. Candidates are BM25F's best ``semantic_pool`` and the
``semantic_pool`` tools nearest to the query (a cosine-only candidate needs
``semantic_min_similarity``, so nonsense finds nothing), scored by one of:

- ``"sum"``: BM25F / best BM25F + ``semantic_weight`` x cosine;
- ``"rrf"``: reciprocal rank fusion, 1 / (k + BM25F rank) + ``semantic_weight`` /
  (k + cosine rank), ranks over the whole catalog.

Which one, with which weight, was chosen on the tune queries (bench/RESULTS.md).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from typing import Any

from .config import SearchConfig
from .embedding import top

__all__ = ["fuse"]


def fuse(lexical: Mapping[int, float], cosines: Any, config: SearchConfig) -> dict[int, float]:
    """Candidate tool -> fused score (higher is better)."""
    pool = config.semantic_pool
    lex_top = heapq.nlargest(pool, lexical, key=lexical.__getitem__)
    lex_top = [i for i in lex_top if lexical[i] > 0]
    chosen = set(lex_top)
    floor = config.semantic_min_similarity
    near = [i for i in top(cosines, pool) if i not in chosen and cosines[i] >= floor]
    weight = config.semantic_weight
    if config.semantic_fusion == "rrf":
        import numpy as np

        k = config.semantic_rrf_k
        ordered = np.sort(cosines)
        n = len(ordered)
        candidates = lex_top + near
        above = n - np.searchsorted(ordered, cosines[candidates], side="right")
        fused = {i: weight / (k + 1 + int(a)) for i, a in zip(candidates, above, strict=True)}
        for rank, i in enumerate(lex_top, 1):
            fused[i] += 1.0 / (k + rank)
        return fused
    best = lexical[lex_top[0]] if lex_top else 0.0
    scale = 1.0 / best if best > 0 else 0.0
    fused = {i: lexical[i] * scale + weight * float(cosines[i]) for i in lex_top}
    for i in near:
        fused[i] = lexical.get(i, 0.0) * scale + weight * float(cosines[i])
    return fused
