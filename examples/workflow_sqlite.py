"""A workflow with typed results, stored in SQLite: two tasks, the second uses the first.

Each task is a model turn that ends by calling submit_result with a value of the task's
result type; a value that does not validate is sent back to the model to fix.
"""

import asyncio
import tempfile
from pathlib import Path

from pydantic import BaseModel, Field

from tooldeck.providers import model_from_env
from tooldeck.workflows import SQLiteStore, Task, TaskRun, Workflow, WorkflowEngine
from tooldeck.workflows.scripted import submitting


class Findings(BaseModel):
    findings: list[str] = Field(min_length=1)


class Verdict(BaseModel):
    verdict: str
    reasons: int


workflow = Workflow(
    "brief",
    description="Findings about a topic, then a verdict.",
    inputs={"type": "object", "properties": {"topic": {"type": "string"}}, "required": ["topic"]},
    tasks=[
        Task("research", "List findings about the topic.", inputs=["topic"], result=Findings),
        Task(
            "verdict", "Give a verdict from the findings.", depends_on=["research"], result=Verdict
        ),
    ],
)


def model_for(run: TaskRun):  # offline: each task submits a result computed from its inputs
    if run.name == "research":
        offline = submitting(run, {"findings": ["quiet", "efficient", "costly to install"]})
    else:
        found = run.dependencies["research"]["findings"]
        offline = submitting(run, {"verdict": "recommended", "reasons": len(found)})
    return model_from_env(offline)


async def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        store = SQLiteStore(Path(folder) / "workflows.db")
        async with store, WorkflowEngine(store, model_for, catalog=[workflow]) as engine:
            run = await asyncio.wait_for(engine.run(workflow, {"topic": "heat pumps"}), 60)
    research: Findings = run.results["research"]
    verdict: Verdict = run.results["verdict"]
    print("state:", run.state)
    print("findings:", research.findings)
    print(f"verdict: {verdict.verdict} ({verdict.reasons} reasons, a {type(verdict).__name__})")


asyncio.run(main())
