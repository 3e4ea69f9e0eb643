"""Shared fixtures of the workflow tests (imported by the test_workflows_* modules).

``make_store`` is parametrised over both stores: ``sqlite`` (a real file per test) and
``postgres`` (the server at ``TOOLDECK_TEST_PG_DSN``, default
``postgresql://postgres@127.0.0.1:5432/test``, in a fresh schema per test, all of them
under one prefix per test run and dropped at the end). When ``CI`` is set, a server that
does not answer fails the PostgreSQL tests; elsewhere they are skipped with the reason.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from tooldeck.workflows.store import PostgresStore, SQLiteStore, WorkflowStore

PG_DSN = os.environ.get("TOOLDECK_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
STORES = ["sqlite", "postgres"]
_counter = itertools.count(1)

StoreFactory = Callable[[], WorkflowStore]


def _connect() -> psycopg.Connection[tuple[object, ...]]:
    try:
        return psycopg.connect(PG_DSN, connect_timeout=3, autocommit=True)
    except psycopg.OperationalError as exc:
        if os.environ.get("CI"):
            pytest.fail(
                f"PostgreSQL at {PG_DSN} does not answer, and CI is set: the PostgreSQL "
                f"workflow tests must run in CI ({exc})",
                pytrace=False,
            )
        pytest.skip(
            f"no PostgreSQL server answers at {PG_DSN} ({str(exc).strip()}); start one or "
            "set TOOLDECK_TEST_PG_DSN to run the PostgreSQL workflow tests"
        )


@pytest.fixture(scope="session")
def pg_run_prefix() -> Iterator[str]:
    """A schema-name prefix for this test run; every schema under it is dropped at the end."""
    conn = _connect()
    prefix = f"tooldeck_test_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    try:
        yield prefix
    finally:
        rows = conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (prefix + "%",)
        ).fetchall()
        for (name,) in rows:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))
        conn.close()


@pytest.fixture
def pg_schema(pg_run_prefix: str) -> str:
    """A fresh schema name for one test."""
    return f"{pg_run_prefix}_{next(_counter)}"


@pytest.fixture(params=STORES)
def store_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


@pytest.fixture
def make_store(store_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> StoreFactory:
    """A factory of (unopened) stores on one fresh database: each call is a new connection."""
    if store_kind == "sqlite":
        path = tmp_path / "workflows.sqlite3"
        return lambda: SQLiteStore(path)
    schema: str = request.getfixturevalue("pg_schema")
    return lambda: PostgresStore(PG_DSN, schema=schema, pool_size=8)


def raw_insert_result(store: WorkflowStore, task_id: str) -> None:
    """Insert a result row directly, bypassing the store's logic (must violate the key)."""
    if isinstance(store, SQLiteStore):
        import sqlite3

        conn = sqlite3.connect(store.path)
        try:
            with conn:
                conn.execute(
                    "INSERT INTO results (task_id, value, submission_key, stored_at) "
                    "VALUES (?, '1', 'raw', '2026-01-01')",
                    (task_id,),
                )
        finally:
            conn.close()
        return
    assert isinstance(store, PostgresStore)
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(store.schema)))
        conn.execute(
            "INSERT INTO results (task_id, value, submission_key, stored_at) "
            "VALUES (%s, '1'::jsonb, 'raw', now())",
            (task_id,),
        )


def raw_query(store: WorkflowStore, query: str) -> list[tuple[object, ...]]:
    """Run one read query directly on the store's database."""
    if isinstance(store, SQLiteStore):
        import sqlite3

        conn = sqlite3.connect(store.path)
        try:
            return list(conn.execute(query).fetchall())
        finally:
            conn.close()
    assert isinstance(store, PostgresStore)
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(store.schema)))
        return list(conn.execute(query.encode()).fetchall())


def raw_execute(store: WorkflowStore, *statements: str) -> None:
    """Run write statements directly on the store's database, bypassing its logic (one
    transaction; PostgreSQL's ``%s`` placeholders are not used: give literal SQL)."""
    if isinstance(store, SQLiteStore):
        import sqlite3

        conn = sqlite3.connect(store.path)
        try:
            with conn:
                for statement in statements:
                    conn.execute(statement)
        finally:
            conn.close()
        return
    assert isinstance(store, PostgresStore)
    with psycopg.connect(PG_DSN) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(store.schema)))
        for statement in statements:
            conn.execute(statement.encode())


def is_ready(log: str, worker_id: str) -> bool:
    """The worker's ``ready`` line is in ``log`` (text or JSON)."""
    return f" {worker_id} ready: " in log or (
        '"event": "ready"' in log and f'"worker": "{worker_id}"' in log
    )
