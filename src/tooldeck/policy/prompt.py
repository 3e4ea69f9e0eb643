"""Approving calls at the terminal: :class:`PromptApprover` (``tooldeck approve FILE`` uses it).

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
from typing import TextIO

import anyio.to_thread

from .._extras import needs_extra
from ..approvals import ApprovalAnswer, ApprovalRequest, PendingCall, not_answered
from .chain import PolicyError
from .grants import parse_pattern
from .session import ApproveAlways, SessionPolicy

with needs_extra("cli"):
    from rich.console import Console, Group
    from rich.json import JSON
    from rich.panel import Panel
    from rich.text import Text

__all__ = ["INPUT_ENDED", "PromptApprover", "ask_calls"]

_TIER_STYLE = {"STANDARD": "green", "WRITE": "yellow", "DANGEROUS": "bold red"}
INPUT_ENDED = "no answer: the input ended"
"""The message of the deny given for a call asked about after the input ended."""


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


def _ask_one(
    stream: TextIO, console: Console, call: PendingCall, offer_always: bool = True
) -> ApprovalAnswer:
    dangerous = call.tier == "DANGEROUS"
    always = offer_always and not dangerous
    options = "[y] yes once  " + ("[a] always  " if always else "") + "[n] no  [e] edit"
    letters = "y, a, n or e" if always else "y, n or e"
    while True:
        line = _read(stream, console, f"Approve {call.name} ({call.call_id})? {options} > ")
        if line is None:
            return not_answered(INPUT_ENDED)
        choice = line.strip().lower()
        if choice in ("y", "yes"):
            return ApprovalAnswer(True)
        if choice in ("a", "always"):
            if not always:
                console.print(
                    "DANGEROUS tools are approved one call at a time: y, n or e."
                    if dangerous
                    else "Approve-always needs a SessionPolicy to keep the grant: y, n or e."
                )
                continue
            return _always(stream, console, call)
        if choice in ("n", "no"):
            message = _read(stream, console, "Message for the model (optional) > ")
            return ApprovalAnswer(False, (message or "").strip())
        if choice in ("e", "edit"):
            return _edit(stream, console)
        if not choice:
            console.print(f"An empty answer is not an approval. Please answer {letters}.")
        else:
            console.print(f"Not an answer: {choice!r}. Please answer {letters}.")


def _always(stream: TextIO, console: Console, call: PendingCall) -> ApprovalAnswer:
    while True:
        line = _read(
            stream,
            console,
            'Only where an argument pattern holds? JSON such as {"path": {"prefix": "docs/"}}; '
            f"Enter for every call of {call.name} > ",
        )
        if line is None:
            return not_answered(INPUT_ENDED)
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
            return not_answered(INPUT_ENDED)
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
    calls: Sequence[PendingCall], stream: TextIO, console: Console, offer_always: bool = True
) -> list[ApprovalAnswer]:
    """Show a batch of calls, then ask about each; one answer per call, in order.

    ``offer_always=False`` leaves out ``a`` (approve-always), for an approver that no
    :class:`~tooldeck.policy.SessionPolicy` wraps (nothing would keep the grant).
    """
    if not calls:
        return []
    _show(console, calls)
    return [_ask_one(stream, console, c, offer_always) for c in calls]


class PromptApprover:
    """An :data:`~tooldeck.dispatch.Approver` that asks at the terminal.

    Wrap it with ``SessionPolicy.approver(PromptApprover(...))`` so approve-always is
    recorded and the answers are audited. With ``policy`` the tier shown is the
    effective one (raised by the policy's marks); otherwise the tool's own.
    ``offer_always=False`` does not offer approve-always (the console approver of
    ``Protection.ask(...)`` without a session policy: nothing would keep the grant).
    """

    def __init__(
        self,
        stream: TextIO | None = None,
        console: Console | None = None,
        policy: SessionPolicy | None = None,
        *,
        offer_always: bool = True,
    ) -> None:
        self.stream = stream
        self.console = console or Console(stderr=True)
        self.policy = policy
        self.offer_always = offer_always

    def view(self, request: ApprovalRequest) -> PendingCall:
        base = PendingCall.of(request)
        if self.policy is None:
            return base
        tier = self.policy.tier_of(request.tool)
        return PendingCall(base.call_id, base.name, tier, base.reason, base.display)

    async def __call__(self, requests: Sequence[ApprovalRequest]) -> list[ApprovalAnswer]:
        calls = [self.view(r) for r in requests]
        stream = self.stream or sys.stdin
        return await anyio.to_thread.run_sync(
            ask_calls, calls, stream, self.console, self.offer_always
        )
