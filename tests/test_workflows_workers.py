"""Workers on DBOS queues in the real PostgreSQL: several ``tooldeck worker`` processes,
SIGKILL mid-run, takeover by lease, restart by id, and the two crash windows around an
accepted result (held open with PostgreSQL triggers, then the worker is killed)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import psycopg
import psycopg.conninfo
import pytest
from psycopg import sql
from typer.testing import CliRunner

from test_workflows_support import PG_DSN, is_ready
from tooldeck.workflows import PostgresStore, WorkflowEngine, WorkflowRecord, load_script
from tooldeck.workflows.durable import (
    DbosExecutor,
    DbosUnavailable,
    client_url,
    dbos_url,
    new_client,
    task_workflow_id,
)

pytest_plugins = ["test_workflows_support"]  # the PostgreSQL fixtures

SCRIPT = Path(__file__).parent / "workflow_scripts" / "fan_out.py"
# A worker that PostgreSQL drops within 0.2 s of its death, even mid-query (the server
# otherwise notices a dead client only when it next talks to it).
CHECKED_DSN = (
    PG_DSN + ("&" if "?" in PG_DSN else "?") + "options=-c%20client_connection_check_interval%3D200"
)
ITEMS = 50


class DbosTables:
    """DBOS's system tables made in ``dbos_schema`` on a thread of this process, as the
    first worker's launch would make them (``DBOS.migrate``), while the test goes on:
    its workers' interpreters start meanwhile, and find the tables there when they
    launch DBOS instead of each waiting for them (DBOS migrates a new schema under one
    lock for the whole database, tried once a second). :meth:`wait` raises what the
    migration raised."""

    def __init__(self, dbos_schema: str):
        from dbos import DBOS  # imported here, not on the thread

        self.dbos_schema = dbos_schema
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._migrate, args=(DBOS,), daemon=True)
        self.thread.start()

    def _migrate(self, dbos: Any) -> None:
        try:
            dbos.migrate(dbos_url(PG_DSN), schema=self.dbos_schema)
        except BaseException as exc:  # raised in the test, by wait()
            self.error = exc

    def wait(self, timeout: float = 90) -> None:
        self.thread.join(timeout)
        if self.thread.is_alive():
            raise AssertionError(f"DBOS's tables in {self.dbos_schema} not made in {timeout}s")
        if self.error is not None:
            raise self.error


class Workers:
    """Worker processes of one test, all on the same schemas; killed at the end."""

    def __init__(self, schema: str, log_dir: Path):
        self.schema = schema
        self.dbos_schema = f"{schema}_dbos"
        self.log_dir = log_dir
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.logs: dict[str, Path] = {}
        self.tables: DbosTables | None = None

    def make_dbos_tables(self) -> None:
        """Start making DBOS's tables now (:class:`DbosTables`); a worker's readiness
        waits for them too."""
        self.tables = DbosTables(self.dbos_schema)

    def start(
        self,
        worker_id: str,
        *,
        lease: float = 3.0,
        heartbeat: float | None = None,
        concurrency: int = 4,
        delay: float = 0.2,
        items: int = ITEMS,
        dsn: str = PG_DSN,
        grace: float = 30.0,
        retry_seconds: float = 2.0,
        wait: bool = True,
        script: Path = SCRIPT,
        args: Sequence[str] = (),
        verbose: bool = False,
        prefix: Sequence[str] = (),
        env: dict[str, str] | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start a worker; wait until it is ready unless ``wait`` is false (then
        :meth:`wait_ready` does: workers started side by side start in the time of one).
        ``heartbeat``: seconds between lease renewals (default a sixth of the lease);
        ``args``: more options of ``tooldeck worker``; ``verbose``: ``tooldeck -v``;
        ``prefix``: a command that runs the worker (``nsenter ...``); ``env``: more
        environment variables."""
        log = self.log_dir / f"{worker_id}-{len(self.procs)}.log"
        env = {
            **os.environ,
            "TOOLDECK_TEST_ITEMS": str(items),
            "TOOLDECK_TEST_STEP_DELAY": str(delay),
            "TOOLDECK_WORKER_RETRY_SECONDS": str(retry_seconds),
            "COLUMNS": "200",
            **(env or {}),
        }
        command = [
            *prefix,
            sys.executable,
            "-c",
            "from tooldeck.cli import main; main()",
            *(["-v"] if verbose else []),
            "worker",
            "--dsn",
            dsn,
            "--script",
            str(script),
            "--id",
            worker_id,
            "--pg-schema",
            self.schema,
            "--dbos-schema",
            self.dbos_schema,
            "--concurrency",
            str(concurrency),
            "--lease",
            str(lease),
            "--heartbeat",
            str(heartbeat or lease / 6),
            "--grace",
            str(grace),
            *args,
        ]
        with log.open("wb") as out:
            proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
        self.procs[worker_id] = proc
        self.logs[worker_id] = log
        if wait:
            self.wait_ready(worker_id)
        return proc

    def run_args(self, script: Path = SCRIPT, timeout: float = 60) -> list[str]:
        """``workflows run SCRIPT`` for a client of these workers (their schemas)."""
        return [
            "workflows",
            "run",
            str(script),
            "--dsn",
            PG_DSN,
            "--pg-schema",
            self.schema,
            "--workers",
            "--dbos-schema",
            self.dbos_schema,
            "--timeout",
            f"{timeout:g}",
        ]

    def wait_ready(self, worker_id: str, timeout: float = 90) -> None:
        proc, log = self.procs[worker_id], self.logs[worker_id]
        deadline = time.monotonic() + timeout
        if self.tables is not None:
            self.tables.wait(timeout)
        while not is_ready(log.read_text(errors="replace"), worker_id):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"worker {worker_id} did not start:\n{log.read_text()}")
            time.sleep(0.1)

    def kill(self, worker_id: str) -> None:
        proc = self.procs[worker_id]
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

    def stop_all(self) -> None:
        """SIGTERM to every worker still running, and wait for them to stop."""
        if os.environ.get("TOOLDECK_TEST_KEEP_WORKERS"):
            return
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)

    def kill_all(self) -> None:
        """SIGKILL to every worker still running: the end of a test that checked what
        it meant to (a test that checks how workers stop calls :meth:`stop_all`); a
        graceful stop costs a second or two a worker (DBOS's shutdown, the interpreter's)."""
        if os.environ.get("TOOLDECK_TEST_KEEP_WORKERS"):
            return
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
        for proc in self.procs.values():
            proc.wait(10)
        if self.tables is not None:
            self.tables.thread.join(30)


@pytest.fixture
def workers(pg_schema: str, tmp_path: Path) -> Iterator[Workers]:
    pool = Workers(pg_schema, tmp_path)
    pool.make_dbos_tables()
    try:
        yield pool
    finally:
        pool.kill_all()


def query(workers: Workers, text: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(workers.schema)))
        cursor = conn.execute(text.encode(), args or None)
        return list(cursor.fetchall()) if cursor.description is not None else []


def wait_for(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


class Client:
    """The side that starts runs: an engine whose executor queues turns for the workers."""

    def __init__(self, workers: Workers, items: int = ITEMS, script: Path = SCRIPT):
        os.environ["TOOLDECK_TEST_ITEMS"] = str(items)
        try:
            self.workflow = load_script(script).workflow()
        finally:
            del os.environ["TOOLDECK_TEST_ITEMS"]
        self.workers = workers
        self.loop = asyncio.new_event_loop()
        self.store = PostgresStore(PG_DSN, schema=workers.schema)
        self.executor = DbosExecutor(PG_DSN, dbos_schema=workers.dbos_schema, poll_interval=0.1)
        # the run's end seen within 0.1 s (the default looks every 0.5 s)
        self.engine = WorkflowEngine(
            self.store, _no_model, executor=self.executor, poll_interval=0.1
        )
        self.loop.run_until_complete(self.store.open())

    def start(self) -> str:
        return self.loop.run_until_complete(self.engine.start(self.workflow))

    def wait(self, workflow_id: str, timeout: float = 120.0) -> WorkflowRecord:
        async def bounded() -> WorkflowRecord:
            async with asyncio.timeout(timeout):
                return await self.engine.wait(workflow_id)

        return self.loop.run_until_complete(bounded())

    def close(self) -> None:
        self.loop.run_until_complete(self.engine.close())
        self.loop.run_until_complete(self.store.close())
        self.loop.close()


@pytest.fixture
def client_of() -> Iterator[Callable[..., Client]]:
    made: list[Client] = []

    def make(workers: Workers, items: int = ITEMS, script: Path = SCRIPT) -> Client:
        made.append(Client(workers, items, script))
        return made[-1]

    yield make
    for client in made:
        client.close()


def _no_model(run: Any) -> Any:  # pragma: no cover - the client runs no turn
    raise AssertionError("the client must not run a task turn")


def running_on(workers: Workers, worker_id: str) -> int:
    rows = query(
        workers,
        "SELECT count(*) FROM tasks WHERE state = 'running' AND session_id LIKE %s",
        f"%@{worker_id}",
    )
    return int(rows[0][0])


def assert_every_result_stored_once(
    workers: Workers, run: WorkflowRecord, items: int, *, parked_ok: bool = False
) -> None:
    assert run.state == "succeeded", run.error
    assert len(run.tasks) == items + 1
    counts = dict(query(workers, "SELECT task_id, count(*) FROM results GROUP BY task_id"))
    assert counts == {t.id: 1 for t in run.tasks}
    submitted = query(
        workers,
        "SELECT task_id, count(*) FROM transitions WHERE to_state = 'submitted' GROUP BY task_id",
    )
    assert all(n == 1 for _, n in submitted) and len(submitted) == items + 1
    for t in run.tasks:
        if t.name != "total":
            n = int(t.name.split("_")[1])
            assert t.result == {"n": n, "square": n * n}
    assert run.task("total").result == {
        "items": items,
        "sum_of_squares": sum(i * i for i in range(items)),
    }

    def dbos_statuses() -> dict[str, int]:
        statuses = query(
            workers,
            f"SELECT status, count(*) FROM {workers.dbos_schema}.workflow_status "
            "WHERE workflow_uuid LIKE %s GROUP BY status",
            task_workflow_id(f"{run.id}:%"),
        )
        found = dict(statuses)
        if parked_ok:
            # A DBOS workflow whose final status could not be written (the database was
            # away) stays PENDING on its worker until that worker restarts; its work is done.
            found["SUCCESS"] = found.get("SUCCESS", 0) + found.pop("PENDING", 0)
        return found

    # DBOS writes a workflow's SUCCESS after its function returned, that is after the
    # result was stored: the run can be over a moment before the last status lands.
    deadline = time.monotonic() + 30
    while dbos_statuses() != {"SUCCESS": items + 1} and time.monotonic() < deadline:
        time.sleep(0.1)
    assert dbos_statuses() == {"SUCCESS": items + 1}


def takeovers(workers: Workers, lost: str) -> list[tuple[str, str]]:
    return [
        (str(task), str(reason))
        for task, reason in query(
            workers,
            "SELECT task_id, reason FROM transitions WHERE from_state = 'running' "
            "AND to_state = 'running' AND reason LIKE %s",
            f"%(was %@{lost})",
        )
    ]


def test_three_workers_share_51_tasks_and_a_killed_worker_is_taken_over(
    workers: Workers, client_of: Callable[..., Client]
) -> None:
    for name in ("w1", "w2", "w3"):
        workers.start(name, wait=False)  # side by side: they start in the time of one
    client = client_of(workers)
    for name in ("w1", "w2", "w3"):
        workers.wait_ready(name)
    workflow_id = client.start()
    wait_for(lambda: running_on(workers, "w1") >= 2, "turns running on w1")
    in_flight = running_on(workers, "w1")
    workers.kill("w1")
    workers.start("w4")  # a replacement with a new id: the lease decides the takeover
    run = client.wait(workflow_id)

    assert_every_result_stored_once(workers, run, ITEMS)
    taken = takeovers(workers, "w1")
    assert len(taken) >= 1 and len(taken) <= in_flight + 4, taken
    assert all(
        "the worker w1 was lost; DBOS restarted the turn on w" in reason for _, reason in taken
    )
    lost = query(workers, "SELECT state, note FROM workers WHERE id = 'w1'")
    assert lost[0][0] == "lost" and "taken over by w" in lost[0][1]
    ran_on = {
        str(reason).rsplit("@", 1)[-1]
        for (reason,) in query(
            workers, "SELECT reason FROM transitions WHERE reason LIKE 'claimed by %%'"
        )
    }
    assert {"w1", "w2", "w3"} <= ran_on, ran_on  # the queue was shared


def test_a_worker_restarted_under_its_id_resumes_its_own_turns(
    workers: Workers, client_of: Callable[..., Client]
) -> None:
    workers.start("solo", lease=600, concurrency=3, delay=0.5, items=6, wait=False)
    client = client_of(workers, items=6)
    workers.wait_ready("solo")
    workflow_id = client.start()
    wait_for(lambda: running_on(workers, "solo") >= 3, "three turns running")
    workers.kill("solo")
    workers.start("solo", lease=600, concurrency=3, delay=0.5, items=6)
    run = client.wait(workflow_id)
    assert_every_result_stored_once(workers, run, 6)
    taken = takeovers(workers, "solo")
    assert len(taken) == 3  # nobody else could have taken them
    assert all("worker solo restarted; DBOS recovered" in reason for _, reason in taken)


def test_sigterm_lets_running_turns_finish_and_leaves_the_rest_queued(
    workers: Workers, client_of: Callable[..., Client]
) -> None:
    proc = workers.start(
        "first", concurrency=2, delay=1.0, items=6, grace=60, lease=600, wait=False
    )
    client = client_of(workers, items=6)
    workers.wait_ready("first")
    workflow_id = client.start()
    wait_for(lambda: running_on(workers, "first") == 2, "two turns running")
    running = [t for (t,) in query(workers, "SELECT id FROM tasks WHERE state = 'running'")]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0  # it does not hang until the grace period ends
    states = dict(query(workers, "SELECT id, state FROM tasks"))
    assert all(states[t] == "submitted" for t in running), states  # finished, not cut off
    workers.start("second", concurrency=2, items=6, lease=600)
    run = client.wait(workflow_id)
    assert_every_result_stored_once(workers, run, 6)
    assert query(workers, "SELECT state FROM workers WHERE id = 'first'") == [("stopped",)]
    assert takeovers(workers, "first") == []


class Outage:
    """A TCP relay to PostgreSQL that can be cut (every connection dropped, new ones
    refused) and restored: to the worker behind it, a database restart."""

    def __init__(self) -> None:
        target = psycopg.conninfo.conninfo_to_dict(PG_DSN)
        self.target = (str(target.get("host") or "127.0.0.1"), int(target.get("port") or 5432))
        self.port = 0
        self.listener: socket.socket | None = None
        self.links: list[socket.socket] = []
        self.lock = threading.Lock()
        self.restore()

    @property
    def dsn(self) -> str:
        parts = psycopg.conninfo.conninfo_to_dict(PG_DSN)
        parts.update(host="127.0.0.1", port=str(self.port))
        return psycopg.conninfo.make_conninfo("", **parts)  # type: ignore[arg-type]

    def restore(self) -> None:
        listener = self._listen()
        self.port = listener.getsockname()[1]
        self.listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _listen(self) -> socket.socket:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        return listener

    def cut(self) -> None:
        with self.lock:
            if self.listener is not None:
                # shutdown wakes the accepting thread: a bare close() leaves it blocked in
                # accept(), where it would still take one more connection.
                with contextlib.suppress(OSError):
                    self.listener.shutdown(socket.SHUT_RDWR)
                self.listener.close()
                self.listener = None
            for link in self.links:
                with contextlib.suppress(OSError):
                    link.shutdown(socket.SHUT_RDWR)
                link.close()
            self.links.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            with self.lock:
                self.links += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


@pytest.fixture
def outage() -> Iterator[Outage]:
    """A relay in front of PostgreSQL, cut when the test ends (whatever it left open)."""
    relay = Outage()
    try:
        yield relay
    finally:
        relay.cut()


def test_a_worker_rides_out_a_database_outage_shorter_than_its_lease(
    workers: Workers, client_of: Callable[..., Client]
) -> None:
    outage = Outage()
    try:
        # renewals every 0.5 s: the outage is over at the first one a third of the lease
        # after the last failure (db_back), not up to a heartbeat (1.3 s) later
        proc = workers.start(
            "steady", lease=8, heartbeat=0.5, delay=0.3, items=16, dsn=outage.dsn, wait=False
        )
        client = client_of(workers, items=16)
        workers.wait_ready("steady")
        workflow_id = client.start()
        wait_for(lambda: query(workers, "SELECT count(*) FROM results")[0][0] >= 3, "some results")
        outage.cut()
        time.sleep(3)
        outage.restore()
        run = client.wait(workflow_id)
        assert_every_result_stored_once(workers, run, 16, parked_ok=True)
        assert proc.poll() is None  # still serving
        assert query(workers, "SELECT state FROM workers WHERE id = 'steady'") == [("alive",)]

        def log() -> str:
            return "".join(p.read_text() for p in workers.log_dir.glob("steady-*.log"))

        # The worker did see the outage (its lease renewal, a store call or DBOS's own
        # calls failed: which of them depends on what was running when the relay was cut),
        # and says it is over once nothing failed for a third of the lease, which may be
        # after the run ended.
        wait_for(lambda: " db_back: " in log(), "the db_back line", timeout=30)
        said = log()
        assert said.count(" db_retrying: ") == said.count(" db_back: ") == 1, said[-3000:]
    finally:
        workers.stop_all()
        outage.cut()


def _trigger(workers: Workers, table: str, condition: str, on: str = "INSERT") -> None:
    """Make inserts (or ``on``) into ``table`` matching ``condition`` hang (until the
    client dies)."""
    query(
        workers,
        f"""CREATE FUNCTION {workers.schema}.hang() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF {condition} THEN
                PERFORM set_config('application_name', '{_hang_mark(workers)}', false);
                PERFORM pg_sleep(120);
            END IF;
            RETURN NEW;
        END $$""",
    )
    query(
        workers,
        f"CREATE TRIGGER hang BEFORE {on} ON {table} FOR EACH ROW "
        f"EXECUTE FUNCTION {workers.schema}.hang()",
    )


def _hang_mark(workers: Workers) -> str:
    """The application_name a session hanging in this test's trigger takes: the server
    may hold hanging sessions of other tests (other test processes) at the same time."""
    return f"hang:{workers.schema}"[:63]


def _hanging(workers: Workers, table: str, on: str = "INSERT INTO") -> bool:
    rows = query(
        workers,
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep' "
        "AND application_name = %s AND query LIKE %s",
        _hang_mark(workers),
        f"%{on} %{table.rsplit('.', 1)[-1]}%",
    )
    return int(rows[0][0]) > 0


def test_a_worker_killed_while_storing_a_result_leaves_none_and_the_retry_stores_one(
    workers: Workers, client_of: Callable[..., Client]
) -> None:
    workers.start("doomed", lease=2, items=4, dsn=CHECKED_DSN, wait=False)
    client = client_of(workers, items=4)
    workers.wait_ready("doomed")
    # The first store of item_02's result by "doomed" hangs inside its transaction.
    _trigger(
        workers,
        "results",
        f"NEW.task_id LIKE '%:item_02' AND (SELECT session_id FROM {workers.schema}.tasks "
        "WHERE id = NEW.task_id) LIKE '%@doomed'",
    )
    workflow_id = client.start()
    wait_for(lambda: _hanging(workers, "results"), "the result insert to hang")
    workers.kill("doomed")
    wait_for(lambda: not _hanging(workers, "results"), "the server to drop the dead session")
    rows = query(workers, "SELECT count(*) FROM results WHERE task_id LIKE '%:item_02'")
    assert rows == [(0,)]  # killed during storage: nothing was stored
    workers.start("rescuer", lease=2, items=4)
    run = client.wait(workflow_id)
    assert_every_result_stored_once(workers, run, 4)
    # item_02 was taken over (others still in flight at the kill may have been too)
    assert f"{workflow_id}:item_02" in [t for t, _ in takeovers(workers, "doomed")]
    key = run.task("item_02").submission_key or ""
    assert "@rescuer:" in key  # the retry's submission is the stored one


def test_a_worker_killed_after_the_result_was_accepted_never_stores_a_second(
    workers: Workers, client_of: Callable[..., Client]
) -> None:
    workers.start("doomed", lease=2, items=4, dsn=CHECKED_DSN, wait=False)
    client = client_of(workers, items=4)
    workers.wait_ready("doomed")
    dbos = workers.dbos_schema
    # DBOS records the task workflow's end after the result was committed (and the run
    # advanced); hang there.
    _trigger(
        workers,
        f"{dbos}.workflow_status",
        "NEW.status = 'SUCCESS' AND NEW.workflow_uuid LIKE '%:item_01' "
        "AND OLD.executor_id = 'doomed'",
        on="UPDATE",
    )
    workflow_id = client.start()
    wait_for(
        lambda: _hanging(workers, f"{dbos}.workflow_status", on="UPDATE"),
        "the workflow's end record to hang",
    )
    accepted = query(
        workers, "SELECT submission_key FROM results WHERE task_id = %s", f"{workflow_id}:item_01"
    )
    assert len(accepted) == 1 and "@doomed:" in accepted[0][0]  # committed before the kill
    workers.kill("doomed")
    workers.start("rescuer", lease=2, items=4)
    run = client.wait(workflow_id)
    assert_every_result_stored_once(workers, run, 4)
    assert run.task("item_01").submission_key == accepted[0][0]  # the accepted one is kept
    history = query(
        workers,
        "SELECT from_state, to_state FROM transitions WHERE task_id = %s ORDER BY id",
        f"{workflow_id}:item_01",
    )
    assert history == [(None, "pending"), ("pending", "running"), ("running", "submitted")]


def test_a_turn_that_cannot_run_fails_its_task_after_the_retries_and_the_run_ends(
    workers: Workers, client_of: Callable[..., Client]
) -> None:
    workers.start("w", items=3, retry_seconds=0.1, wait=False)
    client = client_of(workers, items=3)
    workers.wait_ready("w")
    # Claiming item_01 always fails in the database (as if a constraint broke).
    query(
        workers,
        f"""CREATE FUNCTION {workers.schema}.refuse() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.id LIKE '%:item_01' AND OLD.state = 'pending' AND NEW.state = 'running' THEN
                RAISE EXCEPTION 'claim refused for the test';
            END IF;
            RETURN NEW;
        END $$""",
    )
    query(
        workers,
        "CREATE TRIGGER refuse BEFORE UPDATE ON tasks FOR EACH ROW "
        f"EXECUTE FUNCTION {workers.schema}.refuse()",
    )
    workflow_id = client.start()
    run = client.wait(workflow_id, timeout=60)
    assert run.state == "failed"
    item = run.task("item_01")
    assert item.state == "failed" and "the turn failed 5 times on w" in (item.error or "")
    assert "claim refused for the test" in (item.error or "")
    assert run.task("total").state == "cancelled"  # its dependency failed
    assert {run.task(n).state for n in ("item_00", "item_02")} == {"submitted"}
    statuses = dict(
        query(
            workers,
            f"SELECT status, count(*) FROM {workers.dbos_schema}.workflow_status "
            "WHERE workflow_uuid LIKE %s GROUP BY status",
            task_workflow_id(f"{workflow_id}:%"),
        )
    )
    assert statuses == {"SUCCESS": 3}  # no DBOS workflow left in ERROR; total never ran


def test_submitting_twice_queues_once_and_cancel_reaches_queued_turns(
    workers: Workers, client_of: Callable[..., Client]
) -> None:
    workers.start("slow", concurrency=1, delay=1.0, items=6, wait=False)
    client = client_of(workers, items=6)
    workers.wait_ready("slow")
    workflow_id = client.start()
    loop = client.loop
    loop.run_until_complete(client.executor.submit(workflow_id, f"{workflow_id}:item_00"))
    rows = query(
        workers,
        f"SELECT count(*) FROM {workers.dbos_schema}.workflow_status WHERE workflow_uuid LIKE %s",
        task_workflow_id(f"{workflow_id}:%"),
    )
    assert rows == [(6,)]  # six items queued once each; total not yet ready
    wait_for(lambda: running_on(workers, "slow") == 1, "one turn running")
    outcome = loop.run_until_complete(client.engine.cancel(workflow_id, "enough"))
    assert outcome.cancelled and len(outcome.pending) >= 4
    loop.run_until_complete(asyncio.wait_for(client.executor.join(workflow_id), 30))
    statuses = dict(
        query(
            workers,
            f"SELECT status, count(*) FROM {workers.dbos_schema}.workflow_status "
            "WHERE workflow_uuid LIKE %s GROUP BY status",
            task_workflow_id(f"{workflow_id}:%"),
        )
    )
    assert statuses.get("CANCELLED", 0) >= 4, statuses
    run = client.loop.run_until_complete(client.engine.get(workflow_id))
    assert run.state == "cancelled"
    assert query(workers, "SELECT count(*) FROM results") in ([(0,)], [(1,)])


def test_workflows_run_with_workers_shows_their_progress(workers: Workers) -> None:
    from tooldeck.cli import app

    workers.start("cli", items=5, delay=0.1, wait=False)
    assert workers.tables is not None
    workers.tables.wait()  # the client queues the run there, while the worker starts
    env = {
        "TOOLDECK_WORKFLOWS_DSN": "",
        "COLUMNS": "200",
        "TOOLDECK_TEST_ITEMS": "5",
    }
    result = CliRunner().invoke(app, workers.run_args(), env=env)
    assert result.exit_code == 0, result.output
    assert "fan_out): succeeded, 6/6 submitted" in result.output
    assert "✓ total: submitted (1/3 submissions)" in result.output  # followed live
    claimed = query(workers, "SELECT reason FROM transitions WHERE reason LIKE 'claimed by %%'")
    assert claimed and all(str(r).endswith("@cli") for (r,) in claimed)
    # the worker said what it did, one line per task state change, each once
    workers.stop_all()
    log = (workers.log_dir / "cli-0.log").read_text()
    lines = [line.split(" ", 3)[3] for line in log.splitlines() if "(run wf-" in line]
    said = [re.sub(r" \(run wf-\w+\)|: after [\d.]+ s$", "", x) for x in lines]
    names = sorted({x.split()[2] for x in said})
    assert len(names) == 6
    assert sorted(said) == sorted(
        [f"cli claimed {n}" for n in names] + [f"cli submitted {n}" for n in names]
    )


def test_a_client_without_workers_is_told_to_start_one(pg_schema: str) -> None:
    executor = DbosExecutor(PG_DSN, dbos_schema=f"{pg_schema}_dbos")

    async def main() -> None:
        try:
            with pytest.raises(DbosUnavailable, match="start a worker once first"):
                await executor.submit("wf-x", "wf-x:a")
        finally:
            await executor.close()

    asyncio.run(main())


def test_worker_and_workers_flag_need_a_database() -> None:
    from tooldeck.cli import app

    env = {"TOOLDECK_WORKFLOWS_DSN": "", "COLUMNS": "200"}
    result = CliRunner().invoke(app, ["worker", "--script", str(SCRIPT)], env=env)
    assert result.exit_code == 2 and "--dsn" in result.output
    result = CliRunner().invoke(app, ["workflows", "run", str(SCRIPT), "--workers"], env=env)
    assert result.exit_code == 2 and "--workers needs" in result.output
    dead = "postgresql://postgres@127.0.0.1:1/test"  # nothing listens on port 1
    result = CliRunner().invoke(app, ["worker", "--dsn", dead, "--script", str(SCRIPT)], env=env)
    assert result.exit_code == 2 and "cannot connect to PostgreSQL" in result.output
    assert result.output.startswith("error: ") and result.output.count("\n") == 1  # only that
    args = ["worker", "--dsn", dead, "--script", str(SCRIPT), "--lease", "2", "--heartbeat", "2"]
    result = CliRunner().invoke(app, args, env=env)
    assert (result.exit_code, result.output) == (
        2,
        "error: --lease (2) must be longer than --heartbeat (2); give a longer --lease or a "
        "shorter --heartbeat\n",
    )
    result = CliRunner().invoke(app, ["worker", "--dsn", dead], env=env)
    assert (result.exit_code, result.output) == (
        2,
        "error: a worker needs a model for its turns: --model KIND:MODEL (e.g. openai:gpt-5.4), "
        "or --script FILE defining scripted_model(run) (a scripted stand-in)\n",
    )


@pytest.mark.parametrize(
    ("dsn", "url"),
    [
        ("postgresql://u:p@h:5/d", "postgresql://u:p@h:5/d"),
        ("postgres://u@h/d", "postgresql://u@h/d"),
        (
            "host=127.0.0.1 port=5432 dbname=test user=postgres",
            "postgresql://postgres@127.0.0.1:5432/test",
        ),
        (
            "host=h dbname=d user=u password=s3cr3t sslmode=require",
            "postgresql://u:s3cr3t@h/d?sslmode=require",
        ),
    ],
)
def test_dsn_forms_become_dbos_urls(dsn: str, url: str) -> None:
    assert dbos_url(dsn) == url


@pytest.mark.parametrize(
    ("dsn", "idle"),
    [(PG_DSN, 5), (PG_DSN + ("&" if "?" in PG_DSN else "?") + "keepalives_idle=7", 7)],
)
def test_a_clients_dbos_connections_fail_on_a_silent_network_drop(dsn: str, idle: int) -> None:
    """The client's own DBOS connections (enqueue, cancel, join, and the transaction that
    enqueues a run's first tasks) carry the store's keepalives and tcp_user_timeout, so a
    network that drops packets without a word fails them within seconds (DBOS then
    retries) instead of hanging a call for minutes; a value the DSN sets itself wins. Read
    from the socket of a connection each opened."""

    def check(engine: Any) -> None:
        raw = engine.raw_connection()
        try:
            fd = raw.driver_connection.pgconn.socket
            with socket.socket(fileno=os.dup(fd)) as sock:
                assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
                assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == idle
                assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == 5000
        finally:
            raw.close()

    client = new_client(dsn)
    try:
        check(client._sys_db.engine)
    finally:
        client.destroy()
    executor = DbosExecutor(dsn)
    try:
        check(executor._transactions())
    finally:
        asyncio.run(executor.close())
    assert "password" not in client_url("host=h dbname=d user=u")  # nothing invented
