"""The PostgreSQL workflow store: psycopg 3, async, its own schema, a small connection pool.

All tables live in one PostgreSQL schema (``tooldeck`` unless configured), created on
open, so a store never collides with other data in the database; tests use a fresh
schema per run. Results, inputs, schemas and rejection reasons are ``jsonb``; times are
``timestamptz``. Each operation is one transaction on a pooled connection (read
committed): the conditional updates and the unique constraints decide every race.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from .base import Json, Op, Rollback, Rows, StoreError, WorkflowStore, dumps
from .migrations import op_migrate, op_version

__all__ = ["DEFAULT_SCHEMA", "PostgresStore", "redact_dsn"]

T = TypeVar("T")
DEFAULT_SCHEMA = "tooldeck"
_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def redact_dsn(dsn: str) -> str:
    """``dsn`` without its password, for messages."""
    dsn = re.sub(r"(://[^:/@]*):[^@]*@", r"\1:***@", dsn)
    return re.sub(r"(password\s*=\s*)\S+", r"\1***", dsn)


def _param(value: Any) -> Any:
    if isinstance(value, Json):
        return Jsonb(value.value, dumps=dumps)
    return value


class PostgresStore(WorkflowStore):
    """A :class:`WorkflowStore` in PostgreSQL, in the schema ``schema``.

    ``dsn`` is a libpq connection string or URL; ``pool_size`` connections at most are
    opened (lazily). ``connect_timeout`` bounds each connection attempt, in seconds.
    """

    kind = "postgres"

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        pool_size: int = 8,
        connect_timeout: float = 5.0,
    ):
        if not _SCHEMA_NAME.fullmatch(schema):
            raise StoreError(
                f"schema name {schema!r} must be lower-case letters, digits and '_' "
                "(starting with a letter or '_')"
            )
        if pool_size < 1:
            raise StoreError("pool_size must be at least 1")
        self.dsn = dsn
        self.schema = schema
        self.pool_size = pool_size
        self.connect_timeout = connect_timeout
        self._idle: asyncio.Queue[psycopg.AsyncConnection[Any]] | None = None
        self._slots: asyncio.Semaphore | None = None
        self._all: set[psycopg.AsyncConnection[Any]] = set()
        self._opened = False

    @property
    def location(self) -> str:
        return f"{redact_dsn(self.dsn)} (schema {self.schema})"

    async def _new_connection(self) -> psycopg.AsyncConnection[Any]:
        try:
            conn = await psycopg.AsyncConnection.connect(
                self.dsn, autocommit=True, connect_timeout=max(1, int(self.connect_timeout))
            )
        except psycopg.Error as exc:
            raise StoreError(
                f"cannot connect to PostgreSQL at {redact_dsn(self.dsn)}: {exc}"
            ) from exc
        await conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))
        self._all.add(conn)
        return conn

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        if self._idle is None or self._slots is None:
            raise StoreError("the store is not open: use `async with store:` or `await open()`")
        idle, slots = self._idle, self._slots
        async with slots:
            conn = idle.get_nowait() if not idle.empty() else None
            if conn is None or conn.closed:
                conn = await self._new_connection()
            healthy = True
            try:
                yield conn
            except Exception:
                healthy = not conn.closed and not conn.broken
                raise
            except BaseException:  # cancelled mid-query: the connection's state is unknown
                healthy = False
                raise
            finally:
                if healthy and not conn.closed:
                    idle.put_nowait(conn)
                else:
                    self._all.discard(conn)
                    if not conn.closed:
                        await conn.close()

    async def open(self) -> None:
        if self._opened:
            return
        self._idle = asyncio.Queue()
        self._slots = asyncio.Semaphore(self.pool_size)
        try:
            conn = await psycopg.AsyncConnection.connect(
                self.dsn, autocommit=True, connect_timeout=max(1, int(self.connect_timeout))
            )
        except psycopg.Error as exc:
            self._idle = self._slots = None
            raise StoreError(
                f"cannot connect to PostgreSQL at {redact_dsn(self.dsn)}: {exc}"
            ) from exc
        try:
            await conn.execute(
                sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.schema))
            )
        except psycopg.errors.UniqueViolation:
            pass  # created at the same moment by another process
        finally:
            await conn.close()
        self._opened = True
        try:
            await self._run(op_migrate("postgres", lock_key=f"tooldeck-workflows:{self.schema}"))
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        self._opened = False
        connections, self._all = list(self._all), set()
        self._idle = self._slots = None
        for conn in connections:
            if not conn.closed:
                await conn.close()

    async def schema_version(self) -> int:
        return await self._run(op_version(), write=False)

    async def _run(self, op: Op[T], *, write: bool = True) -> T:
        if not self._opened:
            op.close()
            raise StoreError("the store is not open: use `async with store:` or `await open()`")
        async with self._connection() as conn:
            try:
                async with conn.transaction():
                    return await _drive(conn, op)
            except Rollback as rollback:
                rolled: T = rollback.value
                return rolled
            except BaseException:
                op.close()
                raise


async def _drive(conn: psycopg.AsyncConnection[Any], op: Op[T]) -> T:
    try:
        query = next(op)
    except StopIteration as stop:
        first: T = stop.value
        return first
    while True:
        cursor = await conn.execute(
            query.sql.replace("?", "%s"),
            tuple(_param(p) for p in query.params),
        )
        rows = await cursor.fetchall() if cursor.description else []
        try:
            query = op.send(Rows(list(rows), cursor.rowcount))
        except StopIteration as stop:
            value: T = stop.value
            return value
