"""Large tool results: memory and time of offload + recall, and the token estimator's error.

Two benchmarks, each printing Markdown:

``memory`` (default): a 50 MB tool result goes through ``OffloadStore.hook`` (estimate,
atomic write, summary, guard) and is then read back completely with recall pages; every
page is checked against the original. Each variant runs in a fresh subprocess twice: once
under ``tracemalloc`` (peak of Python allocations on top of the payload) and once without
it (wall times, and the process's peak RSS from ``resource.getrusage`` minus the RSS
before the payload was built). The requirement is a peak under 3x the payload.

``tokens``: ``tooldeck.tokens.estimate_tokens`` against real tokenizers, on a corpus of
real text found on this machine (Python reference manual and package READMEs, licences;
Python and C source; JSON files and package metadata, compact and indented; other
languages (vim tutor, gnupg help); command output (ls, find, dpkg, git log...)). The
reference tokenizers run in a separate Python given by ``--ref-python`` that has
``bpe-openai`` (ships the o200k_base and cl100k_base rank files inside its wheel, so it
works offline) and optionally ``tokenizers`` plus a ``tokenizer.json`` (``--claude-json``:
the one inside the ``anthropic`` 0.34 wheel, Claude's legacy tokenizer) and ``tiktoken``
(cross-check of bpe-openai's counts, fed the same rank files). ``--fit`` also refits the
estimator's weights (needs numpy in the reference Python); the shipped weights were fit on
the even half of the samples (by MD5 of their name) and the table reports the odd half.

    python3 -m venv /tmp/tokvenv && /tmp/tokvenv/bin/pip install bpe-openai tokenizers \\
        tiktoken numpy
    pip download --no-deps anthropic==0.34.0 && unzip anthropic-0.34.0-*.whl \\
        anthropic/tokenizer.json -d /tmp/anth
    uv run python bench/bench_offload.py memory [--mb 50]
    uv run python bench/bench_offload.py tokens --ref-python /tmp/tokvenv/bin/python \\
        --claude-json /tmp/anth/anthropic/tokenizer.json [--fit]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import pathlib
import random
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable
from typing import Any

from _harness import BackgroundLoad, machine_lines, table, wait_for_idle
from tooldeck.tokens import default_estimate_tokens

ROOT = pathlib.Path(__file__).resolve().parent.parent

# -- memory ---------------------------------------------------------------------------------


def _memory_child(kind: str, size: int, home: str, traced: bool) -> None:
    """One measurement, in its own process (so ru_maxrss belongs to it alone)."""
    import asyncio
    import gc
    import resource
    import tracemalloc

    from tooldeck import Dispatcher, JsonPart, ToolContext, ToolResult, Toolset, tool
    from tooldeck.offload import RECALL_TOOL_NAME, OffloadStore
    from tooldeck.testing import call
    from tooldeck.transcript import ToolCall

    def rss() -> int:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    @tool(read_only=True)
    def big() -> str:
        """Stand-in for a tool with a huge result."""
        return ""

    gc.collect()
    rss_before = rss()
    line = "2026-11-30T11:17:00.123Z INFO request id=%08d path=/api/items/%d status=200 ms=%d\n"
    if kind == "json_part":
        rows, total, i = [], 0, 0
        while total < size:
            row = {"id": i, "name": f"item {i}", "tags": ["a", "b"], "score": i % 97}
            rows.append(row)
            total += len(json.dumps(row, separators=(",", ":"))) + 1
            i += 1
        result = ToolResult([JsonPart({"rows": rows})])
        payload_text = result.text()
    else:  # 1 MB of distinct log lines, repeated: one allocation of the payload's size
        block_size = min(size, 1_000_000)
        pieces, total, i = [], 0, 0
        while total < block_size:
            piece = line % (i, i, i % 997)
            pieces.append(piece)
            total += len(piece)
            i += 1
        block = "".join(pieces)[:block_size]
        del pieces
        payload_text = block * (size // block_size)
        del block
        result = ToolResult(payload_text)
    gc.collect()
    out: dict[str, Any] = {
        "kind": kind,
        "payload_bytes": len(payload_text),  # ASCII: characters = bytes
        "rss_before": rss_before,
        "rss_payload": rss(),
    }
    if traced:
        tracemalloc.start()
        tracemalloc.reset_peak()
    t0 = time.perf_counter()
    threshold = 0 if kind == "guard_only" else 15_000
    store = OffloadStore(home, "bench", threshold_tokens=threshold)
    ctx = ToolContext("c1", "big", "bench")
    summary = asyncio.run(store.hook(ToolCall("c1", "big", "{}"), big, result, ctx))
    out["hook_s"] = time.perf_counter() - t0
    out["summary_tokens"] = store.count(summary.text())
    if traced:
        out["hook_peak"] = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
    if kind == "guard_only":
        out["guarded_tokens"] = store.count(summary.text())
    else:
        ref = summary.details["offloaded"]["ref_id"]
        out["file_bytes"] = os.path.getsize(store.ref_path(ref))
        t1 = time.perf_counter()
        offset, pages, exact = 0, 0, True
        while True:
            page = store.read_page(ref, offset)
            exact = exact and page.text == payload_text[offset : page.end]
            pages += 1
            if page.next_offset is None:
                break
            offset = page.next_offset
        out["recall_s"] = time.perf_counter() - t1
        out["pages"] = pages
        out["recall_exact"] = exact and page.end == len(payload_text)
        if traced:
            out["recall_peak"] = tracemalloc.get_traced_memory()[1]
            tracemalloc.reset_peak()
        toolset = Toolset([store.recall_tool])
        dispatcher = Dispatcher(toolset, session_id="bench", result_hooks=[store.hook])
        t2 = time.perf_counter()
        for n in range(20):
            arguments = {"ref_id": ref, "offset": (n * 2_500_000) % len(payload_text)}
            done = asyncio.run(dispatcher.dispatch([call(RECALL_TOOL_NAME, arguments)]))
            assert not done.outputs[0].is_error, done.outputs[0].text
        out["recall_tool_ms"] = (time.perf_counter() - t2) / 20 * 1000
        store.cleanup()
    if traced:
        tracemalloc.stop()
    out["rss_peak"] = rss()
    print(json.dumps(out))


def _child(kind: str, size: int, traced: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="tooldeck-offload-bench-") as home:
        done = subprocess.run(
            [sys.executable, __file__, "_child", kind, str(size), home, "1" if traced else "0"],
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode != 0:
        raise SystemExit(f"benchmark child failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


def memory(args: argparse.Namespace) -> None:
    size = int(args.mb * 1_000_000)
    idle = wait_for_idle()
    load = BackgroundLoad()
    rows = []
    verdicts = []
    for kind in ("text", "json_part", "guard_only"):
        traced = _child(kind, size, traced=True)
        plain = _child(kind, size, traced=False)
        payload = traced["payload_bytes"]
        extra_rss = plain["rss_peak"] - plain["rss_payload"]
        rss_total = plain["rss_peak"] - plain["rss_before"]
        peak = max(traced["hook_peak"], traced.get("recall_peak", 0))
        peaks = f"hook {_mb(traced['hook_peak'])}, recall {_mb(traced.get('recall_peak', 0))}"
        # the payload (as text) plus the most tooldeck held on top of it, by either measure
        ratio = (payload + max(peak, extra_rss)) / payload
        verdicts.append(f"{kind} {ratio:.2f}x")
        recall = (
            f"{plain['recall_s']:.2f} s, {plain['pages']:,} pages, "
            f"exact: {plain['recall_exact']}, tool call {plain['recall_tool_ms']:.1f} ms"
            if kind != "guard_only"
            else f"guarded view {plain['guarded_tokens']:,} tokens"
        )
        rows.append(
            [
                kind,
                _mb(payload),
                f"{_mb(peak)} ({peaks})",
                f"{_mb(extra_rss)}",
                f"{_mb(rss_total)} ({rss_total / payload:.2f}x)",
                f"**{ratio:.2f}x**",
                f"{plain['hook_s']:.2f} s",
                f"{plain['summary_tokens']:,}",
                recall,
            ]
        )
        if ratio >= 3:
            print(f"# FAILED: {kind} peaks at {ratio:.2f}x the payload", file=sys.stderr)
    print(f"## Offload + recall of a {args.mb:g} MB result\n")
    print("\n".join(machine_lines(("tooldeck", "pydantic", "anyio"))))
    print(f"- {idle}; {load.report()}\n")
    print(
        table(
            [
                "result",
                "payload",
                "tracemalloc peak on top of it",
                "RSS growth after payload",
                "RSS peak - RSS before payload",
                "payload + peak",
                "hook (estimate + write + summary)",
                "summary tokens",
                "recall everything",
            ],
            rows,
        )
    )
    print(
        "\ntext: log lines as one str. json_part: a JsonPart holding a list of dicts; its "
        "payload is the size of its compact JSON (the Python objects themselves take ~7x "
        "that, which is why its RSS column is high: they exist before tooldeck sees them). "
        "guard_only: offloading off, the guard cuts the view to 25,000 tokens. "
        "tracemalloc: Python allocations during the hook / the full recall, on top of the "
        "payload; RSS: the child process's ru_maxrss. 'payload + peak' is the payload "
        "plus the larger of the two extras; the requirement is under 3x. "
        f"Result: {', '.join(verdicts)}."
    )


# -- tokens -----------------------------------------------------------------------------------


def _split(text: str, name: str, sizes: tuple[int, ...] = (400, 1500, 4000, 12000)) -> list:
    lines = text.splitlines(keepends=True)
    out, i, k = [], 0, 0
    while i < len(lines):
        size = sizes[k % len(sizes)]
        k += 1
        buf: list[str] = []
        n = 0
        while i < len(lines) and n < size:
            buf.append(lines[i])
            n += len(lines[i])
            i += 1
        sample = "".join(buf)
        if len(sample.strip()) > 100:
            out.append((f"{name}#{k}", sample))
    return out


def _read(path: pathlib.Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _run(cmd: list[str], cwd: pathlib.Path | None = None) -> str:
    if shutil.which(cmd[0]) is None:
        return ""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout


def corpus(per_category: int = 400) -> dict[str, list[tuple[str, str]]]:
    """Samples of real text on this machine, by category (deterministic for one machine)."""
    rng = random.Random(7)
    site = pathlib.Path(sysconfig.get_paths()["purelib"])
    std = pathlib.Path(sysconfig.get_paths()["stdlib"])
    cats: dict[str, list[tuple[str, str]]] = {
        "English": [],
        "code": [],
        "JSON": [],
        "command output": [],
        "other languages": [],
    }
    try:
        import pydoc_data.topics as topics

        for key in sorted(topics.topics):
            cats["English"] += _split(topics.topics[key], f"pydoc:{key}")
    except ImportError:
        pass
    for path in sorted(site.glob("*.dist-info/METADATA")):
        body = _read(path).split("\n\n", 1)
        if len(body) == 2 and len(body[1]) > 500:
            cats["English"] += _split(body[1], f"readme:{path.parent.name}")
    for path in sorted(pathlib.Path("/usr/share/common-licenses").glob("*")):
        if path.is_file():
            cats["English"] += _split(_read(path), f"licence:{path.name}")
    sources = sorted(std.glob("*.py")) + sorted(site.glob("*/*.py"))
    sources += sorted((ROOT / "src").rglob("*.py")) + sorted(
        pathlib.Path("/usr/include").glob("*.h")
    )
    for path in sources:
        cats["code"] += _split(_read(path), f"code:{path.name}")
    jsons = sorted(site.rglob("*.json")) + sorted((ROOT / "tests").rglob("*.json"))
    for path in jsons:
        try:
            value = json.loads(_read(path))
        except ValueError:
            continue
        compact = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        for j in range(0, min(len(compact), 60_000), 6_000):
            cats["JSON"].append((f"json-compact:{path.name}@{j}", compact[j : j + 6_000]))
        cats["JSON"] += _split(json.dumps(value, ensure_ascii=False, indent=2), f"json:{path.name}")
    dists = []
    for dist in importlib.metadata.distributions():
        meta = dist.metadata
        dists.append(
            {
                "name": meta["Name"],
                "version": dist.version,
                "summary": meta.get("Summary"),
                "requires": dist.requires or [],
                "files": len(dist.files or []),
            }
        )
    dists.sort(key=lambda d: str(d["name"]).lower())
    for j in range(0, len(dists), 20):
        chunk = dists[j : j + 20]
        cats["JSON"].append((f"json-compact:dists@{j}", json.dumps(chunk, separators=(",", ":"))))
        cats["JSON"].append((f"json-indent:dists@{j}", json.dumps(chunk, indent=2)))
    for path in sorted(pathlib.Path("/usr/share/vim").glob("vim*/tutor/tutor.*.utf-8")):
        cats["other languages"] += _split(_read(path), f"lang:{path.name}")
    for path in sorted(pathlib.Path("/usr/share/gnupg").glob("help.*.txt")):
        cats["other languages"] += _split(_read(path), f"lang:{path.name}")
    outputs = {
        "ls-usr-bin": _run(["ls", "-la", "/usr/bin"]),
        "ls-site": _run(["ls", "-la", str(site)]),
        "ls-R-doc": "\n".join(_run(["ls", "-laR", "/usr/share/doc"]).splitlines()[:3000]),
        "find-std": "\n".join(_run(["find", str(std), "-name", "*.py"]).splitlines()[:2000]),
        "dpkg": _run(["dpkg", "-l"]),
        "df": _run(["df", "-h"]),
        "mount": _run(["mount"]),
        "git-log": _run(["git", "log", "--stat", "-n", "40"], cwd=ROOT),
        "ruff": _run(
            ["ruff", "check", "src", "--select", "ALL", "--output-format", "concise"], cwd=ROOT
        ),
        "pip-list": "\n".join(
            f"{d['name']!s:<40} {d['version']:<16} {str(d['summary'] or '')[:60]}" for d in dists
        ),
    }
    for name, text in outputs.items():
        cats["command output"] += _split(text, f"cmd:{name}")
    for name in cats:
        rng.shuffle(cats[name])
        cats[name] = cats[name][:per_category]
    return cats


_REF = r"""
import json, sys, time
import bpe_openai
samples = json.load(sys.stdin)
claude_path = sys.argv[1] if len(sys.argv) > 1 else ""
encs = {n: bpe_openai.get_encoding(n) for n in ("o200k_base", "cl100k_base")}
def counter(enc):
    return lambda text: len(enc.encode(text, disallowed_special=()))
counters = {name: counter(enc) for name, enc in encs.items()}
if claude_path:
    from tokenizers import Tokenizer
    claude = Tokenizer.from_file(claude_path)
    counters["claude_legacy"] = lambda t: len(claude.encode(t).ids)
out, seconds = {}, {}
for name, count in counters.items():
    t0 = time.perf_counter()
    for key, text in samples.items():
        out.setdefault(key, {})[name] = count(text)
    seconds[name] = time.perf_counter() - t0
check = "tiktoken not installed"
try:
    import base64, gzip, pathlib, tiktoken
    from tiktoken_ext import openai_public
    data = pathlib.Path(bpe_openai.__file__).parent / "data" / "o200k_base.tiktoken.gz"
    ranks = {}
    for line in gzip.decompress(data.read_bytes()).splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    real = openai_public.load_tiktoken_bpe  # it would download; hand it the same ranks
    openai_public.load_tiktoken_bpe = lambda *a, **k: ranks
    try:
        enc = tiktoken.Encoding(**{**openai_public.o200k_base(), "name": "o200k_check"})
    finally:
        openai_public.load_tiktoken_bpe = real
    same = sum(
        len(enc.encode(t, disallowed_special=())) == out[k]["o200k_base"]
        for k, t in samples.items()
    )
    check = (
        f"tiktoken {tiktoken.__version__}, fed the same o200k_base ranks, agrees with "
        f"bpe-openai on {same} of {len(samples)} samples"
    )
except ImportError:
    pass
print(json.dumps({"counts": out, "seconds": seconds, "check": check}))
"""

_FIT = r"""
import json, sys
import numpy as np
data = json.load(sys.stdin)
names = data["names"]; X = np.array(data["X"], float); Y = np.array(data["Y"], float)
fit = np.array(data["fit"], bool); other = np.array(data["other"], bool)
w = 1 / Y
def nnls(A, y, cols):
    active = list(cols)
    while True:
        c, *_ = np.linalg.lstsq(A[:, active], y, rcond=None)
        if (c >= 0).all():
            break
        active = [a for a, v in zip(active, c) if v > 0]
    out = np.zeros(A.shape[1]); out[active] = c
    return out
ascii_rows = fit & ~other
na = [names.index(n) for n in ("lead2", "lead3")]
fixed = {}
LEADS = ("lead2", "lead3", "lead4")
order = sorted((n for n in names if n not in LEADS), key=lambda n: -X[:, names.index(n)].sum())
r = ascii_rows
for name in order:  # quantise the most frequent class first, refit the rest
    free = [i for i, n in enumerate(names) if n not in fixed and n not in LEADS]
    off = sum((X[:, names.index(n)] * v for n, v in fixed.items()), np.zeros(len(Y)))
    c = nnls(X[r] * w[r, None], (Y[r] - off[r]) * w[r], free)
    fixed[name] = round(c[names.index(name)] * 64) / 64
rows = fit & other
off = sum((X[:, names.index(n)] * v for n, v in fixed.items()), np.zeros(len(Y)))
c = nnls(X[rows] * w[rows, None], (Y[rows] - off[rows]) * w[rows], na)
for n in ("lead2", "lead3"):
    fixed[n] = round(c[names.index(n)] * 64) / 64
print(json.dumps({n: int(round(v * 64)) for n, v in fixed.items()}))
"""

_CLASSES = ("letter", "digit", "space", "tab", "newline", "punct", "lead2", "lead3", "lead4")


def _byte_class(byte: int) -> str | None:
    if byte >= 0xF0:
        return "lead4"
    if byte >= 0xE0:
        return "lead3"
    if byte >= 0xC0:
        return "lead2"
    if byte >= 0x80:
        return None
    char = chr(byte)
    if char.isalpha():
        return "letter"
    if char.isdigit():
        return "digit"
    return {" ": "space", "\t": "tab", "\n": "newline"}.get(char, "punct")


def _features(text: str) -> list[int]:
    data = text.encode("utf-8", "surrogatepass")
    counts = dict.fromkeys(_CLASSES, 0)
    for byte in range(256):
        cls = _byte_class(byte)
        if cls is not None:
            counts[cls] += data.count(bytes([byte]))
    return [counts[c] for c in _CLASSES]


def _held_out(key: str) -> bool:
    return int(hashlib.md5(key.encode()).hexdigest(), 16) % 2 == 1


def _stats(est: list[float], ref: list[int]) -> str:
    errors = sorted((e - r) / r for e, r in zip(est, ref, strict=True) if r > 0)
    if not errors:
        return "-"
    bias = statistics.fmean(errors) * 100
    mae = statistics.fmean(abs(e) for e in errors) * 100
    p95 = sorted(abs(e) for e in errors)[int(0.95 * (len(errors) - 1))] * 100
    return f"{bias:+.0f}% / {mae:.0f}% / {p95:.0f}%"


def tokens(args: argparse.Namespace) -> None:
    cats = corpus()
    samples = {f"{c}|{k}": t for c, items in cats.items() for k, t in items}
    ref_args = [args.ref_python, "-c", _REF] + ([args.claude_json] if args.claude_json else [])
    done = subprocess.run(
        ref_args, input=json.dumps(samples), capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"reference tokenizers failed:\n{done.stderr}")
    reference = json.loads(done.stdout)
    counts: dict[str, dict[str, int]] = reference["counts"]
    tokenizers = list(next(iter(counts.values())))
    load = BackgroundLoad()
    t0 = time.perf_counter()
    estimates = {k: default_estimate_tokens(t) for k, t in samples.items()}
    est_seconds = time.perf_counter() - t0
    total_chars = sum(len(t) for t in samples.values())

    def rows_for(pick: Callable[[str], bool]) -> list[list[str]]:
        rows = []
        for cat, items in cats.items():
            keys = [f"{cat}|{k}" for k, _ in items if pick(f"{cat}|{k}")]
            if not keys:
                continue
            chars = sum(len(samples[k]) for k in keys)
            row = [cat, f"{len(keys)} / {chars / 1e6:.2f} M chars"]
            for name in tokenizers:
                ref = [counts[k][name] for k in keys]
                row.append(_stats([estimates[k] for k in keys], ref))
            ref0 = [counts[k][tokenizers[0]] for k in keys]
            row.append(_stats([len(samples[k]) / 4 for k in keys], ref0))
            rows.append(row)
        return rows

    headers = ["text", "samples / size", *tokenizers, f"len/4 vs {tokenizers[0]}"]
    print("## Token estimator vs real tokenizers\n")
    print("\n".join(machine_lines(("tooldeck",))))
    print(f"- {load.report()}; reference: {reference['check']}\n")
    print("Each cell: bias (mean signed error) / mean |error| / p95 |error|, per sample.\n")
    print("Held-out half (the weights were fit on the other half):\n")
    print(table(headers, rows_for(_held_out)))
    print("\nAll samples:\n")
    print(table(headers, rows_for(lambda k: True)))
    speeds = [
        f"tooldeck estimate_tokens {total_chars / est_seconds / 1e6:.1f} M chars/s "
        f"({est_seconds / total_chars * 1e9:.1f} ns/char)"
    ] + [
        f"{name} {total_chars / s / 1e6:.1f} M chars/s" for name, s in reference["seconds"].items()
    ]
    print(f"\nSpeed over the {total_chars / 1e6:.1f} M characters: " + "; ".join(speeds) + ".")
    if args.fit:
        keys = sorted(samples)
        payload = {
            "names": list(_CLASSES),
            "X": [_features(samples[k]) for k in keys],
            "Y": [(counts[k]["o200k_base"] + counts[k]["cl100k_base"]) / 2 for k in keys],
            "fit": [not _held_out(k) for k in keys],
            "other": [k.startswith("other languages|") for k in keys],
        }
        fitted = subprocess.run(
            [args.ref_python, "-c", _FIT],
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            check=False,
        )
        print(f"\nRefit weights (1/64 token per byte class): {fitted.stdout.strip()}")
        if fitted.returncode != 0:
            print(fitted.stderr, file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what")
    mem = sub.add_parser("memory", help="50 MB offload + recall: memory and time")
    mem.add_argument("--mb", type=float, default=50.0)
    tok = sub.add_parser("tokens", help="estimator error against real tokenizers")
    tok.add_argument("--ref-python", required=True)
    tok.add_argument("--claude-json", default="")
    tok.add_argument("--fit", action="store_true")
    if sys.argv[1:2] == ["_child"]:
        kind, size, home, traced = sys.argv[2:6]
        _memory_child(kind, int(size), home, traced == "1")
        return
    args = parser.parse_args()
    if args.what == "tokens":
        tokens(args)
    else:
        if args.what is None:
            args.mb = 50.0
        memory(args)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
