"""An example workflow script: a research brief in four tasks (fan-out, then fan-in).

Run it offline (its scripted model is NOT a real model; it replays fixed answers):

    tooldeck workflows run tests/workflow_scripts/research_brief.py \
        --inputs '{"topic": "heat pumps", "audience": "homeowners"}'

or with a real model: add ``--model openai:gpt-5.4`` (needs OPENAI_API_KEY).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from tooldeck.model import Model
from tooldeck.workflows import Task, TaskRun, Workflow
from tooldeck.workflows.scripted import submitting


class Finding(BaseModel):
    claim: str = Field(description="One sentence.")
    confidence: Literal["low", "medium", "high"]


class Findings(BaseModel):
    """What is known about one side of the topic."""

    findings: list[Finding] = Field(min_length=1)


OUTLINE = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "minLength": 3},
        "sections": {"type": "array", "items": {"type": "string"}, "minItems": 2},
    },
    "required": ["title", "sections"],
    "additionalProperties": False,
}

workflow = Workflow(
    "research_brief",
    description="Benefits and drawbacks of a topic, then an outline and a verdict.",
    inputs={
        "type": "object",
        "properties": {"topic": {"type": "string"}, "audience": {"type": "string"}},
        "required": ["topic"],
    },
    tasks=[
        Task("benefits", "List the main benefits of the topic.", inputs=["topic"], result=Findings),
        Task(
            "drawbacks", "List the main drawbacks of the topic.", inputs=["topic"], result=Findings
        ),
        Task(
            "outline",
            "Write the outline of a brief for the audience from the findings.",
            depends_on=["benefits", "drawbacks"],
            result=OUTLINE,
        ),
        Task(
            "verdict",
            "Give a one-word verdict for the audience.",
            depends_on=["outline"],
            result={"type": ["string", "null"], "enum": ["recommended", "mixed", "avoid", None]},
            max_attempts=2,
        ),
    ],
)


def scripted_model(run: TaskRun) -> Model:
    """Offline answers (a scripted stand-in, not a real model)."""
    topic = run.inputs.get("topic", "the topic")
    if run.name == "benefits":
        return submitting(
            run, {"findings": [{"claim": f"{topic} save energy", "confidence": "high"}]}
        )
    if run.name == "drawbacks":
        return submitting(
            run, {"findings": [{"claim": f"{topic} cost more up front", "confidence": "medium"}]}
        )
    if run.name == "outline":
        pros = run.dependencies["benefits"]["findings"]
        cons = run.dependencies["drawbacks"]["findings"]
        sections = [f["claim"] for f in pros + cons]
        # First without the required title (rejected), then complete.
        return submitting(
            run, {"sections": sections}, {"title": f"On {topic}", "sections": sections}
        )
    return submitting(run, "recommended")
