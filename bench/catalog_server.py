"""An MCP server listing one service's tools from bench/catalog/tools.json, as published.

Run: ``python bench/catalog_server.py NAMESPACE`` (stdio). The tools are the real
definitions the catalog transcribed from that MCP server's repository (names,
descriptions, input schemas, unchanged). This server exists to measure what listing
them costs; a call answers, as an error, that it only lists (it has no backend).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

CATALOG = Path(__file__).parent / "catalog" / "tools.json"
NAMESPACE = sys.argv[1]
TOOLS = [
    types.Tool(
        name=t["name"].split("__", 1)[1],
        description=t["description"],
        input_schema=t["input_schema"],
    )
    for t in json.loads(CATALOG.read_text())["tools"]
    if t["name"].split("__", 1)[0] == NAMESPACE
]


async def list_tools(
    ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(
    ctx: ServerRequestContext, params: types.CallToolRequestParams
) -> types.CallToolResult:
    text = f"{NAMESPACE} catalog server: {params.name} is listed only (no backend)."
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


server = Server(f"catalog-{NAMESPACE}", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
