"""Shared helpers for the hand-run benchmarks: timing, summaries, machine facts.

Not a benchmark itself. Every timing helper returns raw per-call samples in nanoseconds
so the scripts can report medians and tail percentiles rather than means.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

PEER_PACKAGES = (
    "tooldeck",
    "pydantic",
    "pydantic-core",
    "pydantic-ai-slim",
    "openai-agents",
    "openai",
    "langgraph",
    "langchain-core",
    "jsonschema",
    "jsonschema-rs",
    "anyio",
)


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) of already-sorted values, linear interpolation."""
    if not sorted_values:
        raise ValueError("no samples")
    pos = (len(sorted_values) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summary_us(samples_ns: Sequence[int]) -> tuple[float, float]:
    """(median, p90) in microseconds."""
    ordered = sorted(samples_ns)
    return percentile(ordered, 0.5) / 1000.0, percentile(ordered, 0.9) / 1000.0


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


async def sample_async(call: Callable[[], Awaitable[Any]], n: int, out: list[int]) -> None:
    """Await ``call()`` ``n`` times, appending each call's wall time (ns) to ``out``."""
    clock = time.perf_counter_ns
    append = out.append
    for _ in range(n):
        t0 = clock()
        await call()
        append(clock() - t0)


def sample_sync(call: Callable[[], Any], n: int, out: list[int]) -> None:
    """Call ``call()`` ``n`` times, appending each call's wall time (ns) to ``out``."""
    clock = time.perf_counter_ns
    append = out.append
    for _ in range(n):
        t0 = clock()
        call()
        append(clock() - t0)


def versions(packages: Sequence[str] = PEER_PACKAGES) -> dict[str, str]:
    found = {}
    for name in packages:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def machine_lines(packages: Sequence[str] = PEER_PACKAGES) -> list[str]:
    """Markdown bullet lines describing the machine and the package versions."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    pkgs = ", ".join(f"{k} {v}" for k, v in versions(packages).items())
    return [
        f"- tooldeck source: {source_state()}",
        f"- machine: {os.cpu_count()} cores (nproc), {cpu}, {platform.system()} "
        f"{platform.release()}",
        f"- python: {sys.version.split()[0]} ({platform.python_implementation()})",
        f"- packages: {pkgs}",
    ]


def _busy_seconds() -> float:
    """CPU seconds spent busy by the whole machine since boot (all cores)."""
    with open("/proc/stat", encoding="utf-8") as fh:
        fields = [int(x) for x in fh.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _own_seconds() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class BackgroundLoad:
    """How many cores other processes kept busy while a benchmark ran (Linux only).

    Another engineer's test run on a 2-core machine skews every number; this makes the
    contamination visible in the report instead of silent.
    """

    def __init__(self) -> None:
        self.available = os.path.exists("/proc/stat")
        self.t0 = time.perf_counter()
        self.busy0 = _busy_seconds() if self.available else 0.0
        self.own0 = _own_seconds()

    def cores(self) -> float:
        if not self.available:
            return float("nan")
        wall = time.perf_counter() - self.t0
        others = (_busy_seconds() - self.busy0) - (_own_seconds() - self.own0)
        return max(others, 0.0) / wall if wall > 0 else 0.0

    def report(self) -> str:
        return f"other processes used {self.cores():.2f} of {os.cpu_count()} cores meanwhile"


def wait_for_idle(threshold: float = 0.15, window: float = 2.0, max_wait: float = 60.0) -> str:
    """Wait (up to ``max_wait`` s) until other processes use under ``threshold`` cores.

    Returns a one-line note for the report. Never fails: after ``max_wait`` it proceeds
    and says so.
    """
    if not os.path.exists("/proc/stat"):
        return "idle check unavailable"
    started = time.perf_counter()
    while True:
        probe = BackgroundLoad()
        time.sleep(window)
        load = probe.cores()
        waited = time.perf_counter() - started
        if load < threshold:
            return f"machine idle before start ({load:.2f} cores busy, waited {waited:.0f} s)"
        if waited >= max_wait:
            return f"machine NOT idle before start ({load:.2f} cores busy after {waited:.0f} s)"
        print(f"# waiting for an idle machine: {load:.2f} cores busy", file=sys.stderr)


def source_state() -> str:
    """The commit and whether src/ differs from it, with a digest of src/tooldeck."""
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha1()
    for path in sorted((root / "src" / "tooldeck").rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "src"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return f"src digest {digest.hexdigest()[:12]}"
    state = "with uncommitted changes in src/" if dirty else "clean"
    return f"commit {head}, {state} (src/tooldeck digest {digest.hexdigest()[:12]})"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table; the first column is left-aligned, the others right-aligned."""
    align = [":---"] + ["---:"] * (len(headers) - 1)
    lines = [
        "| " + " | ".join(headers) + " |",
        "| " + " | ".join(align) + " |",
    ]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)
