"""Live progress for a turn, rendered with rich from the event stream."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from rich.console import Group, RenderableType
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from ..events import (
    ApprovalRequested,
    CallFinished,
    CallStarted,
    Event,
    ModelStepStarted,
    TurnFinished,
)
from ..live import LiveView


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
    is not a terminal, finished lines are printed instead of a live display.
    """

    rows: dict[str, _Row] = field(default_factory=dict)
    step: int = 0
    footer: str = ""
    refresh_per_second: ClassVar[float] = 12

    def on_event(self, event: Event) -> None:
        if isinstance(event, ModelStepStarted):
            self.step = event.step
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
            self.footer = (
                f"turn finished after {event.steps} step(s): {event.reason}; "
                f"{event.usage.total_tokens} tokens"
            )
            if not self.is_live:
                self.console.print(self.footer)
        self.refresh()

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
        parts: list[RenderableType] = [Text(f"step {self.step}", style="bold"), table]
        if self.footer:
            parts.append(Text(self.footer, style="dim"))
        return Group(*parts)
