"""``tooldeck mcp ...``: list the servers of an MCP config, call their tools, fetch their
prompts, log in to them (the resource commands: :mod:`.mcp_resources`)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from . import _mcp_common as common
from ._mcp_common import ConfigArg, JsonOption, ServerArg
from .mcp_resources import resource_command, resources_command
from .report import json_kind, user_error

if TYPE_CHECKING:  # imported where used, so that ``--help`` loads no MCP client
    from ..mcp import McpConfig, McpTool, ServerConfig, ServerStatus
    from ..result import ToolResult

app = typer.Typer(
    help="List MCP servers from a config file, call their tools, fetch their prompts and "
    "resources, log in.",
    no_args_is_help=True,
)
_first_line = common.first_line
_load = common.load_config
_quiet = common.quiet
_server = common.server_config
_server_failures_in_the_output = common.server_failures_in_the_output


def _tool_row(tool: McpTool) -> dict[str, Any]:
    info = tool.mcp
    hints = [
        h for h, on in (("read-only", tool.read_only), ("destructive", tool.destructive)) if on
    ]
    return {
        "name": tool.name,
        "tool": info.tool,
        "tier": tool.tier,
        "hints": hints,
        "description": tool.description,
    }


@app.command("list")
def list_command(
    ctx: typer.Context,
    config: ConfigArg,
    json_output: JsonOption = False,
    autostart_only: Annotated[
        bool,
        typer.Option("--autostart-only", help="Skip servers configured with autostart: false."),
    ] = False,
) -> None:
    """Connect to the servers of CONFIG; print each one's status and tools (exit 1 if any fails)."""
    from ..mcp import McpSource, McpTool

    console = Console()
    cfg = _load(console, config)

    async def collect() -> tuple[list[ServerStatus], dict[str, list[McpTool]]]:
        async with McpSource(cfg) as source:
            if not autostart_only:
                for server in cfg.servers:
                    if not server.autostart:
                        await source.activate(server.name)
            tools: dict[str, list[McpTool]] = {}
            for tool in source.tools():
                if isinstance(tool, McpTool):
                    tools.setdefault(tool.mcp.server, []).append(tool)
            return source.status(), tools

    with _server_failures_in_the_output(ctx):
        statuses, tools = asyncio.run(collect())
    if json_output:
        out = [
            {**s.as_dict(), "tools": [_tool_row(t) for t in tools.get(s.name, [])]}
            for s in statuses
        ]
        typer.echo(json.dumps({"servers": out}, indent=2))
    else:
        table = Table(title=str(config))
        for column in ("server", "transport", "state", "protocol", "tools", "error"):
            table.add_column(column)
        for s in statuses:
            style = "green" if s.state == "connected" else "red" if s.error else "yellow"
            table.add_row(
                s.name,
                s.target,
                f"[{style}]{s.state}[/{style}]",
                s.protocol_version or "",
                str(len(s.tools)),
                s.error or "",
            )
        console.print(table)
        for s in statuses:
            listed = tools.get(s.name, [])
            if listed:
                t = Table(title=f"{s.name}: {len(listed)} tools")
                for column in ("name", "MCP tool", "tier", "hints", "description"):
                    t.add_column(column)
                for tool in listed:
                    row = _tool_row(tool)
                    t.add_row(
                        row["name"],
                        row["tool"],
                        row["tier"],
                        ", ".join(row["hints"]),
                        _first_line(row["description"]),
                    )
                console.print(t)
            # a server whose every tool was skipped still says why
            for line in s.collisions:
                console.print(f"  {s.name}: note: {line}", markup=False, highlight=False)
            for line in s.skipped:
                console.print(f"  {s.name}: skipped: {line}", markup=False, highlight=False)
    skipped = {s.name for s in statuses if not s.autostart and autostart_only}
    if any(s.state != "connected" for s in statuses if s.name not in skipped):
        raise typer.Exit(1)


def _print_result(console: Console, result: ToolResult, json_output: bool) -> None:
    from ..result import ImagePart, JsonPart, TextPart

    if json_output:
        parts: list[Any] = []
        for part in result.parts:
            if isinstance(part, TextPart):
                parts.append({"type": "text", "text": part.text})
            elif isinstance(part, JsonPart):
                parts.append({"type": "json", "value": part.value})
            elif isinstance(part, ImagePart):
                parts.append({"type": "image", "mime_type": part.mime_type})
        typer.echo(json.dumps({"is_error": result.is_error, "content": parts}, indent=2))
        return
    text = result.text()
    if result.is_error:
        console.print(f"[red]error:[/red] {text}", highlight=False)
    else:
        typer.echo(text)


@app.command("call")
def call_command(
    ctx: typer.Context,
    config: ConfigArg,
    server: Annotated[str, typer.Argument(help="The server's name in the config.")],
    tool: Annotated[str, typer.Argument(help="The tool's MCP name (or its exposed name).")],
    args: Annotated[str, typer.Option("--args", "-a", help="The arguments, a JSON object.")] = "{}",
    timeout: Annotated[
        float | None, typer.Option("--timeout", help="Seconds (default: the server's timeout).")
    ] = None,
    json_output: JsonOption = False,
) -> None:
    """Call TOOL of SERVER with --args (validated locally first); exit 1 on an error result."""
    from ..arguments import validate_arguments
    from ..context import ToolContext
    from ..errors import ArgumentError
    from ..mcp import McpConfig, McpProgress, McpSource, McpTool

    console = Console()
    err = Console(stderr=True)
    cfg = _load(console, config)
    chosen = _server(cfg, server)
    try:
        arguments = json.loads(args)
    except json.JSONDecodeError as exc:
        raise user_error(f"--args is not JSON ({exc}); give a JSON object") from exc
    if not isinstance(arguments, dict):
        raise user_error(f"--args is {json_kind(arguments)}; give a JSON object")
    chosen = dataclasses.replace(chosen, autostart=True, timeout=timeout or chosen.timeout)
    single = McpConfig((chosen,), cfg.source)

    def progress(event: Any) -> None:
        if isinstance(event, McpProgress):
            total = f"/{event.total:g}" if event.total is not None else ""
            note = f" {event.message}" if event.message else ""
            err.print(f"progress {event.progress:g}{total}{note}", highlight=False)

    async def run() -> ToolResult:
        async with McpSource(single) as source:
            status = source.server_status(chosen.name)
            if status.needs_login:
                raise user_error(status.error or "log in first", code=1)
            if status.state != "connected":
                how = "failed to start" if status.state == "failed" else f"is {status.state}"
                raise user_error(f"MCP server {chosen.name!r} {how}: {status.error}")
            found = [
                t for t in source.tools() if isinstance(t, McpTool) and tool in (t.mcp.tool, t.name)
            ]
            if not found:
                names = ", ".join(t.mcp.tool for t in source.tools() if isinstance(t, McpTool))
                raise user_error(f"no tool {tool!r} on {chosen.name!r}; its tools: {names}")
            try:
                validated = validate_arguments(found[0], arguments)
            except ArgumentError as exc:
                raise user_error(f"--args for {tool}: " + "; ".join(exc.problems)) from exc
            tool_ctx = ToolContext(tool_name=found[0].name, sink=progress)
            return await found[0].invoke(validated.params, tool_ctx)

    with _server_failures_in_the_output(ctx):
        result = asyncio.run(run())
    _print_result(console, result, json_output)
    if result.is_error:
        raise typer.Exit(1)


def _oauth_server(cfg: McpConfig, name: str) -> ServerConfig:
    server = _server(cfg, name)
    if server.transport != "http":
        raise user_error(f"server {name!r} is a stdio server; OAuth is for HTTP servers")
    if server.oauth is None:
        raise user_error(
            f'server {name!r} does not use OAuth; add "oauth": true to its entry in {cfg.source}'
        )
    return server


@app.command("login")
def login_command(
    ctx: typer.Context,
    config: ConfigArg,
    server: ServerArg,
    no_browser: Annotated[
        bool, typer.Option("--no-browser", help="Print the URL to open instead of opening it.")
    ] = False,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds to wait for the browser's redirect.")
    ] = 300.0,
) -> None:
    """Log in to SERVER with OAuth (in the browser) and store its tokens for later commands."""
    from ..mcp.oauth import login_command as hint_for
    from ..mcp.oauth_login import LoginFailed, login
    from ..mcp.oauth_store import OAuthStoreError

    cfg = _load(Console(), config)
    chosen = _oauth_server(cfg, server)
    if timeout <= 0:
        raise user_error("--timeout must be a positive number of seconds")

    def say(line: str) -> None:
        typer.echo(line)

    async def run() -> Any:
        return await login(
            chosen,
            hint=hint_for(cfg.source, chosen.name),
            say=say,
            open_browser=not no_browser,
            wait_seconds=timeout,
        )

    try:
        # the SDK logs its flow's failures with a traceback; said here in one line
        with _quiet(ctx, "mcp.client.auth", logging.CRITICAL):
            result = asyncio.run(run())
    except (LoginFailed, OAuthStoreError) as exc:
        raise user_error(str(exc), code=1) from exc
    typer.echo(
        f"Logged in to {result.server!r} ({result.tools} tools); the tokens are in {result.path}"
    )


@app.command("logout")
def logout_command(config: ConfigArg, server: ServerArg) -> None:
    """Forget SERVER's OAuth tokens (revoking them at the authorization server if it can)."""
    from ..mcp.oauth_login import logout
    from ..mcp.oauth_store import OAuthStoreError

    cfg = _load(Console(), config)
    chosen = _oauth_server(cfg, server)
    try:
        existed, note = asyncio.run(logout(chosen))
    except OAuthStoreError as exc:
        raise user_error(str(exc), code=1) from exc
    if existed:
        typer.echo(f"Logged out of {chosen.name!r}: the token file was removed; {note}.")
    else:
        typer.echo(f"Not logged in to {chosen.name!r}; nothing to do.")


def _prompt_arguments(pairs: list[str]) -> dict[str, str]:
    """``key=value`` words as a prompt's arguments; a word without ``=`` is a user error."""
    arguments: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise user_error(f"{pair!r} is not key=value; give each prompt argument as key=value")
        arguments[key] = value
    return arguments


def _message_row(message: Any) -> dict[str, Any]:
    from ..result import ImagePart, TextPart

    part = message.content
    if isinstance(part, TextPart):
        return {"role": message.role, "type": "text", "text": part.text}
    if isinstance(part, ImagePart):
        return {"role": message.role, "type": "image", "mime_type": part.mime_type}
    return {"role": message.role, "type": part.type}


@app.command("prompts")
def prompts_command(
    ctx: typer.Context,
    config: ConfigArg,
    server: Annotated[
        str | None, typer.Option("--server", "-s", help="Only this server's prompts.")
    ] = None,
    json_output: JsonOption = False,
) -> None:
    """Connect to the servers of CONFIG and print the prompts they offer, with their arguments."""
    from ..mcp import McpPrompt, McpSource, PromptError

    cfg = _load(Console(), config)
    wanted = common.started(cfg, server)

    async def collect() -> tuple[list[ServerStatus], list[McpPrompt]]:
        async with McpSource(wanted) as source:
            prompts: list[McpPrompt] = []
            for status in source.status():
                if status.state == "connected":
                    with contextlib.suppress(PromptError):  # said by its status row
                        prompts.extend(await source.list_prompts(status.name))
            return source.status(), prompts

    with _server_failures_in_the_output(ctx):
        statuses, prompts = asyncio.run(collect())
    if json_output:
        rows = [
            {
                "server": p.server,
                "name": p.name,
                "title": p.title,
                "description": p.description,
                "arguments": [dataclasses.asdict(a) for a in p.arguments],
            }
            for p in prompts
        ]
        typer.echo(json.dumps({"prompts": rows}, indent=2))
    else:
        console = Console()
        table = Table(title=f"{config}: {len(prompts)} prompts")
        for column in ("server", "prompt", "arguments", "description"):
            table.add_column(column)
        for p in prompts:
            args = ", ".join(a.name + ("" if a.required else "?") for a in p.arguments)
            table.add_row(p.server, p.name, args, _first_line(p.description or p.title or ""))
        console.print(table)
        for s in statuses:
            if s.state != "connected":
                console.print(f"  {s.name}: {s.state}: {s.error}", markup=False, highlight=False)
    if any(s.state != "connected" for s in statuses):
        raise typer.Exit(1)


@app.command("prompt")
def prompt_command(
    ctx: typer.Context,
    config: ConfigArg,
    server: ServerArg,
    name: Annotated[str, typer.Argument(help="The prompt's name (see tooldeck mcp prompts).")],
    arguments: Annotated[
        list[str] | None, typer.Argument(help="The prompt's arguments, each key=value.")
    ] = None,
    json_output: JsonOption = False,
) -> None:
    """Fetch the prompt NAME of SERVER with key=value arguments and print its messages."""
    from ..mcp import McpConfig, McpSource, PromptError, PromptResult

    cfg = _load(Console(), config)
    chosen = dataclasses.replace(_server(cfg, server), autostart=True)
    values = _prompt_arguments(arguments or [])

    async def run() -> PromptResult:
        async with McpSource(McpConfig((chosen,), cfg.source)) as source:
            status = source.server_status(chosen.name)
            if status.needs_login:
                raise user_error(status.error or "log in first", code=1)
            if status.state != "connected":
                how = "failed to start" if status.state == "failed" else f"is {status.state}"
                raise user_error(f"MCP server {chosen.name!r} {how}: {status.error}", code=1)
            try:
                return await source.get_prompt(chosen.name, name, values)
            except PromptError as exc:
                refused = "refused" in str(exc) or "timed out" in str(exc)
                raise user_error(str(exc), code=1 if refused else 2) from exc

    with _server_failures_in_the_output(ctx):
        result = asyncio.run(run())
    if json_output:
        out = {
            "server": result.server,
            "name": result.name,
            "description": result.description,
            "messages": [_message_row(m) for m in result.messages],
        }
        typer.echo(json.dumps(out, indent=2))
    else:
        typer.echo(result.text())


app.command("resources")(resources_command)
app.command("resource")(resource_command)
