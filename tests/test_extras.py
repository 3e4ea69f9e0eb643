"""The optional dependencies (issue 32, item 8): every import of an optional package is
behind :func:`tooldeck._extras.needs_extra`, and the extras table matches pyproject.toml.

The core install is what a single-provider agent needs; each optional package belongs to
an extra named in its one-line error. Three checks here, in the tree:

- every import of an optional module (an ``import`` statement anywhere, or
  ``importlib.import_module("...")``), outside ``if TYPE_CHECKING:``, is inside ``with
  needs_extra(E)`` for an extra ``E`` that provides it, or in a ``try`` that falls back on
  ``ImportError``, or in a package whose ``__init__`` requires that extra first
  (:data:`GUARDED`);
- the table in :mod:`tooldeck._extras` names the same extras as ``pyproject.toml``, and each
  extra's packages (with their dependencies) provide the modules the table says;
- the helper itself, on real failed imports (a module set to ``None`` in ``sys.modules``
  is how Python makes an import fail).

``tests/test_packaging.py`` checks the same from the outside: the core wheel in a clean
virtual environment, each missing extra hit the way a user hits it.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tooldeck._extras import EXTRAS, LazyModule, needs_extra, require_extra
from tooldeck.errors import MissingExtra, TooldeckError

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
OPTIONAL = PYPROJECT["project"]["optional-dependencies"]
# Extras that only gather others (no package of their own, nothing raises them).
GATHERING = {"all"}
# Packages whose every module needs an extra: their __init__ requires it before any module
# loads, so the modules import its packages directly.
GUARDED = {
    "tooldeck.cli": ("cli",),
    "tooldeck.gateway": ("mcp", "search"),
    "tooldeck.mcp": ("mcp",),
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _extras_providing(module: str) -> set[str]:
    return {
        name
        for name, extra in EXTRAS.items()
        if any(module == m or module.startswith(f"{m}.") for m in extra.modules)
    }


def _is_type_checking(node: ast.If) -> bool:
    return "TYPE_CHECKING" in ast.unparse(node.test)


def _needs_extra_names(node: ast.With) -> set[str]:
    names = set()
    for item in node.items:
        call = item.context_expr
        if (
            isinstance(call, ast.Call)
            and ast.unparse(call.func).endswith("needs_extra")
            and call.args
            and isinstance(call.args[0], ast.Constant)
        ):
            names.add(call.args[0].value)
    return names


def _catches_import_error(node: ast.Try) -> bool:
    return any(
        h.type is not None
        and re.search(r"\b(ImportError|ModuleNotFoundError)\b", ast.unparse(h.type))
        for h in node.handlers
    )


def _imported(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        return [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
    if (
        isinstance(node, ast.Call)
        and ast.unparse(node.func).endswith("import_module")
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        return [node.args[0].value]
    return []


def unguarded_imports(tree: ast.Module, guarded_by: tuple[str, ...] = ()) -> list[str]:
    """``line: module`` for each import of an optional module not behind its extra.

    A ``with needs_extra(E)`` at module level covers the whole module (it imported, so
    ``E`` is installed), as does ``guarded_by`` (its package's ``__init__`` requires them).
    """
    found: list[str] = []
    for top in tree.body:
        if isinstance(top, ast.With):
            guarded_by = (*guarded_by, *_needs_extra_names(top))

    def visit(node: ast.AST, extras: frozenset[str], fallback: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child, extras, fallback)
            return
        if isinstance(node, ast.With):
            extras = extras | _needs_extra_names(node)
        if isinstance(node, ast.Try) and _catches_import_error(node):
            for child in node.body:
                visit(child, extras, True)
            for part in (*node.handlers, *node.orelse, *node.finalbody):
                visit(part, extras, fallback)
            return
        names = _imported(node)
        # the most specific module named decides (``opentelemetry`` is core, its sdk is not)
        needing = [_extras_providing(n) for n in names]
        needing = [n for n in needing if n]
        if needing and not fallback:
            wanted = needing[0]
            if not wanted & (extras | set(guarded_by)):
                found.append(f"{node.lineno}: {names[0]} (extras: {sorted(wanted)})")  # type: ignore[attr-defined]
        for child in ast.iter_child_nodes(node):
            visit(child, extras, fallback)

    visit(tree, frozenset(), False)
    return found


def _guard(module: str) -> tuple[str, ...]:
    for package, extras in GUARDED.items():
        if module == package or module.startswith(package + "."):
            return extras
    return ()


def test_no_optional_package_is_imported_outside_its_extra() -> None:
    problems = []
    for path in sorted((SRC / "tooldeck").rglob("*.py")):
        module = _module_name(path)
        guard = () if path.name == "__init__.py" and module in GUARDED else _guard(module)
        for line in unguarded_imports(ast.parse(path.read_text()), guard):
            problems.append(f"{path.relative_to(ROOT)}:{line}")
    assert not problems, "import an optional package inside needs_extra(...):\n" + "\n".join(
        problems
    )


@pytest.mark.parametrize("package", sorted(GUARDED))
def test_a_guarded_package_requires_its_extras_before_its_modules_load(package: str) -> None:
    init = SRC / Path(*package.split(".")) / "__init__.py"
    required: list[str] = []
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.level == 1:  # a module of the package
            break
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            call = node.value
            if ast.unparse(call.func).endswith("require_extra"):
                required.append(ast.literal_eval(call.args[0]))
        if isinstance(node, ast.With):
            required.extend(_needs_extra_names(node))
    assert sorted(set(required)) == sorted(GUARDED[package]), required


def test_the_checker_finds_an_unguarded_import() -> None:
    """The checker itself, on small modules."""
    bad = "import mcp\ndef f():\n    import cronsim\n"
    assert [p.split(" ")[1] for p in unguarded_imports(ast.parse(bad))] == ["mcp", "cronsim"]
    covered = "with needs_extra('mcp'):\n    import mcp\n" + bad
    assert unguarded_imports(ast.parse(covered)) == ["5: cronsim (extras: ['cron'])"]
    good = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    import psycopg\n"
        "with needs_extra('mcp'):\n    import mcp\n"
        "try:\n    import trafilatura\nexcept ImportError:\n    trafilatura = None\n"
        "import opentelemetry.trace\n"
    )
    assert unguarded_imports(ast.parse(good)) == []
    wrong_extra = "with needs_extra('cron'):\n    import mcp\n"
    assert len(unguarded_imports(ast.parse(wrong_extra))) == 1
    assert (
        len(unguarded_imports(ast.parse("import importlib\nimportlib.import_module('numpy')"))) == 1
    )
    assert unguarded_imports(ast.parse("from opentelemetry.sdk.trace import X")) != []


def _expand(requirements: list[str]) -> set[str]:
    """The distribution names ``requirements`` bring (installed ones, with their own
    requirements), ``tooldeck[x]`` expanded to the extra ``x``."""
    seen: set[str] = set()
    visited: set[tuple[str, frozenset[str]]] = set()  # a package with other extras is new
    todo = [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        name = req.name.lower().replace("_", "-")
        if name == "tooldeck":
            for extra in req.extras:
                todo.extend(Requirement(r) for r in OPTIONAL[extra])
            continue
        if (name, frozenset(req.extras)) in visited:
            continue
        visited.add((name, frozenset(req.extras)))
        seen.add(name)
        for raw in importlib.metadata.requires(name) or []:
            sub = Requirement(raw)
            marker = sub.marker
            if marker is None or any(marker.evaluate({"extra": e}) for e in (*req.extras, "")):
                todo.append(sub)
    return seen


def test_the_extras_table_matches_pyproject() -> None:
    assert set(OPTIONAL) - GATHERING == set(EXTRAS)
    everything = _expand(OPTIONAL["all"])
    for name in EXTRAS:
        assert _expand(OPTIONAL[name]) <= everything, f"tooldeck[all] lacks the {name} extra"
    dev = PYPROJECT["dependency-groups"]["dev"]
    assert "tooldeck[all]" in dev  # the test command has every extra


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_each_extra_brings_the_modules_it_names(extra: str) -> None:
    owners = importlib.metadata.packages_distributions()
    brought = _expand(OPTIONAL[extra])
    for module in EXTRAS[extra].modules:
        top = module.split(".")[0]
        dists = {d.lower().replace("_", "-") for d in owners.get(top, [])}
        assert dists & brought, f"the {extra} extra brings no distribution of {module!r}"


def test_a_missing_module_of_an_extra_is_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "cronsim", None)  # the import fails, as when missing
    with pytest.raises(MissingExtra) as caught, needs_extra("cron"):
        import cronsim  # noqa: F401
    exc = caught.value
    assert isinstance(exc, TooldeckError) and isinstance(exc, ImportError)
    assert (exc.extra, exc.name) == ("cron", "cronsim")
    assert str(exc) == (
        "cron schedules need the cron extra (no module named 'cronsim'): "
        "pip install 'tooldeck[cron]'"
    )
    assert "\n" not in str(exc)


def test_a_missing_module_the_extra_does_not_bring_is_left_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "cronsim", None)
    with pytest.raises(ModuleNotFoundError) as caught, needs_extra("mcp"):
        import cronsim  # noqa: F401
    assert not isinstance(caught.value, MissingExtra)  # a broken install, as it is


def test_require_extra_looks_without_importing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "Stemmer", raising=False)
    require_extra("search")  # installed here: nothing raised
    assert "Stemmer" not in sys.modules  # and not loaded by looking
    monkeypatch.setattr(sys, "meta_path", [])  # no finder finds anything now
    monkeypatch.setattr(sys, "path_importer_cache", {})
    with pytest.raises(MissingExtra, match=r"^tool search needs the search extra"):
        require_extra("search")


def test_a_lazy_module_loads_on_first_use_and_says_which_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lazy = LazyModule("cronsim", "cron")
    assert "not loaded yet" in repr(lazy)
    assert lazy.CronSim is importlib.import_module("cronsim").CronSim
    missing = LazyModule("cronsim", "cron")
    monkeypatch.setitem(sys.modules, "cronsim", None)
    with pytest.raises(MissingExtra, match=r"pip install 'tooldeck\[cron\]'$"):
        missing.CronSim  # noqa: B018
    with pytest.raises(ValueError, match="does not provide"):
        LazyModule("numpy", "cron")
