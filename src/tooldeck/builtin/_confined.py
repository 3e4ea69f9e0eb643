"""Opening files inside the home by descriptor, so that a racing process cannot redirect them.

Checking a path and then opening it by name leaves a window: between the two, another
process can swap a directory on the way for a symlink that leads out of the home, and
the open follows it. Here every path is walked one component at a time from a
descriptor of the home directory, each directory opened with ``O_NOFOLLOW |
O_DIRECTORY`` relative to the one before (``openat``), and the last component opened
with ``O_NOFOLLOW`` too; writes create their temporary file and rename it inside the
directory descriptor that was verified (``renameat``). Nothing is ever looked up by its
full name, so what was checked is what is used.

Symlinks inside the home are followed, but by this walk rather than by the kernel: the
link is read (``readlinkat``) and its target spliced into the components still to walk,
``..`` going back to the directory the walk came from. A link whose target leaves the
home (an absolute target outside it, or a ``..`` above the home) is refused with
:class:`LeavesHome`, so a link can redirect a path only to another place inside the home.
As in the kernel, at most :data:`MAX_SYMLINKS` links are followed per path.

This module knows nothing of tools or messages; :mod:`._common` turns its exceptions
into what the model reads. POSIX only (``dir_fd`` and ``O_NOFOLLOW``).
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import TooldeckError

__all__ = [
    "DIR_FLAGS",
    "MAX_SYMLINKS",
    "READ_FLAGS",
    "Home",
    "LeavesHome",
    "Spot",
    "Unstable",
    "replace_at",
]

MAX_SYMLINKS = 40  # as Linux's limit per path lookup
_RETRIES = 100  # a component that keeps changing kind between two system calls
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
# O_NONBLOCK: opening a FIFO must not hang (it is then refused as not a regular file).
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC
_SYMLINK_ERRNOS = frozenset({errno.ELOOP, errno.EMLINK, errno.ENOTDIR})  # EMLINK: BSDs


class LeavesHome(TooldeckError):
    """A symlink on the way leads out of the home; ``parts`` is where it was met."""

    def __init__(self, parts: tuple[str, ...], target: str):
        super().__init__(f"{'/'.join(parts)} -> {target} leads out of the home")
        self.parts = parts
        self.target = target


class Unstable(TooldeckError, OSError):
    """A path component kept changing while it was being opened (a racing process)."""


@dataclass(slots=True)
class Spot:
    """Where a path ends up: the directory holding it (open) and its name there.

    ``name`` is ``"."`` when the path is a directory reached as the walk's end (the home
    itself, or a link to a directory). ``fd`` is the file itself, opened without following
    a symlink, when it was asked for and exists. ``parts`` is its place relative to the
    home, after every symlink was applied. :meth:`close` closes both descriptors.
    """

    dir_fd: int
    name: str
    parts: tuple[str, ...]
    fd: int | None = None
    _closed: bool = field(default=False, repr=False)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.fd is not None:
            os.close(self.fd)
        os.close(self.dir_fd)

    def __enter__(self) -> Spot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def lstat(self) -> os.stat_result:
        """What is at ``name`` now (a symlink is not followed)."""
        return os.stat(self.name, dir_fd=self.dir_fd, follow_symlinks=False)


class Home:
    """A descriptor of the home directory and the component-by-component walk from it."""

    def __init__(self, home: Path):
        self.path = home
        self.fd = os.open(home, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)

    def close(self) -> None:
        os.close(self.fd)

    def __enter__(self) -> Home:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def locate(
        self,
        parts: tuple[str, ...] | list[str],
        *,
        open_flags: int | None = None,
        make_dirs: bool = False,
    ) -> Spot:
        """Walk ``parts`` (relative to the home) and return where they end.

        With ``open_flags`` the last component is opened with them (plus ``O_NOFOLLOW``)
        and is in :attr:`Spot.fd`; a missing last component gives ``fd=None``. Without,
        the last component is only looked at: it is never a symlink in the result
        (links are followed), but may be missing. ``make_dirs`` creates missing
        directories on the way (``mkdirat``); otherwise a missing one raises
        :class:`FileNotFoundError`. A component that is not a directory raises
        :class:`NotADirectoryError` naming it; a link out of the home raises
        :class:`LeavesHome`.
        """
        pending = [p for p in parts if p not in ("", ".")]
        pending.reverse()  # a stack: the next component is last
        stack: list[int] = []  # the directories walked through, below the current one
        where: list[str] = []
        current = os.dup(self.fd)
        links = 0
        retries = 0
        try:
            while pending:
                name = pending.pop()
                if name in ("", "."):
                    continue
                if name == "..":
                    if not stack:
                        raise LeavesHome(tuple(where), "..")
                    os.close(current)
                    current = stack.pop()
                    where.pop()
                    continue
                last = not pending
                if last:
                    spot = self._last(current, name, tuple(where), open_flags)
                    if isinstance(spot, Spot):
                        current = -1  # now owned by the spot
                        return spot
                    if spot == "again":
                        pending.append(name)
                        retries = self._retry(retries, where, name)
                        continue
                else:
                    try:
                        fd = os.open(name, DIR_FLAGS, dir_fd=current)
                    except FileNotFoundError:
                        if not make_dirs:
                            raise
                        with suppress(FileExistsError):  # if made meanwhile: open that
                            os.mkdir(name, 0o777, dir_fd=current)
                        pending.append(name)
                        retries = self._retry(retries, where, name)
                        continue
                    except OSError as exc:
                        if exc.errno not in _SYMLINK_ERRNOS:
                            raise
                        kind = self._kind(current, name)
                        if kind in ("dir", "missing"):  # it changed meanwhile: look again
                            pending.append(name)
                            retries = self._retry(retries, where, name)
                            continue
                        if kind != "link":
                            raise NotADirectoryError(
                                errno.ENOTDIR, "Not a directory", "/".join([*where, name])
                            ) from exc
                    else:
                        stack.append(current)
                        current = fd
                        where.append(name)
                        retries = 0
                        continue
                # ``name`` is a symlink: walk its target from here instead.
                links += 1
                if links > MAX_SYMLINKS:
                    raise OSError(
                        errno.ELOOP, "Too many levels of symbolic links", "/".join([*where, name])
                    )
                try:
                    target = os.readlink(name, dir_fd=current)
                except OSError as exc:
                    if exc.errno != errno.EINVAL:  # EINVAL: no longer a link
                        raise
                    pending.append(name)
                    retries = self._retry(retries, where, name)
                    continue
                rest = self._splice(target, tuple([*where, name]))
                if rest is None:  # relative: from the directory holding the link
                    pending.extend(reversed(target.split("/")))
                else:  # absolute, inside the home: from the home
                    while stack:
                        os.close(current)
                        current = stack.pop()
                    where.clear()
                    pending.extend(reversed(rest))
            # The walk ended on a directory (the home itself, or through a link or ``..``).
            end = self._last(current, ".", tuple(where), open_flags)
            if not isinstance(end, Spot):  # "." is never a link
                raise Unstable(errno.EAGAIN, "Changed while being opened", "/".join(where))
            current = -1
            return end
        finally:
            if current >= 0:
                os.close(current)
            for fd in stack:
                os.close(fd)

    # -- steps --------------------------------------------------------------------------

    def _last(
        self, current: int, name: str, where: tuple[str, ...], open_flags: int | None
    ) -> Spot | str:
        """The last component in ``current``: a spot, ``"link"`` or ``"again"`` (it changed)."""
        parts = where if name == "." else (*where, name)
        if open_flags is None:
            try:
                st = os.stat(name, dir_fd=current, follow_symlinks=False)
            except FileNotFoundError:
                return Spot(current, name, parts)
            return "link" if stat.S_ISLNK(st.st_mode) else Spot(current, name, parts)
        try:
            fd = os.open(name, open_flags | os.O_NOFOLLOW | _CLOEXEC, dir_fd=current)
        except FileNotFoundError:
            return Spot(current, name, parts)
        except OSError as exc:
            if exc.errno not in _SYMLINK_ERRNOS:
                raise
            return "link" if self._kind(current, name) == "link" else "again"
        return Spot(current, name, parts, fd)

    @staticmethod
    def _kind(current: int, name: str) -> str:
        try:
            st = os.stat(name, dir_fd=current, follow_symlinks=False)
        except FileNotFoundError:
            return "missing"
        if stat.S_ISLNK(st.st_mode):
            return "link"
        return "dir" if stat.S_ISDIR(st.st_mode) else "other"

    @staticmethod
    def _retry(retries: int, where: list[str], name: str) -> int:
        if retries >= _RETRIES:
            raise Unstable(
                errno.EAGAIN, "Kept changing while being opened", "/".join([*where, name])
            )
        return retries + 1

    def _splice(self, target: str, at: tuple[str, ...]) -> list[str] | None:
        """For an absolute link target, its components below the home; else ``None``.

        An absolute target is judged by its real path (links outside the home on the
        way, such as ``/tmp`` -> ``/private/tmp``, are resolved by name here, but only to
        decide; what is then opened is walked from the home descriptor like any path).
        """
        if not target.startswith("/"):
            return None
        real = Path(os.path.realpath(target))
        if real != self.path and not real.is_relative_to(self.path):
            raise LeavesHome(at, target)
        return list(real.relative_to(self.path).parts)


def replace_at(dir_fd: int, name: str, data: bytes, *, mode: int) -> None:
    """Write ``data`` as ``name`` in the directory ``dir_fd``, atomically.

    The bytes go to a new temporary file in that same directory (``O_EXCL |
    O_NOFOLLOW``), which is synced, given ``mode`` and renamed over ``name`` with both
    names relative to ``dir_fd``: readers see the old file or the new one, never a part,
    and the file lands in the directory that was verified even if its path changed
    meanwhile. A symlink at ``name`` is replaced, not followed. The temporary file is
    removed if anything fails.
    """
    for _ in range(_RETRIES):
        tmp = f".{name[:40]}.{secrets.token_hex(6)}.tmp"
        try:
            fd = os.open(
                tmp,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC,
                0o600,
                dir_fd=dir_fd,
            )
        except FileExistsError:
            continue
        break
    else:  # pragma: no cover - 100 random 48-bit names all taken
        raise FileExistsError(errno.EEXIST, "No free temporary name", name)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise


@contextmanager
def opened_dir(path: Path) -> Iterator[int]:
    """A descriptor of the directory ``path`` (followed by name: for unconfined writes)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
    try:
        yield fd
    finally:
        os.close(fd)
