"""Noticing a run whose task turns wait in the queue with no worker taking them.

A client that queues a run's turns for ``tooldeck worker`` processes (``tooldeck
workflows run --workers``) cannot tell from the queue alone whether anyone serves it.
:class:`QueueWatch` reads the run's task states: while no task is ``running`` and none
changed state for ``after`` seconds (measured on the client's own clock, so the
workers' clocks do not matter), :meth:`QueueWatch.check` returns a :class:`QueueStall`
saying for how long, and how many workers the store's ``workers`` table holds ``alive``.
The caller decides: keep waiting (the run stays queued and starts when a worker does)
or cancel it (:meth:`~tooldeck.workflows.WorkflowEngine.cancel`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from .store import StoreError, WorkflowStore
from .store.base import now
from .store.workers import WorkerLeases

__all__ = ["QueueStall", "QueueWatch"]


@dataclass(frozen=True, slots=True)
class QueueStall:
    """No task of the run was taken for ``seconds``; ``alive``: workers marked alive."""

    workflow_id: str
    seconds: float
    alive: int | None
    heartbeat_age: float | None = None  # seconds since the freshest alive worker's heartbeat

    @property
    def message(self) -> str:
        workers = ""
        if self.alive is not None:
            workers = f" (workers marked alive: {self.alive}"
            if self.alive and self.heartbeat_age is not None:
                workers += f", the last heartbeat {self.heartbeat_age:.0f}s ago"
            workers += ")"
        return f"no worker has taken a task of {self.workflow_id} for {self.seconds:.0f}s{workers}"


class QueueWatch:
    """Watches one run (see the module docstring); call :meth:`check` every so often."""

    def __init__(
        self,
        store: WorkflowStore,
        workflow_id: str,
        *,
        after: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.store = store
        self.workflow_id = workflow_id
        self.after = after
        self.clock = clock
        self._states: tuple[str, ...] | None = None
        self._since = clock()

    async def check(self) -> QueueStall | None:
        """A stall once nothing was taken for ``after`` seconds; ``None`` otherwise."""
        progress = await self.store.progress(self.workflow_id)
        now = self.clock()
        if progress is None or progress.terminal:
            return None
        states = tuple(t.state for t in progress.tasks)
        if states != self._states or "running" in states:
            self._states, self._since = states, now
            return None
        waited = now - self._since
        if waited < self.after:
            return None
        return QueueStall(self.workflow_id, waited, *await self._alive())

    def reset(self) -> None:
        """Count again from now (after a stall was reported)."""
        self._since = self.clock()

    async def _alive(self) -> tuple[int | None, float | None]:
        """Workers marked alive, and how old the freshest heartbeat is (the workers'
        clocks against this one's: a killed worker stays marked until another notices)."""
        try:
            found = [w for w in await WorkerLeases(self.store).list() if w.state == "alive"]
        except StoreError:
            return None, None
        if not found:
            return 0, None
        latest = max(w.heartbeat_at for w in found)
        return len(found), max(0.0, (now() - latest).total_seconds())
