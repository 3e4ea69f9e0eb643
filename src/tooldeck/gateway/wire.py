"""What goes over the wire to a gateway client: listed tools, call results, their tokens.

A listed tool carries its name, description (at most :data:`MAX_DESCRIPTION`
characters), input schema and, to a client whose protocol version has them (MCP
2025-06-18 and later), the upstream tool's ``outputSchema``; no upstream annotations
(they are an upstream server's untrusted hints; the gateway's policy decides, and a
client must not auto-approve a call because a server called its tool read-only). The
gateway's own read-only tools say so.

Structured results. The model reads one representation of a result: the structured
content's JSON as text (:mod:`tooldeck.mcp.results`), offloaded and guarded like any
text. The structured content itself goes along as ``structuredContent`` (to the same
clients) when it fits in the guard's limit, the most the model may get from one call:
a client that hands ``structuredContent`` to its model then never gets more than the
guard allows. A bigger one is not sent (:func:`fit_structure`): the text says so in
one line, and when the client was listed the tool's ``outputSchema`` (which promises
structured content, so a client rejects a result without it) the result is marked as
an error, which a client does not check against the schema; the line says the call did
not fail. Before 2026-07-28 structured content is a JSON object and an output schema
an object's: anything else is not sent to an older client.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from typing import Any

import mcp_types as types
from mcp_types.version import is_version_at_least

from ..offload.guard import merge_details
from ..result import ImagePart, TextPart, ToolResult
from ..tokens import estimate_tokens
from ..tools import Tool

__all__ = [
    "MAX_DESCRIPTION",
    "STRUCTURED_SINCE",
    "call_result_json",
    "fit_structure",
    "listed_tool",
    "listing_tokens",
    "output_schema",
    "to_call_result",
    "tool_tokens",
]

MAX_DESCRIPTION = 4_000
"""Characters of an upstream tool's description a client is listed (an upstream server
cannot fill the client's context with one tool's description)."""

STRUCTURED_SINCE = "2025-06-18"
"""The first protocol version with ``outputSchema`` and ``structuredContent``."""
_ANY_JSON_SINCE = "2026-07-28"  # structured content any JSON value, not only an object
_DROPPED = "structured_dropped"


def _carries(protocol: str | None) -> bool:
    return protocol is not None and is_version_at_least(protocol, STRUCTURED_SINCE)


def _any_json(protocol: str | None) -> bool:
    return protocol is not None and is_version_at_least(protocol, _ANY_JSON_SINCE)


def output_schema(tool: Tool, protocol: str | None) -> dict[str, Any] | None:
    """The upstream ``outputSchema`` of ``tool`` a client of ``protocol`` is listed."""
    info = getattr(tool, "mcp", None)
    schema = getattr(info, "output_schema", None)
    if not isinstance(schema, Mapping) or not _carries(protocol):
        return None
    if not _any_json(protocol) and schema.get("type") != "object":
        return None
    return dict(schema)


def _structured(result: ToolResult) -> tuple[bool, Any]:
    """``(True, value)`` when the model's text of ``result`` is an upstream structured
    content's JSON (:mod:`tooldeck.mcp.results` kept the value in ``details``)."""
    details = result.details
    if not isinstance(details, Mapping) or details.get("representation") != "structured":
        return False, None
    if "result_hook_error" in details:
        return False, None
    mcp = details.get("mcp")
    if not isinstance(mcp, Mapping) or mcp.get("structuredContent") is None:
        return False, None
    return True, mcp["structuredContent"]


def _tokens_of_structure(details: Mapping[str, Any]) -> int | None:
    """The tokens of the structured content's JSON text, when the hooks offloaded or cut
    it (they measured it); ``None`` when it reached the model whole (so it fits)."""
    for key in ("offloaded", "guarded"):
        info = details.get(key)
        if isinstance(info, Mapping) and isinstance(info.get("original_tokens"), int):
            return int(info["original_tokens"])
    return None


def fit_structure(
    result: ToolResult, tool: Tool | None, protocol: str | None, *, limit: int
) -> ToolResult:
    """``result`` (after offload and the guard) with its structured content marked not to
    be sent when it is over ``limit`` tokens, and a line saying so (see the module
    docstring). Returned as it is otherwise, or when ``protocol`` has no structure."""
    has, _ = _structured(result)
    if not has or not _carries(protocol):
        return result
    tokens = _tokens_of_structure(result.details)
    if tokens is None or tokens <= limit:
        return result
    promised = tool is not None and output_schema(tool, protocol) is not None
    note = (
        f"[structuredContent not sent: the structured result is about {tokens:,} tokens, "
        f"over the limit of {limit:,} tokens for one result; what follows is all of it "
        "that is sent."
    )
    if promised:
        note += (
            " The call did not fail: the result is marked as an error only because the "
            "tool's outputSchema promises structured content."
        )
    content = [TextPart(note + "]"), *result.parts]
    details = merge_details(result.details, _DROPPED, {"tokens": tokens, "limit": limit})
    return dataclasses.replace(
        result, content=content, details=details, is_error=result.is_error or promised
    )


def listed_tool(
    name: str, tool: Tool, *, own: bool = False, protocol: str | None = None
) -> types.Tool:
    """The ``tools/list`` entry of ``tool`` under ``name`` for a client of ``protocol``."""
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
        output_schema=output_schema(tool, protocol),
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


def _sent_structure(result: ToolResult, protocol: str | None) -> tuple[bool, Any]:
    """``(True, value)`` when the structured content of ``result`` goes to a client of
    ``protocol`` (see :func:`to_call_result`)."""
    has, value = _structured(result)
    dropped = isinstance(result.details, Mapping) and _DROPPED in result.details
    sent = _any_json(protocol) or isinstance(value, dict)
    return (True, value) if has and not dropped and _carries(protocol) and sent else (False, None)


def to_call_result(result: ToolResult, protocol: str | None = None) -> types.CallToolResult:
    """What the client of ``protocol`` gets of a (hooked: offloaded, guarded, then
    :func:`fit_structure`) result: its content, and its structured content when the
    protocol has it and it was not held back."""
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
    sent, value = _sent_structure(result, protocol)
    if sent:
        return types.CallToolResult(
            content=list(content), structured_content=value, is_error=result.is_error
        )
    return types.CallToolResult(content=list(content), is_error=result.is_error)


def call_result_json(result: ToolResult, protocol: str) -> dict[str, Any]:
    """:func:`to_call_result` as the MCP SDK's server puts it on the wire to a client of
    ``protocol`` (a handshake version), built without the SDK's models, its keys in the
    SDK's order (:mod:`.stdio_calls`, :mod:`.http_calls`; tests/test_gateway_stdio_calls.py
    and tests/test_gateway_http_calls.py compare the two, the latter byte for byte)."""
    content: list[dict[str, Any]] = []  # keys in the SDK's order (its models': by name)
    for part in result.parts:
        if isinstance(part, ImagePart):
            if part.data is not None:
                content.append({"data": part.data, "mimeType": part.mime_type, "type": "image"})
            else:
                content.append({"text": f"[image: {part.url}]", "type": "text"})
        else:
            content.append({"text": part.text, "type": "text"})
    out: dict[str, Any] = {"content": content, "isError": result.is_error}
    sent, value = _sent_structure(result, protocol)
    if sent:
        out["structuredContent"] = value
    return out


def an_id(value: object) -> bool:
    """Whether ``value`` can be a JSON-RPC request's id here (an int or a string; not a
    bool, a float or null)."""
    return type(value) is int or type(value) is str


def request_key(request_id: int | str) -> int | str:
    """The id as the SDK correlates it: ``"7"`` and ``7`` are one id."""
    if isinstance(request_id, str):
        try:
            return int(request_id)
        except ValueError:
            pass
    return request_id
