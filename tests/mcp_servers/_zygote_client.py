"""The hand-off half of the tests' fork server (tests/_zygote.py): a test MCP server script
(or ``tests/_zygote_run.py``, for ``tooldeck serve``) calls :func:`handoff` first thing,
before it imports anything costly. Started under a test process that runs a fork server,
it sends its stdin, stdout and stderr, its argv, environment and folder to that fork
server, whose already-imported copy runs the script instead (``import mcp`` alone costs
~0.8 CPU-s a process); this process then only stands in for it: it passes on the
signals it gets, and exits as the server did (the same code, or killed by the same
signal). Killed itself (``kill -9``), the server is killed too.

Anywhere else (run by hand, in a benchmark, under another program, or with
``TOOLDECK_TEST_ZYGOTE=0``) it returns at once and the script runs as usual. Standard
library only, and as little of it as can be: it runs in every server process."""

from __future__ import annotations

import os
import sys

PREFIX = "tooldeck-zygote"  # the abstract socket: PREFIX-UID-PID, PID: the test process


def address(pid: int) -> str:
    """The fork server's (abstract, Linux) socket address for the test process ``pid``."""
    return f"\0{PREFIX}-{os.getuid()}-{pid}"


def _ancestors(limit: int = 12) -> list[int]:
    """Our parent, its parent, ... (from /proc), at most ``limit``."""
    found: list[int] = []
    pid = os.getppid()
    while pid > 1 and len(found) < limit:
        found.append(pid)
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat:
                pid = int(stat.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            break
    return found


def _connect() -> object | None:
    """A connection to the fork server of the nearest test process above us, if any."""
    import socket

    for pid in _ancestors():
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(address(pid))
        except OSError:
            sock.close()
            continue
        return sock
    return None


def _request(run: list[str]) -> bytes:
    import json

    mask = os.umask(0)
    os.umask(mask)
    return json.dumps(
        {
            "run": run,
            "argv": sys.argv,
            "orig_argv": getattr(sys, "orig_argv", []),
            "env": dict(os.environ),
            "cwd": os.getcwd(),
            "umask": mask,
            "executable": sys.executable,
            "path": sys.path[1:],
            "flags": list(sys.flags),
            "warnoptions": sys.warnoptions,
            "xoptions": {str(k): str(v) for k, v in sys._xoptions.items()},
        }
    ).encode()


def handoff(module: str | None = None) -> None:
    """Have the fork server run this script (``module``: run that module as ``-m`` would,
    the arguments after it in ``sys.argv[1:]``), and exit as it does; return when there is
    no fork server for us (the caller then runs as usual)."""
    if getattr(sys, "_tooldeck_zygote_child", False):
        return  # the fork server started us: we are the script, run it
    if sys.platform != "linux" or os.environ.get("TOOLDECK_TEST_ZYGOTE") == "0":
        return
    try:  # a closed one is for the script to see: it runs itself
        for fd in (0, 1, 2):
            os.fstat(fd)
    except OSError:
        return
    sock = _connect()
    if sock is None:
        return
    import socket
    import struct

    assert isinstance(sock, socket.socket)
    run = ["module", module] if module else ["path", os.path.abspath(sys.argv[0])]
    payload = _request(run)
    try:
        sock.settimeout(30)
        socket.send_fds(sock, [struct.pack("!I", len(payload))], [0, 1, 2])
        sock.sendall(payload)
        answer = _line(sock)
    except OSError:
        answer = b""
    if not answer.startswith(b"A"):  # refused (another interpreter, options, ...)
        sock.close()
        return
    _stand_in(sock)


def _line(sock: object) -> bytes:
    import socket

    assert isinstance(sock, socket.socket)
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(1)
        if not chunk:
            break
        data += chunk
    return data


def _stand_in(sock: object) -> None:
    """Stand in for the server the fork server started: pass signals on, exit as it did."""
    import contextlib
    import signal
    import socket

    assert isinstance(sock, socket.socket)
    sock.settimeout(None)
    # The server has our stdin, stdout and stderr now: hold no copy of them, so that the
    # other ends see end-of-file when the server closes them or exits.
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(OSError):
            sock.sendall(b"S%d\n" % signum)

    for name in ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2"):
        signal.signal(getattr(signal, name), forward)
    while True:
        try:
            line = _line(sock)
        except OSError:
            line = b""
        if line.startswith(b"X"):
            os._exit(int(line[1:]))
        if line.startswith(b"K"):
            signum = int(line[1:])
            with contextlib.suppress(OSError, ValueError):  # (not for SIGKILL)
                signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            os._exit(128 + signum)
        if not line:  # the fork server is gone: so is the server
            os._exit(1)
