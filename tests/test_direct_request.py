"""The request line of a direct tools/call (mcp/direct_calls.py) is built from the
session's stamped ``_meta`` kept as JSON text: byte for byte what dumping the request's
dict gives (the line the SDK-stamped request was before)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tooldeck.mcp.direct_calls import _dumped, _request

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "tooldeck", "version": "0.1 ✓"},
    "io.modelcontextprotocol/clientCapabilities": {"roots": {"listChanged": True}},
}


def expected(
    request_id: str, name: str, arguments: Any, meta: dict[str, Any] | None, progress: bool
) -> bytes:
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    if meta is not None:
        params["_meta"] = meta
    if progress:
        params = {**params, "_meta": {**params.get("_meta", {}), "progressToken": request_id}}
    request = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    return _dumped(request)


ARGUMENTS = [None, {}, {"text": "hello"}, {"a": [1, 2.5, None, True], "é": {'"q': "\n"}}]
METAS = [None, {}, META, {"progressToken": "theirs", "x": 1}, {"k": 'say "progressToken"'}]


@pytest.mark.parametrize("progress", [True, False])
@pytest.mark.parametrize("meta", METAS)
@pytest.mark.parametrize("arguments", ARGUMENTS)
@pytest.mark.parametrize("name", ["echo__echo", 'odd "name" ü\u2028'])
def test_the_request_line_is_the_dumped_request(
    name: str, arguments: Any, meta: dict[str, Any] | None, progress: bool
) -> None:
    text = None if meta is None else json.dumps(meta, ensure_ascii=False, separators=(",", ":"))
    line = _request("tooldeck-7", name, arguments, text, progress)
    assert line == expected("tooldeck-7", name, arguments, meta, progress)
    assert json.loads(line)["id"] == "tooldeck-7"
