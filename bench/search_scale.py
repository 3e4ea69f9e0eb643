"""Tool search at gateway scale: 1,000 to 50,000 tools, tooldeck (before, after) vs bm25s.

Catalogs: ``_bigcatalog.catalog(n)`` (every tool a benchmark query needs, the other real
tools, then generated services), the same for every engine. For each size and engine a
fresh process builds the index and measures:

- build time (the catalog already in memory: definitions read, ``ToolDoc`` made, or
  for bm25s the texts joined);
- query time, p50 and p99 over every distinct query text of ``catalog/queries.json``
  (1,428), ``--rounds`` times each: tooldeck's ``search(q, 5, floor=True)`` and its
  gateway path ``search_groups(q, 5, floor=True)`` (what ``tool_search`` runs), bm25s's
  ``retrieve(tokenize(q), k=5)``, tokenizing the query included for both;
- recall: R@5 and R@1 of all 1,197 requests (multi-tool requests the list way, see
  bench_search.py), from ``search(q, 10)`` / ``retrieve(k=10)``;
- index memory, in a second fresh process: what building the index leaves allocated
  (tracemalloc, which also sees numpy's arrays), the catalog excluded; and the growth of
  the process's resident memory over the build, from the first process.

bm25s indexes the same text tooldeck does (name words, description, parameter names,
descriptions and enum values, namespace and its description), English stopwords, the
same Snowball stemmer (PyStemmer, its word cache off, as tooldeck's is); it ranks one flat
field with BM25 (no field weights, synonyms or name bonuses).

"before" is the tooldeck source at ``--before`` (default: the commit this change started
from), extracted with ``git archive`` and put first on ``PYTHONPATH``.

Run: ``uv run --locked --group bench python bench/search_scale.py`` (``--sizes 1000,5000``,
``--rounds 3``, ``--engines before,after,bm25s``, ``--json out.json``, ``--clock cpu``: each
text's least CPU time of its rounds instead of every call's wall-clock time, for a loaded
machine; ``--interleave``: the query times of all engines measured in one process, text by
text, each engine's rounds of a text one after another and the engines' order alternating
per text, so a change of the machine's load hits every engine alike; implies ``--clock
cpu``; "before" is imported there as a renamed copy of its package; build, memory and
recall come from the usual fresh processes).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bigcatalog import catalog, queries
from _harness import machine_lines, percentile, table

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BEFORE = "c02297d"
SIZES = (1000, 5000, 10000, 20000, 50000)
ENGINES = ("before", "after", "bm25s")


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


# -- one engine in one process -------------------------------------------------------------
class Tooldeck:
    def __init__(self, defs: list[dict[str, Any]]) -> None:
        from tooldeck.search import ToolDoc

        self.docs = [ToolDoc.from_definition(d) for d in defs]

    def build(self) -> None:
        from tooldeck.search import ToolIndex

        self.index = ToolIndex(self.docs, semantic=False)

    def search(self, q: str, k: int) -> list[str]:
        return [h.name for h in self.index.search(q, k)]

    def timed(self, q: str) -> None:
        self.index.search(q, 5, floor=True)

    def gateway(self, q: str) -> None:
        self.index.search_groups(q, 5, floor=True)


class Bm25s:
    def __init__(self, defs: list[dict[str, Any]]) -> None:
        import Stemmer

        from tooldeck.search.docs import schema_text

        def text(d: dict[str, Any]) -> str:
            names, texts = schema_text(d.get("input_schema") or {})
            parts = [
                d["name"].replace("__", " ").replace("_", " "),
                d.get("description") or "",
                " ".join(names).replace("_", " "),
                " ".join(texts),
                d.get("namespace") or "",
                d.get("namespace_description") or "",
            ]
            return " ".join(parts)

        import bm25s  # imported before the build is measured

        self.bm25s = bm25s
        self.names = [d["name"] for d in defs]
        self.texts = [text(d) for d in defs]
        self.stemmer = Stemmer.Stemmer("english", 0)

    def build(self) -> None:
        bm25s = self.bm25s
        tokens = bm25s.tokenize(
            self.texts, stopwords="en", stemmer=self.stemmer, show_progress=False
        )
        self.retriever = bm25s.BM25()
        self.retriever.index(tokens, show_progress=False)

    def _retrieve(self, q: str, k: int) -> list[str]:
        tokens = self.bm25s.tokenize(
            [q], stopwords="en", stemmer=self.stemmer, show_progress=False, return_ids=False
        )
        if not tokens[0]:
            return []
        docs, scores = self.retriever.retrieve(tokens, k=k, show_progress=False)
        return [self.names[d] for d, s in zip(docs[0], scores[0], strict=True) if s > 0]

    def search(self, q: str, k: int) -> list[str]:
        return self._retrieve(q, k)

    def timed(self, q: str) -> None:
        self._retrieve(q, 5)

    def gateway(self, q: str) -> None:
        self._retrieve(q, 5)


def _engine(name: str, defs: list[dict[str, Any]]) -> Any:
    return Bm25s(defs) if name == "bm25s" else Tooldeck(defs)


def _recall(engine: Any, qs: list[dict[str, Any]]) -> dict[str, float]:
    from bench_search import evaluate

    def retrieve(q: str, k: int) -> list[frozenset[str]]:
        return [frozenset((n,)) for n in engine.search(q, k)]

    overall = evaluate(retrieve, qs)["overall"]
    return {"r1": overall["r1"], "r5": overall["r5"]}


def _texts(qs: list[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(t for q in qs for t in [q["query"], *q.get("subqueries", [])]))


def interleaved(size: int, engines: list[str], rounds: int, before: Path) -> dict[str, Any]:
    """Query times of every engine, measured in this one process text by text (see
    ``--interleave``): {engine: {"search": {p50, p99}, "gateway": {...}}}, CPU ms."""
    defs = catalog(size)
    built: dict[str, Any] = {}
    for name in engines:
        if name == "before":
            package = before.parent / "pkg" / "tooldeck_before"
            if not package.exists():
                package.parent.mkdir(parents=True)
                os.symlink(before / "tooldeck", package)
            sys.path.insert(0, str(package.parent))
            import tooldeck_before.search as old  # type: ignore[import-not-found]

            docs = [old.ToolDoc.from_definition(d) for d in defs]
            index = old.ToolIndex(docs, semantic=False)
            engine: Any = Tooldeck.__new__(Tooldeck)
            engine.index = index
        else:
            engine = _engine(name, defs)
            engine.build()
        built[name] = engine
    texts = _texts(queries())
    for t in texts[:100]:  # warm up
        for engine in built.values():
            engine.timed(t)
            engine.gateway(t)
    gc.collect()
    cpu = time.process_time_ns
    least: dict[tuple[str, str], list[float]] = {
        (name, label): [] for name in engines for label in ("search", "gateway")
    }
    for j, t in enumerate(texts):
        for name in engines if j % 2 == 0 else engines[::-1]:
            engine = built[name]
            for label, call in (("search", engine.timed), ("gateway", engine.gateway)):
                best = math.inf
                for _ in range(rounds):
                    t0 = cpu()
                    call(t)
                    best = min(best, (cpu() - t0) / 1e6)
                least[name, label].append(best)
    out: dict[str, Any] = {name: {} for name in engines}
    for (name, label), samples in least.items():
        samples.sort()
        out[name][label] = {"p50": percentile(samples, 0.5), "p99": percentile(samples, 0.99)}
    return out


def child(name: str, size: int, memory: bool, rounds: int, clock: str) -> dict[str, Any]:
    defs = catalog(size)
    engine = _engine(name, defs)
    qs = queries()
    texts = _texts(qs)
    gc.collect()
    if memory:
        tracemalloc.start()
        engine.build()
        gc.collect()
        current, peak = tracemalloc.get_traced_memory()
        return {"traced": current, "traced_peak": peak}
    rss = _rss()
    start = time.perf_counter()
    engine.build()
    build = time.perf_counter() - start
    gc.collect()
    grown = _rss() - rss
    out: dict[str, Any] = {"build_s": build, "rss_growth": grown}
    for t in texts[:100]:  # warm up
        engine.timed(t)
    for label, call in (("search", engine.timed), ("gateway", engine.gateway)):
        samples: list[float] = []
        if clock == "cpu":  # each text's least CPU time of its rounds (a loaded machine)
            cpu = time.process_time_ns
            for t in texts:
                least = math.inf
                for _ in range(rounds):
                    t0 = cpu()
                    call(t)
                    least = min(least, (cpu() - t0) / 1e6)
                samples.append(least)
        else:
            wall = time.perf_counter_ns
            for _ in range(rounds):
                for t in texts:
                    t0 = wall()
                    call(t)
                    samples.append((wall() - t0) / 1e6)
        samples.sort()
        out[label] = {"p50": percentile(samples, 0.5), "p99": percentile(samples, 0.99)}
    out["recall"] = _recall(engine, qs)
    out["top5"] = {t: engine.search(t, 5) for t in texts}
    return out


# -- the driver ----------------------------------------------------------------------------
def _before_tree(rev: str) -> Path:
    where = Path(tempfile.mkdtemp(prefix="tooldeck-before-"))
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "src/tooldeck"],
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(where)], input=archive, check=True)
    return where / "src"


def _run(
    name: str, size: int, memory: bool, rounds: int, before: Path, clock: str
) -> dict[str, Any]:
    env = dict(os.environ)
    if name == "before":
        env["PYTHONPATH"] = str(before)
    args = [sys.executable, __file__, "--child", name, "--size", str(size)]
    args += ["--rounds", str(rounds), "--clock", clock] + (["--memory"] if memory else [])
    done = subprocess.run(args, env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{name} at {size}: {done.stderr.strip()}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _interleaved(size: int, engines: list[str], rounds: int, before: Path) -> dict[str, Any]:
    args = [sys.executable, __file__, "--interleaved", "--size", str(size), "--rounds"]
    args += [str(rounds), "--engines", ",".join(engines), "--before", str(before)]
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"interleaved at {size}: {done.stderr.strip()}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _mib(n: float) -> str:
    return f"{n / 2**20:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--child", choices=ENGINES)
    parser.add_argument("--interleaved", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int)
    parser.add_argument("--memory", action="store_true")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", default=BEFORE)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="wall: every call timed; cpu: each text's least CPU time of --rounds",
    )
    parser.add_argument(
        "--interleave",
        action="store_true",
        help="time every engine's queries in one process, text by text (implies cpu)",
    )
    args = parser.parse_args()
    if args.interleaved:  # the one process of --interleave
        engines = args.engines.split(",")
        times = interleaved(args.size, engines, args.rounds, Path(args.before))
        print(json.dumps(times))
        return
    if args.interleave:
        args.clock = "cpu"
    if args.child:
        print(json.dumps(child(args.child, args.size, args.memory, args.rounds, args.clock)))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    engines = args.engines.split(",")
    before = _before_tree(args.before)
    results: dict[str, dict[str, Any]] = {}
    for n, size in enumerate(sizes):
        # alternate the order so no engine always runs first (the machine is shared)
        order = engines if n % 2 == 0 else engines[::-1]
        for name in order:
            r = _run(name, size, False, args.rounds, before, args.clock)
            r.update(_run(name, size, True, args.rounds, before, args.clock))
            results[f"{name}@{size}"] = r
        if args.interleave:
            times = _interleaved(size, order, args.rounds, before)
            for name in order:
                results[f"{name}@{size}"].update(times[name])
        for name in order:
            r = results[f"{name}@{size}"]
            print(
                f"{name:>6} {size:>6}: build {r['build_s']:.1f} s, search p50 "
                f"{r['search']['p50']:.2f} ms p99 {r['search']['p99']:.2f}, gateway p50 "
                f"{r['gateway']['p50']:.2f} p99 {r['gateway']['p99']:.2f}, index "
                f"{_mib(r['traced'])} MiB (rss +{_mib(r['rss_growth'])}), R@5 "
                f"{r['recall']['r5']:.3f}",
                file=sys.stderr,
                flush=True,
            )
    for line in machine_lines(("tooldeck", "bm25s", "numpy", "PyStemmer")):
        print(line)
    timing = "interleaved in one process" if args.interleave else "each engine in its own"
    print(
        f"- before: tooldeck at {args.before}; rounds: {args.rounds}; clock: {args.clock}; "
        f"query times: {timing}\n"
    )
    headers = [
        "tools",
        "engine",
        "query p50 ms",
        "query p99 ms",
        "gateway query p50 / p99 ms",
        "index MiB (traced)",
        "RSS growth MiB",
        "build s",
        "R@5",
        "R@1",
        "same top 5 as before",
    ]
    rows = []
    for size in sizes:
        for name in engines:
            key = f"{name}@{size}"
            if key not in results:
                continue
            r = results[key]
            same = "-"
            if name != "before" and f"before@{size}" in results:
                old = results[f"before@{size}"]["top5"]
                same = f"{sum(old[t] == r['top5'][t] for t in old) / len(old):.1%}"
            rows.append(
                [
                    f"{size:,}",
                    name,
                    f"{r['search']['p50']:.2f}",
                    f"{r['search']['p99']:.2f}",
                    f"{r['gateway']['p50']:.2f} / {r['gateway']['p99']:.2f}",
                    _mib(r["traced"]),
                    _mib(r["rss_growth"]),
                    f"{r['build_s']:.1f}",
                    f"{r['recall']['r5']:.3f}",
                    f"{r['recall']['r1']:.3f}",
                    same,
                ]
            )
    print(table(headers, rows))
    if args.json:
        slim = {k: {x: y for x, y in v.items() if x != "top5"} for k, v in results.items()}
        args.json.write_text(json.dumps(slim, indent=1))


if __name__ == "__main__":
    main()
