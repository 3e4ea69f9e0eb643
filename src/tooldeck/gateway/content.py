"""The upstream servers' resources, resource templates and prompts, served by the gateway.

Under the gateway's names, like its tools:

- a resource's URI is ``tooldeck://<server>/<its URI>`` (``<server>`` the server's
  namespace, :func:`~tooldeck.mcp.naming.namespace_name`), a template's likewise (the
  client fills the ``{variables}`` of the part after the server): one gateway serves two
  servers that both have ``file:///notes``, and a read goes to the server its URI names;
- a prompt is ``<server>__<prompt>`` (:func:`~tooldeck.mcp.naming.map_names`, the
  gateway's spelling, collisions said in the log).

Under the gateway's policy, like its calls: a read is judged as the call
``<server>__resources_read`` with ``{"uri": <the upstream URI>}`` (so a rule with a ``uri``
test denies URI patterns), a prompt as ``<server>__prompts_get`` with ``{"name": ...,
"arguments": ...}``; both are ``STANDARD`` (allowed unless a rule says otherwise) and
audited like calls. A deny, or an ask (nobody is asked for a read: a rule has to allow
it), is an error to the client, one line. Listings are the upstream servers' (bounded, as
the library's) in one page, the servers asked at once (:data:`LIST_AT_ONCE` at a time);
the contents and messages pass through as the servers sent them, the URIs rewritten.

``resources/subscribe`` of a gateway URI is judged as a read of it, then kept for the
client session that asked (:mod:`.clients`: subscribed upstream once, its updates sent
to the sessions subscribed, with the gateway's URI).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, TypeVar

import anyio
import mcp_types as types
from mcp import MCPError

from ..context import ToolContext
from ..mcp import McpSource, ResourceError
from ..mcp.naming import map_names, namespace_name, namespace_of
from ..mcp.prompts import McpPrompt, PromptError
from ..mcp.resource_tools import READ_SCHEMA
from ..mcp.resources import McpResource, McpResourceTemplate
from ..mcp.source import McpTool, McpToolInfo
from ..transcript import ToolCall

__all__ = ["LIST_AT_ONCE", "SCHEME", "UpstreamContent", "gateway_uri", "upstream_uri"]

_log = logging.getLogger("tooldeck.gateway")
SCHEME = "tooldeck://"
LIST_AT_ONCE = 8
"""How many upstream servers a listing of resources, templates or prompts asks at once."""
_T = TypeVar("_T")
_PROMPT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "arguments": {"type": "object"}},
}

SessionOf = Callable[[Any], AbstractAsyncContextManager[Any]]


class Subscriptions(Protocol):
    """Who keeps each client session's subscriptions (:class:`.clients.Clients`)."""

    async def subscribe(self, ctx: Any, server: str, uri: str) -> None: ...

    async def unsubscribe(self, ctx: Any, server: str, uri: str) -> None: ...


def gateway_uri(server: str, uri: str) -> str:
    """The gateway's URI of an upstream resource (or template) of ``server``."""
    return f"{SCHEME}{namespace_name(server)}/{uri}"


def upstream_uri(uri: str, servers: Mapping[str, str]) -> tuple[str, str]:
    """``(server, upstream URI)`` of a gateway URI; ``servers`` maps namespaces to
    names. An :class:`MCPError` (one line) for a URI that names no server."""
    if not uri.startswith(SCHEME):
        raise MCPError(types.INVALID_PARAMS, f"{uri!r} is not a gateway URI ({SCHEME}<server>/...)")
    namespace, slash, rest = uri[len(SCHEME) :].partition("/")
    server = servers.get(namespace)
    if server is None or not slash or not rest:
        known = ", ".join(sorted(servers)) or "none"
        raise MCPError(types.INVALID_PARAMS, f"{uri!r} names no server (servers: {known})")
    return server, rest


def _tool(server: str, name: str, method: str, schema: dict[str, Any]) -> McpTool:
    async def never(params: dict[str, Any], ctx: ToolContext) -> None:
        raise RuntimeError("judged, never executed")

    tool = McpTool.from_schema(
        schema,
        never,
        name=name,
        description=f"{method} of the MCP server {server}",
        tier="STANDARD",
        read_only=True,
        namespace=namespace_name(server),
    )
    tool.mcp = McpToolInfo(server, method, name, None, schema, None, {"readOnlyHint": True}, None)
    return tool


class UpstreamContent:
    """The ``resources/*`` and ``prompts/*`` handlers of the gateway's server.

    ``session_of(ctx)`` is the gateway's (an async context manager giving the request's
    :class:`~tooldeck.gateway.session.GatewaySession`, whose ``policy`` judges reads);
    ``clients`` keeps each client session's subscriptions (:mod:`.clients`)."""

    def __init__(
        self, source: McpSource, session_of: SessionOf, clients: Subscriptions | None = None
    ) -> None:
        self.source = source
        self.session_of = session_of
        self.clients = clients
        self.servers = {namespace_name(s.name): s.name for s in source.config.servers}

    def _active(self) -> list[str]:
        return [s.name for s in self.source.status() if s.active]

    async def _judge(self, ctx: Any, server: str, method: str, args: dict[str, Any]) -> None:
        suffix = "resources_read" if method == "resources/read" else "prompts_get"
        name = f"{namespace_name(server)}__{suffix}"
        schema = READ_SCHEMA if method == "resources/read" else _PROMPT_SCHEMA
        tool = _tool(server, name, method, schema)
        async with self.session_of(ctx) as session:
            call = ToolCall(call_id=f"{suffix}_{id(args):x}", name=name, arguments=args)
            decided = session.policy(tool, args, call)
        if decided.action == "deny":
            raise MCPError(types.INVALID_REQUEST, f"{name} denied by policy: {decided.reason}")
        if decided.action == "ask":
            raise MCPError(
                types.INVALID_REQUEST,
                f"{name} needs an approval, which is not asked for {method}: "
                f"allow it with a rule ({decided.reason})",
            )

    async def _each_active(
        self, list_one: Callable[[str], Awaitable[list[Any]]], errors: type[Exception]
    ) -> list[tuple[str, list[Any]]]:
        """``(server, what list_one(server) listed)`` for every active server, in their
        order, listed at once (at most :data:`LIST_AT_ONCE` servers at a time); a server
        that fails with ``errors`` is left out (logged)."""
        servers = self._active()
        found: list[list[Any] | None] = [None] * len(servers)
        limit = anyio.CapacityLimiter(LIST_AT_ONCE)

        async def one(i: int, server: str) -> None:
            async with limit:
                try:
                    found[i] = await list_one(server)
                except errors as exc:
                    _log.warning("%s", exc)

        async with anyio.create_task_group() as tg:
            for i, server in enumerate(servers):
                tg.start_soon(one, i, server)
        return [(server, f) for server, f in zip(servers, found, strict=True) if f is not None]

    async def _listed(
        self,
        list_one: Callable[[str], Awaitable[list[Any]]],
        errors: type[Exception],
        make: Callable[[str, Any], _T],
    ) -> list[_T]:
        """Every active server's listing, each entry made the gateway's by ``make``."""
        each = await self._each_active(list_one, errors)
        return [make(server, item) for server, found in each for item in found]

    # -- resources -------------------------------------------------------------------------
    async def list_resources(
        self, ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        def make(server: str, r: McpResource) -> types.Resource:
            return types.Resource(
                uri=gateway_uri(server, r.uri),
                name=f"{namespace_name(server)}__{r.name}",
                title=r.title,
                description=r.description,
                mime_type=r.mime_type,
                size=r.size,
            )

        listed = await self._listed(self.source.list_resources, ResourceError, make)
        return types.ListResourcesResult(resources=listed)

    async def list_resource_templates(
        self, ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        def make(server: str, t: McpResourceTemplate) -> types.ResourceTemplate:
            return types.ResourceTemplate(
                uri_template=gateway_uri(server, t.uri_template),
                name=f"{namespace_name(server)}__{t.name}",
                title=t.title,
                description=t.description,
                mime_type=t.mime_type,
            )

        listed = await self._listed(self.source.list_resource_templates, ResourceError, make)
        return types.ListResourceTemplatesResult(resource_templates=listed)

    async def subscribe_resource(
        self, ctx: Any, params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        """``resources/subscribe`` of a gateway URI: judged as a read of it, then
        subscribed for this client session (:mod:`.clients`)."""
        server, uri = upstream_uri(str(params.uri), self.servers)
        await self._judge(ctx, server, "resources/read", {"uri": uri})
        await self._clients().subscribe(ctx, server, uri)
        return types.EmptyResult()

    async def unsubscribe_resource(
        self, ctx: Any, params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        """``resources/unsubscribe``: this client session's subscription ends."""
        server, uri = upstream_uri(str(params.uri), self.servers)
        await self._clients().unsubscribe(ctx, server, uri)
        return types.EmptyResult()

    def _clients(self) -> Subscriptions:
        if self.clients is None:
            raise MCPError(types.METHOD_NOT_FOUND, "this gateway keeps no subscriptions")
        return self.clients

    async def read_resource(
        self, ctx: Any, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        asked = str(params.uri)
        server, uri = upstream_uri(asked, self.servers)
        await self._judge(ctx, server, "resources/read", {"uri": uri})
        try:
            read = await self.source.read_resource(server, uri)
        except ResourceError as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc)) from None
        contents: list[types.TextResourceContents | types.BlobResourceContents] = []
        for c in read.contents:
            shown = gateway_uri(server, c.uri) if c.uri else asked
            if c.text is not None:
                contents.append(
                    types.TextResourceContents(uri=shown, mime_type=c.mime_type, text=c.text)
                )
            else:
                contents.append(
                    types.BlobResourceContents(uri=shown, mime_type=c.mime_type, blob=c.blob or "")
                )
        return types.ReadResourceResult(contents=contents)

    # -- prompts ---------------------------------------------------------------------------
    async def _prompt_names(self, server: str) -> dict[str, McpPrompt]:
        """``{gateway name: McpPrompt}`` of one server."""
        prompts = await self.source.list_prompts(server)
        names, collisions = map_names(server, [p.name for p in prompts], prefixed=False)
        for collision in collisions:
            _log.warning("MCP prompt names collide: %s", collision.describe())
        return {names[p.name]: p for p in prompts if p.name in names}

    async def list_prompts(
        self, ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        async def named(server: str) -> list[tuple[str, McpPrompt]]:
            return list((await self._prompt_names(server)).items())

        def make(server: str, entry: tuple[str, McpPrompt]) -> types.Prompt:
            name, p = entry
            arguments = [
                types.PromptArgument(name=a.name, description=a.description, required=a.required)
                for a in p.arguments
            ]
            return types.Prompt(
                name=name, title=p.title, description=p.description, arguments=arguments
            )

        return types.ListPromptsResult(prompts=await self._listed(named, PromptError, make))

    async def get_prompt(
        self, ctx: Any, params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        namespace = namespace_of(params.name)
        server = self.servers.get(namespace or "")
        if server is None:
            raise MCPError(types.INVALID_PARAMS, f"no prompt {params.name!r} at the gateway")
        try:
            found = (await self._prompt_names(server)).get(params.name)
            if found is None:
                raise PromptError(f"no prompt {params.name!r} at the gateway")
            arguments = dict(params.arguments or {})
            judged = {"name": found.name, "arguments": arguments}
            await self._judge(ctx, server, "prompts/get", judged)
            return await self.source.get_prompt_result(server, found.name, arguments)
        except PromptError as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc)) from None
