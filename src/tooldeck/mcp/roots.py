"""The client's MCP roots: the directories a server may work in.

tooldeck declares the ``roots`` capability (with ``listChanged``) to every server and
answers ``roots/list`` with:

- the home of the latest turn (``TurnContext.home``, :class:`~tooldeck.assembly.TurnContext`),
  when it has one, first;
- then the roots the :class:`~tooldeck.mcp.McpSource` was given (``roots=[Path, ...]``).

When that list changes (a turn with another home), every connected server is sent
``notifications/roots/list_changed`` and asks again.

In the gateway, the roots its clients declare replace both (:meth:`Roots.set_client`,
:mod:`tooldeck.gateway.roots`): the upstream servers work where the gateway's clients
said, until none of them declares roots any more. A server such as npm's
``@modelcontextprotocol/server-filesystem``, started with no directory arguments, takes
its allowed directories from them.

Shared by every connection of one source; read on the MCP I/O loop, written by the
thread that assembles a turn (hence the lock).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path

import mcp_types as types

__all__ = ["Roots"]


class Roots:
    """The roots a source's servers are told: the turn's home, then the configured ones."""

    def __init__(self, configured: Iterable[str | Path] = ()) -> None:
        self._configured = tuple(Path(p).expanduser().resolve() for p in configured)
        self._home: Path | None = None
        self._client: tuple[Path, ...] | None = None
        self._lock = threading.Lock()

    def paths(self) -> tuple[Path, ...]:
        """The roots, home first, each directory once (the client's, when given)."""
        with self._lock:
            if self._client is not None:
                return self._client
            chosen = (self._home, *self._configured) if self._home else self._configured
        return tuple(dict.fromkeys(chosen))

    def set_client(self, paths: Iterable[Path] | None) -> bool:
        """Make ``paths`` the roots, in place of the home and the configured ones (the
        gateway's clients gave them; ``None``: back to those); whether the roots changed."""
        chosen = None if paths is None else tuple(dict.fromkeys(paths))
        before = self.paths()
        with self._lock:
            self._client = chosen
        return self.paths() != before

    def set_home(self, home: str | Path | None) -> bool:
        """Make ``home`` the turn's root (``None``: the configured roots only); whether the
        roots changed (the servers are then told)."""
        resolved = None if home is None else Path(home).expanduser().resolve()
        before = self.paths()
        with self._lock:
            self._home = resolved
        return self.paths() != before

    def result(self) -> types.ListRootsResult:
        """The answer to ``roots/list``: one ``file://`` root per path, named by it."""
        return types.ListRootsResult(
            roots=[
                types.Root(uri=path.as_uri(), name=path.name or str(path)) for path in self.paths()
            ]
        )
