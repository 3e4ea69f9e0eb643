"""Imports only go downward: no circles among the modules of the packages checked here.

Every module-level import counts, also those under ``if TYPE_CHECKING:`` (a circle hidden
from the interpreter is still a circle in the design); imports inside functions (lazy,
for optional parts) do not.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGES = ("tooldeck.workflows", "tooldeck.jobs", "tooldeck.schedules", "tooldeck.gateway")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _top_level_imports(tree: ast.Module) -> list[ast.ImportFrom | ast.Import]:
    found: list[ast.ImportFrom | ast.Import] = []

    def walk(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                found.append(node)
            elif isinstance(node, ast.If | ast.Try):
                walk(node.body)
                walk(node.orelse)
                for handler in getattr(node, "handlers", []):
                    walk(handler.body)

    walk(tree.body)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in (SRC / "tooldeck").rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        edges: set[str] = set()
        for node in _top_level_imports(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = package.split(".")
                if node.level:
                    base = base[: len(base) - (node.level - 1)]
                    prefix = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    prefix = node.module or ""
                targets = [prefix] + [f"{prefix}.{a.name}" for a in node.names]
            edges.update(t for t in targets if t in modules and t != name)
        graph[name] = edges
    return graph


def _cycle_from(start: str, graph: dict[str, set[str]], inside: set[str]) -> list[str] | None:
    stack: list[tuple[str, list[str]]] = [(start, [start])]
    seen: set[str] = set()
    while stack:
        node, path = stack.pop()
        for nxt in graph.get(node, ()):
            if nxt not in inside:
                continue
            if nxt == start:
                return [*path, start]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, [*path, nxt]))
    return None


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_circle_inside_the_package(package: str) -> None:
    graph = import_graph()
    # a package's __init__ re-exports its modules: it is the top, never part of a circle
    inside = {m for m in graph if m.startswith(package + ".")}
    if not inside:
        pytest.skip(f"{package} has no modules")
    for module in sorted(inside):
        cycle = _cycle_from(module, graph, inside)
        assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_the_graph_sees_type_checking_imports() -> None:
    """The checker itself: a TYPE_CHECKING import is an edge (it found the old circle)."""
    tree = ast.parse(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .engine import X\n"
    )
    assert [type(n).__name__ for n in _top_level_imports(tree)] == ["ImportFrom", "ImportFrom"]


# The core (what a turn is made of, and the loop) sits below the features: a feature
# module may import the core, never the reverse (issue 32: ``sources.py`` imported the
# registry and the skills to sort a session's tools). The offload package is not a feature:
# every session runs with its size guard (``offload.defaults``).
CORE = (
    "tooldeck.assembly",
    "tooldeck.sources",
    "tooldeck.tools",
    "tooldeck.plan",
    "tooldeck.loop",
    "tooldeck.oneshot",
    "tooldeck._turn",
    "tooldeck._streaming",
    "tooldeck.dispatch",
    "tooldeck._call",
    # the packages every session runs through
    "tooldeck.offload",
    "tooldeck.policy",
    "tooldeck.telemetry",
    "tooldeck.providers",
)
FEATURES = (
    "tooldeck.registry",
    "tooldeck.agents",
    "tooldeck.mcp",
    "tooldeck.jobs",
    "tooldeck.schedules",
    "tooldeck.workflows",
    "tooldeck.gateway",
    "tooldeck.builtin",
    "tooldeck.web",
    "tooldeck.search",
    "tooldeck.cli",
)


def _within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


# Names of feature types a core annotation mentions, imported for the type checker only
# (never at run time): the edge and why.
TYPE_ONLY = {
    ("tooldeck.assembly", "tooldeck.web"): "TurnContext.web_provider's type",
    ("tooldeck.assembly", "tooldeck.web.netguard"): "TurnContext.web_access's type",
    ("tooldeck.plan", "tooldeck.search.embedding"): "ToolPlanner.semantic's type",
    ("tooldeck.policy.session", "tooldeck.agents.toolkits"): "child_policy's agent type",
}


def _runtime_graph() -> dict[str, set[str]]:
    """The graph without ``if TYPE_CHECKING:`` imports (what loading a module loads)."""
    graph = import_graph()
    for (module, target), _why in TYPE_ONLY.items():
        path = SRC / (module.replace(".", "/") + ".py")
        tree = ast.parse(path.read_text())
        guarded = [
            n
            for node in tree.body
            if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
            for n in node.body
        ]
        package = module.rsplit(".", 1)[0].split(".")
        names = {
            ".".join([*package[: len(package) - (n.level - 1)], n.module])
            for n in guarded
            if isinstance(n, ast.ImportFrom) and n.module and n.level
        }
        if target in names:
            graph[module].discard(target)
    return graph


def test_the_core_imports_no_feature_module() -> None:
    graph = _runtime_graph()
    core = [m for m in graph if _within(m, CORE)]
    assert "tooldeck.sources.listed" in core and "tooldeck.assembly" in core
    wrong = sorted(
        f"{module} -> {target}"
        for module in core
        for target in graph[module]
        if _within(target, FEATURES)
    )
    assert wrong == [], "core modules import feature modules: " + ", ".join(wrong)


def test_the_feature_check_would_see_a_core_module_importing_a_feature() -> None:
    """The checker itself: the old ``sources.py`` edge is one it reports."""
    tree = ast.parse("from .registry import ToolRegistry\n")
    node = _top_level_imports(tree)[0]
    assert isinstance(node, ast.ImportFrom) and node.module == "registry"
    assert _within("tooldeck.registry", FEATURES) and _within("tooldeck.sources", CORE)
