"""``SearchConfig.semantic_lexical_scale``: in "sum" fusion BM25F is divided by the larger
of its best score and this, so a weak lexical match counts for less than a strong one
(issue 36, fifth round). At 0 the best match counts 1 however weak, as before.
"""

from __future__ import annotations

import pytest

from tooldeck.search import SearchConfig
from tooldeck.search.fusion import fuse

np = pytest.importorskip("numpy")


def _fused(best: float, scale: float) -> dict[int, float]:
    ranked = [(0, best), (1, best / 2)]
    lexical = dict(ranked)
    cosines = np.array([0.3, 0.6, 0.0], dtype=np.float32)
    config = SearchConfig(semantic_weight=1.0, semantic_lexical_scale=scale)
    return fuse(ranked, lexical.__getitem__, cosines, config)


def test_a_weak_lexical_match_no_longer_outweighs_the_cosine() -> None:
    # without a scale the best lexical match earns a full 1.0: tool 0 wins on BM25F
    before = _fused(2.0, 0.0)
    assert before[0] == pytest.approx(1.0 + 0.3) and before[1] == pytest.approx(0.5 + 0.6)
    assert max(before, key=before.__getitem__) == 0
    # a BM25F best of 2 under a scale of 8 counts 0.25: the closer meaning wins
    after = _fused(2.0, 8.0)
    assert after[0] == pytest.approx(0.25 + 0.3) and after[1] == pytest.approx(0.125 + 0.6)
    assert max(after, key=after.__getitem__) == 1


def test_a_strong_lexical_match_is_unchanged() -> None:
    assert _fused(10.0, 8.0) == pytest.approx(_fused(10.0, 0.0))
