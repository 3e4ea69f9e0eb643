"""Workflow definitions: :class:`Task` and :class:`Workflow`, checked when they are built.

A workflow is a small DAG of tasks. Each task has instructions, the names of the
workflow inputs it is given, the tasks whose results it is given (``depends_on``), and a
result schema limited to closed shapes (see :mod:`tooldeck.workflows.shapes`). Every
problem is found when the workflow is defined, never when it runs: a bad name, an
unknown dependency, a cycle, an input the workflow does not declare, a result schema
that is not closed.

A task declared with a Pydantic result type (``result=Ticket``) gets its results back as
``Ticket`` instances (:meth:`Task.load_result`, :meth:`Workflow.typed`): the store keeps
JSON, which any process can read, and the type turns it back into the object the
definition promised.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import jsonschema_rs
from pydantic import BaseModel, ValidationError

from .shapes import ResultSchema, WorkflowDefinitionError, result_schema

if TYPE_CHECKING:
    from .store.records import WorkflowRecord

__all__ = ["NAME_PATTERN"]

NAME_PATTERN = re.compile(r"^[a-zA-Z][a-zA-Z0-9_-]{0,63}$")
DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_MAX_STEPS = 12


def _check_name(kind: str, name: Any) -> str:
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise WorkflowDefinitionError(
            f"{kind} {name!r} must start with a letter and use letters, digits, '_' and '-' "
            "(at most 64 characters)"
        )
    return name


@dataclass(frozen=True)
class Task:
    """One task of a workflow: a sub-agent turn that must submit a result of a fixed shape.

    - ``name``: unique in its workflow (letters, digits, ``_``, ``-``);
    - ``instructions``: what the sub-agent must do;
    - ``result``: the result schema, a JSON Schema ``dict`` or a Pydantic model class,
      limited to closed shapes (checked here; see ``docs/workflows.md``);
    - ``inputs``: names of the workflow inputs this task is given (``None``: all);
    - ``depends_on``: tasks whose accepted results this task is given; it starts only
      after all of them have submitted;
    - ``max_attempts``: submissions allowed before the task fails (rejections count);
    - ``max_steps``: the sub-agent's step budget.
    """

    name: str
    instructions: str
    result: Mapping[str, Any] | type[BaseModel]
    inputs: Sequence[str] | None = None
    depends_on: Sequence[str] = ()
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    max_steps: int = DEFAULT_MAX_STEPS
    description: str = ""
    schema: ResultSchema = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_name("task name", self.name)
        if not isinstance(self.instructions, str) or not self.instructions.strip():
            raise WorkflowDefinitionError(f"task {self.name!r}: instructions must be a text")
        for what, value in (("max_attempts", self.max_attempts), ("max_steps", self.max_steps)):
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 100:
                raise WorkflowDefinitionError(
                    f"task {self.name!r}: {what} must be an integer from 1 to 100, got {value!r}"
                )
        if isinstance(self.depends_on, str):
            object.__setattr__(self, "depends_on", (self.depends_on,))
        object.__setattr__(self, "depends_on", tuple(self.depends_on))
        if self.inputs is not None:
            if isinstance(self.inputs, str):
                object.__setattr__(self, "inputs", (self.inputs,))
            object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "schema", result_schema(self.result, f"task {self.name!r}"))

    @property
    def result_type(self) -> type[BaseModel] | None:
        """The Pydantic model class the result was declared with, or ``None``."""
        kind = self.result
        return kind if isinstance(kind, type) and issubclass(kind, BaseModel) else None

    def result_problems(self, value: Any) -> list[str]:
        """What the declared result type refuses in ``value`` (JSON data; empty when valid).

        Only a Pydantic result type can refuse more than the schema (its validators).
        """
        kind = self.result_type
        if kind is None:
            return []
        try:
            kind.model_validate_json(json.dumps(value))
        except ValidationError as exc:
            return [
                "$"
                + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in e["loc"])
                + f": {e['msg']}"
                for e in exc.errors(include_url=False)
            ]
        except (TypeError, ValueError) as exc:
            return [f"$: not JSON data ({exc})"]
        return []

    def load_result(self, value: Any) -> Any:
        """A stored result as the declared type: a Pydantic instance, else ``value`` itself.

        Raises ``ValueError`` when the stored JSON does not load as the type (the type
        changed since it was stored, say).
        """
        kind = self.result_type
        if kind is None:
            return value
        problems = self.result_problems(value)
        if problems:
            raise ValueError(
                f"task {self.name!r}: the stored result does not load as {kind.__name__}: "
                + "; ".join(problems[:5])
            )
        return kind.model_validate_json(json.dumps(value))


def _input_schema(source: Mapping[str, Any] | type[BaseModel] | None, name: str) -> dict[str, Any]:
    if source is None:
        return {"type": "object"}
    if isinstance(source, type) and issubclass(source, BaseModel):
        from .._parameters import schema_of

        return dict(schema_of(source))
    if not isinstance(source, Mapping):
        raise WorkflowDefinitionError(
            f"workflow {name!r}: inputs must be a JSON Schema or a Pydantic model class"
        )
    schema = dict(source)
    if schema.get("type") != "object":
        raise WorkflowDefinitionError(f"workflow {name!r}: the inputs schema must be an object")
    try:
        jsonschema_rs.meta.validate(schema)
        jsonschema_rs.validator_for(schema)
    except Exception as exc:
        raise WorkflowDefinitionError(
            f"workflow {name!r}: the inputs schema is not a valid JSON Schema: {exc}"
        ) from exc
    return schema


class Workflow:
    """A named DAG of :class:`Task`\\ s.

    ``inputs`` is an optional JSON Schema (or Pydantic model) for the inputs a run is
    started with; they are validated when a run starts. Tasks are kept in a dependency
    order (each after every task it depends on), stable with respect to the given order.
    """

    def __init__(
        self,
        name: str,
        tasks: Iterable[Task],
        *,
        description: str = "",
        inputs: Mapping[str, Any] | type[BaseModel] | None = None,
    ) -> None:
        self.name = _check_name("workflow name", name)
        self.description = description
        self.input_schema = _input_schema(inputs, name)
        given = list(tasks)
        if not given:
            raise WorkflowDefinitionError(f"workflow {name!r} has no tasks")
        by_name: dict[str, Task] = {}
        for task in given:
            if not isinstance(task, Task):
                raise WorkflowDefinitionError(f"workflow {name!r}: {task!r} is not a Task")
            if task.name in by_name:
                raise WorkflowDefinitionError(f"workflow {name!r}: two tasks named {task.name!r}")
            by_name[task.name] = task
        declared = self.input_schema.get("properties")
        problems: list[str] = []
        for task in given:
            for dep in task.depends_on:
                if dep not in by_name:
                    problems.append(f"task {task.name!r} depends on unknown task {dep!r}")
                elif dep == task.name:
                    problems.append(f"task {task.name!r} depends on itself")
            if task.inputs is not None and isinstance(declared, Mapping):
                for wanted in task.inputs:
                    if wanted not in declared:
                        problems.append(
                            f"task {task.name!r} wants input {wanted!r}, which the workflow "
                            f"does not declare (inputs: {', '.join(declared) or 'none'})"
                        )
        if problems:
            raise WorkflowDefinitionError(f"workflow {name!r}: " + "; ".join(problems))
        self.tasks: tuple[Task, ...] = tuple(self._order(given, by_name))
        self._validator = jsonschema_rs.validator_for(self.input_schema)

    def _order(self, given: list[Task], by_name: Mapping[str, Task]) -> list[Task]:
        """Tasks in dependency order; a cycle is an error naming it."""
        done: dict[str, None] = {}
        visiting: list[str] = []

        def visit(task: Task) -> None:
            if task.name in done:
                return
            if task.name in visiting:
                cycle = [*visiting[visiting.index(task.name) :], task.name]
                raise WorkflowDefinitionError(
                    f"workflow {self.name!r}: tasks depend on each other in a cycle: "
                    + " -> ".join(cycle)
                )
            visiting.append(task.name)
            for dep in task.depends_on:
                visit(by_name[dep])
            visiting.pop()
            done[task.name] = None

        for task in given:
            visit(task)
        return [by_name[n] for n in done]

    def task(self, name: str) -> Task:
        for t in self.tasks:
            if t.name == name:
                return t
        raise KeyError(name)

    def typed(self, record: WorkflowRecord) -> WorkflowRecord:
        """``record`` (a run of this workflow, read from a store) with typed results.

        Its ``results`` then holds an instance of the task's Pydantic result type for
        each task declared with one (``stored_results`` keeps the JSON).
        """
        if record.name != self.name:
            raise ValueError(f"run {record.id} is of workflow {record.name!r}, not {self.name!r}")
        loaders = {t.name: t.load_result for t in self.tasks if t.result_type is not None}
        return dataclasses.replace(record, loaders=loaders)

    def input_problems(self, inputs: Any) -> list[str]:
        """What is wrong with ``inputs`` for this workflow (empty when they are valid)."""
        problems = []
        for error in self._validator.iter_errors(inputs):
            where = "$" + "".join(
                f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.instance_path
            )
            problems.append(f"{where}: {error.message}")
        return problems

    def __repr__(self) -> str:
        return f"Workflow({self.name!r}, tasks={[t.name for t in self.tasks]})"
