"""A test MCP server whose tools return structured content (MCP 2025-06-18 and later).

- ``forecast``: a small object, with an ``outputSchema`` (from its return type);
- ``records``: ``count`` records in one object, with an ``outputSchema``: as big as asked;
- ``loose``: ``count`` records as structured content with no ``outputSchema``.

Run: ``python structured.py stdio``.
"""

from __future__ import annotations

if __name__ == "__main__":  # by the tests' fork server, when there is one
    __import__("_zygote_client").handoff()

import json
import sys

from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel

app = MCPServer("structured", instructions="A test server: structured results.")


class Forecast(BaseModel):
    city: str
    celsius: float
    sky: str


class Record(BaseModel):
    id: int
    name: str
    note: str


class Records(BaseModel):
    count: int
    records: list[Record]


def _records(count: int) -> list[Record]:
    return [
        Record(id=i, name=f"record {i:06d}", note="lorem ipsum dolor sit amet " * 3)
        for i in range(count)
    ]


@app.tool()
def forecast(city: str) -> Forecast:
    """The weather forecast for a city."""
    return Forecast(city=city, celsius=21.5, sky="clear")


@app.tool()
def records(count: int) -> Records:
    """Count numbered records, in one structured result."""
    return Records(count=count, records=_records(count))


@app.tool()
def loose(count: int) -> CallToolResult:
    """Count numbered records, as structured content without an output schema."""
    value = {"count": count, "records": [r.model_dump() for r in _records(count)]}
    text = json.dumps(value)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=value)


if __name__ == "__main__":
    assert sys.argv[1:] == ["stdio"], "run: python structured.py stdio"
    app.run()
