"""MCP server configuration: the common ``mcpServers`` JSON format.

A config file holds one object, ``{"mcpServers": {NAME: ENTRY, ...}}`` (a bare
``{NAME: ENTRY}`` mapping is accepted too). An entry is either a stdio server
(``command``, ``args``, ``env``, ``cwd``) or a streamable-HTTP server (``url``,
``headers``); ``type`` (``"stdio"``, ``"http"``, ``"streamable-http"``) may say which,
and is inferred otherwise. tooldeck's own keys:

- ``timeout``: seconds per tool call (default 60);
- ``startup_timeout``: seconds to connect and list the tools (default 30);
- ``autostart``: connect when the source starts (default true); ``false`` means the
  server is connected and listed only once :meth:`McpSource.activate` names it;
- ``disabled``: ignore the entry;
- ``description``: the namespace description (default: the server's instructions);
- ``defer_loading``: mark every tool of the server as deferred (tool search);
- ``tier``: the approval tier of the server's tools (default ``"WRITE"``);
- ``trust_annotations``: let ``readOnlyHint`` lower a tool to ``STANDARD`` (default false);
- ``destructive_is_dangerous``: ``destructiveHint: true`` raises a tool to ``DANGEROUS``;
- ``include_tools`` / ``exclude_tools``: lists of tool-name patterns (``fnmatch``);
- ``protocol``: ``"auto"`` (default: the SDK probes for the 2026 protocol and falls back
  to the ``initialize`` handshake) or ``"legacy"`` (always the handshake);
- ``oauth`` (HTTP servers): ``true``, or an object (``client_id``, ``client_secret``,
  ``scopes``, ``client_name``, ``callback_port``, ``token_endpoint_auth_method``): the
  server is reached with the MCP authorization flow (:mod:`tooldeck.mcp.oauth`).

String values in ``command``, ``args``, ``env``, ``cwd``, ``url``, ``headers`` and the
``oauth`` client id and secret expand ``${VAR}`` (an error when ``VAR`` is not set) and
``${VAR:-default}``; ``$$`` is a literal ``$``. Every problem is reported with the
server's name and the field.

A server's name is part of its tools' names (:mod:`tooldeck.mcp.naming`): a name that,
made provider-safe, contains ``__`` or ends with ``_`` is refused, and so are two names
that become one, so that no server can list a tool under another server's tool's name.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeAlias

from .._config_files import ConfigFileError, load_json
from ..errors import TooldeckError
from ..tools import TIERS, Tier
from .naming import server_name_problems

__all__ = ["Transport"]

Transport: TypeAlias = Literal["stdio", "http"]

DEFAULT_CALL_TIMEOUT = 60.0
DEFAULT_STARTUP_TIMEOUT = 30.0

_TYPES: dict[str, Transport] = {
    "stdio": "stdio",
    "http": "http",
    "streamable-http": "http",
    "streamable_http": "http",
    "streamablehttp": "http",
}
_STDIO_KEYS = {"command", "args", "env", "cwd"}
_HTTP_KEYS = {"url", "headers", "oauth"}
_OAUTH_KEYS = {
    "client_id",
    "client_secret",
    "scopes",
    "client_name",
    "callback_port",
    "token_endpoint_auth_method",
}
_AUTH_METHODS = ("none", "client_secret_post", "client_secret_basic")
_OWN_KEYS = {
    "type",
    "transport",
    "timeout",
    "startup_timeout",
    "autostart",
    "disabled",
    "description",
    "defer_loading",
    "tier",
    "trust_annotations",
    "destructive_is_dangerous",
    "include_tools",
    "exclude_tools",
    "protocol",
}
_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class McpConfigError(TooldeckError, ValueError):
    """An MCP config file or entry is unusable; ``problems`` lists every problem found."""

    def __init__(self, source: str, problems: list[str]):
        self.source = source
        self.problems = tuple(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"{source}: {len(self.problems)} problem(s) in the MCP config:\n{lines}")


def expand_vars(text: str, environ: Mapping[str, str]) -> str:
    """Expand ``${VAR}`` and ``${VAR:-default}`` in ``text``; ``$$`` is a literal ``$``.

    Raises ``KeyError(VAR)`` for a ``${VAR}`` without default whose variable is not set.
    ``${VAR:-default}`` uses the default when ``VAR`` is unset or empty (as the shell does).
    """

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name, default = match.group(1), match.group(2)
        value = environ.get(name)
        if default is not None:
            return value if value else default
        if value is None:
            raise KeyError(name)
        return value

    return _VAR.sub(replace, text)


@dataclass(frozen=True, slots=True)
class OAuthSettings:
    """How tooldeck logs in to an HTTP server with OAuth (its ``"oauth"`` entry).

    Without ``client_id`` the client registers itself (RFC 7591) where the authorization
    server offers it. ``callback_port`` 0 means a random loopback port at each login (a
    pre-registered client usually needs a fixed one: its redirect URI is
    ``http://127.0.0.1:PORT/callback``).
    """

    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    scopes: tuple[str, ...] = ()
    client_name: str = "tooldeck"
    callback_port: int = 0
    token_endpoint_auth_method: str | None = None


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """One MCP server, as configured (environment variables already expanded)."""

    name: str
    transport: Transport
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float = DEFAULT_CALL_TIMEOUT
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT
    autostart: bool = True
    description: str | None = None
    defer_loading: bool = False
    tier: Tier = "WRITE"
    trust_annotations: bool = False
    destructive_is_dangerous: bool = False
    include_tools: tuple[str, ...] = ()
    exclude_tools: tuple[str, ...] = ()
    protocol: Literal["auto", "legacy"] = "auto"
    oauth: OAuthSettings | None = None

    @classmethod
    def from_entry(
        cls,
        name: str,
        entry: Any,
        *,
        environ: Mapping[str, str] | None = None,
        base_dir: Path | None = None,
    ) -> ServerConfig:
        """Check and expand one ``mcpServers`` entry; raises :class:`McpConfigError`."""
        problems: list[str] = []
        server = _parse_entry(name, entry, os.environ if environ is None else environ, problems)
        if server is None or problems:
            raise McpConfigError(f"server {name!r}", problems or ["unusable entry"])
        if base_dir is not None and server.cwd is not None and not Path(server.cwd).is_absolute():
            server = _replace_cwd(server, str((base_dir / server.cwd).resolve()))
        return server

    def describe(self) -> str:
        """A one-line description of how the server is reached (no header values)."""
        if self.transport == "http":
            return f"http {self.url}"
        return "stdio " + " ".join([self.command or "", *self.args])


def _replace_cwd(server: ServerConfig, cwd: str) -> ServerConfig:
    from dataclasses import replace

    return replace(server, cwd=cwd)


def _expand(
    server: str, where: str, value: Any, environ: Mapping[str, str], problems: list[str]
) -> str | None:
    if not isinstance(value, str):
        problems.append(f"server {server!r}: {where} must be a string, got {_kind(value)}")
        return None
    try:
        return expand_vars(value, environ)
    except KeyError as exc:
        var = exc.args[0]
        problems.append(
            f"server {server!r}: {where}: environment variable {var} is not set "
            f"(set it, or write ${{{var}:-default}})"
        )
        return None


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string"}.get(
        type(value), "an array" if isinstance(value, list) else "an object"
    )


def _string_map(
    server: str, key: str, value: Any, environ: Mapping[str, str], problems: list[str]
) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        problems.append(
            f"server {server!r}: {key} must be an object of strings, got {_kind(value)}"
        )
        return {}
    out: dict[str, str] = {}
    for k, v in value.items():
        expanded = _expand(server, f"{key}.{k}", v, environ, problems)
        if expanded is not None:
            out[str(k)] = expanded
    return out


def _number(server: str, key: str, value: Any, default: float, problems: list[str]) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        problems.append(f"server {server!r}: {key} must be a positive number of seconds")
        return default
    return float(value)


def _flag(server: str, key: str, value: Any, default: bool, problems: list[str]) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        problems.append(f"server {server!r}: {key} must be true or false, got {_kind(value)}")
        return default
    return value


def _patterns(server: str, key: str, value: Any, problems: list[str]) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        problems.append(f"server {server!r}: {key} must be an array of strings")
        return ()
    return tuple(value)


def _oauth(
    server: str, value: Any, environ: Mapping[str, str], problems: list[str]
) -> OAuthSettings | None:
    if value is None or value is False:
        return None
    if value is True:
        return OAuthSettings()
    if not isinstance(value, Mapping):
        problems.append(f"server {server!r}: oauth must be true or an object, got {_kind(value)}")
        return None
    unknown = sorted(set(value) - _OAUTH_KEYS)
    if unknown:
        problems.append(f"server {server!r}: unknown oauth key(s) {', '.join(map(repr, unknown))}")
    texts: dict[str, str | None] = {}
    for key in ("client_id", "client_secret", "client_name"):
        raw = value.get(key)
        where = f"oauth.{key}"
        texts[key] = None if raw is None else _expand(server, where, raw, environ, problems)
    if texts["client_secret"] and not texts["client_id"]:
        problems.append(f"server {server!r}: oauth.client_secret needs oauth.client_id")
    scopes = _patterns(server, "oauth.scopes", value.get("scopes"), problems)
    if any(not s or any(c.isspace() for c in s) for s in scopes):
        problems.append(f"server {server!r}: oauth.scopes must be non-empty words without spaces")
    port = value.get("callback_port", 0)
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        problems.append(f"server {server!r}: oauth.callback_port must be a port number (0-65535)")
        port = 0
    method = value.get("token_endpoint_auth_method")
    if method is not None and method not in _AUTH_METHODS:
        problems.append(
            f"server {server!r}: oauth.token_endpoint_auth_method must be one of "
            f"{', '.join(_AUTH_METHODS)}, got {method!r}"
        )
        method = None
    return OAuthSettings(
        client_id=texts["client_id"],
        client_secret=texts["client_secret"],
        scopes=scopes,
        client_name=texts["client_name"] or "tooldeck",
        callback_port=port,
        token_endpoint_auth_method=method,
    )


def _parse_entry(
    name: str, entry: Any, environ: Mapping[str, str], problems: list[str]
) -> ServerConfig | None:
    if not isinstance(name, str) or not name.strip():
        problems.append(f"server {name!r}: a server name must be a non-empty string")
        return None
    if not isinstance(entry, Mapping):
        problems.append(f"server {name!r}: the entry must be an object, got {_kind(entry)}")
        return None
    unknown = sorted(set(entry) - _STDIO_KEYS - _HTTP_KEYS - _OWN_KEYS)
    if unknown:
        problems.append(f"server {name!r}: unknown key(s) {', '.join(map(repr, unknown))}")

    declared = entry.get("type", entry.get("transport"))
    transport: Transport | None = None
    if declared is not None:
        key = str(declared).lower().replace(" ", "")
        if key == "sse":
            problems.append(
                f"server {name!r}: type 'sse' (the old HTTP+SSE transport) is not supported; "
                "use streamable HTTP ('http')"
            )
            return None
        transport = _TYPES.get(key)
        if transport is None:
            problems.append(
                f"server {name!r}: type must be 'stdio' or 'http' (streamable HTTP), "
                f"got {declared!r}"
            )
            return None
    has_command, has_url = "command" in entry, "url" in entry
    if transport is None:
        if has_command and has_url:
            problems.append(f"server {name!r}: give either command (stdio) or url (http), not both")
            return None
        if not has_command and not has_url:
            problems.append(
                f"server {name!r}: needs a command (stdio server) or a url (streamable HTTP server)"
            )
            return None
        transport = "stdio" if has_command else "http"

    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = {}
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = {}
    oauth: OAuthSettings | None = None
    if transport == "stdio":
        stray = sorted(set(entry) & _HTTP_KEYS)
        if stray:
            problems.append(f"server {name!r}: {', '.join(stray)} apply to http servers, not stdio")
        if not has_command:
            problems.append(f"server {name!r}: a stdio server needs a command")
        else:
            command = _expand(name, "command", entry["command"], environ, problems)
            if command is not None and not command.strip():
                problems.append(f"server {name!r}: command is empty")
        raw_args = entry.get("args", [])
        if not isinstance(raw_args, list):
            problems.append(f"server {name!r}: args must be an array of strings")
        else:
            expanded = [
                _expand(name, f"args[{i}]", a, environ, problems) for i, a in enumerate(raw_args)
            ]
            args = tuple(a for a in expanded if a is not None)
        env = _string_map(name, "env", entry.get("env"), environ, problems)
        if entry.get("cwd") is not None:
            cwd = _expand(name, "cwd", entry["cwd"], environ, problems)
    else:
        stray = sorted(set(entry) & _STDIO_KEYS)
        if stray:
            problems.append(f"server {name!r}: {', '.join(stray)} apply to stdio servers, not http")
        if not has_url:
            problems.append(f"server {name!r}: an http server needs a url")
        else:
            url = _expand(name, "url", entry["url"], environ, problems)
            if url is not None and not re.match(r"^https?://[^/\s]+", url):
                problems.append(f"server {name!r}: url must be an http:// or https:// URL")
        headers = _string_map(name, "headers", entry.get("headers"), environ, problems)
        oauth = _oauth(name, entry.get("oauth"), environ, problems)
        if oauth is not None and any(k.lower() == "authorization" for k in headers):
            problems.append(
                f"server {name!r}: give either oauth or an Authorization header, not both"
            )

    tier = entry.get("tier", "WRITE")
    if tier not in TIERS:
        problems.append(f"server {name!r}: tier must be one of {', '.join(TIERS)}, got {tier!r}")
        tier = "WRITE"
    protocol = entry.get("protocol", "auto")
    if protocol not in ("auto", "legacy"):
        problems.append(f"server {name!r}: protocol must be 'auto' or 'legacy', got {protocol!r}")
        protocol = "auto"
    description = entry.get("description")
    if description is not None and not isinstance(description, str):
        problems.append(f"server {name!r}: description must be a string")
        description = None
    return ServerConfig(
        name=name,
        transport=transport,
        command=command,
        args=args,
        env=env,
        cwd=cwd,
        url=url,
        headers=headers,
        timeout=_number(name, "timeout", entry.get("timeout"), DEFAULT_CALL_TIMEOUT, problems),
        startup_timeout=_number(
            name, "startup_timeout", entry.get("startup_timeout"), DEFAULT_STARTUP_TIMEOUT, problems
        ),
        autostart=_flag(name, "autostart", entry.get("autostart"), True, problems),
        description=description,
        defer_loading=_flag(name, "defer_loading", entry.get("defer_loading"), False, problems),
        tier=tier,
        trust_annotations=_flag(
            name, "trust_annotations", entry.get("trust_annotations"), False, problems
        ),
        destructive_is_dangerous=_flag(
            name, "destructive_is_dangerous", entry.get("destructive_is_dangerous"), False, problems
        ),
        include_tools=_patterns(name, "include_tools", entry.get("include_tools"), problems),
        exclude_tools=_patterns(name, "exclude_tools", entry.get("exclude_tools"), problems),
        protocol=protocol,
        oauth=oauth,
    )


@dataclass(frozen=True, slots=True)
class McpConfig:
    """The MCP servers of one config, in file order (disabled entries left out)."""

    servers: tuple[ServerConfig, ...]
    source: str = "<config>"

    def __post_init__(self) -> None:
        names = [s.name for s in self.servers]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise McpConfigError(self.source, [f"server {n!r} is configured twice" for n in dupes])
        problems = server_name_problems(names)
        if problems:
            raise McpConfigError(self.source, problems)

    def __getitem__(self, name: str) -> ServerConfig:
        for server in self.servers:
            if server.name == name:
                return server
        known = ", ".join(s.name for s in self.servers) or "(none)"
        raise KeyError(f"no MCP server {name!r} in {self.source}; configured: {known}")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.servers)

    @classmethod
    def from_dict(
        cls,
        data: Any,
        *,
        environ: Mapping[str, str] | None = None,
        base_dir: str | Path | None = None,
        source: str = "<config>",
    ) -> McpConfig:
        """Check a parsed config (``{"mcpServers": {...}}`` or the bare mapping).

        Every problem of every entry is collected before raising :class:`McpConfigError`.
        A relative ``cwd`` is taken relative to ``base_dir`` (the config file's folder).
        """
        env = os.environ if environ is None else environ
        if not isinstance(data, Mapping):
            raise McpConfigError(source, [f"the config must be a JSON object, got {_kind(data)}"])
        servers_data = data.get("mcpServers", data)
        if not isinstance(servers_data, Mapping):
            raise McpConfigError(source, ["mcpServers must be an object of server entries"])
        problems: list[str] = []
        servers: list[ServerConfig] = []
        base = Path(base_dir) if base_dir is not None else None
        for name, entry in servers_data.items():
            if isinstance(entry, Mapping) and entry.get("disabled") is True:
                continue
            before = len(problems)
            server = _parse_entry(name, entry, env, problems)
            if server is None or len(problems) > before:
                continue
            if base is not None and server.cwd is not None and not Path(server.cwd).is_absolute():
                server = _replace_cwd(server, str((base / server.cwd).resolve()))
            servers.append(server)
        problems.extend(server_name_problems(s.name for s in servers))
        if problems:
            raise McpConfigError(source, problems)
        return cls(tuple(servers), source)

    @classmethod
    def load(cls, path: str | Path, *, environ: Mapping[str, str] | None = None) -> McpConfig:
        """Read and check a config file (see the module docstring)."""
        p = Path(path)
        try:
            data = load_json(p)
        except OSError as exc:
            raise McpConfigError(str(p), [f"cannot read the file: {exc}"]) from exc
        except ConfigFileError as exc:
            raise McpConfigError(str(p), [exc.problem]) from exc
        return cls.from_dict(data, environ=environ, base_dir=p.parent, source=str(p))
