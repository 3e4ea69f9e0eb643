"""A test MCP server with the kinds of tools a starter policy sorts: a read-only one (by
its annotation), a write, a delete and a shell (by their names only), and a destructive
one (by its annotation). Notes live in memory.

Run: ``python workspace.py stdio``.
"""

from __future__ import annotations

if __name__ == "__main__":  # by the tests' fork server, when there is one
    __import__("_zygote_client").handoff()

import sys

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

app = MCPServer("workspace", instructions="Notes in memory.")
NOTES: dict[str, str] = {"todo": "buy milk"}


@app.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
def read_note(name: str) -> str:
    """Read a note."""
    return NOTES.get(name, "")


@app.tool(structured_output=False)
def write_note(name: str, text: str) -> str:
    """Write a note."""
    NOTES[name] = text
    return f"wrote {name}"


@app.tool(structured_output=False)
def delete_note(name: str) -> str:
    """Delete a note."""
    NOTES.pop(name, None)
    return f"deleted {name}"


@app.tool(structured_output=False)
def run_shell(command: str) -> str:
    """Run a shell command (it only says it would)."""
    return f"would run {command}"


@app.tool(
    annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True),
    structured_output=False,
)
def reset() -> str:
    """Forget every note."""
    NOTES.clear()
    return "reset"


if __name__ == "__main__":
    if sys.argv[1:] != ["stdio"]:
        raise SystemExit("usage: workspace.py stdio")
    app.run("stdio")
