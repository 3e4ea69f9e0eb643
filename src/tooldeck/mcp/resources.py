"""MCP resources: what a server offers to read, listed, searched and read by URI.

A server that declares the ``resources`` capability lists concrete resources
(``resources/list``: a URI, a name, a MIME type...) and resource templates
(``resources/templates/list``: an RFC 6570 URI template such as
``demo://resource/dynamic/text/{resourceId}``), and returns a resource's contents on
request (``resources/read``: text, or a base64 blob, per URI). Here they become typed
values:

- :class:`McpResource`, :class:`McpResourceTemplate`: one listed resource or template;
- :class:`ResourceResult`: a read resource, its :class:`ResourceContent` s, each turned
  into a tooldeck content part the way a tool result's embedded resources are
  (:mod:`tooldeck.mcp.results`): text as text, an image blob as an image part, a text
  blob (``text/*``, JSON, XML) decoded as text when it is UTF-8, any other blob as one
  line naming its URI, type and size.

Listings are bounded (:data:`MAX_LISTED` per server, :data:`~.connection.MAX_PAGES`
pages, a repeated cursor ends the listing); every request is bounded by the server's
``timeout``. A failure is a :class:`ResourceError`, one line naming the server and what
it said. :class:`~tooldeck.mcp.McpSource` offers ``list_resources``,
``list_resource_templates``, ``read_resource`` and ``subscribe_resource``, and two
read-only tools per server (:mod:`.resource_tools`).
"""

from __future__ import annotations

import base64
import binascii
import functools
import warnings
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import mcp_types as types
from mcp import MCPError
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..errors import TooldeckError
from ..result import ContentPart, ImagePart, TextPart
from .connection import MAX_PAGES, Connection, describe_error

__all__ = [
    "MAX_LISTED",
    "fetch_resource",
    "list_server_resources",
    "list_server_templates",
    "offers_resources",
    "resources_supported",
    "subscribe",
]

MAX_LISTED = 10_000
"""At most this many resources (and as many templates) are kept of one server's listing."""

_TEXT_TYPES = ("application/json", "application/xml", "application/yaml", "application/toml")
_T = TypeVar("_T")


class ResourceError(TooldeckError):
    """A resource cannot be listed or read: the server is not connected, has no
    resources, refused the request, or timed out. The message is one line."""


@dataclass(frozen=True, slots=True)
class McpResource:
    """A resource a server lists."""

    server: str
    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None


@dataclass(frozen=True, slots=True)
class McpResourceTemplate:
    """A resource template a server lists: URIs of this shape can be read."""

    server: str
    uri_template: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None


@dataclass(frozen=True, slots=True)
class ResourceContent:
    """One content of a read resource: ``text``, or ``blob`` (base64), never both."""

    uri: str
    mime_type: str | None = None
    text: str | None = None
    blob: str | None = None

    def data(self) -> bytes | None:
        """The blob's bytes (``None`` for text, or a blob that is not base64)."""
        if self.blob is None:
            return None
        try:
            return base64.b64decode(self.blob, validate=True)
        except (binascii.Error, ValueError):
            return None

    def part(self) -> ContentPart:
        """This content as a content part (see the module docstring)."""
        if self.text is not None:
            return TextPart(self.text)
        mime = (self.mime_type or "").lower()
        if mime.startswith("image/") and self.blob:
            return ImagePart(data=self.blob, mime_type=mime)
        data = self.data()
        if data is not None and (mime.startswith("text/") or mime in _TEXT_TYPES):
            try:
                return TextPart(data.decode("utf-8"))
            except UnicodeDecodeError:
                pass
        size = "not base64" if data is None else f"{len(data):,} bytes"
        shown = ", ".join(x for x in (self.uri, self.mime_type, size) if x)
        return TextPart(f"[binary resource, not shown — {shown}]")


@dataclass(frozen=True, slots=True)
class ResourceResult:
    """A resource as the server returned it for one URI."""

    server: str
    uri: str
    contents: tuple[ResourceContent, ...]

    def parts(self) -> list[ContentPart]:
        """The contents as content parts, in order."""
        return [c.part() for c in self.contents]

    def text(self) -> str:
        """The contents as text (an image as a line naming it)."""
        lines = []
        for part in self.parts():
            if isinstance(part, ImagePart):
                lines.append(f"[image {part.mime_type}]")
            else:
                lines.append(part.text)
        return "\n".join(lines)


def _resource(server: str, listed: types.Resource) -> McpResource:
    return McpResource(
        server=server,
        uri=str(listed.uri),
        name=listed.name,
        title=listed.title,
        description=listed.description,
        mime_type=listed.mime_type,
        size=listed.size,
    )


def _template(server: str, listed: types.ResourceTemplate) -> McpResourceTemplate:
    return McpResourceTemplate(
        server=server,
        uri_template=listed.uri_template,
        name=listed.name,
        title=listed.title,
        description=listed.description,
        mime_type=listed.mime_type,
    )


def _content(item: Any) -> ResourceContent:
    uri = str(getattr(item, "uri", ""))
    mime = getattr(item, "mime_type", None)
    text = getattr(item, "text", None)
    if isinstance(text, str):
        return ResourceContent(uri, mime, text=text)
    blob = getattr(item, "blob", None)
    return ResourceContent(uri, mime, blob=blob if isinstance(blob, str) else "")


async def _client(conn: Connection) -> Any:
    client = await conn.ready_client()
    if client is None:
        why = conn.error or conn.state
        raise ResourceError(f"the MCP server {conn.config.name!r} is not connected ({why})")
    return client


def resources_supported(capabilities: types.ServerCapabilities | None) -> bool:
    """Whether a server with these capabilities has resources to list and read."""
    return capabilities is not None and capabilities.resources is not None


async def _request(conn: Connection, what: str, request: Callable[[], Awaitable[_T]]) -> _T:
    """``request()`` bounded by the server's timeout; every failure a :class:`ResourceError`."""
    name = conn.config.name
    try:
        with anyio.fail_after(conn.config.timeout):
            return await request()
    except TimeoutError:
        raise ResourceError(f"{what} of {name!r} timed out") from None
    except MCPError as exc:
        refused = f"the MCP server {name!r} refused {what}: {exc.error.message}"
        raise ResourceError(refused) from None
    except Exception as exc:
        raise ResourceError(f"{what} of {name!r} failed: {describe_error(exc)}") from exc


Page = Callable[[str | None], Awaitable[tuple[Sequence[_T], str | None]]]


async def _pages(conn: Connection, what: str, page: Page[_T]) -> list[_T]:
    items: list[_T] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        listed, cursor = await _request(conn, what, functools.partial(page, cursor))
        items.extend(listed[: MAX_LISTED - len(items)])
        if not cursor or cursor in seen or len(items) >= MAX_LISTED:
            break
        seen.add(cursor)
    return items


async def offers_resources(client: Any) -> bool:
    """Whether a server lists any resource or template (one page of each is asked; a
    refusal is none). Runs while its tools are listed, on the client given."""
    if not resources_supported(client.server_capabilities):
        return False
    try:
        first: types.ListResourcesResult = await client.list_resources()
        if first.resources:
            return True
        shapes: types.ListResourceTemplatesResult = await client.list_resource_templates()
        return bool(shapes.resource_templates)
    except MCPError:
        return False


async def list_server_resources(conn: Connection) -> list[McpResource]:
    """The resources of one server (runs on the I/O loop); none when it has none."""
    client = await _client(conn)
    if not resources_supported(client.server_capabilities):
        return []
    name = conn.config.name

    async def page(cursor: str | None) -> tuple[list[McpResource], str | None]:
        result: types.ListResourcesResult = await client.list_resources(cursor=cursor)
        return [_resource(name, r) for r in result.resources], result.next_cursor

    return await _pages(conn, "resources/list", page)


async def list_server_templates(conn: Connection) -> list[McpResourceTemplate]:
    """The resource templates of one server (runs on the I/O loop)."""
    client = await _client(conn)
    if not resources_supported(client.server_capabilities):
        return []
    name = conn.config.name

    async def page(cursor: str | None) -> tuple[list[McpResourceTemplate], str | None]:
        result: types.ListResourceTemplatesResult = await client.list_resource_templates(
            cursor=cursor
        )
        return [_template(name, t) for t in result.resource_templates], result.next_cursor

    return await _pages(conn, "resources/templates/list", page)


async def fetch_resource(conn: Connection, uri: str) -> ResourceResult:
    """``resources/read`` of ``uri`` (runs on the I/O loop)."""
    client = await _client(conn)
    name = conn.config.name
    if not resources_supported(client.server_capabilities):
        raise ResourceError(f"the MCP server {name!r} offers no resources")
    result: types.ReadResourceResult = await _request(
        conn, f"reading {uri!r}", lambda: client.read_resource(uri, cache_mode="bypass")
    )
    return ResourceResult(name, uri, tuple(_content(c) for c in result.contents))


async def subscribe(conn: Connection, uri: str, on: bool) -> None:
    """``resources/subscribe`` (``on``) or ``resources/unsubscribe`` of ``uri``."""
    client = await _client(conn)
    name = conn.config.name
    caps = client.server_capabilities
    if not resources_supported(caps) or not caps.resources.subscribe:
        raise ResourceError(f"the MCP server {name!r} does not support resource subscriptions")
    if conn.protocol_version in MODERN_PROTOCOL_VERSIONS:
        raise ResourceError(
            f"the MCP server {name!r} speaks {conn.protocol_version}, where resource "
            "subscriptions are a listen stream; tooldeck subscribes on 2025-era servers only"
        )
    verb = "resources/subscribe" if on else "resources/unsubscribe"
    with warnings.catch_warnings():  # deprecated in the 2026 era only
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        send = client.subscribe_resource if on else client.unsubscribe_resource
        await _request(conn, f"{verb} of {uri!r}", functools.partial(send, uri))
