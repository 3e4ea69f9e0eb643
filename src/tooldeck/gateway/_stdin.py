"""The gateway's stdin, read without a thread, so that stopping the gateway can stop it.

The MCP SDK's ``stdio_server`` reads stdin in a worker thread; a read that waits for the
client's next line cannot be cancelled, so a gateway told to stop (SIGTERM) while its
client keeps stdin open would wait for that line forever. :class:`WireStdin` reads the
same bytes with the event loop (``anyio.wait_readable`` on a duplicate of fd 0), which a
cancel scope stops at once. While it is open, fd 0 itself points at the null device (as
the SDK does), so a child process never reads the client's messages.

It is used where the loop can wait on fd 0: a pipe, a socket or a terminal on POSIX
(:func:`wire_stdin` gives ``None`` otherwise, and the SDK's own reader is used).

:func:`stdin_problem` says when no client can be at the other end (stdin closed, or the
null device), which ``tooldeck serve`` reports as a start-up error.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import AsyncIterator

import anyio

__all__ = ["WireStdin", "stdin_problem", "wire_stdin"]

_CHUNK = 65_536


class WireStdin:
    """An async iterator over stdin's lines (text, newline dropped); :meth:`close`
    puts fd 0 back."""

    def __init__(self) -> None:
        import fcntl

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
        pending = b""
        while True:
            await anyio.wait_readable(self.fd)
            try:
                chunk = os.read(self.fd, _CHUNK)
            except BlockingIOError:
                continue
            if not chunk:
                break
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                yield line.decode("utf-8", "replace")
        if pending:
            yield pending.decode("utf-8", "replace")

    def close(self) -> None:
        try:
            os.set_blocking(self.fd, self._blocking)
            os.dup2(self.fd, 0)
        finally:
            os.close(self.fd)


def wire_stdin() -> WireStdin | None:
    """A :class:`WireStdin` when fd 0 can be waited on by the loop, else ``None``."""
    if sys.platform == "win32":
        return None
    try:
        mode = os.fstat(0).st_mode
    except OSError:
        return None
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(0)):
        return None  # a file, or a device the loop cannot wait on (the null device)
    return WireStdin()


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
