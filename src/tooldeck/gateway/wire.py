"""What goes over the wire to a gateway client: listed tools, call results, their tokens.

A listed tool carries its name, description (at most :data:`MAX_DESCRIPTION`
characters) and input schema, nothing else: no
``outputSchema`` (the client gets one text representation, possibly offloaded, never
the structured content an output schema would promise) and no upstream annotations
(they are an upstream server's untrusted hints; the gateway's policy decides, and a
client must not auto-approve a call because a server called its tool read-only). The
gateway's own read-only tools say so.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import mcp_types as types

from ..result import ImagePart, ToolResult
from ..tokens import estimate_tokens
from ..tool import Tool

__all__ = [
    "MAX_DESCRIPTION",
    "listed_tool",
    "listing_tokens",
    "to_call_result",
    "tool_tokens",
]

MAX_DESCRIPTION = 4_000
"""Characters of an upstream tool's description a client is listed (an upstream server
cannot fill the client's context with one tool's description)."""


def listed_tool(name: str, tool: Tool, *, own: bool = False) -> types.Tool:
    """The ``tools/list`` entry of ``tool`` under ``name``."""
    annotations = None
    if own and tool.read_only:
        annotations = types.ToolAnnotations(read_only_hint=True)
    description = tool.description
    if len(description) > MAX_DESCRIPTION:
        cut = len(description) - MAX_DESCRIPTION
        description = description[:MAX_DESCRIPTION] + f"… [{cut:,} more characters not shown]"
    return types.Tool(
        name=name,
        description=description,
        input_schema=tool.input_schema(),
        annotations=annotations,
    )


def _wire(tool: types.Tool) -> dict[str, Any]:
    return tool.model_dump(mode="json", by_alias=True, exclude_none=True)


def tool_tokens(tool: types.Tool) -> int:
    """The estimated tokens of one listed tool, as JSON on the wire."""
    return estimate_tokens(json.dumps(_wire(tool), ensure_ascii=False))


def listing_tokens(tools: Iterable[types.Tool]) -> int:
    """The estimated tokens of a whole ``tools/list`` answer's ``tools`` array."""
    return estimate_tokens(json.dumps([_wire(t) for t in tools], ensure_ascii=False))


def to_call_result(result: ToolResult) -> types.CallToolResult:
    """The one representation the client gets of a (hooked: offloaded, guarded) result."""
    content: list[types.TextContent | types.ImageContent] = []
    for part in result.parts:
        if isinstance(part, ImagePart):
            if part.data is not None:
                content.append(
                    types.ImageContent(type="image", data=part.data, mime_type=part.mime_type)
                )
            else:
                content.append(types.TextContent(type="text", text=f"[image: {part.url}]"))
        else:  # text, and JSON as its text
            content.append(types.TextContent(type="text", text=part.text))
    return types.CallToolResult(content=list(content), is_error=result.is_error)
