"""A test MCP server whose tools ask the client: a question (``order``) and the client's
model (``summarise``), through the SDK's resolvers, so in either protocol era: in the
2026-07-28 era as ``input_required`` rounds of the call itself, before it as
server-to-client requests.

Run: ``python asking.py stdio``.
"""

from __future__ import annotations

if __name__ == "__main__":  # by the tests' fork server, when there is one
    __import__("_zygote_client").handoff()

from typing import Annotated

import anyio
import mcp_types as types
from mcp.server.mcpserver import Elicit, ElicitationResult, MCPServer, Resolve, Sample
from pydantic import BaseModel

app = MCPServer("asking")


class Name(BaseModel):
    name: str


def ask() -> Elicit[Name]:
    return Elicit("Who is asking?", Name)


def sample(text: str) -> Sample:
    message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text=text))
    return Sample([message], max_tokens=20)


@app.tool()
def order(answer: Annotated[ElicitationResult[Name], Resolve(ask)]) -> str:
    """Ask who is ordering."""
    return f"{answer.action}: {answer.data.name if answer.action == 'accept' else '-'}"


@app.tool()
def summarise(text: str, answer: Annotated[types.CreateMessageResult, Resolve(sample)]) -> str:
    """Summarise a text with the client's model."""
    content = answer.content
    return content.text if isinstance(content, types.TextContent) else "?"


@app.tool()
async def pause(seconds: float, until: str = "") -> str:
    """Wait ``seconds`` (or until the file ``until`` exists), then answer."""
    with anyio.move_on_after(seconds):
        while not (until and await anyio.Path(until).exists()):  # noqa: ASYNC110 (a file)
            await anyio.sleep(0.02)
    return "paused"


if __name__ == "__main__":
    app.run()
