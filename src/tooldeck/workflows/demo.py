"""The offline workflow demo: a three-task workflow with a scripted model (not a real one).

``await run_demo_workflow(console, home)`` runs ``trip_brief`` against a SQLite store in
``home`` and shows live progress, then the stored run. One task's first submission is
wrong on purpose, so the demo shows a rejection and the fix within the same task turn.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from .._extras import needs_extra
from ..model import Model
from .definition import Task, Workflow
from .engine import TaskRun, WorkflowEngine
from .render import WorkflowProgress, workflow_table
from .scripted import submitting
from .store import SQLiteStore
from .store.records import WorkflowRecord
from .store.sqlite import default_db_path

with needs_extra("cli"):
    from rich.console import Console

__all__ = ["DEMO_INPUTS", "demo_workflow", "run_demo_workflow", "scripted_model"]


class Day(BaseModel):
    day: Annotated[int, Field(ge=1, description="Day number, from 1.")]
    morning: str
    afternoon: str


class Plan(BaseModel):
    """A day-by-day plan."""

    days: list[Day]
    pace: Literal["relaxed", "balanced", "packed"]


demo_workflow = Workflow(
    "trip_brief",
    description="Facts about a city, a day plan, and a one-line summary.",
    inputs={
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "days": {"type": "integer", "minimum": 1, "maximum": 7},
        },
        "required": ["city", "days"],
    },
    tasks=[
        Task(
            "facts",
            "Give the country, the languages spoken and the population of the city.",
            inputs=["city"],
            result={
                "type": "object",
                "properties": {
                    "country": {"type": "string"},
                    "languages": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                    "population": {"type": ["integer", "null"], "minimum": 0},
                },
                "required": ["country", "languages", "population"],
                "additionalProperties": False,
            },
        ),
        Task(
            "plan",
            "Plan each day of the trip: one thing in the morning, one in the afternoon.",
            depends_on=["facts"],
            result=Plan,
        ),
        Task(
            "summary",
            "Summarise the trip in one sentence.",
            depends_on=["facts", "plan"],
            result={"type": "string", "maxLength": 200},
        ),
    ],
)
DEMO_INPUTS: dict[str, Any] = {"city": "Lisbon", "days": 2}
_SIGHTS = ["the Alfama walk", "Belém tower", "the tram 28 ride", "LX Factory", "a fado evening"]


def scripted_model(run: TaskRun) -> Model:
    """The demo's scripted model (NOT a real model): results computed from the inputs."""
    if run.name == "facts":
        return submitting(
            run, {"country": "Portugal", "languages": ["Portuguese"], "population": 545_000}
        )
    if run.name == "plan":
        days = int(run.inputs.get("days", 2))
        good = [
            {
                "day": d + 1,
                "morning": _SIGHTS[(2 * d) % len(_SIGHTS)],
                "afternoon": _SIGHTS[(2 * d + 1) % len(_SIGHTS)],
            }
            for d in range(days)
        ]
        # First a day numbered 0 and a pace that is not in the enum: rejected, then fixed.
        wrong = [{**good[0], "day": 0}, *good[1:]]
        return submitting(
            run, {"days": wrong, "pace": "leisurely"}, {"days": good, "pace": "relaxed"}
        )
    facts = run.dependencies.get("facts") or {}
    plan = run.dependencies.get("plan") or {}
    country = facts.get("country", "?")
    count = len(plan.get("days", []))
    return submitting(
        run, f"{run.inputs.get('city', 'The city')}, {country}: {count} relaxed day(s)."
    )


async def run_demo_workflow(console: Console, home: Path, *, kept: bool = True) -> WorkflowRecord:
    """Run the demo workflow in ``home`` (a SQLite file under it) and print the outcome;
    ``kept``: whether ``home`` outlives the demo (else the store's path is not shown)."""
    console.rule("A workflow: three task turns, each submitting a schema-checked result")
    store = SQLiteStore(default_db_path(Path(home)))
    async with store:
        engine = WorkflowEngine(
            store, scripted_model, catalog=[demo_workflow], home=home, max_concurrency=2
        )
        async with engine:
            with WorkflowProgress(console).attach(engine.events):
                async with asyncio.timeout(60):
                    run = await engine.run(demo_workflow, DEMO_INPUTS)
        console.print(workflow_table(run))
        plan = run.task("plan")
        for rejection in await store.rejections(plan.id):
            console.print(
                f"[yellow]rejected[/yellow] plan submission {rejection.attempt} "
                f"({rejection.source}): " + "; ".join(rejection.reasons)
            )
        if kept:
            console.print(f"stored in {store.location}")
        else:
            console.print(
                "stored in a temporary folder, removed when the demo ends "
                "(tooldeck demo --keep keeps it)"
            )
    return run
