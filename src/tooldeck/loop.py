"""The agent loop: call the model, dispatch its calls, append outputs, repeat.

The loop stops when the model returns no tool calls, a tool ends the turn, ``max_steps``
is reached, the abort signal fires, or the stop reason says stop. A refusal ends the
turn before any tool runs; calls from a truncated response are never executed. Calls
that are not run still get exactly one output each, so the transcript stays valid for
the next request. A requested structured answer that does not validate is sent back to
the model with the validation message, a bounded number of times
(:class:`~tooldeck.structured.AnswerCheck`), before the turn ends with ``error``.

A step whose approver cannot answer now (it raises
:class:`~tooldeck.dispatch.PendingApproval`) ends the turn *waiting*: nothing of that
step has run, the result's ``pending`` holds the step (and a :class:`PendingStore`, if
the session has one, keeps it on disk), and :meth:`Session.resume` finishes it with the
human's answers, never producing an output twice, then carries on with the loop.

:meth:`Session.stream` runs the same turn through the same driver, its model steps
streamed (:mod:`tooldeck.streaming`); ``continue_on_max_tokens`` goes on after a cut-off
response with a larger output limit (:mod:`tooldeck.continuation`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, TypeVar

from ._sync import run_sync as _run_sync
from .approvals import ApprovalCallback, PendingCall, PendingStep, PendingStore
from .assembly import Toolset, TurnContext
from .context import AbortSignal
from .continuation import ContinuePolicy
from .dispatch import (
    ApprovalAnswer,
    Approver,
    Dispatcher,
    PendingApproval,
    PolicyHook,
    ResultHook,
)
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
from .notices import NoticeSource, notice_messages
from .plan import ToolPlan, ToolPlanned, ToolPlanner
from .policy.ask import ApproveRule, protection
from .providers import model_from_string
from .result import ToolResult
from .result_guard import session_guard
from .sources import ToolItem, tool_source
from .streaming import LiveTurn, TurnStream, stream_step
from .structured import AnswerCheck, OutputType
from .telemetry.settings import active as telemetry_active
from .telemetry.turns import TurnTrace
from .tool import Tool
from .transcript import AssistantMessage, Item, StopReason, ToolOutput, Usage, UserMessage

__all__ = [
    "MAX_STEPS",
    "TIMEOUT",
    "PendingCall",
    "PendingStep",
    "PendingStore",
    "RunResult",
    "Session",
    "ToolsetSource",
    "TurnStream",
    "new_session_id",
]

_log = logging.getLogger("tooldeck.loop")

T = TypeVar("T")

MAX_STEPS = 20  # model steps in a turn, by default
TIMEOUT = 300.0  # seconds one tool call may run, by default


def new_session_id() -> str:
    """A new random session id (16 hex digits)."""
    return uuid.uuid4().hex[:16]


_NOT_RUN = {
    StopReason.REFUSAL: "the model refused",
    StopReason.MAX_TOKENS: "the response was cut off at its token limit, so its arguments "
    "may be incomplete",
    StopReason.CONTENT_FILTER: "the response was stopped by a content filter",
    StopReason.ERROR: "the provider reported an error",
}


@dataclass(slots=True)
class RunResult:
    """The outcome of one turn (``pending`` is set when it waits for approval).

    ``output`` is the final answer's text; ``structured`` the validated instance of the
    requested output type (``ModelSettings.output_type``), or ``None``.
    """

    output: str
    stop_reason: StopReason
    reason: str
    items: list[Item]
    usage: Usage
    steps: int
    structured: Any = None
    last_message: AssistantMessage | None = None
    pending: PendingStep | None = None

    @property
    def tool_outputs(self) -> list[ToolOutput]:
        return [i for i in self.items if isinstance(i, ToolOutput)]

    @property
    def waiting(self) -> bool:
        """True when the turn stopped to wait for approval (see :meth:`Session.resume`)."""
        return self.pending is not None

    def output_as(self, output_type: type[T]) -> T:
        """The final answer's text (JSON) as an instance of ``output_type``.

        Any Pydantic model class, dataclass or TypedDict; ``ValueError`` says what does not
        match. Needs no ``output_type`` setting, which is what adds retries.
        """
        value: T = OutputType.of(output_type).parse(self.output)
        return value


ToolsetSource = (
    Toolset | ToolPlanner | Callable[[TurnContext], Toolset | ToolPlan] | Sequence[ToolItem]
)


@dataclass
class Session:
    """A conversation: keeps the transcript across turns and runs each turn through the loop.

    ``Session(model, tools, approve="WRITE", ...)``: everything after ``model`` and
    ``tools`` is given by name (a misspelt name is a mypy error and a ``TypeError``).
    ``tools`` is a :class:`Toolset`, a :class:`~tooldeck.plan.ToolPlanner`, a function
    ``(TurnContext) -> Toolset`` that assembles the tools afresh before every model step
    (so a tool found by search, or the recall tool after a first offload, is callable
    from the next step), or a flat list mixing tools, Toolsets, MCP sources, skill
    catalogs, registries and creators (:mod:`tooldeck.sources`: list order, a name made
    twice is an error naming both). Without ``turn=`` the session makes each turn's
    :class:`TurnContext` itself: its session id and signal, and *no* home (file tools
    refuse, large results are guarded, never written), no web, no jobs.
    ``approve`` asks before some calls run (``"WRITE"``: WRITE and DANGEROUS tools; a
    tuple of tiers or tool names; a function of the request), answered by ``approver``
    (an async batch :data:`~tooldeck.dispatch.Approver`, or a plain function of one
    request returning ``True`` / ``False`` / an ``ApprovalAnswer``), else at the
    console. With ``policy`` too, the stricter verdict wins (:mod:`tooldeck.policy.ask`).
    ``result_hooks`` transform each executed call's result before it is recorded. When
    none of them is an offload store's ``hook``, the default size guard is added (offload
    under the turn's home, else guard only; see :mod:`tooldeck.result_guard`);
    ``guard=False`` turns that default off.
    ``pending_store`` keeps a step that waits for approval, so that another process can
    :meth:`resume` it. ``continue_on_max_tokens`` (a
    :class:`~tooldeck.continuation.ContinuePolicy`, off by default) goes on with a larger
    output limit after a response is cut off at its limit.

    ``async with Session(...)`` / :meth:`aclose` close only what the session was told
    to own: the model when ``owns_model=True`` (default ``False``: a model passed in
    belongs to the caller, who may share it between sessions). ``model`` may be a
    ``kind:model`` string (``"openai:gpt-5.4"``, :func:`~tooldeck.providers.model_from_string`);
    the session then owns the model it made. :meth:`run_sync` runs a
    turn from synchronous code.
    """

    model: Model | str  # a str is a model_from_string spec ("openai:gpt-5.4"): owned
    tools: ToolsetSource = ()
    _: KW_ONLY  # the rest by name only: Session(model, tools, approve="WRITE")
    session_id: str = field(default_factory=new_session_id)
    instructions: str | None = None
    settings: ModelSettings = field(default_factory=ModelSettings)
    max_steps: int = MAX_STEPS
    policy: PolicyHook | None = None
    approver: Approver | ApprovalCallback | None = None
    approve: ApproveRule | None = None  # ask before these run: "WRITE", ("WRITE", "x"), fn
    timeout: float | None = TIMEOUT
    result_hooks: Sequence[ResultHook] = ()
    events: EventBus = field(default_factory=EventBus)
    turn: TurnContext | None = None
    transcript: list[Item] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    pending_store: PendingStore | None = None
    pending: PendingStep | None = None
    guard: bool = True  # add the default size guard when no result hook is an offload store
    continue_on_max_tokens: ContinuePolicy | None = None
    owns_model: bool = False  # aclose() / async with also close the model
    _live: LiveTurn[RunResult] | None = field(default=None, init=False, repr=False, compare=False)
    notices: NoticeSource | None = None  # e.g. ended background jobs, seen once before a prompt
    _source: tuple[Any, Any] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.model, str):  # a bad spec or a missing key: one line, now
            self.model = model_from_string(self.model)
            self.owns_model = True  # made here, so closed here
        protection(self.policy, self.approve, self.approver)  # a bad approve=: one line, now
        self._tool_source()  # a bad tools list: one line, now

    def _tool_source(self) -> Toolset | ToolPlanner | Callable[[TurnContext], Any]:
        """``tools`` as a Toolset, a planner or a per-step creator (a list: made once)."""
        source = self.tools
        if isinstance(source, Toolset | ToolPlanner):
            return source
        if callable(source) and not isinstance(source, Tool):
            return source  # a factory (an McpSource is one): it may return a ToolPlan
        items = source if isinstance(source, list | tuple) else [source]  # one item alone
        key = (source, tuple(map(id, items)))
        cached = self._source
        if cached is None or cached[0][0] is not source or cached[0][1] != key[1]:
            self._source = cached = (key, tool_source(items))
        made: Toolset | Callable[[TurnContext], Toolset] = cached[1]
        return made

    def _plan(self, turn: TurnContext | None) -> ToolPlan:
        source = self._tool_source()
        if isinstance(source, Toolset):
            return ToolPlan.eager(source)
        if isinstance(source, ToolPlanner):
            return source(turn)
        if callable(source):
            if turn is None:
                raise ValueError("a toolset factory needs a TurnContext: pass turn=")
            made = source(turn)
            if isinstance(made, ToolPlan):
                return made
            return ToolPlan.eager(made if isinstance(made, Toolset) else Toolset(made))
        raise TypeError(f"tools={source!r} is not a tool source")  # pragma: no cover

    async def _announce(self, plan: ToolPlan) -> None:
        if not isinstance(self.tools, ToolPlanner):
            return
        now, whole = plan.tokens()
        loaded = tuple(n for n in plan.executable.names if n in self.tools.loaded)
        await self.events.emit(
            ToolPlanned(
                self.session_id,
                plan.search,
                tuple(e.name for e in plan.entries if not e.deferred),
                tuple(e.name for e in plan.entries if e.deferred),
                loaded,
                plan.denied,
                now,
                whole,
            )
        )

    async def run(
        self, prompt: str, *, signal: AbortSignal | None = None, turn: TurnContext | None = None
    ) -> RunResult:
        """Run one turn for ``prompt`` and append everything to the transcript."""
        start = await self._begin(prompt)
        return await self._drive(prompt, start, signal, turn, None)

    def stream(
        self, prompt: str, *, signal: AbortSignal | None = None, turn: TurnContext | None = None
    ) -> TurnStream[RunResult]:
        """Run one turn for ``prompt`` as a stream of its events (see ``docs/loop.md``).

        ``async for event in session.stream(prompt): ...``; the turn is the one
        :meth:`run` runs (same dispatcher, outputs and transcript), its model steps
        streamed. Leaving the iteration early cancels the turn; ``stream.result`` is the
        :class:`RunResult` once the iteration has ended.
        """

        async def drive(live: LiveTurn[RunResult]) -> RunResult:
            start = await self._begin(prompt, live)
            return await self._drive(prompt, start, signal, turn, None, streaming=True)

        return TurnStream(drive, self.events)

    async def _begin(self, prompt: str, live: LiveTurn[RunResult] | None = None) -> int:
        """Check that a turn may start, append its user message; where the turn starts."""
        await self._settle_stream()
        self._live = live
        if self.pending is not None or (
            self.pending_store is not None and self.pending_store.load(self.session_id)
        ):
            raise RuntimeError(
                f"session {self.session_id} is waiting for approval: call resume(answers)"
            )
        self.transcript += await notice_messages(self.notices, self.session_id)
        start = len(self.transcript)
        self.transcript.append(UserMessage(prompt))
        return start

    async def _settle_stream(self) -> None:
        """A streamed turn its consumer left must have ended before another turn starts."""
        live = self._live
        if live is None or not live.running:
            return
        if not live.abandoned:
            raise RuntimeError(
                f"session {self.session_id}: a streamed turn is still running; iterate it "
                "to its end or `await stream.aclose()` before starting another turn"
            )
        await live.stopped()

    async def resume(
        self,
        answers: Mapping[str, ApprovalAnswer] | Sequence[ApprovalAnswer],
        *,
        signal: AbortSignal | None = None,
        turn: TurnContext | None = None,
    ) -> RunResult:
        """Finish the step that waits for approval with ``answers``, then go on with the turn.

        ``answers`` maps each waiting call id to its answer (or lists them in the order of
        ``pending.calls``); every waiting call needs one. Calls that already have an
        output are never run again; the others are checked by the policy again. A step
        kept by the ``pending_store`` is loaded from it (a fresh process can resume) and
        claimed, so it is finished at most once.
        """
        await self._settle_stream()
        step = self.pending
        restored: list[Item] | None = None
        if step is None and self.pending_store is not None:
            loaded = self.pending_store.load(self.session_id)
            if loaded is not None:
                restored, step = loaded
        if step is None:
            raise RuntimeError(f"session {self.session_id} has no step waiting for approval")
        by_id = _answers_by_id(step, answers)
        if self.pending_store is not None and not self.pending_store.claim(self.session_id):
            raise RuntimeError(
                f"session {self.session_id}: the waiting step was already resumed elsewhere"
            )
        if restored is not None:
            self.transcript = restored
        self.pending = None
        first = self.transcript[step.start]
        prompt = first.text if isinstance(first, UserMessage) else ""
        return await self._drive(prompt, step.start, signal, turn, (step, by_id))

    async def _drive(
        self,
        prompt: str,
        start: int,
        signal: AbortSignal | None,
        turn: TurnContext | None,
        resuming: tuple[PendingStep, dict[str, ApprovalAnswer]] | None,
        *,
        streaming: bool = False,
    ) -> RunResult:
        turn = turn or self.turn or TurnContext(self.session_id, signal=signal or AbortSignal())
        signal = signal or turn.signal
        guard = session_guard(
            self.result_hooks,
            enabled=self.guard,
            session_id=self.session_id,
            home=turn.home,
            events=self.events,
        )
        plan = guard.offer_recall(self._plan(turn))
        source = self._tool_source()
        per_step = not isinstance(source, Toolset) or guard.adds_tools
        policy, approver = protection(self.policy, self.approve, self.approver)
        dispatcher = Dispatcher(
            plan.executable,
            session_id=self.session_id,
            turn=turn,
            policy=policy,
            approver=approver,
            timeout=self.timeout,
            events=self.events,
            result_hooks=guard.hooks,
        )
        await self.events.emit(TurnStarted(self.session_id, prompt, plan.executable.names))
        usage = Usage()
        answer = AnswerCheck(
            self.settings.output_spec,
            self.settings.output_retries,
            self.settings.output_schema_name,
        )
        earlier = resuming[0].usage if resuming else Usage()
        last: AssistantMessage | None = None
        steps = resuming[0].steps if resuming else 0
        stop, reason = StopReason.END_TURN, "end_turn"
        waiting: PendingStep | None = None
        settings, continued = self.settings, 0  # a continuation raises the output limit
        failure: BaseException | None = None
        tel = telemetry_active()  # None when off: then no span, no attribute, nothing
        traced = (
            TurnTrace(
                tel,
                session_id=self.session_id,
                model=self.model,
                prompt=prompt,
                instructions=self.instructions,
                streamed=streaming,
            )
            if tel is not None
            else None
        )
        try:
            while True:
                prior: Sequence[ToolOutput] = ()
                answers: dict[str, ApprovalAnswer] | None = None
                if resuming is not None:
                    last, prior, answers = resuming[0].message, resuming[0].outputs, resuming[1]
                    calls = last.tool_calls
                    resuming = None
                else:
                    if signal.aborted:
                        stop, reason = StopReason.ERROR, f"aborted: {signal.reason}"
                        break
                    if steps >= self.max_steps:
                        stop = StopReason.TOOL_CALLS
                        reason = f"max_steps ({self.max_steps}) reached"
                        break
                    steps += 1
                    if per_step and steps > 1:
                        plan = guard.offer_recall(self._plan(turn))
                        dispatcher.toolset = plan.executable
                    await self._announce(plan)
                    await self.events.emit(ModelStepStarted(self.session_id, steps))
                    request = ModelRequest(
                        list(self.transcript),
                        plan.shown,
                        settings,
                        self.instructions,
                        deferred=plan.deferred,
                        hosted=plan.hosted,
                    )
                    if traced is None:
                        last = await self._ask(request, steps, streaming)
                    else:
                        with traced.chat(request, steps) as chat:
                            last = await self._ask(request, steps, streaming)
                            chat.finished(last)
                    usage += last.usage
                    await self.events.emit(ModelStepFinished(self.session_id, steps, last))
                    verdict = answer.review(last)  # a structured answer: validated, or again
                    if isinstance(verdict, UserMessage):
                        self.transcript.append(verdict)
                        continue
                    if verdict is not None:
                        stop, reason = StopReason.ERROR, verdict
                        break
                    calls = last.tool_calls
                    if last.stop_reason in _NOT_RUN:
                        stop = last.stop_reason
                        reason = last.refusal or stop.value
                        if calls:
                            reason += f"; {len(calls)} call(s) not executed"
                        await self._not_run(last, _NOT_RUN[stop])
                        more = await self._continue(last, settings, continued, steps)
                        if isinstance(more, ModelSettings):
                            settings, continued = more, continued + 1
                            continue
                        if more:
                            reason += f"; not continued: {more}"
                        break
                    if last.stop_reason is StopReason.PAUSE_TURN and not calls:
                        continue  # a provider paused a long server-side turn: send it back
                    if not calls:
                        stop, reason = last.stop_reason, last.stop_reason.value
                        break
                partial: list[ToolOutput] = []
                try:
                    result = await dispatcher.dispatch(
                        calls, signal, prior=prior, answers=answers, partial=partial
                    )
                except PendingApproval as held:
                    waiting = PendingStep(
                        last,
                        held.outputs,
                        tuple(PendingCall.of(r) for r in held.requests),
                        start,
                        steps,
                        earlier + usage,
                    )
                    self.pending = waiting
                    if self.pending_store is not None:
                        self.pending_store.save(self.session_id, self.transcript, waiting)
                    stop = StopReason.TOOL_CALLS
                    reason = f"waiting for approval of {len(waiting.calls)} call(s)"
                    break
                except BaseException:
                    self.transcript.extend(partial)  # one output per call, then it goes on
                    raise
                self.transcript.extend(result.outputs)
                if result.terminated_by is not None:
                    stop, reason = StopReason.TOOL_CALLS, f"ended by tool {result.terminated_by}"
                    break
        except BaseException as exc:
            stop, reason, failure = StopReason.ERROR, f"{type(exc).__name__}: {exc}", exc
            self._close_open_calls(start, exc)
            if isinstance(exc, asyncio.CancelledError):
                _log.info("turn cancelled in session %s", self.session_id)
            else:
                _log.exception("turn failed in session %s", self.session_id)
            raise
        finally:
            if traced is not None:
                traced.end(stop, reason, steps, usage, last, failure)
            self.usage += usage
            await self.events.emit(TurnFinished(self.session_id, stop, reason, steps, usage))
            self.events.close_streams()
        return RunResult(
            output=last.text if last else "",
            stop_reason=stop,
            reason=reason,
            items=self.transcript[start:],
            usage=earlier + usage,
            steps=steps,
            structured=answer.value,
            last_message=last,
            pending=waiting,
        )

    def _close_open_calls(self, start: int, exc: BaseException) -> None:
        """Give every call of this turn that has no output one, so the transcript stays valid.

        Runs when the turn ends by an exception (including its cancellation): calls that
        ran already have their outputs (the dispatcher hands them over); any other call
        gets a "not executed" output, so every provider accepts the next request.
        """
        if self.pending is not None:
            return  # a waiting step keeps its calls open until it is resumed
        why = (
            "the turn was cancelled"
            if isinstance(exc, asyncio.CancelledError)
            else f"the turn failed ({type(exc).__name__})"
        )
        items = self.transcript
        last = next(
            (
                i
                for i in range(len(items) - 1, start - 1, -1)
                if isinstance(items[i], AssistantMessage)
            ),
            None,
        )
        if last is None:
            return
        message = items[last]
        assert isinstance(message, AssistantMessage)
        answered = {i.call_id for i in items[last + 1 :] if isinstance(i, ToolOutput)}
        items.extend(
            ToolOutput(c.call_id, c.name, ToolResult.error(f"Not executed: {why}."))
            for c in message.tool_calls
            if c.call_id not in answered
        )

    async def _ask(self, request: ModelRequest, step: int, streaming: bool) -> AssistantMessage:
        """One model step; its message is in the transcript once the response is complete.

        Streamed, the message is recorded as soon as the provider's stream has ended, before
        the step's ``ToolCallDone`` events, so a consumer that leaves then still finds it
        (with a "not executed" output for each call).
        """
        model = self.model
        assert not isinstance(model, str)  # made into a model in __post_init__
        if streaming:
            return await stream_step(
                model,
                request,
                self.events,
                self.session_id,
                step,
                record=self.transcript.append,
            )
        message = await model.respond(request)
        self.transcript.append(message)
        return message

    async def _continue(
        self, message: AssistantMessage, settings: ModelSettings, used: int, step: int
    ) -> ModelSettings | str:
        """After a step that was cut off: the settings to go on with, or why the turn ends.

        Only with a ``continue_on_max_tokens`` policy (else ``""``); the cut-off calls
        already have their "not executed" outputs. A tooldeck note in the transcript tells
        the model what happened, a :class:`TurnContinued` event tells listeners.
        """
        policy = self.continue_on_max_tokens
        if policy is None or message.stop_reason is not StopReason.MAX_TOKENS:
            return ""
        decided = policy.decide(message, settings, used)
        if isinstance(decided, str):
            return decided
        self.transcript.append(UserMessage(decided.note(message)))
        _log.info(
            "session %s: step %d was cut off at %d output tokens; continuing with %d",
            self.session_id,
            step,
            decided.previous_limit,
            decided.output_limit,
        )
        await self.events.emit(
            TurnContinued(
                self.session_id,
                step,
                decided.number,
                decided.previous_limit,
                decided.output_limit,
                tuple(c.call_id for c in message.tool_calls),
            )
        )
        return dataclasses.replace(settings, max_output_tokens=decided.output_limit)

    async def _not_run(self, message: AssistantMessage, why: str) -> None:
        for call in message.tool_calls:
            output = ToolOutput(call.call_id, call.name, ToolResult.error(f"Not executed: {why}."))
            self.transcript.append(output)
            await self.events.emit(OutputRecorded(self.session_id, output))

    async def aclose(self) -> None:
        """Close what this session owns: the model, when ``owns_model`` is set."""
        close = getattr(self.model, "aclose", None) if self.owns_model else None
        if close is not None:
            await close()

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def run_sync(
        self, prompt: str, *, signal: AbortSignal | None = None, turn: TurnContext | None = None
    ) -> RunResult:
        """:meth:`run` from synchronous code; refuses inside a running event loop.

        Every call of a thread runs on that thread's one event loop, so the model keeps
        its connections between calls (see :mod:`tooldeck._sync`).
        """
        return _run_sync(
            self.run(prompt, signal=signal, turn=turn), instead="await session.run(...)"
        )


def _answers_by_id(
    step: PendingStep, answers: Mapping[str, ApprovalAnswer] | Sequence[ApprovalAnswer]
) -> dict[str, ApprovalAnswer]:
    waiting = [c.call_id for c in step.calls]
    if len(set(waiting)) != len(waiting):
        raise ValueError(
            "calls of the waiting step share an id, so an answer cannot name exactly one "
            "call; the step cannot be resumed"
        )
    if isinstance(answers, Mapping):
        by_id = dict(answers)
    else:
        given = list(answers)
        if len(given) != len(waiting):
            raise ValueError(f"{len(waiting)} call(s) wait for an answer, {len(given)} given")
        by_id = dict(zip(waiting, given, strict=True))
    missing = [c for c in waiting if c not in by_id]
    unknown = [c for c in by_id if c not in waiting]
    if missing or unknown:
        raise ValueError(
            "answers must cover exactly the waiting calls"
            + (f"; missing: {', '.join(missing)}" if missing else "")
            + (f"; not waiting: {', '.join(unknown)}" if unknown else "")
        )
    return by_id
