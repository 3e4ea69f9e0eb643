"""Worker leases: which worker processes are alive, and taking over the ones that are not.

A worker (``tooldeck worker``) registers itself, then renews its lease by writing
``heartbeat_at`` every few seconds. A worker whose heartbeat is older than the lease is
*lost*: the first live worker to notice marks it so (a conditional update, so exactly one
worker takes over each lost one) and recovers its durable work. A lost worker that comes
back (it was only paused) finds itself marked and stops. Times come from the workers'
clocks, so their clocks must agree to well within the lease (NTP).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from .base import WorkflowStore
from .protocol import Op, Q, as_datetime, now

__all__ = ["DEFAULT_LEASE", "WorkerLeases", "WorkerRecord"]

WorkerState = Literal["alive", "stopped", "lost"]
DEFAULT_LEASE = 15.0  # ``tooldeck worker --lease``'s default


@dataclass(frozen=True, slots=True)
class WorkerRecord:
    id: str
    host: str
    pid: int
    state: WorkerState
    started_at: datetime
    heartbeat_at: datetime
    ended_at: datetime | None
    note: str | None
    lease: float | None = None  # seconds; None for a worker of an older release

    def heartbeat_age(self, at: datetime | None = None) -> float:
        """Seconds since this worker's last heartbeat (its clock against ``at``'s)."""
        return max(0.0, ((at or now()) - self.heartbeat_at).total_seconds())

    def fresh(self, at: datetime | None = None) -> bool:
        """``alive`` and renewed within its lease: a worker killed without a word stays
        marked ``alive`` until another worker notices, but its heartbeat grows old."""
        lease = self.lease or DEFAULT_LEASE
        return self.state == "alive" and self.heartbeat_age(at) <= lease


_COLUMNS = "id, host, pid, state, started_at, heartbeat_at, ended_at, note, lease"


def _worker(row: tuple[object, ...]) -> WorkerRecord:
    return WorkerRecord(
        id=str(row[0]),
        host=str(row[1]),
        pid=int(str(row[2])),
        state=row[3],  # type: ignore[arg-type]
        started_at=as_datetime(row[4]) or now(),
        heartbeat_at=as_datetime(row[5]) or now(),
        ended_at=as_datetime(row[6]),
        note=str(row[7]) if row[7] is not None else None,
        lease=float(str(row[8])) if row[8] is not None else None,
    )


def op_register(worker_id: str, host: str, pid: int, lease: float | None) -> Op[None]:
    at = now()
    yield Q(
        "INSERT INTO workers (id, host, pid, state, started_at, heartbeat_at, lease) "
        "VALUES (?, ?, ?, 'alive', ?, ?, ?) ON CONFLICT (id) DO UPDATE SET "
        "host = excluded.host, pid = excluded.pid, state = 'alive', "
        "started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at, "
        "ended_at = NULL, note = NULL, lease = excluded.lease",
        (worker_id, host, pid, at, at, lease),
    )


def op_heartbeat(worker_id: str) -> Op[bool]:
    """Renew the lease; ``False`` when the worker is no longer ``alive`` (taken over)."""
    renewed = yield Q(
        "UPDATE workers SET heartbeat_at = ? WHERE id = ? AND state = 'alive' RETURNING id",
        (now(), worker_id),
    )
    return bool(renewed.rows)


def op_take_over_lost(worker_id: str, lease: float, at: datetime | None = None) -> Op[list[str]]:
    """Mark every worker whose lease ran out as ``lost``; returns the ones this call marked
    (at ``at``: a retry of the same call also returns the ones its lost commit marked)."""
    at = at or now()
    expired = at - timedelta(seconds=lease)
    note = f"no heartbeat for {lease:g}s; taken over by {worker_id}"
    yield Q(
        "UPDATE workers SET state = 'lost', ended_at = ?, note = ? "
        "WHERE state = 'alive' AND heartbeat_at < ? AND id <> ?",
        (at, note, expired, worker_id),
    )
    marked = yield Q(  # now, or by this call's earlier try
        "SELECT id FROM workers WHERE state = 'lost' AND ended_at = ? AND note = ?", (at, note)
    )
    return sorted(str(r[0]) for r in marked.rows)


def op_stop(worker_id: str, note: str | None) -> Op[None]:
    yield Q(
        "UPDATE workers SET state = 'stopped', ended_at = ?, note = ? "
        "WHERE id = ? AND state = 'alive'",
        (now(), note, worker_id),
    )


def op_list(limit: int) -> Op[list[WorkerRecord]]:
    rows = yield Q(f"SELECT {_COLUMNS} FROM workers ORDER BY started_at DESC LIMIT ?", (limit,))
    return [_worker(tuple(r)) for r in rows.rows]


class WorkerLeases:
    """The ``workers`` table of a (PostgreSQL) workflow store: register, renew, take over."""

    def __init__(self, store: WorkflowStore):
        self.store = store

    async def register(
        self, worker_id: str, host: str, pid: int, lease: float | None = None
    ) -> None:
        await self.store._run(lambda: op_register(worker_id, host, pid, lease))

    async def heartbeat(self, worker_id: str) -> bool:
        return await self.store._run(lambda: op_heartbeat(worker_id))

    async def take_over_lost(self, worker_id: str, lease: float) -> list[str]:
        at = now()
        return await self.store._run(lambda: op_take_over_lost(worker_id, lease, at))

    async def stop(self, worker_id: str, note: str | None = None) -> None:
        await self.store._run(lambda: op_stop(worker_id, note))

    async def list(self, limit: int = 100) -> list[WorkerRecord]:
        return await self.store._run(lambda: op_list(limit), write=False)
