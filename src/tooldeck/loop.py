"""The agent loop: call the model, dispatch its calls, append outputs, repeat.

The loop stops when the model returns no tool calls, a tool ends the turn, ``max_steps``
is reached, the abort signal fires, or the stop reason says stop. A refusal ends the
turn before any tool runs; calls from a truncated response are never executed. Calls
that are not run still get exactly one output each, so the transcript stays valid for
the next request.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .assembly import Toolset, TurnContext
from .context import AbortSignal
from .dispatch import Approver, Dispatcher, PolicyHook, ResultHook
from .events import (
    EventBus,
    ModelStepFinished,
    ModelStepStarted,
    OutputRecorded,
    TurnFinished,
    TurnStarted,
)
from .model import Model, ModelRequest, ModelSettings
from .plan import ToolPlan, ToolPlanned, ToolPlanner
from .result import ToolResult
from .tool import Tool
from .transcript import AssistantMessage, Item, StopReason, ToolOutput, Usage, UserMessage

__all__ = ["RunResult", "Session", "run"]

_log = logging.getLogger("tooldeck.loop")

_NOT_RUN = {
    StopReason.REFUSAL: "the model refused",
    StopReason.MAX_TOKENS: "the response was cut off at its token limit, so its arguments "
    "may be incomplete",
    StopReason.CONTENT_FILTER: "the response was stopped by a content filter",
    StopReason.ERROR: "the provider reported an error",
}


@dataclass(slots=True)
class RunResult:
    """The outcome of one turn."""

    output: str
    stop_reason: StopReason
    reason: str
    items: list[Item]
    usage: Usage
    steps: int
    structured: Any = None
    last_message: AssistantMessage | None = None

    @property
    def tool_outputs(self) -> list[ToolOutput]:
        return [i for i in self.items if isinstance(i, ToolOutput)]


ToolsetSource = Toolset | Sequence[Tool] | ToolPlanner | Callable[[TurnContext], Toolset | ToolPlan]


@dataclass
class Session:
    """A conversation: keeps the transcript across turns and runs each turn through the loop.

    ``tools`` is a :class:`Toolset`, a list of tools, or a function ``(TurnContext) ->
    Toolset`` that assembles the tools afresh before every model step (so a tool found by
    search, or the recall tool after a first offload, is callable from the next step).
    ``result_hooks`` transform each executed call's result before it is recorded.
    """

    model: Model
    tools: ToolsetSource
    session_id: str = field(default_factory=lambda: uuid.uuid4().hex[:16])
    instructions: str | None = None
    settings: ModelSettings = field(default_factory=ModelSettings)
    max_steps: int = 20
    policy: PolicyHook | None = None
    approver: Approver | None = None
    timeout: float | None = 300.0
    result_hooks: Sequence[ResultHook] = ()
    events: EventBus = field(default_factory=EventBus)
    turn: TurnContext | None = None
    transcript: list[Item] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)

    def _plan(self, turn: TurnContext | None) -> ToolPlan:
        source = self.tools
        if isinstance(source, Toolset):
            return ToolPlan.eager(source)
        if isinstance(source, ToolPlanner):
            return source(turn)
        if callable(source):
            if turn is None:
                raise ValueError("a toolset factory needs a TurnContext: pass turn=")
            made = source(turn)
            return made if isinstance(made, ToolPlan) else ToolPlan.eager(made)
        return ToolPlan.eager(Toolset(source))

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
        turn = turn or self.turn
        signal = signal or (turn.signal if turn else AbortSignal())
        plan = self._plan(turn)
        per_step = callable(self.tools) and not isinstance(self.tools, Toolset)
        dispatcher = Dispatcher(
            plan.executable,
            session_id=self.session_id,
            turn=turn,
            policy=self.policy,
            approver=self.approver,
            timeout=self.timeout,
            events=self.events,
            result_hooks=self.result_hooks,
        )
        start = len(self.transcript)
        self.transcript.append(UserMessage(prompt))
        await self.events.emit(TurnStarted(self.session_id, prompt, plan.executable.names))
        usage = Usage()
        last: AssistantMessage | None = None
        steps = 0
        stop, reason = StopReason.END_TURN, "end_turn"
        try:
            while True:
                if signal.aborted:
                    stop, reason = StopReason.ERROR, f"aborted: {signal.reason}"
                    break
                if steps >= self.max_steps:
                    stop, reason = StopReason.TOOL_CALLS, f"max_steps ({self.max_steps}) reached"
                    break
                steps += 1
                if per_step and steps > 1:
                    plan = self._plan(turn)
                    dispatcher.toolset = plan.executable
                await self._announce(plan)
                await self.events.emit(ModelStepStarted(self.session_id, steps))
                request = ModelRequest(
                    list(self.transcript),
                    plan.shown,
                    self.settings,
                    self.instructions,
                    deferred=plan.deferred,
                )
                last = await self.model.respond(request)
                usage += last.usage
                self.transcript.append(last)
                await self.events.emit(ModelStepFinished(self.session_id, steps, last))
                calls = last.tool_calls
                if last.stop_reason in _NOT_RUN:
                    stop = last.stop_reason
                    reason = last.refusal or stop.value
                    if calls:
                        reason += f"; {len(calls)} call(s) not executed"
                    await self._not_run(last, _NOT_RUN[stop])
                    break
                if last.stop_reason is StopReason.PAUSE_TURN and not calls:
                    continue  # a provider paused a long server-side turn: send it back as is
                if not calls:
                    stop, reason = last.stop_reason, last.stop_reason.value
                    break
                result = await dispatcher.dispatch(calls, signal)
                self.transcript.extend(result.outputs)
                if result.terminated_by is not None:
                    stop, reason = StopReason.TOOL_CALLS, f"ended by tool {result.terminated_by}"
                    break
        except BaseException as exc:
            stop, reason = StopReason.ERROR, f"{type(exc).__name__}: {exc}"
            _log.exception("turn failed in session %s", self.session_id)
            raise
        finally:
            self.usage += usage
            await self.events.emit(TurnFinished(self.session_id, stop, reason, steps, usage))
            self.events.close_streams()
        return RunResult(
            output=last.text if last else "",
            stop_reason=stop,
            reason=reason,
            items=self.transcript[start:],
            usage=usage,
            steps=steps,
            structured=last.structured if last else None,
            last_message=last,
        )

    async def _not_run(self, message: AssistantMessage, why: str) -> None:
        for call in message.tool_calls:
            output = ToolOutput(call.call_id, call.name, ToolResult.error(f"Not executed: {why}."))
            self.transcript.append(output)
            await self.events.emit(OutputRecorded(self.session_id, output))


async def run(model: Model, tools: ToolsetSource, prompt: str, **options: Any) -> RunResult:
    """Run one turn: ``await tooldeck.run(model, toolset, "prompt")``.

    Options are :class:`Session` fields (``instructions``, ``settings``, ``max_steps``,
    ``policy``, ``approver``, ``timeout``, ``events``, ``turn``, ``session_id``) plus
    ``signal`` (an :class:`AbortSignal`).
    """
    signal = options.pop("signal", None)
    session = Session(model, tools, **options)
    return await session.run(prompt, signal=signal)
