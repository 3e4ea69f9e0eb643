"""What a client's ``tools/list`` costs: five MCP servers directly, or behind the gateway.

The five servers: four transcribed from real MCP servers' repositories (GitHub,
Atlassian, Kubernetes, Playwright: ``bench/catalog_server.py`` lists their published
definitions) and PyPI's ``mcp-server-time``, run for real. Each is connected directly
with the official MCP client SDK and its ``tools/list`` measured; then
``tooldeck serve`` over the same config is connected the same way and measured at
first, and after the model found tools with ``tool_search`` (they are then listed).
Tokens are tooldeck's estimator (``tooldeck.tokens``) over the ``tools`` array as JSON.

Run: ``uv run python bench/gateway_tokens.py`` (about a minute).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tooldeck.tokens import estimate_tokens

HERE = Path(__file__).parent
PY = sys.executable
SERVERS: dict[str, dict[str, Any]] = {
    name: {"command": PY, "args": [str(HERE / "catalog_server.py"), name]}
    for name in ("github", "atlassian", "kubernetes", "playwright")
} | {"time": {"command": PY, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}}
SEARCHES = (
    ["create a pull request", "comment on an issue"],
    ["list pods in a namespace"],
    ["current time in a timezone"],
)


def tokens(tools: list[types.Tool]) -> int:
    wire = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]
    return estimate_tokens(json.dumps(wire, ensure_ascii=False))


async def listing(params: StdioServerParameters, searches: tuple[list[str], ...] = ()) -> list[int]:
    out: list[int] = []
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write) as client,
    ):
        await client.initialize()
        out.append(tokens((await client.list_tools()).tools))
        for query in searches:
            await client.call_tool("tool_search", {"query": query, "limit": 3})
            out.append(tokens((await client.list_tools()).tools))
        out.append(len((await client.list_tools()).tools))
    return out


async def main() -> None:
    direct: dict[str, tuple[int, int]] = {}
    for name, spec in SERVERS.items():
        tok, count = await listing(
            StdioServerParameters(command=spec["command"], args=spec["args"])
        )
        direct[name] = (count, tok)
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "mcp.json"
        config.write_text(json.dumps({"mcpServers": SERVERS}))
        serve = ["-m", "tooldeck.cli", "serve", "--mcp", str(config), "--state", tmp]
        started = time.perf_counter()
        gateway = await listing(StdioServerParameters(command=PY, args=serve), SEARCHES)
        seconds = time.perf_counter() - started
    total_tools = sum(c for c, _ in direct.values())
    total = sum(t for _, t in direct.values())
    print("| server | tools | `tools/list` tokens |")
    print("| :--- | ---: | ---: |")
    for name, (count, tok) in direct.items():
        print(f"| {name} (direct) | {count} | {tok:,} |")
    print(f"| **all five, direct** | {total_tools} | **{total:,}** |")
    first, *after, listed = gateway
    print(f"| **gateway, at first** | 3 | **{first:,}** ({1 - first / total:.1%} fewer) |")
    for query, tok in zip(SEARCHES, after, strict=True):
        print(f"| gateway, after tool_search {query} | | {tok:,} ({1 - tok / total:.1%} fewer) |")
    print(f"\n{listed} tools listed by the gateway at the end; gateway run {seconds:.1f} s")


if __name__ == "__main__":
    anyio.run(main)
