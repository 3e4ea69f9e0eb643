"""web_fetch under hostile pages (issue 30, item 6): what a compression bomb costs in
memory, what the conversion worker costs to start, and how late a conversion that runs
past the deadline is stopped. Pages come from a local server (tests/_local_http.py);
each fetch runs in a fresh interpreter. Run::

    uv run --locked python bench/web_bounds.py

Linux only (it reads /proc to find the fetching process's children).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "web_pages")]

import make_pdf  # noqa: E402

from _local_http import gzip_bomb, serving  # noqa: E402

ROUNDS = 5

# One fresh interpreter: fetch each (url, timeout, traced) in turn and report, for each,
# the seconds to the answer, the peak RSS after it, the peak of Python's allocations
# during it (when traced: tracemalloc), and the live children at the answer.
PROBE = r"""
import asyncio, json, os, resource, sys, time, tracemalloc
from pathlib import Path
from tooldeck import ToolContext, validate_arguments
from tooldeck.assembly import TurnContext
from tooldeck.builtin import load_builtin_registry

turn = TurnContext("bench", Path("."), web_provider="fetch-only")
toolset = load_builtin_registry().toolset(turn)
tool = toolset["web_fetch"]


def children():
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(stat[1]) == os.getpid() and stat[0] != "Z":
            found.append(int(entry))
    return found


out = []
for url, timeout, traced in json.loads(sys.argv[1]):
    ctx = ToolContext(call_id="c", tool_name="web_fetch", session_id="bench", turn=turn,
                      toolset=toolset)
    params = validate_arguments(tool, json.dumps({"url": url, "timeout": timeout})).params
    if traced:
        tracemalloc.start()
    started = time.monotonic()
    result = asyncio.run(tool.invoke(params, ctx))
    seconds = time.monotonic() - started
    traced_peak = tracemalloc.get_traced_memory()[1] / 2**20 if traced else None
    tracemalloc.stop()
    out.append({
        "seconds": seconds,
        "traced_mib": traced_peak,
        "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "children": children(),
        "text": result.text()[-120:],
    })
print(json.dumps(out))
os._exit(0)
"""


def probe(*fetches: tuple[str, int, bool]) -> list[dict[str, object]]:
    env = {**os.environ, "TOOLDECK_WEB_ALLOW": "127.0.0.1"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(fetches)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=300,
    )
    reports: list[dict[str, object]] = json.loads(done.stdout)
    return reports


def main() -> None:
    page = b"<html><body><main><h1>Small</h1><p>a small page</p></main></body></html>"
    routes = {
        "/small": ([("Content-Type", "text/html; charset=utf-8")], page),
        "/bomb": (
            [("Content-Type", "text/plain"), ("Content-Encoding", "gzip, gzip")],
            gzip_bomb(),
        ),
        "/pdf-bomb": ([("Content-Type", "application/pdf")], make_pdf.bomb()),
    }
    print(f"load average before: {os.getloadavg()[0]:.2f}; {ROUNDS} rounds, median [min-max]")
    with serving("127.0.0.1", "bench", routes=routes) as server:
        grew, traced, cold, warm, late, left = [], [], [], [], [], []
        for _ in range(ROUNDS):
            small, again, bomb, bomb_traced = probe(
                (f"{server.url}/small", 30, False),
                (f"{server.url}/small", 30, False),
                (f"{server.url}/bomb", 30, False),
                (f"{server.url}/bomb", 30, True),
            )
            grew.append(float(bomb["peak_mib"]) - float(again["peak_mib"]))  # type: ignore[arg-type]
            traced.append(float(bomb_traced["traced_mib"]))  # type: ignore[arg-type]
            cold.append(float(small["seconds"]))  # type: ignore[arg-type]
            warm.append(float(again["seconds"]))  # type: ignore[arg-type]
            (pdf,) = probe((f"{server.url}/pdf-bomb", 3, False))
            assert "Timed out after 3 s" in str(pdf["text"]), pdf["text"]
            late.append(float(pdf["seconds"]) - 3)  # type: ignore[arg-type]
            left.append(len(pdf["children"]))  # type: ignore[arg-type]

    def show(name: str, values: list[float], unit: str, scale: float = 1.0) -> None:
        med = statistics.median(values) * scale
        print(f"{name:<58} {med:8.1f} {unit} [{min(values) * scale:.1f}-{max(values) * scale:.1f}]")

    show("gzip bomb (796 B, 384 MiB inside): peak RSS added", grew, "MiB")
    show("gzip bomb: peak of Python allocations during the fetch", traced, "MiB")
    show("first small page (the worker starts cold)", cold, "ms", 1000)
    show("second small page (the worker reused)", warm, "ms", 1000)
    show("PDF bomb, timeout 3 s: answer later than the deadline by", late, "ms", 1000)
    show("PDF bomb: conversion processes alive at the answer", [float(n) for n in left], "")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
