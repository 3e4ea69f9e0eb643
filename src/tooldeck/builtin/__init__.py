"""tooldeck's built-in tool library, defined and bound like any user's tools.

The tools are declared in ``definitions.json`` beside this file (format:
``tooldeck/schemas/definitions.schema.json``) and their handlers live in one module per
category, each with a module-level ``handlers = Handlers("<category>")`` table.
:func:`load_builtin_registry` loads them through :meth:`ToolRegistry.load`, which checks
the file, the names and every handler's signature against its schema.

Categories (in order): ``files`` (read_document, grep_files, list_files, write_file,
edit_file), ``shell`` (run_bash), ``web`` (web_search, web_fetch; they need a bound web
provider, see docs/web.md), ``session`` (todo, status) and ``memory`` (notes; needs
memory enabled).
"""

from __future__ import annotations

from pathlib import Path

from ..registry import ToolRegistry

__all__ = ["CATEGORY_MODULES", "DEFINITIONS_PATH", "load_builtin_registry"]

DEFINITIONS_PATH = Path(__file__).with_name("definitions.json")

CATEGORY_MODULES: list[str] = [
    "tooldeck.builtin.files",
    "tooldeck.builtin.shell",
    "tooldeck.builtin.web",
    "tooldeck.builtin.session",
    "tooldeck.builtin.memory",
]


def load_builtin_registry() -> ToolRegistry:
    """Load the built-in tools (raises ``RegistryError`` listing every problem)."""
    return ToolRegistry.load(DEFINITIONS_PATH, CATEGORY_MODULES)
