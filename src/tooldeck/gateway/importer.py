"""``tooldeck serve --import CLIENT``: the MCP servers a client already has, put behind the
gateway.

Each client keeps its servers in its own documented file and format; :data:`CLIENTS`
says where (Linux and macOS; the folder the command runs in for project files) and
:func:`read_client` reads them:

========================  ==========================================================
``claude-desktop``        ``claude_desktop_config.json`` (``~/Library/Application
                          Support/Claude/``, ``~/.config/Claude/``): ``mcpServers``
``claude-code``           ``~/.claude.json``: ``mcpServers`` (user scope) and
                          ``projects[<folder>].mcpServers`` (local scope); the
                          project's ``.mcp.json`` (project scope). Local wins over
                          project, project over user, as in Claude Code
``cursor``                ``~/.cursor/mcp.json``, the project's ``.cursor/mcp.json``:
                          ``mcpServers``
``vscode``                the user profile's ``mcp.json`` (``~/Library/Application
                          Support/Code/User/``, ``~/.config/Code/User/``), ``"mcp"``
                          in its ``settings.json``, the workspace's
                          ``.vscode/mcp.json``: ``servers`` and ``inputs`` (JSONC)
``windsurf``              ``~/.codeium/windsurf/mcp_config.json``: ``mcpServers``
                          (``serverUrl`` for remote servers, ``disabledTools``)
``zed``                   ``~/.config/zed/settings.json`` (or
                          ``$XDG_CONFIG_HOME/zed``), the project's
                          ``.zed/settings.json``: ``context_servers`` (JSONC)
========================  ==========================================================

Every file is read by the hardened reader (:mod:`tooldeck._config_files`: size, UTF-8,
nesting; comments and trailing commas allowed). Each server becomes an entry of
tooldeck's ``mcpServers`` format (:mod:`tooldeck.mcp.config`), checked as the gateway
will check it, or is left in the client with the reason (SSE, a Zed extension's server,
an ``envFile``, a variable tooldeck cannot fill in, switched off, the gateway itself).

Variables keep their meaning: a client's own syntax (``${env:NAME}``, ``${input:ID}``,
``${userHome}``, ``${workspaceFolder}``, Claude Code's ``${NAME:-default}``) becomes
tooldeck's ``${NAME}`` (a literal ``$`` becomes ``$$``). Each variable the servers need is
passed to the gateway by the client's entry for it (:func:`gateway_entry`), in the
client's syntax: VS Code keeps asking for its inputs and hands them to the gateway.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._config_files import MAX_BYTES, ConfigFileError, load_jsonc
from ..errors import TooldeckError
from ..mcp.config import McpConfigError, ServerConfig

__all__ = [
    "CLIENTS",
    "Client",
    "ClientConfigError",
    "Imported",
    "default_config",
    "gateway_entry",
    "read_client",
    "where_to_look",
]

NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_TOKEN = re.compile(r"\$\{([^}]*)\}")
_KEEP = {"command", "args", "env", "cwd", "url", "headers", "timeout"}
_UNSET = re.compile(r": environment variable \w+ is not set")
_HTTP_TYPES = {"http", "streamable-http", "streamable_http", "streamablehttp"}


class ClientConfigError(TooldeckError, ValueError):
    """Nothing can be imported (no file, an unreadable one, no servers); one line."""


@dataclass(frozen=True, slots=True)
class Client:
    """One MCP client: its name, its files, the key of its servers, its variables."""

    key: str
    name: str
    files: Callable[[Path, Path, Mapping[str, str]], list[tuple[Path, str]]]
    variables: str  # "none", "claude-code", "editor"
    servers_key: str = "mcpServers"
    max_bytes: int = MAX_BYTES


@dataclass
class Imported:
    """What :func:`read_client` found: tooldeck entries by name, where each came from,
    what was left out and why, and the variables the gateway must be given."""

    client: Client
    read: list[Path] = field(default_factory=list)
    servers: dict[str, dict[str, Any]] = field(default_factory=dict)
    origin: dict[str, Path] = field(default_factory=dict)
    scope: dict[str, str] = field(default_factory=dict)  # Claude Code's: user, project, local
    skipped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    needs: dict[str, str] = field(default_factory=dict)  # variable -> the client's value
    inputs: list[Any] = field(default_factory=list)  # VS Code inputs those values ask


def _config_home(home: Path, environ: Mapping[str, str]) -> Path:
    xdg = environ.get("XDG_CONFIG_HOME", "")
    return Path(xdg) if xdg.startswith("/") else home / ".config"


def _claude_desktop(home: Path, cwd: Path, environ: Mapping[str, str]) -> list[tuple[Path, str]]:
    mac = home / "Library" / "Application Support" / "Claude"
    return [
        (_first(mac, _config_home(home, environ) / "Claude") / "claude_desktop_config.json", "")
    ]


def _claude_code(home: Path, cwd: Path, environ: Mapping[str, str]) -> list[tuple[Path, str]]:
    # in the order Claude Code lets them win: user, then project, then local
    return [
        (home / ".claude.json", "user"),
        (cwd / ".mcp.json", "project"),
        (home / ".claude.json", "local"),
    ]


def _cursor(home: Path, cwd: Path, environ: Mapping[str, str]) -> list[tuple[Path, str]]:
    return [(home / ".cursor" / "mcp.json", ""), (cwd / ".cursor" / "mcp.json", "project")]


def _vscode(home: Path, cwd: Path, environ: Mapping[str, str]) -> list[tuple[Path, str]]:
    mac = home / "Library" / "Application Support" / "Code" / "User"
    user = _first(mac, _config_home(home, environ) / "Code" / "User")
    return [
        (user / "settings.json", "settings"),
        (user / "mcp.json", ""),
        (cwd / ".vscode" / "mcp.json", "project"),
    ]


def _windsurf(home: Path, cwd: Path, environ: Mapping[str, str]) -> list[tuple[Path, str]]:
    return [(home / ".codeium" / "windsurf" / "mcp_config.json", "")]


def _zed(home: Path, cwd: Path, environ: Mapping[str, str]) -> list[tuple[Path, str]]:
    user = _first(home / ".config" / "zed", _config_home(home, environ) / "zed")
    return [(user / "settings.json", ""), (cwd / ".zed" / "settings.json", "project")]


def _first(*folders: Path) -> Path:
    """The first folder that exists (the macOS one, then the XDG one), else the last."""
    return next((f for f in folders if f.is_dir()), folders[-1])


CLIENTS: dict[str, Client] = {
    c.key: c
    for c in (
        Client("claude-desktop", "Claude Desktop", _claude_desktop, "none"),
        # ~/.claude.json also keeps each project's history: it grows past 10 MB
        Client("claude-code", "Claude Code", _claude_code, "claude-code", max_bytes=64 << 20),
        Client("cursor", "Cursor", _cursor, "editor"),
        Client("vscode", "VS Code", _vscode, "editor", servers_key="servers"),
        Client("windsurf", "Windsurf", _windsurf, "editor"),
        Client("zed", "Zed", _zed, "none", servers_key="context_servers"),
    )
}


def default_config(home: Path, environ: Mapping[str, str]) -> Path:
    """Where ``--import`` writes the gateway's config without ``--mcp``:
    ``$XDG_CONFIG_HOME/tooldeck/mcp.json`` (``~/.config/tooldeck/mcp.json``)."""
    return _config_home(home, environ) / "tooldeck" / "mcp.json"


def where_to_look(client: Client, home: Path, cwd: Path, environ: Mapping[str, str]) -> list[Path]:
    """The files ``client`` keeps its servers in, whether they exist or not."""
    return list(dict.fromkeys(path for path, _ in client.files(home, cwd, environ)))


# -- reading -----------------------------------------------------------------------------
def read_client(
    client: Client,
    home: Path,
    cwd: Path,
    environ: Mapping[str, str],
    *,
    only: Path | None = None,
) -> Imported:
    """Every server ``client`` has (in ``only`` if given, else in its files that exist),
    converted; raises :class:`ClientConfigError` when no file can be read or none exists."""
    out = Imported(client)
    if only is not None:
        parts = ["user", "local"] if client.key == "claude-code" else ["only"]
        places = [(only, part) for part in parts]
    else:
        places = client.files(home, cwd, environ)
    documents: dict[Path, Any] = {}
    for path, part in places:
        if path not in documents:
            if not path.is_file():
                continue
            try:
                documents[path] = load_jsonc(path, max_bytes=client.max_bytes)
            except OSError as exc:
                raise ClientConfigError(f"{path}: cannot read it ({exc.strerror or exc})") from exc
            except ConfigFileError as exc:
                raise ClientConfigError(f"{path}: {exc.problem}") from exc
            if not isinstance(documents[path], dict):
                raise ClientConfigError(f"{path}: not a JSON object; is it {client.name}'s file?")
            out.read.append(path)
        for name, entry in _entries(client, documents[path], part, path, cwd):
            _add(out, name, entry, path, part, _workspace(part, path, cwd), documents[path])
    if not out.read:
        looked = ", ".join(
            str(p) for p in ([only] if only else where_to_look(client, home, cwd, environ))
        )
        raise ClientConfigError(
            f"no {client.name} config found (looked at {looked}); give --import-from FILE"
        )
    return out


def _entries(
    client: Client, document: dict[str, Any], part: str, path: Path, cwd: Path
) -> Iterator[tuple[str, Any]]:
    """The ``(name, entry)`` pairs of one part of a client's file."""
    if client.key == "claude-code" and part == "local":
        project = document.get("projects", {})
        found = project.get(str(cwd)) if isinstance(project, dict) else None
        servers = found.get("mcpServers") if isinstance(found, dict) else None
    elif client.key == "vscode" and part == "settings":
        mcp = document.get("mcp")
        servers = mcp.get("servers") if isinstance(mcp, dict) else None
    else:
        servers = document.get(client.servers_key)
        if servers is None and client.key == "vscode":
            mcp = document.get("mcp")  # a settings.json given with --import-from
            servers = mcp.get("servers") if isinstance(mcp, dict) else None
    if servers is None:
        return
    if not isinstance(servers, dict):
        raise ClientConfigError(f"{path}: {client.servers_key} is not an object of servers")
    yield from servers.items()


def _workspace(part: str, path: Path, cwd: Path) -> Path | None:
    """The folder ``${workspaceFolder}`` means: the project's for a project's file (a
    file given with ``--import-from`` in a project's ``.vscode``, ``.cursor`` or ``.zed``
    folder, or a ``.mcp.json``), None for a user's file."""
    if part in ("project", "local"):
        return cwd
    if part == "only" and path.parent.name in (".vscode", ".cursor", ".zed"):
        return path.parent.parent if path.parent.parent != Path.home() else None
    return path.parent if part == "only" and path.name == ".mcp.json" else None


def _add(
    out: Imported,
    name: str,
    entry: Any,
    path: Path,
    part: str,
    workspace: Path | None,
    document: Mapping[str, Any],
) -> None:
    where = f"{name} ({path})"
    try:
        converted, dropped, needs = _convert(out.client, entry, workspace, document)
        ServerConfig.from_entry(name, converted, environ={}, base_dir=path.parent)
    except _LeftOut as exc:
        out.skipped.append(f"{where}: {exc}")
        return
    except McpConfigError as exc:
        # checked with no variable set: those are the gateway's to have when it starts
        problems = [p.split(": ", 1)[-1] for p in exc.problems if not _UNSET.search(p)]
        if problems:
            out.skipped.append(f"{where}: {'; '.join(problems)}")
            return
    if name in out.servers:
        out.notes.append(
            f"{name}: the one of {_label(path, part)} wins over the one of "
            f"{_label(out.origin[name], out.scope[name])}"
        )
    out.servers[name] = converted
    out.origin[name] = path
    out.scope[name] = part
    if dropped:
        keys = ", ".join(dropped)
        out.notes.append(f"{name}: {keys} ({out.client.name}'s own) not carried over")
    for variable, value, described in needs:
        if not out.needs.get(variable, "").endswith(f"{{{variable}}}"):  # a required one stays
            out.needs[variable] = value
        if described is not None and described not in out.inputs:
            out.inputs.append(described)


def _label(path: Path, part: str) -> str:
    return f"{path} ({part} scope)" if part in ("user", "local") else str(path)


class _LeftOut(Exception):
    """A server that stays in the client; the message says why."""


def _convert(
    client: Client, entry: Any, workspace: Path | None, document: Mapping[str, Any]
) -> tuple[dict[str, Any], list[str], list[tuple[str, str, Any]]]:
    """One client entry as a tooldeck entry, the client keys it dropped, and the variables
    it needs ``(name, the client's value, a VS Code input or None)``."""
    if not isinstance(entry, dict):
        raise _LeftOut("not an object")
    raw = dict(entry)
    if raw.get("disabled") is True or raw.get("enabled") is False:
        raise _LeftOut(f"switched off in {client.name}")
    if client.key == "zed":
        if isinstance(raw.get("command"), dict):  # Zed's earlier form: {"command": {"path", ...}}
            legacy = raw.pop("command")
            raw.update({k: legacy[k] for k in ("args", "env") if k in legacy})
            raw["command"] = legacy.get("path")
        if "command" not in raw and "url" not in raw:
            raise _LeftOut("a Zed extension's server (its command is the extension's)")
        raw.pop("source", None)
    if client.key == "windsurf" and "serverUrl" in raw:
        raw["url"] = raw.pop("serverUrl")
    if _is_the_gateway(raw):
        raise _LeftOut("the gateway itself")
    kind = str(raw.pop("type", raw.pop("transport", ""))).lower()
    if kind == "sse":
        raise _LeftOut("uses SSE, the old HTTP transport, which the gateway does not speak")
    if kind not in ("", "stdio", *_HTTP_TYPES):
        raise _LeftOut(f"type {kind!r} is no transport tooldeck speaks (stdio, http)")
    if "envFile" in raw:
        raise _LeftOut(
            "loads its variables from an envFile, which tooldeck's config does not read; "
            'put them in its "env" and import again'
        )
    if "headersHelper" in raw:
        raise _LeftOut("gets its headers from a headersHelper command, which tooldeck does not run")
    converted: dict[str, Any] = {}
    variables = _Variables(client, workspace, document)
    if "url" in raw or kind in _HTTP_TYPES:
        converted["type"] = "http"
    oauth = _oauth(raw.pop("oauth", None), raw.pop("auth", None))
    if oauth is not None:
        converted["oauth"] = variables.strings(oauth)
    excluded = raw.pop("disabledTools", None)
    if isinstance(excluded, list) and excluded:
        converted["exclude_tools"] = excluded
    raw.pop("disabled", None)
    raw.pop("enabled", None)
    for key in sorted(set(raw) & _KEEP):
        converted[key] = variables.strings(raw[key])
    cwd = converted.get("cwd")
    if isinstance(cwd, str) and not Path(cwd).is_absolute() and "$" not in cwd:
        if workspace is None:
            raise _LeftOut(f"its cwd {cwd!r} is relative to where {client.name} runs")
        converted["cwd"] = str(workspace / cwd).replace("$", "$$")
    dropped = sorted(set(raw) - _KEEP)
    return converted, dropped, variables.needs


def _is_the_gateway(entry: Mapping[str, Any]) -> bool:
    """An entry that starts ``tooldeck serve`` (an import after the gateway was put in)."""
    command = entry.get("command")
    args = entry.get("args")
    words = [command, *(args if isinstance(args, list) else [])]
    texts = [w for w in words if isinstance(w, str)]
    runs_tooldeck = any(Path(t).name == "tooldeck" or t == "tooldeck.cli" for t in texts)
    return runs_tooldeck and "serve" in texts


def _oauth(zed_or_claude: Any, cursor: Any) -> Any:
    """Pre-registered OAuth client details in tooldeck's ``oauth`` shape, if any."""
    given = zed_or_claude if isinstance(zed_or_claude, dict) else cursor
    if not isinstance(given, dict):
        return None
    names = {
        "client_id": ("client_id", "clientId", "CLIENT_ID"),
        "client_secret": ("client_secret", "clientSecret", "CLIENT_SECRET"),
        "scopes": ("scopes",),
        "callback_port": ("callback_port", "callbackPort"),
    }
    out = {ours: given[k] for ours, keys in names.items() for k in keys if k in given}
    return out or True


@dataclass
class _Variables:
    """Turns the client's variables in an entry's strings into tooldeck's, and collects
    the variables the entry needs ``(name, the client's value, a VS Code input or None)``."""

    client: Client
    workspace: Path | None
    document: Mapping[str, Any]
    needs: list[tuple[str, str, Any]] = field(default_factory=list)

    def strings(self, value: Any) -> Any:
        """``value`` with the client's variables in every string turned into tooldeck's."""
        if isinstance(value, str):
            return self._text(value)
        if isinstance(value, list):
            return [self.strings(v) for v in value]
        if isinstance(value, dict):
            return {k: self.strings(v) for k, v in value.items()}
        return value

    def _text(self, text: str) -> str:
        parts: list[str] = []
        at = 0
        for match in _TOKEN.finditer(text) if self.client.variables != "none" else ():
            parts.append(text[at : match.start()].replace("$", "$$"))
            parts.append(self._one(match.group(1)))
            at = match.end()
        parts.append(text[at:].replace("$", "$$"))
        return "".join(parts)

    def _one(self, inner: str) -> str:
        """One ``${...}`` of the client in tooldeck's syntax (see the module docstring)."""
        client, workspace, needs = self.client, self.workspace, self.needs
        if client.variables == "claude-code":
            found = re.fullmatch(rf"({NAME})(?::-(.*))?", inner, re.S)
            if found is None:
                raise _LeftOut(f"uses ${{{inner}}}, which tooldeck cannot fill in")
            optional = found.group(2) is not None  # Claude Code refuses a missing ${NAME}
            needs.append((found.group(1), f"${{{found.group(1)}{':-' if optional else ''}}}", None))
            return f"${{{inner}}}"
        kind, colon, rest = inner.partition(":")
        if colon and kind == "env" and re.fullmatch(NAME, rest):
            needs.append((rest, f"${{env:{rest}}}", None))
            return f"${{{rest}}}"
        if colon and kind == "input" and client.key == "vscode":
            variable = re.sub(r"\W", "_", rest).upper()
            variable = variable if re.fullmatch(NAME, variable) else f"_{variable}"
            inputs = self.document.get("inputs")
            described = next(
                (i for i in inputs or [] if isinstance(i, dict) and i.get("id") == rest), None
            )
            needs.append((variable, f"${{input:{rest}}}", described))
            return f"${{{variable}}}"
        if inner == "userHome":
            return "${HOME}"
        if inner in ("pathSeparator", "/"):
            return "/"
        if inner in ("workspaceFolder", "workspaceFolderBasename") and workspace is not None:
            path = str(workspace) if inner == "workspaceFolder" else workspace.name
            return path.replace("$", "$$")
        if inner.startswith("workspaceFolder"):
            raise _LeftOut(
                f"uses ${{{inner}}}, the folder open in {client.name}; write the folder in and "
                "import again (or import from the project's folder)"
            )
        raise _LeftOut(f"uses ${{{inner}}}, which tooldeck cannot fill in")


# -- the gateway's entry in the client ---------------------------------------------------
def gateway_entry(imported: Imported, command: str, args: list[str]) -> tuple[Any, str]:
    """The client's config snippet that starts the gateway (``command args``), passing it
    the variables the servers need; and a line saying where it goes."""
    client = imported.client
    env = dict(sorted(imported.needs.items()))
    server: dict[str, Any] = {"command": command, "args": args}
    if env:
        server["env"] = env
    if client.key == "vscode":
        snippet: dict[str, Any] = {"servers": {"tooldeck": {"type": "stdio", **server}}}
        if imported.inputs:
            snippet["inputs"] = imported.inputs
    elif client.key == "zed":
        snippet = {"context_servers": {"tooldeck": {"source": "custom", **server}}}
    elif client.key == "claude-code":
        entry = {"type": "stdio", **server}
        snippet = {"mcpServers": {"tooldeck": entry}}
        add = shlex.quote(json.dumps(entry))
        return snippet, f"or run: claude mcp add-json --scope user tooldeck {add}"
    else:
        snippet = {"mcpServers": {"tooldeck": server}}
    return snippet, ""
