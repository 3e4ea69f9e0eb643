"""The spans of one model step's calls: ``execute_tool {name}`` per call, one approval span.

The dispatcher's tracing strategy (:mod:`.tracing`) makes a :class:`StepTrace` for a
step only when telemetry is on. Every
call gets exactly one ``execute_tool`` span, whatever happened to it, like its one
output: a call that runs gets a span from its start to its recorded output (made the
current span while the tool runs, so a sub-agent's turn or an MCP request nests under
it); a call that never runs (unknown, invalid, denied, not run) gets a span at the
moment its fate was known, carrying why.

Calls of a step run in the step's task or in tasks ``asyncio.gather`` made for them, so
no span may rely on "the current span" to find its parent: every span is started with
the step's parent context taken when the step began, explicitly. Policy decisions and
approval answers are noted as they happen and become events of the call's span with the
time they happened.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from typing import Any, Protocol

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from ..transcript import ToolCall, ToolOutput
from . import names as n
from .content import arguments_text, clip
from .runtime import Telemetry

__all__ = ["ApprovalTrace", "CallSpan", "StepTrace", "TracedSlot"]

_RULE_CHARS = 500
_APPROVING: ContextVar[ApprovalTrace | None] = ContextVar("tooldeck_approving", default=None)


class TracedSlot(Protocol):
    """What a traced call's slot holds (``tooldeck._call.Slot``)."""

    call: ToolCall
    tool: Any
    params: Any
    repairs: tuple[str, ...]
    output: ToolOutput | None
    approval_reason: str | None


def _details(output: ToolOutput) -> Mapping[str, Any]:
    details = output.result.details
    return details if isinstance(details, Mapping) else {}


def ran_outcome(output: ToolOutput) -> tuple[str, str | None]:
    """``(outcome, error.type)`` of a call that reached the tool (or was about to)."""
    if not output.result.is_error:
        return "ok", None
    details = _details(output)
    stopped = details.get("stopped")
    if isinstance(stopped, str):
        if stopped.startswith("timed out"):
            return "timed_out", "timeout"
        return "cancelled", "cancelled" if stopped == "cancelled" else "aborted"
    exception = details.get("exception")
    if isinstance(exception, str) and exception:
        return "error", exception
    if output.text.startswith("Not run:"):
        return "not_run", "not_run"
    return "error", "tool_error"


def unrun_outcome(slot: TracedSlot, output: ToolOutput) -> tuple[str, str]:
    """``(outcome, error.type)`` of a call the dispatcher never ran."""
    text = output.text
    if slot.call.incomplete:
        return "not_run", "incomplete"
    if slot.tool is None:
        if "problems" in _details(output):
            return "error", "invalid_arguments"
        return "error", "unknown_tool"
    if text.startswith("Denied"):
        return "denied", "denied"
    if text.startswith("The edited arguments are invalid"):
        return "error", "invalid_arguments"
    return "not_run", "not_run"


class CallSpan:
    """One running call's span, its attached context and its start."""

    __slots__ = ("span", "started", "token")

    def __init__(self, span: Any, token: Any) -> None:
        self.span = span
        self.token = token
        self.started = time.perf_counter()


class StepTrace:
    """The telemetry of one dispatched step (see the module docstring)."""

    __slots__ = ("_notes", "_prior", "_ran", "parent", "tel")

    def __init__(
        self, tel: Telemetry, slots: Sequence[TracedSlot], prior: Sequence[ToolOutput]
    ) -> None:
        self.tel = tel
        self.parent = otel_context.get_current()
        self._ran: set[int] = set()
        self._notes: dict[int, list[tuple[str, dict[str, Any], int]]] = {}
        done = {o.call_id for o in prior}
        self._prior = {id(s) for s in slots if s.output is not None and s.call.call_id in done}

    # -- notes: what happened to a call before its span ------------------------------------
    def _note(self, slot: TracedSlot, name: str, attrs: dict[str, Any]) -> None:
        self._notes.setdefault(id(slot), []).append((name, attrs, time.time_ns()))

    def decided(self, slot: TracedSlot, action: str, level: str, rule: str) -> None:
        """The policy's decision about ``slot``'s call."""
        self._note(
            slot,
            n.POLICY_EVENT,
            {n.POLICY_ACTION: action, n.POLICY_LEVEL: level, n.POLICY_RULE: rule[:_RULE_CHARS]},
        )

    def approval(self, asking: Sequence[TracedSlot]) -> ApprovalTrace:
        return ApprovalTrace(self, asking)

    def _attributes(self, slot: TracedSlot) -> dict[str, Any]:
        call, tool = slot.call, slot.tool
        mcp = getattr(tool, "mcp", None) if tool is not None else None
        attrs: dict[str, Any] = {
            n.OPERATION: n.EXECUTE_TOOL,
            n.TOOL_NAME: call.name,
            n.TOOL_CALL_ID: call.call_id,
            n.TOOL_TYPE: "extension" if mcp is not None else "function",
        }
        if tool is not None:
            attrs[n.TOOL_TIER] = tool.tier
            attrs[n.TOOL_MODE] = tool.execution_mode
        if mcp is not None:
            attrs[n.MCP_SERVER] = mcp.server
        if slot.repairs:
            attrs[n.TOOL_REPAIRS] = tuple(slot.repairs)
        if self.tel.capture:
            attrs[n.TOOL_CALL_ARGUMENTS] = arguments_text(call.arguments, self.tel.content_limit)
        return attrs

    def _start(self, slot: TracedSlot, start: int | None = None) -> Any:
        span = self.tel.tracer.start_span(
            f"{n.EXECUTE_TOOL} {slot.call.name}",
            self.parent,
            kind=SpanKind.INTERNAL,
            attributes=self._attributes(slot),
            start_time=start,
        )
        for name, attrs, when in self._notes.pop(id(slot), ()):
            span.add_event(name, attrs, timestamp=when)
        return span

    def _close(
        self, slot: TracedSlot, span: Any, output: ToolOutput, outcome: str, error: str | None
    ) -> None:
        tel = self.tel
        attrs = {n.TOOL_OUTCOME: outcome}
        if error is not None:
            attrs[n.ERROR_TYPE] = error
            span.set_status(Status(StatusCode.ERROR, error))
        if tel.capture:
            attrs[n.TOOL_CALL_RESULT] = clip(output.text, tel.content_limit)
        span.set_attributes(attrs)
        tel.count_call(slot.call.name, outcome, error)

    # -- a call that runs --------------------------------------------------------------------
    def started(self, slot: TracedSlot) -> CallSpan:
        """Start the call's span and make it current (in the task that runs the call)."""
        self._ran.add(id(slot))
        span = self._start(slot)
        return CallSpan(span, otel_context.attach(trace.set_span_in_context(span, self.parent)))

    def ended(self, slot: TracedSlot, running: CallSpan) -> None:
        """The call's output is recorded (or it never will be): end its span."""
        span = running.span
        try:
            output = slot.output
            error: str | None
            if output is None:  # cancelled before anything was recorded
                outcome, error = "cancelled", "cancelled"
                span.set_attributes({n.TOOL_OUTCOME: outcome, n.ERROR_TYPE: error})
                span.set_status(Status(StatusCode.ERROR, error))
                self.tel.count_call(slot.call.name, outcome, error)
            else:
                outcome, error = ran_outcome(output)
                self._close(slot, span, output, outcome, error)
            self.tel.record_duration(
                n.EXECUTE_TOOL,
                time.perf_counter() - running.started,
                {n.TOOL_NAME: slot.call.name},
                error,
            )
        finally:
            otel_context.detach(running.token)
            span.end()

    # -- the end of the step -----------------------------------------------------------------
    def end(self, slots: Sequence[TracedSlot]) -> None:
        """A span for every call that has an output but never ran (and no earlier span)."""
        for slot in slots:
            key = id(slot)
            output = slot.output
            if output is None or key in self._ran or key in self._prior:
                continue
            notes = self._notes.get(key)
            when = notes[-1][2] if notes else time.time_ns()
            span = self._start(slot, when)
            outcome, error = unrun_outcome(slot, output)
            self._close(slot, span, output, outcome, error)
            span.end(when)
        self._notes.clear()


class ApprovalTrace:
    """The span of one step's approval request: from asking to the answers."""

    __slots__ = ("_before", "_by", "_token", "asking", "span", "step")

    def __init__(self, step: StepTrace, asking: Sequence[TracedSlot]) -> None:
        self.step = step
        self.asking = list(asking)
        self._before = [s.params for s in asking]
        self._by: dict[str, str] = {}
        self.span = step.tel.tracer.start_span(
            n.APPROVAL_SPAN,
            step.parent,
            kind=SpanKind.INTERNAL,
            attributes={
                n.APPROVAL_CALLS: len(asking),
                n.APPROVAL_TOOLS: tuple(s.call.name for s in asking),
            },
        )
        for slot in asking:
            step._note(
                slot,
                n.APPROVAL_REQUESTED_EVENT,
                {n.POLICY_RULE: (slot.approval_reason or "")[:_RULE_CHARS]},
            )
        self._token: Any = None

    def __enter__(self) -> ApprovalTrace:
        self._token = (
            otel_context.attach(trace.set_span_in_context(self.span, self.step.parent)),
            _APPROVING.set(self),
        )
        return self

    def answered_by(self, call_id: str, who: str) -> None:
        if self.step.tel.record_approver:
            self._by[call_id] = who

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> None:
        span = self.span
        try:
            if exc is not None and type(exc).__name__ == "PendingApproval":
                span.add_event(n.APPROVAL_PENDING_EVENT)
                span.set_attribute(n.APPROVAL_OUTCOME, "pending")
                return
            if exc is not None:
                kind_name = type(exc).__qualname__
                span.set_attribute(n.ERROR_TYPE, kind_name)
                span.set_status(Status(StatusCode.ERROR, kind_name))
                return
            approved = 0
            for slot, before in zip(self.asking, self._before, strict=True):
                ok = slot.output is None
                approved += ok
                attrs: dict[str, Any] = {
                    n.TOOL_CALL_ID: slot.call.call_id,
                    n.APPROVED: ok,
                    n.EDITED: ok and slot.params is not before,
                }
                who = self._by.get(slot.call.call_id)
                if who is not None:
                    attrs[n.APPROVED_BY] = who
                self.step._note(slot, n.APPROVAL_ANSWERED_EVENT, attrs)
                span.add_event(n.APPROVAL_ANSWERED_EVENT, attrs)
            whole = len(self.asking)
            span.set_attribute(
                n.APPROVAL_OUTCOME,
                "approved" if approved == whole else "denied" if not approved else "mixed",
            )
        finally:
            token, approving = self._token
            _APPROVING.reset(approving)
            otel_context.detach(token)
            span.end()


def note_approver(call_id: str, who: str) -> None:
    """Who answered the approval of ``call_id`` (recorded only with ``record_approver``)."""
    approving = _APPROVING.get()
    if approving is not None:
        approving.answered_by(call_id, who)
