"""The gateway part of ``tooldeck demo``: ``tooldeck serve --tools`` started the way an MCP
client starts it (a subprocess over stdio), and a scripted client, the official MCP SDK's,
that lists, searches, calls the tool the search found, is denied by the policy and is
asked (by MCP elicitation) before a WRITE tool runs. Offline; a few seconds.

The served tools are this module's :data:`TOOLS` (the gateway imports this module, so it
imports nothing heavy at the top); the client's part is :func:`gateway_tour`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._extras import needs_extra
from ..tools import tool

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["TOOLS", "gateway_tour"]


@tool(read_only=True)
def get_weather(city: str) -> dict[str, Any]:
    """Get the current weather for a city.

    Args:
        city: City name, e.g. "Paris".
    """
    return {"city": city, "temp": 18, "sky": "clear"}


@tool(read_only=True)
def search_docs(query: str) -> list[str]:
    """Search the documentation and return matching page titles."""
    return [f"{query}: getting started", f"{query}: reference"]


@tool
def label_file(path: str, label: str) -> str:
    """Set a label on a file."""
    return f"{path} is labelled {label!r}"


@tool(destructive=True)
def drop_table(table: str) -> str:
    """Drop a table of the reporting database."""
    return f"dropped {table}"  # never reached: the demo's policy denies it


TOOLS = [get_weather, search_docs, label_file, drop_table]
SPEC = f"{__name__}:TOOLS"
POLICY = (
    "[profile]\n[[profile.rules]]\n"
    'tools = "drop_table"\naction = "deny"\n'
    'reason = "no client drops tables through this gateway"\n'
)


def gateway_tour(console: Console, folder: Path) -> None:
    """Serve :data:`TOOLS` behind a policy and talk to the gateway as a client would."""
    import anyio

    folder.mkdir(parents=True, exist_ok=True)
    policy = folder / "policy.toml"
    policy.write_text(POLICY)
    log = folder / "gateway.log"
    try:
        rows, asked = anyio.run(_client, folder, policy, log)
    except Exception as exc:  # a demo step that failed: said, with the gateway's log
        console.print(f"[red]the gateway demo failed:[/red] {type(exc).__name__}: {exc}")
        if log.exists():
            console.print(log.read_text()[-2_000:], markup=False, highlight=False)
        raise
    _show(console, rows, asked, folder)


async def _client(folder: Path, policy: Path, log: Path) -> tuple[list[tuple[str, str]], str]:
    import sys

    import anyio

    with needs_extra("mcp"):
        import mcp_types as types
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import stdio_client

    asked: list[str] = []

    async def approve(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)  # a real client shows this form to its user
        return types.ElicitResult(action="accept", content={"approve": True})

    args = ["-m", "tooldeck.cli", "serve", "--tools", SPEC, "--policy", str(policy)]
    args += ["--state", str(folder / "gateway"), "--approvals", "elicit", "--lexical"]
    server = StdioServerParameters(command=sys.executable, args=args)
    rows: list[tuple[str, str]] = []
    with log.open("w") as errlog:
        async with (
            stdio_client(server, errlog=errlog) as (read, write),
            ClientSession(read, write, elicitation_callback=approve) as client,
        ):
            with anyio.fail_after(60):
                await client.initialize()
                listed = [t.name for t in (await client.list_tools()).tools]
                rows.append(("tools/list", f"{', '.join(listed)} (the rest: tool_search)"))
                query = {"query": "what is the weather in a city"}
                found = _text(await client.call_tool("tool_search", query))
                rows.append((f"tool_search {json.dumps(query)}", found))
                name = found.split("- ", 1)[1].split(":", 1)[0]  # the first tool it names
                relisted = [t.name for t in (await client.list_tools()).tools]
                rows.append(("tools/list (after list_changed)", ", ".join(relisted)))
                weather = await client.call_tool(name, {"city": "Paris"})
                rows.append((f'{name} {{"city": "Paris"}}', _text(weather)))
                drop = {"name": "drop_table", "arguments": {"table": "sales"}}
                denied = await client.call_tool("call_tool", drop)
                rows.append((f"call_tool {json.dumps(drop)}", _text(denied)))
                label = {"name": "label_file", "arguments": {"path": "q3.csv", "label": "final"}}
                labelled = await client.call_tool("call_tool", label)
                rows.append(
                    (f"call_tool {json.dumps(label)}", f"(asked, approved) {_text(labelled)}")
                )
    return rows, asked[0].splitlines()[0] if asked else "(nothing was asked)"


def _text(result: Any) -> str:
    text = "\n".join(getattr(c, "text", "") for c in result.content).strip()
    return ("error: " if result.is_error else "") + text


def _show(console: Console, rows: list[tuple[str, str]], asked: str, folder: Path) -> None:
    from rich.table import Table

    from ..policy import AuditLog

    table = Table(
        title=f"A scripted MCP client and tooldeck serve --tools {SPEC} (stdio)",
        show_lines=True,
    )
    table.add_column("the client calls", overflow="fold")
    table.add_column("the gateway answers", overflow="fold")
    for call, answer in rows:
        table.add_row(call, answer if len(answer) < 400 else answer[:397] + "...")
    console.print(table)
    console.print(f"The gateway asked the client's user (elicitation): {asked}", markup=False)
    decisions = [
        f"{e['tool']}: {e['decision']}"
        for path in sorted((folder / "gateway").glob("*.audit.jsonl"))
        for e in AuditLog.read(path)
    ]
    console.print(f"Its audit log: {'; '.join(decisions)}", markup=False, highlight=False)
    console.print(
        "Put it in front of your own client's MCP servers: tooldeck serve --import CLIENT "
        "(docs/getting-started.md)",
        markup=False,
        highlight=False,
    )
