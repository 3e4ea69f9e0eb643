"""Fusing the lexical and the semantic ranking into one.

BM25F is sharp when the query uses the tool's words and blind when it does not; cosine
between embeddings is the reverse. Candidates are BM25F's best ``semantic_pool`` and the
``semantic_pool`` tools nearest to the query (a cosine-only candidate needs
``semantic_min_similarity``, so nonsense finds nothing), scored by one of:

- ``"sum"``: BM25F / max(best BM25F, ``semantic_lexical_scale``) + ``semantic_weight``
  x cosine, a cosine under
  ``semantic_noise_floor`` counted as the floor (near-zero cosines are noise: they must
  not order tools the lexical side ties);
- ``"rrf"``: reciprocal rank fusion, 1 / (k + BM25F rank) + ``semantic_weight`` /
  (k + cosine rank), ranks over the whole catalog.

Which one, with which weight, was chosen on the tune queries (bench/RESULTS.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .._extras import needs_extra
from .config import SearchConfig
from .embedding import top

__all__ = ["fuse"]


def fuse(
    ranked: Sequence[tuple[int, float]],
    lexical: Callable[[int], float],
    cosines: Any,
    config: SearchConfig,
) -> dict[int, float]:
    """Candidate tool -> fused score (higher is better).

    ``ranked``: BM25F's best ``semantic_pool`` (tool, score) pairs, best first (positive
    scores only); ``lexical``: any tool's BM25F score."""
    pool = config.semantic_pool
    lex_top = [i for i, _ in ranked[:pool]]
    scores = dict(ranked)
    chosen = set(lex_top)
    floor = config.semantic_min_similarity
    near = [i for i in top(cosines, pool) if i not in chosen and cosines[i] >= floor]
    weight = config.semantic_weight
    if config.semantic_fusion == "rrf":
        with needs_extra("semantic"):  # embeddings exist: their extra brought numpy
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
    best = max(scores[lex_top[0]] if lex_top else 0.0, config.semantic_lexical_scale)
    scale = 1.0 / best if best > 0 else 0.0
    noise = config.semantic_noise_floor
    fused = {i: scores[i] * scale + weight * max(noise, float(cosines[i])) for i in lex_top}
    for i in near:
        fused[i] = lexical(i) * scale + weight * max(noise, float(cosines[i]))
    return fused
