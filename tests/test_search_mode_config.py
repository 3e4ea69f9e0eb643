"""Each search mode ranks with the knobs tuned for its encoder (issue 36, fourth round).

The quality mode's fusion weight was tuned for MiniLM (``QUALITY_WEIGHT``), the default's
for WordLlama; an index (and so the gateway's ``tool_search``, which builds one with
``semantic="quality"`` under ``tooldeck serve --quality``) given a mode and no config
takes that mode's; a config given explicitly is used as it is.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tooldeck.search import SearchConfig, ToolIndex, load_definitions
from tooldeck.search.config import QUALITY_WEIGHT

TOOLS = Path(__file__).resolve().parent.parent / "bench" / "mcp_catalog" / "tools.json"


def test_each_mode_has_its_own_default_config() -> None:
    assert SearchConfig.for_semantic("quality").semantic_weight == QUALITY_WEIGHT
    assert SearchConfig().semantic_weight != QUALITY_WEIGHT
    for mode in ("auto", True, False):
        assert SearchConfig.for_semantic(mode) == SearchConfig()


def test_a_quality_index_ranks_with_the_quality_weight(tmp_path: Path) -> None:
    docs = load_definitions(TOOLS)
    index = ToolIndex(docs, semantic="quality", cache=tmp_path)
    assert index.config == SearchConfig.for_semantic("quality")
    mine = SearchConfig(semantic_weight=0.5)
    assert ToolIndex(docs, semantic="quality", cache=tmp_path, config=mine).config is mine
    # the weight is used: the fused score of the best hit moves with it
    query = "show me what changed in the repository since the last commit"
    tuned = index.search(query, 1)[0]
    low = ToolIndex(docs, semantic="quality", cache=tmp_path, config=mine).search(query, 1)[0]
    assert tuned.score != pytest.approx(low.score)


def test_the_default_mode_keeps_the_default_config(tmp_path: Path) -> None:
    index = ToolIndex(load_definitions(TOOLS), semantic="auto", cache=tmp_path)
    assert index.config == SearchConfig()


def test_the_gateway_catalog_under_quality_ranks_with_the_quality_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``tooldeck serve --quality`` gives its catalog ``semantic="quality"``: the index it
    builds for ``tool_search`` takes the quality mode's config."""
    from tooldeck import tool
    from tooldeck.gateway.catalog import CatalogView

    @tool
    def time__convert_time(source_timezone: str, time: str, target_timezone: str) -> str:
        """Convert time between timezones."""
        return time

    @tool
    def git__git_status(repo_path: str) -> str:
        """Shows the working tree status."""
        return repo_path

    monkeypatch.setenv("TOOLDECK_CACHE_DIR", str(tmp_path))
    view = CatalogView([time__convert_time, git__git_status], (), "quality")
    assert view.index.config == SearchConfig.for_semantic("quality")
    assert view.index.embedder is not None and "MiniLM" in view.index.embedder.name
    assert view.index.search("what time is it in Tokyo when it is noon here", 1)
