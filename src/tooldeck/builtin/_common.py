"""Helpers shared by the built-in tools: the home-directory guard, atomic writes, sniffing.

Every file tool resolves the model's path with :func:`resolve_in_home`, which is the one
place that decides whether a path is inside the agent's home: the path is made absolute
against the home, every symlink is resolved, ``..`` is applied after that (as the OS
would), and the result must lie in the resolved home. Anything else is refused with a
:class:`ToolFailure` that names the path. The steps live in :mod:`tooldeck._paths`, so
the policy's path rules judge exactly the path the tool touches.

That decision is made on names, and names can change under it; so what a tool then
touches is opened with :func:`locate`, which walks the decided path again from a
descriptor of the home without letting the kernel follow any symlink
(:mod:`._confined`), and gives the same refusal if a link on the way now leads out.
Writes go through :func:`tooldeck.builtin._confined.replace_at` in the directory so
opened; :func:`exclusive` is the short lock a compare-and-swap write holds, and
:func:`write_locked` the write that takes it too.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .. import _paths
from .._paths import resolve_home
from ..context import ToolContext
from ..errors import TooldeckError
from ..result import ToolResult
from ._confined import READ_FLAGS, Home, LeavesHome, Spot, Unstable, opened_dir, replace_at

__all__ = [
    "BINARY_SNIFF_BYTES",
    "LOCK_WAIT_SECONDS",
    "NO_HOME",
    "ToolFailure",
    "atomic_write",
    "default_mode",
    "display_path",
    "exclusive",
    "home_of",
    "locate",
    "looks_binary",
    "outside_home",
    "read_upto",
    "same_file",
    "write_locked",
]

BINARY_SNIFF_BYTES = 8192
LOCK_WAIT_SECONDS = 10.0  # how long a write waits for another one holding the file's lock


class ToolFailure(TooldeckError):
    """A failure the model should read; handlers turn it into ``ToolResult.error``."""

    def __init__(self, message: str, *, details: Any = None):
        super().__init__(message)
        self.message = message
        self.details = details

    def result(self) -> ToolResult:
        return ToolResult.error(self.message, details=self.details)


NO_HOME = "needs a turn context with a home directory"
"""What a file tool says when its turn has no home (``tooldeck serve`` adds its hint to it)."""


def home_of(ctx: ToolContext) -> Path:
    """The agent's home directory for this call, resolved (symlinks followed)."""
    turn = ctx.turn
    home = getattr(turn, "home", None)
    if home is None:
        raise ToolFailure(f"{ctx.tool_name or 'this tool'} {NO_HOME}; none was given")
    return resolve_home(home)


def resolve_in_home(home: Path, path: str) -> Path:
    """``path`` (relative to ``home``, or absolute) resolved; refused if it leaves ``home``.

    ``home`` must already be resolved (see :func:`home_of`). The steps are
    :func:`tooldeck._paths.resolve_in_home`, which the policy's path rules use too.
    """
    try:
        return _paths.resolve_in_home(home, path)
    except _paths.PathRefused as exc:
        raise ToolFailure(exc.message) from exc


def display_path(home: Path, path: Path) -> str:
    """``path`` as the model should write it: relative to ``home``, POSIX separators."""
    try:
        rel = path.relative_to(home)
    except ValueError:
        return str(path)
    return rel.as_posix()


def looks_binary(sample: bytes) -> bool:
    """A NUL byte in the first bytes is the usual (git/grep) sign of binary data."""
    return b"\x00" in sample


def _umask() -> int:
    """The process umask, read without changing it (``os.umask`` is not thread-safe)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def outside_home(home: Path, path: str) -> ToolFailure:
    """The refusal of a path outside the home (the words :func:`resolve_in_home` uses)."""
    return ToolFailure(
        f"Path {path!r} is outside the agent's home directory ({home}) and was refused; "
        "file tools only work inside the home directory (relative paths are relative "
        "to it)."
    )


def locate(
    home: Home,
    path: str,
    target: Path,
    *,
    open_flags: int | None = None,
    make_dirs: bool = False,
) -> Spot:
    """Open ``target`` (a result of :func:`resolve_in_home`) by descriptor from ``home``.

    ``path`` is the model's text, for messages. See :meth:`Home.locate` for the flags;
    a symlink on the way that now leads out of the home gives the same refusal as
    :func:`resolve_in_home`. A missing or non-directory component raises the
    :class:`OSError` for the caller to phrase.
    """
    try:
        parts = target.relative_to(home.path).parts
    except ValueError:
        raise outside_home(home.path, path) from None
    try:
        return home.locate(parts, open_flags=open_flags, make_dirs=make_dirs)
    except LeavesHome as exc:
        raise outside_home(home.path, path) from exc
    except Unstable as exc:
        raise ToolFailure(
            f"Path {path!r} kept changing while it was being opened (another process is "
            "moving files there); try again."
        ) from exc
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ToolFailure(
                f"Path {path!r} has too many levels of symbolic links (a loop?)."
            ) from exc
        raise


@contextlib.contextmanager
def exclusive(fd: int, shown: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``fd`` (waits at most :data:`LOCK_WAIT_SECONDS`).

    The lock is advisory: it orders tooldeck's own writers (``write_file``,
    ``edit_file``) around one file; another program that writes without locking is
    caught by the compare step of a compare-and-swap instead.
    """
    deadline = time.monotonic() + LOCK_WAIT_SECONDS
    pause = 0.001
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise ToolFailure(
                    f"{shown} is locked by another writer and stayed locked for "
                    f"{LOCK_WAIT_SECONDS:g} s; try again later."
                ) from None
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


def default_mode() -> int:
    """The permission bits of a new file: ``0o666`` less the umask."""
    return 0o666 & ~_umask()


def atomic_write(target: Path, data: bytes, *, home: Path | None = None) -> bool:
    """Write ``data`` to ``target`` atomically; returns whether the file existed before.

    The bytes go to a temporary file in the same directory, which is flushed, synced and
    then renamed over ``target``, both relative to one open descriptor of that directory,
    so readers see the old file or the new one, never a half-written one, and the file
    cannot land in another directory if the path changes meanwhile. The temporary file is
    removed if anything fails. Parent directories are created; an existing file's
    permission bits are kept. With ``home`` (resolved, as from :func:`home_of`), the
    directory is reached from the home without following symlinks (see :func:`locate`),
    and ``target`` must be inside it.
    """
    if home is None:
        target.parent.mkdir(parents=True, exist_ok=True)
        with opened_dir(target.parent) as dir_fd:
            return _replace(dir_fd, target.name, data)
    with Home(home) as confined, locate(confined, str(target), target, make_dirs=True) as spot:
        return _replace(spot.dir_fd, spot.name, data)


def _replace(dir_fd: int, name: str, data: bytes) -> bool:
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        replace_at(dir_fd, name, data, mode=default_mode())
        return False
    if name == "." or stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "Is a directory", name)
    # A link here (made meanwhile) is replaced, not followed; its bits are not the file's.
    mode = default_mode() if stat.S_ISLNK(st.st_mode) else st.st_mode & 0o7777
    replace_at(dir_fd, name, data, mode=mode)
    return True


def read_upto(fd: int, limit: int) -> bytes:
    """The file's bytes from the start, at most ``limit + 1`` of them (to see it is over)."""
    chunks: list[bytes] = []
    got = 0
    while got <= limit:
        chunk = os.pread(fd, min(1 << 20, limit + 1 - got), got)
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def same_file(spot: Spot, st: os.stat_result) -> bool:
    """Whether ``spot``'s name still holds the file ``st`` describes (not replaced)."""
    try:
        now = spot.lstat()
    except FileNotFoundError:
        return False
    return (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino)


WRITE_ATTEMPTS = 100  # the file was replaced between opening and locking it, each time


def write_locked(spot: Spot, shown: str, data: bytes) -> bool:
    """Replace the file at ``spot`` with ``data`` under its lock; whether it existed.

    The lock is the one ``edit_file`` holds while it compares and replaces, so a write
    lands before or after an edit, never in the middle of one.
    """
    for _ in range(WRITE_ATTEMPTS):
        try:
            fd = os.open(spot.name, READ_FLAGS, dir_fd=spot.dir_fd)
        except FileNotFoundError:
            replace_at(spot.dir_fd, spot.name, data, mode=default_mode())
            return False
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.EMLINK):
                raise
            # A symlink appeared at the name meanwhile: replace it (in this directory).
            replace_at(spot.dir_fd, spot.name, data, mode=default_mode())
            return True
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                raise ToolFailure(f"{shown} is a directory; give a file path to write.")
            with exclusive(fd, shown):
                if same_file(spot, st):
                    replace_at(spot.dir_fd, spot.name, data, mode=stat.S_IMODE(st.st_mode))
                    return True
        finally:
            os.close(fd)
    raise ToolFailure(f"{shown} kept being replaced while it was written; try again.")
