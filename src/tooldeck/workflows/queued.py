"""Noticing a run whose task turns wait in the queue with no worker taking them.

A client that queues a run's turns for ``tooldeck worker`` processes (``tooldeck
workflows run --workers``) cannot tell from the queue alone whether anyone serves it.
:class:`QueueWatch` reads the run's task states: while no task is ``running`` and none
changed state for ``after`` seconds (measured on the client's own clock),
:meth:`QueueWatch.check` returns a :class:`QueueStall` saying for how long, how many
workers are alive (their heartbeat renewed within their lease) and which ones are still
marked alive with a stale heartbeat (a worker killed without a word stays marked until a
live worker takes it over).
The caller decides: keep waiting (the run stays queued and starts when a worker does)
or cancel it (:meth:`~tooldeck.workflows.WorkflowEngine.cancel`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from .store import StoreError, WorkflowStore
from .store.protocol import now
from .store.workers import WorkerLeases


@dataclass(frozen=True, slots=True)
class QueueStall:
    """No task of the run was taken for ``seconds``.

    ``alive``: workers alive (marked ``alive`` and renewed within their lease), ``None``
    when the store has no ``workers`` table to ask; ``stale``: ``(worker id, seconds since
    its heartbeat)`` of workers still marked ``alive`` whose lease ran out (killed, or
    unable to reach the database: a live worker takes them over soon, if there is one).
    """

    workflow_id: str
    seconds: float
    alive: int | None
    heartbeat_age: float | None = None  # seconds since the freshest live worker's heartbeat
    stale: tuple[tuple[str, float], ...] = ()

    @property
    def message(self) -> str:
        workers = ""
        if self.alive is not None:
            workers = f" (workers alive: {self.alive}"
            if self.alive and self.heartbeat_age is not None:
                workers += f", the last heartbeat {self.heartbeat_age:.0f} s ago"
            if self.stale:
                workers += f"; {_stale_words(self.stale)}"
            workers += ")"
        return f"no worker has taken a task of {self.workflow_id} for {self.seconds:.0f}s{workers}"


def _stale_words(stale: tuple[tuple[str, float], ...]) -> str:
    """``1 worker's heartbeat is 12 s old (w1)``; ``3 workers' heartbeats are 12-40 s old
    (w1, w2, w3)``; at most 3 ids named."""
    ages = sorted(age for _, age in stale)
    names = ", ".join(sorted(w for w, _ in stale)[:3]) + (", ..." if len(stale) > 3 else "")
    if len(stale) == 1:
        return f"1 worker's heartbeat is {ages[0]:.0f} s old ({names})"
    low, high = f"{ages[0]:.0f}", f"{ages[-1]:.0f}"
    span = low if low == high else f"{low}-{high}"
    return f"{len(stale)} workers' heartbeats are {span} s old ({names})"


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

    async def _alive(self) -> tuple[int | None, float | None, tuple[tuple[str, float], ...]]:
        """Live workers, the age of the freshest heartbeat, and the stale ones (the
        workers' clocks against this one's: they must agree to well within the lease)."""
        try:
            marked = [w for w in await WorkerLeases(self.store).list() if w.state == "alive"]
        except StoreError:
            return None, None, ()
        at = now()
        fresh = [w for w in marked if w.fresh(at)]
        stale = tuple((w.id, w.heartbeat_age(at)) for w in marked if not w.fresh(at))
        latest = min((w.heartbeat_age(at) for w in fresh), default=None)
        return len(fresh), latest, stale
