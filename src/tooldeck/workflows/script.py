"""Workflow scripts: Python files that define workflows (and, optionally, a scripted model).

A script is run as a module (``runpy``). It defines one or more :class:`Workflow`
objects at module level (conventionally named ``workflow``) and may define
``scripted_model(run: TaskRun) -> Model``, a model factory for offline runs: the CLI uses
it when no ``--model`` is given. Definition errors (a bad result schema, a cycle...)
surface when the script is loaded, before anything runs.
"""

from __future__ import annotations

import runpy
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .definition import Workflow
from .engine import ModelFactory
from .shapes import WorkflowDefinitionError

__all__ = ["SCRIPTED_MODEL_NAME"]

SCRIPTED_MODEL_NAME = "scripted_model"


@dataclass(frozen=True, slots=True)
class WorkflowScript:
    path: Path
    workflows: Mapping[str, Workflow]
    scripted_model: ModelFactory | None

    def workflow(self, name: str | None = None) -> Workflow:
        """The workflow named ``name``, or the script's only one."""
        if name is not None:
            if name not in self.workflows:
                known = ", ".join(self.workflows) or "none"
                raise WorkflowDefinitionError(
                    f"{self.path}: no workflow named {name!r} (defined: {known})"
                )
            return self.workflows[name]
        if len(self.workflows) != 1:
            raise WorkflowDefinitionError(
                f"{self.path} defines {len(self.workflows)} workflows "
                f"({', '.join(self.workflows)}); choose one with --workflow NAME"
            )
        return next(iter(self.workflows.values()))


def load_script(path: str | Path) -> WorkflowScript:
    """Run the script at ``path`` and collect its workflows and scripted model factory."""
    file = Path(path)
    if not file.is_file():
        raise WorkflowDefinitionError(f"no workflow script at {file}")
    namespace: dict[str, Any] = runpy.run_path(str(file), run_name="__tooldeck_workflow__")
    workflows: dict[str, Workflow] = {}
    for value in namespace.values():
        if isinstance(value, Workflow) and value.name not in workflows:
            workflows[value.name] = value
    if not workflows:
        raise WorkflowDefinitionError(f"{file} defines no Workflow at module level")
    factory = namespace.get(SCRIPTED_MODEL_NAME)
    if factory is not None and not callable(factory):
        raise WorkflowDefinitionError(f"{file}: {SCRIPTED_MODEL_NAME} must be a function")
    return WorkflowScript(file, workflows, factory)
