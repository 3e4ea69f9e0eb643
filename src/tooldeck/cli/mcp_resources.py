"""``tooldeck mcp resources`` and ``tooldeck mcp resource``: servers' resources, listed
and read (registered on the ``mcp`` group by :mod:`.mcp`)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from ._mcp_common import (
    ConfigArg,
    JsonOption,
    ServerArg,
    first_line,
    load_config,
    server_config,
    server_failures_in_the_output,
    started,
)
from .report import user_error

if TYPE_CHECKING:  # imported where used, so that ``--help`` loads no MCP client
    from ..mcp import McpResource, McpResourceTemplate, ResourceResult, ServerStatus

__all__ = ["resource_command", "resources_command"]


def resources_command(
    ctx: typer.Context,
    config: ConfigArg,
    server: Annotated[
        str | None, typer.Option("--server", "-s", help="Only this server's resources.")
    ] = None,
    json_output: JsonOption = False,
) -> None:
    """Connect to the servers of CONFIG and print their resources and resource templates."""
    from ..mcp import McpSource, ResourceError

    cfg = load_config(Console(), config)
    wanted = started(cfg, server)

    async def collect() -> tuple[
        list[ServerStatus], list[McpResource], list[McpResourceTemplate], list[str]
    ]:
        async with McpSource(wanted) as source:
            resources: list[McpResource] = []
            templates: list[McpResourceTemplate] = []
            problems: list[str] = []
            for status in source.status():
                if status.state == "connected":
                    try:
                        resources.extend(await source.list_resources(status.name))
                        templates.extend(await source.list_resource_templates(status.name))
                    except ResourceError as exc:
                        problems.append(str(exc))
            return source.status(), resources, templates, problems

    with server_failures_in_the_output(ctx):
        statuses, resources, templates, problems = asyncio.run(collect())
    if json_output:
        out = {
            "resources": [dataclasses.asdict(r) for r in resources],
            "templates": [dataclasses.asdict(t) for t in templates],
            "problems": problems,
        }
        typer.echo(json.dumps(out, indent=2))
    else:
        console = Console()
        table = Table(title=f"{config}: {len(resources)} resources, {len(templates)} templates")
        for column in ("server", "uri", "type", "name / description"):
            table.add_column(column)
        rows = [(r, r.uri) for r in resources] + [(t, t.uri_template) for t in templates]
        for item, uri in rows:
            about = first_line(item.description or item.title or "") or item.name
            table.add_row(item.server, uri, item.mime_type or "", about)
        console.print(table)
        for line in problems:
            console.print(f"  {line}", markup=False, highlight=False)
        for s in statuses:
            if s.state != "connected":
                console.print(f"  {s.name}: {s.state}: {s.error}", markup=False, highlight=False)
    if problems or any(s.state != "connected" for s in statuses):
        raise typer.Exit(1)


def _content_row(content: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"uri": content.uri, "mime_type": content.mime_type}
    if content.text is not None:
        row["text"] = content.text
    else:
        row["blob"] = content.blob
    return row


def resource_command(
    ctx: typer.Context,
    config: ConfigArg,
    server: ServerArg,
    uri: Annotated[str, typer.Argument(help="The resource's URI (see tooldeck mcp resources).")],
    json_output: JsonOption = False,
) -> None:
    """Read the resource URI of SERVER and print its contents (a blob as one line; --json:
    every content, a blob as base64)."""
    from ..mcp import McpConfig, McpSource, ResourceError

    cfg = load_config(Console(), config)
    chosen = dataclasses.replace(server_config(cfg, server), autostart=True)

    async def run() -> ResourceResult:
        async with McpSource(McpConfig((chosen,), cfg.source)) as source:
            status = source.server_status(chosen.name)
            if status.needs_login:
                raise user_error(status.error or "log in first", code=1)
            if status.state != "connected":
                how = "failed to start" if status.state == "failed" else f"is {status.state}"
                raise user_error(f"MCP server {chosen.name!r} {how}: {status.error}", code=1)
            try:
                return await source.read_resource(chosen.name, uri)
            except ResourceError as exc:
                raise user_error(str(exc), code=1) from exc

    with server_failures_in_the_output(ctx):
        result = asyncio.run(run())
    if json_output:
        out = {
            "server": result.server,
            "uri": result.uri,
            "contents": [_content_row(c) for c in result.contents],
        }
        typer.echo(json.dumps(out, indent=2))
    else:
        typer.echo(result.text())
