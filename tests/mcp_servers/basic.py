"""A test MCP server built on the SDK's MCPServer (FastMCP in SDK 1.x).

Run: ``python basic.py stdio`` or ``python basic.py http PORT``. A server slow to start:
``BASIC_START_DELAY=SECONDS`` waits that long before serving, ``BASIC_START_GATE=FILE``
until that file exists (over stdio: or until the client closes our stdin, then exits).
"""

from __future__ import annotations

if __name__ == "__main__":  # by the tests' fork server, when there is one
    __import__("_zygote_client").handoff()

import contextlib
import os
import select
import sys
import time

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import BaseModel

app = MCPServer("basic", instructions="A test server: arithmetic, echo, slow work.")


class Weather(BaseModel):
    city: str
    celsius: float


@app.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@app.tool(structured_output=False)
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@app.tool()
def weather(city: str) -> Weather:
    """The weather in a city (structured content with an output schema)."""
    return Weather(city=city, celsius=21.5)


@app.tool()
def fail(message: str) -> str:
    """Always fails with the message (an isError result)."""
    raise ToolError(message)


@app.tool()
async def slow(seconds: float, ctx: Context) -> str:
    """Report progress three times, then sleep."""
    for step in range(3):
        await ctx.report_progress(step + 1, 3, f"step {step + 1}")
    await anyio.sleep(seconds)
    return f"slept {seconds}"


@app.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@app.tool(annotations=ToolAnnotations(read_only_hint=True))
def read_note() -> str:
    """A read-only tool (by its annotation)."""
    return "note"


@app.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
def wipe() -> str:
    """A destructive tool (by its annotation)."""
    return "wiped"


@app.tool(name="dotted.name", structured_output=False)
def dotted() -> str:
    """A tool whose name has a dot."""
    return "dotted.name"


@app.tool(name="dotted_name", structured_output=False)
def underscored() -> str:
    """A tool whose name collides with dotted.name once sanitised."""
    return "dotted_name"


LONG = "a_very_long_tool_name_" + "x" * 70


@app.tool(name=LONG, structured_output=False)
def long_name() -> str:
    """A tool whose exposed name must be shortened."""
    return "long"


@app.tool()
async def grow(name: str, ctx: Context) -> str:
    """Add a tool called NAME and announce that the tool list changed."""

    def extra(x: int) -> int:
        """A tool added at run time."""
        return x * 2

    app.add_tool(extra, name=name)
    await ctx.notify_tools_changed()  # 2026-era clients: the subscriptions/listen stream
    with contextlib.suppress(Exception):  # handshake-era clients: a plain notification
        await ctx.request_context.session.send_tool_list_changed()
    return f"added {name}"


if __name__ == "__main__":
    time.sleep(float(os.environ.get("BASIC_START_DELAY", "0")))
    gate = os.environ.get("BASIC_START_GATE")
    hangup = select.poll()  # over stdio: the client closed our stdin, it is gone
    if sys.argv[1] == "stdio":
        hangup.register(sys.stdin.fileno(), select.POLLHUP)
    while gate and not os.path.exists(gate):
        if hangup.poll(50):
            sys.exit(0)
    if sys.argv[1] == "stdio":
        app.run()
    else:
        anyio.run(lambda: app.run_streamable_http_async(host="127.0.0.1", port=int(sys.argv[2])))
