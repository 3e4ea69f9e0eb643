"""Stored sessions: a conversation kept in SQLite (the default) or PostgreSQL, resumed by id
in a later process, never written by two processes at once (see docs/sessions.md).

``Session(model, tools, store=SessionStore("chat.sqlite3"), session_id="support-42")``;
``tooldeck sessions list|show|delete`` reads and removes them.
"""

from __future__ import annotations

from ..session_state import SessionBusy, SessionConflict
from .store import SessionInfo, SessionStore

__all__ = ["SessionBusy", "SessionConflict", "SessionInfo", "SessionStore"]
