"""The audit log: one JSON line per policy decision and per human answer.

Each line holds the time, the session and call ids, the tool, a SHA-256 digest of the
arguments (canonical JSON: sorted keys, no spaces, UTF-8), the decision, the deciding
level, the reason and who approved. Lines are appended with a single ``write`` on a file
opened with ``O_APPEND`` (:class:`AppendFile`), so concurrent writers never interleave
inside a line. The file is opened at the first line and kept open (:meth:`AuditLog.close`,
or when the log is dropped); a file removed meanwhile is made again, as are its folders.
The last :data:`KEPT_ENTRIES` entries are kept in memory as well (:attr:`AuditLog.entries`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

__all__ = ["KEPT_ENTRIES", "AppendFile", "now_text"]

KEPT_ENTRIES = 10_000
"""How many of the latest entries an :class:`AuditLog` keeps in memory (the file has all)."""


_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
)  # what json.dumps would build for these options on every call (it keeps no state)
_make_encoder = getattr(json.encoder, "c_make_encoder", None)
_local = threading.local()  # one C encoder per thread: its cycle markers are its own


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_last_time: tuple[int, str] = (-1, "")  # the latest millisecond asked for, and its text


def now_text() -> str:
    """``datetime.now(UTC).isoformat(timespec="milliseconds")``: the same clock, read as
    ``time.time_ns()`` (both floor it), made into text once per millisecond (a call's
    audit line and its evidence line are written within one, mostly)."""
    global _last_time
    ms = time.time_ns() // 1_000_000
    last = _last_time
    if last[0] == ms:
        return last[1]
    text = (_EPOCH + timedelta(milliseconds=ms)).isoformat(timespec="milliseconds")
    _last_time = (ms, text)
    return text


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, UTF-8 text: equal values give equal strings.

    ``_CANONICAL.encode(value)``, by the C encoder that ``encode`` makes on every call
    (kept, one per thread)."""
    encoder = _local.__dict__.get("encoder")
    if encoder is None:
        if _make_encoder is None:  # pragma: no cover - CPython always has the C encoder
            return _CANONICAL.encode(value)
        encoder = _local.encoder = _make_encoder(
            {}, str, json.encoder.encode_basestring, None, ":", ",", True, False, True
        )
    try:
        return "".join(encoder(value, 0))
    except BaseException:
        _local.encoder = None  # its cycle markers may be left half-filled
        raise


def arguments_digest(args: Any) -> str:
    """SHA-256 (hex) of the canonical JSON of ``args``."""
    return hashlib.sha256(canonical_json(args).encode("utf-8")).hexdigest()


class AppendFile:
    """A JSON Lines file appended to with one ``write`` per line (``O_APPEND``), kept open
    from the first line until :meth:`close` (or until the object is dropped).

    One ``fstat`` per line notices a file removed meanwhile: it is made again (and its
    folders). A write that fails raises ``OSError``; the next line opens the file again.
    The audit log and the gateway's evidence record write this way.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._closer: weakref.finalize[Any, Any] | None = None

    def append(self, line: bytes) -> None:
        """Write ``line`` (ending with a newline) at the end of the file."""
        with self._lock:
            try:
                fd = self._open()
                written = os.write(fd, line)
                while written < len(line):  # a short write (rare): finish the line
                    written += os.write(fd, line[written:])
            except OSError:
                self._drop()  # opened again for the next line
                raise

    def close(self) -> None:
        """Close the file (a later line opens it again)."""
        with self._lock:
            self._drop()

    def _open(self) -> int:
        fd = self._fd
        if fd is not None and os.fstat(fd).st_nlink == 0:  # removed: made again
            self._drop()
            fd = None
        if fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
            fd = self._fd = os.open(self.path, flags, 0o600)
            self._closer = weakref.finalize(self, _close, fd)  # never closed: closed when dropped
        return fd

    def _drop(self) -> None:
        self._fd = None
        if self._closer is not None:
            self._closer()
            self._closer = None


def _close(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


class AuditLog:
    """Append-only JSON Lines (no file when ``path`` is None); the latest
    :data:`KEPT_ENTRIES` entries are kept in :attr:`entries` too."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self.entries: deque[dict[str, Any]] = deque(maxlen=KEPT_ENTRIES)
        self._file = AppendFile(self.path) if self.path is not None else None
        self._last: tuple[Any, str] | None = None  # the last line's arguments, their digest

    def record(
        self,
        *,
        session_id: str,
        call_id: str,
        tool: str,
        args: Any,
        decision: str,
        level: str,
        reason: str = "",
        approved_by: str | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """Append one line and return it."""
        digest = arguments_digest(args)
        self._last = (args, digest)
        entry: dict[str, Any] = {
            "time": now_text(),
            "session_id": session_id,
            "call_id": call_id,
            "tool": tool,
            "args_sha256": digest,
            "decision": decision,
            "level": level,
            "reason": reason,
            "approved_by": approved_by,
        }
        entry.update({k: v for k, v in extra.items() if v is not None})
        self.entries.append(entry)
        if self._file is not None:
            self._file.append((canonical_json(entry) + "\n").encode("utf-8"))
        return entry

    def digest(self, args: Any) -> str:
        """:func:`arguments_digest` of ``args``: the last line's digest when its arguments
        are equal to ``args`` (a call's arguments are hashed once, for its audit line and
        for the gateway's evidence record)."""
        last = self._last
        if last is not None and type(last[0]) is type(args) and last[0] == args:
            return last[1]
        return arguments_digest(args)

    def close(self) -> None:
        """Close the file (the session ended; a later line opens it again)."""
        if self._file is not None:
            self._file.close()

    @staticmethod
    def read(path: str | Path) -> list[dict[str, Any]]:
        """Every line of an audit file, parsed."""
        lines = Path(path).read_text(encoding="utf-8").splitlines()
        out: list[dict[str, Any]] = []
        for line in lines:
            if line.strip():
                value = json.loads(line)
                if isinstance(value, Mapping):
                    out.append(dict(value))
        return out
