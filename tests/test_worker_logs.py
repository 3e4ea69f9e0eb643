"""What ``tooldeck worker`` prints, checked line by line: real worker processes, the real
PostgreSQL, a TCP relay the tests cut, and one whose network drops packets silently.

- each state change is one line of a fixed shape, in text and in JSON
  (``--log-format json``), and nothing else is printed (no traceback, no wrapped line
  in a log file, even with ``COLUMNS=40``);
- a database outage is two lines, ``db_retrying`` when it starts and ``db_back`` when it
  ends, with DBOS's own noise counted in the second;
- a network that drops packets without a reset fails the connections within about the
  lease (TCP keepalives, ``tcp_user_timeout``): a short one is ridden out, a long one
  makes the worker exit as lost instead of hanging; no task fails either way;
- repeated SIGKILLs and rejections: every task is submitted exactly once.
"""

from __future__ import annotations

import ctypes
import io
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from test_workflows_support import PG_DSN
from test_workflows_workers import (
    Client,
    Outage,
    Workers,
    assert_every_result_stored_once,
    client_of,
    query,
    running_on,
    wait_for,
    workers,
)
from tooldeck.cli.worker_log import EVENTS, WorkerLog
from tooldeck.errors import ProviderError
from tooldeck.workflows.store import redact_dsn

pytest_plugins = ["test_workflows_support"]  # the PostgreSQL fixtures

__all__ = ["client_of", "workers"]  # fixtures used here, defined with the worker tests

REJECT_SCRIPT = Path(__file__).parent / "workflow_scripts" / "reject_then_hang.py"
TEXT_LINE = re.compile(
    r"^(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) (?P<level>DEBUG|INFO|WARNING|ERROR) "
    r"(?P<worker>\S+) (?P<event>[a-z_]+)(?: (?P<task>\S+) \(run (?P<run>\S+)\))?"
    r"(?:: (?P<message>.*))?$"
)
JSON_KEYS = {"ts", "level", "worker", "event", "task", "run", "message", "fields"}


def text_lines(path: Path) -> list[dict[str, Any]]:
    """Every line of a text log, parsed; a line of another shape fails the test."""
    found = []
    for line in path.read_text().splitlines():
        match = TEXT_LINE.match(line)
        assert match is not None, f"not a worker log line: {line!r}"
        found.append(match.groupdict())
    return found


def json_lines(path: Path) -> list[dict[str, Any]]:
    found = []
    for line in path.read_text().splitlines():
        record = json.loads(line)  # one object per line, nothing else
        assert set(record) == JSON_KEYS, record
        found.append(record)
    return found


def events(lines: list[dict[str, Any]]) -> list[str]:
    return [line["event"] for line in lines]


# -- the line shapes, from real workers ------------------------------------------------------


def test_each_state_change_is_one_line_in_text_and_in_json(
    workers: Workers, client_of: Callable[..., Client]
) -> None:
    # "first" writes text to a log file, told its terminal is 40 columns wide: no wrapping.
    workers.start(
        "first", lease=3, items=1, script=REJECT_SCRIPT, env={"COLUMNS": "40"}, wait=False
    )
    client = client_of(workers, items=1, script=REJECT_SCRIPT)
    workers.wait_ready("first")
    workflow_id = client.start()
    wait_for(lambda: query(workers, "SELECT count(*) FROM rejections") == [(1,)], "a rejection")
    workers.kill("first")  # its turn hangs after the rejection
    second = workers.start(
        "second", lease=3, items=1, script=REJECT_SCRIPT, args=["--log-format", "json"]
    )
    run = client.wait(workflow_id)
    assert run.state == "succeeded", run.error
    second.send_signal(signal.SIGTERM)
    assert second.wait(30) == 0

    first = text_lines(workers.logs["first"])
    assert events(first) == ["ready", "claimed", "rejected"]
    assert {line["worker"] for line in first} == {"first"}
    assert first[0]["level"] == "INFO" and first[0]["task"] is None
    assert first[0]["message"] == (
        f"serving {redact_dsn(PG_DSN)} (schema {workers.schema}), 4 turn(s) at once, lease 3s"
    )
    assert first[1] | {"ts": ""} == {
        "ts": "",
        "level": "INFO",
        "worker": "first",
        "event": "claimed",
        "task": "pick",
        "run": workflow_id,
        "message": None,
    }
    assert (first[2]["level"], first[2]["task"], first[2]["run"]) == (
        "WARNING",
        "pick",
        workflow_id,
    )
    # the line says why, as the model was told
    rejected = re.fullmatch(r"submission 1 of 3 rejected: (.+)", first[2]["message"])
    assert rejected is not None and "less than the minimum of 10" in rejected[1], first[2]

    # (``stopping`` too, when SIGTERM comes before DBOS recorded the turn's last step)
    lines = [x for x in json_lines(workers.logs["second"]) if x["event"] != "stopping"]
    assert events(lines) == ["ready", "took_over", "recovered", "submitted", "exiting"]
    ready, took, recovered, submitted, exiting = lines
    assert all(line["worker"] == "second" for line in lines)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d", ready["ts"])
    assert ready["fields"] == {"concurrency": 4, "lease": 3.0}
    assert took == took | {
        "level": "WARNING",
        "task": None,
        "run": None,
        "message": "lost worker first (no heartbeat for 3s): 1 turn(s) re-queued",
        "fields": {"lost": "first", "turns": 1},
    }
    why = "the worker first was lost; DBOS restarted the turn on second"
    assert recovered == recovered | {
        "level": "WARNING",
        "task": "pick",
        "run": workflow_id,
        "message": why,
        "fields": {"reason": why},
    }
    assert submitted["level"] == "INFO" and submitted["task"] == "pick"
    assert re.fullmatch(r"after \d+\.\d s", submitted["message"]), submitted
    assert submitted["fields"]["attempts"] == 2 and submitted["fields"]["max_attempts"] == 3
    assert exiting == exiting | {
        "level": "INFO",
        "message": "stopped by SIGTERM (status 0): 1 turn(s) run, took over 1 lost worker(s)",
        "fields": {"status": 0, "why": "stopped by SIGTERM", "turns": 1, "taken_over": ["first"]},
    }


# -- an outage is two lines --------------------------------------------------------------------

BACK = re.compile(
    r"database back after (?P<seconds>\d+\.\d)s; (\d+ call\(s\) of this worker retried, )?"
    r"(1 DBOS error folded \(.+\)|\d+ DBOS errors folded \(first: .+; last: .+\)|nothing folded)"
)


def test_an_outage_is_one_line_when_it_starts_and_one_with_the_count_when_it_ends(
    workers: Workers, client_of: Callable[..., Client]
) -> None:
    outage = Outage()
    try:
        # renewals every 0.5 s: each outage is over at the first one a third of the lease
        # after its last failure (db_back), not up to a heartbeat (1.3 s) later
        proc = workers.start(
            "blip",
            lease=8,
            heartbeat=0.5,
            concurrency=2,
            delay=0.4,
            items=24,
            dsn=outage.dsn,
            wait=False,
        )
        client = client_of(workers, items=24)
        workers.wait_ready("blip")
        workflow_id = client.start()
        wait_for(lambda: running_on(workers, "blip") >= 1, "a turn running")
        log = workers.logs["blip"]

        def backs() -> int:
            return log.read_text().count(" db_back: ")

        for cut in (0.4, 0.4, 0.4, 2.5):  # three sub-second cuts and a long one
            before = backs()
            outage.cut()
            time.sleep(cut)
            outage.restore()
            wait_for(lambda n=before: backs() > n, "the outage's db_back line", timeout=20)
        run = client.wait(workflow_id)
        assert_every_result_stored_once(workers, run, 24, parked_ok=True)
        assert query(workers, "SELECT count(*) FROM transitions WHERE to_state = 'failed'") == [
            (0,)
        ]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        outage.cut()
    text = log.read_text()
    assert "Traceback" not in text and "sqlalche.me" not in text, text[-3000:]
    lines = text_lines(log)
    said = events(lines)
    assert said.count("db_retrying") == 4 and said.count("db_back") == 4, said
    assert "dbos" not in said and "db_still_down" not in said  # DBOS's lines: folded
    assert set(said) <= {"ready", "claimed", "submitted", "db_retrying", "db_back", "exiting"}
    assert said.count("claimed") == said.count("submitted") == 25
    retrying = [x for x in lines if x["event"] == "db_retrying"]
    assert all(x["level"] == "WARNING" for x in retrying)
    start = re.compile(r"database unreachable \(.+\); retrying for up to the lease \(8s\)")
    assert all(start.fullmatch(x["message"]) for x in retrying), retrying
    back = [BACK.fullmatch(x["message"]) for x in lines if x["event"] == "db_back"]
    assert all(back), [x["message"] for x in lines if x["event"] == "db_back"]
    seconds = [float(m["seconds"]) for m in back if m is not None]
    # measured from the first failure seen to the first answer after the last one: at
    # least the cut, and well within the lease (under load, a 0.4 s cut can read 2 s)
    assert all(s < 8.0 for s in seconds) and seconds[3] >= 2.0, seconds
    print(f"{len(lines)} lines for 25 tasks and 4 cuts; the long cut: {back[3][0]}")  # type: ignore[index]


# -- a network that drops packets without a word -----------------------------------------------

_CLONE_NEWNET = 0x40000000


class Blackhole(Outage):
    """A relay to PostgreSQL whose client side is in a network namespace of its own
    (the worker runs there too, through ``prefix``). :meth:`drop` takes that namespace's
    loopback down: packets vanish, nobody gets a reset or an error, both ends of every
    connection stay open; :meth:`pick_up` brings it back."""

    def __init__(self) -> None:
        self.holder = subprocess.Popen(["unshare", "--net", "sleep", "600"])
        self.netns = f"/proc/{self.holder.pid}/ns/net"
        deadline = time.monotonic() + 10
        while os.readlink(self.netns) == os.readlink("/proc/self/ns/net"):
            if self.holder.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("unshare --net failed")
            time.sleep(0.01)
        self._ip("up")
        super().__init__()

    @property
    def prefix(self) -> list[str]:
        return ["nsenter", f"--net={self.netns}"]

    def _ip(self, state: str) -> None:
        subprocess.run([*self.prefix, "ip", "link", "set", "lo", state], check=True)

    def drop(self) -> None:
        self._ip("down")

    def pick_up(self) -> None:
        self._ip("up")

    def _listen(self) -> socket.socket:
        made: list[socket.socket | BaseException] = []

        def inside() -> None:  # setns moves this thread only
            try:
                libc = ctypes.CDLL(None, use_errno=True)
                fd = os.open(self.netns, os.O_RDONLY)
                try:
                    if libc.setns(fd, _CLONE_NEWNET) != 0:
                        raise OSError(ctypes.get_errno(), "setns")
                finally:
                    os.close(fd)
                made.append(super(Blackhole, self)._listen())
            except BaseException as exc:
                made.append(exc)

        thread = threading.Thread(target=inside)
        thread.start()
        thread.join()
        if isinstance(made[0], BaseException):
            raise made[0]
        return made[0]

    def close(self) -> None:
        self.cut()
        self.holder.kill()
        self.holder.wait(5)


@pytest.fixture
def blackhole() -> Iterator[Blackhole]:
    try:
        hole = Blackhole()
    except (OSError, RuntimeError, subprocess.CalledProcessError) as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"no network namespace here (root and unshare/nsenter/ip needed): {exc}")
    try:
        yield hole
    finally:
        hole.close()


def test_a_silently_dropped_network_fails_connections_within_the_lease(
    workers: Workers, client_of: Callable[..., Client], blackhole: Blackhole
) -> None:
    lease, items = 9.0, 40  # connections with unanswered packets fail after 3 s
    hole = workers.start(
        "hole",
        lease=lease,
        concurrency=2,
        delay=0.5,
        items=items,
        dsn=blackhole.dsn,
        prefix=blackhole.prefix,
        args=["--log-format", "json"],
        wait=False,
    )
    # a worker that reaches the database, to take the turns over in the end
    workers.start("direct", lease=lease, concurrency=2, delay=0.5, items=items, wait=False)
    client = client_of(workers, items=items)
    workers.wait_ready("hole")
    workers.wait_ready("direct")
    workflow_id = client.start()
    wait_for(lambda: running_on(workers, "hole") >= 1, "a turn running behind the relay")
    log = workers.logs["hole"]

    # Shorter than the lease: the dead connections fail, new ones are made after (the
    # renewal waits up to 3 s on a dead one, then tries again every 1.5 s: 6 s at worst).
    blackhole.drop()
    time.sleep(4.0)
    blackhole.pick_up()
    wait_for(lambda: '"event": "db_back"' in log.read_text(), "the db_back line", timeout=20)
    assert hole.poll() is None  # rode it out

    # Longer than the lease: the worker counts itself lost and exits, it does not hang.
    wait_for(lambda: running_on(workers, "hole") >= 1, "a turn running behind the relay again")
    blackhole.drop()
    dropped = time.monotonic()
    assert hole.wait(30) == 3
    took = time.monotonic() - dropped
    print(f"worker behind the dropped network exited {took:.1f}s after the drop")
    assert took < lease + 5, took  # the lease, a heartbeat, and the 3 s to fail a call
    run = client.wait(workflow_id)
    assert_every_result_stored_once(workers, run, items, parked_ok=True)
    failed = query(workers, "SELECT count(*) FROM transitions WHERE to_state = 'failed'")
    assert failed == [(0,)]

    lines = json_lines(log)
    said = events(lines)
    assert said.count("db_retrying") == 2 and said.count("db_back") == 1, said
    assert said[-3:] == ["lost_lease", "db_still_down", "exiting"], said
    first = next(x for x in lines if x["event"] == "db_retrying")
    back = next(x for x in lines if x["event"] == "db_back")
    # the first outage was seen as what it was: packets unanswered, not a refusal
    assert "timed out" in json.dumps([first, back]).lower(), (first, back)
    lost, _, exiting = lines[-3:]
    assert lost["level"] == "ERROR" and lost["message"].startswith(
        f"could not renew the lease for {lease:g}s ("
    )
    assert exiting == exiting | {
        "level": "ERROR",
        "message": "worker hole lost its lease; its turns were taken over (status 3)",
        "fields": {"status": 3, "why": "worker hole lost its lease; its turns were taken over"},
    }


# -- kills and rejections ----------------------------------------------------------------------


def test_repeated_kills_and_rejections_submit_every_task_once(
    workers: Workers, client_of: Callable[..., Client]
) -> None:
    items, every = 36, 4
    env = {"TOOLDECK_TEST_REJECT_EVERY": str(every)}

    def start(name: str, wait: bool = True) -> None:
        workers.start(name, lease=3, concurrency=2, delay=0.5, items=items, env=env, wait=wait)

    for name in ("k1", "k2", "k3"):
        start(name, wait=False)
    client = client_of(workers, items=items)
    for name in ("k1", "k2", "k3"):
        workers.wait_ready(name)
    workflow_id = client.start()
    # Three kills, each of a worker with turns in flight: restarted under its id, under
    # a new id (its turns wait for the lease), and under its id again.
    for victim, replacement in (("k1", "k1"), ("k2", "k4"), ("k3", "k3")):
        wait_for(lambda v=victim: running_on(workers, v) >= 1, f"a turn running on {victim}")
        workers.kill(victim)
        start(replacement, wait=False)
    run = client.wait(workflow_id)
    assert_every_result_stored_once(workers, run, items)
    rejected = [n for n in range(items) if n % every == 0]
    assert query(workers, "SELECT count(*) FROM rejections") == [(len(rejected),)]
    for n in rejected:
        assert run.task(f"item_{n:02d}").attempts == 2  # one rejection, one accepted
    # and the logs: no task said submitted twice, across every worker's log (a worker
    # killed between storing a result and printing its line never prints it)
    submitted = [
        line["task"]
        for path in workers.log_dir.glob("*.log")
        for line in text_lines(path)
        if line["event"] == "submitted"
    ]
    assert len(set(submitted)) == len(submitted) >= items + 1 - 3, sorted(submitted)


def test_the_client_shows_each_rejection_and_each_takeover(workers: Workers) -> None:
    """``workflows run --workers``, its output a file (no live display): one line for the
    rejection with its reason and one for the takeover with the history's reason, before
    the task's submitted line."""
    workers.start("first", lease=3, items=1, script=REJECT_SCRIPT, wait=False)
    assert workers.tables is not None
    workers.tables.wait()  # the client queues the run there, while the worker starts
    out = workers.log_dir / "client.out"
    command = [
        sys.executable,
        "-c",
        "from tooldeck.cli import main; main()",
        *workers.run_args(REJECT_SCRIPT, timeout=120),
    ]
    env = {**os.environ, "COLUMNS": "200", "TOOLDECK_WORKFLOWS_DSN": ""}
    with out.open("wb") as sink:
        client = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=env)
    try:
        workers.wait_ready("first")
        wait_for(lambda: query(workers, "SELECT count(*) FROM rejections") == [(1,)], "rejected")
        workers.kill("first")  # its turn hangs after the rejection
        workers.start("second", lease=3, items=1, script=REJECT_SCRIPT)
        assert client.wait(120) == 0, out.read_text()
    finally:
        if client.poll() is None:
            client.kill()
    lines = out.read_text().splitlines()
    rejected = [x for x in lines if x.startswith("! pick: submission 1 of 3 rejected: ")]
    assert len(rejected) == 1 and "less than the minimum of 10" in rejected[0], lines
    took_over = (
        "! pick: turn restarted: the worker first was lost; DBOS restarted the turn on second"
    )
    restarted = [x for x in lines if x.startswith(took_over)]
    assert len(restarted) == 1, lines
    submitted = next(i for i, x in enumerate(lines) if x.startswith("✓ pick: submitted"))
    assert lines.index(rejected[0]) < lines.index(restarted[0]) < submitted, lines


# -- every event, both formats, without a database ---------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


CREATED = 1_764_620_321.5  # a fixed moment


def _record(
    name: str, level: int, message: str, exc: BaseException | None = None, **extra: Any
) -> logging.LogRecord:
    info = (type(exc), exc, exc.__traceback__) if exc is not None else None
    record = logging.LogRecord(name, level, __file__, 1, message, (), info)
    record.created = CREATED
    for key, value in extra.items():
        setattr(record, key, value)
    return record


def _raised(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:
        return caught


def test_the_log_handler_folds_an_outage_and_keeps_each_line_one_line() -> None:
    out, clock = io.StringIO(), Clock()
    log = WorkerLog("w1", lease=15, settle=1.0, stream=out, clock=clock)
    db = "tooldeck.workflows.worker"
    refused = 'connection failed: connection to server at "h", port 1 failed: Connection refused'
    log.handle(_record(db, logging.INFO, "hello\n  there", event="ready", fields={"a": 1}))
    log.handle(_record("dbos", logging.INFO, "DBOS launched"))  # info: only with -v
    log.handle(_record("dbos", logging.WARNING, "Deprecated thing\nsecond line"))
    log.handle(_record(db, logging.DEBUG, "lease renewed", event="db_ok"))  # no outage: nothing
    log.handle(
        _record(
            db,
            logging.WARNING,
            "could not renew",
            event="db_retrying",
            fields={"source": "lease renewal", "error": f"OperationalError: {refused}"},
        )
    )
    for n in range(37):
        clock.now += 0.1
        log.handle(_record("dbos", logging.WARNING, f"Exception {n}: (psycopg.OperationalError) x"))
    log.handle(_record("dbos", logging.ERROR, "Traceback (most recent call last):\n  File..."))
    log.handle(_record(db, logging.DEBUG, "ok", event="db_ok"))  # 0.1 s after: not settled
    clock.now += 1.5
    log.handle(_record(db, logging.DEBUG, "ok", event="db_ok"))  # settled: over
    log.handle(_record("tooldeck.x", logging.DEBUG, "debug: only with -v"))
    crash = _raised(ValueError("bad\nvalue"))
    log.handle(_record("tooldeck.x", logging.ERROR, "it broke", crash))
    log.handle(_record("tooldeck.x", logging.ERROR, "said elsewhere", _raised(ProviderError("x"))))
    clock.now += 1
    log.handle(_record(db, logging.WARNING, "again", event="db_retrying", fields={}))
    log.finish()
    stamp = f"{datetime.fromtimestamp(CREATED).astimezone():%Y-%m-%d %H:%M:%S}.500 "
    said = out.getvalue().splitlines()
    assert said[0].startswith(stamp)  # a record's own time; a folded outage's: its end
    assert all(TEXT_LINE.match(line) for line in said)
    lines = [line.split(" ", 2)[2] for line in said]
    assert lines == [
        "INFO w1 ready: hello there",
        "WARNING w1 dbos: Deprecated thing",
        "WARNING w1 db_retrying: database unreachable (lease renewal: OperationalError: "
        f"{refused}); retrying for up to the lease (15s)",
        "INFO w1 db_back: database back after 3.7s; 1 call(s) of this worker retried, "
        "38 DBOS errors folded (first: Exception 0: (psycopg.OperationalError) x; last: "
        "Traceback (most recent call last):)",
        "ERROR w1 log: it broke (ValueError: bad value)",
        "WARNING w1 db_retrying: database unreachable (database: again); retrying for up "
        "to the lease (15s)",
        "WARNING w1 db_still_down: database unreachable for 0.0s at exit; 1 call(s) of "
        "this worker retried",
    ]


def test_json_lines_carry_the_fields_and_the_traceback_only_with_verbose() -> None:
    for verbose in (False, True):
        out = io.StringIO()
        log = WorkerLog("w1", fmt="json", verbose=verbose, stream=out, clock=Clock())
        crash = _raised(ValueError("bad"))
        log.handle(
            _record(
                "tooldeck.cli.worker",
                logging.ERROR,
                "after 1.0 s: boom",
                crash,
                event="failed",
                task="t",
                run="wf-1",
                fields={"seconds": 1.0},
            )
        )
        (line,) = out.getvalue().splitlines()
        record = json.loads(line)
        when = datetime.fromtimestamp(CREATED).astimezone()
        assert record["ts"] == when.isoformat(timespec="milliseconds")
        assert record["level"] == "ERROR"
        assert {k: record[k] for k in ("worker", "event", "task", "run", "fields")} == {
            "worker": "w1",
            "event": "failed",
            "task": "t",
            "run": "wf-1",
            "fields": {"seconds": 1.0},
        }
        if verbose:
            assert record["message"] == "after 1.0 s: boom"
            assert "Traceback (most recent call last)" in record["traceback"]
        else:
            assert record["message"] == "after 1.0 s: boom (ValueError: bad)"
            assert "traceback" not in record


def test_every_event_is_documented() -> None:
    doc = (Path(__file__).parent.parent / "docs" / "workflows.md").read_text()
    for event in EVENTS:
        assert f"`{event}`" in doc, event


def test_a_retried_call_that_met_the_database_down_is_part_of_the_outage(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The worker's own retries (the turn, advancing) of a call the database did not answer
    are ``db_retrying`` records the log folds into the outage, then ``db_ok``; any other
    failure is a warning line of its own."""
    import asyncio

    import psycopg

    from tooldeck.workflows.worker import _retried

    failures: list[Exception] = [psycopg.OperationalError("server closed the connection")]

    async def flaky() -> str:
        if failures:
            raise failures.pop()
        return "done"

    with caplog.at_level(logging.DEBUG, logger="tooldeck.workflows.worker"):
        assert asyncio.run(_retried("advancing after wf-1:a", flaky, 3, 0.01)) == "done"
        failures.append(ValueError("a bug"))
        assert asyncio.run(_retried("advancing after wf-1:b", flaky, 3, 0.01)) == "done"
    said = [(r.levelname, getattr(r, "event", None), r.getMessage()) for r in caplog.records]
    assert said == [
        (
            "DEBUG",
            "db_retrying",
            "advancing after wf-1:a failed (try 1 of 3), again in 0.01s: "
            "OperationalError: server closed the connection",
        ),
        ("DEBUG", "db_ok", "advancing after wf-1:a succeeded after 2 tries"),
        (
            "WARNING",
            None,
            "advancing after wf-1:b failed (try 1 of 3), again in 0.01s: ValueError: a bug",
        ),
    ]


def test_a_scheduler_log_folds_tooldecks_own_database_warnings_and_names_its_role() -> None:
    """The same handler for ``tooldeck scheduler``: its id under ``scheduler`` in JSON, its
    own retry phrase, and a warning of tooldeck's whose message says the database is away
    (a job manager's round; the driver's message spans lines) folded into the outage;
    another warning stays one line."""
    out, clock = io.StringIO(), Clock()
    log = WorkerLog(
        "sch1",
        role="scheduler",
        fmt="json",
        lease=3,
        retry="ticking again every 1s",
        stream=out,
        clock=clock,
    )
    dropped = (
        "job manager sch1: PostgreSQL dropped the connection: consuming input failed: server "
        "closed the connection unexpectedly\n\tThis probably means the server terminated "
        "abnormally\n\tbefore or while processing the request."
    )
    log.handle(_record("tooldeck.jobs", logging.WARNING, dropped))
    clock.now += 0.5
    log.handle(_record("tooldeck.jobs", logging.WARNING, dropped))
    log.handle(_record("tooldeck.jobs", logging.WARNING, "job job-1 is lost: its process stopped"))
    clock.now += 0.5
    log.handle(_record("tooldeck.schedules", logging.DEBUG, "tick done", event="db_ok"))
    clock.now += 1.5
    log.handle(_record("tooldeck.schedules", logging.DEBUG, "tick done", event="db_ok"))
    said = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(x["scheduler"], x["level"], x["event"], x["message"]) for x in said] == [
        (
            "sch1",
            "WARNING",
            "db_retrying",
            "database unreachable (tooldeck.jobs: job manager sch1: PostgreSQL dropped the "
            "connection: consuming input failed: server closed the connection unexpectedly "
            "This probably means the server terminated abnormally before or while "
            "processin...); ticking again every 1s",
        ),
        ("sch1", "WARNING", "log", "job job-1 is lost: its process stopped"),
        (
            "sch1",
            "INFO",
            "db_back",
            "database back after 1.0s; 2 call(s) of this scheduler retried",
        ),
    ]
    assert all("worker" not in x for x in said)
