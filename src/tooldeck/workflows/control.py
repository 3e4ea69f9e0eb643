"""The control plane's side of ``submit_result``: validate again, then store exactly once.

The sub-agent's ``submit_result`` call has already been validated by the dispatcher
against the tool's schema, and a strict provider constrains it too. The control plane
trusts neither: it loads the result schema *stored* for the task, validates the value
against it with ``jsonschema_rs`` (formats included), and only then asks the store to
accept it. A task declared with a Pydantic result type is also checked by that type
(its validators may refuse more than the schema can say), so a stored result always
loads as the type. A rejection is recorded with its reasons and counted as an attempt;
it does not end the task turn unless the attempts are used up.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import jsonschema_rs

from ..result import ToolResult
from .store import StoreError, WorkflowStore
from .store.protocol import StoreUnavailable, dumps
from .store.records import TaskRecord

__all__ = ["MAX_REASONS_SHOWN", "format_path"]

MAX_REASONS_SHOWN = 8
_REASON_LIMIT = 300

SubmissionStatus = Literal[
    "stored", "duplicate", "conflict", "not_running", "rejected", "failed", "unknown_task"
]


def format_path(parts: Sequence[Any]) -> str:
    """A JSON path like ``$.items[2].price`` from an instance path."""
    out = "$"
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _clip(text: str) -> str:
    return text if len(text) <= _REASON_LIMIT else text[: _REASON_LIMIT - 1] + "…"


@dataclass(frozen=True, slots=True)
class Submission:
    """The outcome of one submission, and what the sub-agent is told about it."""

    status: SubmissionStatus
    task_id: str
    task_name: str = ""
    attempt: int = 0
    max_attempts: int = 0
    reasons: tuple[str, ...] = ()
    value: Any = None
    state: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def accepted(self) -> bool:
        """This submission's value is the task's result (now or from an earlier delivery)."""
        return self.status in ("stored", "duplicate")

    @property
    def ends_turn(self) -> bool:
        return self.status != "rejected"

    def tool_result(self) -> ToolResult:
        name = self.task_name or self.task_id
        details = {
            "status": self.status,
            "task_id": self.task_id,
            "attempt": self.attempt,
            "max_attempts": self.max_attempts,
            "reasons": list(self.reasons),
            **self.details,
        }
        if self.status == "stored":
            text = f"Accepted: the result of task {name!r} is stored. The task is complete."
            return ToolResult(text, details=details, terminate=True)
        if self.status == "duplicate":
            text = (
                f"Accepted earlier: this same submission is already stored as the result of "
                f"task {name!r}. The task is complete."
            )
            return ToolResult(text, details=details, terminate=True)
        if self.status == "conflict":
            text = (
                f"Not stored: task {name!r} already has a result from another submission, "
                "which stays. The task is complete; stop here."
            )
            return ToolResult(text, details=details, terminate=True)
        if self.status in ("not_running", "unknown_task"):
            text = f"Not stored: task {name!r} is {self.state or 'unknown'} and takes no result."
            return ToolResult(text, details=details, is_error=True, terminate=True)
        shown = [f"- {_clip(r)}" for r in self.reasons[:MAX_REASONS_SHOWN]]
        if len(self.reasons) > MAX_REASONS_SHOWN:
            shown.append(f"- and {len(self.reasons) - MAX_REASONS_SHOWN} more")
        head = (
            f"Rejected (attempt {self.attempt} of {self.max_attempts}): the value does not "
            "match the result schema:\n" + "\n".join(shown)
        )
        if self.status == "failed":
            text = f"{head}\nNo attempts are left: task {name!r} has failed."
            return ToolResult(text, details=details, is_error=True, terminate=True)
        left = self.max_attempts - self.attempt
        text = (
            f"{head}\nFix the value and call submit_result again with the whole corrected "
            f"result ({left} attempt(s) left)."
        )
        return ToolResult(text, details=details, is_error=True)


class ControlPlane:
    """Validates submissions against the stored schema and records every outcome."""

    def __init__(self, store: WorkflowStore):
        self.store = store
        self._validators: dict[str, Any] = {}

    def _validator(self, schema: Any) -> Any:
        key = json.dumps(schema, sort_keys=True)
        validator = self._validators.get(key)
        if validator is None:
            validator = jsonschema_rs.validator_for(schema, validate_formats=True)
            self._validators[key] = validator
        return validator

    def problems(self, schema: Any, value: Any) -> list[str]:
        """What is wrong with ``value`` for ``schema`` (empty when it is valid)."""
        try:
            dumps(value)
        except (TypeError, ValueError) as exc:
            return [f"$: not a JSON value ({exc})"]
        return [
            f"{format_path(e.instance_path)}: {e.message}"
            for e in self._validator(schema).iter_errors(value)
        ]

    async def submit(
        self,
        task_id: str,
        value: Any,
        *,
        submission_key: str,
        check: Callable[[Any], list[str]] | None = None,
        task: TaskRecord | None = None,
    ) -> Submission:
        """Validate ``value`` against the task's stored schema; store it or reject it.

        ``check`` (the declared result type's :meth:`~tooldeck.workflows.Task.result_problems`)
        runs on a value the schema accepts; what it finds rejects the value too. ``task``:
        the task's record as read from the store (a task turn has it; its schema and bounds
        never change), so it need not be read again; without it, it is.
        """
        if task is None or task.id != task_id:
            task = await self.store.get_task(task_id)
        if task is None:
            return Submission("unknown_task", task_id, state="unknown")
        problems = self.problems(task.result_schema, value)
        if not problems and check is not None:
            problems = check(value)
        if problems:
            return await self.reject(
                task_id,
                value,
                problems,
                submission_key=submission_key,
                source="control_plane",
                task_name=task.name,
            )
        try:
            outcome = await self.store.accept_result(task_id, value, submission_key=submission_key)
        except StoreUnavailable:
            raise  # not an answer about the task: the caller retries the step
        except StoreError:
            return Submission("unknown_task", task_id, task.name, state="unknown")
        return Submission(
            outcome.status,
            task_id,
            task.name,
            outcome.attempts,
            task.max_attempts,
            value=outcome.value,
            state=outcome.state,
        )

    async def reject(
        self,
        task_id: str,
        value: Any,
        reasons: Sequence[str],
        *,
        submission_key: str | None,
        source: str,
        task_name: str = "",
    ) -> Submission:
        """Record a rejected submission (from this plane or from argument validation)."""
        outcome = await self.store.record_rejection(
            task_id, value, reasons, submission_key=submission_key, source=source
        )
        if outcome.status == "not_running" and not outcome.failed:
            return Submission(
                "not_running",
                task_id,
                task_name,
                outcome.attempt,
                outcome.max_attempts,
                tuple(reasons),
                state=outcome.state,
            )
        status: SubmissionStatus = "failed" if outcome.failed else "rejected"
        return Submission(
            status,
            task_id,
            task_name,
            outcome.attempt,
            outcome.max_attempts,
            tuple(reasons),
            state=outcome.state,
            details={"source": source, "recorded": outcome.status},
        )
