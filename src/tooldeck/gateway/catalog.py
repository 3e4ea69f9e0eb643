"""The gateway's catalog: every upstream tool under the one name its clients know it by.

The upstream tools come from :class:`~tooldeck.mcp.McpSource` (config, connections,
reconnects, schemas compiled and hostile ones skipped), made with ``prefixed=False``: each
tool is named ``<server>__<tool>`` when the source makes it (:mod:`tooldeck.mcp.naming`:
the library's provider-safe ``mcp__<server>__<tool>`` without its ``mcp__``; the client
adds its own prefix, ``mcp__tooldeck__...`` in Claude Code). That one name is what a
client lists and calls, what ``tool_search`` answers, what errors, offload notices,
approval prompts, pending files, audit lines, the evidence record and spans say, what
``--core`` globs and policy rules match. The names are unique: no two servers can list a
tool under one name (:mod:`tooldeck.mcp.naming`), and tooldeck's own tools, served
beside them, have no ``__``.

What the user writes in the library's spelling would match nothing here, so it is
refused, with the gateway's spelling, before anything starts (:func:`name_problems`):
a policy selector or ``--core`` glob starting with ``mcp__``, and a server named ``mcp``
(its tools would be ``mcp__<tool>``, which a rule could not tell from the library's
spelling).

A :class:`CatalogView` is one snapshot of the source's listing (remade when a server
re-lists, drops or comes back); its search index is built on first use.
"""

from __future__ import annotations

import fnmatch
import logging
import threading
from collections.abc import Iterable, Sequence
from typing import Any

import anyio

from ..mcp import McpSource
from ..mcp.connection import TEARDOWN_SECONDS
from ..mcp.naming import PREFIX, gateway_pattern, namespace_name
from ..policy import Policy
from ..search import ToolIndex
from ..tools import Tool

__all__ = ["name_problems", "rule_name"]

_log = logging.getLogger("tooldeck.gateway")
_LIBRARY = PREFIX.removesuffix("__")  # the namespace no gateway server may have


def client_name(tool: Tool) -> str:
    """The name a gateway client knows ``tool`` by: its name (the catalog's tools are
    named for clients when they are made)."""
    return tool.name


def name_problems(
    servers: Iterable[str],
    policy: Policy | None = None,
    core: Sequence[str] = (),
    native: Iterable[str] = (),
) -> list[str]:
    """What the gateway refuses in a config, a policy and ``--core`` globs: each tool
    name written the library's way (``mcp__...``), with its gateway spelling; a server
    named ``mcp``; a ``--core`` glob whose server part (before ``__``, without wildcards)
    names no configured server and that matches none of tooldeck's own tools
    (``native``). Empty when there is nothing to refuse."""
    problems: list[str] = []
    servers = list(servers)
    spaces = {namespace_name(s) for s in servers}
    natives = list(native)
    for server in servers:
        if namespace_name(server) == _LIBRARY:
            problems.append(
                f"server {server!r}: at the gateway its tools would be named {PREFIX}<tool>, "
                f"as tooldeck's library spells every MCP tool ({PREFIX}<server>__<tool>), so "
                "policy rules could not tell them apart; rename it"
            )
    for pattern in core:
        fixed = gateway_pattern(pattern)
        if fixed is not None:
            problems.append(
                f"--core {pattern!r}: the gateway names tools <server>__<tool>, without "
                f"{PREFIX!r}; give --core {fixed!r}"
            )
        elif _names_no_server(pattern, spaces, natives):
            known = ", ".join(sorted(spaces)) or "none"
            problems.append(
                f"--core {pattern!r} names no server of the config (servers: {known}); "
                "tools are named <server>__<tool>"
            )
    if policy is not None:
        files = ", ".join(policy.sources) or "the policy"
        for where, selector in policy.selectors():
            fixed = gateway_pattern(selector.text) if selector.kind in ("name", "glob") else None
            if fixed is not None:
                problems.append(
                    f"{files}: {where}: {selector.text!r} is the library's name; the gateway's "
                    f"rules name tools as its clients list them, without {PREFIX!r}: write "
                    f"{fixed!r}"
                )
    return problems


def _names_no_server(pattern: str, spaces: set[str], natives: Sequence[str]) -> bool:
    """Whether ``pattern`` is ``<server>__...`` with a literal server part that is no
    server's namespace, and matches none of ``natives``."""
    server, sep, _ = pattern.partition("__")
    if not sep or any(c in server for c in "*?[") or server in spaces:
        return False
    return not any(fnmatch.fnmatchcase(n, pattern) for n in natives)


def rule_name(tool: Tool) -> str:
    """The name a policy rule matches ``tool`` by, as the gateway writes it into a rule it
    suggests (the denial's fix, the starter policy): one place to spell it."""
    return tool.name


class CatalogView:
    """One snapshot of the upstream tools; immutable."""

    def __init__(self, tools: Sequence[Tool], core: Sequence[str], semantic: Any) -> None:
        self.tools: dict[str, Tool] = {}
        for tool in tools:
            self.tools.setdefault(tool.name, tool)
        self.core: tuple[str, ...] = tuple(
            n for n in self.tools if any(fnmatch.fnmatchcase(n, p) for p in core)
        )
        self.unmatched: tuple[str, ...] = tuple(
            p for p in core if not any(fnmatch.fnmatchcase(n, p) for n in self.tools)
        )
        """The ``core`` globs that match none of these tools."""
        self._semantic = semantic
        self._index: ToolIndex | None = None
        self._lock = threading.Lock()

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


class Catalog:
    """The current :class:`CatalogView` of a source (remade only when its tools change).

    ``source``: made with ``prefixed=False`` (its tools' names are the client names).
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
        if source.server_prefix:
            raise ValueError(
                "the gateway serves tools under the names its clients call them by: give it "
                "McpSource(config, prefixed=False)"
            )
        self.source = source
        self.native = tuple(native)
        self.core = tuple(core)
        self.semantic = semantic
        self._key: tuple[int, ...] | None = None
        self._view: CatalogView | None = None
        self._epoch = 0  # the source's listing_epoch when _view was checked
        self._lock = threading.Lock()
        self._warned: set[str] = set()

    def view(self) -> CatalogView:
        epoch = self.source.listing_epoch  # read before the tools (see McpSource)
        view = self._view
        if view is None or epoch != self._epoch:  # the tools may have changed: look
            tools = [*self.native, *self.source.tools()]
            key = tuple(map(id, tools))
            with self._lock:
                if self._view is None or key != self._key:
                    self._view = CatalogView(tools, self.core, self.semantic)  # holds them
                    self._key = key
                view = self._view
                self._epoch = epoch
        if view.unmatched:
            self._say_unmatched(view)
        return view

    def _say_unmatched(self, view: CatalogView) -> None:
        """Warn once of a ``--core`` glob that matches no tool, when no server is still
        starting (a glob for a server that failed matches nothing too: said the same)."""
        fresh = [p for p in view.unmatched if p not in self._warned]
        if not fresh or self.source.starting():
            return
        self._warned.update(fresh)
        for pattern in fresh:
            _log.warning(
                "--core %r matches none of the %d tools served (tools are named "
                "<server>__<tool>; tooldeck mcp list CONFIG shows them)",
                pattern,
                len(view.tools),
            )

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
