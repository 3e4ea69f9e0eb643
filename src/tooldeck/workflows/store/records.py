"""What the workflow store reads and writes: runs, tasks, transitions, rejections, outcomes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from .protocol import TERMINAL_TASK_STATES, TERMINAL_WORKFLOW_STATES, TaskState, WorkflowState

__all__ = ["Dependents", "RunProgress", "TaskContext", "TaskProgress"]

# -- records -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NewTask:
    """A task as it is written when its workflow run is created."""

    name: str
    position: int
    instructions: str
    result_schema: dict[str, Any]
    depends_on: tuple[str, ...] = ()
    input_names: tuple[str, ...] | None = None
    max_attempts: int = 3
    max_steps: int = 12
    description: str = ""


@dataclass(frozen=True, slots=True)
class TaskRecord:
    id: str
    workflow_id: str
    name: str
    position: int
    description: str
    instructions: str
    input_names: tuple[str, ...] | None
    depends_on: tuple[str, ...]
    result_schema: dict[str, Any]
    state: TaskState
    attempts: int
    max_attempts: int
    max_steps: int
    session_id: str | None
    error: str | None
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    has_result: bool
    result: Any
    submission_key: str | None
    stored_at: datetime | None

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_TASK_STATES


@dataclass(frozen=True, slots=True)
class WorkflowRecord:
    id: str
    name: str
    inputs: Any
    state: WorkflowState
    error: str | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    tasks: tuple[TaskRecord, ...] = ()
    task_count: int = 0
    submitted_count: int = 0
    # task name -> stored JSON -> the declared type (set by Workflow.typed / the engine)
    loaders: Mapping[str, Callable[[Any], Any]] = field(
        default_factory=dict, compare=False, repr=False
    )

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_WORKFLOW_STATES

    def task(self, name: str) -> TaskRecord:
        for t in self.tasks:
            if t.name == name:
                return t
        raise KeyError(name)

    @property
    def results(self) -> dict[str, Any]:
        """The accepted results, by task name, as their tasks' declared types.

        A task declared with a Pydantic result type gives an instance of it when this
        record knows the workflow (records from ``WorkflowEngine.get`` / ``wait`` /
        ``run``, or ``Workflow.typed(record)``); otherwise the stored JSON.
        """
        return {
            t.name: self.loaders[t.name](t.result) if t.name in self.loaders else t.result
            for t in self.tasks
            if t.has_result
        }

    @property
    def stored_results(self) -> dict[str, Any]:
        """The accepted results, by task name, as the JSON the store keeps."""
        return {t.name: t.result for t in self.tasks if t.has_result}


@dataclass(frozen=True, slots=True)
class TaskProgress:
    id: str
    name: str
    state: TaskState
    depends_on: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RunProgress:
    """A run's and its tasks' states only: what scheduling needs, cheap to read."""

    id: str
    name: str
    state: WorkflowState
    tasks: tuple[TaskProgress, ...]

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_WORKFLOW_STATES


@dataclass(frozen=True, slots=True)
class Dependents:
    """After a task ended: its run's state and task counts, and the pending tasks that
    depend on it (what scheduling needs then, without every task's row)."""

    name: str
    state: WorkflowState
    total: int
    ended: int  # submitted, failed or cancelled
    submitted: int
    finished_state: str | None  # the state of the task that ended
    pending: tuple[TaskProgress, ...]

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_WORKFLOW_STATES


@dataclass(frozen=True, slots=True)
class TaskContext:
    """What a task turn starts from: its run's name and inputs, its dependencies' results."""

    workflow_id: str
    name: str
    inputs: Any
    results: Mapping[str, Any]  # dependency name -> its accepted result (those that have one)


@dataclass(frozen=True, slots=True)
class Transition:
    workflow_id: str
    task_id: str | None
    from_state: str | None
    to_state: str
    reason: str | None
    at: datetime


@dataclass(frozen=True, slots=True)
class RejectionRecord:
    task_id: str
    attempt: int
    submission_key: str | None
    value: Any
    reasons: tuple[str, ...]
    source: str
    at: datetime


@dataclass(frozen=True, slots=True)
class Acceptance:
    """What happened to one submission of a valid result.

    ``status``: ``stored`` (this submission's value is the task's result), ``duplicate``
    (this same submission was stored before), ``conflict`` (another submission's value
    was stored first) or ``not_running`` (the task is not running: cancelled, failed or
    not yet claimed). ``value`` is the stored value, when there is one.
    """

    status: Literal["stored", "duplicate", "conflict", "not_running"]
    state: str
    attempts: int
    value: Any = None


@dataclass(frozen=True, slots=True)
class RejectionOutcome:
    """A recorded rejection: ``attempt`` of ``max_attempts``; ``failed`` once none are left.

    ``status``: ``recorded``, ``duplicate`` (this submission key was rejected before and
    is not counted again) or ``not_running``.
    """

    status: Literal["recorded", "duplicate", "not_running"]
    attempt: int
    max_attempts: int
    failed: bool
    state: str


@dataclass(frozen=True, slots=True)
class CancelOutcome:
    cancelled: bool
    running: tuple[str, ...] = ()
    pending: tuple[str, ...] = ()
    state: str | None = None
