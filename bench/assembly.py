"""Per-turn assembly of a 1,000-tool turn, warm caches (issue: registry and assembly).

Builds a definitions file of 1,000 tools in 10 categories, loads it through the real
registry (handlers bound by name), then times `assemble(ctx, sources)` (one source per
category) for a fresh TurnContext each round: the per-turn cost once tools are built.
Goal: under 1 ms.

Also times registry loading (cold: file read, schema checks, handler binding) and the
per-step cost of a ToolPlanner over the same 1,000 tools (policy filter + plan).

Run: uv run --group bench python bench/assembly.py
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tooldeck.assembly import TurnContext, assemble
from tooldeck.plan import ToolPlanner
from tooldeck.registry import Handlers, ToolRegistry

N_TOOLS = 1_000
N_CATEGORIES = 10
ROUNDS = 2_000


def build(tmp: Path) -> tuple[Path, list[Handlers]]:
    tables = [Handlers(f"cat{c}") for c in range(N_CATEGORIES)]
    tools = []
    for i in range(N_TOOLS):
        category = i % N_CATEGORIES
        name = f"tool_{i:04d}"
        tools.append(
            {
                "name": name,
                "description": f"Operation {i} of category {category}.",
                "category": f"cat{category}",
                "read_only": i % 3 == 0,
                "requires": ["web_provider"] if i % 50 == 0 else [],
                "input_schema": {
                    "type": "object",
                    "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}},
                    "required": ["path"],
                },
            }
        )
        tables[category].add(name, _handler(i))
    path = tmp / "definitions.json"
    path.write_text(json.dumps({"tools": tools}))
    return path, tables


def _handler(i: int):  # type: ignore[no-untyped-def]
    def handler(path: str, limit: int | None = None) -> str:
        return f"{i}:{path}"

    return handler


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path, tables = build(Path(tmp))
        start = time.perf_counter()
        registry = ToolRegistry.load(path, tables)
        load_ms = (time.perf_counter() - start) * 1000
        categories = registry.by_category()
        home = Path(tmp)
        samples = []
        for r in range(ROUNDS):
            ctx = TurnContext(session_id=f"s{r}", home=home, web_provider="exa")
            t0 = time.perf_counter_ns()
            toolset = assemble(ctx, categories)
            samples.append(time.perf_counter_ns() - t0)
        assert len(toolset) == N_TOOLS
        samples.sort()
        med = statistics.median(samples) / 1e6
        p95 = samples[int(len(samples) * 0.95)] / 1e6

        planner = ToolPlanner(categories)
        plan_samples = []
        for r in range(200):
            ctx = TurnContext(session_id=f"p{r}", home=home, web_provider="exa")
            t0 = time.perf_counter_ns()
            plan = planner(ctx)
            plan_samples.append(time.perf_counter_ns() - t0)
        plan_samples.sort()
        plan_med = statistics.median(plan_samples) / 1e6

    print(f"python {sys.version.split()[0]}")
    print("| measure | value |")
    print("|---|---|")
    print(f"| registry load, {N_TOOLS} tools, cold (checks + binding) | {load_ms:.0f} ms |")
    print(f"| assemble a {N_TOOLS}-tool turn, warm, median | {med:.3f} ms |")
    print(f"| assemble a {N_TOOLS}-tool turn, warm, p95 | {p95:.3f} ms |")
    print(
        f"| plan a {N_TOOLS}-tool step (assemble + policy filter + deferral), median "
        f"| {plan_med:.3f} ms ({plan.search}, {len(plan.shown)} shown) |"
    )
    print(f"goal (< 1 ms warm assembly): {'met' if med < 1.0 else 'MISSED'}")


if __name__ == "__main__":
    main()
