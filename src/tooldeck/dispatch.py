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
import json
import logging
import time
import traceback
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic import BaseModel

from .arguments import validate_arguments
from .assembly import Toolset, TurnContext
from .context import AbortSignal, Protection, ToolContext
from .errors import ArgumentError
from .events import (
    ApprovalRequested,
    CallFinished,
    CallStarted,
    EventBus,
    OutputRecorded,
    ToolEvent,
)
from .result import ToolResult
from .tool import Tool
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
CANCEL_GRACE_SECONDS = 2.0


@dataclass(frozen=True, slots=True)
class PolicyDecision:
    action: Literal["allow", "deny", "ask"]
    reason: str = ""
    level: str = ""


class PolicyHook(Protocol):
    """Decides, right before execution, whether one validated call may run."""

    def __call__(
        self, tool: Tool, params: Any, call: ToolCall
    ) -> PolicyDecision | Awaitable[PolicyDecision]: ...


def allow_all(tool: Tool, params: Any, call: ToolCall) -> PolicyDecision:
    """The default policy until one is configured: every call may run."""
    return PolicyDecision("allow", "no policy configured")


def arguments_json(params: Any) -> Any:
    """Validated parameters as JSON data (a Pydantic model dumped, a mapping copied)."""
    if isinstance(params, BaseModel):
        return params.model_dump(mode="json")
    if isinstance(params, Mapping):
        return json.loads(json.dumps(dict(params), default=str))
    return params


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    call: ToolCall
    tool: Tool
    params: Any
    reason: str

    @property
    def display(self) -> Any:
        """What a human is shown before answering, as JSON data.

        The validated arguments, unless the tool describes its approval itself with a
        ``describe_approval(params)`` method (``switch_model`` shows its role and
        model_hint). Kept with a step that waits for approval, so whoever answers later
        sees the same thing.
        """
        describe = getattr(self.tool, "describe_approval", None)
        if callable(describe):
            try:
                return describe(self.params)
            except Exception:
                _log.exception("describe_approval failed for %s", self.call.name)
        return arguments_json(self.params)


@dataclass(frozen=True, slots=True)
class ApprovalAnswer:
    """A human's answer: approve, deny (with a message for the model), or edit arguments."""

    approved: bool
    message: str = ""
    arguments: Mapping[str, Any] | None = None


Approver = Callable[[Sequence[ApprovalRequest]], Awaitable[Sequence[ApprovalAnswer]]]


class PendingApproval(Exception):
    """Raised by an approver when nobody can answer now: the step waits for a human.

    The dispatcher runs nothing of the step, fills in ``requests`` (the whole batch
    waiting for an answer) and ``outputs`` (the outputs the step already has: unknown,
    invalid or denied calls) and re-raises; the loop keeps the step so that
    ``Session.resume(answers)`` finishes it later without producing any output twice.
    """

    def __init__(
        self, requests: Sequence[ApprovalRequest] = (), message: str = "waiting for approval"
    ) -> None:
        super().__init__(message)
        self.requests: tuple[ApprovalRequest, ...] = tuple(requests)
        self.outputs: tuple[ToolOutput, ...] = ()


def answering(answers: Mapping[str, ApprovalAnswer], approver: Approver | None) -> Approver:
    """An approver that answers from ``answers`` (by call id) and asks ``approver`` the rest.

    Used to finish a step that waited for approval. An approver with a
    ``with_answers(answers)`` method (``tooldeck.policy.PolicyApprover``) builds this
    itself, so the given answers pass through it like a human's (approve-always
    recorded, edits checked, audit lines written).
    """
    own = getattr(approver, "with_answers", None)
    if callable(own):
        made: Approver = own(answers)
        return made

    async def approve(requests: Sequence[ApprovalRequest]) -> list[ApprovalAnswer]:
        rest = [r for r in requests if r.call.call_id not in answers]
        asked = iter(await approver(rest) if rest and approver is not None else ())
        unanswered = ApprovalAnswer(False, "no answer was given")
        return [
            answers[r.call.call_id] if r.call.call_id in answers else next(asked, unanswered)
            for r in requests
        ]

    return approve


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


def _short(text: str) -> str:
    return text if len(text) <= _ERROR_TEXT_LIMIT else text[: _ERROR_TEXT_LIMIT - 1] + "…"


def _error(
    call: ToolCall, message: str, details: Any = None, repairs: tuple[str, ...] = ()
) -> ToolOutput:
    return ToolOutput(
        call.call_id, call.name, ToolResult.error(_short(message), details=details), repairs
    )


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
        except Exception as exc:
            self.log.exception("policy failed for %s (%s)", slot.call.name, slot.call.call_id)
            slot.output = _error(
                slot.call,
                f"Denied: the policy check failed ({exc}).",
                {"traceback": traceback.format_exc()},
                slot.repairs,
            )
            return
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
                s.output = _error(
                    s.call,
                    "Denied by the user" + (f": {answer.message}" if answer.message else "."),
                )
            elif answer.arguments is not None:
                assert s.tool is not None
                try:
                    s.params = validate_arguments(s.tool, answer.arguments).params
                except ArgumentError as exc:
                    s.output = _error(
                        s.call, f"The edited arguments are invalid: {exc.model_message}"
                    )

    # -- execution ----------------------------------------------------------------------
    def _label(self, slot: _Slot) -> str:
        assert slot.tool is not None
        try:
            return slot.tool.describe_activity(slot.params)
        except Exception:
            self.log.exception("describe_activity failed for %s", slot.call.name)
            return f"Running {slot.call.name}"

    async def _run(self, slot: _Slot, turn_signal: AbortSignal) -> ToolOutput:
        tool, call = slot.tool, slot.call
        assert tool is not None
        signal = turn_signal.child()
        loop = asyncio.get_running_loop()

        def sink(payload: Any) -> None:
            event = ToolEvent(self.session_id, call.call_id, call.name, payload)
            loop.call_soon_threadsafe(lambda: asyncio.ensure_future(self.events.emit(event)))

        ctx = ToolContext(
            call.call_id,
            call.name,
            self.session_id,
            signal,
            self.log,
            sink,
            self.turn,
            self.toolset,
            Protection(self.policy, self.approver, self.result_hooks),
        )
        label = self._label(slot)
        await self.events.emit(CallStarted(self.session_id, call, label, slot.repairs))
        started = time.perf_counter()
        timeout = self.timeouts.get(call.name, self.timeout)
        task = asyncio.ensure_future(tool.invoke(slot.params, ctx))
        aborted = asyncio.ensure_future(signal.wait())
        try:
            done, _ = await asyncio.wait(
                {task, aborted}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        except asyncio.CancelledError:
            signal.abort("the dispatcher was cancelled")
            await self._stop(task, call)
            raise
        finally:
            aborted.cancel()
        if task in done:
            result = self._outcome(task, call)
        else:
            why = signal.reason or f"timed out after {timeout:g}s"
            signal.abort(why)
            await self._stop(task, call)
            result = ToolResult.error(f"{call.name} was stopped: {why}.", details={"stopped": why})
        signal.detach()  # the call is over: the turn's signal need not keep it
        seconds = time.perf_counter() - started
        done_label = label
        if not result.is_error:
            try:
                done_label = tool.describe_completed_activity(slot.params, result) or label
            except Exception:
                self.log.exception("describe_completed_activity failed for %s", call.name)
        for payload in result.events:
            await self.events.emit(ToolEvent(self.session_id, call.call_id, call.name, payload))
        await self.events.emit(
            CallFinished(self.session_id, call, done_label, result.is_error, seconds)
        )
        for hook in self.result_hooks:
            try:
                changed = hook(call, tool, result, ctx)
                result = await changed if inspect.isawaitable(changed) else changed
            except Exception:
                self.log.exception(
                    "result hook %r failed for %s (%s)", hook, call.name, call.call_id
                )
        return ToolOutput(call.call_id, call.name, result, slot.repairs)

    def _outcome(self, task: asyncio.Future[ToolResult], call: ToolCall) -> ToolResult:
        if task.cancelled():
            return ToolResult.error(f"{call.name} was cancelled.")
        exc = task.exception()
        if exc is None:
            return task.result()
        self.log.error(
            "tool %s (%s) raised",
            call.name,
            call.call_id,
            exc_info=(type(exc), exc, exc.__traceback__),
        )
        trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        return ToolResult.error(
            _short(f"{call.name} failed: {type(exc).__name__}: {exc}"),
            details={"exception": type(exc).__name__, "traceback": trace},
        )

    async def _stop(self, task: asyncio.Future[ToolResult], call: ToolCall) -> None:
        """Cancel a running tool and wait (briefly) until it has really stopped."""
        task.cancel()
        try:
            await asyncio.wait_for(asyncio.shield(task), CANCEL_GRACE_SECONDS)
        except TimeoutError:
            self.log.error(
                "tool %s (%s) ignored cancellation for %.1fs",
                call.name,
                call.call_id,
                CANCEL_GRACE_SECONDS,
            )
        except BaseException:  # the tool's own CancelledError or failure: it has stopped
            pass

    # -- the step -------------------------------------------------------------------------
    async def dispatch(
        self,
        calls: Sequence[ToolCall],
        signal: AbortSignal | None = None,
        *,
        prior: Sequence[ToolOutput] = (),
        answers: Mapping[str, ApprovalAnswer] | None = None,
    ) -> DispatchResult:
        """Run one model step's calls; returns exactly one output per call, in order.

        To finish a step that waited for approval: ``prior`` holds the outputs the step
        already has (those calls are never prepared, asked about or run again) and
        ``answers`` the human's answers by call id. Every other call is checked again.
        Raises :class:`PendingApproval` when the approver cannot answer now.
        """
        signal = signal or (self.turn.signal if self.turn else AbortSignal())
        done = {o.call_id: o for o in prior}
        slots = [
            _Slot(c, output=done[c.call_id]) if c.call_id in done else self._prepare(c)
            for c in calls
        ]
        for slot in slots:
            if slot.output is None:
                await self._decide(slot)
        await self._approve(slots, answers)

        terminated_by: str | None = None
        for group in _groups([s for s in slots if s.output is None]):
            if signal.aborted:
                for s in group:
                    s.output = _error(s.call, f"Not run: the turn was aborted ({signal.reason}).")
                continue
            if terminated_by is not None:
                for s in group:
                    s.output = _error(s.call, f"Not run: {terminated_by} ended the turn.")
                continue
            results = await asyncio.gather(*(self._run(s, signal) for s in group))
            for s, output in zip(group, results, strict=True):
                s.output = output
                if output.result.terminate and terminated_by is None:
                    terminated_by = s.call.name

        outputs: list[ToolOutput] = []
        for slot in slots:
            assert slot.output is not None  # every path above recorded exactly one output
            outputs.append(slot.output)
            await self.events.emit(OutputRecorded(self.session_id, slot.output))
        return DispatchResult(outputs, terminated_by)


__all__ += ["unknown_tool_message"]
