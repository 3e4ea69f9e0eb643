"""A low-level MCP server whose tools carry the input schemas given in a JSON file.

Run: ``python schemas.py stdio TOOLS.json`` where the file maps tool names to schemas.
Used to send tooldeck hostile or broken schemas, exactly as a server would.
"""

from __future__ import annotations

if __name__ == "__main__":  # by the tests' fork server, when there is one
    __import__("_zygote_client").handoff()

import json
import sys

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

with open(sys.argv[2], encoding="utf-8") as handle:
    SCHEMAS: dict[str, dict[str, object]] = json.load(handle)

TOOLS = [
    types.Tool(name=name, description=f"The tool {name}.", input_schema=schema)
    for name, schema in SCHEMAS.items()
]


async def list_tools(
    ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(
    ctx: ServerRequestContext, params: types.CallToolRequestParams
) -> types.CallToolResult:
    text = f"{params.name}:{json.dumps(params.arguments or {}, sort_keys=True)}"
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


server = Server("schemas", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
