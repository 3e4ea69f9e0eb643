"""The evidence record: every executed call's complete upstream result, one JSON line each.

The client gets one representation of a result (offloaded and guarded when large); the
record keeps what the upstream server really answered: the whole ``CallToolResult`` as
it came over the wire (``details["mcp"]``, see :mod:`tooldeck.mcp.results`), with the
session, the call id, the tool, the server and the SHA-256 of the arguments. It is a
result hook placed before the offload store's, so it sees the result unchanged; it
returns the result as it got it. Lines are appended with one ``write`` (``O_APPEND``) to
the file opened at the first line and kept open until the session ends (:meth:`EvidenceLog.close`);
a file removed meanwhile is made again (as are its folders), and a write that fails is
logged, the next line opening the file again.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import weakref
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..context import ToolContext
from ..policy import arguments_digest, canonical_json
from ..result import ToolResult
from ..tools import Tool
from ..transcript import ToolCall

__all__ = ["EvidenceLog"]

_log = logging.getLogger("tooldeck.gateway")


class EvidenceLog:
    """Append-only JSON Lines of executed calls (``path=None``: nothing is written)."""

    def __init__(self, path: str | Path | None, session_id: str) -> None:
        self.path = Path(path) if path is not None else None
        self.session_id = session_id
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._closer: weakref.finalize[Any, Any] | None = None

    def _open(self) -> int:
        fd = self._fd
        if fd is not None and os.fstat(fd).st_nlink == 0:  # removed: made again
            self._drop()
            fd = None
        if fd is None:
            assert self.path is not None
            self.path.parent.mkdir(parents=True, exist_ok=True)
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
            fd = self._fd = os.open(self.path, flags, 0o600)
            self._closer = weakref.finalize(self, _close, fd)  # a session never closed
        return fd

    def _drop(self) -> None:
        self._fd = None
        if self._closer is not None:
            self._closer()
            self._closer = None

    def close(self) -> None:
        """The session ended: the file is closed (a later line opens it again)."""
        with self._lock:
            self._drop()

    def hook(self, call: ToolCall, tool: Tool, result: ToolResult, ctx: ToolContext) -> ToolResult:
        """The result hook: record, and hand the result on unchanged."""
        if self.path is None:
            return result
        details = result.details if isinstance(result.details, dict) else {}
        mcp = getattr(tool, "mcp", None)
        entry: dict[str, Any] = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "session_id": self.session_id,
            "call_id": call.call_id,
            "tool": tool.name,
            "server": getattr(mcp, "server", None),
            "upstream_tool": getattr(mcp, "tool", None),
            "args_sha256": arguments_digest(call.arguments),
            "is_error": result.is_error,
            "result": details.get("mcp"),
        }
        if entry["result"] is None:  # not an upstream result: what the tool returned
            entry["text"] = result.text()
        line = (canonical_json(entry) + "\n").encode("utf-8")
        with self._lock:
            try:
                fd = self._open()
                written = os.write(fd, line)
                while written < len(line):
                    written += os.write(fd, line[written:])
            except OSError:
                _log.exception("the evidence record %s cannot be written", self.path)
                self._drop()  # opened again for the next line
        return result


def _close(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)
