"""Tool search on the tools of real MCP servers, every mode in one run (issue 36).

Catalog: ``bench/mcp_catalog/tools.json``, the tool lists of six servers tooldeck's
tests run (captured by ``bench/mcp_catalog/capture.py``), searched alone ("live", 51
tools, what a gateway in front of those servers holds) and with the transcribed catalog
of ``bench/catalog/tools.json`` around them ("live + transcribed": its other namespaces,
about 2,000 tools). Queries: ``bench/mcp_catalog/queries.json`` (split ``fresh``, never
used for tuning): natural requests, each with the tool(s) it needs.

Modes: BM25F alone; the default (BM25F + WordLlama, alternatives); ``quality``
(BM25F + MiniLM-L6 int8 from ``tooldeck[quality]``) as ``semantic="quality"`` ranks
(its own config, ``SearchConfig.for_semantic("quality")``: the weight chosen for MiniLM
on ``tune``, ``QUALITY_WEIGHT``) and at the default config's weight 1.5 (what the third
round shipped); and, in the same run, two
outside rankers: ``bm25s`` (one flat document per tool: name words + description) and plain
MiniLM (cosine alone over the tool's name words + description, the same model).

Reported per mode: R@1, R@5, MRR, mean rank of the needed tool (11 when not in the top
10), single-tool and overall (multi-tool requests the list way, see bench_search.py),
query latency p50/p99 (µs, ``limit=5``: wall time, and the CPU time of the searching
thread, which the other processes of a loaded machine disturb less) and build time with
cached vectors.

Run: ``uv run --group bench python bench/bench_mcp_catalog.py`` (``--rounds N``,
``--no-big`` for the live catalog only, ``--cache DIR`` to keep the vectors between runs).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import BackgroundLoad, machine_lines, percentile, table
from bench_search import Retrieve, evaluate, flat, grouped, latency_us, request_ranks
from tooldeck.search import SearchConfig, ToolDoc, ToolIndex, load_definitions
from tooldeck.search.config import QUALITY_MIN_SIMILARITY, QUALITY_WEIGHT
from tooldeck.search.embedding import Embedder, VectorCache, quality_embedder, unit_rows

HERE = Path(__file__).resolve().parent
LIVE = HERE / "mcp_catalog" / "tools.json"
QUERIES = HERE / "mcp_catalog" / "queries.json"
BIG = HERE / "catalog" / "tools.json"
THIRD_ROUND = SearchConfig()  # the quality mode's config before the fourth round


def catalogs(big: bool) -> dict[str, list[ToolDoc]]:
    live = load_definitions(LIVE)
    out = {"live": live}
    if big:
        spaces = {d.name.split("__", 1)[0] for d in live}
        others = [d for d in load_definitions(BIG) if (d.namespace or "") not in spaces]
        out["live + transcribed"] = live + others
    return out


def _plain_text(doc: ToolDoc) -> str:
    return " ".join(re.split(r"[_\-\s]+|__", doc.name)) + ". " + doc.description[:600]


def bm25s_ranker(docs: Sequence[ToolDoc]) -> Retrieve:
    import bm25s

    names = [d.name for d in docs]
    retriever = bm25s.BM25()
    retriever.index(
        bm25s.tokenize([_plain_text(d) for d in docs], show_progress=False), show_progress=False
    )

    def retrieve(query: str, k: int) -> list[frozenset[str]]:
        tokens = bm25s.tokenize([query], show_progress=False)
        ids, scores = retriever.retrieve(tokens, k=min(k, len(names)), show_progress=False)
        return [frozenset((names[i],)) for i, s in zip(ids[0], scores[0], strict=True) if s > 0]

    return retrieve


def cosine_ranker(embedder: Embedder, docs: Sequence[ToolDoc], cache: VectorCache) -> Retrieve:
    import numpy as np

    names = [d.name for d in docs]
    matrix = cache.vectors(embedder, [_plain_text(d) for d in docs])

    def retrieve(query: str, k: int) -> list[frozenset[str]]:
        scores = matrix @ unit_rows(embedder.embed([query]))[0]
        best = np.argsort(-scores)[:k]
        return [frozenset((names[i],)) for i in best]

    return retrieve


def scaled(semantic: str, scale: float) -> SearchConfig:
    """The mode's own config with BM25F divided by max(best, ``scale``)."""
    return replace(SearchConfig.for_semantic(semantic), semantic_lexical_scale=scale)


def mean_rank(retrieve: Retrieve, queries: Sequence[dict[str, Any]]) -> float:
    ranks = [r or 11 for q in queries for r in request_ranks(retrieve, q, "list")]
    return statistics.mean(ranks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--no-big", action="store_true")
    parser.add_argument("--cache", default=None, help="a vector cache folder to reuse")
    parser.add_argument(
        "--scales",
        type=float,
        nargs="*",
        default=[],
        help="also the quality and default modes with these semantic_lexical_scale values",
    )
    parser.add_argument(
        "--static", type=Path, default=None, help="also a static table (distill_*.py's .npz)"
    )
    parser.add_argument(
        "--minsims",
        type=float,
        nargs="*",
        default=[],
        help="also the quality and default modes with these semantic_min_similarity values",
    )
    parser.add_argument("--diagnostic", action="store_true", help="also the diagnostic rows")
    parser.add_argument("--modes", nargs="*", default=None, help="only modes naming one of these")
    args = parser.parse_args()
    queries = json.loads(QUERIES.read_text(encoding="utf-8"))["queries"]
    cache = VectorCache(args.cache or tempfile.mkdtemp(prefix="bench-mcp-cache-"))
    minilm = quality_embedder()
    texts = list(dict.fromkeys(t for q in queries for t in [q["query"], *q.get("subqueries", [])]))
    for line in machine_lines(("tooldeck", "numpy", "onnxruntime", "tokenizers", "bm25s")):
        print(line)
    for cat_name, docs in catalogs(not args.no_big).items():
        modes: list[tuple[str, Callable[[], Retrieve]]] = [
            ("BM25F alone", lambda d=docs: flat(ToolIndex(d, semantic=False))),
            ("default (BM25F + WordLlama)", lambda d=docs: grouped(ToolIndex(d, cache=cache))),
            (
                f"quality (BM25F + MiniLM int8, weight {QUALITY_WEIGHT:g}, "
                f"min_similarity {QUALITY_MIN_SIMILARITY:g})",
                lambda d=docs: grouped(ToolIndex(d, semantic="quality", cache=cache)),
            ),
            (
                "quality at weight 1.5 (third round)",
                lambda d=docs: grouped(
                    ToolIndex(d, semantic="quality", cache=cache, config=THIRD_ROUND)
                ),
            ),
            ("bm25s (flat BM25)", lambda d=docs: bm25s_ranker(d)),
            ("plain MiniLM cosine", lambda d=docs: cosine_ranker(minilm, d, cache)),
        ]
        for scale in args.scales:
            modes.append(
                (
                    f"quality, lexical scale {scale:g}",
                    lambda d=docs, c=scale: grouped(
                        ToolIndex(d, semantic="quality", cache=cache, config=scaled("quality", c))
                    ),
                )
            )
            modes.append(
                (
                    f"default, lexical scale {scale:g}",
                    lambda d=docs, c=scale: grouped(
                        ToolIndex(d, cache=cache, config=scaled("auto", c))
                    ),
                )
            )
        for m in args.minsims:
            for mode in ("quality", "auto"):
                cfg = replace(SearchConfig.for_semantic(mode), semantic_min_similarity=m)
                label = "quality" if mode == "quality" else "default"
                modes.append(
                    (
                        f"{label}, min_similarity {m:g}",
                        lambda d=docs, c=cfg, e=mode: grouped(
                            ToolIndex(d, semantic=e, cache=cache, config=c)
                        ),
                    )
                )
        if args.static is not None:
            from distill_minilm import StaticEmbedder

            static = StaticEmbedder(args.static)
            modes.append(
                (
                    f"default with {args.static.name} (BM25F + static table)",
                    lambda d=docs, e=static: grouped(ToolIndex(d, semantic=e, cache=cache)),
                )
            )
            for scale in args.scales:
                modes.append(
                    (
                        f"default with {args.static.name}, lexical scale {scale:g}",
                        lambda d=docs, e=static, c=scale: grouped(
                            ToolIndex(d, semantic=e, cache=cache, config=scaled("auto", c))
                        ),
                    )
                )
        if args.diagnostic:
            # where the quality mode loses to plain MiniLM: the fusion, or the tool text?
            alone = replace(SearchConfig.for_semantic("quality"), semantic_weight=1000.0)
            modes.append(
                (
                    "diagnostic: MiniLM alone through the index (fields mix, weight 1000)",
                    lambda d=docs, c=alone: grouped(
                        ToolIndex(d, semantic="quality", cache=cache, config=c)
                    ),
                )
            )
            for text in ("description", "summary"):
                cfg = replace(SearchConfig.for_semantic("quality"), semantic_text=text)
                modes.append(
                    (
                        f"diagnostic: quality with semantic_text={text!r}",
                        lambda d=docs, c=cfg: grouped(
                            ToolIndex(d, semantic="quality", cache=cache, config=c)
                        ),
                    )
                )
        if args.modes:
            modes = [m for m in modes if any(o in m[0] for o in args.modes)]
        rows = []
        for label, make in modes:
            make()  # first build: embeds into the cache
            builds = []
            for _ in range(3):
                start = time.perf_counter()
                retrieve = make()
                builds.append((time.perf_counter() - start) * 1000.0)
            r = evaluate(retrieve, queries)
            single, overall = r["single"], r["overall"]
            load = BackgroundLoad()
            samples = latency_us(retrieve, texts, args.rounds)
            cpu = latency_us(retrieve, texts, args.rounds, clock=time.thread_time_ns)
            rows.append(
                [
                    label,
                    f"{single['r1']:.3f}",
                    f"{single['r5']:.3f}",
                    f"{overall['r1']:.3f}",
                    f"{overall['r5']:.3f}",
                    f"{overall['mrr']:.3f}",
                    f"{mean_rank(retrieve, queries):.2f}",
                    f"{percentile(samples, 0.5):.0f}",
                    f"{percentile(samples, 0.99):.0f}",
                    f"{percentile(cpu, 0.5):.0f}",
                    f"{percentile(cpu, 0.99):.0f}",
                    f"{statistics.median(builds):.0f}",
                    load.report().replace("other processes used ", ""),
                ]
            )
        n_single = sum(1 for q in queries if "expected" in q)
        print(
            f"\n### {cat_name}: {len(docs)} tools, {n_single} single-tool + "
            f"{len(queries) - n_single} multi-tool requests\n"
        )
        headers = [
            "mode",
            "single R@1",
            "single R@5",
            "overall R@1",
            "overall R@5",
            "MRR",
            "mean rank",
            "p50 µs",
            "p99 µs",
            "CPU p50 µs",
            "CPU p99 µs",
            "build ms",
            "other load",
        ]
        print(table(headers, rows))


if __name__ == "__main__":
    main()
