"""The gateway's stdin and stdout, used by the event loop without a thread, so that
stopping the gateway can stop them, and an answer goes out at once.

The MCP SDK's ``stdio_server`` reads stdin in a worker thread; a read that waits for the
client's next line cannot be cancelled, so a gateway told to stop (SIGTERM) while its
client keeps stdin open would wait for that line forever. :class:`WireStdin` reads the
same bytes with the event loop (a reader callback on a duplicate of fd 0), whose wait a
cancel scope stops at once. While it is open, fd 0 itself points at the null device (as
the SDK does), so a child process never reads the client's messages.

It is used where the loop can wait on fd 0: a pipe, a socket or a terminal on POSIX
(:func:`wire_stdin` gives ``None`` otherwise, and the SDK's own reader is used).

The answers go out the same way (:class:`WireStdout`): the SDK writes each message and
flushes it in a worker thread, two hand-offs to another thread and back per message;
written by the loop, a message goes out at once, and a client that stops reading holds
up only the writer, which a stop cancels. While it is open, fd 1 points at stderr (as
the SDK does), so stray output never lands on the wire.

:func:`stdin_problem` says when no client can be at the other end (stdin closed, or the
null device), which ``tooldeck serve`` reports as a start-up error.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import stat
import sys
from collections import deque
from collections.abc import AsyncIterator

import anyio

from .._lines import Lines

__all__ = [
    "MAX_MESSAGE",
    "TOO_LONG",
    "WireStdin",
    "WireStdout",
    "stdin_problem",
    "wire_stdin",
    "wire_stdout",
]

_CHUNK = 65_536
_AHEAD = 16  # chunks read ahead of the reader at most (:class:`_Reader`)
_log = logging.getLogger("tooldeck.gateway")


MAX_MESSAGE = 32 << 20
"""The longest message (bytes, one line) read from the client: a longer one is dropped
up to its newline and read as :data:`TOO_LONG` (answered with a JSON-RPC error)."""
TOO_LONG = "\x00tooldeck: message too long"
"""Yielded (this very object) by :class:`WireStdin` in place of a line over the limit."""


def _Lines(limit: int) -> Lines:
    return Lines(limit, TOO_LONG)


class WireStdin:
    """An async iterator over stdin's lines (text, newline dropped), after the bytes
    ``read`` already (:mod:`._handshake`); :meth:`close` puts fd 0 back."""

    def __init__(self, read: bytes = b"", limit: int = MAX_MESSAGE) -> None:
        import fcntl

        self._read = read
        self.limit = limit
        self.fd = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
        self._blocking = os.get_blocking(self.fd)
        os.set_blocking(self.fd, False)
        null = os.open(os.devnull, os.O_RDONLY)
        try:
            os.dup2(null, 0)
        finally:
            os.close(null)

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        lines = _Lines(self.limit)
        for line in lines.feed(self._read):
            yield line
        reader = _Reader(self.fd)
        try:
            while chunk := await reader.chunk():
                for line in lines.feed(chunk):
                    yield line
        finally:
            reader.stop()
        for line in lines.end():
            yield line

    def close(self) -> None:
        try:
            os.set_blocking(self.fd, self._blocking)
            os.dup2(self.fd, 0)
        finally:
            os.close(self.fd)


class _Reader:
    """The chunks of ``fd`` (``b""`` at its end), read by a callback that stays with the
    loop while the reader keeps up (``anyio.wait_readable`` adds and removes it for each
    chunk: two ``epoll_ctl`` calls per message). At most :data:`_AHEAD` chunks are read
    ahead; then reading pauses until they are taken. :meth:`chunk` is cancelled as any
    wait (a cancel scope cancels the task)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.loop = asyncio.get_running_loop()
        self.chunks: deque[bytes] = deque()
        self.failed: OSError | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.reading = False
        self.ended = False

    def _ready(self) -> None:
        try:
            chunk = os.read(self.fd, _CHUNK)
        except BlockingIOError:
            return
        except OSError as exc:  # raised to the reader, after what came before
            self.failed, chunk = exc, b""
        self.chunks.append(chunk)
        if not chunk:
            self.ended = True
        if not chunk or len(self.chunks) >= _AHEAD:
            self.stop()
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def chunk(self) -> bytes:
        while not self.chunks:
            if not self.reading and not self.ended:
                self.loop.add_reader(self.fd, self._ready)
                self.reading = True
            self.waiter = self.loop.create_future()
            try:
                await self.waiter
            finally:
                self.waiter = None
        chunk = self.chunks.popleft()
        if not chunk and self.failed is not None:
            raise self.failed
        return chunk

    def stop(self) -> None:
        if self.reading:
            self.reading = False
            self.loop.remove_reader(self.fd)


class WireStdout:
    """stdout written by the event loop: the SDK's ``stdio_server(stdout=...)`` (its
    ``write`` and ``flush``); the SDK's answer to the request ``answered`` already
    (:mod:`._handshake`) is not sent again. :meth:`close` puts fd 1 back."""

    def __init__(self, answered: int | str | None = None) -> None:
        import fcntl

        self._answered = answered
        self._lock = anyio.Lock()
        self.fd = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
        self._blocking = os.get_blocking(self.fd)
        os.set_blocking(self.fd, False)
        try:
            os.dup2(2, 1)  # stray output goes where the log goes
        except OSError:
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(null, 1)
            finally:
                os.close(null)

    async def write(self, text: str) -> None:
        if self._answered is not None and self._again(text):
            return
        await self.send(text.encode("utf-8"))

    async def send(self, data: bytes) -> None:
        """Write ``data`` (whole messages, newline-ended) as one piece: two writers never
        interleave (a message left half written by a full pipe holds the others back)."""
        view = memoryview(data)
        lock = self._lock
        if not lock.locked():  # nobody is halfway through a message: write at once
            with contextlib.suppress(BlockingIOError):
                view = view[os.write(self.fd, view) :]
            if not view:
                return
            lock.acquire_nowait()  # no await since locked() said no: ours
        else:
            await lock.acquire()
        try:
            while view:
                try:
                    view = view[os.write(self.fd, view) :]
                except BlockingIOError:
                    await anyio.wait_writable(self.fd)
        finally:
            lock.release()

    def _again(self, text: str) -> bool:
        """Whether ``text`` is the SDK's answer to the request answered already."""
        try:
            message = json.loads(text)
        except ValueError:
            return False
        if not isinstance(message, dict) or "id" not in message:
            return False
        if message["id"] != self._answered or type(message["id"]) is not type(self._answered):
            return False
        self._answered = None
        if "error" in message:  # the early answer said yes: the session may not work
            _log.warning("initialize was answered early, but the MCP SDK refused it: %s", text)
        return True

    async def flush(self) -> None:
        """Nothing is buffered: :meth:`write` returns once the bytes are written."""

    def close(self) -> None:
        try:
            os.set_blocking(self.fd, self._blocking)
            os.dup2(self.fd, 1)
        finally:
            os.close(self.fd)


def _waitable(fd: int) -> bool:
    """Whether the loop can wait on ``fd``: a pipe, a socket or a terminal on POSIX."""
    if sys.platform == "win32":
        return False
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    # not a file, nor a device the loop cannot wait on (the null device)
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd)


def wire_stdin(read: bytes = b"") -> WireStdin | None:
    """A :class:`WireStdin` when fd 0 can be waited on by the loop, else ``None``."""
    return WireStdin(read) if _waitable(0) else None


def wire_stdout(answered: int | str | None = None) -> WireStdout | None:
    """A :class:`WireStdout` when fd 1 can be waited on by the loop, else ``None`` (the
    SDK's own writer is used)."""
    return WireStdout(answered) if _waitable(1) else None


def stdin_problem() -> str | None:
    """Why no MCP client can talk to this process over stdin, or None: stdin is closed,
    or it is the null device (a service started without a client, ``< /dev/null``)."""
    if sys.stdin is None:
        return "stdin is closed"
    try:
        mode = os.fstat(0)
    except OSError:
        return "stdin is closed"
    try:
        null = os.stat(os.devnull)
    except OSError:
        return None
    if stat.S_ISCHR(mode.st_mode) and mode.st_rdev == null.st_rdev:
        return f"stdin is {os.devnull}"
    return None
