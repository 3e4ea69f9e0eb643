"""tooldeck: the tool runtime for LLM agents.

Define a tool once (:func:`tool` or :class:`Tool`), project it for each provider
(:mod:`tooldeck.schema`), turn the model's raw arguments into validated parameters
(:func:`validate_arguments`), and run turns (:func:`run`, :class:`Session`) through the
one dispatcher that owns validation, policy, ordering, timeouts and outputs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from . import schema
    from ._continuation import ContinuePolicy
    from ._streaming import TurnStream
    from .approvals import ApprovalAnswer, ApprovalRequest, PolicyDecision
    from .arguments import ValidatedArguments, validate_arguments
    from .assembly import Toolset, ToolSource, TurnContext, assemble
    from .budget import Budget
    from .context import Aborted, AbortSignal, ToolContext
    from .dispatch import Dispatcher
    from .errors import ArgumentError, SchemaError, TooldeckError, ToolDefinitionError
    from .events import EventBus
    from .loop import RunResult, Session
    from .model import Model, ModelRequest, ModelSettings
    from .oneshot import run, run_sync, stream
    from .policy.protection import Protection
    from .registry import Handlers, ToolRegistry
    from .result import ContentPart, ImagePart, JsonPart, TextPart, ToolResult
    from .schema import Projection, project, project_tools
    from .sources.function import source
    from .tools import TOOL_NAME_PATTERN, ExecutionMode, Tool, tool
    from .transcript import (
        AssistantMessage,
        OpaqueItem,
        StopReason,
        ToolCall,
        ToolOutput,
        Usage,
        UserMessage,
    )

__version__ = "0.1.0"

# Loaded on first use, so that ``import tooldeck`` (and the ``tooldeck`` command, whose
# ``--help`` must start fast) pays only for what it touches: name -> defining module.
_LAZY: dict[str, str] = {
    "schema": "",
    "ValidatedArguments": "arguments",
    "validate_arguments": "arguments",
    "Toolset": "assembly",
    "ToolSource": "assembly",
    "TurnContext": "assembly",
    "assemble": "assembly",
    "Budget": "budget",
    "Aborted": "context",
    "AbortSignal": "context",
    "ToolContext": "context",
    "ContinuePolicy": "_continuation",
    "ApprovalAnswer": "approvals",
    "ApprovalRequest": "approvals",
    "Dispatcher": "dispatch",
    "PolicyDecision": "approvals",
    "ArgumentError": "errors",
    "SchemaError": "errors",
    "TooldeckError": "errors",
    "ToolDefinitionError": "errors",
    "EventBus": "events",
    "RunResult": "loop",
    "Session": "loop",
    "run": "oneshot",
    "run_sync": "oneshot",
    "stream": "oneshot",
    "Protection": "policy.protection",
    "Model": "model",
    "ModelRequest": "model",
    "ModelSettings": "model",
    "Handlers": "registry",
    "ToolRegistry": "registry",
    "ContentPart": "result",
    "ImagePart": "result",
    "JsonPart": "result",
    "TextPart": "result",
    "ToolResult": "result",
    "Projection": "schema",
    "project": "schema",
    "project_tools": "schema",
    "source": "sources.function",
    "TurnStream": "_streaming",
    "TOOL_NAME_PATTERN": "tools",
    "ExecutionMode": "tools",
    "Tool": "tools",
    "tool": "tools",
    "AssistantMessage": "transcript",
    "OpaqueItem": "transcript",
    "StopReason": "transcript",
    "ToolCall": "transcript",
    "ToolOutput": "transcript",
    "Usage": "transcript",
    "UserMessage": "transcript",
}

__all__ = [
    "TOOL_NAME_PATTERN",
    "AbortSignal",
    "Aborted",
    "ApprovalAnswer",
    "ApprovalRequest",
    "ArgumentError",
    "AssistantMessage",
    "Budget",
    "ContentPart",
    "ContinuePolicy",
    "Dispatcher",
    "EventBus",
    "ExecutionMode",
    "Handlers",
    "ImagePart",
    "JsonPart",
    "Model",
    "ModelRequest",
    "ModelSettings",
    "OpaqueItem",
    "PolicyDecision",
    "Projection",
    "Protection",
    "RunResult",
    "SchemaError",
    "Session",
    "StopReason",
    "TextPart",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolDefinitionError",
    "ToolOutput",
    "ToolRegistry",
    "ToolResult",
    "ToolSource",
    "TooldeckError",
    "Toolset",
    "TurnContext",
    "TurnStream",
    "Usage",
    "UserMessage",
    "ValidatedArguments",
    "__version__",
    "assemble",
    "project",
    "project_tools",
    "run",
    "run_sync",
    "schema",
    "source",
    "stream",
    "tool",
    "validate_arguments",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = importlib.import_module(f"{__name__}.{module}" if module else f"{__name__}.{name}")
    if module:
        value = getattr(value, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
