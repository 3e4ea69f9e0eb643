"""A test MCP server that reports which environment variables it was started with.

Run: ``python env.py stdio``.
"""

from __future__ import annotations

if __name__ == "__main__":  # by the tests' fork server, when there is one
    __import__("_zygote_client").handoff()

import os
import sys

from mcp.server.mcpserver import MCPServer

app = MCPServer("env", instructions="Reports its environment.")


@app.tool()
def getenv(names: list[str]) -> dict[str, str | None]:
    """The values of these environment variables in this server's process."""
    return {name: os.environ.get(name) for name in names}


if __name__ == "__main__":
    if sys.argv[1:] != ["stdio"]:
        raise SystemExit("usage: env.py stdio")
    app.run("stdio")
