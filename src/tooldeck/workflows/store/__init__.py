"""Workflow storage: one interface (:class:`WorkflowStore`), SQLite and PostgreSQL behind it.

:func:`open_store` picks one from configuration: a PostgreSQL DSN (``dsn=`` or the
``TOOLDECK_WORKFLOWS_DSN`` environment variable) selects :class:`PostgresStore`;
otherwise :class:`SQLiteStore` uses ``db=``, ``TOOLDECK_WORKFLOWS_DB``, or
``~/.tooldeck/workflows.sqlite3``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from .base import WorkflowStore
from .postgres import DEFAULT_SCHEMA, PostgresStore, redact_dsn
from .protocol import (
    TASK_STATES,
    TERMINAL_TASK_STATES,
    TERMINAL_WORKFLOW_STATES,
    WORKFLOW_STATES,
    StoreError,
    TaskState,
    WorkflowState,
)
from .records import (
    Acceptance,
    CancelOutcome,
    NewTask,
    RejectionOutcome,
    RejectionRecord,
    Transition,
)
from .sqlite import SQLiteStore, default_db_path

__all__ = [
    "DEFAULT_SCHEMA",
    "TASK_STATES",
    "TERMINAL_TASK_STATES",
    "TERMINAL_WORKFLOW_STATES",
    "WORKFLOW_STATES",
    "Acceptance",
    "CancelOutcome",
    "NewTask",
    "PostgresStore",
    "RejectionOutcome",
    "RejectionRecord",
    "SQLiteStore",
    "StoreError",
    "TaskState",
    "Transition",
    "WorkflowState",
    "WorkflowStore",
    "redact_dsn",
]

DSN_VARIABLE = "TOOLDECK_WORKFLOWS_DSN"
DB_VARIABLE = "TOOLDECK_WORKFLOWS_DB"
SCHEMA_VARIABLE = "TOOLDECK_WORKFLOWS_SCHEMA"


def open_store(
    *,
    db: str | Path | None = None,
    dsn: str | None = None,
    schema: str | None = None,
    home: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> WorkflowStore:
    """The store configuration asks for (not opened yet: ``async with store:``).

    ``db`` and ``dsn`` exclude each other. Without either, the environment decides
    (``TOOLDECK_WORKFLOWS_DSN``, then ``TOOLDECK_WORKFLOWS_DB``), then the default file
    under ``home`` (the user's home directory unless given).
    """
    environ = os.environ if env is None else env
    if db is not None and dsn is not None:
        raise StoreError("give a SQLite file (--db) or a PostgreSQL DSN (--dsn), not both")
    if db is None and dsn is None:
        dsn = environ.get(DSN_VARIABLE) or None
        if dsn is None:
            db = environ.get(DB_VARIABLE) or None
    if dsn is not None:
        return PostgresStore(dsn, schema=schema or environ.get(SCHEMA_VARIABLE) or DEFAULT_SCHEMA)
    return SQLiteStore(Path(db) if db is not None else default_db_path(home))
