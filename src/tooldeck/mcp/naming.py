"""Names the model sees for MCP tools: ``mcp__<server>__<tool>``, provider-safe, injective.

Every provider accepts ``^[a-zA-Z0-9_-]{1,64}$``; MCP tool names may hold ``.``, ``/``,
spaces, non-ASCII letters and up to 128 characters. The mapping:

1. each character outside ``[a-zA-Z0-9_-]`` becomes ``_`` (in the server and tool name);
2. the server's part, its *namespace*, is at most 40 characters: a longer one is cut to
   31 and ends with ``_`` and 8 hex digits of a SHA-256 of the server's name;
3. a name longer than 64 characters is cut to 55 and ends with ``_`` and 8 hex digits
   of a SHA-256 of the original ``server`` and ``tool`` (stable across runs); the cut
   never reaches into ``mcp__<namespace>__``;
4. two tools of one server that map to the same name (``a.b`` and ``a_b``) are a
   collision: a tool whose name needed no change keeps it, every other one gets the
   hash suffix. The result does not depend on the order the server lists its tools in.
   Collisions are reported, never silently merged.

Across servers no two tools can share a name, whatever the servers list and whichever
is up: a config is refused (:func:`server_name_problems`) when a server's namespace
contains ``__`` or ends with ``_``, or two servers have one namespace. Then no
server's ``mcp__<namespace>__`` begins another's, so every exposed name starts with
the prefix of exactly one configured server, and a policy rule written for one server's
tool can never match a tool of another (``docs`` listing ``internal__read`` cannot take
the name of ``docs__internal``'s ``read``: that server name is refused).

The gateway names the same tools without :data:`PREFIX` (``map_names(...,
prefixed=False)``, :class:`~tooldeck.mcp.McpSource` ``prefixed=False``): the library's
name minus its first five characters, so just as injective; a namespace never contains
``__``, so the namespace of either spelling is exact (:func:`namespace_of`), and a tool
pattern written the library's way has one gateway spelling (:func:`gateway_pattern`).

The reverse map (exposed name -> server and original tool name) is kept by the source,
so no call parses an exposed name (:func:`namespace_of` reads a name's namespace for
``tooldeck policy explain``, which has no source).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

__all__ = [
    "PREFIX",
    "clean",
    "gateway_pattern",
    "namespace_name",
    "namespace_of",
    "server_name_problems",
]

PREFIX = "mcp__"
SEPARATOR = "__"
MAX_NAME = 64
MAX_NAMESPACE = 40
_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")
_HASH_LEN = 8
# Hash lengths tried for a tool whose shorter suffixed name is taken: with a namespace
# of at most 40 characters the longest still leaves ``mcp__<namespace>__`` whole.
_HASH_LENGTHS = (_HASH_LEN, 12, 16)


def clean(text: str) -> str:
    """``text`` with every character outside ``[a-zA-Z0-9_-]`` replaced by ``_``."""
    return _UNSAFE.sub("_", text) or "_"


def _digest(server: str, tool: str, length: int = _HASH_LEN) -> str:
    return hashlib.sha256(f"{server}\x00{tool}".encode()).hexdigest()[:length]


def _suffixed(base: str, server: str, tool: str, length: int = _HASH_LEN) -> str:
    return base[: MAX_NAME - length - 1] + "_" + _digest(server, tool, length)


def namespace_name(server: str) -> str:
    """The server name as a tool namespace: provider-safe, at most 40 characters."""
    base = clean(server)
    if len(base) <= MAX_NAMESPACE:
        return base
    # no "_" before the hash's own: a namespace never gains a "__" by being cut
    return base[: MAX_NAMESPACE - _HASH_LEN - 1].rstrip("_") + "_" + _digest(server, "")


def _prefix(server: str) -> str:
    return f"{PREFIX}{namespace_name(server)}{SEPARATOR}"


def exposed_name(server: str, tool: str) -> str:
    """The provider-safe name of one MCP tool (before collision handling)."""
    base = _prefix(server) + clean(tool)
    return base if len(base) <= MAX_NAME else _suffixed(base, server, tool)


def _bare(name: str) -> str:
    return name[len(PREFIX) :]


def namespace_of(name: str) -> str | None:
    """The namespace in the name of an MCP tool, in the library's spelling
    (``mcp__<namespace>__<tool>``) or the gateway's (``<namespace>__<tool>``); ``None``
    for a name of neither shape. Exact, as a namespace never contains ``__``."""
    rest = _bare(name) if name.startswith(PREFIX) else name
    namespace, separator, tool = rest.partition(SEPARATOR)
    return namespace if separator and namespace and tool else None


def gateway_pattern(pattern: str) -> str | None:
    """The gateway's spelling of a tool name or glob written the library's way, or ``None``
    when ``pattern`` does not start with :data:`PREFIX`.

    ``mcp__time__*`` is ``time__*``: the rest of the pattern selects exactly the upstream
    tools the whole one selected. A plain start and a ``*`` keep meaning upstream tools
    only: ``mcp__*`` is ``*__*`` and ``mcp__git*`` is ``git*__*`` (``*`` would also
    select the gateway's own tools and tooldeck's, whose names have no ``__``).
    """
    if not pattern.startswith(PREFIX):
        return None
    rest = _bare(pattern)
    start = rest[:-1]
    plain = not any(c in start for c in "*?[") and not start.endswith("_")
    if rest.endswith("*") and plain and SEPARATOR not in start:
        return rest + SEPARATOR + "*"
    return rest


def server_name_problems(names: Iterable[str]) -> list[str]:
    """Why these server names cannot share one config (empty when they can).

    A namespace with ``__`` in it, or ending with ``_``, would let another server's
    tools take its tools' names (``docs`` listing ``internal__read`` is
    ``mcp__docs__internal__read``, as is ``docs__internal``'s ``read``); two servers
    with one namespace would share every name.
    """
    problems: list[str] = []
    owners: dict[str, str] = {}
    for name in names:
        namespace = namespace_name(name)
        shown = repr(name) if namespace == name else f"{name!r} ({namespace} in tool names)"
        if SEPARATOR in namespace or namespace.endswith("_"):
            what = "contain '__'" if SEPARATOR in namespace else "end with '_'"
            fix = re.sub("_{2,}", "_", namespace).strip("_") or "server"
            problems.append(
                f"server {shown}: a server name may not {what}, or another server's tools "
                f"could take its tools' names (tool names are {PREFIX}<server>__<tool>); "
                f"rename it, e.g. {fix!r}, and update the policy rules that name its tools"
            )
            continue
        other = owners.setdefault(namespace, name)
        if other != name:
            problems.append(
                f"servers {other!r} and {name!r} both become {namespace!r} in tool names; "
                "rename one of them"
            )
    return problems


@dataclass(frozen=True, slots=True)
class Collision:
    """Tools of one server whose provider-safe names collided, and what each became
    (``None``: no free name was found, the tool is not exposed)."""

    server: str
    name: str
    tools: tuple[str, ...]
    resolved: tuple[str | None, ...]

    def describe(self) -> str:
        pairs = ", ".join(
            f"{t!r} -> {r or 'not exposed'}" for t, r in zip(self.tools, self.resolved, strict=True)
        )
        return f"server {self.server!r}: tools collide on {self.name}: {pairs}"


def map_names(
    server: str, tools: Iterable[str], *, prefixed: bool = True
) -> tuple[dict[str, str], list[Collision]]:
    """Exposed names for ``tools`` of ``server``: ``{tool: exposed}`` and the collisions
    (``prefixed=False``: both in the gateway's spelling, without :data:`PREFIX`).

    Depends only on the set of names (not on their order); a tool left out of the map
    (see :class:`Collision`) is not exposed.
    """
    raw = list(dict.fromkeys(tools))
    wanted: dict[str, list[str]] = {}
    for tool in raw:
        wanted.setdefault(exposed_name(server, tool), []).append(tool)
    used: set[str] = set()
    result: dict[str, str] = {}
    collisions: list[Collision] = []
    prefix = _prefix(server)
    for name, group in sorted(wanted.items()):
        if len(group) == 1 and name not in used:
            result[group[0]] = name
            used.add(name)
            continue
        ordered = sorted(group)
        exact = [t for t in ordered if prefix + t == name]
        keeper = exact[0] if exact and name not in used else None
        resolved: list[str | None] = []
        for tool in ordered:
            final: str | None = name if tool == keeper else None
            if final is None:
                free = (_suffixed(name, server, tool, n) for n in _HASH_LENGTHS)
                final = next((f for f in free if f not in used), None)
            if final is not None:
                used.add(final)
                result[tool] = final
            resolved.append(final)
        collisions.append(Collision(server, name, tuple(ordered), tuple(resolved)))
    names = {t: result[t] for t in raw if t in result}
    if prefixed:
        return names, collisions
    bare = [
        replace(c, name=_bare(c.name), resolved=tuple(r and _bare(r) for r in c.resolved))
        for c in collisions
    ]
    return {t: _bare(n) for t, n in names.items()}, bare
