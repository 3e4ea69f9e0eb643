"""One turn of the agent loop, in phases.

A :class:`Turn` holds one turn's state and runs it (:meth:`Turn.drive`) as a loop of
phases, each a method that returns a small outcome: :class:`Next` (what the loop does
next) or :class:`Stop` (the turn ends, and why):

- **limits**: the abort signal, ``max_steps`` and the budgets (:mod:`tooldeck.budget`),
  checked before every model step (the budgets also before a step's calls run);
- **model step**: the tools re-planned and announced, the request sent (streamed or not,
  traced when telemetry is on), usage counted;
- **review** of the response: a structured answer checked (sent back with the validation
  message, a bounded number of times), a refused / cut-off / filtered response given its
  "not executed" outputs (and continued with a larger output limit when the session's
  :class:`~tooldeck._continuation.ContinuePolicy` says so), a paused turn sent back, a
  final answer ending the turn;
- **calls**: the step's calls dispatched; a step that waits for approval is *held*
  (:class:`~tooldeck.approvals.PendingStep` on the session and in its store); a stored
  session (``Session(store=...)``) is saved after each response and each step's outputs;
- **failure** bookkeeping when the turn raises (every open call gets an output), and
  the **close**: telemetry ended, usage added to the session, :class:`TurnFinished`.

Every stop reason and its text is made by one of :class:`Stop`'s constructors, and
:meth:`Turn.drive` is the one place that takes it. The session (:mod:`tooldeck.loop`)
builds the turn's tools, guard and dispatcher and hands them over.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ._continuation import ContinuePolicy
from ._streaming import stream_step
from .approvals import ApprovalAnswer, PendingApproval, PendingCall, PendingStep, PendingStore
from .budget import Budget, Meter, calls_made
from .context import AbortSignal
from .dispatch import Dispatcher
from .events import (
    EventBus,
    ModelStepFinished,
    ModelStepStarted,
    OutputRecorded,
    TurnContinued,
    TurnFinished,
    TurnStarted,
)
from .model import Model, ModelRequest, ModelSettings
from .offload.defaults import ResultGuard
from .plan import ToolPlan
from .result import ToolResult
from .structured import AnswerCheck
from .telemetry.settings import active as telemetry_active
from .telemetry.turns import TurnTrace
from .transcript import (
    AssistantMessage,
    Item,
    StopReason,
    ToolCall,
    ToolOutput,
    Usage,
    UserMessage,
)

__all__ = ["Next", "Stop", "Turn", "TurnHost"]

_log = logging.getLogger("tooldeck.loop")  # the loop's logger, whichever module logs

_NOT_RUN = {
    StopReason.REFUSAL: "the model refused",
    StopReason.MAX_TOKENS: "the response was cut off at its token limit, so its arguments "
    "may be incomplete",
    StopReason.CONTENT_FILTER: "the response was stopped by a content filter",
    StopReason.ERROR: "the provider reported an error",
}


class Next(enum.Enum):
    """What the loop does after a phase that did not end the turn."""

    ASK = "ask the model (again)"
    RUN_CALLS = "run the step's calls"
    CUT_SHORT = "give the calls of a cut-short response their outputs"


# A member looked up on an Enum class costs ~0.1 µs on CPython 3.11: the hot path uses these.
ASK, RUN_CALLS, CUT_SHORT = Next.ASK, Next.RUN_CALLS, Next.CUT_SHORT


@dataclass(frozen=True, slots=True)
class Stop:
    """The turn ends: its stop reason and the text that says why (made only here)."""

    stop_reason: StopReason
    reason: str

    @classmethod
    def aborted(cls, signal: AbortSignal) -> Stop:
        return cls(StopReason.ERROR, f"aborted: {signal.reason}")

    @classmethod
    def max_steps(cls, limit: int) -> Stop:
        return cls(StopReason.TOOL_CALLS, f"max_steps ({limit}) reached")

    @classmethod
    def budget(cls, why: str) -> Stop:
        return cls(StopReason.BUDGET, why)

    @classmethod
    def invalid_answer(cls, why: str) -> Stop:
        return cls(StopReason.ERROR, why)

    @classmethod
    def cut_short(cls, message: AssistantMessage, not_continued: str) -> Stop:
        """A refused, cut-off, filtered or failed response (its calls were not run)."""
        stop = message.stop_reason
        reason = message.refusal or stop.value
        if message.tool_calls:
            reason += f"; {len(message.tool_calls)} call(s) not executed"
        if not_continued:
            reason += f"; not continued: {not_continued}"
        return cls(stop, reason)

    @classmethod
    def answered(cls, message: AssistantMessage) -> Stop:
        return cls(message.stop_reason, message.stop_reason.value)

    @classmethod
    def waiting(cls, step: PendingStep) -> Stop:
        return cls(StopReason.TOOL_CALLS, f"waiting for approval of {len(step.calls)} call(s)")

    @classmethod
    def ended_by(cls, tool: str) -> Stop:
        return cls(StopReason.TOOL_CALLS, f"ended by tool {tool}")

    @classmethod
    def failed(cls, exc: BaseException) -> Stop:
        return cls(StopReason.ERROR, f"{type(exc).__name__}: {exc}")


_NO_USAGE = Usage()  # frozen, so one zero serves every turn
_UNDECIDED = Stop(StopReason.END_TURN, "end_turn")  # what a turn ends with if nothing said


class TurnHost(Protocol):
    """What a turn reads from and writes to its session (a :class:`~tooldeck.loop.Session`)."""

    session_id: str
    model: Model | str
    instructions: str | None
    settings: ModelSettings
    max_steps: int
    continue_on_max_tokens: ContinuePolicy | None
    events: EventBus
    transcript: list[Item]
    usage: Usage
    pending: PendingStep | None
    pending_store: PendingStore | None
    budget: Budget | None


Resuming = tuple[PendingStep, dict[str, ApprovalAnswer]]


class Turn:
    """One turn's state; :meth:`drive` runs it, phase by phase, to its :class:`Stop`."""

    __slots__ = (
        "announce",
        "answer",
        "calls",
        "checkpoint",
        "continued",
        "dispatcher",
        "earlier",
        "failure",
        "guard",
        "host",
        "last",
        "meter",
        "plan",
        "prompt",
        "replan",
        "resuming",
        "settings",
        "signal",
        "start",
        "steps",
        "streaming",
        "traced",
        "usage",
        "waiting",
    )

    def __init__(
        self,
        host: TurnHost,
        *,
        prompt: str,
        start: int,
        signal: AbortSignal,
        resuming: Resuming | None,
        streaming: bool,
        plan: ToolPlan,
        replan: Callable[[], ToolPlan] | None,
        announce: Callable[[ToolPlan], Awaitable[None]] | None,
        guard: ResultGuard,
        dispatcher: Dispatcher,
        meter: Meter | None = None,
        checkpoint: Callable[[Usage], Awaitable[None]] | None = None,
    ) -> None:
        self.host = host
        self.prompt = prompt
        self.start = start  # where the turn's items start in the transcript
        self.signal = signal
        self.resuming = resuming
        self.streaming = streaming
        self.plan = plan
        self.replan = replan  # None: the same tools for every step
        self.announce = announce  # None: no planner to announce the tools of a step
        self.guard = guard
        self.dispatcher = dispatcher
        self.meter = meter  # None: no budget to check
        self.checkpoint = checkpoint  # None: nothing stores the session after each step
        self.calls = calls_made(host.transcript, start) if resuming else 0  # dispatched
        self.usage = _NO_USAGE
        self.earlier = resuming[0].usage if resuming else _NO_USAGE  # before the step waited
        self.steps = resuming[0].steps if resuming else 0
        self.last: AssistantMessage | None = None
        self.settings = host.settings  # a continuation raises the output limit
        self.continued = 0
        self.waiting: PendingStep | None = None
        self.failure: BaseException | None = None
        self.answer: AnswerCheck | None = None
        self.traced: TurnTrace | None = None

    async def drive(self) -> Stop:
        """Run the turn; the one place its stop reason is taken (or its failure raised)."""
        host = self.host
        await host.events.emit(
            TurnStarted(host.session_id, self.prompt, self.plan.executable.names)
        )
        check = AnswerCheck(
            host.settings.output_spec,
            host.settings.output_retries,
            host.settings.output_schema_name,
        )
        self.answer = check if check.output is not None else None  # None: nothing to check
        self.traced = self._open_trace()
        stop = _UNDECIDED
        try:
            stop = await self._loop()
        except BaseException as exc:
            stop = Stop.failed(exc)
            self._failed(exc)
            raise
        finally:
            await self._close(stop)
        return stop

    async def _loop(self) -> Stop:
        """The phases, in order, until one of them says stop."""
        if self.resuming is not None:  # first finish the step that waited for approval
            step, answers = self.resuming
            self.resuming = None
            self.last = step.message
            message = step.message
            stop = await self._run_calls(message, message.tool_calls, step.outputs, answers)
            if stop is not None:
                return stop
        while True:
            stop = self._limits()
            if stop is not None:
                return stop
            message = await self._model_step()
            calls = message.tool_calls  # made afresh on each look: taken once
            outcome = self._review(message, calls)
            if outcome is CUT_SHORT:
                outcome = await self._cut_short(message)
            if outcome is RUN_CALLS:
                stop = await self._run_calls(message, calls)
                if stop is not None:
                    return stop
            elif isinstance(outcome, Stop):
                return outcome
            # else ASK: the model is asked again

    # -- phases ---------------------------------------------------------------------------
    def _limits(self) -> Stop | None:
        """Before a model step: the turn was aborted, or has used its steps."""
        if self.signal.aborted:
            return Stop.aborted(self.signal)
        if self.steps >= self.host.max_steps:
            return Stop.max_steps(self.host.max_steps)
        if self.meter is not None:
            why = self.meter.before_request(self.earlier, self.usage)
            if why is not None:
                return Stop.budget(why)
        return None

    async def _model_step(self) -> AssistantMessage:
        """One model step: the tools (re-planned, announced), the request, the response."""
        host = self.host
        self.steps += 1
        steps = self.steps
        if self.replan is not None and steps > 1:
            self.plan = self.guard.offer_recall(self.replan())
            self.dispatcher.toolset = self.plan.executable
        plan = self.plan
        if self.announce is not None:
            await self.announce(plan)
        await host.events.emit(ModelStepStarted(host.session_id, steps))
        request = ModelRequest(
            list(host.transcript),
            plan.shown,
            self.settings,
            host.instructions,
            deferred=plan.deferred,
            hosted=plan.hosted,
        )
        traced = self.traced
        if traced is None:
            message = self.last = await self._ask(request)
        else:
            with traced.chat(request, steps) as chat:
                message = self.last = await self._ask(request)
                chat.finished(message)
        self.usage += message.usage
        if self.meter is not None:
            self.meter.responded(message)
        if self.checkpoint is not None:
            await self.checkpoint(self.usage)
        await host.events.emit(ModelStepFinished(host.session_id, steps, message))
        return message

    def _review(self, message: AssistantMessage, calls: list[ToolCall]) -> Stop | Next:
        """What the response means for the turn: again, its calls, or the end."""
        if self.answer is not None:  # a structured answer was asked for
            checked = self._check_answer(self.answer, message)
            if checked is not None:
                return checked
        if message.stop_reason in _NOT_RUN:
            return CUT_SHORT
        if message.stop_reason is StopReason.PAUSE_TURN and not calls:
            return ASK  # a provider paused a long server-side turn: send it back
        if not calls:
            return Stop.answered(message)
        return RUN_CALLS

    def _check_answer(self, answer: AnswerCheck, message: AssistantMessage) -> Stop | Next | None:
        """Structured-output retries: an invalid answer is sent back, a bounded number of
        times (:class:`~tooldeck.structured.AnswerCheck`); ``None``: nothing to say."""
        verdict = answer.review(message)
        if isinstance(verdict, UserMessage):
            self.host.transcript.append(verdict)
            return ASK
        if verdict is not None:
            return Stop.invalid_answer(verdict)
        return None

    async def _cut_short(self, message: AssistantMessage) -> Stop | Next:
        """A refused, cut-off, filtered or failed response: its calls get "not executed"
        outputs; a cut-off one may be continued with a larger output limit."""
        await self._not_run(message, _NOT_RUN[message.stop_reason])
        more = await self._continue(message)
        if isinstance(more, ModelSettings):
            self.settings, self.continued = more, self.continued + 1
            return ASK
        return Stop.cut_short(message, more)

    async def _run_calls(
        self,
        message: AssistantMessage,
        calls: list[ToolCall],
        prior: Sequence[ToolOutput] = (),
        answers: dict[str, ApprovalAnswer] | None = None,
    ) -> Stop | None:
        """The step's calls, dispatched; their outputs in the transcript (on failure too)."""
        if answers is None:  # a new step's calls (a resumed step's were counted before)
            if self.meter is not None:
                why = self.meter.before_calls(self.earlier, self.usage, len(calls))
                if why is not None:
                    await self._not_run(message, why)
                    return Stop.budget(why)
                self.meter.dispatched(len(calls))
            self.calls += len(calls)
        partial: list[ToolOutput] = []
        try:
            result = await self.dispatcher.dispatch(
                calls, self.signal, prior=prior, answers=answers, partial=partial
            )
        except PendingApproval as held:
            return self._hold(message, held)
        except BaseException:
            self.host.transcript.extend(partial)  # one output per call, then it goes on
            raise
        self.host.transcript.extend(result.outputs)
        if self.checkpoint is not None:
            await self.checkpoint(self.usage)
        if result.terminated_by is not None:
            return Stop.ended_by(result.terminated_by)
        return None

    # -- helpers of the phases ------------------------------------------------------------
    def _hold(self, message: AssistantMessage, held: PendingApproval) -> Stop:
        """Pending approvals: the step waits, on the session and in its store."""
        host = self.host
        waiting = self.waiting = PendingStep(
            message,
            held.outputs,
            tuple(PendingCall.of(r) for r in held.requests),
            self.start,
            self.steps,
            self.earlier + self.usage,
        )
        host.pending = waiting
        if host.pending_store is not None:
            host.pending_store.save(host.session_id, host.transcript, waiting)
        return Stop.waiting(waiting)

    async def _ask(self, request: ModelRequest) -> AssistantMessage:
        """One model step; its message is in the transcript once the response is complete.

        Streamed, the message is recorded as soon as the provider's stream has ended, before
        the step's ``ToolCallDone`` events, so a consumer that leaves then still finds it
        (with a "not executed" output for each call).
        """
        host = self.host
        model = host.model
        assert not isinstance(model, str)  # made into a model by the session
        if self.streaming:
            return await stream_step(
                model,
                request,
                host.events,
                host.session_id,
                self.steps,
                record=host.transcript.append,
            )
        message = await model.respond(request)
        host.transcript.append(message)
        return message

    async def _continue(self, message: AssistantMessage) -> ModelSettings | str:
        """After a step that was cut off: the settings to go on with, or why the turn ends.

        Only with a ``continue_on_max_tokens`` policy (else ``""``); the cut-off calls
        already have their "not executed" outputs. A tooldeck note in the transcript tells
        the model what happened, a :class:`TurnContinued` event tells listeners.
        """
        host = self.host
        policy = host.continue_on_max_tokens
        if policy is None or message.stop_reason is not StopReason.MAX_TOKENS:
            return ""
        decided = policy.decide(message, self.settings, self.continued)
        if isinstance(decided, str):
            return decided
        host.transcript.append(UserMessage(decided.note(message)))
        _log.info(
            "session %s: step %d was cut off at %d output tokens; continuing with %d",
            host.session_id,
            self.steps,
            decided.previous_limit,
            decided.output_limit,
        )
        await host.events.emit(
            TurnContinued(
                host.session_id,
                self.steps,
                decided.number,
                decided.previous_limit,
                decided.output_limit,
                tuple(c.call_id for c in message.tool_calls),
            )
        )
        return dataclasses.replace(self.settings, max_output_tokens=decided.output_limit)

    async def _not_run(self, message: AssistantMessage, why: str) -> None:
        for call in message.tool_calls:
            output = _not_executed(call, why)
            self.host.transcript.append(output)
            await self.host.events.emit(OutputRecorded(self.host.session_id, output))

    # -- telemetry, failure, close --------------------------------------------------------
    def _open_trace(self) -> TurnTrace | None:
        """The turn's span, or ``None`` when telemetry is off (then nothing is traced)."""
        tel = telemetry_active()
        if tel is None:
            return None
        host = self.host
        return TurnTrace(
            tel,
            session_id=host.session_id,
            model=host.model,
            prompt=self.prompt,
            instructions=host.instructions,
            streamed=self.streaming,
        )

    def _failed(self, exc: BaseException) -> None:
        """Failure bookkeeping: open calls get outputs, the failure is logged and traced."""
        self.failure = exc
        self._close_open_calls(exc)
        if isinstance(exc, asyncio.CancelledError):
            _log.info("turn cancelled in session %s", self.host.session_id)
        else:
            _log.exception("turn failed in session %s", self.host.session_id)

    def _close_open_calls(self, exc: BaseException) -> None:
        """Give every call of this turn that has no output one, so the transcript stays valid.

        Runs when the turn ends by an exception (including its cancellation): calls that
        ran already have their outputs (the dispatcher hands them over); any other call
        gets a "not executed" output, so every provider accepts the next request.
        """
        if self.host.pending is not None:
            return  # a waiting step keeps its calls open until it is resumed
        why = (
            "the turn was cancelled"
            if isinstance(exc, asyncio.CancelledError)
            else f"the turn failed ({type(exc).__name__})"
        )
        items = self.host.transcript
        last = next(
            (
                i
                for i in range(len(items) - 1, self.start - 1, -1)
                if isinstance(items[i], AssistantMessage)
            ),
            None,
        )
        if last is None:
            return
        message = items[last]
        assert isinstance(message, AssistantMessage)
        answered = {i.call_id for i in items[last + 1 :] if isinstance(i, ToolOutput)}
        items.extend(_not_executed(c, why) for c in message.tool_calls if c.call_id not in answered)

    async def _close(self, stop: Stop) -> None:
        """The turn has ended (or raised): its span, the session's usage, TurnFinished."""
        host = self.host
        if self.traced is not None:
            self.traced.end(
                stop.stop_reason, stop.reason, self.steps, self.usage, self.last, self.failure
            )
        host.usage += self.usage
        await host.events.emit(
            TurnFinished(host.session_id, stop.stop_reason, stop.reason, self.steps, self.usage)
        )
        host.events.close_streams()


def _not_executed(call: ToolCall, why: str) -> ToolOutput:
    return ToolOutput(call.call_id, call.name, ToolResult.error(f"Not executed: {why}."))
