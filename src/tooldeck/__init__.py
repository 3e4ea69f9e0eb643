"""tooldeck: the tool runtime for LLM agents.

Define a tool once (:func:`tool` or :class:`Tool`), project it for each provider
(:mod:`tooldeck.schema`), and turn the model's raw arguments into validated parameters
(:func:`validate_arguments`).
"""

from . import schema
from .arguments import ValidatedArguments, validate_arguments
from .context import Aborted, AbortSignal, ToolContext
from .errors import ArgumentError, SchemaError, TooldeckError, ToolDefinitionError
from .result import ContentPart, ImagePart, JsonPart, TextPart, ToolResult
from .schema import Projection, project, project_tools
from .tool import TOOL_NAME_PATTERN, ExecutionMode, Tool, tool

__version__ = "0.1.0"

__all__ = [
    "TOOL_NAME_PATTERN",
    "AbortSignal",
    "Aborted",
    "ArgumentError",
    "ContentPart",
    "ExecutionMode",
    "ImagePart",
    "JsonPart",
    "Projection",
    "SchemaError",
    "TextPart",
    "Tool",
    "ToolContext",
    "ToolDefinitionError",
    "ToolResult",
    "TooldeckError",
    "ValidatedArguments",
    "__version__",
    "project",
    "project_tools",
    "schema",
    "tool",
    "validate_arguments",
]
