"""A wide workflow for the worker tests: N independent ``item_NN`` tasks, then ``total``.

Each item task submits ``{"n": NN, "square": NN*NN}``; ``total`` sums the squares from its
dependencies' results. The scripted model (not a real model) waits
``TOOLDECK_TEST_STEP_DELAY`` seconds (default 0) before each step, so a test can kill a
worker while turns are in flight. ``TOOLDECK_TEST_ITEMS`` sets N (default 50). With
``TOOLDECK_TEST_REJECT_EVERY=K``, every K-th item first submits a value without its square
(rejected), then the right one; a turn told about an earlier rejection submits the right
one at once.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator

from tooldeck.model import ModelDelta, ModelRequest
from tooldeck.transcript import AssistantMessage
from tooldeck.workflows import Task, TaskRun, Workflow
from tooldeck.workflows.scripted import submitting

ITEMS = int(os.environ.get("TOOLDECK_TEST_ITEMS", "50"))
DELAY = float(os.environ.get("TOOLDECK_TEST_STEP_DELAY", "0"))
REJECT_EVERY = int(os.environ.get("TOOLDECK_TEST_REJECT_EVERY", "0"))

ITEM_RESULT = {
    "type": "object",
    "properties": {"n": {"type": "integer"}, "square": {"type": "integer"}},
    "required": ["n", "square"],
    "additionalProperties": False,
}
TOTAL_RESULT = {
    "type": "object",
    "properties": {"items": {"type": "integer"}, "sum_of_squares": {"type": "integer"}},
    "required": ["items", "sum_of_squares"],
    "additionalProperties": False,
}

items = [Task(f"item_{i:02d}", f"Square the number {i}.", result=ITEM_RESULT) for i in range(ITEMS)]
workflow = Workflow(
    "fan_out",
    [
        *items,
        Task(
            "total",
            "Add up the squares of every item.",
            result=TOTAL_RESULT,
            depends_on=[t.name for t in items],
        ),
    ],
)


class Delayed:
    """A scripted model that waits before each step (still not a real model)."""

    def __init__(self, inner: object, delay: float):
        self.inner = inner
        self.delay = delay
        self.name = f"delayed:{getattr(inner, 'name', 'scripted')}"

    async def respond(self, request: ModelRequest) -> AssistantMessage:
        await asyncio.sleep(self.delay)
        return await self.inner.respond(request)  # type: ignore[attr-defined, no-any-return]

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta | AssistantMessage]:
        yield await self.respond(request)


def scripted_model(run: TaskRun) -> Delayed:
    if run.name == "total":
        squares = [r["square"] for r in run.dependencies.values()]
        value = {"items": len(squares), "sum_of_squares": sum(squares)}
    else:
        n = int(run.name.split("_")[1])
        value = {"n": n, "square": n * n}
        if REJECT_EVERY and n % REJECT_EVERY == 0 and "were rejected" not in run.prompt:
            return Delayed(submitting(run, {"n": n}, value), DELAY)
    return Delayed(submitting(run, value), DELAY)
