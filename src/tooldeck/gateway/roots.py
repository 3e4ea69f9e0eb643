"""The roots the gateway's clients declare, as its upstream servers are told them.

A client that declares the ``roots`` capability is asked for its roots (``roots/list``)
once it is initialized, and again on each ``notifications/roots/list_changed`` it sends
(:mod:`.clients`). The upstream servers are one set of processes for every client
session of the gateway, so they are told one list (``McpSource.set_client_roots``, then
``notifications/roots/list_changed``):

- one client session declares roots (stdio, or one HTTP client): its roots;
- several do (HTTP): what they have in common (:func:`common`): a directory is a root
  upstream when it is inside a root of *every* one of them, so no client's server works
  where that client did not allow. Two clients that share nothing give the empty list
  (said in the log: a server such as npm's server-filesystem then keeps the directories
  it had, its command line's or the last roots it was told);
- a client session without the capability has no say (it declared none);
- none declares roots (or the last one ends): the gateway's own (none by default).

Only ``file://`` roots are directories; any other root is left out (logged).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from pathlib import Path
from urllib.parse import unquote, urlsplit

import mcp_types as types

__all__ = ["common", "paths_of"]

_log = logging.getLogger("tooldeck.gateway")


def paths_of(result: types.ListRootsResult) -> tuple[Path, ...]:
    """The directories of a client's ``roots/list`` answer (``file://`` roots only,
    absolute, resolved, each once)."""
    out: list[Path] = []
    for root in result.roots:
        parts = urlsplit(str(root.uri))
        path = unquote(parts.path)
        if parts.scheme != "file" or parts.netloc not in ("", "localhost") or not path:
            _log.warning("client root %r left out: only file:// roots are directories", root.uri)
            continue
        if "\x00" in path or not path.startswith("/"):
            _log.warning("client root %r left out: not an absolute path", root.uri)
            continue
        out.append(Path(path).resolve())
    return tuple(dict.fromkeys(out))


def _inside(path: Path, roots: Iterable[Path]) -> bool:
    return any(path.is_relative_to(root) for root in roots)


def common(declared: Sequence[Sequence[Path]]) -> tuple[Path, ...]:
    """The directories inside a root of every list of ``declared``, as few roots as
    cover them (a root inside another is left out), in first-seen order; empty for
    no lists."""
    if not declared:
        return ()
    shared = list(dict.fromkeys(declared[0]))
    for other in declared[1:]:
        shared = [p for p in shared if _inside(p, other)] + [p for p in other if _inside(p, shared)]
        shared = list(dict.fromkeys(shared))
    return tuple(p for p in shared if not any(p != q and p.is_relative_to(q) for q in shared))
