"""How long a client waits for the gateway: from spawning ``tooldeck serve`` to its
``initialize`` answered, and to the first call of an upstream tool answered.

A real ``tooldeck serve`` (stdio) reached with the official MCP client SDK, in front of
tests/mcp_servers/basic.py started slow on purpose (``BASIC_START_DELAY``: it sleeps
before serving, as ``uvx``/``npx`` resolving a package or a server opening a database
does), and, as the floor, with no upstream server at all. Each case is a fresh gateway
process; cases are alternated round by round so that load which comes and goes hits
them alike.

``--before DIR`` measures another checkout's ``src`` in the same rounds (e.g. the commit
before, exported with ``git archive``), with this environment's packages.

    uv run python bench/gateway_startup.py [--rounds 10] [--delay 3] [--before DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TextIO

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import get_default_environment, stdio_client

from _harness import BackgroundLoad, machine_lines, percentile, wait_for_idle

HERE = Path(__file__).parent
PY = sys.executable
BASIC = HERE.parent / "tests" / "mcp_servers" / "basic.py"
SRC = HERE.parent / "src"


async def one(
    src: Path, config: Path, policy: Path, state: Path, call: bool, errlog: TextIO
) -> tuple[float, float]:
    """Seconds from spawn to ``initialize`` answered, and to the first call answered (0
    when ``call`` is off)."""
    serve = ["-m", "tooldeck", "serve", "--mcp", str(config), "--state", str(state)]
    params = StdioServerParameters(
        command=PY,
        args=[*serve, "--lexical", "--core", "*", "--policy", str(policy)],
        env={**get_default_environment(), "PYTHONPATH": str(src)},
    )
    started = time.perf_counter()
    async with (
        stdio_client(params, errlog=errlog) as (read, write),
        ClientSession(read, write) as client,
    ):
        await client.initialize()
        initialized = time.perf_counter() - started
        if not call:
            return initialized, 0.0
        result = await client.call_tool("slow__add", {"a": 1, "b": 2})
        called = time.perf_counter() - started
        assert not result.is_error, result
        return initialized, called


def stats(values: list[float]) -> str:
    ordered = sorted(values)
    return (
        f"{statistics.median(ordered) * 1000:,.0f} ms | {percentile(ordered, 0.9) * 1000:,.0f} ms"
        f" | {ordered[0] * 1000:,.0f} ms | {ordered[-1] * 1000:,.0f} ms | {len(ordered)}"
    )


async def main(rounds: int, delay: float, before: Path | None) -> None:
    with tempfile.TemporaryDirectory() as tmp, open(os.devnull, "w") as errlog:  # noqa: ASYNC230
        root = Path(tmp)
        slow = root / "slow.json"
        slow.write_text(
            json.dumps(
                {
                    "mcpServers": {
                        "slow": {
                            "command": PY,
                            "args": [str(BASIC), "stdio"],
                            "env": {"BASIC_START_DELAY": str(delay)},
                        }
                    }
                }
            )
        )
        empty = root / "empty.json"
        empty.write_text('{"mcpServers": {}}')
        policy = root / "policy.toml"
        policy.write_text('[[profile.rules]]\ntools = "slow__*"\naction = "allow"\n')
        trees = {"this tree": SRC} | ({"before": before} if before else {})
        results: dict[tuple[str, str], list[tuple[float, float]]] = {}
        idle = wait_for_idle()
        load = BackgroundLoad()
        for n in range(rounds):
            for tree, src in trees.items():
                for case, config, call in (
                    ("no upstream server (floor)", empty, False),
                    (f"one server that starts in {delay:g} s", slow, True),
                ):
                    state = root / f"s{n}-{tree}-{len(results)}"
                    took = await one(src, config, policy, state, call, errlog)
                    results.setdefault((tree, case), []).append(took)
        print("\n".join(machine_lines()))
        print(f"- {idle}")
        print(f"- {load.report()}\n")
        print("| code | upstream | initialize answered: median | p90 | min | max | n |")
        print("| :--- | :--- | ---: | ---: | ---: | ---: | ---: |")
        for (tree, case), samples in results.items():
            print(f"| {tree} | {case} | {stats([s[0] for s in samples])} |")
        print()
        print("| code | upstream | first call answered: median | p90 | min | max | n |")
        print("| :--- | :--- | ---: | ---: | ---: | ---: | ---: |")
        for (tree, case), samples in results.items():
            if samples[0][1]:
                print(f"| {tree} | {case} | {stats([s[1] for s in samples])} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--delay", type=float, default=3.0)
    parser.add_argument("--before", type=Path, help="another checkout's src folder")
    args = parser.parse_args()
    anyio.run(main, args.rounds, args.delay, args.before)
