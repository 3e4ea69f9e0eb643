"""The same kind of workflow on PostgreSQL: typed results, stored in a schema of their own.

Needs a PostgreSQL server: TOOLDECK_PG_DSN (default postgresql://postgres@127.0.0.1:5432/test).
Runs spread over worker processes use the same store with DbosExecutor (docs/workflows.md).
"""

import asyncio
import os

from pydantic import BaseModel

from tooldeck.providers import model_from_env
from tooldeck.workflows import PostgresStore, Task, TaskRun, Workflow, WorkflowEngine
from tooldeck.workflows.scripted import submitting

DSN = os.environ.get("TOOLDECK_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")


class Estimate(BaseModel):
    low: int
    high: int


workflow = Workflow(
    "estimate",
    description="A cost estimate, then a one-line summary.",
    inputs={"type": "object", "properties": {"job": {"type": "string"}}, "required": ["job"]},
    tasks=[
        Task("estimate", "Estimate the cost in euros.", inputs=["job"], result=Estimate),
        Task(
            "summary",
            "Summarise the estimate in one line.",
            depends_on=["estimate"],
            result={"type": "string", "maxLength": 120},
        ),
    ],
)


def model_for(run: TaskRun):
    if run.name == "estimate":
        return model_from_env(submitting(run, {"low": 8000, "high": 12000}))
    cost = run.dependencies["estimate"]
    return model_from_env(submitting(run, f"Between {cost['low']} and {cost['high']} euros."))


async def main() -> None:
    store = PostgresStore(DSN, schema="tooldeck_examples")
    async with store, WorkflowEngine(store, model_for, catalog=[workflow]) as engine:
        run = await asyncio.wait_for(engine.run(workflow, {"job": "a heat pump"}), 60)
        stored = await store.get_workflow(run.id)
    estimate: Estimate = run.results["estimate"]
    print("state:", run.state, "| stored in PostgreSQL as", stored.state if stored else None)
    print(f"estimate: {estimate.low}-{estimate.high} ({type(estimate).__name__})")
    print("summary:", run.results["summary"])


asyncio.run(main())
