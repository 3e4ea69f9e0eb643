"""The log of ``tooldeck worker`` and ``tooldeck scheduler``: one line per state change, as
text or JSON, outages folded.

Every line such a process prints while it runs has the same shape. Text (the default)::

    2026-12-01 21:18:39.123 INFO w1 claimed item_02 (run wf-26898d46d0c6)
    2026-12-01 21:18:41.959 WARNING w1 db_retrying: database unreachable (lease renewal: ...)

that is ``<local time> <LEVEL> <id> <event>[ <task> (run <run>)][: <message>]``; with
``--log-format json`` one JSON object per line with the keys ``ts`` (ISO 8601 with the
offset), ``level``, ``worker`` (``scheduler`` in a scheduler's log: the process's id),
``event``, ``task``, ``run`` (``null`` when no task is concerned), ``message`` and
``fields`` (the event's values), plus ``traceback`` with ``-v``. The worker's events are
listed in :data:`EVENTS`, the scheduler's in :data:`tooldeck.cli.schedules.EVENTS`.

A record names its event in its ``extra`` (``event``, ``task``, ``run``, ``fields``: see
:mod:`tooldeck.workflows.worker`); DBOS's own records become ``dbos`` lines and any other
record a ``log`` line. No line is wrapped (nothing here knows a terminal's width) and a
message is one line: an exception is summarised as ``(Type: message)`` at the end, its
traceback only with ``-v``.

**Outages.** The first sign that the database is away (a store call, a lease renewal or
a tick that failed on a dropped connection, a warning of tooldeck's that says so, or
DBOS saying so) prints one ``db_retrying`` line; from then on DBOS's warnings and the
process's own failed calls are counted, not printed,
until the database answers again (a lease renewal or a retried store call succeeds, with
no new failure for ``settle`` seconds: a third of the lease by default, the time a call
caught in the outage takes to fail), which prints one ``db_back`` line with the outage's
length and the counts (the first and the last DBOS message kept). A process that
exits during an outage prints ``db_still_down`` instead. With ``-v`` every folded line is
printed as well.

:func:`routed` sends every log record of the process through the handler while it runs.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, TextIO

from ..errors import ProviderError

__all__ = ["EVENTS", "LogFormat", "WorkerLog", "dbos_line", "routed"]

LogFormat = Literal["text", "json"]

EVENTS: dict[str, str] = {
    "ready": "the worker serves the queue (its database, schema, turns at once, lease)",
    "claimed": "a task's turn started here",
    "recovered": "a turn started here for a task still running: a lost worker's, this "
    "worker's own before a restart, or a step DBOS ran again (the history's reason)",
    "rejected": "a submission was rejected (submission N of M: the reasons)",
    "submitted": "the task's result was accepted (the turn's seconds)",
    "failed": "the task failed (why)",
    "cancelled": "the task was cancelled",
    "refused": "with --jobs: a job was not run under its creator's policy (why): it ends failed",
    "took_over": "this worker marked another one lost and re-queued its turns",
    "db_retrying": "the database stopped answering: calls are retried, for up to the lease",
    "db_back": "the database answers again: the outage's length and what was folded",
    "db_still_down": "the worker exits during an outage: its length and what was folded",
    "lost_lease": "the lease could not be renewed in time, or another worker marked this "
    "one lost: its turns are taken over",
    "stopping": "asked to stop: waiting for the running turns (up to --grace)",
    "unfinished": "stopping with turns left: they resume elsewhere or after a restart",
    "exiting": "the last line: why the worker exits and its exit status",
    "telemetry": "at start: traces and metrics exported over OTLP, or why not",
    "dbos": "a line of DBOS's own, outside an outage",
    "log": "any other log line (its logger in fields)",
}

_DB_FAILURE = re.compile(
    r"OperationalError|InterfaceError|connection (failed|refused|timed out|reset|is closed)"
    r"|Connection refused|Connection timed out|Connection reset|server closed the connection"
    r"|consuming input failed|could not (receive|send) data|terminating connection"
    r"|SSL SYSCALL|the database system is (starting up|shutting down)"
    r"|StoreUnavailable|timeout expired",
    re.IGNORECASE,
)
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*: ")  # "psycopg.OperationalError: ..."
_COLOURS = {
    "ERROR": "31",
    "WARNING": "33",
    "claimed": "36",
    "fired": "36",
    "submitted": "32",
    "db_back": "32",
}


def dbos_line(text: str) -> str:
    """One of DBOS's messages as one line: its first line, or for a message that is a
    traceback, the text before it and the last exception line."""
    text = text.strip()
    lines = text.splitlines() or [""]
    head = lines[0]
    if "Traceback (most recent call last)" in text:
        head = head.split("Traceback (most recent call last)")[0].strip()
        last = [x for x in lines[1:] if _EXCEPTION_LINE.match(x)]
        if last:
            head = f"{head} {last[-1]}".strip()
    return " ".join((head or lines[0]).split())


def _record_text(record: logging.LogRecord) -> str:
    """A record's message and its exception's, on one line."""
    text = record.getMessage()
    exc = record.exc_info[1] if record.exc_info else None
    if exc is not None:
        text += f" ({type(exc).__name__}: {exc})"
    return " ".join(text.split())


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass
class _Outage:
    started: float
    last_failure: float
    back_at: float | None = None
    calls: int = 0  # the worker's own calls that failed (store calls, lease renewals)
    dbos: int = 0  # DBOS's lines folded
    first: str = ""
    last: str = ""

    def summary(self, role: str) -> str:
        parts = [f"{self.calls} call(s) of this {role} retried"] if self.calls else []
        if self.dbos == 1:
            parts.append(f"1 DBOS error folded ({self.first})")
        elif self.dbos:
            parts.append(f"{self.dbos} DBOS errors folded (first: {self.first}; last: {self.last})")
        return ", ".join(parts) or "nothing folded"

    def fields(self, seconds: float) -> dict[str, Any]:
        return {
            "seconds": round(seconds, 3),
            "calls": self.calls,
            "dbos_errors": self.dbos,
            "first": self.first or None,
            "last": self.last or None,
        }


class WorkerLog(logging.Handler):
    """The handler of ``tooldeck worker``'s and ``tooldeck scheduler``'s log (see the
    module docstring).

    ``worker``: the id on every line; ``role``: what the process is (``worker``,
    ``scheduler``: the id's key in JSON lines, and said in ``db_back``); ``lease``: said
    in the ``db_retrying`` line, which ends with ``retry`` (default: retrying for up to
    the lease); ``settle``: seconds without a new failure before an outage is over
    (default: a third of the lease, at least 1: the worker's connect timeout and
    ``tcp_user_timeout``, so that a call caught in the outage has failed by then);
    ``stream``: where lines go (default: whatever ``sys.stderr`` is at the time);
    ``colour``: colour the event on a terminal (default: when ``stream`` is one, text
    format and ``NO_COLOR`` unset). :meth:`finish` prints a pending outage's line.
    """

    def __init__(
        self,
        worker: str,
        *,
        role: str = "worker",
        fmt: LogFormat = "text",
        verbose: bool = False,
        lease: float = 15.0,
        retry: str | None = None,
        settle: float | None = None,
        stream: TextIO | None = None,
        colour: bool | None = None,
        clock: Callable[[], float] | None = None,
    ):
        super().__init__(logging.DEBUG)
        self.worker = worker
        self.role = role
        self.fmt = fmt
        self.verbose = verbose
        self.lease = lease
        self.retry = retry or f"retrying for up to the lease ({lease:g}s)"
        self.settle = settle if settle is not None else max(1.0, lease / 3)
        self.stream = stream
        self.colour = colour
        self.clock = clock or time.monotonic
        self._outage: _Outage | None = None

    # -- what a record becomes --------------------------------------------------------------
    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._handle(record)
        except Exception:
            self.handleError(record)

    def _handle(self, record: logging.LogRecord) -> None:
        event = getattr(record, "event", None)
        fields = getattr(record, "fields", None) or {}
        now = self.clock()
        if event == "db_ok":
            self._ok(now)
            return
        if event == "db_retrying":
            error = str(fields.get("error") or record.getMessage())
            self._failed(now, str(fields.get("source") or "database"), error, dbos=False)
            if self.verbose:
                self._write(record, "db_retrying")
            return
        if record.name == "dbos" or record.name.startswith("dbos."):
            if record.levelno < logging.WARNING and not self.verbose:
                return
            text = dbos_line(record.getMessage())
            if record.levelno >= logging.WARNING and (
                self._outage is not None or _DB_FAILURE.search(text)
            ):
                self._failed(now, "DBOS", text, dbos=True)
                if not self.verbose:
                    return
            self._write(record, "dbos", message=None if self.verbose else text)
            return
        if record.levelno < logging.INFO and not self.verbose:
            return
        if (
            event is None
            and record.levelno >= logging.WARNING
            and record.name.startswith("tooldeck.")
        ):
            text = _record_text(record)
            if _DB_FAILURE.search(text):  # e.g. a job manager's round that met it down
                self._failed(now, record.name, text, dbos=False)
                if not self.verbose:
                    return
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, ProviderError) and not self.verbose:
            return  # said once, as the task's failure
        self._write(record, event or "log")

    # -- outages ------------------------------------------------------------------------------
    def _failed(self, now: float, source: str, error: str, *, dbos: bool) -> None:
        error = _short(" ".join(error.split()))
        outage = self._outage
        if outage is None:
            outage = self._outage = _Outage(started=now, last_failure=now)
            self._line(
                logging.WARNING,
                "db_retrying",
                f"database unreachable ({source}: {error}); {self.retry}",
                {"source": source, "error": error, "lease": self.lease},
            )
        outage.last_failure, outage.back_at = now, None
        if dbos:
            outage.dbos += 1
            outage.first = outage.first or error
            outage.last = error
        else:
            outage.calls += 1

    def _ok(self, now: float) -> None:
        outage = self._outage
        if outage is None:
            return
        if outage.back_at is None:
            outage.back_at = now
        if now - outage.last_failure >= self.settle:
            self._outage = None
            self._back(outage, outage.back_at)

    def _back(self, outage: _Outage, at: float) -> None:
        seconds = at - outage.started
        self._line(
            logging.INFO,
            "db_back",
            f"database back after {seconds:.1f}s; {outage.summary(self.role)}",
            outage.fields(seconds),
        )

    def finish(self) -> None:
        """Print the line of an outage still open (the worker is exiting)."""
        self.acquire()
        try:
            outage, self._outage = self._outage, None
            if outage is None:
                return
            if outage.back_at is not None:  # back, not yet settled: it is over
                self._back(outage, outage.back_at)
                return
            seconds = self.clock() - outage.started
            self._line(
                logging.WARNING,
                "db_still_down",
                f"database unreachable for {seconds:.1f}s at exit; {outage.summary(self.role)}",
                outage.fields(seconds),
            )
        finally:
            self.release()

    # -- writing ------------------------------------------------------------------------------
    def _line(
        self, level: int, event: str, message: str, fields: dict[str, Any] | None = None
    ) -> None:
        record = logging.LogRecord("tooldeck.cli.worker", level, __file__, 0, message, (), None)
        record.fields = fields or {}
        self._write(record, event)

    def _write(self, record: logging.LogRecord, event: str, message: str | None = None) -> None:
        task = getattr(record, "task", None)
        run = getattr(record, "run", None)
        fields = dict(getattr(record, "fields", None) or {})
        if event in ("log", "dbos"):
            fields.setdefault("logger", record.name)
        text = message if message is not None else record.getMessage()
        if not self.verbose or event != "dbos":
            text = " ".join(text.split())
        trace = None
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            if self.verbose:
                trace = "".join(traceback.format_exception(*record.exc_info)).rstrip()
            else:
                text += f" ({type(exc).__name__}: {_short(' '.join(str(exc).split()), 300)})"
        when = datetime.fromtimestamp(record.created).astimezone()
        if self.fmt == "json":
            line = json.dumps(
                {
                    "ts": when.isoformat(timespec="milliseconds"),
                    "level": record.levelname,
                    self.role: self.worker,
                    "event": event,
                    "task": task,
                    "run": run,
                    "message": text,
                    "fields": fields,
                    **({"traceback": trace} if trace else {}),
                },
                ensure_ascii=False,
                default=str,
            )
        else:
            subject = f" {task} (run {run})" if task else ""
            name = self._coloured(event, record.levelname)
            line = f"{when:%Y-%m-%d %H:%M:%S}.{when.microsecond // 1000:03d} "
            line += f"{record.levelname} {self.worker} {name}{subject}"
            line += f": {text}" if text else ""
            if trace:
                line += "\n" + trace
        stream = self.stream or sys.stderr
        stream.write(line + "\n")
        stream.flush()

    def _coloured(self, event: str, level: str) -> str:
        colour = self.colour
        if colour is None:
            stream = self.stream or sys.stderr
            colour = (
                self.fmt == "text"
                and not os.environ.get("NO_COLOR")
                and bool(getattr(stream, "isatty", lambda: False)())
            )
        code = _COLOURS.get(event) or _COLOURS.get(level)
        return f"\x1b[{code}m{event}\x1b[0m" if colour and code else event


@contextmanager
def routed(
    log: WorkerLog, cli_handler: logging.Handler | None, signal_loggers: Sequence[str]
) -> Iterator[None]:
    """Route every log record (tooldeck's, DBOS's, the libraries') through ``log`` while
    the process runs, in place of the CLI's own handler ``cli_handler``, with INFO shown
    and ``signal_loggers`` at DEBUG (their debug records carry the database's ups and
    downs, ``db_ok`` and ``db_retrying``); put things back after (the command may run
    inside a test)."""
    root = logging.getLogger()
    dbos = logging.getLogger("dbos")
    # With a handler of its own, DBOS adds none (its console handler would print its
    # lines in its own format); its records reach the root logger, and ``log``.
    quiet = logging.NullHandler()
    loggers = [logging.getLogger(name) for name in signal_loggers]
    saved = root.level, [x.level for x in loggers], dbos.propagate
    if cli_handler is not None:
        root.removeHandler(cli_handler)
    root.addHandler(log)
    root.setLevel(logging.INFO)
    for logger in loggers:
        logger.setLevel(logging.DEBUG)
    dbos.addHandler(quiet)
    dbos.propagate = True
    try:
        yield
    finally:
        root.removeHandler(log)
        dbos.removeHandler(quiet)
        root.setLevel(saved[0])
        for logger, level in zip(loggers, saved[1], strict=True):
            logger.setLevel(level)
        dbos.propagate = saved[2]
        if cli_handler is not None:
            root.addHandler(cli_handler)
