"""Scripted stand-ins for task models (NOT real models), for offline runs, demos and tests.

:func:`submitting` makes a :class:`~tooldeck.providers.scripted.ScriptedModel` that plays
one task turn: each step sends the next scripted message, by default a ``submit_result``
call with the next value. A next value is only used after the previous one was
rejected, since an accepted result ends the turn.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..model import ModelRequest
from ..providers.scripted import ScriptedModel, call, reply
from ..transcript import AssistantMessage, ToolCall
from .engine import TaskRun
from .task_tools import SUBMIT_RESULT

__all__ = ["Raw", "submitting"]


@dataclass(frozen=True, slots=True)
class Raw:
    """``submit_result`` arguments sent exactly as this text (malformed JSON included)."""

    arguments: str


def submitting(run: TaskRun, *steps: Any, final_text: str | None = None) -> ScriptedModel:
    """A scripted model (not a real one) for ``run``'s task turn.

    Each of ``steps`` is one model step: an :class:`AssistantMessage` is sent as is, a
    :class:`ToolCall` as a message with that call, :class:`Raw` as a ``submit_result``
    call with those raw arguments, and any other value as a ``submit_result`` call with
    that result (wrapped in ``value`` when the task's result is not an object). After the
    last step the model answers ``final_text`` without calling a tool.
    """

    def script(request: ModelRequest) -> AssistantMessage:
        step = sum(1 for item in request.transcript if isinstance(item, AssistantMessage))
        if step >= len(steps):
            return reply(final_text or "I have nothing more to submit.")
        item = steps[step]
        if isinstance(item, AssistantMessage):
            return item
        if isinstance(item, ToolCall):
            return reply(item)
        if isinstance(item, Raw):
            return reply(f"Submitting (attempt {step + 1}).", call(SUBMIT_RESULT, item.arguments))
        return reply(
            f"Submitting (attempt {step + 1}).", call(SUBMIT_RESULT, run.arguments_for(item))
        )

    return ScriptedModel(script, name=f"scripted:{run.name}")
