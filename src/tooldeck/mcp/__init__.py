"""Tools from MCP servers, merged into each turn (``tooldeck.mcp``).

Built on the official ``mcp`` SDK (imported absolutely; this package never shadows it):

- :mod:`tooldeck.mcp.config`: the ``mcpServers`` JSON config (stdio and streamable HTTP);
- :mod:`tooldeck.mcp.naming`: ``mcp__<server>__<tool>`` names in the provider charset;
- :mod:`tooldeck.mcp.connection`: one supervised connection (reconnect, re-list, calls);
- :mod:`tooldeck.mcp.source`: :class:`McpSource`, the servers' tools as a tool source;
- :mod:`tooldeck.mcp.prompts`: servers' prompts, listed and fetched with arguments;
- :mod:`tooldeck.mcp.resources`: servers' resources and templates, listed and read;
- :mod:`tooldeck.mcp.resource_tools`: the two read-only tools per server with resources;
- :mod:`tooldeck.mcp.asking`: who answers a server's own requests (the session of the
  call running);
- :mod:`tooldeck.mcp.elicitation`: a server's questions, answered by that session's approver;
- :mod:`tooldeck.mcp.sampling`: a server's sampling requests, served by a model when
  the policy allows, within a token budget;
- :mod:`tooldeck.mcp.roots`: the client's roots (the turn's home, configured ones);
- :mod:`tooldeck.mcp.oauth_store`, :mod:`tooldeck.mcp.oauth`,
  :mod:`tooldeck.mcp.oauth_login`: OAuth for HTTP servers (the token files, the SDK's
  provider on them, ``tooldeck mcp login``).

Needs the ``mcp`` extra (the SDK); without it, importing any module of this package is
:class:`~tooldeck.errors.MissingExtra`, one line naming the extra.

See ``docs/mcp.md``.
"""

from .._extras import require_extra

require_extra("mcp")  # before any module of the package imports the SDK

from .config import McpConfig, McpConfigError, OAuthSettings, ServerConfig, expand_vars  # noqa: E402
from .elicitation import ElicitationRequest  # noqa: E402
from .naming import Collision, exposed_name, map_names  # noqa: E402
from .prompts import (  # noqa: E402
    McpPrompt,
    PromptArgument,
    PromptError,
    PromptMessage,
    PromptResult,
)
from .resources import (  # noqa: E402
    McpResource,
    McpResourceTemplate,
    ResourceContent,
    ResourceError,
    ResourceResult,
)
from .sampling import Sampling, SamplingRequest  # noqa: E402
from .source import (  # noqa: E402
    McpProgress,
    McpPromptListChanged,
    McpResourceListChanged,
    McpResourceUpdated,
    McpServerStatusChanged,
    McpSource,
    McpTool,
    McpToolInfo,
    ServerStatus,
    tier_for,
)

__all__ = [
    "Collision",
    "ElicitationRequest",
    "McpConfig",
    "McpConfigError",
    "McpProgress",
    "McpPrompt",
    "McpPromptListChanged",
    "McpResource",
    "McpResourceListChanged",
    "McpResourceTemplate",
    "McpResourceUpdated",
    "McpServerStatusChanged",
    "McpSource",
    "McpTool",
    "McpToolInfo",
    "OAuthSettings",
    "PromptArgument",
    "PromptError",
    "PromptMessage",
    "PromptResult",
    "ResourceContent",
    "ResourceError",
    "ResourceResult",
    "Sampling",
    "SamplingRequest",
    "ServerConfig",
    "ServerStatus",
    "expand_vars",
    "exposed_name",
    "map_names",
    "tier_for",
]
