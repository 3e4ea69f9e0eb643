"""Running a turn from synchronous code (scripts, a REPL) on one event loop per thread.

``block_on`` (behind :func:`tooldeck.run_sync` and ``Session.run_sync``) does not start a
fresh ``asyncio.run`` loop per call: the SDK clients keep their connection pools on the loop
that opened them, so every synchronous call of a thread runs on that thread's one loop (an
:class:`asyncio.Runner` kept open until the interpreter exits), and a model is reused across
calls with its connections. Inside a running loop (Jupyter, an async program) it refuses
with one line saying to ``await`` instead: blocking that loop would deadlock it.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["block_on"]

T = TypeVar("T")

_local = threading.local()
_runners: list[asyncio.Runner] = []
_lock = threading.Lock()


def _close_all() -> None:
    with _lock:
        runners = list(_runners)
        _runners.clear()
    for runner in runners:
        with contextlib.suppress(RuntimeError):  # a loop still running in another thread
            runner.close()


atexit.register(_close_all)


def _runner() -> asyncio.Runner:
    runner: asyncio.Runner | None = getattr(_local, "runner", None)
    if runner is None:
        runner = asyncio.Runner()
        _local.runner = runner
        with _lock:
            _runners.append(runner)
    return runner


def block_on(coro: Coroutine[Any, Any, T], *, instead: str) -> T:
    """Run ``coro`` to the end on this thread's loop; ``instead`` is what to await."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        coro.close()  # never started: no "was never awaited" warning
        raise RuntimeError(
            f"run_sync() cannot be used inside a running event loop (Jupyter, async code): "
            f"use `{instead}` instead"
        )
    return _runner().run(coro)
