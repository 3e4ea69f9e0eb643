"""A fork server for the processes the tests start: the test MCP servers of
tests/mcp_servers/ and ``tooldeck serve`` gateways (through tests/_zygote_run.py).

Every such process would otherwise import the MCP SDK afresh (~0.8 CPU-s with bytecode
cached: some 550 pydantic models are built at import), hundreds of times a run. One
process per test process (pytest-xdist worker) imports it once, here, and forks a copy
for each server a test starts; the script hands off to it first thing
(tests/mcp_servers/_zygote_client.py). Run as ``python tests/_zygote.py PID``: PID is
the test process, whose descendants find the fork server at an abstract socket named
after it; the test process holds our stdin, and at its end (or death) we stop.

For each request the fork server forks a supervisor, which forks the server itself
(the request's stdin, stdout, stderr, argv, environment, folder), waits for it, and
tells the stand-in its exit status; it passes the stand-in's signals on, and when the
stand-in is gone (killed), it kills the server. No threads, no event loop here: a fork
copies only the calling thread."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import struct
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent / "mcp_servers"))
from _zygote_client import address

# Imported once here, inherited by every fork (what the test servers and the gateway
# import; a module missing or failing here is simply imported by the server itself).
PRELOAD = (
    # what the test servers import
    "anyio._backends._asyncio",
    "mcp.server.mcpserver",
    "mcp.server.stdio",
    "mcp.server.streamable_http_manager",
    "starlette.applications",
    "uvicorn",
    # what a gateway imports by the time it serves (found from sys.modules at its exit:
    # these pull in nearly all of it)
    "tooldeck.cli.serve",
    "tooldeck.cli.report",
    "tooldeck.gateway.allow",
    "tooldeck.gateway.approval",
    "tooldeck.gateway.check",
    "tooldeck.gateway.sampling",
    "tooldeck.workflows.store.atomic",
    "mcp.client.stdio",
    "mcp.client.streamable_http",
    "rich.console",
    "rich.logging",
)

_supervisors: set[int] = set()
_CPU_PREFIX = os.environ.get("TOOLDECK_TEST_CPU")


def _reap(*_: Any) -> None:
    while _supervisors:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            _supervisors.clear()
            return
        if pid == 0:
            return
        _supervisors.discard(pid)


def _receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    data, fds, _flags, _addr = socket.recv_fds(conn, 1 << 16, 3)
    if len(data) < 4:
        raise OSError("short request")
    (size,) = struct.unpack("!I", data[:4])
    if size > 1 << 22:
        raise OSError("request too large")
    body = data[4:]
    while len(body) < size:
        chunk = conn.recv(size - len(body))
        if not chunk:
            raise OSError("request cut short")
        body += chunk
    return json.loads(body), fds


# Variables a forked server can follow as a started one would (see _become, _stdio);
# any other PYTHON* variable must be ours.
_SET = ("PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE")
_BYTECODE = list(type(sys.flags).__match_args__).index("dont_write_bytecode")
_UTF8 = list(type(sys.flags).__match_args__).index("utf8_mode")


def _refusal(request: dict[str, Any], enabled: bool) -> str:
    """Why the request cannot run here ("" if it can): a forked copy of this
    interpreter must be what starting the script would have given."""
    if not enabled:
        return "off"
    if request.get("executable") != sys.executable or request.get("path") != sys.path[2:]:
        return "another interpreter or path"
    flags = list(request.get("flags", ()))
    if len(flags) == len(sys.flags):  # these two followed here (see _become, _stdio)
        flags[_BYTECODE] = sys.flags.dont_write_bytecode
        flags[_UTF8] = sys.flags.utf8_mode
    if flags != list(sys.flags) or request.get("warnoptions") != sys.warnoptions:
        return "other interpreter options"
    if request.get("xoptions") != {str(k): str(v) for k, v in sys._xoptions.items()}:
        return "other -X options"
    ours = {k: v for k, v in os.environ.items() if k.startswith("PYTHON") and k not in _SET}
    theirs = {k: v for k, v in request["env"].items() if k.startswith("PYTHON") and k not in _SET}
    if ours != theirs:
        return "other PYTHON* variables"
    env = request["env"]
    where = env.get("LC_ALL") or env.get("LC_CTYPE") or env.get("LANG") or "C"
    utf8 = where in ("C", "POSIX") or where.lower().replace("-", "").endswith("utf8")
    if not utf8 or sys.getfilesystemencoding() != "utf-8":
        return "another encoding"
    return ""


def serve(parent: int) -> dict[str, Any]:
    """Serve requests until the test process ends; returns only in a forked server
    process, the request it is to run."""
    # Listening first: a server started meanwhile waits for the imports below (less
    # than starting on its own would take).
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address(parent))
    listener.listen(128)
    for name in PRELOAD:
        with contextlib.suppress(Exception):
            __import__(name)
    import gc
    import threading

    assert threading.active_count() == 1, "a preloaded module started a thread"
    # What the imports made lives as long as every fork does: out of the collector's
    # reach (a full collection in a fork, as at its exit, would touch, so copy, every
    # page of it: a gateway took over 2 s to exit, 0.35 s so)
    gc.collect()
    gc.freeze()
    signal.signal(signal.SIGCHLD, _reap)
    signal.signal(signal.SIGTERM, lambda *_: _stop(listener))
    enabled = True
    stdin = sys.stdin.fileno()
    while True:
        try:
            ready, _, _ = select.select([listener, stdin], [], [])
        except InterruptedError:  # pragma: no cover - PEP 475 retries
            continue
        if stdin in ready and not os.read(stdin, 4096):
            _stop(listener)
        if listener not in ready:
            continue
        try:
            conn, _ = listener.accept()
        except OSError:
            continue
        fds: list[int] = []
        try:
            creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            if struct.unpack("3i", creds)[1] != os.getuid():
                raise OSError("another user")
            conn.settimeout(10)
            request, fds = _receive(conn)
            if "control" in request:
                enabled = request["control"] == "on"
                conn.sendall(b"A\n")
                raise OSError("done")
            why = _refusal(request, enabled)
            if why or len(fds) != 3:
                conn.sendall(f"R{why}\n".encode())
                raise OSError(why)
            conn.sendall(b"A\n")
            pid = os.fork()
            if pid == 0:
                listener.close()
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                try:  # never back into this loop, but in the server process
                    _supervise(conn, fds, request)
                except BaseException as error:
                    with contextlib.suppress(BaseException):
                        os.write(2, f"tests/_zygote.py: {error!r}\n".encode())
                    os._exit(127)
                return request
            _supervisors.add(pid)
        except (OSError, ValueError, KeyError):
            pass
        finally:
            for fd in fds:
                os.close(fd)
            if conn.fileno() != -1:
                conn.close()


def _stop(listener: socket.socket) -> None:
    """The test process is gone: stop every server still running, then ourselves."""
    listener.close()
    for pid in list(_supervisors):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while _supervisors and time.monotonic() < deadline:
        _reap()
        time.sleep(0.02)
    os._exit(0)


def _supervise(conn: socket.socket, fds: list[int], request: dict[str, Any]) -> None:
    """In the supervisor: start the server (in the server process: return, set up to
    run the request), wait for it, tell the stand-in how it ended; kill it when the
    stand-in is gone."""
    pid = os.fork()
    if pid == 0:
        _become(conn, fds, request)
        fds.clear()
        return
    for fd in fds:
        os.close(fd)
    fds.clear()
    stopped = False

    def stop(*_: Any) -> None:
        nonlocal stopped
        stopped = True
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)

    signal.signal(signal.SIGTERM, stop)
    pidfd = os.pidfd_open(pid)
    conn.settimeout(None)
    pending = b""
    while True:
        try:
            ready, _, _ = select.select([conn, pidfd], [], [])
        except InterruptedError:  # pragma: no cover
            continue
        if pidfd in ready:
            break
        try:
            data = conn.recv(256)
        except OSError:
            data = b""
        if not data:  # the stand-in was killed: so is the server
            stop()
            break
        pending += data
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            if line.startswith(b"S") and not stopped:
                with contextlib.suppress(OSError, ValueError):
                    os.kill(pid, int(line[1:]))
    _pid, status, usage = os.wait4(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    with contextlib.suppress(OSError):
        conn.sendall(b"X%d\n" % code if code >= 0 else b"K%d\n" % -code)
    _log_cpu(request, usage)
    os._exit(0)


def _log_cpu(request: dict[str, Any], usage: Any) -> None:
    """With ``TOOLDECK_TEST_CPU=PREFIX`` (tests/conftest.py): a line per server run here,
    as the test process cannot count their CPU time (not its children)."""
    if _CPU_PREFIX:
        log = f"{_CPU_PREFIX}.zygote.{os.getppid()}.tsv"
        with contextlib.suppress(OSError), open(log, "a") as out:
            cpu = usage.ru_utime + usage.ru_stime
            out.write(f"{time.time():.1f}\t{cpu:.2f}\t{' '.join(request['argv'])[:200]}\n")


def _become(conn: socket.socket, fds: list[int], request: dict[str, Any]) -> None:
    """In the server process: the request's stdio, folder, environment, argv."""
    for name in ("SIGTERM", "SIGINT", "SIGCHLD", "SIGHUP"):
        signum = getattr(signal, name)
        signal.signal(signum, signal.default_int_handler if name == "SIGINT" else signal.SIG_DFL)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    conn.close()
    sys._tooldeck_zygote_child = True  # type: ignore[attr-defined]  # (see handoff)
    os.setpgid(0, 0)  # out of the fork server's group, as a started process would be
    os.chdir(request["cwd"])
    os.umask(request["umask"])
    os.environ.clear()
    os.environ.update(request["env"])
    os.environb.clear()  # type: ignore[attr-defined]
    os.environb.update({k.encode(): v.encode() for k, v in request["env"].items()})  # type: ignore[attr-defined]
    time.tzset()
    sys.dont_write_bytecode = bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))
    import tempfile

    tempfile.tempdir = None
    sys.argv[:] = request["argv"]
    if request["orig_argv"]:
        sys.orig_argv[:] = request["orig_argv"]
    kind, what = request["run"]
    sys.path[0] = os.path.dirname(os.path.realpath(what)) if kind == "path" else request["cwd"]
    del sys.path[1]  # this file's mcp_servers entry
    with contextlib.suppress(Exception):
        import locale

        locale.setlocale(locale.LC_CTYPE, "")
    utf8_mode = len(request["flags"]) > _UTF8 and request["flags"][_UTF8]
    _stdio(bool(utf8_mode))


def _stdio(utf8_mode: bool) -> None:
    """New ``sys.stdin``/``stdout``/``stderr`` on the new file descriptors, as Python
    makes them at start (line buffered on a terminal, ``stderr`` always; in UTF-8 mode,
    or in the C locale, undecodable bytes pass as surrogates)."""
    import io
    import locale

    c_locale = locale.setlocale(locale.LC_CTYPE) in ("C", "POSIX")
    errors = "surrogateescape" if utf8_mode or c_locale else "strict"

    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))

    def text(fd: int, mode: str, errors: str, line: bool) -> io.TextIOWrapper:
        raw = io.FileIO(fd, mode, closefd=False)
        buffered: Any = io.BufferedReader(raw) if mode == "rb" else io.BufferedWriter(raw)
        return io.TextIOWrapper(
            buffered,
            encoding="utf-8",  # (see _refusal)
            errors=errors,
            line_buffering=line,
            write_through=unbuffered and mode == "wb",
        )

    sys.stdin = sys.__stdin__ = text(0, "rb", errors, False)
    sys.stdout = sys.__stdout__ = text(1, "wb", errors, os.isatty(1))
    sys.stderr = sys.__stderr__ = text(2, "wb", "backslashreplace", True)


def run(request: dict[str, Any]) -> None:
    """Run the script (or module) as ``__main__``, as ``python`` would have."""
    import types

    main = types.ModuleType("__main__")
    sys.modules["__main__"] = main
    kind, what = request["run"]
    if kind == "module":
        import runpy

        runpy._run_module_as_main(what)  # type: ignore[attr-defined]
        return
    from importlib.machinery import SourceFileLoader

    main.__file__ = what
    main.__loader__ = SourceFileLoader("__main__", what)
    code = compile(Path(what).read_bytes(), what, "exec")
    exec(code, main.__dict__)


if __name__ == "__main__":
    run(serve(int(sys.argv[1])))
