"""tooldeck's own tools at the gateway (``tooldeck serve --definitions FILE``).

A definitions file (the format of ``docs/registry.md``) is bound to handlers the way
:meth:`~tooldeck.registry.ToolRegistry.from_document` binds any (every problem at once,
a broken file never half-loads), from:

- the category modules given (``-c MODULE``, as for ``tooldeck tools check``), and
- for each of tooldeck's built-in categories (``files``, ``shell``, ``web``, ``session``,
  ``memory``) that the file uses and no given module supplies: tooldeck's own handlers
  of the tools the file defines (so a copy of the built-in definitions with some tools
  left out serves just those). ``--definitions builtin`` is the built-in file itself.

The tools are served next to the upstream ones, under their own names, which can never
collide with an upstream tool's: upstream tools are ``<server>__<tool>``, and a served
definition may not contain ``__`` nor take a gateway tool's name (``tool_search``,
``call_tool``, ``recall_tool_result``). Their calls go the same way as every call:
validation, the policy chain and approvals, the audit log, the evidence record, offload
and the guard.

They run with the gateway's turn facts (:func:`gateway_turn`): the home directory is
``--home`` (file tools cannot leave it; without one they refuse every call, and so do
``run_bash``, ``notes`` and ``todo``: less power, never more), no web provider (the web
tools are not served), no background jobs. A tool whose ``requires`` the gateway cannot
meet is left out, with a note that ``tooldeck serve --check`` shows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..assembly import TurnContext, assemble
from ..offload import RECALL_TOOL_NAME
from ..registry import Handlers, RegistryError, ToolRegistry
from ..tool import Tool

__all__ = ["BUILTIN", "NativeTools", "gateway_turn", "load_native"]

BUILTIN = "builtin"
"""``--definitions builtin``: tooldeck's own definitions file."""
RESERVED = ("tool_search", "call_tool", RECALL_TOOL_NAME)


@dataclass(frozen=True, slots=True)
class NativeTools:
    """The tools of a definitions file the gateway serves, and what it left out (why)."""

    tools: tuple[Tool, ...]
    left_out: tuple[str, ...]
    source: str


def gateway_turn(session_id: str, home: Path | None) -> TurnContext:
    """The turn facts the gateway's own tools run with (see the module docstring)."""
    return TurnContext(session_id=session_id, home=home, web_provider=None)


def _builtin_tables(document: Any, given: Sequence[Any]) -> list[Handlers]:
    """Tables of tooldeck's handlers for the built-in categories the file uses that no
    given module supplies, holding only the tools the file defines."""
    import importlib

    from ..builtin import CATEGORY_MODULES
    from ..registry import _tables

    given_tables, _ = _tables(given)
    supplied = {t.category for t in given_tables}
    entries = document.get("tools", []) if isinstance(document, dict) else []
    wanted: dict[str, set[str]] = {}
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            wanted.setdefault(str(entry.get("category")), set()).add(entry["name"])
    tables: list[Handlers] = []
    for module_name in CATEGORY_MODULES:
        table = importlib.import_module(module_name).handlers
        if table.category in supplied or table.category not in wanted:
            continue
        copy = Handlers(table.category)
        for name, fn in table.table.items():
            if name in wanted[table.category]:
                copy.add(name, fn)
        tables.append(copy)
    return tables


def load_native(
    document: Any, categories: Sequence[str], *, source: str, home: Path | None
) -> NativeTools:
    """Bind ``document`` (a definitions document) for the gateway; raises
    :class:`~tooldeck.registry.RegistryError` listing every problem."""
    builtin = _builtin_tables(document, categories)
    registry = ToolRegistry.from_document(document, [*categories, *builtin], source=source)
    problems = []
    for name in registry.tools:
        if "__" in name:
            problems.append(
                f"{name}: a tool served by the gateway cannot have '__' in its name "
                "(upstream tools are <server>__<tool>); rename it"
            )
        elif name in RESERVED:
            problems.append(f"{name}: the name of one of the gateway's own tools; rename it")
    if problems:
        raise RegistryError(source, problems)
    served = assemble(gateway_turn("gateway", home), registry.creators())
    left_out = tuple(
        f"{d.name}: not served (it needs {', '.join(d.requires)}, which the gateway "
        "does not provide)"
        for d in registry.definitions
        if d.name not in served
    )
    return NativeTools(tuple(served.tools), left_out, source)
