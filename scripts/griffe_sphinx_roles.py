"""A griffe extension for the API reference: Sphinx roles in docstrings become links.

tooldeck's docstrings name other objects the Sphinx way (``:class:`Tool```,
``:meth:`Policy.decide```, ``:func:`~tooldeck.tokens.estimate_tokens```, ``:mod:`.rules```),
which mkdocstrings does not read. After griffe has loaded the package, every such role is
resolved the way Sphinx resolves it (the current object, then its parents, then the
package) and replaced by a cross-reference to the object's full path; ``~`` shows the
last part of the name only, as in Sphinx.

A role naming a tooldeck object that does not exist (a renamed or removed symbol) is a
warning, so ``mkdocs build --strict`` fails and says where. A role naming another
library's object (``:class:`asyncio.Task```) is shown as code. A target that exists but
is not documented on any page (a private module's helper) is shown as code too: the link
is optional.

Used by mkdocs.yml (``extensions: [scripts/griffe_sphinx_roles.py]``).
"""

from __future__ import annotations

import builtins
import functools
import html
import importlib.util
import logging
import re
from collections.abc import Callable, Iterator
from typing import Any

import griffe

_log = logging.getLogger("mkdocs.plugins.tooldeck.sphinx_roles")

ROLE = re.compile(r":(?:py:)?(class|func|meth|mod|data|attr|exc|obj|const|type):`([^`]+)`")


def _objects(obj: griffe.Object) -> Iterator[griffe.Object]:
    yield obj
    for member in obj.members.values():
        if not member.is_alias and isinstance(member, griffe.Object):
            yield from _objects(member)


def _scopes(obj: griffe.Object) -> Iterator[griffe.Object]:
    scope: griffe.Object | None = obj
    while scope is not None:
        if not scope.is_function and not scope.is_attribute:
            yield scope
        scope = scope.parent


def _external(name: str) -> bool:
    first = name.split(".", 1)[0]
    if first == "tooldeck":
        return False
    if hasattr(builtins, first):  # OSError, str...
        return True
    try:
        return importlib.util.find_spec(first) is not None
    except (ImportError, ValueError):
        return False


class SphinxRoles(griffe.Extension):
    """Rewrite ``:role:`target``` in the docstrings of a package into cross-references."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        collection = loader.modules_collection

        def exists(path: str) -> bool:
            try:
                collection.get_member(path)
            except (KeyError, ValueError, griffe.AliasResolutionError, griffe.CyclicAliasError):
                return False
            return True

        for obj in _objects(pkg):
            if obj.docstring is not None and ":" in obj.docstring.value:
                rewrite = functools.partial(_link, obj=obj, exists=exists)
                obj.docstring.value = ROLE.sub(rewrite, obj.docstring.value)


def _link(match: re.Match[str], obj: griffe.Object, exists: Callable[[str], bool]) -> str:
    """The cross-reference for one role in ``obj``'s docstring."""
    target = match.group(2).strip()
    short = target.startswith("~")
    name = target.lstrip("~").removesuffix("()")
    shown = name.rsplit(".", 1)[-1] if short else name.lstrip(".")
    if match.group(1) in ("func", "meth"):
        shown += "()"
    code = f"<code>{html.escape(shown)}</code>"
    bare = name.lstrip(".")
    candidates = [f"{scope.path}.{bare}" for scope in _scopes(obj)]
    if not name.startswith("."):
        candidates.insert(0, bare)
        candidates.append(f"tooldeck.{bare}")
    for path in candidates:
        if exists(path):
            return f'<autoref identifier="{path}" optional>{code}</autoref>'
    if name.startswith(".") or not _external(bare):
        lineno = obj.docstring.lineno if obj.docstring is not None else obj.lineno
        where = f"{obj.relative_filepath}:{lineno}"
        _log.warning(f"{where}: {match.group(0)} in {obj.path} names nothing")
    return code
