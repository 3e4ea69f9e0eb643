"""A job "model" that tries to take a file out (a scripted stand-in, not a model).

Its task names a path (``read PATH``); it calls ``read_document`` on it and answers with
what came back, and with the tools it was offered: if the read was allowed, the file's
text is the job's result, reported to the session that made the job (issue 30's attack).
"""

from __future__ import annotations

from typing import Any

from tooldeck.model import ModelRequest
from tooldeck.testing import ScriptedModel, call, reply
from tooldeck.transcript import AssistantMessage, ToolOutput


def scripted_job_model(job: Any) -> ScriptedModel:
    path = job.task.split("read ", 1)[-1].split()[0]

    def step(request: ModelRequest) -> AssistantMessage:
        outputs = [item for item in request.transcript if isinstance(item, ToolOutput)]
        if not outputs:
            return reply(call("read_document", {"path": path}))
        offered = ",".join(sorted(t.name for t in request.tools))
        return reply(f"tools: {offered} | got: {outputs[-1].text}")

    return ScriptedModel(step)
