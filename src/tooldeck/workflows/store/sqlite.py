"""The SQLite workflow store (the default): one file, WAL, one worker thread per store.

Every operation runs as one transaction (``BEGIN IMMEDIATE`` for writes, so two writers
never deadlock on a lock upgrade) on the store's own connection, in the store's own
single worker thread: the event loop never blocks on the database, and operations of one
store never interleave on its connection. Several stores (or processes) may share one
file; SQLite's locking and the constraints keep them honest (``busy_timeout`` waits for
a writer to finish).
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from .base import WorkflowStore
from .migrations import op_migrate, op_version
from .protocol import Json, Op, OpFactory, Rollback, Rows, StoreError, check_factory, make_op

__all__ = ["DEFAULT_DB_NAME"]

T = TypeVar("T")
DEFAULT_DB_NAME = ".tooldeck/workflows.sqlite3"


def default_db_path(home: Path | None = None) -> Path:
    """``<home>/.tooldeck/workflows.sqlite3`` (``home`` defaults to the user's home)."""
    return (home or Path.home()) / DEFAULT_DB_NAME


def _param(value: Any) -> Any:
    if isinstance(value, Json):
        return value.dumps()
    if isinstance(value, datetime):
        return value.isoformat()
    return value


class SQLiteStore(WorkflowStore):
    """A :class:`WorkflowStore` in one SQLite file (created with its parent directory)."""

    kind = "sqlite"

    def __init__(self, path: str | Path, *, busy_timeout: float = 30.0):
        self.path = Path(path).expanduser()
        self.busy_timeout = busy_timeout
        self._conn: sqlite3.Connection | None = None
        self._thread: ThreadPoolExecutor | None = None

    @property
    def location(self) -> str:
        return str(self.path)

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(
            self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False
        )
        _set_wal(conn, self.busy_timeout)
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    async def open(self) -> None:
        if self._conn is not None:
            return
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tooldeck-sqlite")
        loop = asyncio.get_running_loop()
        try:
            self._conn = await loop.run_in_executor(self._thread, self._connect)
            await self._run(lambda: op_migrate("sqlite"))
        except (sqlite3.Error, OSError) as exc:
            await self.close()
            raise StoreError(f"cannot open the workflow database {self.path}: {exc}") from exc

    async def close(self) -> None:
        conn, thread = self._conn, self._thread
        self._conn = self._thread = None
        if thread is not None:
            if conn is not None:
                await asyncio.get_running_loop().run_in_executor(thread, conn.close)
            thread.shutdown(wait=True)

    async def schema_version(self) -> int:
        return await self._run(op_version, write=False)

    async def _run(
        self, op: OpFactory[T], *, write: bool = True, retry_for: float | None = None
    ) -> T:
        """See :meth:`WorkflowStore._run`: one file has no connection to drop, so an
        operation runs once (``retry_for`` is not used)."""
        check_factory(op)
        conn, thread = self._conn, self._thread
        if conn is None or thread is None:
            raise StoreError("the store is not open: use `async with store:` or `await open()`")
        loop = asyncio.get_running_loop()
        # Shielded: once started, a transaction finishes even if the caller is cancelled,
        # so the connection is never left inside a transaction.
        future = loop.run_in_executor(thread, _drive, conn, make_op(op), write)
        return await asyncio.shield(future)


def _set_wal(conn: sqlite3.Connection, wait: float) -> None:
    """Switch to WAL, waiting like busy_timeout does.

    Changing the journal mode needs an exclusive lock, and SQLite answers "database is
    locked" at once, without its busy handler, while other connections are creating or
    opening the same new file; so retry until ``wait`` seconds have passed.
    """
    deadline = time.monotonic() + wait
    delay = 0.005
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            if time.monotonic() >= deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.1)


def _drive(conn: sqlite3.Connection, op: Op[T], write: bool) -> T:
    conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
    try:
        query = next(op)
        while True:
            cursor = conn.execute(query.sql, tuple(_param(p) for p in query.params))
            rows = cursor.fetchall() if cursor.description else []
            query = op.send(Rows(rows, cursor.rowcount))
    except StopIteration as stop:
        conn.execute("COMMIT")
        value: T = stop.value
        return value
    except Rollback as rollback:
        conn.execute("ROLLBACK")
        rolled: T = rollback.value
        return rolled
    except BaseException:
        op.close()
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
