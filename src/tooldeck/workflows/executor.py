"""Executors: where task turns run. :class:`TaskExecutor` is the seam; asyncio is the default.

The engine never runs a task turn itself: it hands task ids to an executor, which calls
the engine's task function (``run(task_id, signal)``) when it has room. Everything a task
needs is in the store, so a task can run anywhere the store and a model factory are:

- :class:`AsyncioExecutor` (here) runs them in this process, at most ``max_concurrency``
  at a time, and stops them through their abort signals;
- a durable executor (for instance DBOS queues in PostgreSQL) would register the task
  function once as a durable step in :meth:`TaskExecutor.start`, enqueue a task id in
  :meth:`~TaskExecutor.submit` (queue concurrency = the limit), and cancel its queued
  work in :meth:`~TaskExecutor.cancel`. A task already running in another process sees
  its cancellation at its next model step, because task turns check their state in the
  store before each step (see ``WorkflowEngine.run_task``). Claiming a task is a
  conditional update in the store, so a task delivered twice runs once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol, runtime_checkable

from ..context import AbortSignal

__all__ = ["TaskFn"]

_log = logging.getLogger("tooldeck.workflows")

TaskFn = Callable[[str, AbortSignal], Awaitable[object]]
"""Runs one task turn to its end: ``await run(task_id, signal)``."""


@runtime_checkable
class TaskExecutor(Protocol):
    """Runs task turns for an engine."""

    def start(self, run: TaskFn) -> None:
        """Bind the task function; called once by the engine before any submit."""

    async def submit(self, workflow_id: str, task_id: str) -> None:
        """Schedule one task turn (it may start later, when there is room)."""

    async def cancel(self, workflow_id: str, reason: str) -> None:
        """Stop the workflow's running task turns (abort signal) and drop its queued ones."""

    async def join(self, workflow_id: str | None = None) -> None:
        """Wait until the workflow's (or every) scheduled task turn has finished."""

    async def close(self) -> None:
        """Stop everything and release resources."""


class AsyncioExecutor:
    """Task turns as asyncio tasks in this process, at most ``max_concurrency`` at a time.

    ``cancel`` fires the abort signals of the workflow's task turns; a turn that has not
    returned after ``grace`` seconds is cancelled outright.
    """

    def __init__(self, max_concurrency: int = 4, *, grace: float = 5.0):
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        self.max_concurrency = max_concurrency
        self.grace = grace
        self._run: TaskFn | None = None
        self._slots: asyncio.Semaphore | None = None
        self._jobs: dict[str, dict[str, tuple[asyncio.Task[None], AbortSignal]]] = {}
        self.running = 0
        self.peak = 0  # the most task turns that ran at once (for tests and reports)

    def start(self, run: TaskFn) -> None:
        self._run = run

    async def submit(self, workflow_id: str, task_id: str) -> None:
        if self._run is None:
            raise RuntimeError("the executor has no task function: call start() first")
        jobs = self._jobs.setdefault(workflow_id, {})
        if task_id in jobs:
            return  # already scheduled here
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_concurrency)
        signal = AbortSignal()
        job = asyncio.create_task(self._guarded(task_id, signal), name=f"tooldeck-task:{task_id}")
        jobs[task_id] = (job, signal)

        def forget(_: asyncio.Task[None]) -> None:
            current = self._jobs.get(workflow_id, {})
            if current.get(task_id, (None,))[0] is job:
                del current[task_id]
            if not current:
                self._jobs.pop(workflow_id, None)

        job.add_done_callback(forget)

    async def _guarded(self, task_id: str, signal: AbortSignal) -> None:
        assert self._slots is not None and self._run is not None
        async with self._slots:
            if signal.aborted:
                return
            self.running += 1
            self.peak = max(self.peak, self.running)
            try:
                await self._run(task_id, signal)
            except asyncio.CancelledError:
                raise
            except Exception:
                _log.exception("task %s failed in the executor", task_id)
            finally:
                self.running -= 1

    async def cancel(self, workflow_id: str, reason: str) -> None:
        jobs = list(self._jobs.get(workflow_id, {}).values())
        for _, signal in jobs:
            signal.abort(reason)
        pending = [job for job, _ in jobs if not job.done()]
        if not pending:
            return
        _, late = await asyncio.wait(pending, timeout=self.grace)
        for job in late:
            job.cancel()
        if late:
            await asyncio.wait(late, timeout=self.grace)

    async def join(self, workflow_id: str | None = None) -> None:
        while True:
            if workflow_id is None:
                jobs = [j for group in self._jobs.values() for j, _ in group.values()]
            else:
                jobs = [j for j, _ in self._jobs.get(workflow_id, {}).values()]
            if not jobs:
                return
            await asyncio.wait(jobs)

    async def close(self) -> None:
        for workflow_id in list(self._jobs):
            await self.cancel(workflow_id, "the executor was closed")
        await self.join()
