"""Where the gateway's client sessions live when several processes serve them.

A team runs several ``tooldeck serve --http`` processes behind one address and restarts
them; ``--sessions WHERE`` gives them one store (a PostgreSQL DSN, or a SQLite file for
processes on one machine), so a session survives a restart and a client whose requests
land on different processes sees one session. The store is tooldeck's workflow store
(:mod:`tooldeck.workflows.store`: the same drivers, migrations, and retries across a
dropped PostgreSQL connection), its tables ``gateway_sessions`` and
``gateway_secrets`` (migration 6).

One row per session key (``http:<Mcp-Session-Id>``, or ``principal:<key>`` for a
client of the stateless protocol): the gateway session's id (which names its stored
results, audit log and evidence record under ``--state``), who may use it (the OAuth
principal that opened it, or nobody in particular), the protocol version and the
client's ``initialize`` parameters (so another process can serve the HTTP session
without a handshake: :mod:`.adopt`), the tools found (listed order and least recently
used order) and the approve-always grants.

Two processes updating one session never lose an update: a process sends what *it*
changed (the tools used, in order; the grants added), never a copy of the whole
session, and :func:`op_merge` applies that to the row as it is now, under a row version
(``UPDATE ... WHERE revision = ?``, read again when another write came first).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ..workflows.store import PostgresStore, SQLiteStore, WorkflowStore
from ..workflows.store.protocol import Json, Op, Q, from_json, now
from .session import remember

__all__ = [
    "SessionRecord",
    "SessionTable",
    "op_create",
    "op_merge",
    "open_session_store",
]

_SCHEMA_VARIABLE = "TOOLDECK_WORKFLOWS_SCHEMA"
_COLUMNS = (
    "key, id, CAST(owner AS TEXT), protocol, CAST(client AS TEXT), CAST(found AS TEXT), "
    "CAST(grants AS TEXT), revision"
)
_MERGE_TRIES = 50  # a row another process keeps writing: read again, up to this often


def is_postgres(where: str) -> bool:
    """Whether ``--sessions WHERE`` names PostgreSQL (a URL or a libpq ``key=value``
    string) rather than a SQLite file."""
    return where.startswith(("postgresql://", "postgres://")) or (
        "=" in where and not Path(where).exists()
    )


def open_session_store(where: str, env: Mapping[str, str] | None = None) -> WorkflowStore:
    """The store ``--sessions WHERE`` names (not opened yet): PostgreSQL for a DSN (in
    the schema ``$TOOLDECK_WORKFLOWS_SCHEMA``, default ``tooldeck``), else a SQLite file."""
    environ = os.environ if env is None else env
    if is_postgres(where):
        schema = environ.get(_SCHEMA_VARIABLE) or "tooldeck"
        return PostgresStore(where, schema=schema, pool_size=4)
    return SQLiteStore(Path(where))


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """One shared session, as the store has it."""

    key: str
    id: str  # the gateway session's id
    owner: dict[str, Any] | None = None  # the OAuth principal that opened it
    protocol: str | None = None
    client: dict[str, Any] | None = None  # the initialize request's params
    loaded: list[str] = field(default_factory=list)
    used: list[str] = field(default_factory=list)
    grants: list[dict[str, Any]] = field(default_factory=list)
    revision: int = 0


def _record(r: Sequence[Any]) -> SessionRecord:
    found = from_json(r[5]) or {}
    return SessionRecord(
        key=str(r[0]),
        id=str(r[1]),
        owner=from_json(r[2]),
        protocol=r[3],
        client=from_json(r[4]),
        loaded=[str(n) for n in found.get("loaded", [])],
        used=[str(n) for n in found.get("used", [])],
        grants=list(from_json(r[6]) or []),
        revision=int(r[7]),
    )


def op_get(key: str, at: datetime | None = None) -> Op[SessionRecord | None]:
    """The session of ``key`` (marked used at ``at``), or ``None``."""
    rows = yield Q(
        f"UPDATE gateway_sessions SET touched_at = ? WHERE key = ? RETURNING {_COLUMNS}",
        (at or now(), key),
    )
    row = rows.one()
    return _record(row) if row else None


def op_exists(key: str) -> Op[bool]:
    """Whether the session of ``key`` is there (a read: not marked used)."""
    row = (yield Q("SELECT 1 FROM gateway_sessions WHERE key = ?", (key,))).one()
    return row is not None


def op_create(record: SessionRecord, at: datetime | None = None) -> Op[SessionRecord]:
    """Write ``record`` unless its key is there already; the row as it is then (the
    first writer's, when two processes make the session of one key at once)."""
    at = at or now()
    found = {"loaded": record.loaded, "used": record.used}
    yield Q(
        "INSERT INTO gateway_sessions (key, id, owner, protocol, client, found, grants, "
        "revision, created_at, touched_at) VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?) "
        "ON CONFLICT (key) DO NOTHING",
        (
            record.key,
            record.id,
            Json(record.owner) if record.owner is not None else None,
            record.protocol,
            Json(record.client) if record.client is not None else None,
            Json(found),
            Json(record.grants),
            at,
            at,
        ),
    )
    row = (yield Q(f"SELECT {_COLUMNS} FROM gateway_sessions WHERE key = ?", (record.key,))).one()
    assert row is not None  # inserted now, or there already
    return _record(row)


def op_merge(
    key: str,
    uses: Sequence[Sequence[str]],
    grants: Sequence[Mapping[str, Any]],
    limit: int,
    at: datetime | None = None,
) -> Op[SessionRecord | None]:
    """Apply one process's changes to the session of ``key`` as it is now: ``uses``
    (the names found or called, one list per use, in order: :func:`.session.remember`)
    and ``grants`` added (by id: one already there is not added twice). ``None`` when
    the session is gone. Run again after a lost commit, it changes nothing more than
    once would (the same uses made most recent again, the same grant ids)."""
    at = at or now()
    for _ in range(_MERGE_TRIES):
        row = (yield Q(f"SELECT {_COLUMNS} FROM gateway_sessions WHERE key = ?", (key,))).one()
        if row is None:
            return None
        record = _record(row)
        loaded, used = dict.fromkeys(record.loaded), dict.fromkeys(record.used)
        for names in uses:
            remember(loaded, used, list(names), limit)
        have = {g.get("id") for g in record.grants}
        merged = [*record.grants, *(dict(g) for g in grants if g.get("id") not in have)]
        found = {"loaded": list(loaded), "used": list(used)}
        written = yield Q(
            "UPDATE gateway_sessions SET found = ?, grants = ?, revision = revision + 1, "
            "touched_at = ? WHERE key = ? AND revision = ?",
            (Json(found), Json(merged), at, key, record.revision),
        )
        if written.rowcount == 1:
            return SessionRecord(
                key,
                record.id,
                record.owner,
                record.protocol,
                record.client,
                list(loaded),
                list(used),
                merged,
                record.revision + 1,
            )
    raise RuntimeError(f"the session {key} kept changing; its update was not written")


def op_delete(key: str) -> Op[bool]:
    rows = yield Q("DELETE FROM gateway_sessions WHERE key = ?", (key,))
    return rows.rowcount > 0


def op_expire(before: datetime, at: datetime) -> Op[list[str]]:
    """Forget the sessions unused since ``before``, and the asks expired at ``at`` (their
    process stopped before it could deny them); the gateway session ids forgotten."""
    yield Q("DELETE FROM gateway_asks WHERE until < ?", (at,))
    yield Q("DELETE FROM gateway_waits WHERE since < ?", (before,))  # a process gone
    rows = yield Q("DELETE FROM gateway_sessions WHERE touched_at < ? RETURNING id", (before,))
    return [str(r[0]) for r in rows.rows]


def op_secret(name: str, value: str, at: datetime | None = None) -> Op[str]:
    """The shared secret ``name``: ``value`` if this call made it, else the one there."""
    at = at or now()
    yield Q(
        "INSERT INTO gateway_secrets (name, value, created_at) VALUES (?, ?, ?) "
        "ON CONFLICT (name) DO NOTHING",
        (name, value, at),
    )
    row = (yield Q("SELECT value FROM gateway_secrets WHERE name = ?", (name,))).one()
    assert row is not None
    return str(row[0])


def op_put_ask(
    ask_id: str, session_id: str, call_id: str, call: str, until: datetime, at: datetime
) -> Op[None]:
    """An approval asked of a stateless client (:mod:`.input_required`), waiting for its
    retry, which any process may take (once: :func:`op_take_ask`)."""
    yield Q(
        "INSERT INTO gateway_asks (id, session_id, call_id, call, until, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
        (ask_id, session_id, call_id, call, until, at),
    )


def op_take_ask(ask_id: str, session_id: str, call: str, at: datetime) -> Op[str | None]:
    """Take the ask ``ask_id`` of the session ``session_id`` about ``call`` (not expired at
    ``at``): its call id, or ``None`` (no such ask, answered already, another session's,
    another call, or expired: those stay for the asking process to deny)."""
    rows = yield Q(
        "DELETE FROM gateway_asks WHERE id = ? AND session_id = ? AND call = ? AND until > ? "
        "RETURNING call_id",
        (ask_id, session_id, call, at),
    )
    row = rows.one()
    return str(row[0]) if row else None


def op_drop_ask(ask_id: str) -> Op[bool]:
    """Remove the ask (its time is up): ``False`` if another process took it already."""
    rows = yield Q("DELETE FROM gateway_asks WHERE id = ?", (ask_id,))
    return rows.rowcount > 0


def op_wait(key: str, url: str, at: datetime) -> Op[None]:
    """The process at ``url`` waits for an answer of the client of session ``key``."""
    yield Q(
        "INSERT INTO gateway_waits (session_key, url, since) VALUES (?, ?, ?) "
        "ON CONFLICT (session_key, url) DO NOTHING",
        (key, url, at),
    )


def op_unwait(key: str, url: str) -> Op[None]:
    yield Q("DELETE FROM gateway_waits WHERE session_key = ? AND url = ?", (key, url))


def op_waiting(key: str) -> Op[list[str]]:
    """The processes (their URLs) waiting for an answer of the client of session ``key``."""
    rows = yield Q("SELECT url FROM gateway_waits WHERE session_key = ?", (key,))
    return [str(r[0]) for r in rows.rows]


class SessionTable:
    """The gateway's sessions in an open ``store``."""

    def __init__(self, store: WorkflowStore) -> None:
        self.store = store

    async def get(self, key: str) -> SessionRecord | None:
        at = now()
        return await self.store._run(lambda: op_get(key, at))

    async def exists(self, key: str) -> bool:
        return await self.store._run(lambda: op_exists(key), write=False)

    async def create(self, record: SessionRecord) -> SessionRecord:
        at = now()
        return await self.store._run(lambda: op_create(record, at))

    async def merge(
        self,
        key: str,
        uses: Sequence[Sequence[str]],
        grants: Sequence[Mapping[str, Any]],
        limit: int,
    ) -> SessionRecord | None:
        at = now()
        return await self.store._run(lambda: op_merge(key, uses, grants, limit, at))

    async def delete(self, key: str) -> bool:
        return await self.store._run(lambda: op_delete(key))

    async def expire(self, idle: float) -> list[str]:
        at = now()
        before = at - timedelta(seconds=idle)
        return await self.store._run(lambda: op_expire(before, at - timedelta(minutes=1)))

    async def put_ask(
        self, ask_id: str, session_id: str, call_id: str, call: str, seconds: float
    ) -> None:
        at = now()
        until = at + timedelta(seconds=seconds)
        await self.store._run(lambda: op_put_ask(ask_id, session_id, call_id, call, until, at))

    async def take_ask(self, ask_id: str, session_id: str, call: str) -> str | None:
        at = now()
        return await self.store._run(lambda: op_take_ask(ask_id, session_id, call, at))

    async def drop_ask(self, ask_id: str) -> bool:
        return await self.store._run(lambda: op_drop_ask(ask_id))

    async def wait(self, key: str, url: str) -> None:
        at = now()
        await self.store._run(lambda: op_wait(key, url, at))

    async def unwait(self, key: str, url: str) -> None:
        await self.store._run(lambda: op_unwait(key, url))

    async def waiting(self, key: str) -> list[str]:
        return await self.store._run(lambda: op_waiting(key), write=False)

    async def secret(self, name: str) -> str:
        """The shared secret ``name`` (32 random bytes, hex), made by the first asker."""
        fresh = secrets.token_hex(32)
        at = now()
        return await self.store._run(lambda: op_secret(name, fresh, at))
