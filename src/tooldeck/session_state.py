"""What a stored session is to the loop: :class:`SessionStorage`, the protocol a store
implements (:class:`tooldeck.sessions.SessionStore`: SQLite and PostgreSQL), and
:class:`Keeper`, what a :class:`~tooldeck.loop.Session` with ``store=`` uses to load,
save and release it.

A turn of a stored session holds the session's **lease** from its start to its end: the
store gives it to one holder at a time (another process's turn on the same id is refused
with :class:`SessionBusy`, in one line). The holder loads the session as the store has
it, then saves after every model response, after every step's outputs and at the end;
each save is checked against the **revision** it loaded (a write from anyone else in
between is :class:`SessionConflict`, and nothing of the stale turn is written). So two
processes never interleave steps of one session.

A process killed in the middle of a turn (``kill -9``) leaves its last save and a lease
that others may take: at once on the same machine (its process is gone), else when the
lease runs out. The next turn that loads the session gives every call that has no
output one (:func:`close_unrecorded`: the call may or may not have run), so the
conversation goes on with exactly one output per call.
"""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .approvals import PendingStep
from .errors import TooldeckError
from .policy.grants import GrantStore, grant_of
from .policy.protection import Protection
from .policy.session import SessionPolicy
from .result import ToolResult
from .transcript import AssistantMessage, Item, ToolOutput, Usage

__all__ = [
    "Keeper",
    "SessionStorage",
    "StoredSession",
    "close_unrecorded",
    "holder_name",
]

UNRECORDED = (
    "Not recorded: the process running this turn stopped before this call's output was "
    "saved; the call may or may not have run. Check before running it again."
)


class SessionBusy(TooldeckError, RuntimeError):
    """Another holder (a process, or another Session object) is running a turn of it."""


class SessionConflict(TooldeckError, RuntimeError):
    """The stored session changed under this turn (someone else took its lease)."""


@dataclass(slots=True)
class StoredSession:
    """A session as the store has it; ``revision`` counts its saves."""

    transcript: list[Item] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    pending: PendingStep | None = None
    revision: int = 0
    grants: list[Any] | None = None  # approve-always grants (Grant.as_dict); None: none kept


class SessionStorage(Protocol):
    """Keeps sessions by id, for one holder at a time (see the module's docstring)."""

    async def claim(self, session_id: str, holder: str) -> StoredSession:
        """Take the lease of ``session_id`` for ``holder`` and load it (a new, empty one when
        there is none); :class:`SessionBusy` when another live holder has it."""
        ...

    async def save(
        self,
        session_id: str,
        holder: str,
        state: StoredSession,
        *,
        unchanged: int,
    ) -> int:
        """Write ``state`` over revision ``state.revision``; the first ``unchanged`` items
        of its transcript are as stored. Returns the new revision; :class:`SessionConflict`
        when the revision or the lease is not this holder's any more."""
        ...

    async def release(self, session_id: str, holder: str) -> None:
        """Give the lease back (nothing when ``holder`` does not have it)."""
        ...


def holder_name() -> str:
    """A new holder's name: ``host:pid:random`` (the store tells a dead one by it)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


def holder_gone(holder: str) -> bool:
    """Whether ``holder`` was a process of this machine that no longer runs."""
    host, _, rest = holder.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def close_unrecorded(items: list[Item]) -> int:
    """Give each call of the last response that has no output one (:data:`UNRECORDED`);
    how many were added."""
    last = next(
        (i for i in range(len(items) - 1, -1, -1) if isinstance(items[i], AssistantMessage)),
        None,
    )
    if last is None:
        return 0
    message = items[last]
    assert isinstance(message, AssistantMessage)
    answered = {i.call_id for i in items[last + 1 :] if isinstance(i, ToolOutput)}
    missing = [c for c in message.tool_calls if c.call_id not in answered]
    items.extend(ToolOutput(c.call_id, c.name, ToolResult.error(UNRECORDED)) for c in missing)
    return len(missing)


def kept_grants(protect: Protection | None) -> list[GrantStore]:
    """The grant stores of ``protect``'s session policies that only memory keeps (no grants
    file): those a stored session keeps and gives back. One with a file of its own is kept
    there, and the file stays the truth (a grant revoked there never comes back)."""
    judges = protect.judges if protect is not None else ()
    found: list[GrantStore] = []
    for judge in judges:
        grants = judge.grants if isinstance(judge, SessionPolicy) else None
        if grants is not None and grants.path is None and all(grants is not g for g in found):
            found.append(grants)
    return found


def grants_of(stores: Sequence[GrantStore]) -> list[Any] | None:
    """What a stored session keeps of ``stores``' grants (``None``: no store to keep)."""
    if not stores:
        return None
    seen: dict[str, Any] = {}
    for store in stores:
        for grant in store.grants:
            seen.setdefault(grant.id, grant.as_dict())
    return list(seen.values())


def give_back(stores: Sequence[GrantStore], grants: list[Any] | None) -> None:
    """The stored grants, back into the session's memory-only grant stores."""
    if grants is None or not stores:
        return
    restored = tuple(grant_of(g, f"stored grants[{i}]") for i, g in enumerate(grants))
    for store in stores:
        store.replace(restored)


class Keeper:
    """A session's side of its store: the lease it holds, what it saved last."""

    __slots__ = ("_last", "_saved", "holder", "revision", "session_id", "store")

    def __init__(self, store: SessionStorage, session_id: str) -> None:
        self.store, self.session_id = store, session_id
        self.holder = holder_name()
        self.revision = 0
        self._saved = 0  # items of the transcript as stored
        self._last: Item | None = None  # the last of them, to see that they are unchanged

    async def claim(self) -> StoredSession:
        """The lease, and the session as stored (its open calls closed)."""
        state = await self.store.claim(self.session_id, self.holder)
        self.revision = state.revision
        self._saved = len(state.transcript)
        self._last = state.transcript[-1] if state.transcript else None
        if state.pending is None and close_unrecorded(state.transcript):
            await self.save(state.transcript, state.usage, None, state.grants)
        return state

    async def save(
        self,
        transcript: Sequence[Item],
        usage: Usage,
        pending: PendingStep | None,
        grants: list[Any] | None = None,
    ) -> None:
        saved, last = self._saved, self._last
        same = saved <= len(transcript) and (saved == 0 or transcript[saved - 1] is last)
        unchanged = saved if same else 0  # a transcript rewritten in place: all again
        items = list(transcript)
        self.revision = await self.store.save(
            self.session_id,
            self.holder,
            StoredSession(items, usage, pending, self.revision, grants),
            unchanged=unchanged,
        )
        self._saved, self._last = len(items), (items[-1] if items else None)

    async def release(self) -> None:
        await self.store.release(self.session_id, self.holder)
