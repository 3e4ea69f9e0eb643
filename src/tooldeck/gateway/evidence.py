"""The evidence record: every executed call's complete upstream result, one JSON line each.

The client gets one representation of a result (offloaded and guarded when large); the
record keeps what the upstream server really answered: the whole ``CallToolResult`` as
it came over the wire (``details["mcp"]``, see :mod:`tooldeck.mcp.results`), with the
session, the call id, the tool, the server and the SHA-256 of the arguments (hashed
once: the session's audit line of the call has it already). It is a result hook placed
before the offload store's, so it sees the result unchanged; it returns the result as it
got it. Lines are appended as the audit log's are
(:class:`~tooldeck.policy.audit.AppendFile`: one ``write``, ``O_APPEND``, the file kept
open until the session ends, made again if removed); a write that fails is logged, the
next line opening the file again.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ..context import ToolContext
from ..policy import arguments_digest, canonical_json
from ..policy.audit import AppendFile, AuditLog, now_text
from ..result import ToolResult
from ..tools import Tool
from ..transcript import ToolCall

__all__ = ["EvidenceLog"]

_log = logging.getLogger("tooldeck.gateway")


class EvidenceLog:
    """Append-only JSON Lines of executed calls (``path=None``: nothing is written)."""

    def __init__(
        self, path: str | Path | None, session_id: str, audit: AuditLog | None = None
    ) -> None:
        self.path = Path(path) if path is not None else None
        self.session_id = session_id
        self._digest = audit.digest if audit is not None else arguments_digest
        self._file = AppendFile(self.path) if self.path is not None else None

    def close(self) -> None:
        """The session ended: the file is closed (a later line opens it again)."""
        if self._file is not None:
            self._file.close()

    def hook(self, call: ToolCall, tool: Tool, result: ToolResult, ctx: ToolContext) -> ToolResult:
        """The result hook: record, and hand the result on unchanged."""
        if self._file is None:
            return result
        details = result.details if isinstance(result.details, dict) else {}
        mcp = getattr(tool, "mcp", None)
        entry: dict[str, Any] = {
            "time": now_text(),
            "session_id": self.session_id,
            "call_id": call.call_id,
            "tool": tool.name,
            "server": getattr(mcp, "server", None),
            "upstream_tool": getattr(mcp, "tool", None),
            "args_sha256": self._digest(call.arguments),
            "is_error": result.is_error,
            "result": details.get("mcp"),
        }
        if entry["result"] is None:  # not an upstream result: what the tool returned
            entry["text"] = result.text()
        try:
            self._file.append((canonical_json(entry) + "\n").encode("utf-8"))
        except OSError:
            _log.exception("the evidence record %s cannot be written", self.path)
        return result
