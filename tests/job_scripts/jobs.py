"""Job models for the process tests (scripted stand-ins, not models).

A task containing ``hang`` hangs in its model call on its first attempt (the test kills
the process then); every other answer is immediate and names the attempt.
"""

from __future__ import annotations

import asyncio
from typing import Any

from tooldeck.model import ModelRequest
from tooldeck.testing import ScriptedModel, reply
from tooldeck.transcript import AssistantMessage


class Hang(ScriptedModel):
    async def respond(self, request: ModelRequest) -> AssistantMessage:
        print("job model hangs", flush=True)
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


def scripted_job_model(job: Any) -> ScriptedModel:
    if "hang" in job.task and job.attempts == 1:
        return Hang([])
    return ScriptedModel([reply(f"done: {job.task} (attempt {job.attempts})")])
