"""Tool search quality and speed: tooldeck.search.ToolIndex on a 2,000-tool catalog.

Catalog: ``bench/catalog/tools.json`` (real tool definitions, see
``bench/catalog/build_catalog.py``). Queries: ``bench/catalog/queries.json``, natural
language needs with the expected tool(s): a ``tune`` set, the only one the ranking was tuned
on; a ``heldout`` set (batch 1, split by a hash of the query text); and ``heldout-2``, a
fresh held-out batch written before the issue-6 ranking changes.

Reports recall@1/5/10 (a query counts as found at k when any expected tool is in the top
k), MRR (over the top 10), query latency (median, p95) and index build time, for tooldeck
and for naive baselines (substring matching; TF-IDF cosine on name + description).

Run: ``uv run python bench/bench_search.py`` (about a minute). Options: ``--split``,
``--misses`` (print the queries not found in the top 5), ``--set key=value`` (override a
:class:`~tooldeck.search.SearchConfig` field, for tuning on the tune split),
``--no-wait`` (skip waiting for an idle machine), ``--quick`` (fewer timing rounds),
``--semantic auto|on|off`` (the hybrid re-ranker; ``auto`` uses it when the optional
``wordllama`` package is installed: ``uv run --group bench --with wordllama==0.4.0.post1
python bench/bench_search.py``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import BackgroundLoad, machine_lines, percentile, table, wait_for_idle
from tooldeck.search import SearchConfig, ToolDoc, ToolIndex, load_definitions

HERE = Path(__file__).resolve().parent
CATALOG = HERE / "catalog" / "tools.json"
QUERIES = HERE / "catalog" / "queries.json"

Ranker = Callable[[str, int], list[str]]
#: ``tune``: the only queries ranking decisions look at; ``heldout``: batch 1's held-out
#: half; ``heldout-2``: batch 4, a fresh held-out set written before the issue-6 changes
SPLITS = ("tune", "heldout", "heldout-2")


# -- baselines ----------------------------------------------------------------------------
class SubstringBaseline:
    """Score = how many query words (3+ letters) occur as substrings of name + description."""

    def __init__(self, docs: Sequence[ToolDoc]):
        self.docs = [(d.name, f"{d.name} {d.description}".lower()) for d in docs]

    def search(self, query: str, limit: int) -> list[str]:
        words = [w for w in re.findall(r"\w+", query.lower()) if len(w) >= 3]
        scored = [(sum(w in text for w in words), name) for name, text in self.docs]
        scored = [s for s in scored if s[0] > 0]
        scored.sort(key=lambda s: -s[0])
        return [name for _, name in scored[:limit]]


class TfidfBaseline:
    """Classic TF-IDF cosine over name + description; lower-cased words, nothing else."""

    def __init__(self, docs: Sequence[ToolDoc]):
        tokenized = [self._tokens(f"{d.name} {d.description}") for d in docs]
        n = len(docs)
        df: Counter[str] = Counter()
        for toks in tokenized:
            df.update(set(toks))
        self.idf = {t: math.log(n / c) + 1.0 for t, c in df.items()}
        self.names = [d.name for d in docs]
        self.vectors: list[dict[str, float]] = []
        self.postings: dict[str, list[int]] = {}
        for i, toks in enumerate(tokenized):
            tf = Counter(toks)
            vec = {t: c * self.idf[t] for t, c in tf.items()}
            norm = math.sqrt(sum(v * v for v in vec.values())) or 1.0
            self.vectors.append({t: v / norm for t, v in vec.items()})
            for t in vec:
                self.postings.setdefault(t, []).append(i)

    @staticmethod
    def _tokens(text: str) -> list[str]:
        return re.findall(r"[a-z0-9]+", text.lower())

    def search(self, query: str, limit: int) -> list[str]:
        tf = Counter(t for t in self._tokens(query) if t in self.idf)
        scores: dict[int, float] = {}
        for t, c in tf.items():
            w = c * self.idf[t]
            for i in self.postings[t]:
                scores[i] = scores.get(i, 0.0) + w * self.vectors[i][t]
        best = sorted(scores.items(), key=lambda s: -s[1])[:limit]
        return [self.names[i] for i, _ in best]


# -- evaluation -------------------------------------------------------------------------
def evaluate(rank: Ranker, queries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    ranks: list[int | None] = []
    for q in queries:
        got = rank(q["query"], 10)
        expected = set(q["expected"])
        pos = next((i + 1 for i, name in enumerate(got) if name in expected), None)
        ranks.append(pos)
    n = len(queries) or 1

    def recall(k: int) -> float:
        return sum(1 for r in ranks if r is not None and r <= k) / n

    return {
        "n": len(queries),
        "r1": recall(1),
        "r5": recall(5),
        "r10": recall(10),
        "mrr": sum(1.0 / r for r in ranks if r is not None) / n,
        "ranks": ranks,
    }


def latency_us(
    rank: Ranker, queries: Sequence[dict[str, Any]], rounds: int
) -> tuple[list[float], list[float]]:
    """Wall time (µs) of ``rank(query, 5)``: every query, ``rounds`` times.

    Returns (all samples, each query's fastest run): the second is the query's own cost,
    free of interference from other processes on a shared machine.
    """
    for q in queries:  # warm up caches (stemmer, allocator)
        rank(q["query"], 5)
    samples: list[float] = []
    best = [math.inf] * len(queries)
    clock = time.perf_counter_ns
    for _ in range(rounds):
        for k, q in enumerate(queries):
            start = clock()
            rank(q["query"], 5)
            took = (clock() - start) / 1000.0
            samples.append(took)
            best[k] = min(best[k], took)
    return samples, best


def build_ms(
    docs: Sequence[ToolDoc], config: SearchConfig, repeat: int, semantic: bool = False
) -> tuple[list[float], list[float]]:
    """(wall ms, CPU ms) of building the index ``repeat`` times (the embedding model is
    loaded once per process, before the first build, and not counted)."""
    wall, cpu = [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        ToolIndex(docs, config=config, semantic=semantic)
        wall.append((time.perf_counter() - start) * 1000.0)
        cpu.append((time.process_time() - start_cpu) * 1000.0)
    return wall, cpu


def parse_overrides(pairs: Sequence[str]) -> dict[str, Any]:
    fields = {f.name: f for f in dataclasses.fields(SearchConfig)}
    out: dict[str, Any] = {}
    for pair in pairs:
        key, _, raw = pair.partition("=")
        if key not in fields:
            raise SystemExit(f"unknown SearchConfig field {key!r}")
        default = getattr(SearchConfig(), key)
        value: Any
        if isinstance(default, bool):
            value = raw.lower() in ("1", "true", "yes")
        elif isinstance(default, int):
            value = int(raw)
        else:
            value = float(raw)
        out[key] = value
    return out


def fmt(x: float) -> str:
    return f"{x:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description="tool search benchmark")
    parser.add_argument("--split", choices=(*SPLITS, "all"), default="all")
    parser.add_argument("--misses", action="store_true")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--no-wait", action="store_true")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--quality-only", action="store_true")
    parser.add_argument("--semantic", choices=("auto", "on", "off"), default="auto")
    args = parser.parse_args()

    config = SearchConfig(**parse_overrides(args.set))
    docs = load_definitions(CATALOG)
    all_queries = json.loads(QUERIES.read_text(encoding="utf-8"))
    splits = SPLITS if args.split == "all" else (args.split,)
    by_split = {s: [q for q in all_queries if q["split"] == s] for s in splits}

    mode: bool | str = {"auto": "auto", "on": True, "off": False}[args.semantic]
    start = time.perf_counter()
    index = ToolIndex(docs, config=config, semantic=mode)  # type: ignore[arg-type]
    first_build_ms = (time.perf_counter() - start) * 1000.0
    plain = ToolIndex(docs, config=config, semantic=False) if index.semantic else index

    def tooldeck_rank(query: str, k: int) -> list[str]:
        return [h.name for h in index.search(query, k)]

    def plain_rank(query: str, k: int) -> list[str]:
        return [h.name for h in plain.search(query, k)]

    if args.misses:
        for split, queries in by_split.items():
            result = evaluate(tooldeck_rank, queries)
            for q, r in zip(queries, result["ranks"], strict=True):
                if r is None or r > 5:
                    got = [f"{h.name} ({h.score:.2f})" for h in index.search(q["query"], 5)]
                    print(f"[{split}] #{q['id']} {q['query']!r} rank={r} expected={q['expected']}")
                    print("      got:", ", ".join(got))
    if args.quality_only:
        for split, queries in by_split.items():
            r = evaluate(tooldeck_rank, queries)
            print(
                f"{split}: n={r['n']} r@1={fmt(r['r1'])} r@5={fmt(r['r5'])} "
                f"r@10={fmt(r['r10'])} mrr={fmt(r['mrr'])}"
            )
        return

    idle = "skipped (--no-wait)" if args.no_wait else wait_for_idle(max_wait=300.0)
    rounds = 5 if args.quick else 30
    namespaces = {d.namespace for d in docs}
    kinds = Counter(t["source"]["kind"] for t in json.loads(CATALOG.read_text())["tools"])
    print("## Tool search (tooldeck.search)\n")
    print(
        f"Catalog: {len(docs)} tools in {len(namespaces)} namespaces "
        f"({', '.join(f'{k}: {v}' for k, v in sorted(kinds.items()))}). "
        f"Queries: {sum(len(v) for v in by_split.values())} "
        f"({', '.join(f'{k}: {len(v)}' for k, v in by_split.items())}).\n"
    )
    for line in machine_lines(("tooldeck",)):
        print(line)
    print(f"- machine idle check: {idle}\n")

    rankers: dict[str, Ranker] = {}
    if index.semantic:
        rankers["tooldeck ToolIndex (BM25F + semantic re-rank)"] = tooldeck_rank
    rankers["tooldeck ToolIndex (BM25F)"] = plain_rank
    substring = SubstringBaseline(docs)
    tfidf = TfidfBaseline(docs)
    rankers["baseline: TF-IDF cosine, name+description"] = tfidf.search
    rankers["baseline: substring count, name+description"] = substring.search
    ablations = {
        "ablation: no synonyms": {"synonyms": False},
        "ablation: no stemming": {"stemming": False},
        "ablation: no name-coverage bonus": {"name_coverage": 0.0},
        "ablation: no exact name-word bonus": {"exact_word_coverage": 0.0},
        "ablation: no phrase bonus": {"phrase_bonus": 0.0},
        "ablation: name+description only": {
            "param_name_weight": 0.0,
            "param_description_weight": 0.0,
            "namespace_weight": 0.0,
            "namespace_description_weight": 0.0,
        },
    }
    for label, overrides in ablations.items():
        ablated = ToolIndex(docs, config=dataclasses.replace(config, **overrides), semantic=False)
        rankers[label] = lambda q, k, ix=ablated: [h.name for h in ix.search(q, k)]

    for split, queries in by_split.items():
        rows = []
        for label, rank in rankers.items():
            r = evaluate(rank, queries)
            rows.append([label, fmt(r["r1"]), fmt(r["r5"]), fmt(r["r10"]), fmt(r["mrr"])])
        print(f"### Quality, {split} queries (n={len(queries)})\n")
        print(table(["ranker", "recall@1", "recall@5", "recall@10", "MRR"], rows))
        print()

    everything = [q for qs in by_split.values() for q in qs]
    rows = []
    load = BackgroundLoad()
    for label, rank in list(rankers.items())[: 4 if index.semantic else 3]:
        samples, best = latency_us(rank, everything, rounds)
        samples.sort()
        best.sort()
        rows.append(
            [
                label,
                f"{percentile(samples, 0.5):.0f}",
                f"{percentile(samples, 0.95):.0f}",
                f"{percentile(samples, 0.99):.0f}",
                f"{percentile(best, 0.5):.0f}",
                f"{percentile(best, 0.95):.0f}",
                f"{best[-1]:.0f}",
            ]
        )
    print(f"### Query latency, limit=5 ({len(everything)} queries x {rounds} rounds, µs)\n")
    headers = ["ranker", "median", "p95", "p99", "fastest-run median", "fastest p95", "fastest max"]
    print(table(headers, rows))
    print(f"\n({load.report()}; 'fastest' = each query's best of its {rounds} runs)\n")
    for semantic in (True, False) if index.semantic else (False,):
        load = BackgroundLoad()
        builds, cpu = build_ms(docs, config, 3 if args.quick else 7, semantic)
        print(
            f"Index build{' with semantic vectors' if semantic else ', BM25F only'} "
            f"({len(docs)} tools, from parsed definitions): median "
            f"{statistics.median(builds):.0f} ms wall ({statistics.median(cpu):.0f} ms CPU), "
            f"min {min(builds):.0f} ms, max {max(builds):.0f} ms over {len(builds)} builds; "
            f"{index.term_count} distinct terms ({load.report()}).\n"
        )
    if index.semantic:
        from tooldeck import _semantic

        embedder = _semantic.load_embedder()
        assert embedder is not None
        vectors = index._vectors
        print(
            f"Semantic model: {_semantic.PACKAGE} l2_supercat, {embedder.dim} dimensions; "
            f"first build in this process (model load included) {first_build_ms:.0f} ms; "
            f"token table {embedder.memory_bytes / 2**20:.1f} MiB (once per process), "
            f"tool vectors {vectors.nbytes / 2**20:.2f} MiB."
        )


if __name__ == "__main__":
    main()
