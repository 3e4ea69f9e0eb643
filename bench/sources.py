"""What the source combinators cost a step: 1,000 tools, plain and wrapped three deep.

The same registry (bench/assembly.py's 1,000 tools in 10 categories) as a session's
``tools``, assembled for a fresh TurnContext each round, plain (the floor) and as
``registry.renamed({...}).prefixed("x_").with_approval()``, measured in alternating
rounds so the machine's load falls on both alike. The wrapped copies are made once per
tool and reused while the source keeps giving it, so the per-step cost is a dictionary
look-up per tool and wrapper. Goal: the wrapped step within 1 ms.

Run: uv run --group bench python bench/sources.py
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from assembly import build
from tooldeck.assembly import TurnContext
from tooldeck.registry import ToolRegistry
from tooldeck.sources import ToolList

ROUNDS = 2_000


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path, tables = build(Path(tmp))
        registry = ToolRegistry.load(path, tables)
        plain = ToolList([registry])
        renames = {f"tool_{i:04d}": f"renamed_{i:04d}" for i in range(0, 1_000, 7)}
        wrapped = ToolList([registry.renamed(renames).prefixed("x_").with_approval()])
        samples: dict[str, list[int]] = {"plain": [], "wrapped": []}
        for r in range(ROUNDS):
            ctx = TurnContext(session_id=f"s{r}", web_provider="exa")
            for name, tools in (("plain", plain), ("wrapped", wrapped))[:: 1 if r % 2 else -1]:
                t0 = time.perf_counter_ns()
                toolset = tools.toolset(ctx)
                samples[name].append(time.perf_counter_ns() - t0)
                assert len(toolset) == 1_000
        assert "x_renamed_0007" in toolset and toolset["x_tool_0001"].tier == "DANGEROUS"

    med = {k: statistics.median(v) / 1e6 for k, v in samples.items()}
    print(f"python {sys.version.split()[0]}")
    print("| 1,000-tool step, warm, median | ms |")
    print("|---|---|")
    print(f"| plain registry (the floor) | {med['plain']:.3f} |")
    print(f"| renamed + prefixed + with_approval | {med['wrapped']:.3f} |")
    print(f"goal (wrapped < 1 ms): {'met' if med['wrapped'] < 1 else 'NOT met'}")


if __name__ == "__main__":
    main()
