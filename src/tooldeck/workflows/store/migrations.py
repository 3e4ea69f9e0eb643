"""Numbered migrations, one list per database; the store applies the missing ones itself.

``schema_version`` holds one row per applied migration. Opening a store runs, in one
transaction (serialised: ``BEGIN IMMEDIATE`` in SQLite, an advisory lock in PostgreSQL),
every migration whose number is above the highest recorded one. A migration is never
edited once released: changes come as a new number.
"""

from __future__ import annotations

from collections.abc import Sequence

from .protocol import Op, Q, now

__all__ = ["MIGRATIONS", "latest_version", "op_migrate"]

_TASK_STATES = "'pending', 'running', 'submitted', 'failed', 'cancelled'"
_WORKFLOW_STATES = "'pending', 'running', 'succeeded', 'failed', 'cancelled'"


def _v1(json: str, ts: str, serial: str) -> list[str]:
    return [
        f"""CREATE TABLE workflows (
            id TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            inputs {json} NOT NULL,
            state TEXT NOT NULL CHECK (state IN ({_WORKFLOW_STATES})),
            error TEXT,
            created_at {ts} NOT NULL,
            updated_at {ts} NOT NULL,
            finished_at {ts}
        )""",
        "CREATE INDEX workflows_created ON workflows (created_at)",
        f"""CREATE TABLE tasks (
            id TEXT PRIMARY KEY,
            workflow_id TEXT NOT NULL REFERENCES workflows (id) ON DELETE CASCADE,
            name TEXT NOT NULL,
            position INTEGER NOT NULL,
            description TEXT NOT NULL DEFAULT '',
            instructions TEXT NOT NULL,
            input_names {json},
            depends_on {json} NOT NULL,
            result_schema {json} NOT NULL,
            state TEXT NOT NULL CHECK (state IN ({_TASK_STATES})),
            attempts INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
            max_attempts INTEGER NOT NULL CHECK (max_attempts >= 1),
            max_steps INTEGER NOT NULL CHECK (max_steps >= 1),
            session_id TEXT,
            error TEXT,
            created_at {ts} NOT NULL,
            updated_at {ts} NOT NULL,
            started_at {ts},
            finished_at {ts},
            UNIQUE (workflow_id, name)
        )""",
        f"""CREATE TABLE transitions (
            id {serial},
            workflow_id TEXT NOT NULL REFERENCES workflows (id) ON DELETE CASCADE,
            task_id TEXT REFERENCES tasks (id) ON DELETE CASCADE,
            from_state TEXT,
            to_state TEXT NOT NULL,
            reason TEXT,
            at {ts} NOT NULL
        )""",
        "CREATE INDEX transitions_workflow ON transitions (workflow_id, id)",
        f"""CREATE TABLE rejections (
            id {serial},
            task_id TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
            attempt INTEGER NOT NULL,
            submission_key TEXT,
            value {json},
            reasons {json} NOT NULL,
            source TEXT NOT NULL,
            at {ts} NOT NULL,
            UNIQUE (task_id, submission_key)
        )""",
        # One result per task, enforced here: the primary key is the task.
        f"""CREATE TABLE results (
            task_id TEXT PRIMARY KEY REFERENCES tasks (id) ON DELETE CASCADE,
            value {json} NOT NULL,
            submission_key TEXT NOT NULL,
            stored_at {ts} NOT NULL
        )""",
    ]


def _v2(ts: str) -> list[str]:
    """Workers that run task turns from a durable queue, and their leases."""
    return [
        f"""CREATE TABLE workers (
            id TEXT PRIMARY KEY,
            host TEXT NOT NULL,
            pid INTEGER NOT NULL,
            state TEXT NOT NULL CHECK (state IN ('alive', 'stopped', 'lost')),
            started_at {ts} NOT NULL,
            heartbeat_at {ts} NOT NULL,
            ended_at {ts},
            note TEXT
        )""",
    ]


_JOB_STATES = "'pending', 'running', 'succeeded', 'failed', 'cancelled', 'lost'"


def _v3(json: str, ts: str) -> list[str]:
    """Background jobs, schedules, and the one row per fired (schedule, slot)."""
    return [
        f"""CREATE TABLE jobs (
            id TEXT PRIMARY KEY,
            session_id TEXT NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('agent', 'workflow')),
            agent TEXT,
            task TEXT NOT NULL,
            spec {json} NOT NULL,
            state TEXT NOT NULL CHECK (state IN ({_JOB_STATES})),
            dispatch TEXT NOT NULL CHECK (dispatch IN ('embedded', 'dbos')),
            owner TEXT,
            heartbeat_at {ts},
            attempts INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
            max_attempts INTEGER NOT NULL CHECK (max_attempts >= 1),
            on_lost TEXT NOT NULL CHECK (on_lost IN ('resume', 'mark_lost')),
            cancel_requested INTEGER NOT NULL DEFAULT 0,
            progress TEXT,
            steps INTEGER NOT NULL DEFAULT 0,
            summary TEXT,
            result {json},
            result_ref TEXT,
            error TEXT,
            origin TEXT NOT NULL,
            created_at {ts} NOT NULL,
            updated_at {ts} NOT NULL,
            started_at {ts},
            finished_at {ts},
            notified_at {ts}
        )""",
        "CREATE INDEX jobs_session ON jobs (session_id, notified_at)",
        "CREATE INDEX jobs_state ON jobs (state, dispatch, created_at)",
        f"""CREATE TABLE schedules (
            id TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            session_id TEXT NOT NULL,
            action {json} NOT NULL,
            timing {json} NOT NULL,
            tz TEXT NOT NULL,
            missed TEXT NOT NULL CHECK (missed IN ('skip', 'once', 'catch_up')),
            catch_up_limit INTEGER NOT NULL CHECK (catch_up_limit >= 1),
            state TEXT NOT NULL CHECK (state IN ('active', 'cancelled', 'finished')),
            cursor_at {ts} NOT NULL,
            fired INTEGER NOT NULL DEFAULT 0,
            skipped INTEGER NOT NULL DEFAULT 0,
            created_by TEXT,
            created_at {ts} NOT NULL,
            updated_at {ts} NOT NULL
        )""",
        "CREATE INDEX schedules_state ON schedules (state)",
        # Exactly once per slot, enforced here: the primary key is (schedule, slot).
        f"""CREATE TABLE schedule_fires (
            schedule_id TEXT NOT NULL REFERENCES schedules (id) ON DELETE CASCADE,
            slot {ts} NOT NULL,
            how TEXT NOT NULL CHECK (how IN ('due', 'late', 'manual')),
            job_id TEXT NOT NULL,
            fired_by TEXT NOT NULL,
            fired_at {ts} NOT NULL,
            PRIMARY KEY (schedule_id, slot)
        )""",
    ]


def _v4(real: str) -> list[str]:
    """Each worker's lease, so that a client can tell a live worker from a dead one
    still marked ``alive`` (NULL for workers of releases before it: 15 s is assumed)."""
    return [f"ALTER TABLE workers ADD COLUMN lease {real}"]


def _v5(json: str) -> list[str]:
    """Whose a schedule is: the creating session's id, policy and tools
    (:func:`tooldeck.jobs.policy.record_creator`). NULL for schedules made before it:
    their runs are refused (they say why), never run under a default policy."""
    return [f"ALTER TABLE schedules ADD COLUMN creator {json}"]


def _v6(json: str, ts: str) -> list[str]:
    """The gateway's client sessions, shared by several ``tooldeck serve`` processes
    (:mod:`tooldeck.gateway.session_store`): one row per session key (an HTTP session id,
    or a principal of the stateless protocol), the gateway's shared secrets, the processes
    waiting for a client's answer (an elicitation), and the approvals asked of stateless
    clients (``input_required``) waiting for their retry."""
    return [
        f"""CREATE TABLE gateway_sessions (
            key TEXT PRIMARY KEY,
            id TEXT NOT NULL,
            owner {json},
            protocol TEXT,
            client {json},
            found {json} NOT NULL,
            grants {json} NOT NULL,
            revision INTEGER NOT NULL CHECK (revision >= 0),
            created_at {ts} NOT NULL,
            touched_at {ts} NOT NULL
        )""",
        "CREATE INDEX gateway_sessions_touched ON gateway_sessions (touched_at)",
        f"""CREATE TABLE gateway_secrets (
            name TEXT PRIMARY KEY,
            value TEXT NOT NULL,
            created_at {ts} NOT NULL
        )""",
        f"""CREATE TABLE gateway_waits (
            session_key TEXT NOT NULL,
            url TEXT NOT NULL,
            since {ts} NOT NULL,
            PRIMARY KEY (session_key, url)
        )""",
        f"""CREATE TABLE gateway_asks (
            id TEXT PRIMARY KEY,
            session_id TEXT NOT NULL,
            call_id TEXT NOT NULL,
            call TEXT NOT NULL,
            until {ts} NOT NULL,
            created_at {ts} NOT NULL
        )""",
    ]


def _v7(json: str, ts: str) -> list[str]:
    """Stored agent sessions (:mod:`tooldeck.sessions`): one row per session, with its
    lease and revision, and its transcript one item per row."""
    return [
        f"""CREATE TABLE agent_sessions (
            id TEXT PRIMARY KEY,
            revision INTEGER NOT NULL CHECK (revision >= 0),
            items INTEGER NOT NULL CHECK (items >= 0),
            usage {json} NOT NULL,
            pending {json},
            grants {json},
            preview TEXT NOT NULL DEFAULT '',
            lease_owner TEXT,
            lease_until {ts},
            created_at {ts} NOT NULL,
            updated_at {ts} NOT NULL
        )""",
        "CREATE INDEX agent_sessions_updated ON agent_sessions (updated_at)",
        f"""CREATE TABLE agent_session_items (
            session_id TEXT NOT NULL REFERENCES agent_sessions (id) ON DELETE CASCADE,
            position INTEGER NOT NULL CHECK (position >= 0),
            item {json} NOT NULL,
            PRIMARY KEY (session_id, position)
        )""",
    ]


MIGRATIONS: dict[str, Sequence[tuple[int, Sequence[str]]]] = {
    "sqlite": [
        (1, _v1("TEXT", "TEXT", "INTEGER PRIMARY KEY AUTOINCREMENT")),
        (2, _v2("TEXT")),
        (3, _v3("TEXT", "TEXT")),
        (4, _v4("REAL")),
        (5, _v5("TEXT")),
        (6, _v6("TEXT", "TEXT")),
        (7, _v7("TEXT", "TEXT")),
    ],
    "postgres": [
        (1, _v1("JSONB", "TIMESTAMPTZ", "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY")),
        (2, _v2("TIMESTAMPTZ")),
        (3, _v3("JSONB", "TIMESTAMPTZ")),
        (4, _v4("DOUBLE PRECISION")),
        (5, _v5("JSONB")),
        (6, _v6("JSONB", "TIMESTAMPTZ")),
        (7, _v7("JSONB", "TIMESTAMPTZ")),
    ],
}


def latest_version(dialect: str) -> int:
    return max(v for v, _ in MIGRATIONS[dialect])


def op_migrate(dialect: str, lock_key: str | None = None) -> Op[int]:
    """Apply every missing migration; returns the version the database is at."""
    ts = "TIMESTAMPTZ" if dialect == "postgres" else "TEXT"
    if lock_key is not None:  # PostgreSQL: one migrating connection at a time
        yield Q("SELECT pg_advisory_xact_lock(hashtext(?))", (lock_key,))
    yield Q(
        "CREATE TABLE IF NOT EXISTS schema_version ("
        f"version INTEGER PRIMARY KEY, applied_at {ts} NOT NULL)"
    )
    row = (yield Q("SELECT COALESCE(MAX(version), 0) FROM schema_version")).one()
    current = int(row[0]) if row else 0
    for version, statements in MIGRATIONS[dialect]:
        if version <= current:
            continue
        for statement in statements:
            yield Q(statement)
        yield Q("INSERT INTO schema_version (version, applied_at) VALUES (?, ?)", (version, now()))
        current = version
    return current


def op_version() -> Op[int]:
    row = (yield Q("SELECT COALESCE(MAX(version), 0) FROM schema_version")).one()
    return int(row[0]) if row else 0
