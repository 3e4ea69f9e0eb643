"""``tooldeck approve FILE``: answer a waiting run's calls at the terminal.

The prompt itself (:class:`~tooldeck.policy.prompt.PromptApprover`, :func:`ask_calls`)
is library code in :mod:`tooldeck.policy.prompt`; it is re-exported here.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from ..dispatch import ApprovalAnswer
from ..policy.pending import read_pending, save_answers
from ..policy.prompt import PromptApprover, ask_calls

__all__ = ["PromptApprover", "approve_command", "ask_calls"]


def approve_command(
    pending: Annotated[
        Path, typer.Argument(metavar="FILE", help="A waiting run's <session>.pending.json.")
    ],
    answers: Annotated[
        Path | None,
        typer.Option("--answers", "-o", help="Where to write the answers (JSON)."),
    ] = None,
) -> None:
    """Answer the calls a waiting run needs approved; writes an answers file for resume."""
    console = Console()
    try:
        session_id, _, step = read_pending(pending)
    except (OSError, ValueError, KeyError) as exc:
        console.print(f"[red]{pending}: {exc}[/red]")
        raise typer.Exit(1) from exc
    console.print(f"Session [bold]{session_id}[/bold] waits for {len(step.calls)} answer(s).")
    given = ask_calls(step.calls, sys.stdin, console)
    target = answers or pending.with_name(f"{session_id}.answers.json")
    by_id: dict[str, ApprovalAnswer] = {
        c.call_id: a for c, a in zip(step.calls, given, strict=True)
    }
    save_answers(target, session_id, by_id)
    summary: dict[str, Any] = {
        "approved": sum(a.approved for a in given),
        "denied": sum(not a.approved for a in given),
    }
    console.print(
        f"Wrote {target} ({summary['approved']} approved, {summary['denied']} denied). "
        "Resume with session.resume(tooldeck.policy.load_answers(path))."
    )
