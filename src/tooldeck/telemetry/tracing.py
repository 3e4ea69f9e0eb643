"""How the dispatcher traces its steps: a strategy, chosen once per dispatcher.

:func:`tracing` gives :data:`UNTRACED` when telemetry is off (every hook does nothing
and costs a method call) or :class:`Spans` when it is on (a
:class:`~tooldeck.telemetry.calls.StepTrace` per step). The dispatcher calls the same
hooks either way, on its one path: :meth:`StepTracing.decided` after the policy,
:meth:`StepTracing.approval` around the approval request, :meth:`StepTracing.started`
and :meth:`StepTracing.ended` around a call that runs, :meth:`StepTracing.end` when the
step is over (a span for every call that never ran).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from ..transcript import ToolOutput
from .calls import StepTrace, TracedSlot
from .runtime import Telemetry

__all__ = ["UNTRACED", "Spans", "StepTracing", "Tracing", "Untraced", "tracing"]


class StepTracing(Protocol):
    """The telemetry of one step, as the dispatcher reports to it."""

    def decided(self, slot: TracedSlot, action: str, level: str, rule: str) -> None: ...

    def approval(self, asking: Sequence[TracedSlot]) -> AbstractContextManager[Any]: ...

    def started(self, slot: TracedSlot) -> Any: ...

    def ended(self, slot: TracedSlot, running: Any) -> None: ...

    def end(self, slots: Sequence[TracedSlot]) -> None: ...


class Tracing(Protocol):
    """Makes the :class:`StepTracing` of each step."""

    def step(self, slots: Sequence[TracedSlot], prior: Sequence[ToolOutput]) -> StepTracing: ...


_NO_SPAN = contextlib.nullcontext()


class Untraced:
    """Telemetry off: one object for every step, whose hooks do nothing."""

    __slots__ = ()

    def step(self, slots: Sequence[TracedSlot], prior: Sequence[ToolOutput]) -> Untraced:
        return self

    def decided(self, slot: TracedSlot, action: str, level: str, rule: str) -> None:
        pass

    def approval(self, asking: Sequence[TracedSlot]) -> AbstractContextManager[Any]:
        return _NO_SPAN

    def started(self, slot: TracedSlot) -> None:
        pass

    def ended(self, slot: TracedSlot, running: Any) -> None:
        pass

    def end(self, slots: Sequence[TracedSlot]) -> None:
        pass


UNTRACED = Untraced()


class Spans:
    """Telemetry on: a :class:`~tooldeck.telemetry.calls.StepTrace` per step."""

    __slots__ = ("tel",)

    def __init__(self, tel: Telemetry) -> None:
        self.tel = tel

    def step(self, slots: Sequence[TracedSlot], prior: Sequence[ToolOutput]) -> StepTrace:
        return StepTrace(self.tel, slots, prior)


def tracing(tel: Telemetry | None) -> Tracing:
    """The strategy for a dispatcher made while telemetry is ``tel`` (``None``: off)."""
    return UNTRACED if tel is None else Spans(tel)
