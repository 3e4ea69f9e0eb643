"""A test MCP server whose resources are binary: a PNG image and three opaque bytes; and
one that takes 60 s to read, and a tool telling the server's process id (to kill it).

Run: ``python pictures.py`` (stdio).
"""

from __future__ import annotations

if __name__ == "__main__":  # by the tests' fork server, when there is one
    __import__("_zygote_client").handoff()

import base64
import os

import anyio
from mcp.server.mcpserver import MCPServer

app = MCPServer("pictures")

DOT = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


@app.resource("pictures://dot.png", mime_type="image/png")
def dot() -> bytes:
    """A one-pixel PNG."""
    return DOT


@app.resource("pictures://noise.bin", mime_type="application/octet-stream")
def noise() -> bytes:
    """Three bytes that are no text."""
    return b"\xff\x00\xfe"


@app.resource("pictures://slow", mime_type="text/plain")
async def slow() -> str:
    """Takes a minute."""
    await anyio.sleep(60)
    return "late"


@app.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


if __name__ == "__main__":
    app.run()
