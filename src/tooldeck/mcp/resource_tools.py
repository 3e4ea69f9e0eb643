"""A server's resources in a turn: two read-only tools per server that has resources.

For a server that lists at least one resource or resource template (looked at each
time its tools are listed, and again when it says its resources changed),
:class:`~tooldeck.mcp.McpSource` adds, next to the server's own tools and named the same
way (:mod:`.naming`, the raw names :data:`LIST` and :data:`READ`):

- ``mcp__<server>__resources_list``: the server's resources and resource templates,
  or those matching a ``query`` (every word in the URI, name, title or description,
  case-insensitive), at most :data:`SHOWN` of them, with how many more there are;
- ``mcp__<server>__resources_read``: the contents of one ``uri`` (a listed one, or one
  filled in from a template), as content parts (:meth:`.ResourceResult.parts`).

Both are ``STANDARD``, read-only and **deferred** (``defer_loading``): the model finds
them with tool search like any other deferred tool. A read is an ordinary call, so the
session's policy judges it (a rule can deny URIs: ``args = { uri = { uri = "file:///etc/*" } }``,
see :mod:`tooldeck.policy.rules`) and the session's result hooks (offload, size guard)
take a large content. A server tool with the same raw name as one of these keeps its
place; the resource tool is left out (said in the server's ``skipped``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ..context import ToolContext
from ..result import JsonPart, TextPart, ToolResult
from .resources import McpResource, McpResourceTemplate, ResourceError, ResourceResult

__all__ = ["LIST", "READ", "SHOWN", "list_tool_result", "matching", "read_tool_result"]

LIST = "resources/list"
READ = "resources/read"
SHOWN = 50
"""At most this many resources (and as many templates) in one answer of the list tool."""
MAX_QUERY = 500
MAX_URI = 8192

Lister = Callable[[], Awaitable[tuple[list[McpResource], list[McpResourceTemplate]]]]
Reader = Callable[[str], Awaitable[ResourceResult]]

LIST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "maxLength": MAX_QUERY,
            "description": "Words to look for in the URI, name, title or description "
            "(all must appear); leave out to list everything.",
        }
    },
    "additionalProperties": False,
}
READ_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "uri": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_URI,
            "description": "The URI of a listed resource, or one made from a template "
            "by filling in its {variables}.",
        }
    },
    "required": ["uri"],
    "additionalProperties": False,
}


def _words(*texts: str | None) -> str:
    return " ".join(t for t in texts if t).casefold()


def matching(
    query: str | None, items: Sequence[McpResource | McpResourceTemplate]
) -> list[McpResource | McpResourceTemplate]:
    """The items in which every word of ``query`` appears (all of them without one)."""
    words = (query or "").casefold().split()
    out: list[McpResource | McpResourceTemplate] = []
    for item in items:
        where = item.uri if isinstance(item, McpResource) else item.uri_template
        haystack = _words(where, item.name, item.title, item.description)
        if all(w in haystack for w in words):
            out.append(item)
    return out


def _row(item: McpResource | McpResourceTemplate) -> dict[str, Any]:
    row: dict[str, Any] = (
        {"uri": item.uri} if isinstance(item, McpResource) else {"uri_template": item.uri_template}
    )
    row["name"] = item.name
    for key in ("title", "description", "mime_type"):
        value = getattr(item, key)
        if value:
            row[key] = value
    return row


def list_tool_result(
    server: str,
    query: str | None,
    resources: list[McpResource],
    templates: list[McpResourceTemplate],
) -> ToolResult:
    """The list tool's answer: matching resources and templates, capped at :data:`SHOWN`."""
    found = matching(query, resources)
    shaped = matching(query, templates)
    answer: dict[str, Any] = {
        "server": server,
        "resources": [_row(r) for r in found[:SHOWN]],
        "templates": [_row(t) for t in shaped[:SHOWN]],
    }
    more = max(0, len(found) - SHOWN) + max(0, len(shaped) - SHOWN)
    if more:
        answer["more"] = f"{more} more match; give a query that narrows the list"
    if not found and not shaped:
        answer["note"] = (
            "nothing matches the query" if query else f"the server {server!r} lists no resources"
        )
    return ToolResult(content=[JsonPart(answer)], details={"server": server, "query": query})


def read_tool_result(result: ResourceResult) -> ToolResult:
    """The read tool's answer: the contents as parts (one text part as plain text)."""
    parts = result.parts()
    details = {
        "server": result.server,
        "uri": result.uri,
        "contents": [
            {
                "uri": c.uri,
                "mime_type": c.mime_type,
                "kind": "text" if c.text is not None else "blob",
            }
            for c in result.contents
        ],
    }
    if not parts:
        return ToolResult(content=f"The resource {result.uri} is empty.", details=details)
    if len(parts) == 1 and isinstance(parts[0], TextPart):
        return ToolResult(content=parts[0].text, details=details)
    return ToolResult(content=parts, details=details)


def executors(
    server: str, lister: Lister, reader: Reader
) -> tuple[
    Callable[[dict[str, Any], ToolContext], Awaitable[ToolResult]],
    Callable[[dict[str, Any], ToolContext], Awaitable[ToolResult]],
]:
    """The two tools' ``execute`` functions for one server (every failure an error result)."""

    async def list_resources(params: dict[str, Any], ctx: ToolContext) -> ToolResult:
        try:
            resources, templates = await lister()
        except ResourceError as exc:
            return ToolResult.error(str(exc), details={"server": server})
        return list_tool_result(server, params.get("query"), resources, templates)

    async def read_resource(params: dict[str, Any], ctx: ToolContext) -> ToolResult:
        uri = params["uri"]
        try:
            result = await reader(uri)
        except ResourceError as exc:
            return ToolResult.error(str(exc), details={"server": server, "uri": uri})
        return read_tool_result(result)

    return list_resources, read_resource


def descriptions(server: str) -> tuple[str, str]:
    """The two tools' descriptions."""
    return (
        f"List or search the resources (documents, files, data) of the MCP server {server}, "
        "and its resource templates (URIs with {variables} to fill in).",
        f"Read one resource of the MCP server {server} by its URI (from its resource "
        "list, or a template filled in).",
    )
