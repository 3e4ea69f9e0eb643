"""The workflow engine: starts runs, schedules ready tasks, runs task turns, cancels.

A run is written to the store when it starts (the workflow, each task ``pending``, with
its instructions and result schema). Tasks whose dependencies have all submitted are
handed to the :class:`~tooldeck.workflows.executor.TaskExecutor`, which calls
:meth:`WorkflowEngine.run_task` for each. A task turn:

1. claims the task (``pending -> running``, a conditional update: one worker only);
2. builds its prompt from the stored instructions, inputs and dependency results;
3. runs a sub-agent :class:`~tooldeck.loop.Session` with its own session id, the task's
   step budget, a model from the model factory, and the fixed task toolset
   (``TurnContext.turn_kind == 'workflow_task'``);
4. ends when ``submit_result`` is accepted (the tool ends the turn), when the attempts
   are used up, when the abort signal fires (cancel, time budget), or when the model
   stops; a model that stops without submitting is reminded once (``reminders``), then
   the task fails.

Rejections are counted whether the control plane rejected the value or the dispatcher's
argument validation did (those are recorded with ``source='arguments'``). Before each
model step the task's state is read from the store, so a cancellation made by another
process stops the turn too.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..assembly import TurnContext
from ..context import AbortSignal
from ..errors import TooldeckError
from ..events import (
    CallFinished,
    CallStarted,
    Event,
    EventBus,
    ModelStepFinished,
    ModelStepStarted,
    OutputRecorded,
)
from ..loop import RunResult, Session
from ..model import Model
from ..registry import ToolRegistry
from ..result import ToolResult
from ..telemetry.runs import TaskTrace, task_started, workflow_started
from ..transcript import StopReason, ToolCall
from .control import ControlPlane
from .definition import Workflow
from .events import TaskActivity, TaskStateChanged, WorkflowStateChanged, reasons_line
from .executor import AsyncioExecutor, TaskExecutor
from .prompt import task_prompt
from .shapes import WRAPPED_PROPERTY, ResultSchema, result_schema
from .store import CancelOutcome, NewTask, WorkflowState, WorkflowStore
from .store.protocol import TERMINAL_WORKFLOW_STATES, StoreUnavailable
from .store.records import TaskProgress, TaskRecord, WorkflowRecord
from .task_tools import SUBMIT_RESULT, submit_result_tool, task_toolset

__all__ = ["TASK_INSTRUCTIONS"]

_log = logging.getLogger("tooldeck.workflows")

TASK_INSTRUCTIONS = (
    "You are running one task of a workflow, as a sub-agent. Do the task in the user "
    "message, using your tools where they help, then call submit_result with the result. "
    "The result must match submit_result's schema exactly; it is validated again before it "
    "is stored. If a submission is rejected, read what is wrong, fix the value and call "
    "submit_result again with the whole corrected result. The task ends when a result is "
    "accepted. You cannot start workflows or background jobs."
)
REMINDER = (
    "The task is not finished: no result has been accepted yet. Call submit_result now "
    "with the result."
)


class WorkflowError(TooldeckError, ValueError):
    """A request the engine cannot carry out (unknown workflow or run, bad inputs)."""


class WorkflowInputError(WorkflowError):
    """A run's inputs do not match the workflow's inputs schema."""

    def __init__(self, workflow: str, problems: list[str]):
        self.problems = tuple(problems)
        super().__init__(f"inputs for workflow {workflow!r} are invalid: " + "; ".join(problems))


@dataclass(frozen=True, slots=True)
class TaskRun:
    """What a model factory is told about the task turn it makes a model for."""

    workflow_id: str
    workflow_name: str
    task: TaskRecord
    session_id: str
    inputs: Mapping[str, Any]
    dependencies: Mapping[str, Any]
    prompt: str
    wrapped: bool = False

    @property
    def name(self) -> str:
        return self.task.name

    def arguments_for(self, value: Any) -> dict[str, Any]:
        """``submit_result``'s arguments for the result ``value``."""
        if self.wrapped:
            return {WRAPPED_PROPERTY: value}
        if not isinstance(value, dict):
            raise TypeError(f"task {self.name!r} takes an object result, got {value!r}")
        return value


ModelFactory = Callable[[TaskRun], Model]


@dataclass
class _Turn:
    """What one task turn's event subscriber keeps."""

    task: TaskRecord
    signal: AbortSignal
    session_id: str
    calls: dict[str, ToolCall] = field(default_factory=dict)
    failure: StoreUnavailable | None = None  # the store was away too long: fail the step
    ended: bool = False  # a submission ended the turn: its outcome is in the store
    accepted: int | None = None  # the attempts count when this turn's result was accepted
    claimed: bool = True  # the claim just checked the task: the first model step need not

    def unavailable(self, exc: StoreUnavailable) -> ToolResult:
        """End the turn on a store fault; :meth:`WorkflowEngine.run_task` raises it."""
        if self.failure is None:
            self.failure = exc
        self.signal.abort("the workflow store is unavailable")
        return ToolResult(
            "The result could not be recorded now; the turn will be run again.",
            is_error=True,
            terminate=True,
        )

    def check(self) -> None:
        if self.failure is not None:
            raise self.failure


class WorkflowEngine:
    """Runs workflows: scheduling, task turns, cancellation, results (see the module doc).

    - ``store``: an opened :class:`WorkflowStore`;
    - ``model_factory``: ``(TaskRun) -> Model``, called once per task turn;
    - ``executor``: where task turns run (default :class:`AsyncioExecutor` with
      ``max_concurrency``);
    - ``catalog``: workflows that can be started by name (``workflow`` tool, CLI);
    - ``home``, ``web_provider``, ``memory_enabled``: the task turns' context;
      ``registry``: where the web and notes tools come from (the built-in registry by
      default);
    - ``task_timeout``: seconds one task turn may take in all; ``tool_timeout`` per call;
    - ``reminders``: how many times a model that stops without submitting is told to;
    - ``worker``: this process's name among several (``tooldeck worker``), appended to the
      task turns' session ids so a task's history shows where each turn ran;
    - ``advance_after_turn``: schedule the dependents when a turn ends (off for a durable
      executor that advances in a step of its own).
    """

    def __init__(
        self,
        store: WorkflowStore,
        model_factory: ModelFactory,
        *,
        executor: TaskExecutor | None = None,
        max_concurrency: int = 4,
        catalog: Iterable[Workflow] = (),
        home: Path | str | None = None,
        web_provider: str | None = None,
        memory_enabled: bool = True,
        registry: ToolRegistry | None = None,
        task_timeout: float = 600.0,
        tool_timeout: float | None = 120.0,
        reminders: int = 1,
        events: EventBus | None = None,
        poll_interval: float = 0.5,
        worker: str | None = None,
        advance_after_turn: bool = True,
    ) -> None:
        self.store = store
        self.model_factory = model_factory
        self.executor: TaskExecutor = executor or AsyncioExecutor(max_concurrency)
        self.catalog: dict[str, Workflow] = {}
        for workflow in catalog:
            self.register(workflow)
        self.home = Path(home) if home is not None else Path.home()
        self.web_provider = web_provider
        self.memory_enabled = memory_enabled
        self._registry = registry
        self.task_timeout = task_timeout
        self.tool_timeout = tool_timeout
        self.reminders = reminders
        self.events = events or EventBus()
        self.poll_interval = poll_interval
        self.worker = worker
        self.advance_after_turn = advance_after_turn
        self.control = ControlPlane(store)
        self._advance_locks: dict[str, asyncio.Lock] = {}
        self._finished: dict[str, asyncio.Event] = {}
        self._started: dict[str, Workflow] = {}  # run id -> the workflow it was started as
        self._schemas: dict[str, ResultSchema] = {}  # a stored result schema -> checked
        self.executor.start(self.run_task)

    # -- configuration --------------------------------------------------------------------------
    def register(self, workflow: Workflow) -> None:
        """Make ``workflow`` startable by name."""
        if not isinstance(workflow, Workflow):
            raise TypeError(f"{workflow!r} is not a Workflow")
        self.catalog[workflow.name] = workflow

    @property
    def registry(self) -> ToolRegistry:
        if self._registry is None:
            from ..builtin import load_builtin_registry

            self._registry = load_builtin_registry()
        return self._registry

    async def close(self) -> None:
        """Stop every task turn this engine's executor runs."""
        await self.executor.close()

    async def __aenter__(self) -> WorkflowEngine:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _emit(self, event: Event) -> None:
        await self.events.emit(event)

    # -- runs --------------------------------------------------------------------------------
    async def start(self, workflow: Workflow | str, inputs: Mapping[str, Any] | None = None) -> str:
        """Write a new run of ``workflow`` (or a catalog name) and schedule its first tasks.

        Returns the run's id. Raises :class:`WorkflowInputError` for invalid inputs.
        """
        if isinstance(workflow, str):
            found = self.catalog.get(workflow)
            if found is None:
                known = ", ".join(self.catalog) or "none"
                raise WorkflowError(f"unknown workflow {workflow!r} (known: {known})")
            workflow = found
        values = dict(inputs or {})
        problems = workflow.input_problems(values)
        if problems:
            raise WorkflowInputError(workflow.name, problems)
        workflow_id = f"wf-{uuid.uuid4().hex[:12]}"
        tasks = [
            NewTask(
                name=t.name,
                position=i,
                instructions=t.instructions,
                result_schema=t.schema.schema,
                depends_on=tuple(t.depends_on),
                input_names=tuple(t.inputs) if t.inputs is not None else None,
                max_attempts=t.max_attempts,
                max_steps=t.max_steps,
                description=t.description,
            )
            for i, t in enumerate(workflow.tasks)
        ]
        with workflow_started(workflow.name, workflow_id):  # the run's trace, when tracing
            await self.store.create_workflow(workflow_id, workflow.name, values, tasks)
            self._started[workflow_id] = workflow
            self._finished[workflow_id] = asyncio.Event()
            await self.store.set_workflow_state(workflow_id, "running", expect=("pending",))
            await self._emit(WorkflowStateChanged(workflow_id, workflow.name, "running"))
            for t in workflow.tasks:
                await self._emit(
                    TaskStateChanged(workflow_id, t.name, "pending", 0, t.max_attempts)
                )
            await self.advance(workflow_id)
        return workflow_id

    async def run(
        self, workflow: Workflow | str, inputs: Mapping[str, Any] | None = None
    ) -> WorkflowRecord:
        """Start ``workflow`` and wait for its end; returns the finished run.

        Bound the wait with ``asyncio.timeout()``; the run goes on if the wait is cut.
        """
        workflow_id = await self.start(workflow, inputs)
        return await self.wait(workflow_id)

    def _workflow_of(self, workflow_id: str, name: str) -> Workflow | None:
        """The definition of a stored run, when this engine knows it."""
        known = self._started.get(workflow_id) or self.catalog.get(name)
        return known if known is not None and known.name == name else None

    def _typed(self, record: WorkflowRecord) -> WorkflowRecord:
        """``record`` with results loaded as the declared types, when the workflow is known."""
        workflow = self._workflow_of(record.id, record.name)
        return workflow.typed(record) if workflow is not None else record

    async def get(self, workflow_id: str) -> WorkflowRecord:
        """A run by id or unique id prefix; ``LookupError`` when there is none.

        Results of tasks declared with a Pydantic result type are instances of it when
        the run's workflow is known here (started here, or in the catalog).
        """
        found = await self.store.get_workflow(workflow_id)
        if found is not None:
            return self._typed(found)
        ids = await self.store.find_workflows(workflow_id)
        if len(ids) == 1:
            again = await self.store.get_workflow(ids[0])
            if again is not None:
                return self._typed(again)
        if len(ids) > 1:
            raise LookupError(f"{workflow_id!r} matches several runs: {', '.join(ids)}")
        raise LookupError(f"no workflow run {workflow_id!r}")

    async def wait(self, workflow_id: str) -> WorkflowRecord:
        """Wait until the run has finished (succeeded, failed or cancelled).

        The store is read again at least every ``poll_interval`` seconds, so a run
        finished by another process is seen too. Bound it with ``asyncio.timeout()``.
        Results are typed as in :meth:`get`.
        """
        event = self._finished.setdefault(workflow_id, asyncio.Event())
        while True:
            # The run's state only, until it ends (not every task's record at every look).
            state = await self.store.workflow_state(workflow_id)
            if state is None:
                raise WorkflowError(f"no workflow run {workflow_id!r}")
            if state in TERMINAL_WORKFLOW_STATES:
                wf = await self.store.get_workflow(workflow_id)
                if wf is None:
                    raise WorkflowError(f"no workflow run {workflow_id!r}")
                return self._typed(wf)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), self.poll_interval)

    async def follow(self, workflow_id: str) -> None:
        """Emit the changes of a run whose turns run elsewhere (workers), until it ends.

        Reads the store every ``poll_interval`` seconds: a ``TaskStateChanged`` for each
        task whose state or attempts changed, a ``TaskNote`` for each rejection and each
        restarted turn (a takeover, a recovery, a step run again), and
        ``WorkflowStateChanged`` at the end (:func:`~tooldeck.workflows.follow.follow_run`),
        so a progress view works for runs on ``tooldeck worker`` processes too.
        """
        from .follow import follow_run

        try:
            await follow_run(self.store, self._emit, workflow_id, self.poll_interval)
        except LookupError as exc:
            raise WorkflowError(str(exc)) from exc

    async def cancel(self, workflow_id: str, reason: str = "cancelled") -> CancelOutcome:
        """Cancel the run: running task turns are aborted, pending tasks never run."""
        outcome = await self.store.cancel_workflow(workflow_id, reason)
        if not outcome.cancelled:
            return outcome
        wf = await self.store.get_workflow(workflow_id)
        name = wf.name if wf else ""
        await self._emit(WorkflowStateChanged(workflow_id, name, "cancelled", reason))
        for task_id in (*outcome.running, *outcome.pending):
            task_name = task_id.split(":", 1)[-1]
            await self._emit(TaskStateChanged(workflow_id, task_name, "cancelled", reason=reason))
        await self.executor.cancel(workflow_id, reason)
        self._finished.setdefault(workflow_id, asyncio.Event()).set()
        return outcome

    # -- scheduling ------------------------------------------------------------------------
    async def advance(self, workflow_id: str, finished: str | None = None) -> None:
        """Schedule ready tasks, cancel those whose dependencies failed, finish the run.

        ``finished``: the task whose end prompted this call; only the tasks that depend
        on it are scheduled then (the others were scheduled when they became ready, which
        keeps a durable executor from being asked for the same turns over and over).
        Idempotent and safe to call from anywhere at any time: claiming a task and
        finishing a run are conditional updates in the store.
        """
        lock = self._advance_locks.setdefault(workflow_id, asyncio.Lock())
        async with lock:
            if finished is not None and await self._advance_after(workflow_id, finished):
                return
            wf = await self.store.progress(workflow_id)
            if wf is None:
                return
            if wf.terminal:
                self._finished.setdefault(workflow_id, asyncio.Event()).set()
                return
            states = {t.name: t.state for t in wf.tasks}
            ready: list[TaskProgress] = []
            for t in wf.tasks:  # dependency order: a cancellation cascades in one pass
                if t.state != "pending":
                    continue
                bad = [d for d in t.depends_on if states.get(d) in ("failed", "cancelled")]
                if bad:
                    why = f"dependency {bad[0]!r} {states[bad[0]]}"
                    if await self.store.set_task_state(
                        t.id, "cancelled", expect=("pending",), reason=why
                    ):
                        states[t.name] = "cancelled"
                        await self._emit(
                            TaskStateChanged(workflow_id, t.name, "cancelled", reason=why)
                        )
                elif all(states.get(d) == "submitted" for d in t.depends_on) and (
                    finished is None or finished in t.depends_on
                ):
                    ready.append(t)
            await self._submit(workflow_id, ready)
            if all(s in ("submitted", "failed", "cancelled") for s in states.values()):
                await self._finish(wf.id, wf.name, all(s == "submitted" for s in states.values()))

    async def _advance_after(self, workflow_id: str, finished: str) -> bool:
        """:meth:`advance` after ``finished`` was submitted, from the run's task counts and
        the pending tasks that depend on it (not every task's row: that was O(tasks) per
        task). ``False`` when it cannot tell alone (a task failed or was cancelled, or a
        dependent has other dependencies that may all be submitted): the full pass runs."""
        found = await self.store.dependents(workflow_id, finished)
        if found is None:
            return True
        if found.terminal:
            self._finished.setdefault(workflow_id, asyncio.Event()).set()
            return True
        if found.ended != found.submitted or found.finished_state != "submitted":
            return False  # a failure or a cancellation to cascade, or nothing to schedule
        ready: list[TaskProgress] = []
        for t in found.pending:
            if set(t.depends_on) == {finished}:
                ready.append(t)
            elif len(set(t.depends_on)) <= found.submitted:
                return False  # its other dependencies may all be submitted: look at them
        await self._submit(workflow_id, ready)
        if found.ended == found.total:
            await self._finish(workflow_id, found.name, True)
        return True

    async def _submit(self, workflow_id: str, ready: list[TaskProgress]) -> None:
        submit_many = getattr(self.executor, "submit_many", None)
        if submit_many is not None and len(ready) > 1:  # e.g. DbosExecutor: one transaction
            await submit_many(workflow_id, [t.id for t in ready])
        else:
            for t in ready:
                await self.executor.submit(workflow_id, t.id)

    async def _finish(self, workflow_id: str, name: str, succeeded: bool) -> None:
        final: WorkflowState
        error: str | None = None
        if succeeded:
            final = "succeeded"
        else:
            final_tasks = await self.store.get_workflow(workflow_id)
            failed = [
                f"{t.name} {t.state}" + (f" ({t.error})" if t.error else "")
                for t in (final_tasks.tasks if final_tasks else ())
                if t.state in ("failed", "cancelled")
            ]
            final, error = "failed", "; ".join(failed)[:2000]
        if await self.store.set_workflow_state(workflow_id, final, error=error):
            await self._emit(WorkflowStateChanged(workflow_id, name, final, error))
        self._finished.setdefault(workflow_id, asyncio.Event()).set()

    # -- one task turn --------------------------------------------------------------------------
    async def run_task(
        self,
        task_id: str,
        signal: AbortSignal | None = None,
        *,
        take_over: str | Callable[[str | None], str] | None = None,
    ) -> str | None:
        """Run one task turn to its end (the executor calls this). See the module docstring.

        ``take_over``: a durable executor that knows the task's previous turn died with
        its worker (it is the only runner of that task) passes why (or a function of the
        session that held the task that says why); a task still ``running`` is then
        handed to a new session and its turn starts again from the prompt (model calls
        are not replayed). A task already submitted stays as it is.

        A store that stays unavailable past its retries (:class:`StoreUnavailable`) fails
        a durable turn (``take_over`` given): the exception goes to the executor, which
        runs the step again, instead of failing the task or telling the model.

        Returns the task's state when the turn ended (``None`` when it is not known: the
        task is gone, or another turn claimed or ended it first).
        """
        signal = signal or AbortSignal()
        session_id = f"{'.'.join(task_id.rsplit(':', 1))}.{uuid.uuid4().hex[:6]}"
        if self.worker is not None:
            session_id += f"@{self.worker}"
        # A pending task (the usual case) is claimed at once, and its record comes back.
        task = await self.store.claim(task_id, session_id)
        if task is None:
            task = await self.store.get_task(task_id)
            if task is None or task.state != "running":
                return task.state if task is not None else None
            if take_over is None:
                return task.state  # another worker has it
            why = take_over if isinstance(take_over, str) else take_over(task.session_id)
            if await self.store.resume_task(task_id, session_id, why) is None:
                return None  # it finished or was cancelled meanwhile
        await self._emit(
            TaskStateChanged(task.workflow_id, task.name, "running", 0, task.max_attempts)
        )
        traced = task_started(task.workflow_id, None, task.name, session_id, self.worker)
        unavailable = False
        final: str | None = None
        turn = _Turn(task, signal, session_id)
        try:
            if traced is None:
                await self._run_claimed(turn)
            else:
                with traced.current(task.name):
                    await self._run_claimed(turn)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await asyncio.shield(
                    self.store.set_task_state(
                        task_id,
                        "cancelled",
                        expect=("running",),
                        reason="the turn was cancelled",
                        owner=session_id,
                    )
                )
            raise
        except StoreUnavailable as exc:
            if take_over is None:  # nobody runs this turn again: fail the task if it can
                await self._fail_crashed(task_id, session_id, exc)
                return None
            unavailable = True
            _log.warning("task %s: the turn stops, to be run again: %s", task_id, exc)
            raise
        except Exception as exc:
            await self._fail_crashed(task_id, session_id, exc)
        finally:
            if unavailable:
                if traced is not None:
                    traced.end(None, None)
            else:
                final = await asyncio.shield(self._after_task(task, traced, turn.accepted))
        return final

    async def _fail_crashed(self, task_id: str, session_id: str, exc: Exception) -> None:
        if isinstance(exc, StoreUnavailable):  # an expected fault: one line, no traceback
            _log.warning("task %s failed: %s", task_id, exc)
        else:
            _log.exception("task %s crashed", task_id)
        await self.store.set_task_state(
            task_id,
            "failed",
            expect=("running",),
            reason=f"{type(exc).__name__}: {exc}",
            owner=session_id,
        )

    async def _after_task(
        self, task: TaskRecord, traced: TaskTrace | None = None, accepted: int | None = None
    ) -> str | None:
        """Tell how the turn ended; ``accepted``: the attempts when the turn's own result was
        accepted (the task is then ``submitted`` for good: no need to read it)."""
        final: tuple[str, int, int, str | None] | None = None
        try:
            if accepted is not None:
                final = ("submitted", accepted, task.max_attempts, None)
            else:
                record = await self.store.get_task(task.id)
                if record is not None:
                    final = (record.state, record.attempts, record.max_attempts, record.error)
        finally:
            if traced is not None:  # the task span ends with the task's state
                traced.end(final[0] if final else None, final[1] if final else None)
        if final is not None:
            await self._emit(TaskStateChanged(task.workflow_id, task.name, *final))
        if self.advance_after_turn:
            await self.advance(task.workflow_id, task.name)
        return final[0] if final is not None else None

    async def _run_claimed(self, state: _Turn) -> None:
        task, session_id, signal = state.task, state.session_id, state.signal
        wf = await self.store.task_context(task)
        if wf is None:
            raise RuntimeError(f"the run of task {task.id} is gone")
        all_inputs = wf.inputs if isinstance(wf.inputs, dict) else {}
        names = task.input_names
        inputs = (
            dict(all_inputs)
            if names is None
            else {n: all_inputs[n] for n in names if n in all_inputs}
        )
        deps = {d: wf.results.get(d) for d in task.depends_on}
        checked = self._checked_schema(task)
        # A turn that follows one whose worker died is told what that turn had rejected:
        # the rejections stay counted (they were the model's), the crash costs nothing.
        rejections = await self.store.rejections(task.id) if task.attempts else []
        prompt = task_prompt(task, inputs, deps, rejections)
        run = TaskRun(
            task.workflow_id, wf.name, task, session_id, inputs, deps, prompt, checked.wrapped
        )
        turn = TurnContext(
            session_id=session_id,
            home=self.home,
            web_provider=self.web_provider,
            can_create_jobs=False,
            turn_kind="workflow_task",
            memory_enabled=self.memory_enabled,
            signal=signal,
        )
        workflow = self._workflow_of(task.workflow_id, wf.name)
        declared = (
            next((t for t in workflow.tasks if t.name == task.name), None) if workflow else None
        )
        check = declared.result_problems if declared and declared.result_type else None
        submit = submit_result_tool(
            task, self.control, schema=checked, check=check, unavailable=state.unavailable
        )
        registry = self.registry if (self.web_provider or self.memory_enabled) else None
        toolset = task_toolset(turn, submit, registry)
        session = Session(
            self.model_factory(run),
            toolset,
            session_id=session_id,
            instructions=TASK_INSTRUCTIONS,
            max_steps=task.max_steps,
            timeout=self.tool_timeout,
            turn=turn,
        )
        session.events.subscribe(self._watcher(state))

        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.task_timeout
        steps_left = task.max_steps
        result = await self._until_stopped(session.run(prompt, signal=signal), signal, deadline)
        reminders = self.reminders
        while result is not None:
            state.check()
            if state.ended:  # a submission ended the turn; the store has its outcome
                return
            steps_left -= result.steps
            current = await self.store.task_owner(task.id)
            if current != ("running", session_id) or signal.aborted:
                return
            if reminders <= 0 or steps_left <= 0 or result.stop_reason is not StopReason.END_TURN:
                break
            reminders -= 1
            session.max_steps = steps_left
            result = await self._until_stopped(
                session.run(REMINDER, signal=signal), signal, deadline
            )
        state.check()
        if result is None:  # aborted: cancelled, out of attempts, or out of time
            why = signal.reason or "aborted"
        else:
            why = f"the turn ended without an accepted result ({result.reason})"
        await self.store.set_task_state(
            task.id, "failed", expect=("running",), reason=why, owner=session_id
        )

    def _checked_schema(self, task: TaskRecord) -> ResultSchema:
        """The task's stored result schema, checked once per distinct schema (not per turn:
        the checks and the provider projections are the same every time)."""
        key = json.dumps(task.result_schema, sort_keys=True)
        checked = self._schemas.get(key)
        if checked is None:
            checked = result_schema(task.result_schema, f"task {task.name!r}")
            if len(self._schemas) >= 1024:  # a long-lived worker: forget the oldest
                del self._schemas[next(iter(self._schemas))]
            self._schemas[key] = checked
        return checked

    async def _until_stopped(
        self, turn: Coroutine[Any, Any, RunResult], signal: AbortSignal, deadline: float
    ) -> RunResult | None:
        """Run the turn until it ends, the signal fires or the time budget is spent."""
        loop = asyncio.get_running_loop()
        job = asyncio.ensure_future(turn)
        stop = asyncio.ensure_future(signal.wait())
        try:
            done, _ = await asyncio.wait(
                {job, stop},
                timeout=max(0.0, deadline - loop.time()),
                return_when=asyncio.FIRST_COMPLETED,
            )
        except asyncio.CancelledError:
            signal.abort("the task turn was cancelled")
            job.cancel()
            stop.cancel()
            await asyncio.wait({job})
            raise
        stop.cancel()
        if job in done:
            return job.result()
        if not signal.aborted:
            signal.abort(f"the task's time budget ({self.task_timeout:g}s) is spent")
        job.cancel()
        await asyncio.wait({job})
        return None

    def _watcher(self, turn: _Turn) -> Callable[[Event], Awaitable[None]]:
        task = turn.task

        async def on_event(event: Event) -> None:
            try:
                await watch(event)
            except StoreUnavailable as exc:  # the turn stops; run_task raises it
                turn.unavailable(exc)

        async def watch(event: Event) -> None:
            if isinstance(event, ModelStepStarted):
                if turn.claimed:  # the claim (or takeover) checked the task just now
                    turn.claimed = False
                    return
                owner = await self.store.task_owner(task.id)
                state, holder = owner if owner is not None else ("gone", None)
                if turn.signal.aborted:
                    pass
                elif state != "running":
                    turn.signal.abort(f"the task is {state}")
                elif holder != turn.session_id:
                    turn.signal.abort(f"the task was taken over by {holder}")
            elif isinstance(event, ModelStepFinished):
                for call in event.message.tool_calls:
                    turn.calls[call.call_id] = call
            elif isinstance(event, CallStarted):
                await self._emit(TaskActivity(task.workflow_id, task.name, event.label))
            elif isinstance(event, CallFinished):
                await self._emit(
                    TaskActivity(task.workflow_id, task.name, event.label, True, event.is_error)
                )
            elif isinstance(event, OutputRecorded) and event.output.name == SUBMIT_RESULT:
                await self._on_submission(turn, event)

        return on_event

    async def _on_submission(self, turn: _Turn, event: OutputRecorded) -> None:
        task, output = turn.task, event.output
        details = output.result.details
        if not isinstance(details, dict):
            details = {}
        if output.is_error and "problems" in details:
            # The dispatcher refused the arguments before submit_result ran: a rejection.
            call = turn.calls.get(output.call_id)
            raw = call.arguments if call is not None else None
            submission = await self.control.reject(
                task.id,
                raw,
                [str(p) for p in details["problems"]],
                submission_key=f"{event.session_id}:{output.call_id}",
                source="arguments",
                task_name=task.name,
            )
            if submission.status == "failed":
                turn.signal.abort(f"no submission attempts left ({submission.attempt})")
            details = submission.tool_result().details or {}
        if output.result.terminate and turn.failure is None:
            turn.ended = True
            if details.get("status") in ("stored", "duplicate"):
                turn.accepted = details.get("attempt", 0)
        if details.get("status") == "rejected":
            # The task still runs, one attempt further (an end is told when the turn ends).
            await self._emit(
                TaskStateChanged(
                    task.workflow_id,
                    task.name,
                    "running",
                    details.get("attempt", 0),
                    details.get("max_attempts", task.max_attempts),
                    reasons_line(details.get("reasons") or ()),
                )
            )
