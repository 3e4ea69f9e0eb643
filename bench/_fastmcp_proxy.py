"""fastmcp's proxy (``fastmcp.server.create_proxy``) in front of one stdio MCP server, as
its docs show it, for bench/gateway_proxy.py: the peer the gateway is measured against.

    python bench/_fastmcp_proxy.py stdio|http PORT -- COMMAND ARGS...
"""

from __future__ import annotations

import sys

from fastmcp.client.transports import StdioTransport
from fastmcp.server import create_proxy


def main() -> None:
    split = sys.argv.index("--")
    front, upstream = sys.argv[1:split], sys.argv[split + 1 :]
    proxy = create_proxy(StdioTransport(upstream[0], upstream[1:]), name="fastmcp-proxy")
    if front[0] == "stdio":
        proxy.run("stdio", show_banner=False)
    else:
        port = int(front[1])
        proxy.run("http", show_banner=False, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
