"""Typed events and hooks.

Everything observable in a run is an event: a frozen dataclass with a ``type`` name.
An :class:`EventBus` delivers each event to subscribers (sync or async callables,
optionally filtered by type) and to any number of async streams. A subscriber that
raises is logged with its traceback and never breaks the run.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .transcript import AssistantMessage, StopReason, ToolCall, ToolOutput, Usage

__all__ = [
    "ApprovalRequested",
    "CallFinished",
    "CallStarted",
    "Event",
    "ModelStepFinished",
    "ModelStepStarted",
    "OutputRecorded",
    "ReasoningDelta",
    "TextDelta",
    "ToolCallDelta",
    "ToolCallDone",
    "ToolCallStarted",
    "ToolEvent",
    "TurnContinued",
    "TurnFinished",
    "TurnStarted",
]

_log = logging.getLogger("tooldeck.events")


@dataclass(frozen=True, slots=True)
class Event:
    type: ClassVar[str] = "event"
    session_id: str


@dataclass(frozen=True, slots=True)
class TurnStarted(Event):
    type: ClassVar[str] = "turn_started"
    prompt: str
    tools: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ModelStepStarted(Event):
    type: ClassVar[str] = "model_step_started"
    step: int


@dataclass(frozen=True, slots=True)
class ModelStepFinished(Event):
    type: ClassVar[str] = "model_step_finished"
    step: int
    message: AssistantMessage

    @property
    def usage(self) -> Usage:
        return self.message.usage

    @property
    def stop_reason(self) -> StopReason:
        return self.message.stop_reason


# -- what a streamed step adds (only ``Session.stream`` turns emit these) ----------------


@dataclass(frozen=True, slots=True)
class TextDelta(Event):
    """A piece of the text the model is writing in ``step``."""

    type: ClassVar[str] = "text_delta"
    step: int
    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta(Event):
    """A piece of a reasoning summary (or thinking text) the provider shows."""

    type: ClassVar[str] = "reasoning_delta"
    step: int
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallStarted(Event):
    """The model began writing a tool call: ``index`` is its place among the step's calls.

    ``call_id`` and ``name`` are what the provider streamed (either may be ``""`` until
    the call is done); match later events by ``index``.
    """

    type: ClassVar[str] = "tool_call_started"
    step: int
    index: int
    call_id: str
    name: str


@dataclass(frozen=True, slots=True)
class ToolCallDelta(Event):
    """A fragment of the arguments of call ``index`` (JSON text, as it is written)."""

    type: ClassVar[str] = "tool_call_delta"
    step: int
    index: int
    call_id: str
    arguments: str


@dataclass(frozen=True, slots=True)
class ToolCallDone(Event):
    """The model's message is complete and ``call`` is as the transcript keeps it.

    Emitted for every call of the step, in order, once the response has ended (its
    final call id, its whole arguments; ``call.incomplete`` when the response was cut
    off, and then it never runs). Calls start running only after these events.
    """

    type: ClassVar[str] = "tool_call_done"
    step: int
    index: int
    call: ToolCall


@dataclass(frozen=True, slots=True)
class TurnContinued(Event):
    """A step hit its output limit and the turn goes on with a larger one.

    ``not_executed`` lists the cut-off step's calls (each got a "not executed" output);
    ``continuation`` counts from 1 within the turn.
    """

    type: ClassVar[str] = "turn_continued"
    step: int
    continuation: int
    previous_limit: int
    output_limit: int
    not_executed: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CallStarted(Event):
    type: ClassVar[str] = "call_started"
    call: ToolCall
    label: str
    repairs: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ToolEvent(Event):
    """A presentation event a running tool emitted through ``ctx.emit``."""

    type: ClassVar[str] = "tool_event"
    call_id: str
    name: str
    payload: Any


@dataclass(frozen=True, slots=True)
class CallFinished(Event):
    type: ClassVar[str] = "call_finished"
    call: ToolCall
    label: str
    is_error: bool
    seconds: float


@dataclass(frozen=True, slots=True)
class ApprovalRequested(Event):
    type: ClassVar[str] = "approval_requested"
    calls: tuple[ToolCall, ...]
    reasons: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class OutputRecorded(Event):
    type: ClassVar[str] = "output_recorded"
    output: ToolOutput


@dataclass(frozen=True, slots=True)
class TurnFinished(Event):
    type: ClassVar[str] = "turn_finished"
    stop_reason: StopReason
    reason: str
    steps: int
    usage: Usage = field(default_factory=Usage)


Subscriber = Callable[[Event], Awaitable[None] | None]


class EventBus:
    """Deliver events to subscribers and streams, in emission order."""

    def __init__(self) -> None:
        self._subscribers: list[tuple[Subscriber, frozenset[str] | None]] = []
        self._queues: list[asyncio.Queue[Event | None]] = []

    def subscribe(self, callback: Subscriber, *types: str | type[Event]) -> Callable[[], None]:
        """Call ``callback(event)`` for every event (or only the given types).

        Returns a function that unsubscribes.
        """
        wanted = frozenset(t if isinstance(t, str) else t.type for t in types) or None
        entry = (callback, wanted)
        self._subscribers.append(entry)
        return lambda: self._subscribers.remove(entry) if entry in self._subscribers else None

    @property
    def active(self) -> bool:
        """Whether anyone listens (a subscriber or a stream): events need not be made."""
        return bool(self._subscribers or self._queues)

    async def emit(self, event: Event) -> None:
        for callback, wanted in list(self._subscribers):
            if wanted is not None and event.type not in wanted:
                continue
            try:
                outcome = callback(event)
                if inspect.isawaitable(outcome):
                    await outcome
            except Exception:
                _log.exception("event subscriber %r failed on %s", callback, event.type)
        for queue in self._queues:
            queue.put_nowait(event)

    @asynccontextmanager
    async def stream(self) -> AsyncIterator[AsyncIterator[Event]]:
        """``async with bus.stream() as events: async for e in events: ...``

        The iterator ends when :meth:`close_streams` is called (the loop does this when
        a turn finishes).
        """
        queue: asyncio.Queue[Event | None] = asyncio.Queue()
        self._queues.append(queue)

        async def iterate() -> AsyncIterator[Event]:
            while True:
                item = await queue.get()
                if item is None:
                    return
                yield item

        try:
            yield iterate()
        finally:
            self._queues.remove(queue)

    def close_streams(self) -> None:
        for queue in self._queues:
            queue.put_nowait(None)
