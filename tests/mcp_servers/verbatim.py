"""An MCP server over stdio written by hand (no SDK) whose one tool, ``reply``, answers a
call with what the call's arguments say, verbatim: ``{"result": R}`` answers the result
``R`` (any JSON, valid or not), ``{"error": E}`` the JSON-RPC error ``E``, ``{"line":
S}`` writes ``S`` as the whole answer line (not JSON-RPC, say). Each initialize request
is appended to the file named by ``VERBATIM_LOG``.

Run: ``python verbatim.py stdio``.
"""

from __future__ import annotations

import json
import os
import sys

LOG = os.environ.get("VERBATIM_LOG")


def send(message: dict[str, object] | str) -> None:
    text = message if isinstance(message, str) else json.dumps(message)
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def call(request_id: object, params: dict[str, object]) -> None:
    arguments = params.get("arguments") or {}
    assert isinstance(arguments, dict)
    if "line" in arguments:
        send(str(arguments["line"]).replace("ID", json.dumps(request_id)))
    elif "error" in arguments:
        send({"jsonrpc": "2.0", "id": request_id, "error": arguments["error"]})
    else:
        send({"jsonrpc": "2.0", "id": request_id, "result": arguments.get("result")})


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if request_id is None or method is None:
            continue  # notifications and answers
        if method == "initialize":
            if LOG:
                with open(LOG, "a") as log:
                    log.write(line)
            version = message["params"].get("protocolVersion", "2025-06-18")
            send({"jsonrpc": "2.0", "id": request_id, "result": {
                "protocolVersion": version, "capabilities": {"tools": {}},
                "serverInfo": {"name": "verbatim", "version": "1"}}})  # fmt: skip
        elif method == "tools/list":
            tool = {"name": "reply", "description": "Answers verbatim.",
                    "inputSchema": {"type": "object"}}  # fmt: skip
            send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": [tool]}})
        elif method == "tools/call":
            call(request_id, message.get("params") or {})
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": request_id, "result": {}})
        else:
            send({"jsonrpc": "2.0", "id": request_id,
                  "error": {"code": -32601, "message": "Method not found"}})  # fmt: skip


if __name__ == "__main__":
    main()
