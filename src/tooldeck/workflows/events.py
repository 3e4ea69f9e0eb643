"""Events of workflow runs, on the engine's :class:`~tooldeck.events.EventBus`.

Each event's ``session_id`` is the workflow run's id. Task events name the task; a
running task's tool activity is forwarded as :class:`TaskActivity` (its label), which
is what live progress displays show; a run followed on workers also gets a
:class:`TaskNote` for each rejection and each restarted turn.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

from ..events import Event

__all__ = ["reasons_line"]

REASONS_SHOWN = 300


def reasons_line(reasons: Iterable[str]) -> str:
    """A rejection's reasons on one line, as logs and live displays show them (clipped)."""
    why = "; ".join(" ".join(str(r).split()) for r in reasons) or "no reason recorded"
    return why if len(why) <= REASONS_SHOWN else why[: REASONS_SHOWN - 1] + "…"


@dataclass(frozen=True, slots=True)
class WorkflowStateChanged(Event):
    type: ClassVar[str] = "workflow_state"
    name: str
    state: str
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class TaskStateChanged(Event):
    type: ClassVar[str] = "task_state"
    task: str
    state: str
    attempts: int = 0
    max_attempts: int = 0
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class TaskNote(Event):
    """Something a task went through that its state does not show, said once.

    ``kind``: ``rejected`` (a submission was rejected; ``text`` has the reasons) or
    ``restarted`` (its turn started again: a takeover after a lost worker, a recovery by
    a restarted worker, or a step run again; ``text`` has the history's reason).
    """

    type: ClassVar[str] = "task_note"
    task: str
    kind: str
    text: str


@dataclass(frozen=True, slots=True)
class TaskActivity(Event):
    type: ClassVar[str] = "task_activity"
    task: str
    label: str
    finished: bool = False
    is_error: bool = False
