"""One task whose first turn submits a value the schema rejects, then hangs (so a test
can kill its worker); a turn told about that rejection submits a valid value, naming the
reason it was shown. The scripted model is not a real model."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from tooldeck.model import ModelDelta, ModelRequest
from tooldeck.transcript import AssistantMessage
from tooldeck.workflows import Task, TaskRun, Workflow
from tooldeck.workflows.scripted import submitting

RESULT = {
    "type": "object",
    "properties": {"n": {"type": "integer", "minimum": 10}, "saw": {"type": "string"}},
    "required": ["n", "saw"],
    "additionalProperties": False,
}

workflow = Workflow("reject_then_hang", [Task("pick", "Pick a number.", result=RESULT)])


class Hanging:
    """Plays ``inner`` for one step, then waits for ever (until the worker is killed)."""

    def __init__(self, inner: object):
        self.inner = inner
        self.name = "hanging"

    async def respond(self, request: ModelRequest) -> AssistantMessage:
        if any(isinstance(item, AssistantMessage) for item in request.transcript):
            await asyncio.Event().wait()
        return await self.inner.respond(request)  # type: ignore[attr-defined, no-any-return]

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta | AssistantMessage]:
        yield await self.respond(request)


def scripted_model(run: TaskRun) -> object:
    if "were rejected" in run.prompt:
        seen = next(line for line in run.prompt.splitlines() if "less than the minimum" in line)
        return submitting(run, {"n": 10, "saw": seen.strip()})
    return Hanging(submitting(run, {"n": 1, "saw": ""}))
