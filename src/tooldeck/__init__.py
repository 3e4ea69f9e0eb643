"""tooldeck: the tool runtime for LLM agents.

Define a tool once (:func:`tool` or :class:`Tool`), project it for each provider
(:mod:`tooldeck.schema`), turn the model's raw arguments into validated parameters
(:func:`validate_arguments`), and run turns (:func:`run`, :class:`Session`) through the
one dispatcher that owns validation, policy, ordering, timeouts and outputs.
"""

from . import schema
from .arguments import ValidatedArguments, validate_arguments
from .assembly import Toolset, TurnContext, assemble
from .context import Aborted, AbortSignal, ToolContext
from .continuation import ContinuePolicy
from .dispatch import ApprovalAnswer, ApprovalRequest, Dispatcher, PolicyDecision
from .errors import ArgumentError, SchemaError, TooldeckError, ToolDefinitionError
from .events import EventBus
from .loop import RunResult, Session, run, run_sync, stream
from .model import Model, ModelRequest, ModelSettings
from .providers.scripted import ScriptedModel
from .registry import Handlers, ToolRegistry
from .result import ContentPart, ImagePart, JsonPart, TextPart, ToolResult
from .schema import Projection, project, project_tools
from .streaming import TurnStream
from .tool import TOOL_NAME_PATTERN, ExecutionMode, Tool, tool
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

__all__ = [
    "TOOL_NAME_PATTERN",
    "AbortSignal",
    "Aborted",
    "ApprovalAnswer",
    "ApprovalRequest",
    "ArgumentError",
    "AssistantMessage",
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
    "RunResult",
    "SchemaError",
    "ScriptedModel",
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
    "stream",
    "tool",
    "validate_arguments",
]
