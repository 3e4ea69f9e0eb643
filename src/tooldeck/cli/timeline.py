"""``tooldeck timeline FILE``: a saved turn (or an OTLP/JSON trace) as a terminal timeline."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from .report import existing_file, user_error


def timeline_command(
    file: Annotated[
        Path,
        typer.Argument(
            help="A saved timeline (Timeline.save) or an OTLP/JSON trace file (resourceSpans)."
        ),
    ],
    width: Annotated[int, typer.Option("--width", min=10, help="Columns of the time axis.")] = 48,
) -> None:
    """Show a finished turn: steps, model calls with tokens, tool calls on a time axis."""
    from ..telemetry.timeline import Timeline, TimelineError, render

    console = Console()
    existing_file(file, "a saved timeline or an OTLP/JSON trace file")
    try:
        timeline = Timeline.load(file)
    except TimelineError as exc:
        raise user_error(str(exc)) from None
    console.print(render(timeline, width=width))
