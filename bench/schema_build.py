"""(b) Build and project schemas for 1,000 distinct five-parameter tools, cold and warm.

Each framework runs in its own fresh subprocess (repeated ``--repeat`` times), so one
framework's imports and caches never help another. Inside the worker:

1. import the framework (timed and reported separately, never counted as "cold");
2. generate the 1,000 functions (``_toolgen``; not timed);
3. cold: for each function, build the tool, then project it for the request (timed per
   tool; the very first tool pays every lazy first-use cost, as in a real process);
4. warm: project the same, already built, 1,000 tools again (7 passes, median pass);
5. secondary projections (other providers / variants): one cold pass, then warm passes.

What "project" means per framework (the provider tools-array entry for OpenAI Responses):

- tooldeck: ``tool(fn)``, then ``tooldeck.schema.project(t, "openai-responses")``
  (strict decision and conversion; cached on the tool); secondary: ``"anthropic"``.
- pydantic-ai: ``Tool(fn)`` (builds validator + JSON schema), then ``tool.tool_def`` run
  through ``OpenAIJsonSchemaTransformer`` (what its OpenAI models do per request) into the
  Responses entry; secondary: ``tool.tool_def.parameters_json_schema`` alone.
- openai-agents: ``function_tool(fn)`` (strict ``params_json_schema`` built eagerly), then
  the entry its Responses converter builds from the tool's attributes.
- langchain-core: ``tool(fn)``, then ``convert_to_openai_tool(t)``; secondary: the same
  with ``strict=True``.

Run: ``uv run --group bench python bench/schema_build.py [--repeat N] [--n 1000]``
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

FRAMEWORKS = ("tooldeck", "pydantic-ai", "openai-agents", "langchain-core")
WARM_PASSES = 7


@dataclass
class Adapter:
    build: Callable[[Any], Any]
    project: Callable[[Any], Any]
    is_strict: Callable[[Any], bool]
    secondary: dict[str, Callable[[Any], Any]] = field(default_factory=dict)


def _tooldeck() -> Adapter:
    import tooldeck
    from tooldeck.schema import project

    return Adapter(
        build=tooldeck.tool,
        project=lambda t: project(t, "openai-responses"),
        is_strict=lambda p: bool(p.strict),
        secondary={"anthropic": lambda t: project(t, "anthropic")},
    )


def _pydantic_ai() -> Adapter:
    from pydantic_ai import Tool
    from pydantic_ai.models import _customize_tool_def
    from pydantic_ai.profiles.openai import OpenAIJsonSchemaTransformer

    def project(t: Any) -> dict[str, Any]:
        # OpenAIResponsesModel: customize_request_parameters + _map_tool_definition.
        td = _customize_tool_def(OpenAIJsonSchemaTransformer, t.tool_def)
        return {
            "name": td.name,
            "parameters": td.parameters_json_schema,
            "type": "function",
            "description": td.description,
            "strict": bool(td.strict),
        }

    return Adapter(
        build=Tool,
        project=project,
        is_strict=lambda e: bool(e["strict"]),
        secondary={"tool_def only": lambda t: t.tool_def.parameters_json_schema},
    )


def _openai_agents() -> Adapter:
    from agents import function_tool

    def project(t: Any) -> dict[str, Any]:
        # agents.models.openai_responses.Converter._convert_function_tool
        return {
            "name": t.name,
            "parameters": t.params_json_schema,
            "strict": t.strict_json_schema,
            "type": "function",
            "description": t.description,
        }

    return Adapter(build=function_tool, project=project, is_strict=lambda e: bool(e["strict"]))


def _langchain() -> Adapter:
    from langchain_core.tools import tool
    from langchain_core.utils.function_calling import convert_to_openai_tool

    return Adapter(
        build=tool,
        project=convert_to_openai_tool,
        is_strict=lambda e: bool(e["function"].get("strict")),
        secondary={"strict=True": lambda t: convert_to_openai_tool(t, strict=True)},
    )


ADAPTERS: dict[str, Callable[[], Adapter]] = {
    "tooldeck": _tooldeck,
    "pydantic-ai": _pydantic_ai,
    "openai-agents": _openai_agents,
    "langchain-core": _langchain,
}


def _passes(project: Callable[[Any], Any], tools: list[Any]) -> tuple[float, float]:
    """(first pass ms, median of the following warm passes ms)."""
    clock = time.perf_counter_ns
    times = []
    for _ in range(WARM_PASSES + 1):
        t0 = clock()
        for t in tools:
            project(t)
        times.append((clock() - t0) / 1e6)
    return times[0], statistics.median(times[1:])


def worker(name: str, n: int) -> dict[str, Any]:
    clock = time.perf_counter_ns
    t0 = clock()
    adapter = ADAPTERS[name]()
    import_ms = (clock() - t0) / 1e6

    import _toolgen

    fns = _toolgen.functions(n)
    gc.collect()

    build_ns: list[int] = []
    project_ns: list[int] = []
    tools: list[Any] = []
    entries: list[Any] = []
    cpu0 = time.process_time_ns()
    for fn in fns:
        a = clock()
        t = adapter.build(fn)
        b = clock()
        e = adapter.project(t)
        c = clock()
        build_ns.append(b - a)
        project_ns.append(c - b)
        tools.append(t)
        entries.append(e)
    cold_cpu_ms = (time.process_time_ns() - cpu0) / 1e6

    warm_times = []
    cpu0 = time.process_time_ns()
    for _ in range(WARM_PASSES):
        a = clock()
        for t in tools:
            adapter.project(t)
        warm_times.append((clock() - a) / 1e6)
    warm_cpu_ms = (time.process_time_ns() - cpu0) / 1e6 / WARM_PASSES

    secondary = {}
    for label, project in adapter.secondary.items():
        cold, warm = _passes(project, tools)
        secondary[label] = {"cold_ms": cold, "warm_ms": warm}

    return {
        "framework": name,
        "n": n,
        "import_ms": import_ms,
        "build_ms": sum(build_ns) / 1e6,
        "project_ms": sum(project_ns) / 1e6,
        "cold_ms": (sum(build_ns) + sum(project_ns)) / 1e6,
        "cold_cpu_ms": cold_cpu_ms,
        "warm_cpu_ms": warm_cpu_ms,
        "first_tool_ms": (build_ns[0] + project_ns[0]) / 1e6,
        "median_tool_us": statistics.median(
            b + p for b, p in zip(build_ns[1:], project_ns[1:], strict=True)
        )
        / 1e3,
        "warm_ms": statistics.median(warm_times),
        "strict": sum(adapter.is_strict(e) for e in entries),
        "secondary": secondary,
    }


def _run_worker(name: str, n: int) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--worker", name, "--n", str(n)],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="number of tools")
    parser.add_argument("--repeat", type=int, default=5, help="fresh processes per framework")
    parser.add_argument("--worker", choices=FRAMEWORKS, help=argparse.SUPPRESS)
    parser.add_argument("--only", choices=FRAMEWORKS, action="append")
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.n)))
        return

    from _harness import BackgroundLoad, machine_lines, table, wait_for_idle

    frameworks = args.only or list(FRAMEWORKS)
    runs: dict[str, list[dict[str, Any]]] = {f: [] for f in frameworks}
    idle = wait_for_idle()
    started = time.perf_counter()
    load = BackgroundLoad()
    not_idle = 0
    for i in range(args.repeat):  # rotate the order so no framework always runs first
        for name in frameworks[i % len(frameworks) :] + frameworks[: i % len(frameworks)]:
            if "NOT idle" in wait_for_idle(window=1.0, max_wait=10.0):
                not_idle += 1
            runs[name].append(_run_worker(name, args.n))

    def med(name: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[name])

    def spread(name: str, key: str) -> str:
        values = [r[key] for r in runs[name]]
        return f"{statistics.median(values):.1f} ({min(values):.1f}–{max(values):.1f})"

    n = args.n
    print(f"## (b) Build + project {n:,} distinct five-parameter tools\n")
    print("\n".join(machine_lines()))
    print(
        f"- {args.repeat} fresh processes per framework, order rotated; medians across "
        f"processes (min–max in brackets); warm = median of {WARM_PASSES} passes; "
        f"wall {time.perf_counter() - started:.0f} s; {idle}; {load.report()}; "
        f"{not_idle} worker(s) started on a busy machine\n"
    )
    rows = []
    for name in frameworks:
        rows.append(
            [
                name,
                spread(name, "import_ms"),
                f"{med(name, 'build_ms'):.1f}",
                f"{med(name, 'project_ms'):.1f}",
                spread(name, "cold_ms"),
                spread(name, "cold_cpu_ms"),
                f"{med(name, 'cold_ms') * 1000 / n:.0f}",
                f"{med(name, 'first_tool_ms'):.1f}",
                f"{med(name, 'warm_ms'):.2f}",
                f"{med(name, 'warm_cpu_ms'):.2f}",
                f"{int(med(name, 'strict')):,}/{n:,}",
            ]
        )
    print(
        table(
            [
                "framework",
                "import ms",
                "build ms",
                "project ms",
                "cold total ms",
                "cold CPU ms",
                "cold µs/tool",
                "first tool ms",
                f"warm ms ({n:,})",
                "warm CPU ms",
                "strict entries",
            ],
            rows,
        )
    )
    extra = []
    for name in frameworks:
        for label in runs[name][0]["secondary"]:
            cold = statistics.median(r["secondary"][label]["cold_ms"] for r in runs[name])
            warm = statistics.median(r["secondary"][label]["warm_ms"] for r in runs[name])
            extra.append([f"{name}: {label}", f"{cold:.1f}", f"{warm:.2f}"])
    if extra:
        print("\nSecondary projections of the already-built tools (same processes):\n")
        print(table(["projection", f"first pass ms ({n:,})", "warm ms"], extra))

    if "tooldeck" in frameworks and len(frameworks) > 1:
        peers = {f: med(f, "cold_ms") for f in frameworks if f != "tooldeck"}
        fastest = min(peers, key=lambda f: peers[f])
        td_cold, td_warm = med("tooldeck", "cold_ms"), med("tooldeck", "warm_ms")
        td_cpu, peer_cpu = med("tooldeck", "cold_cpu_ms"), med(fastest, "cold_cpu_ms")
        print("\nGoals:")
        verdict = "MET" if td_cold <= peers[fastest] and td_cpu <= peer_cpu else "MISSED"
        print(
            f"- cold no slower than the fastest peer: {verdict} (tooldeck {td_cold:.1f} ms vs "
            f"{fastest} {peers[fastest]:.1f} ms wall, ratio {td_cold / peers[fastest]:.2f}; "
            f"CPU {td_cpu:.1f} vs {peer_cpu:.1f} ms, ratio {td_cpu / peer_cpu:.2f})"
        )
        verdict = "MET" if td_warm < 5.0 else "MISSED"
        print(f"- warm under 5 ms: {verdict} (tooldeck {td_warm:.2f} ms for {n:,} tools)")


if __name__ == "__main__":
    main()
