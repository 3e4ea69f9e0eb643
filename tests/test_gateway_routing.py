"""A question forwarded by ``tooldeck serve`` ends when its client cancels the call.

A real gateway over stdio, reached by the official MCP SDK client whose elicitation
callback never answers; upstream, npm's ``@modelcontextprotocol/server-everything``
(``trigger-elicitation-request``). The client gives up on the call: the gateway cancels
its upstream call, and the question waiting on the client ends with it (audited), long
before the upstream's 60 s timeout (mcp/asking.py).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types

from gateway_client import (
    ALLOW_ALL,
    audit_lines,
    gateway,
    node_server,
    npm_server,
    write_config,
    write_policy,
)

EVERYTHING = ("@modelcontextprotocol/server-everything", "2026.8.31", "mcp-server-everything")
QUESTION = "everything__elicitation_create"


def ended(state: Path) -> list[str]:
    lines = [line for line in audit_lines(state) if line["tool"] == QUESTION]
    return [line["reason"] for line in lines if "ended" in line["reason"]]


def test_a_forwarded_question_ends_when_the_client_cancels_the_call(tmp_path: Path) -> None:
    asked = anyio.Event()

    async def never(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def main() -> None:
        entry = npm_server(*EVERYTHING)
        config = write_config(tmp_path, {"everything": node_server(entry, "stdio")})
        policy = write_policy(tmp_path, ALLOW_ALL)
        state = tmp_path / "state"
        args = ("--core", "*", "--policy", str(policy))
        async with gateway(config, state, *args, elicit=never) as client:
            with anyio.move_on_after(30):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(client.call_tool, "everything__trigger-elicitation-request", {})
                    await asked.wait()
                    tg.cancel_scope.cancel()  # the client gives up on its call
            deadline = time.monotonic() + 10
            while not ended(state):
                assert time.monotonic() < deadline, audit_lines(state)
                await anyio.sleep(0.1)
            echo = await client.call_tool("everything__echo", {"message": "still here"})
            assert "still here" in str(echo.content)

    anyio.run(main)
