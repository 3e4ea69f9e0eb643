"""Tuning at gateway scale: the ``tune`` queries against small catalogs (issue 36).

The fresh set of issue 36 (``bench/mcp_catalog``) searches 51 tools of six servers, where
the tune set searches 2,033. Choices made on the big catalog alone did not carry over
(the fusion weight, bench/RESULTS.md third round), so this script also scores every
setting on ``tune-small``: each tune request against a small catalog, the namespaces of
the tools it needs plus other namespaces of ``bench/catalog/tools.json`` drawn by a hash
of those namespaces (requests needing the same ones share a catalog), until the catalog
holds at least 50 tools from at least four namespaces (a gateway in front of a handful
of servers). Only ``tune`` requests are
read; never a held-out split nor ``bench/mcp_catalog``.

Prints, per setting, R@1 / R@5 / MRR (overall, multi-tool requests the list way, see
bench_search.py) on tune-small and on the whole catalog.

Run: ``uv run --all-extras python bench/tune_recall.py [--only NAME ...]``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_search import CATALOG, QUERIES, Retrieve, evaluate, flat, grouped
from tooldeck.search import SearchConfig, ToolDoc, ToolIndex, load_definitions
from tooldeck.search.embedding import Embedder, VectorCache, quality_embedder

CACHE = Path("/tmp/tune-recall-cache")


class Memo:
    """An embedder that remembers every text it embedded (one process's experiments)."""

    def __init__(self, base: Embedder, cache: VectorCache) -> None:
        self.base = base
        self.store = cache
        self.name = base.name
        self.version = base.version
        self.memo: dict[str, Any] = {}

    def preload(self, texts: Sequence[str]) -> None:
        todo = [t for t in dict.fromkeys(texts) if t not in self.memo]
        if todo:
            for t, v in zip(todo, self.store.vectors(self.base, todo), strict=True):
                self.memo[t] = v

    def embed(self, texts: Sequence[str]) -> Any:
        import numpy as np

        self.preload(texts)  # queries too: kept in the disk cache between runs
        return np.stack([self.memo[t] for t in texts])


def namespaces_needed(q: dict[str, Any]) -> set[str]:
    names = q.get("expected") or [n for need in q["needs"] for n in need]
    return {n.split("__", 1)[0] for n in names}


def small_catalog(q: dict[str, Any], by_ns: dict[str, list[ToolDoc]]) -> list[ToolDoc]:
    need = namespaces_needed(q)
    key = " ".join(sorted(need))
    seed = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big")
    others = sorted(set(by_ns) - need)
    random.Random(seed).shuffle(others)
    chosen = sorted(need)
    while sum(len(by_ns[n]) for n in chosen) < 50 or len(chosen) < 4:
        chosen.append(others.pop())
    return [d for n in chosen for d in by_ns[n]]


def per_query(
    make: Callable[[list[ToolDoc]], Retrieve],
    queries: Sequence[dict[str, Any]],
    by_ns: dict[str, list[ToolDoc]],
) -> dict[str, dict[str, float]]:
    """Evaluate each request against its own small catalog, pooled into one summary."""
    from bench_search import request_ranks, summarize

    single, listed = [], []
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for q in queries:
        groups[" ".join(sorted(namespaces_needed(q)))].append(q)
    for group in groups.values():
        retrieve = make(small_catalog(group[0], by_ns))
        for q in group:
            (single if "expected" in q else listed).append(request_ranks(retrieve, q, "list"))
    return {"overall": summarize(single + listed), "single": summarize(single)}


def line(label: str, r: dict[str, dict[str, float]]) -> str:
    o, s = r["overall"], r["single"]
    return (
        f"{label:<44} overall R@1 {o['r1']:.3f} R@5 {o['r5']:.3f} MRR {o['mrr']:.3f}"
        f" | single R@5 {s['r5']:.3f}"
    )


def run_settings(
    settings: dict[str, tuple[Any, SearchConfig]],
    tune: list[dict[str, Any]],
    by_ns: dict[str, list[ToolDoc]],
    docs: list[ToolDoc],
    *,
    only: Sequence[str] | None,
    big: bool,
) -> None:
    """Print each setting's recall on the tuning requests: on each request's small catalog,
    and on the whole catalog with ``big``; ``only``: the settings whose name has one of these."""
    for name, (sem, cfg) in settings.items():
        if only and not any(o in name for o in only):
            continue

        def make(cat: list[ToolDoc], sem: Any = sem, cfg: SearchConfig = cfg) -> Retrieve:
            index = ToolIndex(cat, semantic=sem, config=cfg, cache=False)
            return grouped(index) if cfg.alternatives else flat(index)

        print(line(f"[small] {name}", per_query(make, tune, by_ns)), flush=True)
        if big:
            print(line(f"[big]   {name}", evaluate(make(docs), tune)), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--big", action="store_true", help="also the whole catalog")
    args = parser.parse_args()
    docs = load_definitions(CATALOG)
    tune = [q for q in json.loads(QUERIES.read_text()) if q["split"] == "tune"]
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
    settings: dict[str, tuple[Any, SearchConfig]] = {
        "bm25f": (False, SearchConfig()),
        "default (WordLlama 1.5)": (wl, SearchConfig()),
    }
    for w in (2.0, 3.0):
        settings[f"WordLlama w={w}"] = (wl, SearchConfig(semantic_weight=w))
    for w in (1.5, 2.0, 3.0, 4.0):
        settings[f"MiniLM w={w}"] = (ml, SearchConfig(semantic_weight=w))
    for k, w in ((10, 1.0), (20, 1.0), (20, 1.5), (20, 2.0)):
        settings[f"MiniLM rrf k={k} w={w}"] = (
            ml,
            SearchConfig(semantic_fusion="rrf", semantic_rrf_k=k, semantic_weight=w),
        )
    for fw in (
        (1.0, 1.0, 0.25, 0.25, 0.5),
        (1.5, 1.0, 0.5, 0.25, 0.5),
        (1.5, 1.5, 0.25, 0.25, 0.5),
        (1.5, 1.0, 0.25, 0.0, 0.25),
        (1.5, 1.0, 0.25, 0.5, 1.0),
        (2.0, 1.0, 0.25, 0.25, 0.5),
    ):
        settings[f"MiniLM w=3.0 fields {fw}"] = (
            ml,
            SearchConfig(semantic_weight=3.0, semantic_field_weights=fw),
        )
    for text in ("summary", "description", "full"):
        settings[f"MiniLM w=3.0 text {text}"] = (
            ml,
            SearchConfig(semantic_weight=3.0, semantic_text=text),  # type: ignore[arg-type]
        )
    run_settings(settings, tune, by_ns, docs, only=args.only, big=args.big)


if __name__ == "__main__":
    main()
