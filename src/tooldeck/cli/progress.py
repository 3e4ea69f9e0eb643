"""Live progress for a turn, rendered with rich from the event stream."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from rich.console import Group, RenderableType
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from .._live import LiveView
from ..events import (
    ApprovalRequested,
    CallFinished,
    CallStarted,
    Event,
    ModelStepFinished,
    ModelStepStarted,
    ReasoningDelta,
    TextDelta,
    ToolCallStarted,
    TurnFinished,
)


@dataclass
class _Row:
    label: str
    state: str = "running"  # running, ok, error
    seconds: float = 0.0
    repairs: tuple[str, ...] = ()


@dataclass
class TurnProgress(LiveView):
    """Subscribe to a bus and show each call's activity label, live.

    ``with TurnProgress(console).attach(bus): await session.run(...)``. When the console
    is not a terminal, finished lines are printed instead of a live display. In a streamed
    turn (``session.stream(...)``) the model's text shows as it arrives (printed as it
    comes when the console is not a terminal), with the tail of its reasoning summary and
    the calls it is writing.
    """

    rows: dict[str, _Row] = field(default_factory=dict)
    step: int = 0
    footer: str = ""
    text: str = ""  # the current step's text, as streamed
    thinking: str = ""  # the current step's reasoning summary, as streamed
    writing: dict[int, str] = field(default_factory=dict)  # calls being written, by index
    _open_line: bool = field(default=False, repr=False)
    refresh_per_second: ClassVar[float] = 12

    def on_event(self, event: Event) -> None:
        if isinstance(event, (TextDelta, ReasoningDelta, ToolCallStarted, ModelStepFinished)):
            self._on_stream(event)
        elif isinstance(event, ModelStepStarted):
            self.step = event.step
            self.text, self.thinking = "", ""
            self.writing.clear()
        elif isinstance(event, CallStarted):
            self.rows[event.call.call_id] = _Row(event.label, repairs=event.repairs)
        elif isinstance(event, CallFinished):
            row = self.rows.setdefault(event.call.call_id, _Row(event.label))
            row.label, row.seconds = event.label, event.seconds
            row.state = "error" if event.is_error else "ok"
            if not self.is_live:
                self.console.print(self._line(row))
        elif isinstance(event, ApprovalRequested):
            names = ", ".join(c.name for c in event.calls)
            self.console.print(f"[yellow]approval requested[/yellow] for {names}")
        elif isinstance(event, TurnFinished):
            self._end_line()
            self.footer = (
                f"turn finished after {event.steps} step(s): {event.reason}; "
                f"{event.usage.total_tokens} tokens"
            )
            if not self.is_live:
                self.console.print(self.footer)
        self.refresh()

    def _on_stream(self, event: Event) -> None:
        if isinstance(event, TextDelta):
            self.text += event.text
            if not self.is_live:
                self.console.print(event.text, end="", markup=False, highlight=False)
                self._open_line = True
        elif isinstance(event, ReasoningDelta):
            self.thinking += event.text
        elif isinstance(event, ToolCallStarted):
            self.writing[event.index] = event.name or "a tool"
        elif isinstance(event, ModelStepFinished):
            self.writing.clear()
            self.text = event.message.text  # what the transcript keeps (none after a refusal)
            self._end_line()

    def _end_line(self) -> None:
        if self._open_line:
            self.console.print()
            self._open_line = False

    def _line(self, row: _Row) -> Text:
        mark = {"ok": "[green]✓[/green]", "error": "[red]✗[/red]"}.get(row.state, "…")
        extra = f" (repaired: {', '.join(row.repairs)})" if row.repairs else ""
        return Text.from_markup(f"{mark} {row.label}{extra} [dim]{row.seconds * 1000:.0f} ms[/dim]")

    def render(self) -> RenderableType:
        table = Table.grid(padding=(0, 1))
        for row in self.rows.values():
            if row.state == "running":
                table.add_row(Spinner("dots"), Text(row.label))
            else:
                table.add_row(self._line(row))
        for name in self.writing.values():
            table.add_row(Spinner("dots"), Text(f"writing a call to {name}", style="dim"))
        parts: list[RenderableType] = [Text(f"step {self.step}", style="bold")]
        if self.thinking:
            tail = " ".join(self.thinking.split())[-160:]
            parts.append(Text(f"thinking: {tail}", style="dim italic"))
        if self.text:
            parts.append(Text("\n".join(self.text.splitlines()[-12:])))
        parts.append(table)
        if self.footer:
            parts.append(Text(self.footer, style="dim"))
        return Group(*parts)
