"""Tool search quality and speed: tooldeck.search.ToolIndex on a 2,000-tool catalog.

Catalog: ``bench/catalog/tools.json`` (real tool definitions, see
``bench/catalog/build_catalog.py``). Queries: ``bench/catalog/queries.json``: single-tool
requests (``expected``: any one of the listed tools counts) and multi-tool requests
(``needs``: one list of acceptable tools per sub-task, and ``subqueries``: the short
query per sub-task a model would send). Splits: ``tune`` (the only one choices look
at), ``heldout`` and ``heldout-2`` (older held-out sets, partly burned) and
``heldout-3`` (batch 7, fresh for issue 22; see bench/catalog/README.md).

Metrics: a request's recall@k is the share of its needs with an acceptable tool in the
top k (1 or 0 for a single-tool request); a multi-tool request is searched two ways:
"one query" (the whole request) and "list" (each sub-query, the union of their top k;
a need's rank is its best rank in any of the lists). MRR over the top 10. With
alternatives grouping, k counts lines (groups), and every tool of a line counts.
"overall" is over all requests, multi-tool ones the list way.

Run: ``uv run python bench/bench_search.py`` (tune only, quality and speed); ``--split
all`` adds the held-out sets; ``--quality-only``; ``--set key=value`` overrides a
SearchConfig field; ``--dim N`` the WordLlama dimensions; ``--onnx-model DIR`` adds an
OnnxEmbedder row, ``--fastembed-model DIR`` a FastEmbedEmbedder row over the same
folder (see bench/RESULTS.md for the MiniLM folder); ``--no-wait`` skips waiting for an
idle machine; ``--quick`` fewer timing rounds; ``--misses`` lists the tune misses.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import BackgroundLoad, machine_lines, percentile, table, wait_for_idle
from tooldeck.search import SearchConfig, ToolDoc, ToolIndex, load_definitions
from tooldeck.search.embedding import Embedder, VectorCache

HERE = Path(__file__).resolve().parent
CATALOG = HERE / "catalog" / "tools.json"
QUERIES = HERE / "catalog" / "queries.json"
SPLITS = ("tune", "heldout", "heldout-2", "heldout-3")

#: query -> ranked slots (each a set of tool names: one tool, or a group of alternatives)
Retrieve = Callable[[str, int], list[frozenset[str]]]


def flat(index: ToolIndex) -> Retrieve:
    return lambda q, k: [frozenset((h.name,)) for h in index.search(q, k)]


def grouped(index: ToolIndex) -> Retrieve:
    return lambda q, k: [frozenset(h.name for h in g) for g in index.search_groups(q, k)]


def _rank(slots: Sequence[frozenset[str]], acceptable: set[str]) -> int | None:
    return next((i + 1 for i, slot in enumerate(slots) if slot & acceptable), None)


def request_ranks(retrieve: Retrieve, q: dict[str, Any], way: str) -> list[int | None]:
    """The rank of each need of request ``q`` (None: not in the top 10)."""
    if "expected" in q:
        return [_rank(retrieve(q["query"], 10), set(q["expected"]))]
    needs = [set(n) for n in q["needs"]]
    if way == "one":
        slots = retrieve(q["query"], 10)
        return [_rank(slots, n) for n in needs]
    lists = [retrieve(s, 10) for s in q["subqueries"]]
    out: list[int | None] = []
    for need in needs:
        found = [r for r in (_rank(slots, need) for slots in lists) if r is not None]
        out.append(min(found) if found else None)
    return out


def summarize(all_ranks: Sequence[list[int | None]]) -> dict[str, float]:
    n = len(all_ranks) or 1

    def recall(k: int) -> float:
        return sum(sum(1 for r in rs if r and r <= k) / len(rs) for rs in all_ranks) / n

    return {
        "n": len(all_ranks),
        "r1": recall(1),
        "r5": recall(5),
        "r10": recall(10),
        "mrr": sum(sum(1 / r for r in rs if r) / len(rs) for rs in all_ranks) / n,
        "all5": sum(all(r and r <= 5 for r in rs) for rs in all_ranks) / n,
    }


def evaluate(retrieve: Retrieve, queries: Sequence[dict[str, Any]]) -> dict[str, dict[str, float]]:
    single = [request_ranks(retrieve, q, "list") for q in queries if "expected" in q]
    multi = [q for q in queries if "needs" in q]
    one = [request_ranks(retrieve, q, "one") for q in multi]
    listed = [request_ranks(retrieve, q, "list") for q in multi]
    return {
        "single": summarize(single),
        "multi_one": summarize(one),
        "multi_list": summarize(listed),
        "overall": summarize(single + listed),
        "overall_one": summarize(single + one),
    }


def loaded_per_call(retrieve: Retrieve, queries: Sequence[dict[str, Any]]) -> float:
    """Tools a ``limit=5`` search returns (and so loads), on average."""
    texts = [q["query"] for q in queries if "expected" in q]
    return statistics.mean(sum(len(s) for s in retrieve(t, 5)) for t in texts)


def latency_us(
    retrieve: Retrieve,
    texts: Sequence[str],
    rounds: int,
    clock: Callable[[], int] = time.perf_counter_ns,
) -> list[float]:
    """Wall time (µs) of one ``limit=5`` search, every text ``rounds`` times
    (``clock=time.thread_time_ns``: the CPU time of this thread instead)."""
    for t in texts:  # warm up caches
        retrieve(t, 5)
    samples: list[float] = []
    for _ in range(rounds):
        for t in texts:
            start = clock()
            retrieve(t, 5)
            samples.append((clock() - start) / 1000.0)
    samples.sort()
    return samples


def parse_overrides(pairs: Sequence[str]) -> dict[str, Any]:
    fields = {f.name for f in dataclasses.fields(SearchConfig)}
    out: dict[str, Any] = {}
    for pair in pairs:
        key, _, raw = pair.partition("=")
        if key not in fields:
            raise SystemExit(f"unknown SearchConfig field {key!r}")
        default = getattr(SearchConfig(), key)
        if isinstance(default, bool):
            out[key] = raw.lower() in ("1", "true", "yes")
        elif isinstance(default, int):
            out[key] = int(raw)
        elif isinstance(default, float):
            out[key] = float(raw)
        else:
            out[key] = raw
    return out


def fmt(x: float) -> str:
    return f"{x:.3f}"


@dataclasses.dataclass
class Configuration:
    label: str
    semantic: Any  # False, or an Embedder
    config: SearchConfig
    groups: bool = False

    def build(self, cache: Any = False) -> ToolIndex:
        return ToolIndex(DOCS, config=self.config, semantic=self.semantic, cache=cache)


DOCS: list[ToolDoc] = []


def cold_build_s(cache_dir: str, runs: int = 3) -> list[float]:
    """Seconds to build the default index in a new process (model load included), with
    the given vector cache folder (the first run may fill it)."""
    code = (
        "import time; t = time.perf_counter();"
        "from tooldeck.search import ToolIndex, load_definitions;"
        f"ix = ToolIndex(load_definitions({str(CATALOG)!r}));"
        "print(time.perf_counter() - t, ix.cache_stats)"
    )
    env = {**os.environ, "TOOLDECK_CACHE_DIR": cache_dir}
    out = []
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        out.append(float(done.stdout.split()[0]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description="tool search benchmark")
    parser.add_argument("--split", choices=(*SPLITS, "all"), default="tune")
    parser.add_argument("--misses", action="store_true")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--dim", type=int, default=None)
    parser.add_argument("--onnx-model", type=Path, default=None)
    parser.add_argument("--fastembed-model", type=Path, default=None)
    parser.add_argument(
        "--onnx-weight", type=float, default=3.0, help="semantic_weight for the ONNX rows"
    )
    parser.add_argument("--only", action="append", default=[], help="configurations to run")
    parser.add_argument("--no-wait", action="store_true")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--quality-only", action="store_true")
    args = parser.parse_args()

    DOCS.extend(load_definitions(CATALOG))
    overrides = parse_overrides(args.set)
    config = SearchConfig(**overrides)
    queries = json.loads(QUERIES.read_text(encoding="utf-8"))
    splits = SPLITS if args.split == "all" else (args.split,)
    by_split = {s: [q for q in queries if q["split"] == s] for s in splits}

    from tooldeck.search.wordllama import DEFAULT_DIM, WordLlamaEmbedder

    started = time.perf_counter()
    wordllama = WordLlamaEmbedder.load(args.dim or DEFAULT_DIM)
    model_load_ms = (time.perf_counter() - started) * 1000.0
    dim = wordllama.dim
    flat_config = dataclasses.replace(config, alternatives=False)
    configs = [
        Configuration("BM25F alone", False, flat_config),
        Configuration(f"BM25F + WordLlama {dim} d, no alternatives", wordllama, flat_config),
        Configuration(
            f"BM25F + WordLlama {dim} d + alternatives (default)", wordllama, config, True
        ),
    ]
    extra: list[tuple[str, Embedder]] = []
    if args.onnx_model:
        from tooldeck.search.onnx import OnnxEmbedder

        extra.append((f"OnnxEmbedder ({args.onnx_model.name})", OnnxEmbedder(args.onnx_model)))
    if args.fastembed_model:
        from tooldeck.search.fastembed import FastEmbedEmbedder

        fe = FastEmbedEmbedder(
            f"local/{args.fastembed_model.name}", model_path=args.fastembed_model, dim=384
        )
        extra.append((f"FastEmbedEmbedder ({args.fastembed_model.name})", fe))
    onnx_config = dataclasses.replace(flat_config, semantic_weight=args.onnx_weight)
    for label, embedder in extra:
        configs.append(Configuration(f"BM25F + {label}", embedder, onnx_config))
    if args.only:
        configs = [c for c in configs if any(o.lower() in c.label.lower() for o in args.only)]

    cache_dir = tempfile.mkdtemp(prefix="bench-search-cache-")
    cache = VectorCache(cache_dir)
    built: dict[str, ToolIndex] = {}
    embed_ms: dict[str, float] = {}
    for c in configs:
        start = time.perf_counter()
        built[c.label] = c.build(cache)  # fills the cache: later builds read it
        embed_ms[c.label] = (time.perf_counter() - start) * 1000.0

    quality: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
    for c in configs:
        retrieve = (grouped if c.groups else flat)(built[c.label])
        quality[c.label] = {s: evaluate(retrieve, qs) for s, qs in by_split.items()}
        if args.misses and "tune" in by_split:
            for q in by_split["tune"]:
                ranks = request_ranks(retrieve, q, "list")
                if any(r is None or r > 5 for r in ranks):
                    got = [sorted(s) for s in retrieve(q["query"], 5)]
                    want = q.get("expected") or q["needs"]
                    print(f"[{c.label}] #{q['id']} {q['query']!r} ranks={ranks} want={want}")
                    print("      got:", got)

    for split in by_split:
        print(f"### Quality, {split} ({len(by_split[split])} requests)\n")
        rows = []
        for c in configs:
            r = quality[c.label][split]
            o, s, m1, ml = r["overall"], r["single"], r["multi_one"], r["multi_list"]
            rows.append(
                [
                    c.label,
                    fmt(o["r1"]),
                    fmt(o["r5"]),
                    fmt(o["r10"]),
                    fmt(o["mrr"]),
                    f"{fmt(s['r5'])} ({s['n']})",
                    f"{fmt(ml['r5'])} ({ml['n']})" if ml["n"] else "-",
                    fmt(m1["r5"]) if m1["n"] else "-",
                    fmt(ml["all5"]) if ml["n"] else "-",
                    fmt(r["overall_one"]["r5"]),
                ]
            )
        headers = [
            "configuration",
            "R@1",
            "R@5",
            "R@10",
            "MRR",
            "single R@5 (n)",
            "multi R@5, list (n)",
            "multi R@5, one query",
            "multi all needs @5, list",
            "overall R@5, one query",
        ]
        print(table(headers, rows))
        print()
    if args.quality_only:
        return

    idle = "skipped (--no-wait)" if args.no_wait else wait_for_idle(max_wait=300.0)
    rounds = 5 if args.quick else 20
    kinds = Counter(t["source"]["kind"] for t in json.loads(CATALOG.read_text())["tools"])
    texts = list(dict.fromkeys(t for q in queries for t in [q["query"], *q.get("subqueries", [])]))
    print(
        f"Catalog: {len(DOCS)} tools ({', '.join(f'{k}: {v}' for k, v in sorted(kinds.items()))})"
        f"; {len(texts)} distinct query texts timed.\n"
    )
    for line in machine_lines(("tooldeck", "numpy", "onnxruntime", "tokenizers")):
        print(line)
    print(f"- machine idle check: {idle}\n")
    rows = []
    for c in configs:
        index = built[c.label]
        retrieve = (grouped if c.groups else flat)(index)
        load = BackgroundLoad()
        samples = latency_us(retrieve, texts, rounds)
        busy = load.report()
        builds = []
        for _ in range(3 if args.quick else 5):
            start = time.perf_counter()
            c.build(cache)
            builds.append((time.perf_counter() - start) * 1000.0)
        loaded = loaded_per_call(retrieve, by_split.get("tune", queries))
        rows.append(
            [
                c.label,
                f"{percentile(samples, 0.5):.0f}",
                f"{percentile(samples, 0.95):.0f}",
                f"{percentile(samples, 0.99):.0f}",
                f"{statistics.median(builds):.0f}",
                f"{embed_ms[c.label]:.0f}",
                f"{loaded:.1f}",
                busy,
            ]
        )
    print(f"### Speed ({rounds} rounds per query text, µs; builds in ms)\n")
    headers = [
        "configuration",
        "median",
        "p95",
        "p99",
        "build, cached vectors",
        "first build (embeds)",
        "tools per limit=5 call",
        "other load",
    ]
    print(table(headers, rows))
    print(f"\nWordLlama table load: {model_load_ms:.0f} ms (once per process).")
    if not args.only:
        empty = tempfile.mkdtemp(prefix="bench-search-cold-")
        first = cold_build_s(empty, runs=1)
        warm = cold_build_s(empty, runs=3)
        print(
            f"Default index in a new process (imports, model load, build): empty cache "
            f"{first[0] * 1000:.0f} ms; cache filled: median "
            f"{statistics.median(warm) * 1000:.0f} ms (max {max(warm) * 1000:.0f})."
        )


if __name__ == "__main__":
    main()
