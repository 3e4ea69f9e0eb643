"""Helpers shared by the built-in tools: the home-directory guard, atomic writes, sniffing.

Every file tool resolves the model's path with :func:`resolve_in_home`, which is the one
place that decides whether a path is inside the agent's home: the path is made absolute
against the home, every symlink is resolved, ``..`` is applied after that (as the OS
would), and the result must lie in the resolved home. Anything else is refused with a
:class:`ToolFailure` that names the path. The steps live in :mod:`tooldeck._paths`, so
the policy's path rules judge exactly the path the tool touches.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Any

from .. import _paths
from .._paths import resolve_home
from ..context import ToolContext
from ..result import ToolResult

__all__ = [
    "BINARY_SNIFF_BYTES",
    "ToolFailure",
    "atomic_write",
    "display_path",
    "home_of",
    "is_binary_file",
    "looks_binary",
    "resolve_in_home",
]

BINARY_SNIFF_BYTES = 8192


class ToolFailure(Exception):
    """A failure the model should read; handlers turn it into ``ToolResult.error``."""

    def __init__(self, message: str, *, details: Any = None):
        super().__init__(message)
        self.message = message
        self.details = details

    def result(self) -> ToolResult:
        return ToolResult.error(self.message, details=self.details)


def home_of(ctx: ToolContext) -> Path:
    """The agent's home directory for this call, resolved (symlinks followed)."""
    turn = ctx.turn
    home = getattr(turn, "home", None)
    if home is None:
        raise ToolFailure(
            f"{ctx.tool_name or 'this tool'} needs a turn context with a home directory; "
            "none was given"
        )
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


def is_binary_file(path: Path) -> bool:
    with path.open("rb") as f:
        return looks_binary(f.read(BINARY_SNIFF_BYTES))


def _umask() -> int:
    """The process umask, read without changing it (``os.umask`` is not thread-safe)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def atomic_write(target: Path, data: bytes) -> bool:
    """Write ``data`` to ``target`` atomically; returns whether the file existed before.

    The bytes go to a temporary file in the same directory, which is flushed, synced and
    then moved over ``target`` with :func:`os.replace`, so readers see the old file or the
    new one, never a half-written one. The temporary file is removed if anything fails.
    Parent directories are created; an existing file's permission bits are kept.
    """
    parent = target.parent
    parent.mkdir(parents=True, exist_ok=True)
    existed = target.exists()
    mode: int | None = None
    if existed:
        mode = target.stat().st_mode & 0o7777
    fd, tmp_name = tempfile.mkstemp(dir=parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp_name, mode)
        else:
            os.chmod(tmp_name, 0o666 & ~_umask())
        os.replace(tmp_name, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
    return existed
