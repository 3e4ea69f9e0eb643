"""An MCP ``CallToolResult`` as a :class:`~tooldeck.result.ToolResult`.

The model gets **one** representation of the result, never the same data twice:

- ``structuredContent``, when the server sent it, as a single JSON part. Servers that
  send structured content are asked by the MCP spec to repeat it as serialised JSON in a
  text block for older clients; that text (and any other block) is not sent again.
- otherwise the content blocks, in order: text as text parts, images as image parts,
  audio as a one-line note (no provider takes audio in a tool result), a resource link as
  one line (name, URI, type, size, description), an embedded text resource as one line
  naming it followed by its text, an embedded image blob as an image part, any other
  blob as one line (URI, type, size).

With structured content the blocks are listed by type in ``details["not_shown"]``.
``isError`` becomes :attr:`ToolResult.is_error`. The complete ``CallToolResult``
(``model_dump(mode="json", by_alias=True)``) is kept in ``details["mcp"]`` as evidence
for logs and UIs; details are never sent to the model.

Works with the ``mcp`` SDK's models of either field style (``structured_content`` /
``structuredContent``) and with a plain ``dict`` as it came over the wire.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..result import ContentPart, ImagePart, JsonPart, TextPart, ToolResult

__all__ = ["call_tool_result_to_tool_result", "content_part", "representation_of"]


def _get(obj: Any, *names: str) -> Any:
    """The first of ``names`` that ``obj`` has (attribute or mapping key), else None."""
    for name in names:
        if isinstance(obj, Mapping):
            if name in obj:
                return obj[name]
        elif hasattr(obj, name):
            return getattr(obj, name)
    return None


def _dump(result: Any) -> Any:
    if isinstance(result, Mapping):
        return dict(result)
    dump = getattr(result, "model_dump", None)
    if callable(dump):
        try:
            return dump(mode="json", by_alias=True, exclude_none=True)
        except Exception:  # a model we cannot dump as JSON: keep what Python gives us
            return dump(by_alias=True, exclude_none=True)
    return repr(result)


def _size(data: Any) -> str:
    """A base64 payload's decoded size (computed, not decoded), for a one-line note."""
    if not isinstance(data, str) or not data:
        return "empty"
    body = data.strip()
    return f"{len(body) * 3 // 4 - (len(body) - len(body.rstrip('='))):,} bytes"


def _line(kind: str, fields: list[tuple[str, Any]]) -> str:
    shown = ", ".join(f"{name}: {value}" for name, value in fields if value not in (None, ""))
    return f"[{kind}" + (f" — {shown}" if shown else "") + "]"


def _resource_part(resource: Any) -> ContentPart:
    uri = _get(resource, "uri")
    mime = _get(resource, "mime_type", "mimeType")
    text = _get(resource, "text")
    if isinstance(text, str):
        fields = [("uri", uri), ("type", mime), ("characters", f"{len(text):,}")]
        return TextPart(_line("embedded resource", fields) + "\n" + text)
    blob = _get(resource, "blob")
    if isinstance(mime, str) and mime.startswith("image/") and isinstance(blob, str) and blob:
        return ImagePart(data=blob, mime_type=mime)
    fields = [("uri", uri), ("type", mime), ("size", _size(blob))]
    return TextPart(_line("embedded binary resource, not shown", fields))


def _block_part(block: Any) -> ContentPart | None:
    kind = _get(block, "type")
    if kind == "text":
        return TextPart(str(_get(block, "text") or ""))
    if kind == "image":
        data = _get(block, "data")
        mime = _get(block, "mime_type", "mimeType") or "image/png"
        if isinstance(data, str) and data:
            return ImagePart(data=data, mime_type=str(mime))
        return TextPart(_line("image without data", [("type", mime)]))
    if kind == "audio":
        mime = _get(block, "mime_type", "mimeType")
        size = _size(_get(block, "data"))
        return TextPart(_line("audio, not shown", [("type", mime), ("size", size)]))
    if kind == "resource_link":
        fields = [
            ("name", _get(block, "name")),
            ("title", _get(block, "title")),
            ("uri", _get(block, "uri")),
            ("type", _get(block, "mime_type", "mimeType")),
            ("size", _get(block, "size")),
            ("description", _get(block, "description")),
        ]
        return TextPart(_line("resource link", fields))
    if kind == "resource":
        resource = _get(block, "resource")
        if resource is not None:
            return _resource_part(resource)
    return TextPart(_line("unsupported MCP content block", [("type", kind)]))


def content_part(block: Any) -> ContentPart:
    """One MCP content block (a tool result's, a prompt message's) as a content part."""
    return _block_part(block) or TextPart(_line("empty MCP content block", []))


def representation_of(result: Any) -> str:
    """Which representation the model gets: ``"structured"`` or ``"content"``."""
    structured = _get(result, "structured_content", "structuredContent")
    return "structured" if structured is not None else "content"


def call_tool_result_to_tool_result(
    result: Any, *, server: str | None = None, tool: str | None = None
) -> ToolResult:
    """Turn an MCP ``CallToolResult`` (SDK model or wire ``dict``) into a ToolResult.

    See the module docstring for which representation the model gets.
    """
    is_error = bool(_get(result, "is_error", "isError"))
    structured = _get(result, "structured_content", "structuredContent")
    blocks = _get(result, "content") or []
    content: str | list[ContentPart]
    if structured is not None:
        representation = "structured"
        content = [JsonPart(structured)]
    else:
        representation = "content"
        parts = [p for p in (_block_part(b) for b in blocks) if p is not None]
        if not parts:
            content = ""
        elif len(parts) == 1 and isinstance(parts[0], TextPart):
            content = parts[0].text
        else:
            content = parts
    details: dict[str, Any] = {"mcp": _dump(result), "representation": representation}
    if structured is not None and blocks:
        details["not_shown"] = [str(_get(b, "type")) for b in blocks]
    if server is not None:
        details["server"] = server
    if tool is not None:
        details["tool"] = tool
    return ToolResult(content=content, details=details, is_error=is_error)
