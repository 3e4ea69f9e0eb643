"""Runs waiting for approval, on disk: :class:`PendingFiles` and answer files.

``Session(..., pending_store=PendingFiles(directory))`` writes a step that waits for
approval to ``<directory>/<session_id>.pending.json``: the transcript up to and
including the step's assistant message, the outputs the step already has, and the
calls waiting for an answer (name, tier, reason, what the human is shown). Writes are
atomic (a temporary file, then a rename).

``Session.resume(answers)`` (in the same process, or a fresh one with the same
``pending_store``) *claims* the file by renaming it to ``<session_id>.resumed.json``
before anything runs. A rename succeeds once, so a step is finished at most once: two
processes resuming the same step cannot both run its tools.

Answers can be given on the command line (``tooldeck approve FILE``) and saved to a
JSON file that :func:`load_answers` reads back for ``resume``.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .._atomic_json import write_json_atomic
from .._config_files import load_json
from ..approvals import ApprovalAnswer, PendingStep, not_answered
from ..transcript import Item
from ._files import locked, session_file
from ._pending_json import (
    MAX_DEPTH,
    decode_pending,
    encode_pending,
    plain,
)
from .session import ApproveAlways

__all__ = [
    "answer_from_dict",
    "answer_to_dict",
]

ANSWERS_FORMAT = "tooldeck.answers/1"


def read_pending(path: str | Path) -> tuple[str, list[Item], PendingStep]:
    """``(session_id, transcript, step)`` from a pending file, read and checked (a
    ``ValueError`` says what is wrong with a file that is not one; see
    :mod:`tooldeck.policy._pending_json`)."""
    found = decode_pending(load_json(path, max_depth=MAX_DEPTH), path)
    return found.session_id, found.transcript, found.step


class PendingFiles:
    """A :class:`~tooldeck.loop.PendingStore` keeping one JSON file per waiting session.

    Loading then claiming is a read-modify-write: under the file's inter-process lock,
    :meth:`claim` renames the file only if it is still the one this object loaded or
    saved, so a step another process resumed (and maybe replaced with a new waiting
    step) is never finished twice.
    """

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self._seen: dict[str, tuple[int, int, str]] = {}  # session -> (inode, size, sha256)

    def path(self, session_id: str) -> Path:
        return session_file(self.directory, session_id, ".pending.json")

    def _identity(self, path: Path) -> tuple[int, int, str]:
        with path.open("rb") as f:
            st = os.fstat(f.fileno())
            return (st.st_ino, st.st_size, hashlib.sha256(f.read()).hexdigest())

    def save(
        self,
        session_id: str,
        transcript: Sequence[Item],
        step: PendingStep,
        *,
        waiter: Mapping[str, Any] | None = None,
    ) -> None:
        """Write the waiting step. ``waiter`` says who waits for the answers, if a
        process does (``tooldeck serve``: ``by``, ``gateway_session``, ``until``;
        :func:`decode_pending` reads it back)."""
        path = self.path(session_id)
        document = encode_pending(
            session_id, transcript, step, dict(waiter) if waiter is not None else None
        )
        with locked(path):
            write_json_atomic(path, document)
            self._seen[session_id] = self._identity(path)

    def load(self, session_id: str) -> tuple[list[Item], PendingStep] | None:
        path = self.path(session_id)
        if not path.exists():
            return None
        with locked(path):
            try:
                seen = self._identity(path)
            except FileNotFoundError:
                return None
            found, transcript, step = read_pending(path)
        if found != session_id:
            raise ValueError(f"{path} belongs to session {found!r}, not {session_id!r}")
        self._seen[session_id] = seen
        return transcript, step

    def forget(self, session_id: str) -> None:
        """Drop what this object remembers of ``session_id``'s file (its owner removed it
        without :meth:`claim`), so a long-lived owner keeps nothing per finished ask."""
        self._seen.pop(session_id, None)

    def claim(self, session_id: str) -> bool:
        path = self.path(session_id)
        with locked(path):
            seen = self._seen.pop(session_id, None)
            try:
                if seen is not None and self._identity(path) != seen:
                    return False  # resumed elsewhere since; the file holds another step
                os.replace(path, session_file(self.directory, session_id, ".resumed.json"))
            except FileNotFoundError:
                return False
        return True


# -- answers on disk -----------------------------------------------------------------------------
def answer_to_dict(answer: ApprovalAnswer) -> dict[str, Any]:
    out: dict[str, Any] = {"approved": answer.approved}
    if answer.message:
        out["message"] = answer.message
    if answer.arguments is not None:
        out["arguments"] = plain(dict(answer.arguments))
    if isinstance(answer, ApproveAlways):
        out["always"] = True
        if answer.pattern is not None:
            out["pattern"] = plain(dict(answer.pattern))
    return out


def answer_from_dict(data: Any) -> ApprovalAnswer:
    """An answer from JSON; anything but an explicit ``"approved": true`` is a deny."""
    if not isinstance(data, Mapping):
        return not_answered("no answer was given")
    approved = data.get("approved") is True
    message = data["message"] if isinstance(data.get("message"), str) else ""
    arguments = data.get("arguments") if isinstance(data.get("arguments"), Mapping) else None
    if approved and data.get("always") is True:
        pattern = data.get("pattern") if isinstance(data.get("pattern"), Mapping) else None
        return ApproveAlways(True, message, arguments, pattern)
    return ApprovalAnswer(approved, message, arguments if approved else None)


def save_answers(path: str | Path, session_id: str, answers: Mapping[str, ApprovalAnswer]) -> None:
    write_json_atomic(
        Path(path),
        {
            "format": ANSWERS_FORMAT,
            "session_id": session_id,
            "answers": {cid: answer_to_dict(a) for cid, a in answers.items()},
        },
    )


def load_answers(path: str | Path, *, session_id: str | None = None) -> dict[str, ApprovalAnswer]:
    """Answers saved by ``tooldeck approve`` (or :func:`save_answers`), by call id.

    :class:`ValueError` for a file that is not one (read as every file tooldeck is
    given: size, encoding and nesting limits), has no answers, or (with ``session_id``)
    answers another session's step. Each answer is read by :func:`answer_from_dict`."""
    data = load_json(path)
    if not isinstance(data, Mapping) or data.get("format") != ANSWERS_FORMAT:
        raise ValueError(f"{path}: not an answers file ({ANSWERS_FORMAT})")
    if session_id is not None and data.get("session_id") != session_id:
        raise ValueError(
            f"{path}: the answers are for {data.get('session_id')!r}, not {session_id!r}"
        )
    given = data.get("answers")
    if not isinstance(given, Mapping):
        raise ValueError(f"{path}: the file has no answers")
    return {str(cid): answer_from_dict(a) for cid, a in given.items()}
