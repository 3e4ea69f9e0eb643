"""Fusion settings for the quality and default modes, on ``tune`` only (issue 36, fifth round).

The fourth round found MiniLM alone ranking the fresh requests better than MiniLM fused
with BM25F at any weight (bench/RESULTS.md): "sum" fusion gives BM25F's best match a full
1.0 however weak its evidence, worth 1 / ``semantic_weight`` of cosine. This script scores,
on the tune requests only (the whole 2,033-tool catalog and ``tune-small``, see
``tune_recall.py``), the knobs that let the cosine decide when BM25F has little evidence:
``semantic_lexical_scale`` (BM25F divided by max(best, scale)), ``semantic_min_similarity``
(the cosine a tool BM25F does not match needs to be a candidate at all) and rank fusion
(RRF), next
to each encoder alone (weight 1000: BM25F only orders equal cosines). ``--subset conv``
keeps the tune requests of batch 7, the batch written as people talk (the closest tune
has to the fresh requests' style); ``--subset all`` (default) all of them.

Run: ``uv run --all-extras --group bench python bench/tune_fusion.py [--big] [--only ...]``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_search import CATALOG, QUERIES
from tooldeck.search import SearchConfig, ToolDoc, load_definitions
from tooldeck.search.embedding import VectorCache, quality_embedder
from tune_recall import CACHE, Memo, run_settings


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--big", action="store_true", help="also the whole catalog")
    parser.add_argument("--subset", choices=("all", "indirect"), default="all")
    parser.add_argument("--scales", default="2,4,8,16,32")
    parser.add_argument("--minsims", default="0.4,0.3,0.2")
    parser.add_argument("--weights", default="", help="MiniLM weights at min_similarity 0.2")
    args = parser.parse_args()
    docs = load_definitions(CATALOG)
    tune = [q for q in json.loads(QUERIES.read_text()) if q["split"] == "tune"]
    if args.subset == "indirect":
        tune = [q for q in tune if q.get("batch") in (6, 7)]
    print(f"{len(tune)} tune requests ({args.subset})", flush=True)
    by_ns: dict[str, list[ToolDoc]] = defaultdict(list)
    for d in docs:
        by_ns[d.namespace or ""].append(d)
    cache = VectorCache(CACHE)
    from tooldeck.search.docs import embedding_fields
    from tooldeck.search.wordllama import WordLlamaEmbedder

    texts = [t for d in docs for t in embedding_fields(d, 600)]
    wl = Memo(WordLlamaEmbedder.load(256), cache)
    wl.preload(texts)
    ml = Memo(quality_embedder(), cache)
    ml.preload(texts)
    scales = [float(s) for s in args.scales.split(",") if s]
    settings: dict[str, tuple[Any, SearchConfig]] = {
        "bm25f": (False, SearchConfig()),
        "WordLlama w=1.5 (default)": (wl, SearchConfig()),
        "WordLlama alone": (wl, SearchConfig(semantic_weight=1000.0)),
        "MiniLM w=3.0 (quality)": (ml, SearchConfig(semantic_weight=3.0)),
        "MiniLM alone": (ml, SearchConfig(semantic_weight=1000.0)),
    }
    for c in scales:
        settings[f"WordLlama w=1.5 scale={c:g}"] = (
            wl,
            SearchConfig(semantic_lexical_scale=c),
        )
        for w in (1.5, 3.0):
            settings[f"MiniLM w={w} scale={c:g}"] = (
                ml,
                SearchConfig(semantic_weight=w, semantic_lexical_scale=c),
            )
    for m in (float(x) for x in args.minsims.split(",") if x):
        # a tool BM25F does not match joins the candidates with a cosine of at least this
        settings[f"MiniLM w=3.0 min_similarity={m:g}"] = (
            ml,
            SearchConfig(semantic_weight=3.0, semantic_min_similarity=m),
        )
        settings[f"WordLlama w=1.5 min_similarity={m:g}"] = (
            wl,
            SearchConfig(semantic_min_similarity=m),
        )
    for w in (float(x) for x in args.weights.split(",") if x):
        # the quality mode's weight again, now with its candidate threshold
        settings[f"MiniLM w={w:g} min_similarity=0.2"] = (
            ml,
            SearchConfig(semantic_weight=w, semantic_min_similarity=0.2),
        )
    for k, w in ((20, 2.0), (60, 1.0), (60, 2.0), (60, 3.0)):
        settings[f"MiniLM rrf k={k} w={w}"] = (
            ml,
            SearchConfig(semantic_fusion="rrf", semantic_rrf_k=k, semantic_weight=w),
        )
    run_settings(settings, tune, by_ns, docs, only=args.only, big=args.big)


if __name__ == "__main__":
    main()
