"""``tooldeck serve``: an MCP server in front of MCP servers (``tooldeck.gateway``).

The gateway aggregates the servers of an ``mcpServers`` config (through
:class:`~tooldeck.mcp.McpSource`) and serves them to one MCP client per session with
deferred loading, tooldeck's policy chain and approvals, and large-result offload:

- :mod:`.catalog`: the upstream tools under collision-free client names, the search index;
- :mod:`.wire`: listed tools and call results as MCP types, their token cost;
- :mod:`.approval`: how an ask reaches a human (``--approvals``), by elicitation;
- :mod:`.allow`: with nobody to ask, the exact rule that would allow the call;
- :mod:`.out_of_band`: a call that waits for ``tooldeck approve``;
- :mod:`.native`: tooldeck's own tools served too (``--definitions``);
- :mod:`.evidence`: the record of every upstream result, complete;
- :mod:`.session`: one client session: its listing, its dispatcher, its offload store;
- :mod:`.server`: the lowlevel MCP server, list_changed, stdio and streamable HTTP
  (stdin read by the event loop, :mod:`._stdin`, so a stop is never held up);
- :mod:`.http_auth`: a static bearer token in front of HTTP;
- :mod:`.check`: what a client would see, without serving (``tooldeck serve --check``).

See ``docs/gateway.md``.
"""

from .catalog import Catalog, CatalogView, client_name
from .server import Gateway
from .session import CALL_TOOL_NAME, SEARCH_TOOL_NAME, GatewaySession

__all__ = [
    "CALL_TOOL_NAME",
    "SEARCH_TOOL_NAME",
    "Catalog",
    "CatalogView",
    "Gateway",
    "GatewaySession",
    "client_name",
]
