"""A test MCP server that records the client's roots, as a server that works in them would.

When the client is initialized, and on every ``notifications/roots/list_changed``, it
asks ``roots/list`` and appends one JSON line to the file ``ROOTS_LOG`` names:
``{"event": "initialized" | "list_changed", "roots": [uri, ...]}``; the ``roots`` tool
asks for them for its call and answers them (in either protocol era).

Run: ``ROOTS_LOG=FILE python roots.py stdio``.
"""

from __future__ import annotations

if __name__ == "__main__":  # by the tests' fork server, when there is one
    __import__("_zygote_client").handoff()

import json
import os
import warnings
from typing import Annotated, Any

import mcp_types as types
from mcp.server.mcpserver import ListRoots, MCPServer, Resolve
from mcp.shared.exceptions import MCPDeprecationWarning

warnings.simplefilter("ignore", MCPDeprecationWarning)  # roots are handshake-era

app = MCPServer("roots", instructions="Records the client's roots.")


async def _uris(session: Any) -> list[str]:
    result = await session.list_roots()
    return [str(root.uri) for root in result.roots]


def _append(line: dict[str, Any]) -> None:
    with open(os.environ["ROOTS_LOG"], "a") as log:
        log.write(json.dumps(line) + "\n")


async def _record(event: str, session: Any) -> None:
    _append({"event": event, "roots": await _uris(session)})


def _ask() -> ListRoots:
    return ListRoots()


@app.tool()
async def roots(answer: Annotated[types.ListRootsResult, Resolve(_ask)]) -> list[str]:
    """The client's roots, asked for this call (mid-call in the handshake era, as an
    input request in the 2026 era)."""
    return [str(root.uri) for root in answer.roots]


async def _on_initialized(ctx: Any, params: Any) -> None:
    caps = ctx.session.client_capabilities
    if caps is not None and caps.roots is not None:
        await _record("initialized", ctx.session)


async def _on_list_changed(ctx: Any, params: Any) -> None:
    await _record("list_changed", ctx.session)


server = app._lowlevel_server
server.add_notification_handler(
    "notifications/initialized", types.NotificationParams, _on_initialized
)
server.add_notification_handler(
    "notifications/roots/list_changed", types.NotificationParams, _on_list_changed
)

if __name__ == "__main__":
    app.run()
