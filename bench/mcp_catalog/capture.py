"""Capture the tool lists of real MCP servers into ``bench/mcp_catalog/tools.json``.

The servers are the ones tooldeck's tests run: from PyPI ``mcp-server-time``,
``mcp-server-fetch`` and ``mcp-server-git``; from npm ``@modelcontextprotocol/server-
filesystem``, ``-memory`` and ``-everything`` (pinned, installed under
``~/.cache/tooldeck-tests/npm`` by the tests). Each tool is stored as the server listed it
(name, description, input schema), under the name the gateway gives it
(``<server>__<tool>``), with the server's package and version.

Run: ``uv run --with mcp-server-fetch python bench/mcp_catalog/capture.py``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

HERE = Path(__file__).resolve().parent
NPM = Path.home() / ".cache" / "tooldeck-tests" / "npm"
NPM_VERSION = "2026.8.31"


def _npm(package: str, command: str) -> list[str]:
    prefix = NPM / f"{package}-{NPM_VERSION}"
    manifest = prefix / "node_modules" / "@modelcontextprotocol" / package / "package.json"
    entry = json.loads(manifest.read_text())["bin"][command]
    return ["node", str(manifest.parent / entry)]


def servers(workdir: Path) -> dict[str, tuple[str, list[str]]]:
    py = sys.executable
    return {
        "time": (f"mcp-server-time {version('mcp-server-time')}", [py, "-m", "mcp_server_time"]),
        "fetch": (
            f"mcp-server-fetch {version('mcp-server-fetch')}",
            [py, "-m", "mcp_server_fetch"],
        ),
        "git": (f"mcp-server-git {version('mcp-server-git')}", [py, "-m", "mcp_server_git"]),
        "filesystem": (
            f"@modelcontextprotocol/server-filesystem {NPM_VERSION}",
            [*_npm("server-filesystem", "mcp-server-filesystem"), str(workdir)],
        ),
        "memory": (
            f"@modelcontextprotocol/server-memory {NPM_VERSION}",
            _npm("server-memory", "mcp-server-memory"),
        ),
        "everything": (
            f"@modelcontextprotocol/server-everything {NPM_VERSION}",
            _npm("server-everything", "mcp-server-everything"),
        ),
    }


async def tools_of(command: list[str], cwd: Path) -> list[Any]:
    params = StdioServerParameters(command=command[0], args=command[1:], cwd=str(cwd))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        return list((await session.list_tools()).tools)


async def main() -> None:
    out: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for space, (package, command) in servers(Path(tmp)).items():
            for tool in await tools_of(command, Path(tmp)):
                out.append(
                    {
                        "name": f"{space}__{tool.name}",
                        "description": tool.description or "",
                        "parameters": tool.input_schema,
                        "source": package,
                    }
                )
    data = {"version": 1, "count": len(out), "tools": out}
    (HERE / "tools.json").write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(out)} tools")


if __name__ == "__main__":
    asyncio.run(main())
