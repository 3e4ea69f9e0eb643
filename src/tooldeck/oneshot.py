"""One turn in a fresh :class:`~tooldeck.loop.Session`: run, stream, run_sync.

``await tooldeck.run(model, tools, "prompt", protect=Protection.ask("WRITE"))`` is a
session made for one prompt and closed after it. Every keyword is spelt out and typed
(no ``**options``), so a misspelt one (``protekt=``) is an error mypy and an editor
show, and at run time a ``TypeError`` naming it, before anything starts.
"""

from __future__ import annotations

from collections.abc import Sequence

from ._call import ResultHook
from ._continuation import ContinuePolicy
from ._notices import NoticeSource
from ._streaming import TurnStream
from ._sync import block_on
from .approvals import PendingStore
from .assembly import TurnContext
from .budget import Budget
from .context import AbortSignal
from .events import EventBus
from .loop import MAX_STEPS, TIMEOUT, RunResult, Session, new_session_id
from .model import Model, ModelSettings
from .policy.protection import Protection
from .session_state import SessionStorage
from .sources.listed import Tools
from .structured import OutputTypeSpec
from .transcript import Item

__all__ = []


async def run(
    model: Model | str,
    tools: Tools,
    prompt: str,
    *,
    instructions: str | None = None,
    settings: ModelSettings | None = None,
    output_type: OutputTypeSpec | None = None,
    output_retries: int | None = None,
    max_steps: int = MAX_STEPS,
    timeout: float | None = TIMEOUT,  # noqa: ASYNC109 - each tool call's, not this call's
    protect: Protection | None = None,
    result_hooks: Sequence[ResultHook] = (),
    guard: bool = True,
    signal: AbortSignal | None = None,
    turn: TurnContext | None = None,
    events: EventBus | None = None,
    session_id: str | None = None,
    transcript: list[Item] | None = None,
    pending_store: PendingStore | None = None,
    notices: NoticeSource | None = None,
    continue_on_max_tokens: ContinuePolicy | None = None,
    owns_model: bool = False,
    budget: Budget | None = None,
    deps: object = None,
    store: SessionStorage | None = None,
) -> RunResult:
    """Run one turn: ``await tooldeck.run(model, tools, "prompt")``.

    ``model`` is a :class:`~tooldeck.model.Model` or a ``kind:model`` string (then made
    here and closed after the turn); ``tools`` what :class:`~tooldeck.loop.Session`
    takes. The keywords (each a :class:`~tooldeck.loop.Session` field of the same name
    unless said otherwise):

    - ``instructions``: the system instructions.
    - ``settings``: the :class:`~tooldeck.model.ModelSettings` (default: the defaults).
    - ``output_type`` / ``output_retries``: shorthands for those settings: the structured
      answer (a Pydantic model class, a dataclass, a TypedDict or a JSON Schema mapping;
      ``RunResult.structured`` is the validated instance) and how many invalid answers
      are sent back before the turn ends with ``error``. Not given: the settings' own.
    - ``max_steps``: model steps before the turn stops (20).
    - ``timeout``: seconds one tool call may run (300; ``None``: no limit).
    - ``protect``: a :class:`~tooldeck.policy.protection.Protection`: who judges each call and who
      answers asks (``Protection.ask("WRITE")``: ask at the console before WRITE and
      DANGEROUS tools; ``Protection.policy(session_policy, approver=...)``; ``a & b``:
      the stricter wins). None: every call runs.
    - ``result_hooks``: transform each executed call's result before it is recorded.
    - ``guard``: add the default large-result guard when no result hook is an offload
      store's (``True``).
    - ``signal``: an :class:`~tooldeck.context.AbortSignal` that stops the turn (not a
      Session field: :meth:`Session.run` takes it).
    - ``turn``: the :class:`~tooldeck.assembly.TurnContext` (home, web, jobs); without it
      the turn has none of them.
    - ``events``: the :class:`~tooldeck.events.EventBus` the turn's events go to.
    - ``session_id``: the session's id (default: a new random one).
    - ``transcript``: earlier items the turn continues (the list is extended in place).
    - ``pending_store``: where a step waiting for approval is kept, so that another
      process can resume it.
    - ``notices``: things to tell the model before the prompt (ended background jobs).
    - ``continue_on_max_tokens``: go on after a response cut off at its output limit.
    - ``owns_model``: close a :class:`~tooldeck.model.Model` passed in after the turn
      (a model made from a string is always closed).
    - ``budget``: a :class:`~tooldeck.budget.Budget`: the requests, tokens, tool calls and
      cost the turn may use; past it the turn ends with stop reason ``budget``.
    - ``deps``: what every tool reads as ``ctx.deps`` (``ToolContext[Deps]`` types it).
    - ``store``: a :class:`tooldeck.sessions.SessionStore`: the turn continues the stored
      session ``session_id`` and is saved there (docs/sessions.md).
    """
    session = _session(
        model,
        tools,
        instructions=instructions,
        settings=settings,
        output_type=output_type,
        output_retries=output_retries,
        max_steps=max_steps,
        timeout=timeout,
        protect=protect,
        result_hooks=result_hooks,
        guard=guard,
        turn=turn,
        events=events,
        session_id=session_id,
        transcript=transcript,
        pending_store=pending_store,
        notices=notices,
        continue_on_max_tokens=continue_on_max_tokens,
        owns_model=owns_model,
        budget=budget,
        deps=deps,
        store=store,
    )
    async with session:  # a model it made is closed after
        return await session.run(prompt, signal=signal)


def stream(
    model: Model | str,
    tools: Tools,
    prompt: str,
    *,
    instructions: str | None = None,
    settings: ModelSettings | None = None,
    output_type: OutputTypeSpec | None = None,
    output_retries: int | None = None,
    max_steps: int = MAX_STEPS,
    timeout: float | None = TIMEOUT,
    protect: Protection | None = None,
    result_hooks: Sequence[ResultHook] = (),
    guard: bool = True,
    signal: AbortSignal | None = None,
    turn: TurnContext | None = None,
    events: EventBus | None = None,
    session_id: str | None = None,
    transcript: list[Item] | None = None,
    pending_store: PendingStore | None = None,
    notices: NoticeSource | None = None,
    continue_on_max_tokens: ContinuePolicy | None = None,
    owns_model: bool = False,
    budget: Budget | None = None,
    deps: object = None,
    store: SessionStorage | None = None,
) -> TurnStream[RunResult]:
    """Run one turn as a stream of events: ``async for e in tooldeck.stream(model, tools, p)``.

    Takes the keywords of :func:`run`, with the same meaning; see :meth:`Session.stream`.
    """
    session = _session(
        model,
        tools,
        instructions=instructions,
        settings=settings,
        output_type=output_type,
        output_retries=output_retries,
        max_steps=max_steps,
        timeout=timeout,
        protect=protect,
        result_hooks=result_hooks,
        guard=guard,
        turn=turn,
        events=events,
        session_id=session_id,
        transcript=transcript,
        pending_store=pending_store,
        notices=notices,
        continue_on_max_tokens=continue_on_max_tokens,
        owns_model=owns_model,
        budget=budget,
        deps=deps,
        store=store,
    )
    return session.stream(prompt, signal=signal)


def run_sync(
    model: Model | str,
    tools: Tools,
    prompt: str,
    *,
    instructions: str | None = None,
    settings: ModelSettings | None = None,
    output_type: OutputTypeSpec | None = None,
    output_retries: int | None = None,
    max_steps: int = MAX_STEPS,
    timeout: float | None = TIMEOUT,
    protect: Protection | None = None,
    result_hooks: Sequence[ResultHook] = (),
    guard: bool = True,
    signal: AbortSignal | None = None,
    turn: TurnContext | None = None,
    events: EventBus | None = None,
    session_id: str | None = None,
    transcript: list[Item] | None = None,
    pending_store: PendingStore | None = None,
    notices: NoticeSource | None = None,
    continue_on_max_tokens: ContinuePolicy | None = None,
    owns_model: bool = False,
    budget: Budget | None = None,
    deps: object = None,
    store: SessionStorage | None = None,
) -> RunResult:
    """:func:`run` from synchronous code: ``tooldeck.run_sync(model, tools, "prompt")``.

    Takes the keywords of :func:`run`, with the same meaning. Refuses inside a running
    event loop (Jupyter, async code): ``await tooldeck.run(...)`` there. Calls of one
    thread share one event loop, so a model is reused with its connections.
    """
    turn_of_run = run(
        model,
        tools,
        prompt,
        instructions=instructions,
        settings=settings,
        output_type=output_type,
        output_retries=output_retries,
        max_steps=max_steps,
        timeout=timeout,
        protect=protect,
        result_hooks=result_hooks,
        guard=guard,
        signal=signal,
        turn=turn,
        events=events,
        session_id=session_id,
        transcript=transcript,
        pending_store=pending_store,
        notices=notices,
        continue_on_max_tokens=continue_on_max_tokens,
        owns_model=owns_model,
        budget=budget,
        deps=deps,
        store=store,
    )
    return block_on(turn_of_run, instead="await tooldeck.run(...)")


def _session(
    model: Model | str,
    tools: Tools,
    *,
    instructions: str | None,
    settings: ModelSettings | None,
    output_type: OutputTypeSpec | None,
    output_retries: int | None,
    max_steps: int,
    timeout: float | None,
    protect: Protection | None,
    result_hooks: Sequence[ResultHook],
    guard: bool,
    turn: TurnContext | None,
    events: EventBus | None,
    session_id: str | None,
    transcript: list[Item] | None,
    pending_store: PendingStore | None,
    notices: NoticeSource | None,
    continue_on_max_tokens: ContinuePolicy | None,
    owns_model: bool,
    budget: Budget | None,
    deps: object,
    store: SessionStorage | None,
) -> Session[object]:
    """The session of one turn; ``output_type`` / ``output_retries`` folded into settings."""
    settings = settings or ModelSettings()
    if output_type is not None or output_retries is not None:
        if output_type is None and settings.output_spec is not None:
            output_type = settings.output_spec.source  # output_retries alone: keep the type
        settings = settings.expecting(output_type, retries=output_retries)
    return Session(
        model,
        tools,
        session_id=new_session_id() if session_id is None else session_id,
        instructions=instructions,
        settings=settings,
        max_steps=max_steps,
        protect=protect,
        timeout=timeout,
        result_hooks=result_hooks,
        events=EventBus() if events is None else events,
        turn=turn,
        transcript=[] if transcript is None else transcript,
        pending_store=pending_store,
        guard=guard,
        continue_on_max_tokens=continue_on_max_tokens,
        owns_model=owns_model,
        notices=notices,
        budget=budget,
        deps=deps,
        store=store,
    )
