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
  (stdin and stdout used by the event loop, :mod:`._stdin`, so a stop is never held up;
  ``initialize`` answered before the SDK is loaded, :mod:`._handshake`);
- :mod:`.http_auth`: a static bearer token in front of HTTP;
- :mod:`.check`: what a client would see, without serving (``tooldeck serve --check``).

Needs the ``mcp`` and ``search`` extras; without them, importing any module of this
package is :class:`~tooldeck.errors.MissingExtra`, one line naming the extra (the SDK is
looked up, not loaded, so ``initialize`` is still answered before it loads).

See ``docs/gateway.md``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .._extras import require_extra

require_extra("mcp")  # before any module of the package imports the SDK
require_extra("search")  # its tool_search

if TYPE_CHECKING:
    from .catalog import Catalog, CatalogView, client_name
    from .server import Gateway
    from .session import CALL_TOOL_NAME, SEARCH_TOOL_NAME, GatewaySession

# Loaded on first use, so that ``tooldeck serve`` can answer ``initialize`` before the
# MCP SDK is loaded (:mod:`._handshake`): name -> defining module.
_LAZY = {
    "Catalog": "catalog",
    "CatalogView": "catalog",
    "client_name": "catalog",
    "Gateway": "server",
    "CALL_TOOL_NAME": "session",
    "SEARCH_TOOL_NAME": "session",
    "GatewaySession": "session",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "CALL_TOOL_NAME",
    "SEARCH_TOOL_NAME",
    "Catalog",
    "CatalogView",
    "Gateway",
    "GatewaySession",
    "client_name",
]
