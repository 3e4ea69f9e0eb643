"""The audit log: one JSON line per policy decision and per human answer.

Each line holds the time, the session and call ids, the tool, a SHA-256 digest of the
arguments (canonical JSON: sorted keys, no spaces, UTF-8), the decision, the deciding
level, the reason and who approved. Lines are appended with a single ``write`` on a file
opened with ``O_APPEND``, so concurrent writers never interleave inside a line.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = ["AuditLog", "arguments_digest", "canonical_json"]


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, UTF-8 text: equal values give equal strings."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def arguments_digest(args: Any) -> str:
    """SHA-256 (hex) of the canonical JSON of ``args``."""
    return hashlib.sha256(canonical_json(args).encode("utf-8")).hexdigest()


class AuditLog:
    """Append-only JSON Lines (kept in memory as well; no file when ``path`` is None)."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self.entries: list[dict[str, Any]] = []
        self._lock = threading.Lock()

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
        entry: dict[str, Any] = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "session_id": session_id,
            "call_id": call_id,
            "tool": tool,
            "args_sha256": arguments_digest(args),
            "decision": decision,
            "level": level,
            "reason": reason,
            "approved_by": approved_by,
        }
        entry.update({k: v for k, v in extra.items() if v is not None})
        line = (canonical_json(entry) + "\n").encode("utf-8")
        with self._lock:
            self.entries.append(entry)
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                try:
                    written = os.write(fd, line)
                    while written < len(line):  # a short write (rare): finish the line
                        written += os.write(fd, line[written:])
                finally:
                    os.close(fd)
        return entry

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
