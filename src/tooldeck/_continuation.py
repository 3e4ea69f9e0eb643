"""Continue a turn after a response was cut off at its output limit (opt-in).

A response that stops at ``max_tokens`` is not a usable answer: its text is cut short and
its calls may have half-written arguments, so none of them runs (each gets its "not
executed" output, as without this policy). Rebuilding the request by hand is what a user
would otherwise do; :class:`ContinuePolicy` does it inside the turn, bounded: the turn goes
on with a larger output limit, a tooldeck note in the transcript tells the model (and
anyone reading the transcript) what happened, and a
:class:`~tooldeck.events.TurnContinued` event says it to listeners.

The model is asked to write the cut-off response again, in full, rather than to append to
it: a call's arguments must come whole in one message to be executed, and the turn's final
answer is then one message.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .model import ModelSettings
from .transcript import AssistantMessage, StopReason

__all__ = ["Continuation"]

# Anthropic reports a full context window with this stop reason (mapped to MAX_TOKENS):
# a larger output limit cannot help there.
_CONTEXT_FULL = "model_context_window_exceeded"


@dataclass(frozen=True, slots=True)
class Continuation:
    """One decided continuation: the limit that was hit and the one the turn goes on with."""

    number: int  # 1 for the turn's first continuation
    previous_limit: int
    output_limit: int

    def note(self, message: AssistantMessage) -> str:
        """The text of the tooldeck note appended to the transcript before the next step."""
        calls = len(message.tool_calls)
        skipped = f"; its {calls} tool call(s) were not run" if calls else ""
        return (
            f"[tooldeck] Your previous response was cut off at its output limit "
            f"({self.previous_limit} tokens) before it was complete{skipped}. The limit is "
            f"now {self.output_limit} tokens: write that response again, in full."
        )


@dataclass(frozen=True, slots=True)
class ContinuePolicy:
    """Continue a turn whose response stopped at its output limit, with a larger limit.

    ``Session(continue_on_max_tokens=ContinuePolicy(max_continuations=2, factor=2))``:
    after a ``max_tokens`` stop the turn goes on (at most ``max_continuations`` times per
    turn) with ``max_output_tokens`` multiplied by ``factor``, capped at
    ``max_output_tokens`` when given. The limit that was hit is the request's
    ``max_output_tokens``, or, when the request set none, the output tokens the cut-off
    response used. The larger limit holds for the rest of the turn only.
    """

    max_continuations: int = 2
    factor: float = 2.0
    max_output_tokens: int | None = None  # the ceiling; None: only the factor bounds it

    def __post_init__(self) -> None:
        if self.max_continuations < 1:
            raise ValueError("ContinuePolicy.max_continuations must be at least 1")
        if not self.factor > 1:
            raise ValueError("ContinuePolicy.factor must be greater than 1")
        if self.max_output_tokens is not None and self.max_output_tokens < 1:
            raise ValueError("ContinuePolicy.max_output_tokens must be a positive token count")

    def decide(
        self, message: AssistantMessage, settings: ModelSettings, used: int
    ) -> Continuation | str:
        """The next continuation after ``message``, or why the turn does not continue.

        ``used`` is how many continuations the turn already had.
        """
        if message.stop_reason is not StopReason.MAX_TOKENS:
            return f"the response stopped with {message.stop_reason.value}"
        if (message.provider_data or {}).get("stop_reason") == _CONTEXT_FULL:
            return "the context window is full, a larger output limit cannot help"
        if used >= self.max_continuations:
            return f"already continued {used} time(s), the policy's maximum"
        current = settings.max_output_tokens or message.usage.output_tokens
        if current <= 0:
            return "the output limit that was hit is unknown (set max_output_tokens)"
        limit = math.ceil(current * self.factor)
        if self.max_output_tokens is not None:
            limit = min(limit, self.max_output_tokens)
        if limit <= current:
            return f"the output limit is already at the policy's ceiling ({current} tokens)"
        return Continuation(used + 1, current, limit)
