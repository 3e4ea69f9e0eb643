"""The spans of a workflow run: ``invoke_workflow {name}`` when it starts, one span per
task turn, in the same trace wherever the task runs.

A run outlives the call that starts it and its tasks may run in other processes, so
the run's span covers starting it (writing it, scheduling the first tasks); the tasks
are its children through the trace context they are handed: in-process, the context
the executor's task was made in; on a DBOS worker, the carrier that travelled in the
queued workflow's arguments (:func:`.propagation.carrier`, :func:`.propagation.joined`).
Each task's span holds its turn(s) (``invoke_agent`` spans); it ends with the task's
final state.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from . import names as n
from .settings import active
from .turns import turn_attributes

__all__ = ["TaskTrace", "task_started", "workflow_started"]


@contextlib.contextmanager
def workflow_started(name: str, workflow_id: str) -> Iterator[None]:
    """The ``invoke_workflow`` span, current while a run is written and scheduled."""
    tel = active()
    if tel is None or not tel.tracing:
        yield
        return
    with tel.tracer.start_as_current_span(
        f"{n.INVOKE_WORKFLOW} {name}",
        kind=SpanKind.INTERNAL,
        attributes={
            n.OPERATION: n.INVOKE_WORKFLOW,
            n.WORKFLOW_NAME: name,
            n.WORKFLOW_ID: workflow_id,
        },
    ):
        yield


class TaskTrace:
    """One task turn's span: current inside :meth:`current`, ended by :meth:`end`."""

    __slots__ = ("context", "span")

    def __init__(self, span: Any) -> None:
        self.span = span
        self.context = trace.set_span_in_context(span)

    @contextlib.contextmanager
    def current(self, task: str) -> Iterator[None]:
        """The span current, and the task's turns named after it (``invoke_agent {task}``)."""
        token = otel_context.attach(self.context)
        try:
            with turn_attributes({n.AGENT_NAME: task}):
                yield
        finally:
            otel_context.detach(token)

    def end(self, state: str | None, attempts: int | None) -> None:
        span = self.span
        if state is not None:
            span.set_attribute(n.TASK_STATE, state)
        if attempts is not None:
            span.set_attribute(n.TASK_ATTEMPTS, attempts)
        if state is not None and state != "submitted":
            span.set_attribute(n.ERROR_TYPE, state)
            span.set_status(Status(StatusCode.ERROR, state))
        span.end()


def task_started(
    workflow_id: str, workflow_name: str | None, task: str, session_id: str, worker: str | None
) -> TaskTrace | None:
    """The span of a task turn that starts now (``None`` when tracing is off)."""
    tel = active()
    if tel is None or not tel.tracing:
        return None
    attrs: dict[str, Any] = {
        n.WORKFLOW_ID: workflow_id,
        n.WORKFLOW_TASK: task,
        n.SESSION_ID: session_id,
    }
    if workflow_name:
        attrs[n.WORKFLOW_NAME] = workflow_name
    if worker:
        attrs[n.WORKFLOW_WORKER] = worker
    span = tel.tracer.start_span(
        f"{n.TASK_SPAN} {task}",
        otel_context.get_current(),
        kind=SpanKind.INTERNAL,
        attributes=attrs,
    )
    return TaskTrace(span)
