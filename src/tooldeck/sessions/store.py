""":class:`SessionStore`: sessions kept in the workflow store's database, SQLite by default
and PostgreSQL at scale (the same drivers, migrations and retries as runs, jobs and the
gateway's sessions: :mod:`tooldeck.workflows.store`).

``Session(model, tools, store=SessionStore("chat.sqlite3"), session_id="support-42")``:
each turn takes the session's lease, loads it as stored, saves it after every model
response, after every step's outputs and at the end, and gives the lease back (see
:mod:`tooldeck.session_state` for the guarantees). What is stored: the transcript (one
row per item, in the strict format of the pending-approval files), the usage, and the
step waiting for approval; the ``preview`` is the last prompt's start, for listings.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any

from ..approvals import PendingStep
from ..policy._files import safe_id
from ..policy._pending_json import decode_item, decode_pending, encode_item, encode_pending
from ..session_state import SessionBusy, SessionConflict, StoredSession, holder_gone
from ..transcript import Item, Usage, UserMessage
from ..workflows.store import PostgresStore, SQLiteStore, WorkflowStore, open_store
from ..workflows.store.protocol import StoreError, now
from .ops import Busy, Head, op_claim, op_delete, op_list, op_release, op_save, op_show

__all__: list[str] = []  # tooldeck.sessions exports them

LEASE = 600.0  # seconds a turn's lease lasts without a save (longer than a tool's timeout)
_PREVIEW = 80
_USAGE_FIELDS = tuple(f.name for f in dataclasses.fields(Usage))


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """A stored session as listed: its id, size, last prompt, state and times."""

    session_id: str
    items: int
    revision: int
    preview: str
    waiting: bool  # a step waits for approval
    running: str | None  # the live holder of its lease, if a turn runs now
    created_at: datetime | None
    updated_at: datetime | None
    usage: Usage


def _usage(data: dict[str, Any]) -> Usage:
    values = {k: data.get(k, 0) for k in _USAGE_FIELDS}
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values.values()):
        raise StoreError("a stored session's usage is not counts")
    return Usage(**values)


def _pending_doc(session_id: str, step: PendingStep) -> dict[str, Any]:
    # the pending file's format checks a step against the transcript before it; the
    # transcript is stored apart, so the step is kept with start 0 and its real start
    document = encode_pending(session_id, [], dataclasses.replace(step, start=0))
    return {"document": document, "start": step.start}


def _pending(session_id: str, data: dict[str, Any] | None, items: int) -> PendingStep | None:
    if data is None:
        return None
    start = data.get("start")
    if not isinstance(start, int) or isinstance(start, bool) or not 0 <= start <= items:
        raise StoreError(f"session {session_id}: its waiting step starts outside its transcript")
    step = decode_pending(data.get("document"), f"session {session_id}").step
    return dataclasses.replace(step, start=start)


def _preview(transcript: list[Item]) -> str:
    prompt = next((i for i in reversed(transcript) if isinstance(i, UserMessage)), None)
    text = " ".join(prompt.text.split()) if prompt is not None else ""
    return text if len(text) <= _PREVIEW else text[: _PREVIEW - 3] + "..."


class SessionStore:
    """Stored sessions, by id: ``SessionStore()`` (the default SQLite file,
    ``~/.tooldeck/workflows.sqlite3`` or ``$TOOLDECK_WORKFLOWS_DB``, or
    ``$TOOLDECK_WORKFLOWS_DSN``), ``SessionStore("chat.sqlite3")``,
    ``SessionStore("postgresql://...")``, or ``SessionStore(a_workflow_store)``.

    Opened on first use; ``async with store:`` / :meth:`close` close it. ``lease`` is how
    long a turn's lease lasts without a save: a holder on another machine that stopped
    is taken over after it (one on this machine at once).
    """

    def __init__(
        self, where: str | Path | WorkflowStore | None = None, *, lease: float = LEASE
    ) -> None:
        if not lease > 0:
            raise ValueError(f"lease={lease!r}: give seconds > 0")
        if isinstance(where, WorkflowStore):
            self.db = where
        elif where is None:
            self.db = open_store()
        elif isinstance(where, str) and where.startswith(("postgresql://", "postgres://")):
            self.db = PostgresStore(where)
        else:
            self.db = SQLiteStore(Path(where))
        self.lease = timedelta(seconds=lease)
        self._open = False

    @property
    def location(self) -> str:
        return self.db.location

    async def open(self) -> None:
        if not self._open:
            await self.db.open()
            self._open = True

    async def close(self) -> None:
        if self._open:
            self._open = False
            await self.db.close()

    async def __aenter__(self) -> SessionStore:
        await self.open()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # -- what a Session uses (tooldeck.session_state.SessionStorage) --------------------
    async def claim(self, session_id: str, holder: str) -> StoredSession:
        safe_id(session_id)
        await self.open()
        at = now()
        empty = asdict(Usage())
        got = await self.db._run(
            lambda: op_claim(session_id, holder, at, at + self.lease, empty, holder_gone)
        )
        if isinstance(got, Busy):
            raise SessionBusy(_busy(session_id, got))
        head, data = got
        try:
            transcript = [decode_item(d) for d in data]
            return StoredSession(
                transcript,
                _usage(head.usage),
                _pending(session_id, head.pending, len(transcript)),
                head.revision,
                head.grants if isinstance(head.grants, list) else None,
            )
        except (ValueError, StoreError) as exc:  # not what a session writes: never loaded
            await self.release(session_id, holder)
            raise StoreError(f"stored session {session_id} cannot be read: {exc}") from None

    async def save(
        self, session_id: str, holder: str, state: StoredSession, *, unchanged: int
    ) -> int:
        await self.open()
        transcript = state.transcript
        fields = {
            "usage": asdict(state.usage),
            "pending": None if state.pending is None else _pending_doc(session_id, state.pending),
            "grants": state.grants,
            "preview": _preview(transcript),
        }
        items = [encode_item(i) for i in transcript[unchanged:]]
        at = now()
        revision = await self.db._run(
            lambda: op_save(
                session_id, holder, state.revision, unchanged, items, fields, at, at + self.lease
            )
        )
        if revision is None:
            raise SessionConflict(
                f"session {session_id} was changed by another process during this turn "
                "(its lease ran out and was taken); this turn's last step was not saved"
            )
        return revision

    async def release(self, session_id: str, holder: str) -> None:
        await self.open()
        await self.db._run(lambda: op_release(session_id, holder))

    # -- what the command line uses ------------------------------------------------------
    async def sessions(self, *, limit: int = 50) -> list[SessionInfo]:
        """Stored sessions, the most recently saved first."""
        await self.open()
        heads = await self.db._run(lambda: op_list(limit), write=False)
        return [self._info(h) for h in heads]

    async def show(self, session_id: str) -> tuple[SessionInfo, list[Item]] | None:
        """A stored session and its transcript (``None``: no such session)."""
        safe_id(session_id)
        await self.open()
        found = await self.db._run(lambda: op_show(session_id), write=False)
        if found is None:
            return None
        head, data = found
        return self._info(head), [decode_item(d) for d in data]

    async def delete(self, session_id: str) -> bool:
        """Delete a stored session (``False``: there is none); :class:`SessionBusy` while a
        turn of it runs."""
        safe_id(session_id)
        await self.open()
        at = now()
        done = await self.db._run(lambda: op_delete(session_id, at, holder_gone))
        if isinstance(done, Busy):
            raise SessionBusy(_busy(session_id, done))
        return done

    def _info(self, head: Head) -> SessionInfo:
        at = now()
        return SessionInfo(
            head.id,
            head.items,
            head.revision,
            head.preview,
            head.pending is not None,
            head.lease_owner if head.leased(at, holder_gone) else None,
            head.created_at,
            head.updated_at,
            _usage(head.usage),
        )


def _busy(session_id: str, busy: Busy) -> str:
    until = f" (its lease runs until {busy.until:%Y-%m-%d %H:%M:%S} UTC)" if busy.until else ""
    return (
        f"session {session_id} is running a turn in {busy.holder}{until}; "
        "wait for it to end, or use another session id"
    )
