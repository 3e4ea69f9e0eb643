"""``tooldeck serve --init``: a starter ``mcp.json`` and ``policy.toml`` for the gateway.

The starter files (what they hold is explained in the policy file's comments and in
docs/gateway.md, "Starter files"):

- ``mcp.json``: one upstream server, ``time`` (``uvx mcp-server-time``), marked trusted:
  ``trust_annotations`` lets its tools annotated read-only be STANDARD, which run without
  asking; ``destructive_is_dangerous`` makes a tool annotated destructive DANGEROUS;
- ``policy.toml``: deletes and shells (by name, and every DANGEROUS tool) are denied;
  everything else follows its tier: STANDARD runs, WRITE (every upstream tool that its
  server does not mark otherwise) asks. It names no tool of its own: a call nobody can
  approve is denied with the exact rule to add (:mod:`tooldeck.gateway.allow`).

A file that exists is kept unless ``--force`` is given; each file is written whole or not
at all (a temporary file linked in, which fails if the file exists, or renamed over it
with ``--force``).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import typer

from .report import user_error

__all__ = ["STARTER_POLICY", "starter_servers", "write_starters"]


def starter_servers() -> dict[str, object]:
    """The starter ``mcp.json`` document."""
    return {
        "mcpServers": {
            "time": {
                "command": "uvx",
                "args": ["mcp-server-time"],
                "trust_annotations": True,
                "destructive_is_dangerous": True,
            }
        }
    }


STARTER_POLICY = """\
# The gateway's policy: a starter written by tooldeck serve --init. Edit it freely;
# docs/gateway.md ("Starter files") and docs/policy.md say more.
#
# How a call is decided: the rules below first (when several match, the strictest wins:
# deny, then ask, then allow), then the tool's tier: STANDARD runs, WRITE and DANGEROUS
# ask a person (by elicitation, or with tooldeck approve under --approvals out-of-band).
#
# An upstream tool is WRITE (so it asks), unless its server's entry in mcp.json says:
#   "trust_annotations": true          its tools annotated read-only are STANDARD: they
#                                      run without asking (a trusted server)
#   "destructive_is_dangerous": true   its tools annotated destructive are DANGEROUS,
#                                      which the rule below denies
#   "tier": "STANDARD"                 every tool of it runs without asking
# Mark only servers you trust: annotations are the server's own claims.
#
# Rules name tools as the gateway lists them, <server>__<tool> (globs too: time__*), by server
# (ns:<server>) or by tier (tier:WRITE).

# Deletes and shells are denied, whatever their server says about them.
[[profile.rules]]
tools = [
    "tier:DANGEROUS",
    "*delete*", "*Delete*", "*remove*", "*Remove*",
    "*shell*", "*Shell*", "*bash*", "*exec*", "*Exec*", "*terminal*", "*run_command*",
]
action = "deny"
reason = "deletes and shells are denied by the gateway's starter policy"

# To let one tool run without asking, add a rule like this one. When the gateway denies
# a call nobody could approve, it names the exact rule.
# [[profile.rules]]
# tools = "time__convert_time"
# action = "allow"
"""


def write_starters(mcp: Path, policy: Path, *, force: bool) -> None:
    """Write the starter files to ``mcp`` and ``policy`` (kept if they exist, unless
    ``force``) and say what was done and what to run next."""
    mcp, policy = mcp.expanduser().absolute(), policy.expanduser().absolute()
    if mcp == policy:
        raise user_error(f"--mcp and --policy are one file ({mcp}); give two paths")
    for path in (mcp, policy):
        if path.is_dir():
            raise user_error(f"{path} is a folder; give a file path to write the starter to")
    servers = json.dumps(starter_servers(), indent=2) + "\n"
    said = [
        _write(mcp, servers, force, "one server, time (uvx mcp-server-time), trusted"),
        _write(
            policy,
            STARTER_POLICY,
            force,
            "deletes and shells denied; read-only tools of trusted servers run; other tools ask",
        ),
    ]
    for line in said:
        typer.echo(line)
    typer.echo(
        f"next: tooldeck serve --mcp {mcp} --policy {policy} --check   "
        "(then the same without --check in your MCP client's config)"
    )


def _write(path: Path, text: str, force: bool, what: str) -> str:
    """Write ``text`` to ``path`` whole: to a temporary file beside it, then linked in
    (which fails if ``path`` exists) or, with ``force``, renamed over it; the line that
    says what happened. The file is private (0600): mcp.json is where API keys go."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            if force:
                os.replace(tmp, path)
            else:
                try:
                    os.link(tmp, path)
                except FileExistsError:
                    return f"kept {path}: it exists (--force overwrites it)"
        finally:
            Path(tmp).unlink(missing_ok=True)
    except OSError as exc:
        raise user_error(f"{path}: cannot write it ({exc.strerror or exc})") from exc
    return f"wrote {path}: {what}"
