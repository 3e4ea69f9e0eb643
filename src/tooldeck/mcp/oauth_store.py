"""Where the OAuth logins of MCP servers are kept: one file per server URL, outside the config.

The folder is ``$XDG_CONFIG_HOME/tooldeck/oauth/`` (``~/.config/tooldeck/oauth/`` when
the variable is not set), mode 0700. Each server URL (canonical: lower-case scheme and
host, no fragment) has one JSON file there, mode 0600, named after its host and a hash of
the URL. It holds the registered client, the tokens with their absolute expiry, the
discovered authorization-server and resource metadata, and, after a refresh was refused,
why the tokens were dropped.

Every write replaces the file atomically (a temporary file in the same folder, fsync,
rename) under a lock file (:mod:`filelock`), so two processes refreshing at once never
lose a token: the second one waits, reads what the first stored, and uses it.

A file or folder that other users can read, that belongs to someone else, or whose
content is not what tooldeck wrote is an :class:`OAuthStoreError` saying what to do; it
is never "fixed" silently. Tokens never appear in messages or logs.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
from filelock import FileLock, Timeout

from .._atomic_json import write_json_atomic
from .._config_files import ConfigFileError, decode_text, parse_json
from ..errors import TooldeckError

__all__ = [
    "LOCK_SECONDS",
    "OAuthStoreError",
    "TokenFile",
    "default_directory",
    "token_file",
]

LOCK_SECONDS = 60.0
"""How long a process waits for another one's refresh (or login) to finish."""
MAX_BYTES = 1_000_000
FORMAT = 1
_POSIX = os.name == "posix"


class OAuthStoreError(TooldeckError):
    """The token store cannot be used as it is; the message says what to do (one line)."""


def default_directory(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/tooldeck/oauth``, else ``~/.config/tooldeck/oauth``."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME") or ""
    root = Path(base) if os.path.isabs(base) else Path.home() / ".config"
    return root / "tooldeck" / "oauth"


def canonical_url(url: str) -> str:
    """The server URL as the key of its file: scheme and host lower-case, no fragment."""
    parts = urlsplit(url.strip())
    return parts._replace(
        scheme=parts.scheme.lower(), netloc=parts.netloc.lower(), fragment=""
    ).geturl()


def _file_name(url: str) -> str:
    parts = urlsplit(url)
    host = re.sub(r"[^a-z0-9.-]+", "_", (parts.hostname or "server").lower())[:60]
    port = f"_{parts.port}" if parts.port else ""
    digest = hashlib.sha256(url.encode("utf-8")).hexdigest()[:16]
    return f"{host}{port}-{digest}.json"


def token_file(url: str, directory: Path | None = None) -> TokenFile:
    """The token file of the server at ``url`` (in ``directory``, default the user's)."""
    return TokenFile(directory or default_directory(), url)


class TokenFile:
    """The stored login of one server: read, update and remove it, under its lock."""

    def __init__(self, directory: Path, url: str) -> None:
        self.url = canonical_url(url)
        self.directory = directory.expanduser()
        self.path = self.directory / _file_name(self.url)
        # One lock object per TokenFile: re-entrant inside it (a refresh stores its tokens
        # while holding the lock); another TokenFile, in this process or another, waits.
        self._lock = FileLock(
            str(self.path) + ".lock", timeout=LOCK_SECONDS, mode=0o600, thread_local=False
        )

    # -- locking -----------------------------------------------------------------------
    def _acquire(self) -> None:
        self._ensure_directory()
        try:
            self._lock.acquire()
        except Timeout as exc:
            raise OAuthStoreError(
                f"{self.path}: another tooldeck process has held its lock for over "
                f"{LOCK_SECONDS:g}s; wait for it, or remove {self._lock.lock_file} if none runs"
            ) from exc

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the file's lock (waiting at most :data:`LOCK_SECONDS`)."""
        self._acquire()
        try:
            yield
        finally:
            self._lock.release()

    @asynccontextmanager
    async def alocked(self) -> AsyncIterator[None]:
        """:meth:`locked` for async code: the wait happens in a worker thread."""
        await anyio.to_thread.run_sync(self._acquire)
        try:
            yield
        finally:
            self._lock.release()

    # -- reading -----------------------------------------------------------------------
    def read(self) -> dict[str, Any]:
        """The stored login (``{}`` when there is none). Never creates anything."""
        try:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise self._error(f"cannot be read ({exc.strerror or exc})") from exc
        with os.fdopen(fd, "rb") as handle:
            self._check_private(os.fstat(handle.fileno()), self.path, "600")
            if self.directory.exists():
                self._check_private(os.stat(self.directory), self.directory, "700")
            raw = handle.read(MAX_BYTES + 1)
        if len(raw) > MAX_BYTES:
            raise self._error("is too large to be a token file")
        try:  # parsed as every file tooldeck is given is (encoding, nesting, numbers)
            data = parse_json(decode_text(raw))
        except ConfigFileError as exc:
            raise self._error(f"is not a tooldeck token file ({exc.problem})") from exc
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise self._error("is not a tooldeck token file (unknown format)")
        if data.get("server_url") != self.url:
            raise self._error(f"belongs to {data.get('server_url')!r}, not {self.url!r}")
        return data

    def _error(self, what: str) -> OAuthStoreError:
        return OAuthStoreError(
            f"the OAuth token file {self.path} {what}; remove it and log in again "
            "(tooldeck mcp logout, then tooldeck mcp login)"
        )

    @staticmethod
    def _check_private(info: os.stat_result, path: Path, mode: str) -> None:
        if not _POSIX:
            return
        if info.st_uid != os.getuid():
            raise OAuthStoreError(
                f"{path} belongs to another user (uid {info.st_uid}); tooldeck keeps tokens "
                "only in files of your own: remove it, then log in again"
            )
        if stat.S_IMODE(info.st_mode) & 0o077:
            raise OAuthStoreError(
                f"{path} can be read by other users (mode {stat.S_IMODE(info.st_mode):04o}); "
                f"run chmod {mode} {path}, and log in again if the tokens may have leaked"
            )

    # -- writing -----------------------------------------------------------------------
    def _ensure_directory(self) -> None:
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise OAuthStoreError(
                f"cannot create the OAuth token folder {self.directory} "
                f"({exc.strerror or exc}); set XDG_CONFIG_HOME to a writable folder"
            ) from exc
        self._check_private(os.stat(self.directory), self.directory, "700")

    def update(self, change: Callable[[dict[str, Any]], dict[str, Any] | None]) -> dict[str, Any]:
        """Read, ``change`` (returns the new content, or None to remove), write: under the lock."""
        with self.locked():
            current = self.read()
            new = change(dict(current))
            if new is None:
                self._remove_unlocked()
                return {}
            new = {**new, "format": FORMAT, "server_url": self.url}
            self._write_unlocked(new)
            return new

    def _write_unlocked(self, data: dict[str, Any]) -> None:
        write_json_atomic(self.path, data)  # mkstemp: mode 0600
        if _POSIX:
            dir_fd = os.open(self.directory, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)

    def remove(self) -> bool:
        """Remove the stored login; whether there was one."""
        if not self.path.exists():
            return False
        with self.locked():
            return self._remove_unlocked()

    def _remove_unlocked(self) -> bool:
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        return True
