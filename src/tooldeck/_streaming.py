"""Streamed turns: a model step's fragments as events, and the iterator a caller consumes.

A chat UI shows text as it arrives, a tool call's arguments as they are written and the
reasoning summaries a provider shows. A streamed turn is still the same turn as
``Session.run()``: the loop's one driver runs it, the same dispatcher runs its calls, the
same frozen outputs go to the same transcript; only a model step reads the provider's
stream (:func:`stream_step`) instead of one response, so the request differs from the
non-streamed one only by the provider's streaming flag.

:class:`TurnStream` hands the turn's events to one consumer, in order. The model's side of
the turn goes at the consumer's pace: each of its events waits until the consumer has taken
it, so the provider's stream is read no faster than the consumer reads, and no call of a
step starts before the consumer has taken the step's ``ModelStepFinished``. The calls'
events are queued (tools are not held up by a slow consumer). Breaking out of ``async
for`` (or cancelling the consumer) cancels the turn where it is, and it ends the way a
cancelled ``run()`` does: every call of the step gets exactly one output, the transcript
stays valid for the next request, and the provider's stream is closed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Generic, TypeVar

from .events import (
    Event,
    EventBus,
    ModelStepFinished,
    ModelStepStarted,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    ToolCallDone,
    ToolCallStarted,
    TurnContinued,
    TurnStarted,
)
from .model import Model, ModelDelta, ModelRequest
from .transcript import AssistantMessage

__all__ = ["LiveTurn", "stream_step"]

R = TypeVar("R")

# The events the loop emits around a model step. Each waits until the consumer has taken
# it, so the provider's stream is read at the consumer's pace and no call of a step starts
# before the consumer has taken its ModelStepFinished. Everything else (the dispatcher's
# call events, what tools emit) is queued: tools run at their own pace.
_PACED = (
    TurnStarted,
    ModelStepStarted,
    TextDelta,
    ReasoningDelta,
    ToolCallStarted,
    ToolCallDelta,
    ToolCallDone,
    ModelStepFinished,
    TurnContinued,
)


async def stream_step(
    model: Model,
    request: ModelRequest,
    bus: EventBus,
    session_id: str,
    step: int,
    *,
    record: Callable[[AssistantMessage], object] | None = None,
) -> AssistantMessage:
    """One model step over ``model.stream()``: each fragment becomes an event on ``bus``.

    Returns the step's message, the one ``respond()`` would have returned. Once the
    response has ended, the message is handed to ``record`` (the loop appends it to the
    transcript), then every call of it gets a :class:`ToolCallDone` (preceded by a
    :class:`ToolCallStarted` if the stream never announced it). The provider's stream is
    closed whatever happens, a cancellation included.
    """
    pieces = model.stream(request)
    final: AssistantMessage | None = None
    calls = _CallIndex()
    try:
        async for piece in pieces:
            if isinstance(piece, AssistantMessage):
                final = piece
                break
            if bus.active:
                for event in calls.events(piece, session_id, step):
                    await bus.emit(event)
    finally:
        close = getattr(pieces, "aclose", None)
        if close is not None:
            await close()
    if final is None:
        raise RuntimeError(f"{model.name}: the response stream ended without its message")
    if record is not None:
        record(final)
    if bus.active:
        for index, call in enumerate(final.tool_calls):
            if index not in calls.announced:
                await bus.emit(ToolCallStarted(session_id, step, index, call.call_id, call.name))
            await bus.emit(ToolCallDone(session_id, step, index, call))
    return final


class _CallIndex:
    """Which calls a stream announced, and the index of a fragment that names none."""

    def __init__(self) -> None:
        self.announced: set[int] = set()
        self._by_id: dict[str, int] = {}

    def _index(self, delta: ModelDelta) -> int:
        if delta.index is not None:
            return delta.index
        if delta.call_id and delta.call_id in self._by_id:
            return self._by_id[delta.call_id]
        return max(self.announced, default=-1) + (1 if delta.kind == "tool_call_start" else 0)

    def events(self, delta: ModelDelta, session_id: str, step: int) -> list[Event]:
        if delta.kind == "text":
            return [TextDelta(session_id, step, delta.text)] if delta.text else []
        if delta.kind == "reasoning":
            return [ReasoningDelta(session_id, step, delta.text)] if delta.text else []
        index = max(self._index(delta), 0)
        out: list[Event] = []
        if index not in self.announced:
            self.announced.add(index)
            if delta.call_id:
                self._by_id[delta.call_id] = index
            out.append(
                ToolCallStarted(session_id, step, index, delta.call_id or "", delta.name or "")
            )
        if delta.kind == "tool_call" and delta.text:
            out.append(ToolCallDelta(session_id, step, index, delta.call_id or "", delta.text))
        return out


class LiveTurn(Generic[R]):
    """The running part of a :class:`TurnStream`: the turn's task and its event relay.

    Kept apart from the stream object so that nothing the turn holds refers to the
    stream: a stream the consumer dropped is collected at once, and that abandons the
    turn (see :meth:`TurnStream.__del__`).
    """

    def __init__(self, drive: Callable[[LiveTurn[R]], Awaitable[R]], bus: EventBus) -> None:
        self._drive = drive
        self._bus = bus
        self._queue: asyncio.Queue[tuple[Event, asyncio.Future[None]] | None] | None = None
        self.task: asyncio.Task[R] | None = None
        self.abandoned = False  # the consumer is gone: the turn is (being) cancelled
        self.finished = False  # the consumer has seen the end

    @property
    def running(self) -> bool:
        return self.task is not None and not self.task.done()

    def _start(self) -> None:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[Event, asyncio.Future[None]] | None] = asyncio.Queue()
        self._queue = queue
        unsubscribe = self._bus.subscribe(self._relay)

        async def main() -> R:
            try:
                return await self._drive(self)
            finally:
                unsubscribe()

        def ended(task: asyncio.Task[R]) -> None:
            queue.put_nowait(None)
            if not task.cancelled():
                task.exception()  # the loop logged a failure; a consumer gets it from next()

        self.task = loop.create_task(main())
        self.task.add_done_callback(ended)

    async def _relay(self, event: Event) -> None:
        """The bus subscriber: queue ``event``; a model-side one waits until it is taken."""
        if self.abandoned or self._queue is None:
            return
        taken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait((event, taken))
        if isinstance(event, _PACED):
            await taken

    async def next(self) -> Event:
        if self.task is None:
            if self.abandoned:
                raise StopAsyncIteration
            self._start()
        if self.finished:
            raise StopAsyncIteration
        assert self._queue is not None and self.task is not None
        try:
            item = await self._queue.get()
        except BaseException:  # the consumer was cancelled: so is the turn
            await self.close()
            raise
        if item is None:
            self.finished = True
            if not self.task.cancelled() and (error := self.task.exception()) is not None:
                raise error
            raise StopAsyncIteration
        event, taken = item
        if not taken.done():
            taken.set_result(None)
        return event

    def abandon(self) -> None:
        """Cancel the turn without waiting (safe from any thread, and at collection)."""
        self.abandoned = True
        task = self.task
        if task is None or task.done():
            return
        loop = task.get_loop()
        if loop.is_closed():
            return
        try:
            here = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        if here is loop:
            task.cancel()
        else:
            loop.call_soon_threadsafe(task.cancel)

    async def close(self) -> None:
        """Cancel the turn if it is still running and wait until it has ended."""
        self.abandon()
        self.finished = True
        if self.task is not None and not self.task.done():
            await asyncio.wait([self.task])

    async def stopped(self) -> None:
        """Wait until the turn's task has ended (its outcome is not raised)."""
        if self.task is not None and not self.task.done():
            await asyncio.wait([self.task])


class TurnStream(Generic[R]):
    """A streamed turn: ``async for event in session.stream(prompt): ...``.

    The turn starts at the first iteration and yields every event of the turn in order
    (see ``docs/loop.md``), :class:`~tooldeck.events.TurnFinished` last; an exception the
    turn raised is raised from the iteration after that event. ``result`` is the
    :class:`~tooldeck.loop.RunResult` once the iteration has ended; ``await
    stream.wait()`` reads the remaining events and returns it.

    Leaving the iteration early (``break``, an exception, the consumer's task cancelled)
    cancels the turn where it is. ``async with session.stream(prompt) as events:`` waits
    on exit until the cancelled turn has recorded its outputs; without it, the session's
    next turn waits for that first.
    """

    def __init__(self, drive: Callable[[LiveTurn[R]], Awaitable[R]], bus: EventBus) -> None:
        self._live = LiveTurn(drive, bus)

    def __aiter__(self) -> AsyncIterator[Event]:
        return self

    async def __anext__(self) -> Event:
        return await self._live.next()

    @property
    def done(self) -> bool:
        """True once the turn has ended (finished, failed or cancelled)."""
        task = self._live.task
        return task is not None and task.done()

    @property
    def result(self) -> R:
        """The turn's result; raises what the turn raised, or if it has not finished."""
        task = self._live.task
        if task is None or not task.done():
            raise RuntimeError("the streamed turn has not finished: iterate it to its end first")
        if task.cancelled():
            raise asyncio.CancelledError("the streamed turn was cancelled")
        return task.result()

    async def wait(self) -> R:
        """Read the rest of the turn's events (bus subscribers still get them); the result."""
        async for _ in self:
            pass
        return self.result

    async def aclose(self) -> None:
        """Cancel the turn if it is still running, and wait until it has ended."""
        await self._live.close()

    async def __aenter__(self) -> TurnStream[R]:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __del__(self) -> None:
        live = getattr(self, "_live", None)
        if live is not None and live.running:
            live.abandon()
