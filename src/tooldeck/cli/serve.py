"""``tooldeck serve --mcp CONFIG``: serve the tools of MCP servers as one MCP server.

Only typer is imported here; the gateway (and the MCP SDK) are imported inside the
command, so ``tooldeck --help`` stays cheap.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, NoReturn

import typer

from .report import user_error

if TYPE_CHECKING:
    from ..gateway.http_auth import OAuthResourceServer
    from ..gateway.native import NativeTools
    from ..mcp import McpConfig, McpSource
    from ..policy import Policy

__all__ = ["serve_command"]

# ``tooldeck.gateway.approval.MODES``, here so that typer builds ``--approvals`` without
# importing the gateway (tests/test_gateway_out_of_band.py checks they agree)
Approvals = Literal["auto", "elicit", "out-of-band", "deny"]
# ``tooldeck.gateway.importer.CLIENTS`` (tests/test_gateway_import.py checks they agree)
Clients = Literal["claude-desktop", "claude-code", "cursor", "vscode", "windsurf", "zed"]


def serve_command(
    mcp: Annotated[
        Path | None,
        typer.Option(
            "--mcp",
            help='The MCP config file ({"mcpServers": {...}}); with --import, where to write it.',
        ),
    ] = None,
    policy: Annotated[
        list[Path] | None,
        typer.Option("--policy", "-p", help="A policy file (TOML or JSON); repeat to merge."),
    ] = None,
    core: Annotated[
        list[str] | None,
        typer.Option(
            "--core",
            help="Globs of tool names (<server>__<tool>) listed from the start; repeat. "
            "The rest is found with tool_search. '*' lists everything.",
        ),
    ] = None,
    state: Annotated[
        Path,
        typer.Option(
            "--state",
            help="Where audit logs, evidence records and offloaded results are kept.",
        ),
    ] = Path("~/.tooldeck/gateway"),
    offload_tokens: Annotated[
        int,
        typer.Option("--offload-tokens", help="Results over this many tokens are stored."),
    ] = 15_000,
    guard_tokens: Annotated[
        int,
        typer.Option("--guard-tokens", help="No result the client gets exceeds this."),
    ] = 25_000,
    lexical: Annotated[
        bool,
        typer.Option("--lexical", help="Rank tool_search by words only (no embedder)."),
    ] = False,
    quality: Annotated[
        bool,
        typer.Option(
            "--quality",
            help="Rank tool_search with the quality mode: MiniLM, pip install 'tooldeck[quality]'.",
        ),
    ] = False,
    http: Annotated[
        int | None,
        typer.Option(
            "--http",
            help="Serve streamable HTTP on this port (http://HOST:PORT/mcp) instead of stdio.",
        ),
    ] = None,
    host: Annotated[
        str,
        typer.Option(
            "--host", help="With --http: the address (other than loopback only with a token)."
        ),
    ] = "127.0.0.1",
    token_file: Annotated[
        Path | None,
        typer.Option(
            "--token-file",
            help="With --http: a file holding the bearer token every request must carry "
            "(or $TOOLDECK_GATEWAY_TOKEN).",
        ),
    ] = None,
    oauth_issuer: Annotated[
        str | None,
        typer.Option(
            "--oauth-issuer",
            help="With --http: accept OAuth access tokens of this authorization server "
            "instead of a static token.",
        ),
    ] = None,
    oauth_introspect: Annotated[
        str | None,
        typer.Option("--oauth-introspect", help="Its token introspection endpoint (RFC 7662)."),
    ] = None,
    oauth_resource: Annotated[
        str | None,
        typer.Option(
            "--oauth-resource",
            help="The gateway's URL as clients reach it, the tokens' audience "
            "(default http://HOST:PORT/mcp).",
        ),
    ] = None,
    oauth_scope: Annotated[
        list[str] | None,
        typer.Option("--oauth-scope", help="A scope every token must have; repeat."),
    ] = None,
    oauth_client_id: Annotated[
        str | None,
        typer.Option(
            "--oauth-client-id",
            help="The gateway's client id at the introspection endpoint (its secret: "
            "--oauth-secret-file or $TOOLDECK_GATEWAY_OAUTH_SECRET).",
        ),
    ] = None,
    oauth_secret_file: Annotated[
        Path | None,
        typer.Option("--oauth-secret-file", help="A file holding that client's secret."),
    ] = None,
    session_idle: Annotated[
        float,
        typer.Option(
            "--session-idle",
            help="With --http: seconds a client session lives without requests (its stored "
            "results then go).",
        ),
    ] = 1800.0,
    sessions: Annotated[
        str | None,
        typer.Option(
            "--sessions",
            metavar="WHERE",
            help="With --http: keep client sessions in a store other gateway processes share "
            "(and a restart keeps): a PostgreSQL DSN (postgresql://...) or a SQLite file. "
            "Give them the same --state folder too.",
        ),
    ] = None,
    approvals: Annotated[
        Approvals,
        typer.Option(
            "--approvals",
            help="How a call the policy asks about reaches a human: auto (elicitation if the "
            "client supports it, else tooldeck approve --watch while one runs, else denied "
            "at once, saying how to allow it), elicit, out-of-band (the call waits for "
            "tooldeck approve), deny.",
        ),
    ] = "auto",
    approval_timeout: Annotated[
        float,
        typer.Option(
            "--approval-timeout",
            help="Seconds a call waits for tooldeck approve before it is denied.",
        ),
    ] = 120.0,
    tools: Annotated[
        list[str] | None,
        typer.Option(
            "--tools",
            metavar="MODULE:ATTR",
            help="Also serve your own tools: a tool, a list of tools, a Toolset or a "
            "ToolRegistry of a module (importable from here); repeat.",
        ),
    ] = None,
    definitions: Annotated[
        str | None,
        typer.Option(
            "--definitions",
            metavar="FILE",
            help="Also serve tooldeck's own tools: a definitions file, or 'builtin'.",
        ),
    ] = None,
    category: Annotated[
        list[str] | None,
        typer.Option(
            "--category", "-c", help="With --definitions: a handler module to bind (repeat)."
        ),
    ] = None,
    home: Annotated[
        Path | None,
        typer.Option(
            "--home",
            help="The folder tooldeck's file tools work in (without one they refuse).",
        ),
    ] = None,
    check_only: Annotated[
        bool,
        typer.Option(
            "--check", help="Print what a client would be listed, with token costs; do not serve."
        ),
    ] = False,
    json_output: Annotated[bool, typer.Option("--json", help="With --check: print JSON.")] = False,
    import_client: Annotated[
        Clients | None,
        typer.Option(
            "--import",
            metavar="CLIENT",
            help="Write the gateway's config (--mcp, default ~/.config/tooldeck/mcp.json) from "
            "the MCP servers this client has (claude-desktop, claude-code, cursor, vscode, "
            "windsurf, zed) and print the entry that puts the gateway in their place; do "
            "not serve.",
        ),
    ] = None,
    import_from: Annotated[
        Path | None,
        typer.Option(
            "--import-from",
            metavar="FILE",
            help="With --import: the client's config file, where it is not in its usual place.",
        ),
    ] = None,
    sampling_model: Annotated[
        str | None,
        typer.Option(
            "--sampling-model",
            metavar="KIND:MODEL",
            help="Serve upstream servers' sampling requests with this model when the "
            "client cannot sample (e.g. openai:gpt-5.4); without it they are refused.",
        ),
    ] = None,
    sampling_budget: Annotated[
        int,
        typer.Option(
            "--sampling-budget",
            help="With --sampling-model: the tokens each upstream server may spend.",
        ),
    ] = 20_000,
    init: Annotated[
        bool,
        typer.Option(
            "--init",
            help="Write a starter --mcp file (default ~/.config/tooldeck/mcp.json) and policy "
            "file (--policy, default policy.toml beside it), explained; files that exist are "
            "kept. Does not serve.",
        ),
    ] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force", help="With --import or --init: replace the files it writes if they exist."
        ),
    ] = False,
) -> None:
    """Serve the servers of an MCP config over stdio (or HTTP), behind tooldeck's policy."""
    if import_client is not None:
        from .serve_import import import_client_servers

        import_client_servers(import_client, import_from, mcp, force)
        return
    early = None
    if http is None and not (check_only or init or force or import_from):
        from .. import __version__
        from ..gateway._handshake import EarlyInitialize

        # a client waits for initialize: answered while the MCP SDK loads (_handshake)
        early = EarlyInitialize.start_if_piped(__version__)
    import anyio

    from ..gateway import Catalog, Gateway
    from ..gateway.catalog import name_problems
    from ..gateway.check import check
    from ..mcp import McpConfig, McpConfigError
    from ..policy import Policy, PolicyError

    if init:
        _init(mcp, policy, force=force)
        return
    if import_from is not None:
        raise user_error("--import-from FILE and --force go with --import CLIENT")
    if force:
        raise user_error(
            "--force is for --init or --import CLIENT (it replaces the files they write)"
        )
    if mcp is None and not tools and not definitions:
        raise user_error(
            "give --mcp CONFIG (the MCP servers to serve), --tools MODULE:ATTR (your own "
            "tools) or both, or --init for starter files; see tooldeck serve --help"
        )
    try:
        config = McpConfig.load(mcp) if mcp is not None else McpConfig((), "(no --mcp)")
        rules = Policy.load(*(policy or []))
    except (McpConfigError, PolicyError) as exc:
        problems = "; ".join(exc.problems)
        raise user_error(f"{exc.source}: {problems}") from exc
    if offload_tokens < 0 or guard_tokens < 400:
        raise user_error("give --offload-tokens >= 0 and --guard-tokens >= 400")
    if offload_tokens > guard_tokens:
        raise user_error(
            f"--offload-tokens {offload_tokens} is above --guard-tokens {guard_tokens}: "
            "results in between would be cut without being stored; give --offload-tokens "
            f"at most {guard_tokens} (0 turns offloading off)"
        )
    if not 0 < approval_timeout <= 86_400:
        raise user_error(
            f"--approval-timeout {approval_timeout:g} is out of range; give a number of "
            "seconds above 0, at most 86400"
        )
    if not 1 <= session_idle <= 604_800:
        raise user_error(
            f"--session-idle {session_idle:g} is out of range; give seconds between 1 and "
            "604800 (a week)"
        )
    tools_home = _home(home)
    if category and not definitions:
        raise user_error("--category binds handlers of --definitions; give --definitions FILE")
    if quality and lexical:
        raise user_error("--quality and --lexical are two rankings; give one of them")
    if quality:
        from .._extras import require_extra

        require_extra("quality")  # missing: one line naming the extra, before any server
    native = _native(definitions, category, tools or [], tools_home)
    own = [t.name for t in native.tools] if native else []
    misnamed = name_problems((s.name for s in config.servers), rules, core or (), own)
    if misnamed:  # tools named the library's way (mcp__...), or no server: match nothing
        raise user_error("; ".join(misnamed))
    state_dir = state.expanduser()
    if approvals == "out-of-band" and not check_only:
        _private_approvals(state_dir)
    token = _token(token_file) if http is not None else None
    given = {
        "--oauth-introspect": oauth_introspect,
        "--oauth-resource": oauth_resource,
        "--oauth-scope": oauth_scope,
        "--oauth-client-id": oauth_client_id,
        "--oauth-secret-file": oauth_secret_file,
    }
    oauth = _oauth(http, host, token, oauth_issuer, given)
    if oauth is None and any(given.values()):
        flag = next(k for k, v in given.items() if v)
        _fail(f"{flag} is part of OAuth resource-server mode; give --oauth-issuer too")
    if http is not None and token is None and oauth is None and host not in LOOPBACK:
        raise user_error(
            f"--host {host} is not a loopback address; serving it needs a "
            "bearer token (--token-file or $TOOLDECK_GATEWAY_TOKEN) or --oauth-issuer"
        )
    if sessions is not None and (http is None or check_only):
        raise user_error("--sessions keeps the sessions of HTTP clients; give --http PORT with it")
    stdin_problem = None if http is not None or check_only else _stdin_problem()
    if stdin_problem:
        raise user_error(
            f"{stdin_problem}, so no MCP client can talk to the gateway: let the client "
            "start tooldeck serve (see docs/gateway.md), or serve HTTP with --http PORT"
        )
    sampling = _sampling(sampling_model, sampling_budget)
    sock = _socket(host, http) if http is not None and not check_only else None

    async def run() -> None:
        from ..gateway.sampling import GatewaySource, UpstreamSampling

        # its connections on this loop: a call reaches its server with no thread hop
        upstream_sampling = UpstreamSampling(sampling)  # gateway/sampling.py
        source = GatewaySource(
            config,
            upstream_sampling=upstream_sampling,
            client_name="tooldeck-gateway",
            prefixed=False,
            in_loop=True,
            elicitation=True,  # an upstream's questions reach the client (forwarding.py)
        )
        # the session store first: one that cannot be opened is said before any server
        # starts; the servers start in the background: initialize is answered at once,
        # and what comes up later is announced (--check waits for them)
        async with (
            _shared_sessions(sessions, session_idle) as shared,
            _started(source, wait=check_only),
        ):
            catalog = Catalog(
                source,
                core=core or (),
                semantic=False if lexical else "quality" if quality else "auto",
                native=native.tools if native else (),
            )
            try:
                gateway = Gateway(
                    catalog,
                    rules,
                    state=state_dir,
                    offload_tokens=offload_tokens,
                    guard_tokens=guard_tokens,
                    approvals="deny" if check_only else approvals,  # --check makes no files
                    approval_timeout=approval_timeout,
                    home=tools_home,
                    session_idle=session_idle,
                    sessions=shared,
                )
            except ValueError as exc:
                raise user_error(f"--approvals {approvals}: {exc}") from exc
            if check_only:
                report = check(gateway)
                _print_check(report, json_output, native.left_out if native else ())
                if any(s["state"] not in ("connected", "idle") for s in report.servers):
                    raise typer.Exit(1)  # a server did not start: the answer is no
                return
            exporting = _export_telemetry()
            _banner(config, rules, approvals, "HTTP" if http is not None else "stdio")
            try:
                if http is not None:
                    await gateway.serve_http(
                        host, http, token=token, oauth=oauth, sock=sock, announce=_listening
                    )
                else:
                    await gateway.serve_stdio(early)
            finally:
                if exporting:  # before the upstream servers are closed, which takes time
                    _flush_telemetry()

    if check_only:
        with _failures_said_by_the_report():
            anyio.run(run)
    else:
        anyio.run(run, backend_options=_loop_options())


def _loop_options() -> dict[str, Any]:
    """The event loop the gateway serves on: uvloop's where it is installed (the ``mcp``
    extra brings it, except on Windows), else asyncio's own. Each call through the
    gateway takes several loop iterations (a read, a task, a write, the upstream's
    answer); uvloop's are cheaper, over stdio and over HTTP (bench/gateway_profile.py
    --instructions --http: 10-13% fewer instructions per call). uvloop starts a
    subprocess with every descriptor that is inheritable (it ignores ``close_fds``), so
    the ``--http`` socket is not (:func:`~tooldeck.gateway.server.http_socket`): no
    upstream server holds it when the gateway is killed and started again."""
    try:
        import uvloop
    except ImportError:
        return {}
    return {"loop_factory": uvloop.new_event_loop}


LOOPBACK = ("127.0.0.1", "::1", "localhost")


def _sampling(spec: str | None, budget: int) -> Any:
    """``--sampling-model``'s model with its per-server budget (None without one); a
    model that cannot be built is one line."""
    if spec is None:
        return None
    from ..errors import TooldeckError
    from ..mcp import Sampling
    from ..providers import model_from_string

    if budget < 1:
        raise user_error(f"--sampling-budget {budget} is not a number of tokens; give 1 or more")
    try:
        return Sampling(model_from_string(spec), budget=budget)
    except TooldeckError as exc:
        raise user_error(f"--sampling-model: {exc}") from exc


@asynccontextmanager
async def _shared_sessions(where: str | None, idle: float) -> AsyncIterator[Any]:
    """``--sessions WHERE``, open (``None`` without it); a store that cannot be opened
    is one line."""
    if where is None:
        yield None
        return
    from ..gateway.shared import SharedSessions
    from ..workflows.store import StoreError

    opened = SharedSessions.opened(where, idle)
    try:
        shared = await opened.__aenter__()
    except StoreError as exc:  # it names the database (a DSN without its password)
        raise user_error(f"--sessions: {exc}") from exc
    try:
        yield shared
    finally:
        await opened.__aexit__(None, None, None)


def _fail(message: str) -> NoReturn:
    raise user_error(message)


def _init(mcp: Path | None, policy: list[Path] | None, *, force: bool) -> None:
    """``--init``: the starter files (:mod:`.serve_init`), the config where ``--import``
    writes it unless ``--mcp`` says."""
    import os

    from ..gateway.importer import default_config
    from .serve_init import write_starters

    if mcp is None:
        mcp = default_config(Path.home(), os.environ)
    if policy and len(policy) > 1:
        _fail("--init writes one policy file; give --policy once")
    write_starters(mcp, policy[0] if policy else mcp.with_name("policy.toml"), force=force)


def _stdin_problem() -> str | None:
    from ..gateway._stdin import stdin_problem

    return stdin_problem()


def _socket(host: str, port: int) -> Any:
    """The ``--http`` socket, bound before any server starts: a port that cannot be had
    is one line, not a traceback once everything is up."""
    import errno

    from ..gateway.server import http_socket

    try:
        return http_socket(host, port)
    except OverflowError as exc:
        raise user_error(f"--http {port}: not a port; give a number from 0 to 65535") from exc
    except OSError as exc:
        why = {
            errno.EADDRINUSE: "the port is in use (another server listens there)",
            errno.EACCES: "permission denied (ports below 1024 need privileges)",
            errno.EADDRNOTAVAIL: f"{host} is not an address of this machine",
        }.get(exc.errno or 0, exc.strerror or str(exc))
        raise user_error(
            f"--http {port}: cannot listen on {host}:{port}: {why}; give another --http port"
            + (" or --host" if exc.errno == errno.EADDRNOTAVAIL else "")
        ) from exc


@asynccontextmanager
async def _started(source: McpSource, *, wait: bool) -> AsyncIterator[None]:
    """The source's servers starting (in the background; ``wait``: connected and listed,
    or failed, before the block); every server stopped after it."""
    source.start()
    try:
        if wait:
            await source.refresh()
        yield
    finally:
        await source.aclose()


def _banner(config: McpConfig, rules: Policy, approvals: str, transport: str) -> None:
    """One line on stderr: what is served, from where, and how."""
    from .. import __version__

    servers = len(config.servers)
    files = ", ".join(rules.sources) or "none (upstream tools ask, by their tier)"
    typer.echo(
        f"tooldeck serve {__version__}: {servers} upstream server{'s' * (servers != 1)} "
        f"from {config.source} (starting in the background); policy: {files}; "
        f"approvals: {approvals}; MCP over {transport}",
        err=True,
    )


def _listening(url: str) -> None:
    typer.echo(f"listening on {url}", err=True)


def _oauth(
    http: int | None,
    host: str,
    token: str | None,
    issuer: str | None,
    given: dict[str, Any],
) -> OAuthResourceServer | None:
    """The resource-server settings of ``--oauth-*``; None without ``--oauth-issuer``."""
    import os

    from ..gateway.http_auth import TokenError, resource_server

    if issuer is None:
        return None
    if http is None:
        _fail("--oauth-issuer is for --http; a stdio client needs no token")
    if token is not None:
        _fail(
            "--oauth-issuer and a static token (--token-file or $TOOLDECK_GATEWAY_TOKEN) are "
            "two ways to authenticate clients; give one"
        )
    resource = given["--oauth-resource"]
    if resource is None:
        if host not in LOOPBACK:
            _fail(f"give --oauth-resource, the URL clients reach the gateway at (not {host})")
        resource = f"http://{f'[{host}]' if ':' in host else host}:{http}/mcp"
    secret_file = given["--oauth-secret-file"]
    try:
        if secret_file is not None:
            secret: str | None = secret_file.expanduser().read_text(encoding="utf-8").strip()
        elif given["--oauth-client-id"]:
            secret = os.environ.get("TOOLDECK_GATEWAY_OAUTH_SECRET") or None
        else:
            secret = None
    except (OSError, UnicodeDecodeError) as exc:
        _fail(f"--oauth-secret-file {secret_file}: cannot read it ({exc})")
    try:
        return resource_server(
            issuer,
            given["--oauth-introspect"],
            resource,
            given["--oauth-scope"] or (),
            given["--oauth-client-id"],
            secret,
        )
    except TokenError as exc:
        _fail(str(exc))


def _home(home: Path | None) -> Path | None:
    if home is None:
        return None
    path = home.expanduser()
    if not path.is_dir():
        what = "is not a folder" if path.exists() else "does not exist"
        raise user_error(f"--home {home} {what}; give the folder the file tools may work in")
    return path.resolve()


def _native(
    definitions: str | None, categories: list[str] | None, specs: list[str], home: Path | None
) -> NativeTools | None:
    """tooldeck's own tools to serve (``gateway.native``), from ``--definitions`` and
    ``--tools``; a bad file, module or name is one line."""
    import os
    import sys

    from ..builtin import DEFINITIONS_PATH
    from ..gateway.native import BUILTIN, ToolsSpecError, bind_definitions, resolve, serve_native
    from ..registry import RegistryError

    if not definitions and not specs:
        return None
    from .tools import definitions_document  # here: it loads rich's console and tables

    if categories or specs:  # the user's modules: importable from where they run the gateway
        sys.path.insert(0, os.getcwd())
    sources: list[Any] = []
    defined: list[Any] = []
    hint = ""
    if definitions:
        path = DEFINITIONS_PATH if definitions == BUILTIN else Path(definitions).expanduser()
        document, _ = definitions_document(path)
        hint = f"; see them all with tooldeck tools check {path}" + "".join(
            f" -c {c}" for c in categories or []
        )
        try:
            registry = bind_definitions(document, categories or [], source=str(path))
        except RegistryError as exc:
            raise _problems(exc, "in the definitions", hint) from exc
        sources += registry.by_category()
        defined += registry.definitions
    for spec in specs:
        try:
            made, more = resolve(spec)
        except ToolsSpecError as exc:
            raise user_error(f"--tools {spec}: {exc}") from exc
        sources += made
        defined += more
    given = [*([definitions] if definitions else []), *specs]
    try:
        return serve_native(sources, source=", ".join(given), home=home, defined=defined)
    except RegistryError as exc:
        raise _problems(exc, "in the tools to serve", "" if specs else hint) from exc


def _problems(exc: Any, where: str, hint: str) -> typer.Exit:
    first = " ".join(exc.problems[0].split())[:200]
    return user_error(
        f"{exc.source}: {len(exc.problems)} problem(s) {where}, the first: {first}{hint}"
    )


def _private_approvals(state: Path) -> None:
    """Out-of-band approvals need a folder only this user can write: said before any
    server starts."""
    from ..gateway.out_of_band import ApprovalsFolderError, approvals_folder

    try:
        approvals_folder(state)
    except ApprovalsFolderError as exc:
        raise user_error(f"--approvals out-of-band: {exc}") from exc


def _export_telemetry() -> bool:
    """Spans and metrics over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT says where."""
    import logging

    from ..errors import MissingExtra
    from ..telemetry import setup_from_env

    log = logging.getLogger("tooldeck.gateway")
    try:
        if setup_from_env("tooldeck-gateway"):
            log.info("exporting traces and metrics over OTLP")
            return True
    except MissingExtra as exc:  # no otel extra
        log.warning("no telemetry export: %s", exc)
    return False


def _flush_telemetry() -> None:
    from opentelemetry import metrics, trace

    for provider in (trace.get_tracer_provider(), metrics.get_meter_provider()):
        flush = getattr(provider, "force_flush", None)
        if flush is not None:
            flush(5_000)


def _token(path: Path | None) -> str | None:
    """The bearer token (checked), from the file or the environment; None without either."""
    import os

    from ..gateway.http_auth import TokenError, check_token

    try:
        if path is not None:
            text = path.expanduser().read_text(encoding="utf-8")
        else:
            text = os.environ.get("TOOLDECK_GATEWAY_TOKEN", "")
            if not text:
                return None
        return check_token(text)
    except (OSError, UnicodeDecodeError, TokenError) as exc:
        raise user_error(f"{path or '$TOOLDECK_GATEWAY_TOKEN'}: {exc}") from exc


def _print_check(report: object, json_output: bool, left_out: Sequence[str]) -> None:
    from ..gateway.check import CheckReport

    assert isinstance(report, CheckReport)
    if json_output:
        typer.echo(json.dumps({**report.as_dict(), "left_out": list(left_out)}, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(title="tools/list a client gets")
    table.add_column("tool")
    table.add_column("tokens", justify="right")
    for name, tokens in report.listed:
        table.add_row(name, f"{tokens:,}")
    console.print(table)
    if report.catalog_tools:
        behind = (
            f"{report.catalog_tools:,} tools ({report.all_tokens:,} tokens if all were "
            f"listed; {report.saving:.1%} saved)"
        )
    else:
        behind = "no tools (no upstream server listed any)"
    console.print(
        f"listed: {report.listed_tokens:,} tokens; behind tool_search: {behind}",
        highlight=False,
    )
    for s in report.servers:
        line = f"  {s['name']}: {s['state']}, {s['tools']} tools"
        if s["error"]:
            line += f" ({s['error']})"
        console.print(line, markup=False, highlight=False)
        for note in (*s["collisions"], *s["skipped"]):
            console.print(f"    {note}", markup=False, highlight=False)
    for note in left_out:
        console.print(f"  {note}", markup=False, highlight=False)


@contextmanager
def _failures_said_by_the_report() -> Iterator[None]:
    """With ``--check`` a server that fails to start is said once, by the report's server
    line, not also as a log warning (``-v`` shows both)."""
    import logging

    from typer._click.globals import get_current_context  # typer's own click

    from .report import VERBOSE_KEY

    context = get_current_context(silent=True)
    log = logging.getLogger("tooldeck.mcp")
    saved = log.level
    if not (context and context.find_root().meta.get(VERBOSE_KEY)):
        log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(saved)
