"""What routing a server's requests to the asking session costs a call (mcp/asking.py).

Every MCP call now runs inside ``InFlight.running`` (a context variable set, the call
registered, and on the way out any request waiting on it ended), and every message read
from a transport keeps the context it was read in (``connection._watched``: one tuple and
one ``getattr`` more per message). This measures, in one process run, interleaved round
by round:

- ``running``: entering and leaving ``InFlight.running`` once (per call);
- ``route``: deciding where one server request goes, with 2 calls of 2 sessions running;
- ``echo``: a whole ``source.call("everything", "echo")`` over stdio to npm's
  server-everything, the floor these add to (the same process, the same rounds).

CPU time per operation (``time.process_time``), median of rounds; the load is printed.

Run: ``uv run --locked python bench/mcp_routing.py [--rounds N]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from gateway_client import npm_server
from tooldeck import ToolContext
from tooldeck.mcp import McpSource
from tooldeck.mcp.asking import InFlight

EVERYTHING = ("@modelcontextprotocol/server-everything", "2026.8.31", "mcp-server-everything")


def per_op(n: int, body: object) -> float:
    start = time.process_time()
    for _ in range(n):
        body()  # type: ignore[operator]
    return (time.process_time() - start) / n * 1e6


async def main(rounds: int) -> None:
    loop = asyncio.get_running_loop()
    inflight, busy = InFlight(), InFlight()
    ctx = ToolContext(tool_name="t", session_id="s1")

    def enter_leave() -> None:
        with inflight.running(ctx, loop):
            pass

    # two calls of two sessions running: a request without a link is ambiguous
    holders = [busy.running(ToolContext(tool_name="t", session_id=s), loop) for s in ("a", "b")]
    for holder in holders:
        holder.__enter__()

    def route() -> None:
        busy.route(None, loop)

    entry = npm_server(*EVERYTHING)
    config = {"mcpServers": {"everything": {"command": "node", "args": [str(entry), "stdio"]}}}
    rows: dict[str, list[float]] = {"running": [], "route": [], "echo": []}
    async with McpSource(config) as source:
        for _ in range(5):
            await source.call("everything", "echo", {"message": "warm"})
        for _ in range(rounds):
            rows["running"].append(per_op(20_000, enter_leave))
            rows["route"].append(per_op(20_000, route))
            start = time.process_time()
            for _ in range(50):
                await source.call("everything", "echo", {"message": "x"})
            rows["echo"].append((time.process_time() - start) / 50 * 1e6)
    for holder in holders:
        holder.__exit__(None, None, None)
    print(f"load: {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} cores; {rounds} rounds")
    for name, values in rows.items():
        print(f"{name:8} {statistics.median(values):10.2f} µs CPU per op (median)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    asyncio.run(main(parser.parse_args().rounds))
