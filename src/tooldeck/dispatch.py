"""The dispatcher: the only code path that runs a tool.

For one model step's calls it:

1. resolves each name in the turn's :class:`~tooldeck.assembly.Toolset` (an unknown
   name gets an error output listing the tools that exist, closest first);
2. validates and repairs each call's arguments (:func:`~tooldeck.validate_arguments`);
   a call from a truncated response is never executed;
3. asks the policy hook about every valid call, then requests every needed approval of
   the step together, in one batch. An approver that cannot answer now raises
   :class:`PendingApproval`: nothing of the step has run, and the step can be finished
   later with ``dispatch(calls, prior=..., answers=...)`` (see ``Session.resume``);
4. runs the calls in the model's order: consecutive ``parallel`` calls run together, a
   ``sequential`` call waits for everything before it and blocks everything after it;
5. enforces per-tool timeouts and the abort signal (a cooperative signal first, then
   task cancellation);
6. records **exactly one** output per call, in the model's order, whatever happened:
   denied, invalid, unknown, timed out, cancelled, crashed or never run after a tool
   ended the turn. Exceptions are logged with their traceback and kept in the output's
   details; the model gets a short message.
"""

from __future__ import annotations

import asyncio
import difflib
import inspect
import logging
import time
import traceback
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._running import Watch, resume
from .approvals import (
    ApprovalAnswer,
    ApprovalRequest,
    Approver,
    PendingApproval,
    PolicyDecision,
    PolicyHook,
    allow_all,
    answering,
    arguments_json,
)
from .arguments import validate_arguments
from .assembly import Toolset, TurnContext
from .context import AbortSignal, LiveProtection, ToolContext
from .errors import ArgumentError, ResultEncodingError
from .events import (
    ApprovalRequested,
    CallFinished,
    CallStarted,
    EventBus,
    OutputRecorded,
    ToolEvent,
)
from .result import ToolResult
from .telemetry.calls import StepTrace
from .telemetry.settings import active as telemetry_active
from .tools import Tool
from .transcript import ToolCall, ToolOutput

__all__ = [
    "ApprovalAnswer",
    "ApprovalRequest",
    "Approver",
    "DispatchResult",
    "Dispatcher",
    "PendingApproval",
    "PolicyDecision",
    "PolicyHook",
    "ResultHook",
    "allow_all",
    "answering",
    "arguments_json",
]

_log = logging.getLogger("tooldeck.dispatch")
_ERROR_TEXT_LIMIT = 500
_ACTIONS = ("allow", "deny", "ask")
_NEVER = AbortSignal()  # the signal of a step run without one: nothing ever fires it


ResultHook = Callable[[ToolCall, Tool, ToolResult, ToolContext], ToolResult | Awaitable[ToolResult]]
"""Transforms a tool's result before it is recorded (offload to disk, size guard...).

Hooks run in order on every executed call's result. A hook that raises is logged and
skipped: the call still gets exactly one output.
"""


@dataclass(slots=True)
class DispatchResult:
    outputs: list[ToolOutput]
    terminated_by: str | None = None


@dataclass(slots=True)
class _Slot:
    call: ToolCall
    tool: Tool | None = None
    params: Any = None
    repairs: tuple[str, ...] = ()
    output: ToolOutput | None = None
    approval_reason: str | None = None
    trace: StepTrace | None = None  # the step's telemetry, only when it is on


def _short(text: str) -> str:
    return text if len(text) <= _ERROR_TEXT_LIMIT else text[: _ERROR_TEXT_LIMIT - 1] + "…"


def _error(
    call: ToolCall, message: str, details: Any = None, repairs: tuple[str, ...] = ()
) -> ToolOutput:
    return ToolOutput(
        call.call_id, call.name, ToolResult.error(_short(message), details=details), repairs
    )


def _denied(answer: ApprovalAnswer) -> str:
    """What the model is told of a deny: the user's words, or what happened when no one
    answered (never "by the user" for a timeout or a closed input)."""
    if answer.by_user:
        return "Denied by the user" + (f": {answer.message}" if answer.message else ".")
    why = answer.message or "nobody approved the call"
    return f"Denied: {why}" + ("" if why.endswith(".") else ".")


def _groups(slots: list[_Slot]) -> list[list[_Slot]]:
    """Split calls, in order, into groups that may run together.

    Consecutive ``parallel`` calls form one group; each ``sequential`` call is a group of
    its own, so it waits for everything before it and blocks everything after it.
    """
    groups: list[list[_Slot]] = []
    for slot in slots:
        parallel = slot.tool is not None and slot.tool.execution_mode == "parallel"
        if (
            parallel
            and groups
            and groups[-1][-1].tool is not None
            and (groups[-1][-1].tool.execution_mode == "parallel")
        ):
            groups[-1].append(slot)
        else:
            groups.append([slot])
    return groups


def unknown_tool_message(name: str, known: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, known, n=5, cutoff=0.4)
    rest = [n for n in known if n not in close]
    listed = ", ".join([*close, *rest][:40]) or "(none)"
    more = f" and {len(known) - 40} more" if len(known) > 40 else ""
    return f"Unknown tool {name!r}. Available tools: {listed}{more}."


class Dispatcher:
    """Runs one step's calls against one turn's toolset. See the module docstring."""

    def __init__(
        self,
        toolset: Toolset,
        *,
        session_id: str = "",
        turn: TurnContext | None = None,
        policy: PolicyHook | None = None,
        approver: Approver | None = None,
        timeout: float | None = 300.0,
        timeouts: Mapping[str, float | None] | None = None,
        events: EventBus | None = None,
        logger: logging.Logger | None = None,
        result_hooks: Sequence[ResultHook] = (),
    ) -> None:
        self.toolset = toolset
        self.session_id = session_id or (turn.session_id if turn else "")
        self.turn = turn
        self.policy: PolicyHook = policy or allow_all
        self.approver = approver
        self.timeout = timeout
        self.timeouts = dict(timeouts or {})
        self.events = events or EventBus()
        self.log = logger or _log
        self.result_hooks = tuple(result_hooks)
        self._protected: LiveProtection | None = None
        # Telemetry is decided once, here: when it is off, nothing below pays for it.
        self._telemetry = telemetry_active()
        if self._telemetry is not None:
            self._run = self._traced_run  # type: ignore[method-assign]
            self._approve = self._traced_approve  # type: ignore[method-assign]

    # -- preparation ------------------------------------------------------------------
    def _prepare(self, call: ToolCall) -> _Slot:
        slot = _Slot(call)
        if call.incomplete:
            slot.output = _error(
                call,
                f"Not executed: the call to {call.name} was cut off "
                "(the response hit its token limit); arguments may be "
                "incomplete.",
            )
            return slot
        tool = self.toolset.get(call.name)
        if tool is None:
            slot.output = _error(call, unknown_tool_message(call.name, self.toolset.names))
            return slot
        try:
            validated = validate_arguments(tool, call.arguments)
        except ArgumentError as exc:
            slot.output = _error(
                call, exc.model_message, {"problems": list(exc.problems)}, exc.repairs
            )
            return slot
        slot.tool, slot.params, slot.repairs = tool, validated.params, validated.repairs
        return slot

    async def _decide(self, slot: _Slot) -> None:
        assert slot.tool is not None
        try:
            decision = self.policy(slot.tool, slot.params, slot.call)
            if inspect.isawaitable(decision):
                decision = await decision
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # fails closed, whatever the policy raised
            self.log.exception("policy failed for %s (%s)", slot.call.name, slot.call.call_id)
            if slot.trace is not None:
                slot.trace.decided(slot, "deny", "", "the policy check failed")
            slot.output = _error(
                slot.call,
                f"Denied: the policy check failed ({exc}).",
                {"traceback": traceback.format_exc()},
                slot.repairs,
            )
            return
        if not isinstance(decision, PolicyDecision) or decision.action not in _ACTIONS:
            self.log.error("policy returned %r for %s; denied", decision, slot.call.name)
            if slot.trace is not None:
                slot.trace.decided(slot, "deny", "", "the policy gave no decision")
            slot.output = _error(
                slot.call, "Denied: the policy gave no decision.", None, slot.repairs
            )
            return
        if slot.trace is not None:
            slot.trace.decided(slot, decision.action, decision.level, decision.reason)
        if decision.action == "deny":
            why = decision.reason or "not allowed"
            slot.output = _error(
                slot.call, f"Denied by policy: {why}", {"level": decision.level}, slot.repairs
            )
        elif decision.action == "ask":
            slot.approval_reason = decision.reason or "approval required"

    async def _approve(
        self, slots: list[_Slot], answers: Mapping[str, ApprovalAnswer] | None = None
    ) -> None:
        asking = [s for s in slots if s.output is None and s.approval_reason is not None]
        if not asking:
            return
        requests = [
            ApprovalRequest(s.call, s.tool, s.params, s.approval_reason or "")
            for s in asking
            if s.tool is not None
        ]
        await self.events.emit(
            ApprovalRequested(
                self.session_id, tuple(r.call for r in requests), tuple(r.reason for r in requests)
            )
        )
        approver = answering(answers, self.approver) if answers else self.approver
        if approver is None:
            for s in asking:
                s.output = _error(
                    s.call,
                    f"Denied: {s.call.name} needs approval "
                    f"({s.approval_reason}) and no approver is attached.",
                )
            return
        try:
            given = list(await approver(requests))
        except PendingApproval as pending:
            pending.requests = tuple(requests)
            pending.outputs = tuple(s.output for s in slots if s.output is not None)
            raise
        except Exception as exc:
            self.log.exception("approver failed")
            given = []
            failure = f"the approval request failed ({exc})"
        else:
            failure = "no answer was given"
        for index, s in enumerate(asking):
            answer = given[index] if index < len(given) else None
            if answer is None or not isinstance(answer, ApprovalAnswer):
                s.output = _error(s.call, f"Denied: {failure}.")
            elif not answer.approved:
                s.output = _error(s.call, _denied(answer))
            elif answer.arguments is not None:
                assert s.tool is not None
                try:
                    s.params = validate_arguments(s.tool, answer.arguments).params
                except ArgumentError as exc:
                    s.output = _error(
                        s.call, f"The edited arguments are invalid: {exc.model_message}"
                    )

    async def _traced_approve(
        self, slots: list[_Slot], answers: Mapping[str, ApprovalAnswer] | None = None
    ) -> None:
        """:meth:`_approve` inside the step's approval span (telemetry on)."""
        asking = [s for s in slots if s.output is None and s.approval_reason is not None]
        trace = asking[0].trace if asking else None
        if trace is None:
            return await Dispatcher._approve(self, slots, answers)
        with trace.approval(asking):
            await Dispatcher._approve(self, slots, answers)

    # -- execution ----------------------------------------------------------------------
    def _label(self, slot: _Slot) -> str:
        assert slot.tool is not None
        try:
            return slot.tool.describe_activity(slot.params)
        except Exception:
            self.log.exception("describe_activity failed for %s", slot.call.name)
            return f"Running {slot.call.name}"

    def _context(
        self,
        call: ToolCall,
        signal: AbortSignal,
        emitted: list[asyncio.Task[None]],
        loop: asyncio.AbstractEventLoop,
    ) -> ToolContext:
        bus = self.events
        session_id = self.session_id

        def sink(payload: Any) -> None:
            if not bus.active:
                return
            event = ToolEvent(session_id, call.call_id, call.name, payload)
            try:
                on_loop = asyncio.get_running_loop() is loop
            except RuntimeError:  # a worker thread
                on_loop = False
            if on_loop:
                emitted.append(loop.create_task(bus.emit(event)))
            else:
                loop.call_soon_threadsafe(lambda: emitted.append(loop.create_task(bus.emit(event))))

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
            session_id,
            signal,
            self.log,
            sink,
            self.turn,
            self.toolset,
            protection,
        )

    async def _run(self, slot: _Slot, turn_signal: AbortSignal) -> None:
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
        that call's error output, like any exception.
        """
        tool, call = slot.tool, slot.call
        assert tool is not None
        if turn_signal.aborted:  # the turn was aborted while this call's group started
            slot.output = _error(call, f"Not run: the turn was aborted ({turn_signal.reason}).")
            return
        loop = asyncio.get_running_loop()
        signal = turn_signal.child()
        emitted: list[asyncio.Task[None]] = []  # deliveries of what the tool emitted
        ctx = self._context(call, signal, emitted, loop)
        bus = self.events
        listening = bus.active
        label = ""
        started = 0.0
        if listening:
            label = self._label(slot)
            await bus.emit(CallStarted(self.session_id, call, label, slot.repairs))
            started = time.perf_counter()
            if signal.aborted:  # aborted while CallStarted was delivered
                signal.detach()
                slot.output = _error(call, f"Not run: the turn was aborted ({signal.reason}).")
                return
        result: ToolResult
        began = loop.time()
        try:
            coro = tool.invoke(slot.params, ctx)
            try:
                waiting_for = coro.send(None)
            except StopIteration as finished:
                result = finished.value
            else:
                result = await self._wait(slot, coro, waiting_for, signal, began)
        except asyncio.CancelledError as exc:
            if slot.output is not None:
                raise  # the run is being cancelled: _wait recorded the call's output
            result = self._failure(call, exc)  # the tool's own, raised in its first step
        except ResultEncodingError as exc:
            self.log.error(
                "tool %s (%s) returned an unencodable result: %s", call.name, call.call_id, exc
            )
            result = ToolResult.error(
                _short(f"{call.name} ran, but its result cannot be recorded: {exc}"),
                details={"exception": "ResultEncodingError", "cause": str(exc)},
            )
        except BaseException as exc:  # Exception, SystemExit, KeyboardInterrupt... from the tool
            result = self._failure(call, exc)
        finally:
            signal.detach()  # the call is over: the turn's signal need not keep it
        if not (emitted or listening or self.result_hooks):
            slot.output = ToolOutput(call.call_id, call.name, result, slot.repairs)
            return
        try:
            await self._finish(slot, result, ctx, emitted, label, started)
        except asyncio.CancelledError:
            slot.output = _error(
                call,
                f"{call.name} ran, but the turn was cancelled before its result was recorded.",
                {"stopped": "cancelled"},
                slot.repairs,
            )
            raise

    async def _traced_run(self, slot: _Slot, turn_signal: AbortSignal) -> None:
        """:meth:`_run` inside the call's ``execute_tool`` span (telemetry on)."""
        trace = slot.trace
        if trace is None:
            return await Dispatcher._run(self, slot, turn_signal)
        running = trace.started(slot)
        try:
            await Dispatcher._run(self, slot, turn_signal)
        finally:
            trace.ended(slot, running)

    async def _wait(
        self,
        slot: _Slot,
        coro: Coroutine[Any, Any, ToolResult],
        waiting_for: Any,
        signal: AbortSignal,
        began: float,
    ) -> ToolResult:
        """The rest of a call whose tool waits: with its deadline and abort armed.

        Raises ``CancelledError`` only when this task is cancelled from outside, after
        recording the call's "stopped" output on ``slot``.
        """
        call = slot.call
        timeout = self.timeouts.get(call.name, self.timeout) if self.timeouts else self.timeout
        watch = Watch(asyncio.current_task(), signal)
        handle = (
            asyncio.get_running_loop().call_at(began + timeout, watch.expire, timeout)
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
                return self._failure(call, exc)  # the tool's own, nobody cancelled it
            slot.output = _error(  # this task was cancelled from outside: the run is
                call,
                f"{call.name} was stopped: the turn was cancelled while it ran.",
                {"stopped": "cancelled"},
                slot.repairs,
            )
            raise

    async def _finish(
        self,
        slot: _Slot,
        result: ToolResult,
        ctx: ToolContext,
        emitted: list[asyncio.Task[None]],
        label: str,
        started: float,
    ) -> None:
        """Events after the call, the result hooks, and the call's one output."""
        tool, call, bus = slot.tool, slot.call, self.events
        assert tool is not None
        if emitted:  # what the tool emitted is delivered before the call is finished
            await asyncio.gather(*emitted, return_exceptions=True)
        if bus.active:
            seconds = time.perf_counter() - started if started else 0.0
            label = label or self._label(slot)
            done_label = label
            if not result.is_error:
                try:
                    done_label = tool.describe_completed_activity(slot.params, result) or label
                except Exception:
                    self.log.exception("describe_completed_activity failed for %s", call.name)
            for payload in result.events:
                await bus.emit(ToolEvent(self.session_id, call.call_id, call.name, payload))
            await bus.emit(
                CallFinished(self.session_id, call, done_label, result.is_error, seconds)
            )
        if self.result_hooks:
            result = await self._hooks(call, tool, result, ctx)
        slot.output = ToolOutput(call.call_id, call.name, result, slot.repairs)

    async def _hooks(
        self, call: ToolCall, tool: Tool, result: ToolResult, ctx: ToolContext
    ) -> ToolResult:
        for hook in self.result_hooks:
            try:
                changed = hook(call, tool, result, ctx)
                if inspect.isawaitable(changed):
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

    def _failure(self, call: ToolCall, exc: BaseException) -> ToolResult:
        self.log.error(
            "tool %s (%s) raised",
            call.name,
            call.call_id,
            exc_info=(type(exc), exc, exc.__traceback__),
        )
        trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        if isinstance(exc, asyncio.CancelledError):  # the tool's own, not this run's
            message = f"{call.name} was cancelled."
        else:
            message = f"{call.name} failed: {type(exc).__name__}: {exc}"
        return ToolResult.error(
            _short(message), details={"exception": type(exc).__name__, "traceback": trace}
        )

    # -- the step -------------------------------------------------------------------------
    async def dispatch(
        self,
        calls: Sequence[ToolCall],
        signal: AbortSignal | None = None,
        *,
        prior: Sequence[ToolOutput] = (),
        answers: Mapping[str, ApprovalAnswer] | None = None,
        partial: list[ToolOutput] | None = None,
    ) -> DispatchResult:
        """Run one model step's calls; returns exactly one output per call, in order.

        To finish a step that waited for approval: ``prior`` holds the outputs the step
        already has (those calls are never prepared, asked about or run again) and
        ``answers`` the human's answers by call id. Every other call is checked again.
        Raises :class:`PendingApproval` when the approver cannot answer now.

        If the step ends any other way than returning (this task is cancelled, or
        something raises), the exception goes on, but first every call gets its one
        output: what it produced if it finished, "stopped" if it was running, "not
        executed" otherwise. With ``partial`` given, those outputs (one per call, in
        order) are put in it, so the caller can keep its transcript valid.
        """
        signal = signal or (self.turn.signal if self.turn else _NEVER)
        if prior:
            done = {o.call_id: o for o in prior}
            slots = [
                _Slot(c, output=done[c.call_id]) if c.call_id in done else self._prepare(c)
                for c in calls
            ]
        else:
            slots = [self._prepare(c) for c in calls]
        if len(slots) > 1:
            _refuse_ambiguous(slots)
        step = StepTrace(self._telemetry, slots, prior) if self._telemetry is not None else None
        try:
            slot = slots[0] if len(slots) == 1 else None
            if (
                slot is not None
                and slot.output is None
                and self.policy is allow_all
                and not signal.aborted
            ):  # the common case, without the general step's machinery
                await self._run(slot, signal)
                output = slot.output
                terminated_by = slot.call.name if output and output.result.terminate else None
            else:
                terminated_by = await self._step(slots, signal, answers)
        except PendingApproval:
            if step is not None:
                step.end(slots)
            raise
        except BaseException as exc:
            why = (
                "the turn was cancelled"
                if isinstance(exc, asyncio.CancelledError)
                else f"the step failed ({type(exc).__name__}: {exc})"
            )
            for slot in slots:
                if slot.output is None:
                    slot.output = _error(slot.call, f"Not executed: {why}.", None, slot.repairs)
            if partial is not None:
                partial[:] = [s.output for s in slots if s.output is not None]
            if step is not None:
                step.end(slots)
            raise
        if step is not None:
            step.end(slots)
        outputs = [s.output for s in slots]
        assert None not in outputs  # every path above recorded exactly one output
        if self.events.active:
            for output in outputs:
                await self.events.emit(OutputRecorded(self.session_id, output))  # type: ignore[arg-type]
        return DispatchResult(outputs, terminated_by)  # type: ignore[arg-type]

    async def _step(
        self,
        slots: list[_Slot],
        signal: AbortSignal,
        answers: Mapping[str, ApprovalAnswer] | None,
    ) -> str | None:
        if self.policy is not allow_all:
            asking = False
            for slot in slots:
                if slot.output is None:
                    await self._decide(slot)
                    asking = asking or slot.approval_reason is not None
            if asking:
                await self._approve(slots, answers)
        terminated_by: str | None = None
        if len(slots) == 1:  # the common case: one call, one group
            slot = slots[0]
            if slot.output is None:
                if signal.aborted:
                    slot.output = _error(
                        slot.call, f"Not run: the turn was aborted ({signal.reason})."
                    )
                else:
                    await self._run(slot, signal)
                    if slot.output is not None and slot.output.result.terminate:
                        terminated_by = slot.call.name
            return terminated_by
        for group in _groups([s for s in slots if s.output is None]):
            if signal.aborted:
                for s in group:
                    s.output = _error(s.call, f"Not run: the turn was aborted ({signal.reason}).")
                continue
            if terminated_by is not None:
                for s in group:
                    s.output = _error(s.call, f"Not run: {terminated_by} ended the turn.")
                continue
            if len(group) == 1:
                await self._run(group[0], signal)
            else:
                await asyncio.gather(*(self._run(s, signal) for s in group))
            for s in group:
                assert s.output is not None
                if s.output.result.terminate and terminated_by is None:
                    terminated_by = s.call.name
        return terminated_by


def _refuse_ambiguous(slots: list[_Slot]) -> None:
    """Calls of one step that share a call id are never run (nor approved).

    An id is how an approval, an output and a resumed step find their call; two calls
    with one id cannot be told apart, so both get an error output. (Transcript messages
    give their calls distinct ids when they are made, so this only meets calls built by
    hand.)
    """
    if len(slots) < 2:
        return
    seen: dict[str, int] = {}
    for slot in slots:
        seen[slot.call.call_id] = seen.get(slot.call.call_id, 0) + 1
    if len(seen) == len(slots):
        return
    for slot in slots:
        count = seen[slot.call.call_id]
        if count > 1 and slot.output is None:
            slot.output = _error(
                slot.call,
                f"Not executed: {count} calls of this step share the call id "
                f"{slot.call.call_id!r}, so none of them can be told apart; each call "
                "needs its own id.",
            )


__all__ += ["unknown_tool_message"]
