"""The dispatcher: the only code path that runs a tool.

For one model step's calls it:

1. resolves each name in the turn's :class:`~tooldeck.assembly.Toolset` (an unknown
   name gets an error output listing the tools that exist, closest first);
2. validates and repairs each call's arguments (:func:`~tooldeck.validate_arguments`);
   a call from a truncated response is never executed;
3. asks the policy hook about every valid call, then requests every needed approval of
   the step together, in one batch. An approver that cannot answer now raises
   :class:`PendingApproval`: nothing of the step has run, and the step can be finished
   later with ``dispatch(calls, prior=..., answers=...)`` (see ``Session.resume``);
4. runs the calls in the model's order: consecutive ``parallel`` calls run together, a
   ``sequential`` call waits for everything before it and blocks everything after it;
5. enforces per-tool timeouts and the abort signal (a cooperative signal first, then
   task cancellation);
6. records **exactly one** output per call, in the model's order, whatever happened:
   denied, invalid, unknown, timed out, cancelled, crashed or never run after a tool
   ended the turn. Exceptions are logged with their traceback and kept in the output's
   details; the model gets a short message.
"""

from __future__ import annotations

import asyncio
import difflib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ._asking import approve, decide
from ._call import CallRunner, ResultHook, Slot, error
from .approvals import (
    ApprovalAnswer,
    Approver,
    PendingApproval,
    PolicyHook,
    allow_all,
)
from .arguments import checked_arguments
from .assembly import Toolset, TurnContext
from .context import AbortSignal, LiveProtection
from .errors import ArgumentError
from .events import EventBus, OutputRecorded
from .telemetry.settings import active as telemetry_active
from .telemetry.tracing import UNTRACED, StepTracing, Tracing, tracing
from .transcript import ToolCall, ToolOutput

__all__ = [
    "DispatchResult",
    "unknown_tool_message",
]

_log = logging.getLogger("tooldeck.dispatch")
_NEVER = AbortSignal()  # the signal of a step run without one: nothing ever fires it


@dataclass(slots=True)
class DispatchResult:
    outputs: list[ToolOutput]
    terminated_by: str | None = None


def unknown_tool_message(name: str, known: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, known, n=5, cutoff=0.4)
    rest = [n for n in known if n not in close]
    listed = ", ".join([*close, *rest][:40]) or "(none)"
    more = f" and {len(known) - 40} more" if len(known) > 40 else ""
    return f"Unknown tool {name!r}. Available tools: {listed}{more}."


def _groups(slots: list[Slot]) -> list[list[Slot]]:
    """The calls still to run (no output yet), in order, in groups that may run together.

    Consecutive ``parallel`` calls form one group; each ``sequential`` call is a group of
    its own, so it waits for everything before it and blocks everything after it.
    """
    groups: list[list[Slot]] = []
    last_parallel = False
    for slot in slots:
        if slot.output is not None:
            continue
        assert slot.tool is not None  # a slot without an output resolved to a tool
        parallel = slot.tool.execution_mode == "parallel"
        if parallel and last_parallel:
            groups[-1].append(slot)
        else:
            groups.append([slot])
        last_parallel = parallel
    return groups


def _ended_by(slot: Slot) -> str | None:
    """The name of the slot's tool if its (recorded) result ends the turn."""
    assert slot.output is not None
    return slot.call.name if slot.output.result.terminate else None


def _refuse_ambiguous(slots: list[Slot]) -> None:
    """Calls of one step that share a call id are never run (nor approved).

    An id is how an approval, an output and a resumed step find their call; two calls
    with one id cannot be told apart, so both get an error output. (Transcript messages
    give their calls distinct ids when they are made, so this only meets calls built by
    hand.)
    """
    seen: dict[str, int] = {}
    for slot in slots:
        seen[slot.call.call_id] = seen.get(slot.call.call_id, 0) + 1
    if len(seen) == len(slots):
        return
    for slot in slots:
        count = seen[slot.call.call_id]
        if count > 1 and slot.output is None:
            slot.output = error(
                slot.call,
                f"Not executed: {count} calls of this step share the call id "
                f"{slot.call.call_id!r}, so none of them can be told apart; each call "
                "needs its own id.",
            )


def _not_executed(slots: list[Slot], exc: BaseException) -> None:
    """The step ends by ``exc``: every call without an output gets "not executed"."""
    why = (
        "the turn was cancelled"
        if isinstance(exc, asyncio.CancelledError)
        else f"the step failed ({type(exc).__name__}: {exc})"
    )
    for slot in slots:
        if slot.output is None:
            slot.output = error(slot.call, f"Not executed: {why}.", None, slot.repairs)


class Dispatcher(CallRunner):
    """Runs one step's calls against one turn's toolset. See the module docstring.

    Running one call is ``CallRunner``'s part (``tooldeck._call``); the policy and the
    approvals are ``tooldeck._asking``'s; telemetry is a strategy chosen here, once
    (``tooldeck.telemetry.tracing``): when it is off, its hooks do nothing.
    """

    def __init__(
        self,
        toolset: Toolset,
        *,
        session_id: str = "",
        turn: TurnContext | None = None,
        policy: PolicyHook | None = None,
        approver: Approver | None = None,
        timeout: float | None = 300.0,
        timeouts: Mapping[str, float | None] | None = None,
        events: EventBus | None = None,
        logger: logging.Logger | None = None,
        result_hooks: Sequence[ResultHook] = (),
    ) -> None:
        self.toolset = toolset
        self.session_id = session_id or (turn.session_id if turn else "")
        self.turn = turn
        self.policy = policy or allow_all
        self.approver = approver
        self.timeout = timeout
        self.timeouts = dict(timeouts or {})
        self.events = events or EventBus()
        self.log = logger or _log
        self.result_hooks = tuple(result_hooks)
        self._protected: LiveProtection | None = None
        self._tracing: Tracing = tracing(telemetry_active())

    def _prepare(self, call: ToolCall) -> Slot:
        """Resolve and validate one call: a slot ready to run, or one with its output."""
        if call.incomplete:
            return Slot(
                call,
                output=error(
                    call,
                    f"Not executed: the call to {call.name} was cut off "
                    "(the response hit its token limit); arguments may be "
                    "incomplete.",
                ),
            )
        tool = self.toolset.get(call.name)
        if tool is None:
            return Slot(
                call, output=error(call, unknown_tool_message(call.name, self.toolset.names))
            )
        try:
            params, repairs = checked_arguments(tool, call.arguments)
        except ArgumentError as exc:
            return Slot(
                call,
                output=error(
                    call, exc.model_message, {"problems": list(exc.problems)}, exc.repairs
                ),
            )
        return Slot(call, tool, params, repairs)

    async def dispatch(
        self,
        calls: Sequence[ToolCall],
        signal: AbortSignal | None = None,
        *,
        prior: Sequence[ToolOutput] = (),
        answers: Mapping[str, ApprovalAnswer] | None = None,
        partial: list[ToolOutput] | None = None,
    ) -> DispatchResult:
        """Run one model step's calls; returns exactly one output per call, in order.

        To finish a step that waited for approval: ``prior`` holds the outputs the step
        already has (those calls are never prepared, asked about or run again) and
        ``answers`` the human's answers by call id. Every other call is checked again.
        Raises :class:`PendingApproval` when the approver cannot answer now.

        If the step ends any other way than returning (this task is cancelled, or
        something raises), the exception goes on, but first every call gets its one
        output: what it produced if it finished, "stopped" if it was running, "not
        executed" otherwise. With ``partial`` given, those outputs (one per call, in
        order) are put in it, so the caller can keep its transcript valid.
        """
        if signal is None:
            signal = self.turn.signal if self.turn is not None else _NEVER
        done = {o.call_id: o for o in prior} if prior else None
        slots: list[Slot] = []
        for c in calls:  # (a loop, not a comprehension: no frame of its own)
            slots.append(
                Slot(c, output=done[c.call_id])
                if done is not None and c.call_id in done
                else self._prepare(c)
            )
        if len(slots) > 1:
            _refuse_ambiguous(slots)
        tracing = self._tracing
        trace = UNTRACED if tracing is UNTRACED else tracing.step(slots, prior)
        try:
            if self.policy is not allow_all:
                await self._check(slots, answers, trace)
            only = slots[0] if len(slots) == 1 and slots[0].output is None else None
            if only is not None:  # the common step, one call to run: one group of one,
                await self._run(only, signal, trace)  # run as _execute would, in this task
                terminated_by = _ended_by(only)
            else:
                terminated_by = await self._execute(slots, signal, trace)
        except PendingApproval:
            raise
        except BaseException as exc:
            _not_executed(slots, exc)
            if partial is not None:
                partial[:] = [s.output for s in slots if s.output is not None]
            raise
        finally:
            if trace is not UNTRACED:
                trace.end(slots)
        outputs: list[ToolOutput] = []
        for slot in slots:
            output = slot.output
            assert output is not None  # every path above recorded exactly one output
            outputs.append(output)
        if self.events.active:
            for output in outputs:
                await self.events.emit(OutputRecorded(self.session_id, output))
        return DispatchResult(outputs, terminated_by)

    async def _check(
        self,
        slots: list[Slot],
        answers: Mapping[str, ApprovalAnswer] | None,
        trace: StepTracing,
    ) -> None:
        """The policy on every call still to run, then one approval batch if any asks."""
        ask = False
        for slot in slots:
            if slot.output is None:
                await decide(self.policy, self.log, slot, trace)
                ask = ask or slot.approval_reason is not None
        if ask:
            asking = [s for s in slots if s.output is None and s.approval_reason is not None]
            with trace.approval(asking):
                await approve(
                    slots, asking, self.approver, answers, self.events, self.session_id, self.log
                )

    async def _execute(
        self, slots: list[Slot], signal: AbortSignal, trace: StepTracing
    ) -> str | None:
        """Run every call still to run, group by group (see ``_groups``); returns the
        name of the tool that ended the turn, if one did.

        A group of one (the common case) runs in this task; a larger one under
        ``asyncio.gather``. Once the turn is aborted or a tool has ended it, the calls
        after get a "not run" output each (``_run`` sees the abort).
        """
        terminated_by: str | None = None
        for group in _groups(slots):
            if terminated_by is not None and not signal.aborted:
                for s in group:
                    s.output = error(s.call, f"Not run: {terminated_by} ended the turn.")
                continue
            if len(group) == 1:  # _run records "not run" itself once the turn is aborted
                await self._run(group[0], signal, trace)
            else:
                await asyncio.gather(*(self._run(s, signal, trace) for s in group))
            for s in group:
                terminated_by = terminated_by or _ended_by(s)
        return terminated_by
