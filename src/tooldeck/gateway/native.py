"""tooldeck's own tools at the gateway (``tooldeck serve --tools MODULE:ATTR``,
``--definitions FILE``).

Two ways in, one way on:

- ``--tools MODULE:ATTR`` names a Python object (:func:`resolve`): a
  :class:`~tooldeck.tools.Tool` (an ``@tool`` function), a list of them, a
  :class:`~tooldeck.assembly.Toolset` or a :class:`~tooldeck.registry.ToolRegistry`. No
  definitions file is needed;
- a definitions file (the format of ``docs/registry.md``) is bound to handlers the way
  :meth:`~tooldeck.registry.ToolRegistry.from_document` binds any (every problem at
  once, a broken file never half-loads; :func:`bind_definitions`), from the category
  modules given (``-c MODULE``, as for ``tooldeck tools check``) and, for each of
  tooldeck's built-in categories (``files``, ``shell``, ``web``, ``session``,
  ``memory``) that the file uses and no given module supplies, tooldeck's own handlers
  of the tools the file defines (so a copy of the built-in definitions with some tools
  left out serves just those). ``--definitions builtin`` is the built-in file itself.

Either way the tools come as tool sources, assembled once for the gateway's turn by
:func:`serve_native`. They are served next to the upstream ones, under their own names,
which can never collide with an upstream tool's: upstream tools are
``<server>__<tool>``, and a served tool may not have ``__`` in its name nor take a
gateway tool's name (``tool_search``, ``call_tool``, ``recall_tool_result``). Their
calls go the same way as every call: validation, the policy chain and approvals, the
audit log, the evidence record, offload and the guard.

They run with the gateway's turn facts (:func:`gateway_turn`): the home directory is
``--home`` (file tools cannot leave it; without one they refuse every call, and so do
``run_bash``, ``notes`` and ``todo``: less power, never more), no web provider (the web
tools are not served), no background jobs. A definition whose ``requires`` the gateway
cannot meet is left out, with a note that ``tooldeck serve --check`` shows.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..assembly import AssemblyError, Toolset, ToolSource, TurnContext, assemble
from ..errors import TooldeckError
from ..offload import RECALL_TOOL_NAME
from ..registry import Definition, Handlers, RegistryError, ToolRegistry
from ..sources.function import FunctionSource
from ..tools import Tool

__all__ = [
    "BUILTIN",
    "NativeTools",
    "ToolsSpecError",
    "bind_definitions",
    "gateway_turn",
    "resolve",
    "serve_native",
]

_log = logging.getLogger("tooldeck.gateway")

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


def bind_definitions(document: Any, categories: Sequence[str], *, source: str) -> ToolRegistry:
    """Bind ``document`` (a definitions document) to the modules ``categories`` and
    tooldeck's own handlers (see the module docstring); raises
    :class:`~tooldeck.registry.RegistryError` listing every problem."""
    builtin = _builtin_tables(document, categories)
    return ToolRegistry.from_document(document, [*categories, *builtin], source=source)


def serve_native(
    sources: Sequence[ToolSource],
    *,
    source: str,
    home: Path | None,
    defined: Sequence[Definition] = (),
) -> NativeTools:
    """The tools ``sources`` give for the gateway's turn (``home``): the one path of
    ``--definitions`` and ``--tools``. A name the gateway cannot serve (``__`` in it, a
    gateway tool's name) or made twice is a :class:`~tooldeck.registry.RegistryError`
    listing every problem; a definition (of ``defined``) whose ``requires`` the gateway
    cannot meet is left out, with a note."""
    try:
        served = assemble(gateway_turn("gateway", home), sources)
    except AssemblyError as exc:
        raise RegistryError(source, [str(exc)]) from exc
    problems = []
    for name in dict.fromkeys([*(d.name for d in defined), *served.names]):
        if "__" in name:
            problems.append(
                f"{name}: a tool served by the gateway cannot have '__' in its name "
                "(upstream tools are <server>__<tool>); rename it"
            )
        elif name in RESERVED:
            problems.append(f"{name}: the name of one of the gateway's own tools; rename it")
    if problems:
        raise RegistryError(source, problems)
    left_out = tuple(
        f"{d.name}: not served (it needs {', '.join(d.requires)}, which the gateway "
        "does not provide)"
        for d in defined
        if d.name not in served
    )
    return NativeTools(tuple(served.tools), left_out, source)


class ToolsSpecError(TooldeckError, ValueError):
    """``--tools MODULE:ATTR`` names nothing the gateway can serve; the message is one
    line saying what to give instead."""


KINDS = "a tool (@tool), a list of tools, a Toolset or a ToolRegistry"


def resolve(spec: str) -> tuple[list[ToolSource], tuple[Definition, ...]]:
    """The tool sources (and, for a registry, its definitions) of ``MODULE:ATTR``: the module
    is imported and ``ATTR`` (dotted for nested attributes) read from it; it must be
    :data:`KINDS`. Anything else is a :class:`ToolsSpecError`."""
    module_name, colon, attr = spec.partition(":")
    if not colon or not module_name.strip() or not attr.strip():
        raise ToolsSpecError(f"{spec!r} is not MODULE:ATTR; give e.g. mytools:tools")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # a module that raises at import time, or none at all
        _log.debug("importing %s failed", module_name, exc_info=True)
        if isinstance(exc, ModuleNotFoundError) and exc.name == module_name.split(".")[0]:
            raise ToolsSpecError(
                f"no module named {module_name!r} (looked in the current folder and the "
                "Python path); run the gateway where the module is, or install it"
            ) from exc
        what = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        raise ToolsSpecError(f"importing {module_name} failed: {what}") from exc
    value: Any = module
    for i, part in enumerate(attr.split(".")):
        if not hasattr(value, part):
            where = module_name + "".join(f".{p}" for p in attr.split(".")[:i])
            raise ToolsSpecError(f"{where} has no attribute {part!r}; give one that is {KINDS}")
        value = getattr(value, part)
    return _sources(value, f"{module_name}:{attr}")


def _sources(value: Any, where: str) -> tuple[list[ToolSource], tuple[Definition, ...]]:
    if isinstance(value, ToolRegistry):
        return [*value.by_category()], value.definitions
    if isinstance(value, Tool):
        tools: list[Tool] = [value]
    elif isinstance(value, Toolset):
        tools = list(value.tools)
    elif isinstance(value, list | tuple) and value:
        wrong = [i for i, item in enumerate(value) if not isinstance(item, Tool)]
        if wrong:
            raise ToolsSpecError(
                f"{where}[{wrong[0]}] is {type(value[wrong[0]]).__name__}, not a tool; "
                "give a list of tools (@tool functions or Tool objects)"
            )
        tools = list(value)
    else:
        kind = "an empty list" if isinstance(value, list | tuple) else type(value).__name__
        raise ToolsSpecError(f"{where} is {kind}; give {KINDS}")
    return [FunctionSource(lambda _ctx: tools, where)], ()
