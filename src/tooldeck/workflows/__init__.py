"""Workflows: task turns that submit a schema-validated result, stored exactly once.

A workflow script declares :class:`Task`\\ s (instructions, inputs, a closed result
schema, dependencies) in a :class:`Workflow`. The :class:`WorkflowEngine` runs each task
as a sub-agent turn with a fixed tool list and a strict ``submit_result`` tool; the
control plane validates every submission again against the stored schema before the
:class:`WorkflowStore` (SQLite or PostgreSQL) keeps it, once. See ``docs/workflows.md``.
"""

from .control import ControlPlane, Submission
from .definition import Task, Workflow
from .durable import DbosExecutor
from .engine import (
    ModelFactory,
    TaskRun,
    WorkflowEngine,
    WorkflowError,
    WorkflowInputError,
)
from .events import TaskActivity, TaskNote, TaskStateChanged, WorkflowStateChanged
from .executor import AsyncioExecutor, TaskExecutor
from .queued import QueueStall, QueueWatch
from .script import WorkflowScript, load_script
from .shapes import ResultSchema, ResultSchemaError, WorkflowDefinitionError, result_schema
from .store import PostgresStore, SQLiteStore, StoreError, WorkflowStore, open_store
from .store.protocol import StoreUnavailable
from .store.records import TaskRecord, WorkflowRecord
from .store.sqlite import default_db_path
from .task_tools import SUBMIT_RESULT, recall_notes_tool, submit_result_tool, task_toolset
from .tools import workflow_tools, workflow_tools_source

__all__ = [
    "SUBMIT_RESULT",
    "AsyncioExecutor",
    "ControlPlane",
    "DbosExecutor",
    "ModelFactory",
    "PostgresStore",
    "QueueStall",
    "QueueWatch",
    "ResultSchema",
    "ResultSchemaError",
    "SQLiteStore",
    "StoreError",
    "StoreUnavailable",
    "Submission",
    "Task",
    "TaskActivity",
    "TaskExecutor",
    "TaskNote",
    "TaskRecord",
    "TaskRun",
    "TaskStateChanged",
    "Workflow",
    "WorkflowDefinitionError",
    "WorkflowEngine",
    "WorkflowError",
    "WorkflowInputError",
    "WorkflowRecord",
    "WorkflowScript",
    "WorkflowStateChanged",
    "WorkflowStore",
    "default_db_path",
    "load_script",
    "open_store",
    "recall_notes_tool",
    "result_schema",
    "submit_result_tool",
    "task_toolset",
    "workflow_tools",
    "workflow_tools_source",
]
