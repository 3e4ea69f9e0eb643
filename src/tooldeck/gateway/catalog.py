"""The gateway's catalog: every upstream tool under a collision-free client name.

The upstream tools come from :class:`~tooldeck.mcp.McpSource` (config, connections,
reconnects, provider-safe ``mcp__<server>__<tool>`` names, schemas compiled and hostile
ones skipped). A client sees them without the ``mcp__`` prefix, ``<server>__<tool>``:
the client adds its own prefix (``mcp__tooldeck__...`` in Claude Code), and the names
stay unique because the source's are. Policy rules name the tools as everywhere else
in tooldeck, ``mcp__<server>__<tool>``.

A :class:`CatalogView` is one snapshot of the source's listing (remade when a server
re-lists, drops or comes back); its search index is built on first use.
"""

from __future__ import annotations

import fnmatch
import threading
from collections.abc import Sequence
from typing import Any

import anyio

from ..mcp import McpSource
from ..mcp.connection import TEARDOWN_SECONDS
from ..search import ToolIndex
from ..tool import Tool

__all__ = ["Catalog", "CatalogView", "client_name", "rule_name"]

PREFIX = "mcp__"


def client_name(tool: Tool) -> str:
    """The name a gateway client sees for an upstream tool."""
    name = tool.name
    return name[len(PREFIX) :] if name.startswith(PREFIX) else name


def rule_name(tool: Tool) -> str:
    """The name a policy rule matches ``tool`` by, as the gateway writes it into a rule it
    suggests (the denial's fix, the starter policy): one place to spell it."""
    return tool.name


class CatalogView:
    """One snapshot of the upstream tools; immutable."""

    def __init__(self, tools: Sequence[Tool], core: Sequence[str], semantic: Any) -> None:
        self.tools: dict[str, Tool] = {}
        for tool in tools:
            self.tools.setdefault(client_name(tool), tool)
        self.core: tuple[str, ...] = tuple(
            n for n in self.tools if any(fnmatch.fnmatchcase(n, p) for p in core)
        )
        self._semantic = semantic
        self._index: ToolIndex | None = None
        self._lock = threading.Lock()
        self._by_tool = {t.name: n for n, t in self.tools.items()}

    @property
    def index(self) -> ToolIndex:
        """The search index over the tools that are not core (built once, on first use)."""
        with self._lock:
            if self._index is None:
                core = set(self.core)
                self._index = ToolIndex(
                    [t for n, t in self.tools.items() if n not in core], semantic=self._semantic
                )
            return self._index

    def name_of(self, tool_name: str) -> str | None:
        """The client name of a source tool name (``mcp__...``), if it is in this view."""
        return self._by_tool.get(tool_name)


class Catalog:
    """The current :class:`CatalogView` of a source (remade only when its tools change).

    ``core``: globs over client names of the tools listed to every client from the
    start (default none: everything is found with ``tool_search``; ``["*"]`` lists
    everything). ``semantic`` is :class:`~tooldeck.search.ToolIndex`'s setting.
    ``native``: tooldeck's own tools served too (:mod:`.native`), under their own names,
    listed before the upstream tools.
    """

    def __init__(
        self,
        source: McpSource,
        *,
        core: Sequence[str] = (),
        semantic: Any = "auto",
        native: Sequence[Tool] = (),
    ) -> None:
        self.source = source
        self.native = tuple(native)
        self.core = tuple(core)
        self.semantic = semantic
        self._key: tuple[int, ...] | None = None
        self._view: CatalogView | None = None
        self._lock = threading.Lock()

    def view(self) -> CatalogView:
        tools = [*self.native, *self.source.tools()]
        key = tuple(id(t) for t in tools)
        with self._lock:
            if self._view is None or key != self._key:
                self._view = CatalogView(tools, self.core, self.semantic)  # holds the tools
                self._key = key
            return self._view

    def starting(self) -> bool:
        """Whether some upstream server is still making its first connection."""
        return bool(self.source.starting())

    async def started(self) -> None:
        """Wait for the servers still starting to connect or fail: bounded by their
        ``startup_timeout``, and the time a failed attempt takes to end its process."""
        names = self.source.starting()
        if not names:
            return
        bound = max(s.startup_timeout for s in self.source.config.servers if s.name in names)
        with anyio.move_on_after(bound + TEARDOWN_SECONDS):
            await self.source.refresh(names)
            while self.source.starting():  # noqa: ASYNC110 (the verdict is on another loop)
                await anyio.sleep(0.05)

    def down(self) -> list[str]:
        """``"<server> (<state>: <error>)"`` for every configured server that is not serving."""
        out: list[str] = []
        for status in self.source.status():
            if status.state != "connected":
                why = f"{status.state}: {status.error}" if status.error else status.state
                out.append(f"{status.name} ({why})")
        return out
