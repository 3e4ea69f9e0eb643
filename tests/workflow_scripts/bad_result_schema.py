"""An example of a workflow script that is refused when it is loaded: an open result shape."""

from tooldeck.workflows import Task, Workflow

workflow = Workflow(
    "open_shape",
    tasks=[
        Task(
            "tags",
            "Tag the text.",
            result={
                "type": "object",
                "properties": {
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}}
                },
                "required": ["labels"],
                "additionalProperties": False,
            },
        )
    ],
)
