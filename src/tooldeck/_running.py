"""How a running call waits: driving a tool's coroutine on, and its timeout and abort.

The dispatcher runs a tool's first step itself (``CallRunner._run`` in ``tooldeck._call``);
a tool that then waits is driven on by :func:`resume` in the same task, under a
:class:`Watch` that turns the call's deadline and abort signal into a cancellation of
that task, and takes the cancellation back afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import types
from collections.abc import Coroutine, Generator
from typing import Any

from .context import AbortSignal
from .result import ToolResult

__all__ = ["Watch", "resume"]


@types.coroutine
def resume(coro: Coroutine[Any, Any, Any], waiting_for: Any) -> Generator[Any, Any, Any]:
    """Go on driving ``coro`` (whose first step has run) in the awaiting task.

    What ``yield from coro`` does, minus its first ``send``: each value the coroutine
    yields (the future it waits for) goes to the task, and each wake-up or exception
    the task sends (its cancellation included) goes back into the coroutine.
    """
    while True:
        try:
            sent = yield waiting_for
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:
            try:
                waiting_for = coro.throw(exc)
            except StopIteration as finished:
                return finished.value
        else:
            try:
                waiting_for = coro.send(sent)
            except StopIteration as finished:
                return finished.value


class Watch:
    """The timeout and abort of one running call (see ``CallRunner._run`` in ``tooldeck._call``).

    When the call's signal fires, the tool first sees it cooperatively (``ctx.signal``
    is set, ``await signal.wait()`` returns); the task is cancelled one loop iteration
    later, so a tool that stops by itself gets to.
    """

    __slots__ = ("cancelled", "done", "fired", "reason", "signal", "task")

    def __init__(self, task: asyncio.Task[Any] | None, signal: AbortSignal) -> None:
        self.task = task
        self.signal = signal
        self.fired = False  # the call was told to stop
        self.cancelled = False  # ...and this watch cancelled its task
        self.done = False  # the tool's await has ended
        self.reason = ""

    def expire(self, timeout: float) -> None:
        self.signal.abort(f"timed out after {timeout:g}s")  # calls self.fire

    def fire(self, reason: str) -> None:
        if self.done or self.fired:
            return
        self.fired = True
        self.reason = reason
        if self.task is not None:
            self.task.get_loop().call_soon(self._cancel)

    def _cancel(self) -> None:
        if not self.done and self.task is not None:
            self.cancelled = True
            self.task.cancel()

    def taken_back(self) -> bool:
        """After a ``CancelledError``: was it this watch's, and nobody else's?"""
        if not self.cancelled or self.task is None:
            return False
        self.cancelled = False
        return self.task.uncancel() == 0

    async def settle(self) -> None:
        """The tool returned after it was told to stop: absorb this watch's cancel."""
        if not self.cancelled or self.task is None:
            return
        self.cancelled = False
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(0)  # a cancel still pending would arrive here
        if self.task.uncancel() > 0:
            raise asyncio.CancelledError  # someone else cancelled this task as well

    def stopped(self, name: str) -> ToolResult:
        why = self.reason or "stopped"
        return ToolResult.error(f"{name} was stopped: {why}.", details={"stopped": why})
