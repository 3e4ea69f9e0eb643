"""Rich rendering of workflow runs: tables, and live progress from the engine's events."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from .._extras import needs_extra
from .._live import LiveView
from ..events import Event
from .events import TaskActivity, TaskNote, TaskStateChanged, WorkflowStateChanged
from .store.records import WorkflowRecord

with needs_extra("cli"):
    from rich.console import Group, RenderableType
    from rich.spinner import Spinner
    from rich.table import Table
    from rich.text import Text

__all__ = ["STATE_STYLES", "WorkflowProgress", "runs_table", "workflow_table"]

STATE_STYLES = {
    "pending": "dim",
    "running": "cyan",
    "submitted": "green",
    "succeeded": "green",
    "failed": "red",
    "cancelled": "yellow",
}
_RESULT_CHARS = 400


def _state(state: str) -> Text:
    return Text(state, style=STATE_STYLES.get(state, ""))


def _result(value: Any, limit: int = _RESULT_CHARS) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def workflow_table(wf: WorkflowRecord, *, full: bool = False) -> Table:
    """One run as a table: each task's state, attempts, and result or error."""
    done = sum(t.state == "submitted" for t in wf.tasks)
    table = Table(
        title=f"workflow {wf.id} ({wf.name}): {wf.state}, {done}/{len(wf.tasks)} submitted",
        show_lines=True,
    )
    for column in ("task", "state", "attempts", "after", "result / error"):
        table.add_column(column, overflow="fold")
    for t in wf.tasks:
        if t.has_result:
            outcome = _result(t.result, 100_000 if full else _RESULT_CHARS)
        else:
            outcome = t.error or ""
        table.add_row(
            t.name,
            _state(t.state),
            f"{t.attempts}/{t.max_attempts}",
            ", ".join(t.depends_on),
            outcome,
        )
    if wf.error:
        table.caption = f"reason: {wf.error}"
    return table


def runs_table(runs: list[WorkflowRecord]) -> Table:
    table = Table(title="workflow runs (newest first)")
    for column in ("id", "workflow", "state", "tasks submitted", "started"):
        table.add_column(column)
    for w in runs:
        table.add_row(
            w.id,
            w.name,
            _state(w.state),
            f"{w.submitted_count}/{w.task_count}",
            f"{w.created_at:%Y-%m-%d %H:%M:%S}",
        )
    return table


@dataclass
class _Row:
    state: str = "pending"
    attempts: int = 0
    max_attempts: int = 0
    activity: str = ""
    started: float | None = None
    seconds: float = 0.0
    reason: str | None = None
    note: str = ""  # the last TaskNote: a rejection or a restarted turn


@dataclass
class WorkflowProgress(LiveView):
    """Live task states of one or more runs, from the engine's event bus.

    ``with WorkflowProgress(console).attach(engine.events): await engine.run(...)``.
    When the console is not a terminal, each task state change is printed as a line.
    A run followed on workers also shows its notes (:class:`TaskNote`): each rejection
    and each restarted turn (a takeover), counted in the heading, the last one in its
    task's row, or as a line of its own when not a terminal.
    """

    rows: dict[tuple[str, str], _Row] = field(default_factory=dict)
    runs: dict[str, str] = field(default_factory=dict)  # id -> "name: state"
    notes: dict[str, int] = field(default_factory=dict)  # kind -> how many

    def on_event(self, event: Event) -> None:
        if isinstance(event, WorkflowStateChanged):
            self.runs[event.session_id] = f"{event.name}: {event.state}"
            if not self.is_live and event.state != "running":
                extra = f" ({event.reason})" if event.reason else ""
                self.console.print(
                    f"workflow {event.session_id} {event.name}: {event.state}{extra}"
                )
        elif isinstance(event, TaskStateChanged):
            row = self.rows.setdefault((event.session_id, event.task), _Row())
            changed = row.state != event.state
            row.state, row.reason = event.state, event.reason
            row.attempts = event.attempts
            row.max_attempts = event.max_attempts or row.max_attempts
            if event.state == "running" and row.started is None:
                row.started = time.monotonic()
            if event.state in ("submitted", "failed", "cancelled") and row.started is not None:
                row.seconds = time.monotonic() - row.started
            if changed and self._live is None and event.state != "pending":
                self.console.print(self._line(event.task, row))
        elif isinstance(event, TaskNote):
            row = self.rows.setdefault((event.session_id, event.task), _Row())
            row.note = event.text
            self.notes[event.kind] = self.notes.get(event.kind, 0) + 1
            if self._live is None:
                line = Text(f"! {event.task}: ", style="yellow")
                line.append(event.text, style="")
                self.console.print(line, soft_wrap=True)
        elif isinstance(event, TaskActivity):
            row = self.rows.setdefault((event.session_id, event.task), _Row())
            row.activity = event.label
        self.refresh()

    def _line(self, task: str, row: _Row) -> Text:
        mark = {"submitted": "✓", "failed": "✗", "cancelled": "-", "running": "…"}.get(
            row.state, " "
        )
        text = Text(f"{mark} {task}: ")
        text.append(row.state, style=STATE_STYLES.get(row.state, ""))
        if row.max_attempts:
            text.append(f" ({row.attempts}/{row.max_attempts} submissions)", style="dim")
        if row.reason and row.state in ("failed", "cancelled"):
            text.append(f" {row.reason}", style="dim")
        return text

    def render(self) -> RenderableType:
        table = Table.grid(padding=(0, 1))
        for (_, task), row in self.rows.items():
            mark: RenderableType = Spinner("dots") if row.state == "running" else Text(" ")
            seconds = f"{row.seconds:.1f}s" if row.seconds else ""
            table.add_row(
                mark,
                Text(task, style="bold"),
                _state(row.state),
                Text(f"{row.attempts}/{row.max_attempts}", style="dim"),
                Text(row.activity or row.note, style="dim" if row.activity else "yellow"),
                Text(seconds, style="dim"),
            )
        head = Text("; ".join(f"{k} {v}" for k, v in self.runs.items()) or "workflow")
        if self.notes:
            counted = ", ".join(f"{n} {kind}" for kind, n in sorted(self.notes.items()))
            head.append(f" ({counted})", style="yellow")
        return Group(head, table)
