"""``tooldeck serve --import CLIENT``: the gateway's config from the MCP servers a client
already has (:mod:`tooldeck.gateway.importer`), and the client's entry for the gateway.

The config is written to ``--mcp`` (default ``~/.config/tooldeck/mcp.json``), never over
an existing file without ``--force``; what was imported, left out (why) and noted goes
to stderr, the client's entry (JSON in its own format) to stdout.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from .report import user_error

__all__ = ["import_client_servers"]


def import_client_servers(
    client_key: str, source: Path | None, target: Path | None, force: bool
) -> None:
    """``--import CLIENT`` (``gateway.importer``): write the gateway's config from the
    client's servers, say what was left out, print the client's entry for the gateway."""
    import os

    from .._atomic_json import write_json_atomic
    from ..gateway.importer import (
        CLIENTS,
        ClientConfigError,
        default_config,
        gateway_entry,
        read_client,
    )

    client = CLIENTS[client_key]
    home, cwd = Path.home(), Path.cwd()
    path = Path(os.path.abspath((target or default_config(home, os.environ)).expanduser()))
    if path.is_dir():
        raise user_error(f"--mcp {path} is a folder; give the file to write the config to")
    if path.exists() and not force:
        raise user_error(
            f"{path} exists; give --force to replace it, or --mcp OTHER.json to write another"
        )
    try:
        found = read_client(client, home, cwd, os.environ, only=source and source.expanduser())
    except ClientConfigError as exc:
        raise user_error(str(exc)) from exc
    if not found.servers:
        why = "; ".join(found.skipped) or "it has no MCP servers"
        read = ", ".join(map(str, found.read))
        raise user_error(f"nothing to import from {client.name} ({read}): {why}")
    try:
        write_json_atomic(path, {"mcpServers": found.servers})
    except OSError as exc:
        raise user_error(f"cannot write {path} ({exc.strerror or exc})") from exc
    snippet, more = gateway_entry(found, *_gateway_command(path))

    def say(line: str) -> None:
        typer.echo(line, err=True)

    imported = ", ".join(f"{n} ({found.origin[n]})" for n in found.servers)
    say(f"Imported {len(found.servers)} server(s) from {client.name}: {imported}")
    for line in found.skipped:
        say(f"Left in {client.name}: {line}")
    for line in found.notes:
        say(f"Note: {line}")
    say(f"Wrote {path}; see what a client gets: tooldeck serve --mcp {path} --check")
    if found.needs:
        say(f"The entry passes the gateway {', '.join(found.needs)}, which the servers use.")
    files = ", ".join(dict.fromkeys(str(found.origin[n]) for n in found.servers))
    say(
        f"In {client.name} ({files}), put this one entry in place of "
        f"{', '.join(found.servers)}, then restart it:"
    )
    if more:
        say(more)
    typer.echo(json.dumps(snippet, indent=2))


def _gateway_command(config: Path) -> tuple[str, list[str]]:
    """How a client starts this gateway: this ``tooldeck`` script (absolute, not resolved:
    ``uv tool install``'s link stays valid across upgrades), else this Python."""
    import os
    import sys

    script = sys.argv[0] if sys.argv else ""
    serve = ["serve", "--mcp", str(config)]
    if Path(script).name == "tooldeck" and Path(script).is_file():
        return os.path.abspath(script), serve
    return sys.executable, ["-m", "tooldeck.cli", *serve]
