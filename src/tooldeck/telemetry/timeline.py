"""A finished turn as a timeline a person can read in a terminal.

A trace backend answers "why was this turn slow" for an operator; a developer at a
terminal wants the same picture without one: the turn, each model request with its
tokens, each tool call as a bar on one time axis (parallel calls visibly side by side),
approvals and the wait for them, errors in red.

A :class:`Timeline` is a list of :class:`Bar` (what, when, how deep, whether it failed).
It is built from either source a turn leaves:

- its events: a :class:`TimelineRecorder` subscribed to the session's ``EventBus``
  stamps each event as it is delivered (events carry no time of their own);
- its trace: finished spans (the SDK's ``ReadableSpan``, e.g. from an in-memory
  exporter) or an OTLP/JSON file (``{"resourceSpans": ...}``, one document or one per
  line, as an OpenTelemetry Collector's file exporter writes).

``timeline.save(path)`` writes it as JSON; ``tooldeck timeline FILE`` renders a saved
timeline or an OTLP/JSON trace file; :func:`render` makes the rich renderable.

A file to load may come from anyone, so :meth:`Timeline.load` reads it as every file
tooldeck is given is read (:mod:`tooldeck._config_files`: size, encoding and nesting
limits), then validates what it uses against typed models (a saved timeline strictly,
its own format; of an OTLP trace the fields read: ids and names as text, times as whole
nanoseconds that fit 64 bits, token counts as whole numbers), and refuses bars or spans
nested deeper than the reader's limit (``MAX_DEPTH``, 100 levels): anything else is a
:class:`TimelineError` naming the file and the place. Building and rendering never
recurse along a chain of spans and never allocate by a number they are given (a bar's
label is indented at most :data:`MAX_INDENT` levels).
"""

from __future__ import annotations

import base64
import json
import math
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from .._config_files import MAX_DEPTH, ConfigFileError, check_model, parse_json, read_text
from .._extras import needs_extra
from ..errors import TooldeckError
from ..events import (
    ApprovalRequested,
    CallFinished,
    CallStarted,
    Event,
    EventBus,
    ModelStepFinished,
    ModelStepStarted,
    OutputRecorded,
    TurnFinished,
    TurnStarted,
)
from ..transcript import StopReason

if TYPE_CHECKING:  # rendering needs rich (the cli extra); recording does not
    from rich.console import RenderableType
    from rich.text import Text

__all__ = ["MAX_INDENT", "Bar", "Timeline", "TimelineError", "TimelineRecorder", "render"]

FORMAT = "tooldeck.timeline/1"
MAX_INDENT = 12
"""Levels a bar's label is indented at most; a deeper bar shows its depth instead."""
_STYLES = {
    "turn": "bold",
    "model": "cyan",
    "tool": "green",
    "approval": "yellow",
    "workflow": "magenta",
    "task": "magenta",
    "span": "white",
}


class TimelineError(TooldeckError, ValueError):
    """A file that is neither a saved timeline nor an OTLP/JSON trace."""


@dataclass(frozen=True, slots=True)
class Bar:
    """One thing that took time: ``start`` and ``end`` in seconds from the timeline's start."""

    kind: str  # turn, model, tool, approval, workflow, task, span
    label: str
    start: float
    end: float
    depth: int = 0
    error: bool = False
    detail: str = ""

    @property
    def seconds(self) -> float:
        return max(0.0, self.end - self.start)


@dataclass
class Timeline:
    """Bars in display order (a parent before its children, siblings by start)."""

    title: str
    bars: list[Bar] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return max((b.end for b in self.bars), default=0.0)

    # -- files ------------------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        data = {"format": FORMAT, "title": self.title, "bars": [asdict(b) for b in self.bars]}
        Path(path).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> Timeline:
        """A saved timeline, or the spans of an OTLP/JSON trace file (one document, or
        one per line); a :class:`TimelineError` says what is wrong with any other file."""
        try:
            text = read_text(path)
        except OSError as exc:
            raise TimelineError(f"{path}: cannot read it ({exc.strerror or exc})") from exc
        except ConfigFileError as exc:
            raise TimelineError(f"{path}: {exc.problem}") from exc
        documents = _documents(text, path)
        if len(documents) == 1 and isinstance(documents[0], dict):
            only = documents[0]
            if only.get("format") == FORMAT:
                return cls._from_saved(only, path)
        if documents and all(isinstance(d, dict) and "resourceSpans" in d for d in documents):
            spans: list[_Span] = []
            for number, document in enumerate(documents, 1):
                try:
                    trace = check_model(_OtlpTrace, document)
                except ConfigFileError as exc:
                    where = f"line {number}: " if len(documents) > 1 else ""
                    raise TimelineError(f"{path}: {where}{exc.problem}") from exc
                spans.extend(trace.spans())
            if not spans:
                raise TimelineError(f"{path}: the trace holds no spans (none has a span id)")
            timeline = cls.from_spans(spans, title=f"trace in {Path(path).name}")
            deepest = max(timeline.bars, key=lambda b: b.depth)
            if deepest.depth > MAX_DEPTH:
                raise TimelineError(
                    f"{path}: its spans nest more than {MAX_DEPTH} levels deep (span "
                    f"{deepest.label!r} is {deepest.depth} below its root); a timeline shows "
                    f"at most {MAX_DEPTH}"
                )
            return timeline
        raise TimelineError(
            f"{path}: neither a saved timeline ({FORMAT}) nor an OTLP/JSON trace (resourceSpans)"
        )

    @classmethod
    def _from_saved(cls, data: Mapping[str, Any], path: str | Path) -> Timeline:
        try:
            saved = check_model(_SavedTimeline, data)
        except ConfigFileError as exc:
            raise TimelineError(f"{path}: {exc.problem}") from exc
        bars = [
            Bar(b.kind, b.label, b.start, b.end, b.depth, b.error, b.detail) for b in saved.bars
        ]
        return cls(saved.title, bars)

    # -- from spans -------------------------------------------------------------------------
    @classmethod
    def from_spans(cls, spans: Iterable[Any], *, title: str = "") -> Timeline:
        """The timeline of finished spans (``ReadableSpan`` or decoded OTLP/JSON spans)."""
        found = [s if isinstance(s, _Span) else _Span.of(s) for s in spans]
        if not found:
            return cls(title)
        zero = min(s.start for s in found)
        ids = {s.span_id for s in found}
        children: dict[str | None, list[_Span]] = {}
        for s in found:
            parent = s.parent if s.parent in ids and s.parent != s.span_id else None
            children.setdefault(parent, []).append(s)
        bars: list[Bar] = []
        shown: set[int] = set()  # by identity: each span once, however its ids repeat
        # depth first with a stack, not recursion: a chain of spans is as long as the file
        # allows. Spans no root reaches (their parents form a cycle) follow as roots.
        for first in [*_by_start(children.get(None, [])), *_by_start(found)]:
            stack = [(first, 0)]
            while stack:
                span, depth = stack.pop()
                if id(span) in shown:
                    continue
                shown.add(id(span))
                bars.append(span.bar(zero, depth))
                kids = _by_start(children.get(span.span_id, []))
                stack.extend((k, depth + 1) for k in reversed(kids) if id(k) not in shown)
        if not title:
            root_names = [b.label for b in bars if b.depth == 0]
            title = root_names[0] if len(root_names) == 1 else f"{len(root_names)} traces"
        return cls(title, bars)


def _by_start(spans: Iterable[_Span]) -> list[_Span]:
    return sorted(spans, key=lambda s: (s.start, s.name))


@dataclass
class _Span:
    span_id: str
    parent: str | None
    name: str
    start: int
    end: int
    attributes: Mapping[str, Any]
    error: bool

    @classmethod
    def of(cls, span: Any) -> _Span:
        context, parent = span.context, span.parent
        return cls(
            f"{context.span_id:016x}",
            f"{parent.span_id:016x}" if parent is not None else None,
            span.name,
            int(span.start_time or 0),
            int(span.end_time or span.start_time or 0),
            dict(span.attributes or {}),
            span.status.status_code.name == "ERROR",
        )

    def bar(self, zero: int, depth: int) -> Bar:
        a = self.attributes
        operation = a.get("gen_ai.operation.name")
        kind = {
            "invoke_agent": "turn",
            "chat": "model",
            "execute_tool": "tool",
            "invoke_workflow": "workflow",
        }.get(str(operation), "span")
        if self.name == "tooldeck.approval":
            kind = "approval"
        elif self.name.startswith("tooldeck.workflow.task"):
            kind = "task"
        detail = ""
        if kind in ("model", "turn") and "gen_ai.usage.input_tokens" in a:
            detail = _tokens(
                a.get("gen_ai.usage.input_tokens"), a.get("gen_ai.usage.output_tokens")
            )
        if kind == "tool":
            detail = str(a.get("tooldeck.tool.outcome", ""))
            if a.get("error.type") and a.get("error.type") != detail:
                detail += f" ({a['error.type']})"
        elif kind == "approval":
            detail = str(a.get("tooldeck.approval.outcome", ""))
        elif kind == "task":
            detail = str(a.get("tooldeck.workflow.task.state", ""))
        elif kind == "turn" and a.get("tooldeck.turn.stop_reason"):
            detail = f"{a['tooldeck.turn.stop_reason']}, {detail}".rstrip(", ")
        return Bar(
            kind,
            self.name,
            (self.start - zero) / 1e9,
            (self.end - zero) / 1e9,
            depth,
            self.error,
            detail,
        )


def _tokens(given: Any, made: Any) -> str:
    return f"{int(given or 0):,} in / {int(made or 0):,} out tokens"


# -- OTLP/JSON ---------------------------------------------------------------------------------
def _otlp_id(value: Any) -> str | None:
    """A span id of OTLP/JSON: hex (the OTLP spec), or base64 (the plain proto3 mapping)."""
    if not isinstance(value, str) or not value:
        return None
    if len(value) in (16, 32) and all(c in "0123456789abcdefABCDEF" for c in value):
        return value.lower()
    try:
        return base64.b64decode(value, validate=True).hex() or None
    except ValueError:
        return None


def _documents(text: str, path: str | Path) -> list[Any]:
    """The JSON document of ``text``, or its JSON lines (one OTLP document per line)."""
    try:
        return [parse_json(text)]
    except ConfigFileError as whole:
        lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
        if len(lines) < 2:
            raise TimelineError(f"{path}: {whole.problem}") from whole
        documents: list[Any] = []
        for number, line in lines:
            try:
                documents.append(parse_json(line))
            except ConfigFileError as exc:
                raise TimelineError(f"{path}: line {number}: {exc.problem}") from exc
        return documents


# The parts of OTLP/JSON a timeline reads, typed: every other field is ignored, a field
# read with the wrong type is an error. Integers of the protobuf JSON mapping come as
# numbers or as decimal strings.
_DIGITS = re.compile(r"-?[0-9]{1,20}")


def _whole(low: int, high: int, what: str) -> Callable[[Any], int]:
    def check(value: Any) -> int:
        if isinstance(value, str) and _DIGITS.fullmatch(value):
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool) and low <= value <= high:
            return value
        raise ValueError(f"should be {what}, got {_shown(value)}")

    return check


def _double(value: Any) -> Any:
    return float(value) if value in ("NaN", "Infinity", "-Infinity") else value


def _shown(value: Any) -> str:
    if value is None or isinstance(value, dict | list | tuple):
        return "null" if value is None else "an object" if isinstance(value, dict) else "a list"
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:39] + "…"


_Nanos = Annotated[
    int,
    BeforeValidator(_whole(0, 2**64 - 1, "nanoseconds since 1970 (a whole number of 64 bits)")),
]
_Int64 = Annotated[int, BeforeValidator(_whole(-(2**63), 2**63 - 1, "a 64-bit whole number"))]
_TOKENS = ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens")


class _Otlp(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


class _AnyValue(_Otlp):
    stringValue: str | None = None  # the fields have OTLP's names
    boolValue: bool | None = None
    intValue: _Int64 | None = None
    doubleValue: Annotated[float | None, BeforeValidator(_double)] = None
    arrayValue: _ArrayValue | None = None

    def plain(self) -> Any:
        for value in (self.stringValue, self.boolValue, self.doubleValue, self.intValue):
            if value is not None:
                return value
        if self.arrayValue is not None:
            return tuple(v.plain() for v in self.arrayValue.values or ())
        return None  # kvlistValue, bytesValue: not shown


class _ArrayValue(_Otlp):
    values: list[_AnyValue] | None = None


class _KeyValue(_Otlp):
    key: str
    value: _AnyValue | None = None


class _Status(_Otlp):
    code: Literal[0, 1, 2, "STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR"] = 0


class _OtlpSpan(_Otlp):
    spanId: str | None = None
    parentSpanId: str | None = None
    name: str = ""
    startTimeUnixNano: _Nanos = 0
    endTimeUnixNano: _Nanos | None = None
    attributes: list[_KeyValue] | None = None
    status: _Status | None = None

    @model_validator(mode="after")
    def _counts(self) -> _OtlpSpan:
        for a in self.attributes or ():
            value = a.value.plain() if a.value is not None else None
            if a.key in _TOKENS and not (value is None or (type(value) is int and value >= 0)):
                raise ValueError(
                    f"{a.key} of span {self.name!r} should be a number of tokens (a whole "
                    f"number, 0 or more), got {_shown(value)}"
                )
        return self

    def span(self) -> _Span | None:
        span_id = _otlp_id(self.spanId)
        if span_id is None:
            return None  # not a span a parent can name: left out
        start = self.startTimeUnixNano
        return _Span(
            span_id,
            _otlp_id(self.parentSpanId),
            self.name,
            start,
            start if self.endTimeUnixNano is None else self.endTimeUnixNano,
            {
                a.key: a.value.plain() if a.value is not None else None
                for a in self.attributes or ()
            },
            self.status is not None and self.status.code in (2, "STATUS_CODE_ERROR"),
        )


class _ScopeSpans(_Otlp):
    spans: list[_OtlpSpan] | None = None


class _ResourceSpans(_Otlp):
    scopeSpans: list[_ScopeSpans] | None = None


_AnyValue.model_rebuild()


class _OtlpTrace(_Otlp):
    resourceSpans: list[_ResourceSpans] | None = None

    def spans(self) -> list[_Span]:
        found = (
            s.span()
            for rs in self.resourceSpans or ()
            for ss in rs.scopeSpans or ()
            for s in ss.spans or ()
        )
        return [s for s in found if s is not None]


class _SavedBar(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    kind: str
    label: str
    start: float = Field(allow_inf_nan=False)
    end: float = Field(allow_inf_nan=False)
    depth: int = Field(default=0, ge=0, le=MAX_DEPTH)
    error: bool = False
    detail: str = ""


class _SavedTimeline(BaseModel):
    """``Timeline.save``'s format, strictly: what it writes and nothing else."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    format: Literal["tooldeck.timeline/1"]
    title: str = ""
    bars: list[_SavedBar]


# -- from events -------------------------------------------------------------------------------
class TimelineRecorder:
    """Records a session's events with the time each arrived; ``timeline()`` afterwards.

    ``recorder = TimelineRecorder().attach(session.events)`` before the turn. It keeps
    only what the timeline needs (times, names, ids, token counts, error flags).
    """

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self.stamped: list[tuple[float, Event]] = []
        self._unsubscribe: Callable[[], None] | None = None

    def attach(self, bus: EventBus) -> TimelineRecorder:
        self._unsubscribe = bus.subscribe(self._on_event)
        return self

    def detach(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    def _on_event(self, event: Event) -> None:
        self.stamped.append((self.clock(), event))

    def timeline(self) -> Timeline:
        return _from_events(self.stamped)


@dataclass
class _Open:
    kind: str
    label: str
    start: float
    depth: int
    detail: str = ""
    error: bool = False
    end: float | None = None


def _from_events(stamped: Sequence[tuple[float, Event]]) -> Timeline:
    if not stamped:
        return Timeline("(no events)")
    zero = stamped[0][0]
    rows: list[_Open] = []
    turn: _Open | None = None
    models: dict[int, _Open] = {}
    calls: dict[str, _Open] = {}
    approval: tuple[_Open, set[str]] | None = None
    decided = 0.0  # when the current step's calls became known (the response ended)
    title = ""
    for when, event in stamped:
        t = when - zero
        if isinstance(event, TurnStarted):
            turn = _Open("turn", f"turn {event.session_id}", t, 0)
            title = title or f"turn {event.session_id}: {event.prompt[:60]}"
            rows.append(turn)
        elif isinstance(event, ModelStepStarted):
            models[event.step] = _Open("model", f"step {event.step}: model", t, 1)
            rows.append(models[event.step])
        elif isinstance(event, ModelStepFinished) and event.step in models:
            row = models[event.step]
            row.end = decided = t
            usage = event.message.usage
            row.detail = _tokens(usage.input_tokens, usage.output_tokens)
            if calls_made := len(event.message.tool_calls):
                row.detail += f", {calls_made} call(s)"
            row.error = event.message.stop_reason in (StopReason.ERROR, StopReason.REFUSAL)
        elif isinstance(event, ApprovalRequested):
            names = ", ".join(c.name for c in event.calls)
            row = _Open("approval", f"approval: {names}", t, 1)
            rows.append(row)
            approval = (row, {c.call_id for c in event.calls})
        elif isinstance(event, CallStarted):
            approval = _answered(approval, event.call.call_id, t)
            calls[event.call.call_id] = _Open("tool", event.call.name, t, 1, event.label)
            rows.append(calls[event.call.call_id])
        elif isinstance(event, CallFinished) and event.call.call_id in calls:
            row = calls[event.call.call_id]
            row.end, row.error = t, event.is_error
        elif isinstance(event, OutputRecorded):
            output = event.output
            approval = _answered(approval, output.call_id, t)
            ran = calls.get(output.call_id)
            first = output.text.split("\n", 1)[0][:100]
            if ran is None:  # never ran (denied, invalid, unknown): known when the step was
                marker = _Open("tool", output.name, decided, 1, first, output.is_error, decided)
                calls[output.call_id] = marker
                rows.append(marker)
            elif output.is_error:
                ran.error, ran.detail = True, first  # what went wrong, not "Running x"
        elif isinstance(event, TurnFinished) and turn is not None:
            turn.end = t
            turn.error = event.stop_reason is StopReason.ERROR
            turn.detail = f"{event.stop_reason.value}, {event.steps} step(s), " + _tokens(
                event.usage.input_tokens, event.usage.output_tokens
            )
    last = stamped[-1][0] - zero
    rows.sort(key=lambda r: (r.depth > 0, r.start))  # the turn, then by start
    bars = [
        Bar(
            r.kind,
            r.label,
            r.start,
            r.end if r.end is not None else last,
            r.depth,
            r.error,
            r.detail,
        )
        for r in rows
    ]
    return Timeline(title or "turn", bars)


def _answered(
    approval: tuple[_Open, set[str]] | None, call_id: str, t: float
) -> tuple[_Open, set[str]] | None:
    """The approval wait ends when the first of its calls starts or gets its output."""
    if approval is None or call_id not in approval[1]:
        return approval
    row = approval[0]
    row.end = t
    return None


# -- rendering ---------------------------------------------------------------------------------
def _duration(seconds: float) -> str:
    if seconds >= 10:
        return f"{seconds:.1f} s"
    if seconds >= 1:
        return f"{seconds:.2f} s"
    return f"{seconds * 1000:.1f} ms"


def _column(t: float, total: float, width: int) -> float:
    """Where time ``t`` falls on an axis of ``width`` columns (0 to ``width``), whatever
    the times are (a bar that ends before it starts, or outside the axis)."""
    if not total > 0:
        return 0.0
    share = t / total
    return width * min(1.0, max(0.0, share)) if math.isfinite(share) else 0.0


def _bar(bar: Bar, total: float, width: int) -> Text:
    with needs_extra("cli"):
        from rich.text import Text

    first = min(width - 1, int(_column(bar.start, total, width)))
    last = max(first + 1, min(width, math.ceil(_column(bar.end, total, width))))
    style = "bold red" if bar.error else _STYLES.get(bar.kind, "white")
    text = Text(" " * first)
    text.append("█" * (last - first) if bar.seconds > 0 else "▏", style=style)
    text.append(" " * (width - len(text.plain)))
    return text


def _axis(total: float, width: int) -> Text:
    with needs_extra("cli"):
        from rich.text import Text

    left, right = "0", _duration(total)
    middle = _duration(total / 2)
    gap = max(1, width - len(left) - len(right) - len(middle))
    half = gap // 2
    return Text(left + " " * half + middle + " " * (gap - half) + right, style="dim")


def _indent(depth: int) -> str:
    if depth <= MAX_INDENT:
        return "  " * max(0, depth)
    return "  " * (MAX_INDENT - 2) + f"{depth}› "


def render(timeline: Timeline, *, width: int = 48) -> RenderableType:
    """The timeline as a rich table: one row per bar on a shared time axis (rich: the
    ``cli`` extra)."""
    with needs_extra("cli"):
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

    total = timeline.seconds
    table = Table(title=timeline.title, title_justify="left", show_edge=False, pad_edge=False)
    table.add_column("what", no_wrap=True, overflow="ellipsis", max_width=40)
    table.add_column(_axis(total, width), no_wrap=True, min_width=width, max_width=width)
    table.add_column("time", justify="right", no_wrap=True)
    table.add_column("detail", overflow="fold")
    for bar in timeline.bars:
        label = Text(_indent(bar.depth) + bar.label, style="red" if bar.error else "")
        detail = Text(bar.detail, style="red" if bar.error else "dim")
        table.add_row(label, _bar(bar, total, width), _duration(bar.seconds), detail)
    legend = Text.assemble(
        ("█ model ", _STYLES["model"]),
        ("█ tool ", _STYLES["tool"]),
        ("█ approval ", _STYLES["approval"]),
        ("█ error", "bold red"),
    )
    return Group(table, legend)
