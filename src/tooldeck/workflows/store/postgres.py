"""The PostgreSQL workflow store: psycopg 3, async, its own schema, a small connection pool.

All tables live in one PostgreSQL schema (``tooldeck`` unless configured), created on
open, so a store never collides with other data in the database; tests use a fresh
schema per run. Results, inputs, schemas and rejection reasons are ``jsonb``; times are
``timestamptz``. Each operation that writes is one transaction on a pooled connection
(read committed): the conditional updates and the unique constraints decide every race.
A read runs its statements on an autocommit connection without ``BEGIN``/``COMMIT``: under
read committed each statement sees its own snapshot inside a transaction too, so the
transaction would only cost two round trips.

A connection blip (PostgreSQL restarting, a network cut, a terminated backend) is ridden
out: a connection that failed is closed, and with it every idle one opened before the
failure (they went through the same cut and are checked by nobody), and the operation
(every one: a store is only ever handed a function that makes it) is made and run again
on a fresh connection, with backoff, for up to ``retry_for`` seconds (a call may ask for
a longer window); then :class:`StoreUnavailable` is raised.

A network that drops packets without a reset (a cable pulled, a firewall or NAT entry
gone) would leave a query waiting for ever: every connection is opened with TCP
keepalives and ``tcp_user_timeout`` (:func:`keepalive_params`, from ``network_timeout``),
so such a connection fails within about that many seconds and the retry above takes over.
psycopg is the ``postgres`` extra: this module imports without it (the CLI and the
gateway check ``isinstance(store, PostgresStore)``), and making a store without it is
:class:`~tooldeck.errors.MissingExtra`, one line.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from ..._extras import LazyModule, require_extra
from .atomic import op_accept_result_atomic, op_claim_task_atomic
from .base import WorkflowStore
from .migrations import op_migrate, op_version
from .protocol import (
    Json,
    Op,
    OpFactory,
    Rollback,
    Rows,
    StoreError,
    StoreUnavailable,
    check_factory,
    dumps,
    make_op,
)
from .records import Acceptance, TaskRecord

if TYPE_CHECKING:
    import psycopg
    from psycopg import sql
    from psycopg.types import json as psycopg_json
else:  # the postgres extra, imported when a store is made (this module imports without it)
    psycopg = LazyModule("psycopg", "postgres")
    sql = LazyModule("psycopg.sql", "postgres")
    psycopg_json = LazyModule("psycopg.types.json", "postgres")

__all__ = ["keepalive_params"]

T = TypeVar("T")
DEFAULT_SCHEMA = "tooldeck"
DEFAULT_RETRY_SECONDS = 5.0
DEFAULT_NETWORK_TIMEOUT = 15.0
_log = logging.getLogger("tooldeck.workflows.store")
_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def redact_dsn(dsn: str) -> str:
    """``dsn`` without its password, for messages."""
    dsn = re.sub(r"(://[^:/@]*):[^@]*@", r"\1:***@", dsn)
    return re.sub(r"(password\s*=\s*)\S+", r"\1***", dsn)


def keepalive_params(timeout: float, dsn: str = "") -> dict[str, int]:
    """libpq parameters that fail a connection whose packets go unanswered for about
    ``timeout`` seconds, leaving out any that ``dsn`` sets itself (``{}`` for 0).

    Data sent and not acknowledged for a third of ``timeout`` (``tcp_user_timeout``)
    fails the connection; an idle one is probed after a third of it and dropped when the
    probes go unanswered for another third (keepalives). Without them, a silently dropped
    network leaves a query waiting until the kernel gives up (about 15 minutes on Linux).
    """
    if timeout <= 0:
        return {}
    third = max(1, int(timeout / 3))
    params = {
        "keepalives": 1,
        "keepalives_idle": third,
        "keepalives_interval": max(1, int(timeout / 9)),
        "keepalives_count": 3,
        "tcp_user_timeout": third * 1000,
    }
    if not dsn:
        return params
    given = psycopg.conninfo.conninfo_to_dict(dsn)
    return {k: v for k, v in params.items() if k not in given}


def _param(value: Any) -> Any:
    if isinstance(value, Json):
        return psycopg_json.Jsonb(value.value, dumps=dumps)
    return value


class PostgresStore(WorkflowStore):
    """A :class:`WorkflowStore` in PostgreSQL, in the schema ``schema``.

    ``dsn`` is a libpq connection string or URL; ``pool_size`` connections at most are
    opened (lazily). ``connect_timeout`` bounds each connection attempt, in seconds.
    ``retry_for``: how long an operation is retried across dropped connections before
    :class:`StoreUnavailable` (0: fail at the first one; a worker uses its lease).
    ``network_timeout``: about how long a connection whose packets go unanswered lives
    (:func:`keepalive_params`; 0 leaves the system's TCP settings; a worker uses its lease).
    """

    kind = "postgres"

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        pool_size: int = 8,
        connect_timeout: float = 5.0,
        retry_for: float = DEFAULT_RETRY_SECONDS,
        network_timeout: float = DEFAULT_NETWORK_TIMEOUT,
    ):
        require_extra("postgres")  # one line now, not at the first query
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
        self.retry_for = max(0.0, retry_for)
        self.connect_params: dict[str, Any] = {
            "autocommit": True,
            "connect_timeout": max(1, int(connect_timeout)),
            **keepalive_params(network_timeout, dsn),
        }
        self.blips = 0  # operations that failed on a dropped connection and were retried
        self._idle: asyncio.Queue[psycopg.AsyncConnection[Any]] | None = None
        self._slots: asyncio.Semaphore | None = None
        self._all: set[psycopg.AsyncConnection[Any]] = set()
        self._opened = False

    @property
    def location(self) -> str:
        return f"{redact_dsn(self.dsn)} (schema {self.schema})"

    async def _new_connection(self) -> psycopg.AsyncConnection[Any]:
        try:
            conn = await psycopg.AsyncConnection.connect(self.dsn, **self.connect_params)
        except psycopg.Error as exc:
            raise StoreUnavailable(
                f"cannot connect to PostgreSQL at {redact_dsn(self.dsn)}: {exc}"
            ) from exc
        try:
            await conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))
        except BaseException:
            with contextlib.suppress(Exception):
                await conn.close()
            raise
        self._all.add(conn)
        return conn

    async def _drop_idle(self) -> None:
        """Close every idle connection: after a failed one, they are suspect too."""
        idle = self._idle
        while idle is not None and not idle.empty():
            conn = idle.get_nowait()
            self._all.discard(conn)
            with contextlib.suppress(Exception):
                await conn.close()

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
            conn = await psycopg.AsyncConnection.connect(self.dsn, **self.connect_params)
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
            lock_key = f"tooldeck-workflows:{self.schema}"
            await self._run(lambda: op_migrate("postgres", lock_key=lock_key))
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
        return await self._run(op_version, write=False)

    # A task turn's two writes, each as one statement (see .atomic): one round trip each
    # instead of four or five.
    async def claim(self, task_id: str, session_id: str) -> TaskRecord | None:
        return await self._run(lambda: op_claim_task_atomic(task_id, session_id), atomic=True)

    async def accept_result(self, task_id: str, value: Any, *, submission_key: str) -> Acceptance:
        return await self._run(
            lambda: op_accept_result_atomic(task_id, value, submission_key), atomic=True
        )

    async def _run(
        self,
        op: OpFactory[T],
        *,
        write: bool = True,
        retry_for: float | None = None,
        atomic: bool = False,
    ) -> T:
        """See :meth:`WorkflowStore._run`; ``atomic``: each statement of ``op`` is atomic on
        its own (a write in one statement, then reads), so it needs no transaction."""
        check_factory(op)
        write = write and not atomic
        if not self._opened:
            raise StoreError("the store is not open: use `async with store:` or `await open()`")
        window = self.retry_for if retry_for is None else max(0.0, retry_for)
        loop = asyncio.get_running_loop()
        give_up = loop.time() + window
        pause, tries = 0.05, 0
        while True:
            tries += 1
            try:
                value = await self._once(make_op(op), write)
            except (psycopg.OperationalError, StoreUnavailable) as exc:
                # The transaction did not commit (or its answer was lost: every operation
                # recognises its own earlier write), so it is made and run again.
                await self._drop_idle()
                left = give_up - loop.time()
                if window <= 0:
                    if isinstance(exc, StoreUnavailable):
                        raise
                    raise StoreUnavailable(
                        f"PostgreSQL dropped the connection: {_first_line(exc)}"
                    ) from exc
                if not self._opened or left <= 0:
                    raise StoreUnavailable(
                        f"PostgreSQL at {redact_dsn(self.dsn)} unreachable for "
                        f"{window:g}s ({tries} tries): {_first_line(exc)}"
                    ) from exc
                self.blips += tries == 1
                _log.debug(
                    "store call failed (try %d), retrying for up to %.1fs: %s",
                    tries,
                    left,
                    _first_line(exc),
                    extra={
                        "event": "db_retrying",
                        "fields": {"source": "store call", "error": _first_line(exc)},
                    },
                )
                await asyncio.sleep(min(pause, left))
                pause = min(pause * 2, 1.0)
            else:
                if tries > 1:
                    _log.debug(
                        "store call succeeded after %d tries",
                        tries,
                        extra={"event": "db_ok", "fields": {"tries": tries}},
                    )
                return value

    async def _once(self, op: Op[T], write: bool = True) -> T:
        async with self._connection() as conn:
            if not write:
                try:
                    return await _drive(conn, op)
                except BaseException:
                    op.close()
                    raise
            try:
                async with conn.transaction():
                    return await _drive(conn, op)
            except Rollback as rollback:
                rolled: T = rollback.value
                return rolled
            except BaseException:
                op.close()
                raise


def _first_line(exc: BaseException) -> str:
    if isinstance(exc, StoreUnavailable) and exc.__cause__ is not None:
        exc = exc.__cause__  # the driver's own words, without the DSN again
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


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
