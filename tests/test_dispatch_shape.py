"""The dispatcher's core path stays readable: no function past 100 lines, one module a concept.

``dispatch.py`` (the step), ``_call.py`` (one call run to its output), ``_asking.py``
(the policy and the approval batch) and ``telemetry/tracing.py`` (the tracing strategy)
are the path every tool call takes. Telemetry reaches it only as that strategy: the
dispatcher never swaps its own methods.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from test_telemetry_support import Recorded
from tooldeck import Dispatcher, Toolset, tool
from tooldeck._call import CallRunner
from tooldeck.telemetry.tracing import UNTRACED, Spans

SRC = Path(__file__).resolve().parent.parent / "src" / "tooldeck"
CORE = ("dispatch.py", "_call.py", "_asking.py", "telemetry/tracing.py", "_running.py")
LIMIT = 100

pytest_plugins = ["test_telemetry_support"]


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@pytest.mark.parametrize("module", CORE)
def test_no_function_of_the_dispatchers_core_path_is_long(module: str) -> None:
    tree = ast.parse((SRC / module).read_text(encoding="utf-8"))
    functions = [
        (node.name, (node.end_lineno or node.lineno) - node.lineno + 1)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]
    assert functions
    long = [f"{name} ({lines} lines)" for name, lines in functions if lines > LIMIT]
    assert not long, f"{module}: split into helpers: {', '.join(long)}"


def test_telemetry_on_is_a_strategy_not_a_swapped_method(otel: Recorded) -> None:
    dispatcher = Dispatcher(Toolset([add]))
    assert isinstance(dispatcher._tracing, Spans)
    assert dispatcher._run.__func__ is CallRunner._run  # type: ignore[attr-defined]
    assert "_run" not in vars(dispatcher) and "_approve" not in vars(dispatcher)


def test_telemetry_off_is_the_strategy_that_does_nothing() -> None:
    from tooldeck import telemetry

    telemetry.reset()
    dispatcher = Dispatcher(Toolset([add]))
    assert dispatcher._tracing is UNTRACED
    assert dispatcher._run.__func__ is CallRunner._run  # type: ignore[attr-defined]
