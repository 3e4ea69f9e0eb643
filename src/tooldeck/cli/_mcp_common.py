"""What the ``tooldeck mcp`` commands share: the config argument, loading it, the
server argument, quiet start-up logs."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from .report import VERBOSE_KEY, existing_file, user_error

if TYPE_CHECKING:  # imported where used, so that ``--help`` loads no MCP client
    from ..mcp import McpConfig, ServerConfig

__all__ = [
    "ConfigArg",
    "JsonOption",
    "ServerArg",
    "first_line",
    "load_config",
    "quiet",
    "server_config",
    "server_failures_in_the_output",
    "started",
]

ConfigArg = Annotated[Path, typer.Argument(help='An MCP config file ({"mcpServers": {...}}).')]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]


def load_config(console: Console, path: Path) -> McpConfig:
    from ..mcp import McpConfig, McpConfigError

    what = 'an MCP config file ({"mcpServers": {...}})'
    existing_file(path, what)
    try:
        return McpConfig.load(path)
    except McpConfigError as exc:
        raise user_error(f"{exc.source}: {'; '.join(exc.problems)}; give {what}") from exc


@contextmanager
def quiet(ctx: typer.Context, logger: str, level: int) -> Iterator[None]:
    """``logger`` at ``level`` while the command runs, unless ``-v``."""
    log = logging.getLogger(logger)
    saved = log.level
    if not ctx.meta.get(VERBOSE_KEY):
        log.setLevel(level)
    try:
        yield
    finally:
        log.setLevel(saved)


def server_failures_in_the_output(ctx: typer.Context) -> contextlib.AbstractContextManager[None]:
    """While an ``mcp`` command runs, a server that fails to start is said once, by the
    command's own output (its table row, its error line): not also as a log warning
    (``-v`` shows both)."""
    return quiet(ctx, "tooldeck.mcp", logging.ERROR)


def first_line(text: str, limit: int = 80) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


ServerArg = Annotated[str, typer.Argument(help="The server's name in the config.")]


def server_config(cfg: McpConfig, name: str) -> ServerConfig:
    """The configured server ``name``, or a one-line error naming the ones there are."""
    try:
        return cfg[name]
    except KeyError as exc:
        raise user_error(str(exc.args[0])) from exc


def started(cfg: McpConfig, server: str | None) -> McpConfig:
    """``cfg`` with only ``server`` (every server when None), each started at once."""
    import dataclasses

    from ..mcp import McpConfig

    chosen = [server_config(cfg, server)] if server is not None else list(cfg.servers)
    return McpConfig(tuple(dataclasses.replace(s, autostart=True) for s in chosen), cfg.source)
