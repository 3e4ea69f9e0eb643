"""The part every adapter shares: a tool source's tools for the host's step, and the host's
calls run through tooldeck's dispatcher, one step at a time.

A :class:`Bridge` holds what a :class:`~tooldeck.Session` would give its dispatcher (the
tools, the protection, the turn's context, the result guard, the events) and answers two
questions for a host framework:

- :meth:`Bridge.plan`: which tools the model is shown now (asked again before each of the
  host's model steps, so a tool found by ``tool_search``, or the recall tool after a
  first offload, is offered from the next step);
- :meth:`Bridge.call`: one call of the host's, run to its one :class:`Outcome`. The host
  runs the calls of one model step as concurrent tasks (pydantic-ai, openai-agents and
  LangGraph's ``ToolNode`` all do); the calls that arrive together are one step for the
  dispatcher: one approval batch, parallel tools run together, a ``sequential`` tool alone,
  the model's order kept.

An :class:`Outcome` says what became of the call (``kind``), so each adapter maps it to its
host's convention: arguments that did not validate go to the host's retry mechanism, a
denial is the tool's answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from .._call import ResultHook, Slot, error
from ..approvals import ApprovalAnswer, PendingApproval
from ..assembly import TurnContext
from ..dispatch import Dispatcher
from ..events import EventBus
from ..loop import TIMEOUT, new_session_id
from ..offload.defaults import ResultGuard, session_guard
from ..plan import ToolPlan, ToolPlanner
from ..policy.protection import Protection
from ..sources.listed import ToolList, Tools
from ..telemetry.tracing import StepTracing
from ..tools import Tool
from ..transcript import ToolCall, ToolOutput

__all__ = ["Bridge", "Outcome", "OutcomeKind"]

OutcomeKind: TypeAlias = Literal["ok", "failed", "invalid", "unknown", "denied", "waiting"]
"""What became of a call: ``ok`` (ran, a result), ``failed`` (ran, an error result, or
never ran because the step ended), ``invalid`` (its arguments did not validate, even
repaired, or were cut off), ``unknown`` (no such tool now), ``denied`` (the policy or a
human refused it), ``waiting`` (its approval cannot be given now: nothing ran)."""

# How many times the first call of a step yields to the event loop before the step is
# closed: the host starts every call of a model step as a task at once, and each reaches
# the bridge on its first run; a few yields also cover a host that awaits on the way.
_GATHER_TICKS = 4


@dataclass(frozen=True, slots=True)
class Outcome:
    """One call's one output, and what became of the call."""

    output: ToolOutput
    kind: OutcomeKind
    requests: int = 0  # for ``waiting``: how many calls of the step wait together

    @property
    def text(self) -> str:
        return self.output.text


class _Classifying(Dispatcher):
    """The dispatcher, noting which calls were refused before they could run and why."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.kinds: dict[str, OutcomeKind] = {}

    def _prepare(self, call: ToolCall) -> Slot:
        slot = super()._prepare(call)
        if slot.output is not None:
            unknown = not call.incomplete and self.toolset.get(call.name) is None
            self.kinds[call.call_id] = "unknown" if unknown else "invalid"
        return slot

    async def _check(
        self,
        slots: list[Slot],
        answers: Mapping[str, ApprovalAnswer] | None,
        trace: StepTracing,
    ) -> None:
        open_before = {id(s) for s in slots if s.output is None}
        try:
            await super()._check(slots, answers, trace)
        finally:
            for s in slots:
                if id(s) in open_before and s.output is not None:
                    self.kinds[s.call.call_id] = "denied"


@dataclass(slots=True)
class _Step:
    """The calls that arrived together, and their outcomes once the step has run."""

    loop: asyncio.AbstractEventLoop | None = None
    calls: list[ToolCall] = field(default_factory=list)
    answers: dict[str, ApprovalAnswer] = field(default_factory=dict)
    done: asyncio.Future[dict[str, Outcome]] | None = None
    closed: bool = False


class Bridge:
    """Tools from any tooldeck source, run for a host framework (see the module docstring).

    ``tools`` is what ``Session(tools=...)`` takes (a tool, a source, a list of them, or a
    :class:`~tooldeck.plan.ToolPlanner` for deferred tools and ``tool_search``);
    ``protect`` judges every call and answers its asks (a
    :class:`~tooldeck.policy.protection.Protection`; none: every call runs); ``turn`` is the
    turn's context (default: this bridge's session id, no home: large results are cut,
    not stored); ``result_hooks``, ``guard``, ``timeout`` and ``events`` as for a Session.
    """

    def __init__(
        self,
        tools: Tools,
        *,
        protect: Protection | None = None,
        turn: TurnContext | None = None,
        session_id: str | None = None,
        timeout: float | None = TIMEOUT,
        result_hooks: Sequence[ResultHook] = (),
        guard: bool = True,
        events: EventBus | None = None,
    ) -> None:
        if protect is not None and not isinstance(protect, Protection):
            raise TypeError(
                f"protect={protect!r} is not a Protection: make one with "
                "Protection.ask(...), Protection.policy(...) or Protection.none()"
            )
        self.turn = turn or TurnContext(session_id or new_session_id())
        self.session_id = session_id or self.turn.session_id
        self.events = events or EventBus()
        self.protect = protect or Protection.none()
        self.timeout = timeout
        self._source: ToolList | ToolPlanner = (
            tools if isinstance(tools, ToolPlanner) else ToolList(tools)
        )
        self.guard: ResultGuard = session_guard(
            result_hooks,
            enabled=guard,
            session_id=self.session_id,
            home=self.turn.home,
            events=self.events,
        )
        self._policy, self._approver = self.protect.dispatch()
        self._plan: ToolPlan | None = None
        self._step: _Step | None = None
        self._offered: tuple[Hashable, frozenset[str]] | None = None
        self.steps = 0  # steps dispatched so far

    def plan(self) -> ToolPlan:
        """The tools of the host's next model step (assembled now, the guard's recall
        tool added once it holds results); calls run against the latest plan."""
        source = self._source
        if isinstance(source, ToolPlanner):
            made = source(self.turn)
        else:
            made = ToolPlan.eager(source.toolset(self.turn))
        self._plan = plan = self.guard.offer_recall(made)
        return plan

    def shown(self) -> tuple[Tool, ...]:
        """The tools the model is shown now (:meth:`plan`'s ``shown``)."""
        return self.plan().shown

    def offered(self, run: Hashable) -> frozenset[str]:
        """The names of the tools shown now, for a host that asks tool by tool: planned
        again once a step of ``run`` (anything naming the host's run) has run since the
        last plan, read back otherwise (what the plan shows changes only when a tool ran:
        a search loaded tools, a result was stored)."""
        key = (run, self.steps)
        if self._offered is not None and self._offered[0] == key:
            return self._offered[1]
        names = frozenset(t.name for t in self.plan().shown)
        self._offered = (key, names)
        return names

    def executable(self) -> Mapping[str, Tool]:
        """The tools calls run against: the latest plan's (made now if none yet)."""
        return (self._plan or self.plan()).executable

    async def call(self, call: ToolCall, *, approved: ApprovalAnswer | None = None) -> Outcome:
        """Run ``call`` with the other calls that arrive with it, as one step.

        ``approved``: the host's own answer to this call's approval (a host that asked a
        human itself and calls again, like pydantic-ai after ``ApprovalRequired``).
        """
        step = self._step
        loop = asyncio.get_running_loop()
        if step is None or step.closed or step.loop is not loop:
            # (a call from another thread's loop, as a sync host's worker threads make,
            # is a step of its own)
            step = self._step = _Step(loop=loop)
            step.done = loop.create_future()
            leader = True
        else:
            leader = False
        step.calls.append(call)
        if approved is not None:
            step.answers[call.call_id] = approved
        assert step.done is not None
        if not leader:
            return (await asyncio.shield(step.done))[call.call_id]
        try:
            for _ in range(_GATHER_TICKS):
                await asyncio.sleep(0)
        finally:
            step.closed = True
            if self._step is step:
                self._step = None
        partial: list[ToolOutput] = []
        try:
            outcomes = await self._run(step.calls, step.answers, partial)
        except BaseException as exc:
            # the step ended another way (cancelled, or a BaseException): every call still
            # has its one output ("stopped", "not executed"), so the other calls of the
            # step get theirs; this one's task gets the exception
            if len(partial) == len(step.calls):
                step.done.set_result({o.call_id: Outcome(o, "failed") for o in partial})
            else:
                step.done.set_exception(exc)
                step.done.exception()  # retrieved: a follower may be gone already
            raise
        step.done.set_result(outcomes)
        return outcomes[call.call_id]

    def _dispatcher(self) -> _Classifying:
        return _Classifying(
            (self._plan or self.plan()).executable,
            session_id=self.session_id,
            turn=self.turn,
            policy=self._policy,
            approver=self._approver,
            timeout=self.timeout,
            events=self.events,
            result_hooks=self.guard.hooks,
        )

    async def _run(
        self,
        calls: Sequence[ToolCall],
        answers: Mapping[str, ApprovalAnswer],
        partial: list[ToolOutput],
    ) -> dict[str, Outcome]:
        """One step's calls through the dispatcher; every call gets its outcome."""
        dispatcher = self._dispatcher()
        self.steps += 1
        try:
            result = await dispatcher.dispatch(calls, answers=answers or None, partial=partial)
        except PendingApproval as pending:
            return await self._waiting(calls, answers, pending, dispatcher.kinds)
        return {o.call_id: Outcome(o, _kind(o, dispatcher.kinds)) for o in result.outputs}

    async def _waiting(
        self,
        calls: Sequence[ToolCall],
        answers: Mapping[str, ApprovalAnswer],
        pending: PendingApproval,
        kinds: Mapping[str, OutcomeKind],
    ) -> dict[str, Outcome]:
        """The approver cannot answer now: the waiting calls say so (nothing of them
        ran); the step's other calls run, once, as a step of their own."""
        waiting = {r.call.call_id for r in pending.requests}
        outcomes = {o.call_id: Outcome(o, _kind(o, kinds)) for o in pending.outputs}
        rest = [c for c in calls if c.call_id not in waiting and c.call_id not in outcomes]
        if rest:
            outcomes.update(await self._run(rest, answers, []))
        for request in pending.requests:
            call = request.call
            text = (
                f"Not executed: {call.name} waits for approval ({request.reason}); "
                "nobody can approve it now."
            )
            outcomes[call.call_id] = Outcome(error(call, text), "waiting", len(waiting))
        return outcomes


def _kind(output: ToolOutput, kinds: Mapping[str, OutcomeKind]) -> OutcomeKind:
    known = kinds.get(output.call_id)
    if known is not None:
        return known
    return "failed" if output.is_error else "ok"
