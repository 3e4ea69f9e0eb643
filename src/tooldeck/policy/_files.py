"""Per-session files of the policy package: names and inter-process locks (their atomic
JSON writes are ``tooldeck._atomic_json.write_json_atomic``).

Grants and pending approvals are read and rewritten by more than one process (a
running session, ``tooldeck policy revoke``, ``tooldeck approve``, a resuming worker).
An atomic rename keeps each write whole, but a read-modify-write cycle also needs the
file to stay unchanged between the read and the write: :func:`locked` holds an
exclusive lock on ``<file>.lock`` (``flock`` through :mod:`filelock`, released by the
kernel if the holder dies) for the length of such a cycle. A folder of pending files
that ``tooldeck approve --watch`` watches has its lock held (:func:`watching`), which a
gateway reads as someone being there to answer (:func:`watched`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from ..errors import TooldeckError

LOCK_TIMEOUT = 30.0
"""Seconds to wait for another process's read-modify-write of the same file."""

_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class StateLocked(TooldeckError):
    """Another process held a state file's lock for longer than :data:`LOCK_TIMEOUT`."""

    def __init__(self, path: Path, timeout: float) -> None:
        self.path = path
        super().__init__(
            f"{path}: another process has held {path}.lock for {timeout:g} s; "
            "try again when it has finished (or end it)"
        )


def safe_id(session_id: str) -> str:
    """``session_id`` when it can name a file of its own (letters, digits, ``._-``, no
    ``..``, at most 128 characters); else a :class:`ValueError`."""
    if not _SAFE_ID.fullmatch(session_id) or ".." in session_id:
        raise ValueError(f"session id {session_id[:200]!r} cannot name a file")
    return session_id


WATCHER_LOCK = ".watcher.lock"
"""Held in a folder of pending files by ``tooldeck approve --watch`` while it watches."""


def watched(folder: Path) -> bool:
    """Whether a ``tooldeck approve --watch`` holds ``folder``'s watcher lock now (the
    kernel releases it when that process ends, however it ends)."""
    lock = FileLock(folder / WATCHER_LOCK, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        return True
    except OSError:
        return False  # no such folder, or not ours to lock: nobody watches it
    lock.release()
    return False


@contextmanager
def watching(folder: Path) -> Iterator[bool]:
    """Hold ``folder``'s watcher lock for the block; yields False (and holds nothing)
    when another process holds it."""
    lock = FileLock(folder / WATCHER_LOCK, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        yield False
        return
    try:
        yield True
    finally:
        lock.release()


def session_file(directory: str | Path, session_id: str, suffix: str) -> Path:
    """``<directory>/<session_id><suffix>``; the id must be a plain file name."""
    return Path(directory) / f"{safe_id(session_id)}{suffix}"


@contextmanager
def locked(path: Path, timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
    """Hold the inter-process lock of ``path`` (the file ``<path>.lock`` beside it).

    Raises :class:`StateLocked` when another holder keeps it past ``timeout`` seconds.
    The lock file stays in place (waiters must share one inode).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(f"{path}.lock", timeout=timeout)
    try:
        lock.acquire()
    except Timeout as exc:
        raise StateLocked(path, timeout) from exc
    try:
        yield
    finally:
        lock.release()
