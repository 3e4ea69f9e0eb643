"""No function of the core path is over 100 lines (the project's architecture rule).

The core path is the top level of ``src/tooldeck`` (the dispatcher, the turn, the tool
contract, the schemas and arguments) and ``sources/``; ``test_loop_shape`` holds the
turn's own modules to a tighter limit.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "tooldeck"
LIMIT = 100


def test_no_function_of_the_core_path_is_over_100_lines() -> None:
    files = sorted([*SRC.glob("*.py"), *(SRC / "sources").glob("*.py")])
    assert any(f.name == "dispatch.py" for f in files)
    long = [
        f"{path.relative_to(SRC)}:{node.lineno} {node.name} ({size} lines)"
        for path in files
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (size := (node.end_lineno or node.lineno) - node.lineno + 1) > LIMIT
    ]
    assert long == []
