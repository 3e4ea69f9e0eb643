"""The loop stays in phases: no function of its core path grows past what one reads at once.

``loop.py`` (the session) and ``_turn.py`` (one turn, phase by phase) are the core path
of every run, stream and resume. Each function there is at most 60 lines; a phase that
needs more is split into named helpers. ``_turn.py`` sits below ``loop.py`` and never
imports it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "tooldeck"
CORE = ("loop.py", "_turn.py")
LIMIT = 60


def _functions(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        (node.name, (node.end_lineno or node.lineno) - node.lineno + 1)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]


@pytest.mark.parametrize("module", CORE)
def test_every_function_of_the_core_path_is_short(module: str) -> None:
    functions = _functions(SRC / module)
    assert functions
    long = [f"{name} ({lines} lines)" for name, lines in functions if lines > LIMIT]
    assert not long, f"{module}: split into phases or helpers: {', '.join(long)}"


def test_the_turn_does_not_import_the_session() -> None:
    tree = ast.parse((SRC / "_turn.py").read_text(encoding="utf-8"))
    imported = {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module is not None
    }
    assert "loop" not in imported and "tooldeck.loop" not in imported
