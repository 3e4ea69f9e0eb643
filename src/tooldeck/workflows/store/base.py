"""The workflow store's interface, :class:`WorkflowStore`, over :mod:`.ops`.

The records are in :mod:`.records`, the statements protocol in :mod:`.protocol`, and every
operation (with the guarantees the database gives) in :mod:`.ops`; both drivers
(:mod:`.sqlite`, :mod:`.postgres`) implement :meth:`WorkflowStore._run`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from types import TracebackType
from typing import Any

from .ops import (
    op_accept_result,
    op_cancel_workflow,
    op_claim_task,
    op_count_results,
    op_create_workflow,
    op_dependents,
    op_find_workflows,
    op_get_task,
    op_get_workflow,
    op_list_workflows,
    op_progress,
    op_record_rejection,
    op_rejections,
    op_resume_task,
    op_set_task_state,
    op_set_workflow_state,
    op_task_context,
    op_task_owner,
    op_task_state,
    op_transitions,
    op_workflow_state,
)
from .protocol import OpFactory, T, TaskState, WorkflowState, now
from .records import (
    Acceptance,
    CancelOutcome,
    Dependents,
    NewTask,
    RejectionOutcome,
    RejectionRecord,
    RunProgress,
    TaskContext,
    TaskRecord,
    Transition,
    WorkflowRecord,
)

# -- the interface ----------------------------------------------------------------------------


class WorkflowStore(ABC):
    """Where workflow runs, tasks, transitions, rejections and results are kept.

    Two implementations: :class:`~tooldeck.workflows.store.SQLiteStore` (the default, a
    file) and :class:`~tooldeck.workflows.store.PostgresStore` (psycopg 3, async). Both
    create their tables themselves through numbered migrations recorded in
    ``schema_version``. Use ``async with store:`` (or :meth:`open` / :meth:`close`).
    """

    kind: str = "store"

    @abstractmethod
    async def open(self) -> None:
        """Connect and bring the tables up to date (idempotent)."""

    @abstractmethod
    async def close(self) -> None: ...

    @abstractmethod
    async def _run(
        self, op: OpFactory[T], *, write: bool = True, retry_for: float | None = None
    ) -> T:
        """Make the operation with ``op`` (``lambda: op_x(...)``), run it in one
        transaction and return its value (``write=False``: a read, which may run without a
        transaction when the database's isolation makes one moot).

        Any other shape is a ``TypeError`` (:func:`~.protocol.make_op`). A driver whose
        connections can drop (PostgreSQL) makes and runs the operation again on a fresh
        connection, for up to its ``retry_for`` seconds (``retry_for=`` here: this call's
        own window); every operation is idempotent for a retry after a commit whose
        answer was lost (keyed submissions, conditional updates that recognise their own
        earlier write, the call's time fixed in the rows it writes)."""

    @property
    @abstractmethod
    def location(self) -> str:
        """Where the data lives, for messages (a path or a DSN without its password)."""

    async def __aenter__(self) -> WorkflowStore:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @abstractmethod
    async def schema_version(self) -> int: ...

    # writes
    async def create_workflow(
        self, workflow_id: str, name: str, inputs: Any, tasks: Sequence[NewTask]
    ) -> None:
        at = now()  # fixed for a retry: the run it finds written at ``at`` is its own
        await self._run(lambda: op_create_workflow(workflow_id, name, inputs, tasks, at))

    async def set_workflow_state(
        self,
        workflow_id: str,
        to: WorkflowState,
        *,
        expect: Sequence[str] = ("pending", "running"),
        error: str | None = None,
    ) -> bool:
        return await self._run(lambda: op_set_workflow_state(workflow_id, to, tuple(expect), error))

    async def claim_task(self, task_id: str, session_id: str) -> bool:
        """``pending -> running`` for one worker; ``False`` when it was not pending."""
        return await self.claim(task_id, session_id) is not None

    async def claim(self, task_id: str, session_id: str) -> TaskRecord | None:
        """:meth:`claim_task`, returning the claimed task's record (``None``: not claimed)."""
        return await self._run(lambda: op_claim_task(task_id, session_id))

    async def resume_task(self, task_id: str, session_id: str, reason: str) -> str | None:
        """Give a ``running`` task whose worker was lost to ``session_id``.

        Returns the session that held it, ``None`` when the task is not running.
        """
        return await self._run(lambda: op_resume_task(task_id, session_id, reason))

    async def set_task_state(
        self,
        task_id: str,
        to: TaskState,
        *,
        expect: Sequence[str],
        reason: str | None = None,
        owner: str | None = None,
    ) -> bool:
        """Move the task to ``to`` if its state is in ``expect`` (and, given ``owner``,
        only while that session holds it)."""
        return await self._run(lambda: op_set_task_state(task_id, to, tuple(expect), reason, owner))

    async def accept_result(self, task_id: str, value: Any, *, submission_key: str) -> Acceptance:
        """Store ``value`` as the task's result, exactly once (see :class:`Acceptance`)."""
        return await self._run(lambda: op_accept_result(task_id, value, submission_key))

    async def record_rejection(
        self,
        task_id: str,
        value: Any,
        reasons: Sequence[str],
        *,
        submission_key: str | None = None,
        source: str = "control_plane",
    ) -> RejectionOutcome:
        """Count one rejected submission; the task fails when its attempts run out.

        Counted once per ``submission_key``; one without a key, once per call (its time,
        fixed for a retry, marks its row)."""
        at, why = now(), tuple(reasons)
        return await self._run(
            lambda: op_record_rejection(task_id, value, why, submission_key, source, at)
        )

    async def cancel_workflow(self, workflow_id: str, reason: str) -> CancelOutcome:
        """Cancel the run and every task not yet finished, in one transaction."""
        return await self._run(lambda: op_cancel_workflow(workflow_id, reason))

    # reads
    async def get_task(self, task_id: str) -> TaskRecord | None:
        return await self._run(lambda: op_get_task(task_id), write=False)

    async def task_owner(self, task_id: str) -> tuple[str, str | None] | None:
        """``(state, session_id)`` of a task, or ``None`` when there is no such task."""
        return await self._run(lambda: op_task_owner(task_id), write=False)

    async def task_state(self, task_id: str) -> str | None:
        return await self._run(lambda: op_task_state(task_id), write=False)

    async def get_workflow(self, workflow_id: str) -> WorkflowRecord | None:
        return await self._run(lambda: op_get_workflow(workflow_id), write=False)

    async def workflow_state(self, workflow_id: str) -> str | None:
        """The run's state only (``None`` when there is no such run)."""
        return await self._run(lambda: op_workflow_state(workflow_id), write=False)

    async def task_context(self, task: TaskRecord) -> TaskContext | None:
        """The run's name and inputs and the results of ``task``'s dependencies."""
        return await self._run(
            lambda: op_task_context(task.workflow_id, task.depends_on), write=False
        )

    async def dependents(self, workflow_id: str, name: str) -> Dependents | None:
        """The run's task counts and the pending tasks that depend on the task ``name``."""
        return await self._run(lambda: op_dependents(workflow_id, name), write=False)

    async def progress(self, workflow_id: str) -> RunProgress | None:
        """The run's state and its tasks' states and dependencies (no results)."""
        return await self._run(lambda: op_progress(workflow_id), write=False)

    async def find_workflows(self, prefix: str) -> list[str]:
        """Ids that start with ``prefix`` (newest first, at most 10)."""
        return await self._run(lambda: op_find_workflows(prefix), write=False)

    async def list_workflows(
        self, *, limit: int = 50, state: str | None = None
    ) -> list[WorkflowRecord]:
        """Runs, newest first, with task counts (``tasks`` left empty)."""
        return await self._run(lambda: op_list_workflows(limit, state), write=False)

    async def transitions(self, workflow_id: str, task_id: str | None = None) -> list[Transition]:
        return await self._run(lambda: op_transitions(workflow_id, task_id), write=False)

    async def rejections(self, task_id: str) -> list[RejectionRecord]:
        return await self._run(lambda: op_rejections(task_id), write=False)

    async def count_results(self, task_id: str) -> int:
        return await self._run(lambda: op_count_results(task_id), write=False)
