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
streamed (:mod:`tooldeck._streaming`); ``continue_on_max_tokens`` goes on after a cut-off
response with a larger output limit (:mod:`tooldeck._continuation`).

The session makes a turn's context, tools, guard and dispatcher; :mod:`tooldeck._turn`
runs the turn itself, phase by phase, and says why it stopped.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from decimal import Decimal
from typing import Any, Generic, TypeVar

from ._call import ResultHook
from ._continuation import ContinuePolicy
from ._notices import NoticeSource, notice_messages
from ._streaming import LiveTurn, TurnStream
from ._sync import block_on
from ._turn import Stop, Turn
from .approvals import ApprovalAnswer, PendingStep, PendingStore
from .assembly import TurnContext
from .budget import Budget, Meter
from .context import AbortSignal, DepsT
from .dispatch import Dispatcher
from .events import EventBus
from .model import Model, ModelSettings
from .offload.defaults import session_guard
from .plan import ToolPlan, ToolPlanned, ToolPlanner
from .policy.protection import Protection
from .providers import model_from_string
from .session_state import Keeper, SessionStorage, give_back, grants_of, kept_grants
from .sources.listed import ToolList, Tools
from .structured import OutputType
from .transcript import AssistantMessage, Item, StopReason, ToolOutput, Usage, UserMessage

T = TypeVar("T")

__all__ = [
    "MAX_STEPS",
    "TIMEOUT",
    "new_session_id",
]

MAX_STEPS = 20  # model steps in a turn, by default
TIMEOUT = 300.0  # seconds one tool call may run, by default


def new_session_id() -> str:
    """A new random session id (16 hex digits)."""
    return uuid.uuid4().hex[:16]


@dataclass(slots=True)
class RunResult:
    """The outcome of one turn (``pending`` is set when it waits for approval).

    ``output`` is the final answer's text; ``structured`` the validated instance of the
    requested output type (``ModelSettings.output_type``), or ``None``. ``usage`` is what
    the turn used, ``tool_calls`` how many calls it dispatched, ``cost`` its price in
    dollars when a budget has a cost limit (else ``None``; see :mod:`tooldeck.budget`).
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
    tool_calls: int = 0
    cost: Decimal | None = None

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


@dataclass
class Session(Generic[DepsT]):
    """A conversation: keeps the transcript across turns and runs each turn through the loop.

    ``Session(model, tools, protect=Protection.ask("WRITE"), ...)``: everything after ``model`` and
    ``tools`` is given by name (a misspelt name is a mypy error and a ``TypeError``).
    ``tools`` is a tool, a tool source (:class:`~tooldeck.assembly.ToolSource`: a
    :class:`~tooldeck.assembly.Toolset`, an MCP source, a skill catalog, a registry, a
    function made one with :func:`tooldeck.sources.source`, any of them ``.filtered``,
    ``.prefixed``, ``.renamed`` or ``.with_approval``), or a flat list of those
    (:mod:`tooldeck.sources`: list order, a name made twice is an error naming both).
    Sources are asked again before every model step (so a tool found by search, or the
    recall tool after a first offload, is callable from the next step); a
    :class:`~tooldeck.plan.ToolPlanner` plans them. Without ``turn=`` the session makes
    each turn's
    :class:`TurnContext` itself: its session id and signal, and *no* home (file tools
    refuse, large results are guarded, never written), no web, no jobs.
    ``protect`` (a :class:`~tooldeck.policy.protection.Protection`) judges every call and says who
    answers its asks: ``Protection.ask("WRITE")`` asks at the console before WRITE and
    DANGEROUS tools, ``Protection.policy(session_policy, approver=...)`` runs a policy
    file's rules, ``a & b`` both (the stricter wins); none: every call runs.
    ``result_hooks`` transform each executed call's result before it is recorded. When
    none of them is an offload store's ``hook``, the default size guard is added (offload
    under the turn's home, else guard only; see :mod:`tooldeck.offload.defaults`);
    ``guard=False`` turns that default off.
    ``pending_store`` keeps a step that waits for approval, so that another process can
    :meth:`resume` it. ``continue_on_max_tokens`` (a
    :class:`~tooldeck._continuation.ContinuePolicy`, off by default) goes on with a larger
    output limit after a response is cut off at its limit. ``deps`` (anything: a database
    handle, a client, settings) reaches every tool as ``ctx.deps``, typed when the tool
    declares ``ctx: ToolContext[Deps]``; a sub-agent's tools get the same, a background
    job none (see docs/loop.md, "Typed dependencies"). ``budget`` (a
    :class:`~tooldeck.budget.Budget`) limits the requests, tokens, tool calls and cost of
    the whole session; :meth:`run` takes one for a single run. A turn that reaches a
    limit ends with stop reason ``budget`` and the usage so far. ``store`` (a
    :class:`tooldeck.sessions.SessionStore`) keeps the session by ``session_id``: each turn
    loads it and saves it after every step, one process at a time (docs/sessions.md).

    ``async with Session(...)`` / :meth:`aclose` close only what the session was told
    to own: the model when ``owns_model=True`` (default ``False``: a model passed in
    belongs to the caller, who may share it between sessions). ``model`` may be a
    ``kind:model`` string (``"openai:gpt-5.4"``, :func:`~tooldeck.providers.model_from_string`);
    the session then owns the model it made. :meth:`run_sync` runs a
    turn from synchronous code.
    """

    model: Model | str  # a str is a model_from_string spec ("openai:gpt-5.4"): owned
    tools: Tools = ()
    _: KW_ONLY  # the rest by name only: Session(model, tools, protect=...)
    session_id: str = field(default_factory=new_session_id)
    instructions: str | None = None
    settings: ModelSettings = field(default_factory=ModelSettings)
    max_steps: int = MAX_STEPS
    protect: Protection | None = None  # who judges each call and answers asks; None: none
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
    budget: Budget | None = None  # limits of the whole session (tooldeck.budget)
    deps: DepsT = None  # type: ignore[assignment]  # every tool's ctx.deps (None: none)
    store: SessionStorage | None = None  # keeps the session by id (tooldeck.sessions)
    _keeper: Keeper | None = field(default=None, init=False, repr=False, compare=False)
    _live: LiveTurn[RunResult] | None = field(default=None, init=False, repr=False, compare=False)
    notices: NoticeSource | None = None  # e.g. ended background jobs, seen once before a prompt
    _source: ToolList | ToolPlanner | None = field(
        default=None, init=False, repr=False, compare=False
    )
    _eager: ToolPlan | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.model, str):  # a bad spec or a missing key: one line, now
            self.model = model_from_string(self.model)
            self.owns_model = True  # made here, so closed here
        if self.protect is not None and not isinstance(self.protect, Protection):
            raise TypeError(
                f"protect={self.protect!r} is not a Protection: make one with "
                "Protection.ask(...), Protection.policy(...) or Protection.none()"
            )
        self._tool_source()  # a bad tools list: one line, now

    def _tool_source(self) -> ToolList | ToolPlanner:
        """``tools`` as one source: a planner as it is, anything else a :class:`ToolList`
        (made once; again only when ``tools`` is replaced)."""
        tools, made = self.tools, self._source
        if isinstance(tools, ToolPlanner):
            return tools
        if made is None or isinstance(made, ToolPlanner) or not made.made_from(tools):
            made = self._source = ToolList(tools)
        return made

    def _plan(self, turn: TurnContext) -> ToolPlan:
        source = self._tool_source()
        if isinstance(source, ToolPlanner):
            return source(turn)
        toolset = source.toolset(turn)
        last = self._eager
        if last is not None and last.executable.tools == toolset.tools:
            return last  # the same tools as the step before: the same plan
        self._eager = plan = ToolPlan.eager(toolset)
        return plan

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
        self,
        prompt: str,
        *,
        signal: AbortSignal | None = None,
        turn: TurnContext | None = None,
        budget: Budget | None = None,
    ) -> RunResult:
        """Run one turn for ``prompt`` and append everything to the transcript.

        ``budget`` limits this run (the session's own ``budget`` is checked too).
        """
        start = await self._begin(prompt)
        return await self._kept(self._drive(prompt, start, signal, turn, None, budget=budget))

    def stream(
        self,
        prompt: str,
        *,
        signal: AbortSignal | None = None,
        turn: TurnContext | None = None,
        budget: Budget | None = None,
    ) -> TurnStream[RunResult]:
        """Run one turn for ``prompt`` as a stream of its events (see ``docs/loop.md``).

        ``async for event in session.stream(prompt): ...``; the turn is the one
        :meth:`run` runs (same dispatcher, outputs and transcript), its model steps
        streamed. Leaving the iteration early cancels the turn; ``stream.result`` is the
        :class:`RunResult` once the iteration has ended.
        """

        async def drive(live: LiveTurn[RunResult]) -> RunResult:
            start = await self._begin(prompt, live)
            return await self._kept(
                self._drive(prompt, start, signal, turn, None, streaming=True, budget=budget)
            )

        return TurnStream(drive, self.events)

    async def _begin(self, prompt: str, live: LiveTurn[RunResult] | None = None) -> int:
        """Check that a turn may start, append its user message; where the turn starts."""
        await self._settle_stream()
        self._live = live
        await self._claim()
        if self.pending is not None or (
            self.pending_store is not None and self.pending_store.load(self.session_id)
        ):
            await self._release()
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
        budget: Budget | None = None,
    ) -> RunResult:
        """Finish the step that waits for approval with ``answers``, then go on with the turn.

        ``answers`` maps each waiting call id to its answer (or lists them in the order of
        ``pending.calls``); every waiting call needs one. Calls that already have an
        output are never run again; the others are checked by the policy again. A step
        kept by the ``pending_store`` is loaded from it (a fresh process can resume) and
        claimed, so it is finished at most once.
        """
        await self._settle_stream()
        await self._claim()
        return await self._kept(self._resume(answers, signal, turn, budget))

    async def _resume(
        self,
        answers: Mapping[str, ApprovalAnswer] | Sequence[ApprovalAnswer],
        signal: AbortSignal | None,
        turn: TurnContext | None,
        budget: Budget | None,
    ) -> RunResult:
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
        return await self._drive(prompt, step.start, signal, turn, (step, by_id), budget=budget)

    async def _drive(
        self,
        prompt: str,
        start: int,
        signal: AbortSignal | None,
        turn: TurnContext | None,
        resuming: tuple[PendingStep, dict[str, ApprovalAnswer]] | None,
        *,
        streaming: bool = False,
        budget: Budget | None = None,
    ) -> RunResult:
        """One turn: its context, tools, guard and dispatcher, run by a :class:`Turn`."""
        ctx = self._turn_context(turn, signal)
        guard = session_guard(
            self.result_hooks,
            enabled=self.guard,
            session_id=self.session_id,
            home=ctx.home,
            events=self.events,
        )
        plan = guard.offer_recall(self._plan(ctx))
        source = self._tool_source()
        per_step = isinstance(source, ToolPlanner) or source.fixed is None or guard.adds_tools
        policy, approver = (self.protect or Protection.none()).dispatch()
        dispatcher = Dispatcher(
            plan.executable,
            session_id=self.session_id,
            turn=ctx,
            policy=policy,
            approver=approver,
            timeout=self.timeout,
            events=self.events,
            result_hooks=guard.hooks,
        )
        run = Turn(
            self,
            prompt=prompt,
            start=start,
            signal=signal or ctx.signal,
            resuming=resuming,
            streaming=streaming,
            plan=plan,
            replan=(lambda: self._plan(ctx)) if per_step else None,
            announce=self._announce if isinstance(self.tools, ToolPlanner) else None,
            guard=guard,
            dispatcher=dispatcher,
            meter=self._meter(budget, start),
            checkpoint=self._checkpoint if self._keeper is not None else None,
        )
        return self._result(run, await run.drive())

    def _result(self, run: Turn, stop: Stop) -> RunResult:
        last = run.last
        return RunResult(
            output=last.text if last else "",
            stop_reason=stop.stop_reason,
            reason=stop.reason,
            items=self.transcript[run.start :],
            usage=run.earlier + run.usage,
            steps=run.steps,
            structured=run.answer.value if run.answer is not None else None,
            last_message=last,
            pending=run.waiting,
            tool_calls=run.calls,
            cost=run.meter.cost if run.meter is not None else None,
        )

    def _turn_context(self, turn: TurnContext | None, signal: AbortSignal | None) -> TurnContext:
        """The turn's context: the one given (run's, then the session's) or a new one; the
        session's ``deps`` on it unless it has its own."""
        ctx = turn or self.turn or TurnContext(self.session_id, signal=signal or AbortSignal())
        if ctx.deps is None and self.deps is not None:
            ctx = dataclasses.replace(ctx, deps=self.deps)
        return ctx

    async def _claim(self) -> None:
        """A stored session: take its lease and load it (kept as it is when new)."""
        if self.store is None:
            return
        keeper = self._keeper
        if keeper is None or keeper.session_id != self.session_id:
            keeper = self._keeper = Keeper(self.store, self.session_id)
        state = await keeper.claim()
        if state.revision or state.transcript:
            self.transcript[:] = state.transcript
            self.usage, self.pending = state.usage, state.pending
            give_back(kept_grants(self.protect), state.grants)

    async def _checkpoint(self, turn_usage: Usage) -> None:
        """A stored session after a model response or a step's outputs."""
        if self._keeper is not None:
            grants = grants_of(kept_grants(self.protect))
            await self._keeper.save(self.transcript, self.usage + turn_usage, self.pending, grants)

    async def _kept(self, turn: Awaitable[RunResult]) -> RunResult:
        """A turn of a stored session, which is saved and released however it ends."""
        try:
            return await turn
        finally:
            await self._settle_store()

    async def _settle_store(self) -> None:
        """A stored session at the end of a turn: saved, its lease given back."""
        keeper = self._keeper
        if keeper is None:
            return
        try:
            grants = grants_of(kept_grants(self.protect))
            await keeper.save(self.transcript, self.usage, self.pending, grants)
        finally:
            await keeper.release()

    async def _release(self) -> None:
        if self._keeper is not None:
            await self._keeper.release()

    def _meter(self, budget: Budget | None, start: int) -> Meter | None:
        """What checks the run's and the session's budgets (``None``: neither is set)."""
        if budget is None and self.budget is None:
            return None
        return Meter(budget, self.budget, before=self.usage, items=self.transcript, start=start)

    async def aclose(self) -> None:
        """Close what this session owns: the model, when ``owns_model`` is set."""
        close = getattr(self.model, "aclose", None) if self.owns_model else None
        if close is not None:
            await close()

    async def __aenter__(self) -> Session[DepsT]:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def run_sync(
        self,
        prompt: str,
        *,
        signal: AbortSignal | None = None,
        turn: TurnContext | None = None,
        budget: Budget | None = None,
    ) -> RunResult:
        """:meth:`run` from synchronous code; refuses inside a running event loop.

        Every call of a thread runs on that thread's one event loop, so the model keeps
        its connections between calls (see :mod:`tooldeck._sync`).
        """
        return block_on(
            self.run(prompt, signal=signal, turn=turn, budget=budget),
            instead="await session.run(...)",
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
