"""The quality mode admits tools BM25F does not match at MiniLM's own cosine threshold
(issue 36, fifth round).

A tool BM25F does not match becomes a candidate only with a cosine of at least
``semantic_min_similarity``; the default's 0.5 was set for WordLlama, and MiniLM puts a
request worded as people talk and its tool at 0.3 to 0.5, so the quality mode never
ranked them (it lost to MiniLM alone on the fresh requests). The quality mode's config
now uses ``QUALITY_MIN_SIMILARITY``, chosen on tune (bench/RESULTS.md).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tooldeck.search import SearchConfig, ToolIndex, load_definitions
from tooldeck.search.config import QUALITY_MIN_SIMILARITY

TOOLS = Path(__file__).resolve().parent.parent / "bench" / "mcp_catalog" / "tools.json"


def test_the_quality_mode_has_its_own_candidate_threshold() -> None:
    quality = SearchConfig.for_semantic("quality")
    assert quality.semantic_min_similarity == QUALITY_MIN_SIMILARITY
    assert SearchConfig().semantic_min_similarity > QUALITY_MIN_SIMILARITY
    assert SearchConfig.for_semantic("auto").semantic_min_similarity == 0.5


def test_a_paraphrase_bm25f_misses_is_ranked_by_meaning(tmp_path: Path) -> None:
    """ "wipe the link between two people" shares no word with delete_relations ("delete
    relations between entities"): only its cosine can rank it, and that cosine is under
    the default's threshold."""
    docs = load_definitions(TOOLS)
    index = ToolIndex(docs, semantic="quality", cache=tmp_path)
    query = "wipe the link between two people"
    assert "memory__delete_relations" in [h.name for h in index.search(query, 3)]
    gated = replace(index.config, semantic_min_similarity=0.5)
    before = ToolIndex(docs, semantic="quality", cache=tmp_path, config=gated)
    assert "memory__delete_relations" not in [h.name for h in before.search(query, 3)]
