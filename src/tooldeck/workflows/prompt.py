"""The first message of a workflow task turn: the task, its inputs, its dependencies'
results and, for a turn that follows one whose worker died, what that turn had rejected.

The rule (docs/workflows.md, the crash table): a rejected submission is the model's and
stays counted; a crash counts nothing. The turn that takes a task over is told each
earlier rejection (the value and why) and how many submissions are left, so it does not
spend another attempt on the same mistake.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .control import MAX_REASONS_SHOWN
from .store import RejectionRecord
from .store.protocol import safe_dumps
from .store.records import TaskRecord

__all__ = ["EARLIER_REJECTIONS_SHOWN", "earlier_rejections", "task_prompt"]

EARLIER_REJECTIONS_SHOWN = 5
_EARLIER_VALUE_LIMIT = 600


def earlier_rejections(rejections: Sequence[RejectionRecord]) -> str:
    """The rejections of a task's earlier turns, for the prompt of the turn that follows."""
    shown = list(rejections)[-EARLIER_REJECTIONS_SHOWN:]
    lines = [
        "Earlier submissions for this task were rejected, in a turn that stopped before "
        "it finished (its worker was lost). They count as attempts. Do not repeat them:"
    ]
    for r in shown:
        value = safe_dumps(r.value)
        if len(value) > _EARLIER_VALUE_LIMIT:
            value = value[: _EARLIER_VALUE_LIMIT - 1] + "…"
        lines.append(f"- attempt {r.attempt}: {value}")
        lines.extend(f"  - {reason}" for reason in r.reasons[:MAX_REASONS_SHOWN])
    if len(rejections) > len(shown):
        lines.insert(1, f"(the last {len(shown)} of {len(rejections)})")
    return "\n".join(lines)


def task_prompt(
    task: TaskRecord,
    inputs: Mapping[str, Any],
    deps: Mapping[str, Any],
    rejections: Sequence[RejectionRecord] = (),
) -> str:
    """The first message of a task turn; ``rejections``: those of its earlier turns."""
    parts = [f"Task: {task.name}"]
    if task.description:
        parts.append(task.description)
    parts.append(task.instructions.strip())
    parts.append("Inputs:\n" + json.dumps(dict(inputs), ensure_ascii=False, indent=2))
    if deps:
        parts.append(
            "Results of the tasks this one depends on:\n"
            + json.dumps(dict(deps), ensure_ascii=False, indent=2)
        )
    if rejections:
        parts.append(earlier_rejections(rejections))
    left = max(task.max_attempts - task.attempts, 0)
    if task.attempts:
        parts.append(
            f"Submit the result with submit_result ({left} of {task.max_attempts} "
            "submissions left)."
        )
    else:
        parts.append(
            f"Submit the result with submit_result (at most {task.max_attempts} submissions)."
        )
    return "\n\n".join(parts)
