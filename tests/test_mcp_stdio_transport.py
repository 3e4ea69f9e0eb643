"""An upstream stdio server's pipes read and written by tooldeck (mcp/stdio_transport.py,
mcp/direct_calls.py), driven through a real ``tooldeck serve`` by a raw client.

The upstream is tests/mcp_servers/raw_wire.py, a server written line by line that
misbehaves on the wire: an answer that is not JSON-RPC, answers to ids nobody sent and
lines that are not JSON, a flood of progress, death mid-call, a call never answered.
Each call still gets exactly one answer (a cancelled one none), the upstream is told of
a cancelled call, and the session goes on.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from gateway_client import PY
from test_gateway_stdio_calls import _text, served

SERVER = Path(__file__).parent / "mcp_servers" / "raw_wire.py"


def _raw(log: Path) -> dict[str, Any]:
    return {
        "command": PY,
        "args": [str(SERVER), "stdio"],
        "env": {"RAW_WIRE_LOG": str(log)},
        "timeout": 20,  # a call left waiting shows as a timeout, well within the test's wait
    }


def _logged(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_malformed_stray_and_flooding_upstream_lines(tmp_path: Path) -> None:
    log = tmp_path / "wire.log"
    with served(tmp_path, servers={"raw": _raw(log)}) as c:
        c.initialize()
        c.settle()
        c.call(1, "raw__garbage", {})
        garbage = c.answer(1)
        assert garbage["result"]["isError"], garbage
        assert "not JSON-RPC" in _text(garbage) and "timed out" not in _text(garbage)
        c.call(2, "raw__strangers", {})  # stray answer, non-JSON line, a notification first
        assert _text(c.answer(2)) == "the real answer"
        c.call(3, "raw__flood", {"count": 3000})
        assert _text(c.answer(3)) == "flooded 3000"
        c.call(4, "raw__echo", {"text": "still here"})
        assert _text(c.answer(4)) == "still here"
        time.sleep(0.3)
        while not c.lines.empty():
            c.next()
        for request_id in (1, 2, 3, 4):
            assert len(c.answers(request_id)) == 1
        # the gateway's calls went upstream under its own ids, asking for progress
        calls = [m for m in _logged(log) if m.get("method") == "tools/call"]
        assert calls and all(str(m["id"]).startswith("tooldeck-") for m in calls)
        assert all(m["params"]["_meta"]["progressToken"] == m["id"] for m in calls)


def test_cancelled_call_reaches_upstream_and_death_mid_call_is_one_error(tmp_path: Path) -> None:
    log = tmp_path / "wire.log"
    with served(tmp_path, servers={"raw": _raw(log)}) as c:
        c.initialize()
        c.settle()
        c.call(1, "raw__hang", {})
        time.sleep(0.5)  # on its way upstream
        cancel = {"requestId": 1, "reason": "the user pressed stop"}
        c.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel})
        c.call(2, "raw__echo", {"text": "after the cancel"})
        assert _text(c.answer(2)) == "after the cancel"
        hung = next(m for m in _logged(log) if m.get("params", {}).get("name") == "hang")
        for _ in range(100):
            told = [m for m in _logged(log) if m.get("method") == "notifications/cancelled"]
            if told:
                break
            time.sleep(0.05)
        assert [m["params"]["requestId"] for m in told] == [hung["id"]]
        c.call(3, "raw__die", {})
        died = c.answer(3)
        assert died["result"]["isError"] and "went away" in _text(died), died
        c.call(4, "raw__echo", {"text": "back"})  # reconnected
        assert _text(c.answer(4)) == "back"
        time.sleep(0.3)
        while not c.lines.empty():
            c.next()
        assert c.answers(1) == [] and len(c.answers(3)) == 1
