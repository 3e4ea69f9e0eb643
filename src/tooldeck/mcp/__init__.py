"""Tools from MCP servers, merged into each turn (``tooldeck.mcp``).

Built on the official ``mcp`` SDK (imported absolutely; this package never shadows it):

- :mod:`tooldeck.mcp.config`: the ``mcpServers`` JSON config (stdio and streamable HTTP);
- :mod:`tooldeck.mcp.naming`: ``mcp__<server>__<tool>`` names in the provider charset;
- :mod:`tooldeck.mcp.connection`: one supervised connection (reconnect, re-list, calls);
- :mod:`tooldeck.mcp.source`: :class:`McpSource`, the servers' tools as a tool source;
- :mod:`tooldeck.mcp.oauth_store`, :mod:`tooldeck.mcp.oauth`,
  :mod:`tooldeck.mcp.oauth_login`: OAuth for HTTP servers (the token files, the SDK's
  provider on them, ``tooldeck mcp login``).

See ``docs/mcp.md``.
"""

from .config import McpConfig, McpConfigError, OAuthSettings, ServerConfig, expand_vars
from .naming import Collision, exposed_name, map_names
from .source import (
    McpProgress,
    McpServerStatusChanged,
    McpSource,
    McpTool,
    McpToolInfo,
    ServerStatus,
    tier_for,
)

__all__ = [
    "Collision",
    "McpConfig",
    "McpConfigError",
    "McpProgress",
    "McpServerStatusChanged",
    "McpSource",
    "McpTool",
    "McpToolInfo",
    "OAuthSettings",
    "ServerConfig",
    "ServerStatus",
    "expand_vars",
    "exposed_name",
    "map_names",
    "tier_for",
]
