"""A test MCP server whose listings are slow and whose lists change.

``resources/list`` (and templates, prompts) waits ``LISTING_DELAY`` seconds (default 0),
appending ``{"server": LISTING_NAME, "event": "start" | "end", "at": monotonic}`` lines to
the file ``LISTING_LOG`` names, when set (so a test sees listings overlap); the tools
``add_prompt`` and ``add_tool`` add one and announce it (``notifications/prompts/list_changed``,
``notifications/tools/list_changed``), as a handshake-era server does.

Run: ``python listing.py stdio`` (use it with ``"protocol": "legacy"``).
"""

from __future__ import annotations

if __name__ == "__main__":  # by the tests' fork server, when there is one
    __import__("_zygote_client").handoff()

import contextlib
import json
import os
import time
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts import Prompt

DELAY = float(os.environ.get("LISTING_DELAY", "0"))
NAME = os.environ.get("LISTING_NAME", "listing")


def _note(event: str) -> None:
    log = os.environ.get("LISTING_LOG")
    if log:
        with open(log, "a") as f:
            f.write(json.dumps({"server": NAME, "event": event, "at": time.monotonic()}) + "\n")


async def _slowly() -> None:
    _note("start")
    await anyio.sleep(DELAY)
    _note("end")


class Listing(MCPServer):
    async def list_resources(self) -> Any:
        await _slowly()
        return await super().list_resources()

    async def list_prompts(self) -> Any:
        await _slowly()
        return await super().list_prompts()


app = Listing("listing")


@app.resource("note://first", name="first")
def first() -> str:
    """A note."""
    return f"the first note of {NAME}"


@app.prompt()
def greet(name: str) -> str:
    """Greet someone."""
    return f"Hello {name}"


@app.tool()
async def add_prompt(name: str, ctx: Context) -> str:
    """Add a prompt called NAME and announce that the prompt list changed."""

    def made() -> str:
        return f"the prompt {name}"

    app.add_prompt(Prompt.from_function(made, name=name, description="added at run time"))
    with contextlib.suppress(Exception):
        await ctx.request_context.session.send_prompt_list_changed()
    return f"added {name}"


@app.tool()
async def add_tool(name: str, ctx: Context) -> str:
    """Add a tool called NAME and announce that the tool list changed."""

    def extra(x: int) -> int:
        """A tool added at run time."""
        return x * 2

    app.add_tool(extra, name=name)
    with contextlib.suppress(Exception):
        await ctx.request_context.session.send_tool_list_changed()
    return f"added {name}"


if __name__ == "__main__":
    app.run()
