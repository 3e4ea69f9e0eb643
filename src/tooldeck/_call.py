"""One call, run to its one output: the part of the dispatcher that runs a tool.

:class:`Slot` is a call of a step and what became of it; :class:`CallRunner` (the
dispatcher's base) runs one slot's tool in the current task: its context, its first
step at once, the rest under its deadline and abort (:mod:`tooldeck._running`), the
events around it, the result hooks, and exactly one output, whatever happens.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
import traceback
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from functools import partial as _partial
from typing import Any

from ._running import Watch, resume
from .approvals import Approver, PolicyHook
from .assembly import Toolset, TurnContext
from .context import AbortSignal, LiveProtection, ToolContext
from .errors import ResultEncodingError
from .events import CallFinished, CallStarted, EventBus, ToolEvent
from .result import ToolResult
from .telemetry.tracing import UNTRACED, StepTracing
from .tools import Tool
from .transcript import ToolCall, ToolOutput

__all__ = ["CallRunner", "ResultHook", "Slot", "error", "output", "short"]

_ERROR_TEXT_LIMIT = 500

ResultHook = Callable[[ToolCall, Tool, ToolResult, ToolContext], ToolResult | Awaitable[ToolResult]]
"""Transforms a tool's result before it is recorded (offload to disk, size guard...).

Hooks run in order on every executed call's result. A hook that raises is logged and
skipped: the call still gets exactly one output.
"""


@dataclass(slots=True)
class Slot:
    """One call of a step: what it resolved to, and its one output once it has it."""

    call: ToolCall
    tool: Tool | None = None
    params: Any = None
    repairs: tuple[str, ...] = ()
    output: ToolOutput | None = None
    approval_reason: str | None = None


_new = object.__new__
_monotonic = time.monotonic
_set_call_id = ToolOutput.__dict__["call_id"].__set__
_set_name = ToolOutput.__dict__["name"].__set__
_set_result = ToolOutput.__dict__["result"].__set__
_set_repairs = ToolOutput.__dict__["repairs"].__set__


def output(call: ToolCall, result: ToolResult, repairs: tuple[str, ...]) -> ToolOutput:
    """``ToolOutput(call.call_id, call.name, result, repairs)``, made without the frozen
    dataclass's generic ``__init__`` (the hot path, like ``tooldeck.result``'s)."""
    made: ToolOutput = _new(ToolOutput)
    _set_call_id(made, call.call_id)
    _set_name(made, call.name)
    _set_result(made, result)
    _set_repairs(made, repairs)
    return made


def short(text: str) -> str:
    return text if len(text) <= _ERROR_TEXT_LIMIT else text[: _ERROR_TEXT_LIMIT - 1] + "…"


def error(
    call: ToolCall, message: str, details: Any = None, repairs: tuple[str, ...] = ()
) -> ToolOutput:
    return output(call, ToolResult.error(short(message), details=details), repairs)


def _detached(signal: AbortSignal) -> AbortSignal:
    """A child of ``signal`` that keeps its state now and follows it no longer."""
    child = signal.child()
    child.detach()
    return child


def _failure(log: logging.Logger, call: ToolCall, exc: BaseException) -> ToolResult:
    """The result of a call whose tool raised ``exc`` (logged with its traceback)."""
    log.error(
        "tool %s (%s) raised", call.name, call.call_id, exc_info=(type(exc), exc, exc.__traceback__)
    )
    trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    if isinstance(exc, asyncio.CancelledError):  # the tool's own, not this run's
        message = f"{call.name} was cancelled."
    else:
        message = f"{call.name} failed: {type(exc).__name__}: {exc}"
    return ToolResult.error(
        short(message), details={"exception": type(exc).__name__, "traceback": trace}
    )


def _unencodable(log: logging.Logger, call: ToolCall, exc: ResultEncodingError) -> ToolResult:
    log.error("tool %s (%s) returned an unencodable result: %s", call.name, call.call_id, exc)
    return ToolResult.error(
        short(f"{call.name} ran, but its result cannot be recorded: {exc}"),
        details={"exception": "ResultEncodingError", "cause": str(exc)},
    )


class CallRunner:
    """Runs one slot's call to its one output (the dispatcher's base; see its docs)."""

    toolset: Toolset
    session_id: str
    turn: TurnContext | None
    policy: PolicyHook
    approver: Approver | None
    timeout: float | None
    timeouts: dict[str, float | None]
    events: EventBus
    log: logging.Logger
    result_hooks: tuple[ResultHook, ...]
    _protected: LiveProtection | None

    async def _run(self, slot: Slot, turn_signal: AbortSignal, trace: StepTracing) -> None:
        """Run one call in the current task and record its one output on ``slot``.

        The tool runs in this task (no task of its own). Its first step runs right away:
        a tool that finishes without waiting for anything needs no timer and no
        callback. Once it waits, :meth:`_wait` arms the deadline (counted from the
        start) and the abort signal, either of which cancels this task, which the tool
        sees as a ``CancelledError`` at its next ``await``; the cancellation is then
        taken back and the call gets a "stopped" output. Everything the tool bound to
        its task in the first step (``asyncio.timeout``, anyio cancel scopes) stays
        valid, since it is the same task. Any other cancellation of this task (the run
        being cancelled from outside) records a "stopped" output, then goes on. A
        ``BaseException`` the tool raises (``SystemExit``, ``KeyboardInterrupt``...) is
        that call's error output, like any exception. ``trace`` sees the call start and
        end (its output recorded, or never to be).
        """
        call = slot.call
        # the turn was aborted while this call's group started (`turn_signal.aborted`,
        # read without its property for a signal with neither a reason nor a parent)
        if turn_signal._reason is not None or (
            turn_signal._parent is not None and turn_signal.aborted
        ):
            slot.output = error(call, f"Not run: the turn was aborted ({turn_signal.reason}).")
            return
        traced = trace is not UNTRACED  # telemetry off: its hooks are not even called
        running = trace.started(slot) if traced else None
        try:
            tool = slot.tool
            assert tool is not None
            emitted: list[asyncio.Task[None]] = []  # deliveries of what the tool emitted
            # a tool that takes no context gets none, nor a signal of its own (made by
            # _wait, only if the call waits): nothing of it could ever be read
            signal: AbortSignal | None = None
            ctx: ToolContext | None = None
            if tool._takes_context:
                signal = turn_signal.child()
                ctx = self._context(call, signal, emitted)
            listening = self.events.active
            label = ""
            started = 0.0
            if listening:
                label = self._label(slot)
                await self.events.emit(CallStarted(self.session_id, call, label, slot.repairs))
                watched = turn_signal if signal is None else signal
                if watched.aborted:  # aborted while CallStarted was delivered
                    if signal is not None:
                        signal.detach()
                    slot.output = error(call, f"Not run: the turn was aborted ({watched.reason}).")
                    return
                started = time.perf_counter()
            began = _monotonic()
            result: ToolResult
            try:
                coro = tool.invoke(slot.params, ctx)  # type: ignore[arg-type]  # see invoke
                try:
                    waiting_for = coro.send(None)
                except StopIteration as finished:
                    result = finished.value
                else:
                    result = await self._wait(slot, coro, waiting_for, signal, turn_signal, began)
            except asyncio.CancelledError as exc:
                if slot.output is not None:
                    raise  # the run is being cancelled: _wait recorded the call's output
                result = _failure(self.log, call, exc)  # the tool's own, from its first step
            except ResultEncodingError as exc:
                result = _unencodable(self.log, call, exc)
            except BaseException as exc:  # Exception, SystemExit... from the tool; caught
                # here, in the frame a task of asyncio.gather starts in, since the task
                # throws what the tool raised in a thread (GeneratorExit too) into it
                result = _failure(self.log, call, exc)
            finally:
                if signal is not None:
                    signal.detach()  # the call is over: the turn's signal need not keep it
            if emitted or listening or self.result_hooks:
                if ctx is None:  # the result hooks see a context all the same
                    ctx = self._context(call, _detached(turn_signal), emitted)
                await self._finish(slot, result, ctx, emitted, label, started)
            else:
                slot.output = output(call, result, slot.repairs)
        finally:
            if traced:
                trace.ended(slot, running)

    async def _wait(
        self,
        slot: Slot,
        coro: Coroutine[Any, Any, ToolResult],
        waiting_for: Any,
        signal: AbortSignal | None,
        turn_signal: AbortSignal,
        began: float,
    ) -> ToolResult:
        """The rest of a call whose tool waits: with its deadline (counted from
        ``began``, a ``time.monotonic()``) and abort armed. ``signal`` is the call's own
        (``None``: the tool has none, and one is made here, a child of ``turn_signal``).

        Raises ``CancelledError`` only when this task is cancelled from outside, after
        recording the call's "stopped" output on ``slot``.
        """
        if signal is None:
            signal = turn_signal.child()
            try:
                return await self._wait(slot, coro, waiting_for, signal, turn_signal, began)
            finally:
                signal.detach()
        call = slot.call
        timeout = self.timeouts.get(call.name, self.timeout) if self.timeouts else self.timeout
        watch = Watch(asyncio.current_task(), signal)
        loop = asyncio.get_running_loop()
        handle = (
            loop.call_at(loop.time() + (began + timeout - _monotonic()), watch.expire, timeout)
            if timeout is not None
            else None
        )
        signal.on_abort(watch.fire)  # at once if it fired during the first step
        try:
            try:
                result: ToolResult = await resume(coro, waiting_for)
            finally:
                if handle is not None:
                    handle.cancel()
                watch.done = True
            if watch.fired:  # the tool returned after it was told to stop
                await watch.settle()
                result = watch.stopped(call.name)
            return result
        except asyncio.CancelledError as exc:
            if watch.taken_back():
                return watch.stopped(call.name)
            if not watch.cancelled and watch.task is not None and not watch.task.cancelling():
                return _failure(self.log, call, exc)  # the tool's own, nobody cancelled it
            slot.output = error(  # this task was cancelled from outside: the run is
                call,
                f"{call.name} was stopped: the turn was cancelled while it ran.",
                {"stopped": "cancelled"},
                slot.repairs,
            )
            raise

    def _label(self, slot: Slot) -> str:
        assert slot.tool is not None
        try:
            return slot.tool.describe_activity(slot.params)
        except Exception:
            self.log.exception("describe_activity failed for %s", slot.call.name)
            return f"Running {slot.call.name}"

    def _context(
        self, call: ToolCall, signal: AbortSignal, emitted: list[asyncio.Task[None]]
    ) -> ToolContext:
        """The context of one call (every ``ToolContext`` the dispatcher makes, here)."""
        protection = self._protected
        if (
            protection is None
            or protection.policy is not self.policy
            or protection.approver is not self.approver
            or protection.result_hooks is not self.result_hooks
        ):  # what protects these calls, for sub-sessions to inherit (made once)
            protection = self._protected = LiveProtection(
                self.policy, self.approver, self.result_hooks
            )
        return ToolContext(
            call.call_id,
            call.name,
            self.session_id,
            signal,
            self.log,
            _partial(self._sink, call, emitted, asyncio.get_running_loop()),
            self.turn,
            self.toolset,
            protection,
        )

    def _sink(
        self,
        call: ToolCall,
        emitted: list[asyncio.Task[None]],
        loop: asyncio.AbstractEventLoop,
        payload: Any,
    ) -> None:
        """What ``ctx.emit`` does: deliver ``payload`` to listeners, from any thread."""
        bus = self.events
        if not bus.active:
            return
        event = ToolEvent(self.session_id, call.call_id, call.name, payload)
        try:
            on_loop = asyncio.get_running_loop() is loop
        except RuntimeError:  # a worker thread
            on_loop = False
        if on_loop:
            emitted.append(loop.create_task(bus.emit(event)))
        else:
            loop.call_soon_threadsafe(lambda: emitted.append(loop.create_task(bus.emit(event))))

    async def _finish(
        self,
        slot: Slot,
        result: ToolResult,
        ctx: ToolContext,
        emitted: list[asyncio.Task[None]],
        label: str,
        started: float,
    ) -> None:
        """Events after the call, the result hooks, and the call's one output."""
        call = slot.call
        try:
            if emitted:  # what the tool emitted is delivered before the call is finished
                await asyncio.gather(*emitted, return_exceptions=True)
            bus = self.events
            if bus.active:
                seconds = time.perf_counter() - started if started else 0.0
                label = label or self._label(slot)  # nobody listened when the call started
                done = self._done_label(slot, result, label)
                for payload in result.events:
                    await bus.emit(ToolEvent(self.session_id, call.call_id, call.name, payload))
                await bus.emit(CallFinished(self.session_id, call, done, result.is_error, seconds))
            if self.result_hooks:
                result = await self._hooks(slot, result, ctx)
        except asyncio.CancelledError:
            slot.output = error(
                call,
                f"{call.name} ran, but the turn was cancelled before its result was recorded.",
                {"stopped": "cancelled"},
                slot.repairs,
            )
            raise
        slot.output = output(call, result, slot.repairs)

    def _done_label(self, slot: Slot, result: ToolResult, label: str) -> str:
        """What a finished call's activity reads (its label when it failed)."""
        assert slot.tool is not None
        if result.is_error:
            return label
        try:
            return slot.tool.describe_completed_activity(slot.params, result) or label
        except Exception:
            self.log.exception("describe_completed_activity failed for %s", slot.call.name)
            return label

    async def _hooks(self, slot: Slot, result: ToolResult, ctx: ToolContext) -> ToolResult:
        call, tool = slot.call, slot.tool
        assert tool is not None
        for hook in self.result_hooks:
            try:
                changed = hook(call, tool, result, ctx)
                if type(changed) is not ToolResult and inspect.isawaitable(changed):
                    changed = await changed
            except asyncio.CancelledError:
                raise
            except BaseException:
                self.log.exception(
                    "result hook %r failed for %s (%s)", hook, call.name, call.call_id
                )
                continue
            if isinstance(changed, ToolResult):
                result = changed
            else:
                self.log.error(
                    "result hook %r returned %s, not a ToolResult; ignored",
                    hook,
                    type(changed).__name__,
                )
        return result
