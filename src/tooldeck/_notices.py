"""Notices: short system messages a session's next turn sees before its prompt.

Something that ended while the session was not running a turn (a background job, a
scheduled run) leaves a notice for it. A :class:`NoticeSource` hands each notice out
*once*: :meth:`NoticeSource.take` must mark what it returns as delivered in the same
step (for the job store, one ``UPDATE ... RETURNING``), so two turns of the same session,
in two processes, never both see it.

Each notice enters the transcript as its own :class:`~tooldeck.transcript.UserMessage`
right before the turn's prompt, its text marked as a notice from the runtime. A user
message is valid at that place for every provider (Anthropic merges consecutive user
turns into one message; Chat Completions and Responses take several in a row), and it is
replayed like any other message on later requests.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from .transcript import UserMessage

__all__ = ["NOTICE_PREFIX", "NoticeSource", "notice_messages"]

NOTICE_PREFIX = "[tooldeck notice]"
"""How a notice's text starts, so that the model (and a reader) can tell it from the user."""


@runtime_checkable
class NoticeSource(Protocol):
    """Where a session's notices come from (e.g. :class:`tooldeck.jobs.JobNotices`)."""

    async def take(self, session_id: str) -> Sequence[str]:
        """The session's undelivered notices, each marked delivered as it is returned."""
        ...


async def notice_messages(source: NoticeSource | None, session_id: str) -> list[UserMessage]:
    """The transcript items for ``session_id``'s pending notices (empty without a source)."""
    if source is None:
        return []
    texts = await source.take(session_id)
    return [
        UserMessage(text if text.startswith(NOTICE_PREFIX) else f"{NOTICE_PREFIX} {text}")
        for text in texts
    ]
