"""Following a run whose task turns run elsewhere (``tooldeck worker`` processes).

:func:`follow_run` reads the store every ``poll_interval`` seconds and turns what changed
into the engine's events, so a progress view shows a run on workers as it shows one run
here:

- :class:`~tooldeck.workflows.events.TaskStateChanged` for each task whose state or
  attempts changed;
- :class:`~tooldeck.workflows.events.TaskNote` for what a run on workers goes through
  that its states alone hide: a submission **rejected** (with the reasons the model was
  given) and a turn **restarted** (a ``running -> running`` transition in the task's
  history: its worker was lost and another took it over, a worker restarted under its id
  recovered it, or DBOS ran a failed step again; the note is the history's reason);
- :class:`~tooldeck.workflows.events.WorkflowStateChanged` once, when the run ends.

Each restart and each rejection is noted once, in the order the store recorded it for
its task.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from ..events import Event
from .events import TaskNote, TaskStateChanged, WorkflowStateChanged, reasons_line
from .store import WorkflowStore

__all__ = ["follow_run"]


def _rejected(attempt: int, max_attempts: int, reasons: tuple[str, ...]) -> str:
    return f"submission {attempt} of {max_attempts} rejected: {reasons_line(reasons)}"


async def follow_run(
    store: WorkflowStore,
    emit: Callable[[Event], Awaitable[None]],
    workflow_id: str,
    poll_interval: float = 0.5,
) -> None:
    """Emit the changes of run ``workflow_id`` until it ends (see the module docstring).

    Raises :class:`LookupError` if there is no such run.
    """
    seen: dict[str, tuple[str, int]] = {}
    # counted per task: workers commit transitions of different tasks out of id order,
    # but the restarts of one task are one after another (each takes its row)
    restarts_seen: dict[str, int] = {}
    rejections_seen: dict[str, int] = {}
    while True:
        wf = await store.get_workflow(workflow_id)
        if wf is None:
            raise LookupError(f"no workflow run {workflow_id!r}")
        names = {t.id: t.name for t in wf.tasks}
        restarts: dict[str, list[str]] = {}
        for tr in await store.transitions(workflow_id):
            if tr.task_id is not None and tr.from_state == tr.to_state == "running":
                restarts.setdefault(tr.task_id, []).append(tr.reason or "no reason recorded")
        for task_id, reasons in restarts.items():
            for reason in reasons[restarts_seen.get(task_id, 0) :]:
                task = names.get(task_id, task_id)
                await emit(TaskNote(workflow_id, task, "restarted", f"turn restarted: {reason}"))
            restarts_seen[task_id] = len(reasons)
        for t in wf.tasks:
            if seen.get(t.name, ("pending", 0)) != (t.state, t.attempts):
                # a rejection is stored with the attempt it counts: read them only then
                if t.attempts > rejections_seen.get(t.id, 0):
                    records = await store.rejections(t.id)
                    for r in records[rejections_seen.get(t.id, 0) :]:
                        text = _rejected(r.attempt, t.max_attempts, r.reasons)
                        await emit(TaskNote(workflow_id, t.name, "rejected", text))
                    rejections_seen[t.id] = len(records)
                seen[t.name] = (t.state, t.attempts)
                await emit(
                    TaskStateChanged(
                        workflow_id, t.name, t.state, t.attempts, t.max_attempts, t.error
                    )
                )
        if wf.terminal:
            await emit(WorkflowStateChanged(workflow_id, wf.name, wf.state, wf.error))
            return
        await asyncio.sleep(poll_interval)
