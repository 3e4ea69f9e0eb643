"""Conversion in a worker process that the call's deadline stops.

Reading a hostile page (a PDF whose pages share one huge content stream, HTML built to
be slow to parse) is CPU work that a thread cannot be made to stop: a deadline on the
caller's wait would return an answer while the thread went on for minutes. So
:func:`convert_page` hands :func:`.convert.convert` to a worker process and, when the
call's deadline passes or the call is aborted, kills that process and reaps it before
the call returns. The conversion ends when the call does.

- A worker is a fresh interpreter (``sys.executable``, started with :mod:`subprocess`;
  nothing is forked from the caller, so threads in the caller do not matter, and the
  caller's ``__main__`` is never imported again) running :func:`main`.
- Workers are reused: after a conversion a worker waits for the next one, at most
  :data:`IDLE_MAX` of them, each for :data:`IDLE_SECONDS`. Start-up (the interpreter,
  trafilatura and pypdf: seconds on a busy machine) is paid by the first conversion and
  again after a kill; :func:`warm`, called when a fetch starts, starts a worker while the
  page downloads.
- At most :data:`MAX_BUSY` conversions run at once; other calls wait for a turn within
  their own deadline.
- A worker's memory is limited too (:data:`MEMORY_LIMIT` of data, where the system
  enforces ``RLIMIT_DATA``: Linux): a page that needs more is answered with a note.
- A message is a frame: two sizes, a JSON header, then raw bytes. A request (on the
  worker's stdin) has the content type, URL, ``raw``, ``max_chars`` and the seconds left,
  then the body; a reply (on its stdout) has the title, details and length of the page
  or an error, and the log records the libraries wrote (logged again here), then the
  text, already cut at ``max_chars``: what the caller reads back is bounded too.
- A worker exits by itself when the seconds it was given have passed (plus
  :data:`GRACE`: a caller killed before it could kill the worker leaves nothing running
  for long), and when its stdin closes (the caller stopped it, or is gone).
- Where no interpreter can be started (a frozen application, no ``sys.executable``),
  conversion runs in a thread instead, as before: the deadline then bounds the wait,
  not the work. A warning says so once.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import math
import os
import signal
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Any

import anyio

from ...errors import TooldeckError
from .convert import Page, convert
from .documents import content_type

__all__ = ["IDLE_MAX", "IDLE_SECONDS", "MAX_BUSY", "MEMORY_LIMIT", "convert_page", "warm"]

IDLE_MAX = 2  # workers kept waiting for the next conversion
IDLE_SECONDS = 120.0  # how long an idle worker is kept
MAX_BUSY = max(2, min(8, os.cpu_count() or 2))  # conversions running at once
GRACE = 2.0  # a worker past its deadline by this much exits by itself
MEMORY_LIMIT = 1 << 30  # bytes of data a worker may hold (1 GiB)

_log = logging.getLogger("tooldeck.builtin.web")
_FRAME = struct.Struct(">II")  # sizes of the JSON header and of the bytes after it
# The worker's first lines. It needs the conversion modules only, not the tool registry
# that the ``tooldeck.builtin`` and ``tooldeck.builtin.web`` packages load when imported
# (most of a second): those two are made bare packages, so importing this module and
# :mod:`.convert` runs no ``__init__`` but tooldeck's own (which imports nothing).
_BOOT = """\
import json, os, sys, types
sys.path[:0] = json.loads(sys.argv[1])
import tooldeck
for name in ("tooldeck.builtin", "tooldeck.builtin.web"):
    parent, _, leaf = name.rpartition(".")
    package = types.ModuleType(name)
    package.__path__ = [os.path.join(sys.modules[parent].__path__[0], leaf)]
    sys.modules[name] = package
from tooldeck.builtin.web.worker import main
main(int(sys.argv[2]))
"""


class WorkerGone(TooldeckError):
    """The worker process ended before it answered."""


@dataclass(eq=False)
class _Worker:
    proc: subprocess.Popen[bytes]
    idle_since: float = 0.0
    exchanging: bool = False
    killed: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def close_pipes(self) -> None:
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()

    def kill(self) -> None:
        """Kill and reap the process (at once: SIGKILL cannot be ignored)."""
        with self.lock:
            self.killed = True
            exchanging = self.exchanging
        with contextlib.suppress(OSError):  # it has ended already
            self.proc.kill()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover - a process SIGKILL missed
            _log.warning("conversion worker %d did not stop when killed", self.proc.pid)
        if not exchanging:  # else the thread that reads its reply closes them
            self.close_pipes()

    def stop(self) -> None:
        """Ask an idle worker to exit (its stdin closes), then make sure it did."""
        self.close_pipes()
        try:
            self.proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            self.kill()


class _Pool:
    """The workers of this process: idle ones, and how many conversions run."""

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.idle: list[_Worker] = []
        self.busy = 0
        self.reaper: threading.Thread | None = None
        self.unavailable: str | None = None  # why no worker can be started

    def forget(self) -> None:
        """In a forked child: the parent's workers are not this process's."""
        self.lock = threading.Condition()
        self.idle, self.busy, self.reaper = [], 0, None

    def start(self) -> _Worker | None:
        if self.unavailable is not None:
            return None
        if getattr(sys, "frozen", False) or not sys.executable:
            self._cannot("this is a frozen application or has no Python interpreter")
            return None
        path = [p for p in sys.path if isinstance(p, str) and p]
        try:
            proc = subprocess.Popen(
                [sys.executable, "-P", "-c", _BOOT, json.dumps(path), str(MEMORY_LIMIT)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                start_new_session=os.name == "posix",
                creationflags=getattr(subprocess, "CREATE_NO_WINDOW", 0),
            )
        except OSError as exc:
            self._cannot(f"{sys.executable} could not be started: {exc}")
            return None
        return _Worker(proc)

    def _cannot(self, why: str) -> None:
        self.unavailable = why
        _log.warning(
            "web_fetch converts pages in a thread: no worker process (%s); the deadline "
            "then bounds the wait for a conversion, not the conversion",
            why,
        )

    def warm(self) -> None:
        """Start a worker now if none is idle and one may run."""
        with self.lock:
            if self.idle or self.busy >= MAX_BUSY:
                return
        worker = self.start()
        if worker is not None:
            self.put_back(worker)

    async def take(self) -> _Worker | None:
        """Wait for a turn to convert; an idle worker, if one is waiting.

        Every turn taken is ended by :meth:`done`.
        """
        while True:
            with self.lock:
                if self.busy < MAX_BUSY:
                    self.busy += 1
                    found = None
                    while self.idle and found is None:
                        found = self.idle.pop()
                        if found.proc.poll() is not None:  # it died while it waited
                            found.kill()
                            found = None
                    return found
            await anyio.sleep(0.05)

    def done(self, worker: _Worker | None, keep: bool) -> None:
        """The end of a turn: ``worker`` goes back to wait, or is killed."""
        with self.lock:
            self.busy -= 1
        if worker is None:
            return
        if keep and worker.proc.poll() is None:
            self.put_back(worker)
        else:
            worker.kill()

    def put_back(self, worker: _Worker) -> None:
        surplus: _Worker | None = None
        with self.lock:
            if len(self.idle) >= IDLE_MAX:
                surplus = worker
            else:
                worker.idle_since = time.monotonic()
                self.idle.append(worker)
                if self.reaper is None:
                    self.reaper = threading.Thread(
                        target=self._reap, name="tooldeck-web-workers", daemon=True
                    )
                    self.reaper.start()
                self.lock.notify_all()
        if surplus is not None:
            surplus.stop()

    def _reap(self) -> None:
        """Stop workers idle for longer than :data:`IDLE_SECONDS`; end when none is idle."""
        while True:
            with self.lock:
                if not self.idle:
                    self.reaper = None
                    return
                now = time.monotonic()
                expired = [w for w in self.idle if now - w.idle_since >= IDLE_SECONDS]
                for worker in expired:
                    self.idle.remove(worker)
                if not expired:
                    first = min(w.idle_since for w in self.idle)
                    self.lock.wait(timeout=first + IDLE_SECONDS - now)
            for worker in expired:
                worker.stop()

    def close(self) -> None:
        """Stop every idle worker (at exit)."""
        with self.lock:
            idle, self.idle = self.idle, []
            self.lock.notify_all()
        for worker in idle:
            worker.stop()


_pool = _Pool()
atexit.register(lambda: _pool.close())
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: _pool.forget())


def warm() -> None:
    """Have a worker ready (started now, while the caller downloads a page)."""
    _pool.warm()


def _frame(header: dict[str, Any], data: bytes) -> bytes:
    meta = json.dumps(header).encode()
    return _FRAME.pack(len(meta), len(data)) + meta + data


def _read_frame(stream: IO[bytes]) -> tuple[dict[str, Any], bytes] | None:
    """The next frame on ``stream``; ``None`` at its end (raises ``EOFError`` inside one)."""
    head = stream.read(_FRAME.size)  # a buffered read: all of it, or the stream ended
    if not head:
        return None
    if len(head) < _FRAME.size:
        raise EOFError
    meta_size, data_size = _FRAME.unpack(head)
    meta = stream.read(meta_size)
    data = stream.read(data_size)
    if len(meta) < meta_size or len(data) < data_size:
        raise EOFError
    header: dict[str, Any] = json.loads(meta)
    return header, data


def _exchange(worker: _Worker, request: bytes) -> tuple[dict[str, Any], bytes]:
    """Send one request and read its reply (in a thread; a kill ends the wait)."""
    proc = worker.proc
    assert proc.stdin is not None and proc.stdout is not None
    with worker.lock:
        if worker.killed:
            raise WorkerGone("killed")
        worker.exchanging = True
    try:
        proc.stdin.write(request)
        proc.stdin.flush()
        reply = _read_frame(proc.stdout)
        if reply is None:
            raise EOFError
        return reply
    except (OSError, EOFError, ValueError) as exc:
        raise WorkerGone(type(exc).__name__) from None
    finally:
        with worker.lock:
            worker.exchanging = False
            killed = worker.killed
        if killed:
            worker.close_pipes()


async def convert_page(body: bytes, header: str, url: str, raw: bool, max_chars: int) -> Page:
    """:func:`.convert.convert` in a worker process, killed if the call ends first; the
    text comes back cut at ``max_chars`` (:meth:`.convert.Page.cut`).

    The seconds it may take are those left in the caller's cancel scope
    (``anyio.fail_after``); cancelling the caller kills the worker before this returns.
    """
    worker = await _pool.take()
    kept = False
    try:
        if worker is None:
            worker = _pool.start()
        if worker is None:
            page = await anyio.to_thread.run_sync(
                convert, body, header, url, raw, abandon_on_cancel=True
            )
            return page.cut(max_chars)
        left = anyio.current_effective_deadline() - anyio.current_time()
        request = _frame(
            {
                "header": header,
                "url": url,
                "raw": raw,
                "max_chars": max_chars,
                "seconds": left if math.isfinite(left) else None,
            },
            body,
        )
        try:
            reply, text = await anyio.to_thread.run_sync(
                _exchange, worker, request, abandon_on_cancel=True
            )
        except WorkerGone:  # it died by itself (a crash, the system's OOM killer)
            worker.kill()
            return _failed(header, f"the converter stopped (exit status {worker.proc.returncode})")
        kept = True
    finally:
        _pool.done(worker, kept)
    for name, level, message in reply.get("logs", []):
        logging.getLogger(name).log(level, "%s", message)
    if "error" in reply:
        return _failed(header, str(reply["error"]))
    chars = reply["chars"]
    return Page(
        str(reply["title"]),
        text.decode("utf-8", "surrogatepass"),
        dict(reply["details"]),
        None if chars is None else int(chars),
    )


def _failed(header: str, why: str) -> Page:
    media, _ = content_type(header)
    return Page(
        "",
        f"[The page could not be converted: {why}.]",
        {"media_type": media or None, "format": "error"},
    )


# -- the worker process ---------------------------------------------------------------------


class _Records(logging.Handler):
    """The log records of one conversion, sent back with its reply."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[tuple[str, int, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        if len(self.records) < 20:
            self.records.append((record.name, record.levelno, record.getMessage()[:500]))

    def take(self) -> list[tuple[str, int, str]]:
        taken, self.records = self.records, []
        return taken


def _warm_up() -> None:
    """Import what conversions use, before the first request (which is downloading)."""
    for name in ("trafilatura", "charset_normalizer", "pypdf"):
        with contextlib.suppress(Exception):  # not installed (the web extra) or broken:
            # the conversion that needs it says so
            __import__(name)


def _limit_memory(limit: int) -> None:
    try:
        import resource

        resource.setrlimit(
            resource.RLIMIT_DATA, (limit, resource.getrlimit(resource.RLIMIT_DATA)[1])
        )
    except (ImportError, AttributeError, ValueError, OSError):  # no such limit here
        pass


def main(memory_limit: int = MEMORY_LIMIT) -> None:
    """The worker: read requests on stdin, answer each on stdout, until stdin closes."""
    if hasattr(signal, "SIGINT"):
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the caller decides when this ends
    _limit_memory(memory_limit)
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # whatever a library prints cannot corrupt a reply
    requests = sys.stdin.buffer
    records = _Records()
    logging.getLogger().addHandler(records)
    logging.captureWarnings(True)
    _warm_up()
    while True:
        try:
            request = _read_frame(requests)
        except EOFError:
            request = None
        if request is None:  # the caller closed our stdin (or is gone)
            return
        meta, body = request
        seconds = meta.get("seconds")
        watchdog = threading.Timer((seconds or 0) + GRACE, os._exit, (3,))
        watchdog.daemon = True
        if seconds is not None:
            watchdog.start()
        text = b""
        try:
            page = convert(body, meta["header"], meta["url"], bool(meta["raw"]))
            page = page.cut(int(meta["max_chars"]))
            reply: dict[str, Any] = {
                "title": page.title,
                "details": page.details,
                "chars": page.chars,
            }
            text = page.text.encode("utf-8", "surrogatepass")
        except MemoryError:
            reply = {"error": f"reading it needs more than the {memory_limit >> 20} MiB allowed"}
        except Exception as exc:  # a library's bug on a hostile page: one line back
            reply = {"error": f"{type(exc).__name__}: {exc}"[:300]}
        finally:
            watchdog.cancel()
        reply["logs"] = records.take()
        replies.write(_frame(reply, text))
        replies.flush()
