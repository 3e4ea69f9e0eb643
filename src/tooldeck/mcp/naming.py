"""Names the model sees for MCP tools: ``mcp__<server>__<tool>``, provider-safe.

Every provider accepts ``^[a-zA-Z0-9_-]{1,64}$``; MCP tool names may hold ``.``, ``/``,
spaces, non-ASCII letters and up to 128 characters. The mapping:

1. each character outside ``[a-zA-Z0-9_-]`` becomes ``_`` (in the server and tool name);
2. a name longer than 64 characters is cut to 55 and ends with ``_`` and 8 hex digits
   of a SHA-256 of the original ``server`` and ``tool`` (stable across runs);
3. two tools that map to the same name (``a.b`` and ``a_b``) are a collision: a tool
   whose name needed no change keeps it, every other one gets the hash suffix. The
   result does not depend on the order the server lists its tools in. Collisions are
   reported, never silently merged.

The reverse map (exposed name -> server and original tool name) is kept by the source,
so nothing is ever parsed back out of an exposed name.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Collision", "clean", "exposed_name", "map_names", "namespace_name"]

MAX_NAME = 64
_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")
_HASH_LEN = 8


def clean(text: str) -> str:
    """``text`` with every character outside ``[a-zA-Z0-9_-]`` replaced by ``_``."""
    return _UNSAFE.sub("_", text) or "_"


def _digest(server: str, tool: str, length: int = _HASH_LEN) -> str:
    return hashlib.sha256(f"{server}\x00{tool}".encode()).hexdigest()[:length]


def _suffixed(base: str, server: str, tool: str, length: int = _HASH_LEN) -> str:
    return base[: MAX_NAME - length - 1] + "_" + _digest(server, tool, length)


def exposed_name(server: str, tool: str) -> str:
    """The provider-safe name of one MCP tool (before collision handling)."""
    base = f"mcp__{clean(server)}__{clean(tool)}"
    return base if len(base) <= MAX_NAME else _suffixed(base, server, tool)


def namespace_name(server: str) -> str:
    """The server name as a tool namespace (provider-safe, at most 64 characters)."""
    base = clean(server)
    return base if len(base) <= MAX_NAME else _suffixed(base, server, "")


@dataclass(frozen=True, slots=True)
class Collision:
    """Tools of one server whose provider-safe names collided, and what each became."""

    server: str
    name: str
    tools: tuple[str, ...]
    resolved: tuple[str, ...]

    def describe(self) -> str:
        pairs = ", ".join(f"{t!r} -> {r}" for t, r in zip(self.tools, self.resolved, strict=True))
        return f"server {self.server!r}: tools collide on {self.name}: {pairs}"


def map_names(
    server: str, tools: Iterable[str], taken: Iterable[str] = ()
) -> tuple[dict[str, str], list[Collision]]:
    """Exposed names for ``tools`` of ``server``: ``{tool: exposed}`` and the collisions.

    ``taken`` are names already used (by other servers' tools) that must not be reused.
    """
    raw = list(dict.fromkeys(tools))
    wanted: dict[str, list[str]] = {}
    for tool in raw:
        wanted.setdefault(exposed_name(server, tool), []).append(tool)
    used = set(taken)
    result: dict[str, str] = {}
    collisions: list[Collision] = []
    for name, group in sorted(wanted.items()):
        if len(group) == 1 and name not in used:
            result[group[0]] = name
            used.add(name)
            continue
        ordered = sorted(group)
        exact = [t for t in ordered if f"mcp__{clean(server)}__{t}" == name]
        keeper = exact[0] if exact and name not in used else None
        resolved: list[str] = []
        for tool in ordered:
            if tool == keeper:
                final = name
            else:
                length = _HASH_LEN
                final = _suffixed(name, server, tool, length)
                while final in used or final in result.values():
                    length += 4
                    final = _suffixed(name, server, tool, length)
            used.add(final)
            result[tool] = final
            resolved.append(final)
        collisions.append(Collision(server, name, tuple(ordered), tuple(resolved)))
    return {t: result[t] for t in raw}, collisions
