"""The end of a stdio session with calls still running on the gateway's own call path
(gateway/stdio_calls.py): each is cancelled and answered "Connection closed" (the MCP
SDK's error for it, code -32000), once; the gateway then exits. A real ``tooldeck serve``
in front of tests/mcp_servers/basic.py, read by the raw client of
tests/test_gateway_stdio_calls.py.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

from test_gateway_stdio_calls import served

CONNECTION_CLOSED = -32000


def test_calls_running_when_stdin_ends_are_answered_connection_closed(tmp_path: Path) -> None:
    with served(tmp_path) as c:
        c.initialize()
        c.settle()
        c.call(1, "alpha__slow", {"seconds": 30})
        c.call("two", "alpha__slow", {"seconds": 30})
        c.call(3, "alpha__echo", {"text": "done before the end"})
        assert c.answer(3)["result"]["content"][0]["text"] == "done before the end"
        time.sleep(0.3)  # both slow calls on their way upstream
        assert c.proc.stdin is not None
        started = time.monotonic()
        c.proc.stdin.close()
        for request_id in (1, "two"):
            error = c.answer(request_id)["error"]
            assert error == {"code": CONNECTION_CLOSED, "message": "Connection closed"}
        assert c.proc.wait(30) == 0
        assert time.monotonic() - started < 20  # not the 30 s the calls would take
        assert len(c.answers(1)) == len(c.answers("two")) == 1


def test_calls_running_at_sigterm_are_answered_connection_closed(tmp_path: Path) -> None:
    with served(tmp_path) as c:
        c.initialize()
        c.settle()
        c.call(5, "alpha__slow", {"seconds": 30})
        time.sleep(0.3)
        c.proc.send_signal(signal.SIGTERM)
        error = c.answer(5)["error"]
        assert error == {"code": CONNECTION_CLOSED, "message": "Connection closed"}
        assert c.proc.wait(30) == 0
