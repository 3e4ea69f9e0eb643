"""An MCP server over stdio written by hand, line by line, without the MCP SDK (so it
starts in milliseconds), whose tools misbehave on the wire the way a broken or hostile
server does. Every line it reads is appended to the file named by ``RAW_WIRE_LOG``.

Run: ``python raw_wire.py stdio``. Tools (each call's behaviour):

- ``echo``: answers ``{"text": ...}`` as text.
- ``garbage``: answers the call's id with a result that is not an object.
- ``strangers``: first writes an answer to an id nobody sent, a line that is not JSON and
  a notification, then the real answer.
- ``flood``: ``count`` progress notifications for the call (and as many for a token
  nobody gave), then the answer.
- ``die``: the process exits without answering.
- ``hang``: never answers (a ``notifications/cancelled`` for it is logged).
"""

from __future__ import annotations

import json
import os
import sys

TOOLS = ["echo", "garbage", "strangers", "flood", "die", "hang"]
SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string"}, "count": {"type": "integer"}},
}
LOG = os.environ.get("RAW_WIRE_LOG")


def send(message: dict[str, object] | str) -> None:
    text = message if isinstance(message, str) else json.dumps(message)
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def answer(request_id: object, result: object) -> None:
    send({"jsonrpc": "2.0", "id": request_id, "result": result})


def error(request_id: object, code: int, message: str) -> None:
    send({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})


def text(value: str) -> dict[str, object]:
    return {"content": [{"type": "text", "text": value}], "isError": False}


def call(request_id: object, params: dict[str, object]) -> None:
    name = params.get("name")
    arguments = params.get("arguments") or {}
    assert isinstance(arguments, dict)
    meta = params.get("_meta")
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    if name == "echo":
        answer(request_id, text(str(arguments.get("text", ""))))
    elif name == "garbage":
        answer(request_id, "not an object")
    elif name == "strangers":
        answer("tooldeck-999999", text("for nobody"))
        send("this is not JSON {")
        send({"jsonrpc": "2.0", "method": "notifications/message",
              "params": {"level": "info", "data": "tooldeck-1 is mentioned here"}})  # fmt: skip
        answer(request_id, text("the real answer"))
    elif name == "flood":
        count = int(arguments.get("count", 1000))
        for n in range(count):
            for to in (token, "tooldeck-nobody"):
                if to is not None:
                    params_ = {"progressToken": to, "progress": n, "total": count}
                    send({"jsonrpc": "2.0", "method": "notifications/progress", "params": params_})
        answer(request_id, text(f"flooded {count}"))
    elif name == "die":
        os._exit(3)
    elif name == "hang":
        pass
    else:
        send(
            {
                "jsonrpc": "2.0",
                "id": request_id,
                "error": {"code": -32602, "message": f"Unknown tool {name}"},
            }
        )


def main() -> None:
    for line in sys.stdin:
        if LOG:
            with open(LOG, "a") as log:
                log.write(line)
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if request_id is None or method is None:
            continue  # notifications and answers
        if method == "initialize":
            version = message["params"].get("protocolVersion", "2025-06-18")
            answer(request_id, {"protocolVersion": version, "capabilities": {"tools": {}},
                                "serverInfo": {"name": "raw-wire", "version": "1"}})  # fmt: skip
        elif method == "tools/list":
            tools = [
                {"name": n, "description": f"The {n} tool.", "inputSchema": SCHEMA} for n in TOOLS
            ]
            answer(request_id, {"tools": tools})
        elif method == "tools/call":
            call(request_id, message.get("params") or {})
        elif method == "ping":
            answer(request_id, {})
        else:
            send(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "error": {"code": -32601, "message": "Method not found"},
                }
            )


if __name__ == "__main__":
    main()
