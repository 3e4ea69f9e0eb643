"""A test MCP server that reports the trace context each request arrived with.

Run: ``python traced.py http PORT``. Its tool ``trace_headers`` answers with the
``traceparent`` / ``tracestate`` HTTP headers of the POST that carried the call and the
``traceparent`` in the request's ``_meta`` (both as received, or null).
"""

from __future__ import annotations

if __name__ == "__main__":  # by the tests' fork server, when there is one
    __import__("_zygote_client").handoff()

import sys
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer

app = MCPServer("traced", instructions="Reports the trace context of each call.")


@app.tool()
def trace_headers(ctx: Context) -> dict[str, Any]:
    """The trace context this call arrived with."""
    request = ctx.request_context.request
    headers = getattr(request, "headers", None)
    meta = ctx.request_context.meta
    dumped = meta.model_dump() if meta is not None and hasattr(meta, "model_dump") else meta
    return {
        "traceparent": headers.get("traceparent") if headers is not None else None,
        "tracestate": headers.get("tracestate") if headers is not None else None,
        "baggage": headers.get("baggage") if headers is not None else None,
        "meta_traceparent": dumped.get("traceparent") if isinstance(dumped, dict) else None,
    }


if __name__ == "__main__":
    anyio.run(lambda: app.run_streamable_http_async(host="127.0.0.1", port=int(sys.argv[2])))
