"""Grid search of the semantic side's settings on the ``tune`` queries only.

Never reads another split. Prints one line per setting: overall / single-tool /
multi-tool (list way) recall@5, R@1 and MRR, sorted by overall recall@5.

Run: ``uv run python bench/tune_search.py [--grid text|fusion|rrf|pool|alternatives|stem]``
(``--onnx-model DIR`` tunes the fusion over an ONNX encoder instead of WordLlama).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_search import CATALOG, QUERIES, evaluate, flat, grouped
from tooldeck.search import SearchConfig, ToolIndex, load_definitions
from tooldeck.search.embedding import Embedder, VectorCache


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--grid", default="text")
    parser.add_argument("--onnx-model", type=Path, default=None)
    args, rest = parser.parse_known_args()
    docs = load_definitions(CATALOG)
    tune = [q for q in json.loads(QUERIES.read_text()) if q["split"] == "tune"]
    from tooldeck.search.wordllama import WordLlamaEmbedder

    embedders: dict[int, Embedder] = {}

    def embedder(dim: int) -> Embedder:
        if args.onnx_model:
            from tooldeck.search.onnx import OnnxEmbedder

            return embedders.setdefault(0, OnnxEmbedder(args.onnx_model))
        if dim not in embedders:
            embedders[dim] = WordLlamaEmbedder.load(dim)
        return embedders[dim]

    cache = VectorCache(Path("/tmp/tune-search-cache"))
    grids: dict[str, dict[str, list[Any]]] = {
        "text": {
            "semantic_text": ["summary", "description", "full"],
            "semantic_text_chars": [0, 300, 600, 1200],
            "dim": [128, 256],
        },
        "fusion": {
            "semantic_weight": [0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0],
            "semantic_min_similarity": [0.3, 0.5, 0.6],
            "dim": [128, 256],
        },
        "rrf": {
            "semantic_fusion": ["rrf"],
            "semantic_rrf_k": [5, 10, 20, 40, 60],
            "semantic_weight": [0.5, 0.75, 1.0, 1.5, 2.0],
            "dim": [256],
        },
        "pool": {
            "semantic_pool": [20, 30, 50, 100, 200],
            "semantic_weight": [0.5, 1.0],
            "dim": [256],
        },
        "fields": {
            "semantic_weight": [0.25, 0.5, 0.75, 1.0, 1.5],
            "dim": [128, 256],
        },
        "alternatives": {
            "alternatives": [False, True],
            "alternative_similarity": [0.8, 0.85, 0.9, 0.95, 1.01],
            "dim": [256],
        },
        "bm25": {"semantic": [False], "dim": [256]},
        "onnx-weight": {"semantic_weight": [3.0, 4.0, 6.0, 8.0], "dim": [0]},
        "onnx": {
            "semantic_text": ["full", "summary", "fields"],
            "semantic_weight": [0.5, 1.0, 1.5, 2.0, 3.0],
            "dim": [0],
        },
    }
    grid = grids[args.grid]
    extra = dict(item.split("=", 1) for item in rest)
    rows = []
    keys = list(grid)
    for values in itertools.product(*(grid[k] for k in keys)):
        setting = dict(zip(keys, values, strict=True))
        dim = setting.pop("dim")
        semantic = setting.pop("semantic", True)
        fields = {f.name: f.type for f in dataclasses.fields(SearchConfig)}
        for k, v in extra.items():
            if k in fields:
                setting[k] = type(getattr(SearchConfig(), k))(v)
        config = SearchConfig(**setting)
        index = ToolIndex(
            docs, config=config, semantic=embedder(dim) if semantic else False, cache=cache
        )
        retrieve = grouped(index) if config.alternatives else flat(index)
        r = evaluate(retrieve, tune)
        o, s, m = r["overall"], r["single"], r["multi_list"]
        rows.append(
            (
                o["r5"],
                f"overall R@5 {o['r5']:.3f} R@1 {o['r1']:.3f} MRR {o['mrr']:.3f} | single "
                f"R@5 {s['r5']:.3f} R@1 {s['r1']:.3f} | multi R@5 {m['r5']:.3f} "
                f"one-query {r['multi_one']['r5']:.3f} | dim {dim} {setting}",
            )
        )
        print(rows[-1][1], flush=True)
    print("\nbest first:")
    for _, line in sorted(rows, key=lambda r: -r[0])[:10]:
        print(line)


if __name__ == "__main__":
    main()
