"""Tools from an MCP server (mcp-server-time, over stdio) next to a plain function tool.

One flat list: the function, then the server's tools. No TurnContext, no assemble().
"""

import sys

import tooldeck
from tooldeck.mcp import McpSource
from tooldeck.providers import model_from_env
from tooldeck.testing import ScriptedModel, call, reply


@tooldeck.tool(read_only=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


servers = {"time": {"command": sys.executable, "args": ["-m", "mcp_server_time"]}}
offline = ScriptedModel(
    [
        reply(
            call("add", {"a": 2, "b": 3}),
            call("mcp__time__get_current_time", {"timezone": "Europe/Paris"}),
        ),
        reply("2 + 3 = 5, and I checked the time in Paris."),
    ]
)

with McpSource(servers) as time_server:
    result = tooldeck.run_sync(
        model_from_env(offline), [add, time_server], "What is 2 + 3, and the time in Paris?"
    )

for output in result.tool_outputs:
    print(f"{output.name}: {output.text[:80]}")
print("answer:", result.output)
