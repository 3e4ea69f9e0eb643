"""The worker threads sync tools run in.

A small pool of daemon threads sharing one queue: a call is handed to an idle thread (or
a new one, up to ``MAX_WORKERS``), and its outcome comes back to the event loop with
``call_soon_threadsafe``. Compared with ``asyncio.to_thread`` (a ``ThreadPoolExecutor``
plus ``wrap_future``) it does less per call, and its threads are daemons: a sync tool
that never returns (abandoned after its timeout) cannot keep the process from exiting,
which a ``ThreadPoolExecutor`` thread would (they are joined at exit).

Cancelling the awaiting task abandons the call: the thread runs on to the end, and its
outcome is dropped. Every ``BaseException`` from the function (``SystemExit`` included)
is delivered to the awaiting task; nothing escapes into the thread machinery.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections.abc import Callable
from queue import SimpleQueue
from typing import Any, TypeVar

__all__ = ["MAX_WORKERS", "run_in_thread"]

T = TypeVar("T")
MAX_WORKERS = 40  # as many as anyio's default thread limiter allows

_Work = tuple[
    asyncio.AbstractEventLoop,
    "asyncio.Future[Any]",
    contextvars.Context,
    Callable[..., Any],
    tuple[Any, ...],
]


class _Pool:
    def __init__(self, max_workers: int) -> None:
        self.max_workers = max_workers
        self._queue: SimpleQueue[_Work] = SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0  # threads waiting for work
        self._threads = 0
        self._backlog = 0  # queued calls no idle thread was counted for

    def submit(self, fn: Callable[..., T], args: tuple[Any, ...]) -> asyncio.Future[T]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        with self._lock:
            spawn = False
            if self._idle:
                self._idle -= 1
            elif self._threads < self.max_workers:
                self._threads += 1
                spawn = True
            else:
                self._backlog += 1
        self._queue.put((loop, future, contextvars.copy_context(), fn, args))
        if spawn:
            threading.Thread(target=self._work, name="tooldeck-tool", daemon=True).start()
        return future

    def _work(self) -> None:
        queue = self._queue
        while True:
            loop, future, context, fn, args = queue.get()
            result: Any = None
            error: BaseException | None = None
            if not future.cancelled():
                try:
                    result = context.run(fn, *args)
                except BaseException as exc:
                    error = exc
            with self._lock:
                if self._backlog:
                    self._backlog -= 1  # this thread takes a queued call next
                else:
                    self._idle += 1
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
                loop.call_soon_threadsafe(_deliver, future, result, error)
            del loop, future, context, fn, args, result, error


def _deliver(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


_POOL = _Pool(MAX_WORKERS)


async def run_in_thread(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in a worker thread, in a copy of the caller's context."""
    return await _POOL.submit(fn, args)
