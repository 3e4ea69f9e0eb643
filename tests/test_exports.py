"""Each public name is in exactly one ``__all__``: the facade a user imports it from.

That is the top-level ``tooldeck`` package for the core names it exports, a feature
package's ``__init__`` for that package's names, otherwise the module that defines it.
A submodule keeps defining what its package exports (and code inside tooldeck may import
it from there), but does not list it again; a module that imports a name from a sibling
does not list it either. Read from the source with :mod:`ast`, nothing imported.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"

# The duplicates left, each with why: name -> the modules that list it today.
# tooldeck.workflows.store keeps its store classes listed beside the workflows facade
# because the gateway's session store and the job and schedule commands reach the stores
# through it (one layer down from the facade); ``source`` stays listed in tooldeck.sources,
# the package of the tool sources, as well as at the top level.
ALLOWED: dict[str, tuple[str, ...]] = {
    "source": ("tooldeck", "tooldeck.sources"),
    "PostgresStore": ("tooldeck.workflows", "tooldeck.workflows.store"),
    "SQLiteStore": ("tooldeck.workflows", "tooldeck.workflows.store"),
    "StoreError": ("tooldeck.workflows", "tooldeck.workflows.store"),
    "WorkflowStore": ("tooldeck.workflows", "tooldeck.workflows.store"),
}


def _module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _top_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """The module's statements, those under ``if`` and ``try`` included."""
    found: list[ast.stmt] = []
    for node in body:
        found.append(node)
        if isinstance(node, ast.If | ast.Try):
            found += _top_level(node.body) + _top_level(node.orelse)
            for handler in getattr(node, "handlers", []):
                found += _top_level(handler.body)
    return found


class Module:
    """What one module lists in ``__all__`` and what it defines itself."""

    def __init__(self, name: str, path: Path) -> None:
        self.name = name
        self.package = path.name == "__init__.py"
        self.exported: list[str] = []
        self.defined: set[str] = set()
        for node in _top_level(ast.parse(path.read_text()).body):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                self.defined.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = {t.id for t in targets if isinstance(t, ast.Name)}
                self.defined |= names
                if "__all__" in names and node.value is not None:
                    self.exported = list(ast.literal_eval(node.value))


def modules(package: Path) -> dict[str, Module]:
    found = (Module(_module_name(path, package.parent), path) for path in package.rglob("*.py"))
    return {module.name: module for module in sorted(found, key=lambda m: m.name)}


def keeper(name: str, listing: list[Module]) -> str:
    """Which of the modules listing ``name`` should keep it, and why."""
    names = [m.name for m in listing]
    top = [m for m in names if "." not in m]
    if top:
        return f"{top[0]} (the top-level package exports it)"
    facades = [
        m.name
        for m in listing
        if m.package and any(o.startswith(m.name + ".") for o in names if o != m.name)
    ]
    if facades:
        return f"{min(facades, key=lambda n: n.count('.'))} (the package's facade)"
    defining = [m.name for m in listing if name in m.defined]
    if len(defining) == 1:
        return f"{defining[0]} (it defines it)"
    return "one of them only: they define different things under one name (or rename one)"


def duplicates(package: Path) -> dict[str, list[Module]]:
    where: dict[str, list[Module]] = defaultdict(list)
    for module in modules(package).values():
        for name in module.exported:
            where[name].append(module)
    return {name: listing for name, listing in where.items() if len(listing) > 1}


def problems(package: Path, allowed: dict[str, tuple[str, ...]]) -> list[str]:
    found = []
    for name, listing in sorted(duplicates(package).items()):
        names = tuple(m.name for m in listing)
        if set(names) <= set(allowed.get(name, ())):
            continue
        found.append(
            f"{name} is in the __all__ of {', '.join(names)}: keep it in {keeper(name, listing)}"
        )
    return found


def test_each_public_name_is_exported_from_one_module() -> None:
    found = problems(SRC / "tooldeck", ALLOWED)
    assert not found, "\n".join(found)


def test_allowed_duplicates_still_exist() -> None:
    current = {
        name: {m.name for m in listing} for name, listing in duplicates(SRC / "tooldeck").items()
    }
    stale = [
        f"{name}: listed by {sorted(current.get(name, ()))} now, allowed {list(modules)}"
        for name, modules in ALLOWED.items()
        if current.get(name) != set(modules)
    ]
    assert not stale, "ALLOWED in tests/test_exports.py is out of date:\n" + "\n".join(stale)


def test_a_name_listed_twice_is_reported_with_the_module_to_keep_it(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "web").mkdir(parents=True)
    (package / "__init__.py").write_text('__all__ = ["Tool"]\nfrom .tools import Tool\n')
    (package / "tools.py").write_text(
        '__all__ = ["Tool", "clip"]\nclass Tool: ...\ndef clip(): ...\n'
    )
    (package / "web" / "__init__.py").write_text('__all__ = ["Brave"]\nfrom .brave import Brave\n')
    (package / "web" / "brave.py").write_text('__all__ = ["Brave"]\nclass Brave: ...\n')
    (package / "web" / "text.py").write_text('__all__ = ["clip"]\ndef clip(): ...\n')

    assert problems(package, {}) == [
        "Brave is in the __all__ of pkg.web, pkg.web.brave: keep it in pkg.web "
        "(the package's facade)",
        "Tool is in the __all__ of pkg, pkg.tools: keep it in pkg "
        "(the top-level package exports it)",
        "clip is in the __all__ of pkg.tools, pkg.web.text: keep it in one of them only: they "
        "define different things under one name (or rename one)",
    ]
    assert problems(package, {"Brave": ("pkg.web", "pkg.web.brave")})[0].startswith("Tool ")
