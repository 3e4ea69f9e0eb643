"""Approving calls at the terminal: :class:`PromptApprover` and ``tooldeck approve FILE``.

The prompt shows every call of the batch first (tool, tier, why approval is needed, and
the arguments, or the tool's own approval display, as JSON), then asks about each:

- ``y`` / ``yes``: approve this call;
- ``a`` / ``always``: approve, and every later call of this tool (optionally only
  where an argument pattern holds); not offered for DANGEROUS tools;
- ``n`` / ``no``: deny, with an optional message for the model;
- ``e`` / ``edit``: approve with new arguments (a JSON object).

An empty line is never an answer: the question is asked again. The end of the input is
a deny. Answers are read from any text stream (stdin by default), so the prompt can be
driven by a script or a test.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, TextIO

import anyio.to_thread
import typer
from rich.console import Console, Group
from rich.json import JSON
from rich.panel import Panel
from rich.text import Text

from ..dispatch import ApprovalAnswer, ApprovalRequest
from ..loop import PendingCall
from ..policy.chain import PolicyError
from ..policy.grants import parse_pattern
from ..policy.pending import read_pending, save_answers
from ..policy.session import ApproveAlways, SessionPolicy
from .report import existing_file, user_error

__all__ = ["PromptApprover", "approve_command", "ask_calls"]

_TIER_STYLE = {"STANDARD": "green", "WRITE": "yellow", "DANGEROUS": "bold red"}
_EOF = "no answer: the input ended"


def _read(stream: TextIO, console: Console, prompt: str) -> str | None:
    """One line from ``stream`` after printing ``prompt``; None at the end of the input."""
    console.print(prompt, end="", markup=False, highlight=False)
    line = stream.readline()
    if not line:
        console.print()
        return None
    return line.rstrip("\r\n")


def _show(console: Console, calls: Sequence[PendingCall]) -> None:
    many = len(calls) > 1
    console.print(
        f"[bold]{len(calls)} call{'s' if many else ''} need{'' if many else 's'} approval[/bold]"
        + (" (one batch)" if many else "")
    )
    for index, c in enumerate(calls, 1):
        style = _TIER_STYLE.get(c.tier, "bold red")
        title = Text.assemble((f"{index}/{len(calls)} ", "dim"), (c.name, "bold"), " ")
        title.append(f"[{c.tier}]", style=style)
        body = Group(
            Text.assemble(("why: ", "dim"), c.reason),
            Text("request:" if c.name == "switch_model" else "arguments:", style="dim"),
            JSON.from_data(c.display, sort_keys=False),
        )
        console.print(Panel(body, title=title, title_align="left", expand=False))


def _ask_one(stream: TextIO, console: Console, call: PendingCall) -> ApprovalAnswer:
    dangerous = call.tier == "DANGEROUS"
    options = "[y] yes once  " + ("" if dangerous else "[a] always  ") + "[n] no  [e] edit"
    while True:
        line = _read(stream, console, f"Approve {call.name} ({call.call_id})? {options} > ")
        if line is None:
            return ApprovalAnswer(False, _EOF)
        choice = line.strip().lower()
        if choice in ("y", "yes"):
            return ApprovalAnswer(True)
        if choice in ("a", "always"):
            if dangerous:
                console.print("DANGEROUS tools are approved one call at a time: y, n or e.")
                continue
            return _always(stream, console, call)
        if choice in ("n", "no"):
            message = _read(stream, console, "Message for the model (optional) > ")
            return ApprovalAnswer(False, (message or "").strip())
        if choice in ("e", "edit"):
            return _edit(stream, console)
        if not choice:
            console.print("An empty answer is not an approval. Please answer y, a, n or e.")
        else:
            console.print(f"Not an answer: {choice!r}. Please answer y, a, n or e.")


def _always(stream: TextIO, console: Console, call: PendingCall) -> ApprovalAnswer:
    while True:
        line = _read(
            stream,
            console,
            'Only where an argument pattern holds? JSON such as {"path": {"prefix": "docs/"}}; '
            f"Enter for every call of {call.name} > ",
        )
        if line is None:
            return ApprovalAnswer(False, _EOF)
        if not line.strip():
            return ApproveAlways()
        try:
            pattern = json.loads(line)
            parse_pattern(pattern, "pattern")
        except (json.JSONDecodeError, PolicyError) as exc:
            console.print(f"Not a usable pattern: {exc}", markup=False)
            continue
        return ApproveAlways(pattern=pattern)


def _edit(stream: TextIO, console: Console) -> ApprovalAnswer:
    while True:
        line = _read(stream, console, "New arguments, as a JSON object > ")
        if line is None:
            return ApprovalAnswer(False, _EOF)
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            console.print(f"Not JSON: {exc}", markup=False)
            continue
        if not isinstance(value, dict):
            console.print("The arguments must be a JSON object.")
            continue
        return ApprovalAnswer(True, arguments=value)


def ask_calls(
    calls: Sequence[PendingCall], stream: TextIO, console: Console
) -> list[ApprovalAnswer]:
    """Show a batch of calls, then ask about each; one answer per call, in order."""
    if not calls:
        return []
    _show(console, calls)
    return [_ask_one(stream, console, c) for c in calls]


class PromptApprover:
    """An :data:`~tooldeck.dispatch.Approver` that asks at the terminal.

    Wrap it with ``SessionPolicy.approver(PromptApprover(...))`` so approve-always is
    recorded and the answers are audited. With ``policy`` the tier shown is the
    effective one (raised by the policy's marks); otherwise the tool's own.
    """

    def __init__(
        self,
        stream: TextIO | None = None,
        console: Console | None = None,
        policy: SessionPolicy | None = None,
    ) -> None:
        self.stream = stream
        self.console = console or Console(stderr=True)
        self.policy = policy

    def view(self, request: ApprovalRequest) -> PendingCall:
        base = PendingCall.of(request)
        if self.policy is None:
            return base
        tier = self.policy.tier_of(request.tool)
        return PendingCall(base.call_id, base.name, tier, base.reason, base.display)

    async def __call__(self, requests: Sequence[ApprovalRequest]) -> list[ApprovalAnswer]:
        calls = [self.view(r) for r in requests]
        stream = self.stream or sys.stdin
        return await anyio.to_thread.run_sync(ask_calls, calls, stream, self.console)


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
    what = "a waiting run's <session>.pending.json"
    existing_file(pending, what)
    try:
        session_id, _, step = read_pending(pending)
    except (OSError, ValueError, KeyError) as exc:
        message = str(exc)
        message = message if message.startswith(str(pending)) else f"{pending}: {message}"
        raise user_error(f"{message}; give {what}") from exc
    target = answers or pending.with_name(f"{session_id}.answers.json")
    if target.is_dir():  # said before any question, so no answer is lost
        raise user_error(f"{target} is a folder; give --answers a file to write")
    if not target.parent.is_dir():
        raise user_error(
            f"{target.parent} does not exist; give --answers a file in a folder that does"
        )
    console.print(f"Session [bold]{session_id}[/bold] waits for {len(step.calls)} answer(s).")
    given = ask_calls(step.calls, sys.stdin, console)
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
