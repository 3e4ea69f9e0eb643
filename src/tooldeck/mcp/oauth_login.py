"""``tooldeck mcp login`` / ``logout``: the interactive OAuth login of one server, once.

:func:`login` listens on a loopback port (``127.0.0.1``, random unless the config fixes
``oauth.callback_port``; ``http://127.0.0.1:PORT/callback`` is the redirect URI the client
registers), runs the SDK's authorization flow (:class:`~tooldeck.mcp.oauth.OAuthProvider`
with ``fresh_login``), opens the authorization URL in the browser (``webbrowser.open``) or
only prints it, and waits at most ``timeout`` seconds for the redirect. A redirect whose
``state`` is not the one this login sent is answered ``400`` and ignored (the login goes
on waiting); an ``error`` redirect ends it. The SDK then exchanges the code with the PKCE
verifier, and the tokens go to the server's token file. Nothing else in tooldeck ever
opens a browser.

:func:`logout` revokes the stored tokens at the authorization server when it offers
revocation (RFC 7009, best effort) and removes the token file.
"""

from __future__ import annotations

import contextlib
import secrets
import webbrowser
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import anyio.abc
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.auth import OAuthFlowError, OAuthRegistrationError
from mcp.shared.auth import AuthorizationCodeResult

from ..errors import TooldeckError
from .config import ServerConfig
from .connection import describe_error, error_leaves, http_transport
from .oauth import OAuthProvider
from .oauth_store import TokenFile, token_file

__all__ = ["CALLBACK_PATH", "CallbackServer", "LoginFailed", "LoginResult", "login", "logout"]

CALLBACK_PATH = "/callback"
_MAX_REQUEST = 16_384
_READ_SECONDS = 10.0
_PAGE = (
    "<!doctype html><meta charset=utf-8><title>tooldeck</title>"
    "<body style='font-family:sans-serif;margin:3em'><h2>{title}</h2><p>{text}</p></body>"
)


class LoginFailed(TooldeckError):
    """The login did not complete; the message is one line saying why and what to do."""


@dataclass(frozen=True, slots=True)
class LoginResult:
    server: str
    tools: int
    path: Path


class CallbackServer:
    """A loopback HTTP listener for the authorization server's redirect (one login)."""

    def __init__(self, port: int = 0) -> None:
        self.port = port
        self.refused = 0  # redirects refused for a wrong state
        self._state: str | None = None
        self._result: AuthorizationCodeResult | LoginFailed | None = None
        self._done = anyio.Event()
        self._tg: anyio.abc.TaskGroup | None = None

    @property
    def redirect_uri(self) -> str:
        return f"http://127.0.0.1:{self.port}{CALLBACK_PATH}"

    async def __aenter__(self) -> CallbackServer:
        try:
            listener = await anyio.create_tcp_listener(
                local_host="127.0.0.1", local_port=self.port, reuse_port=False
            )
        except OSError as exc:
            raise LoginFailed(
                f"cannot listen on 127.0.0.1:{self.port} for the login's redirect "
                f"({exc.strerror or exc}); free the port or change oauth.callback_port"
            ) from exc
        self.port = int(listener.extra(anyio.abc.SocketAttribute.local_port))
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(listener.serve, self._handle)
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._tg is not None
        self._tg.cancel_scope.cancel()
        await self._tg.__aexit__(kind, exc, tb)

    def expect(self, state: str) -> None:
        """The ``state`` the authorization request carries; only it completes the login."""
        self._state = state

    async def wait(self, seconds: float) -> AuthorizationCodeResult:
        with anyio.move_on_after(seconds):
            await self._done.wait()
        result = self._result
        if result is None:
            raise LoginFailed(
                f"no redirect from the browser within {seconds:g}s; run the command again "
                "(--no-browser prints the URL to open yourself, --timeout waits longer)"
            )
        if isinstance(result, LoginFailed):
            raise result
        return result

    # -- HTTP ---------------------------------------------------------------------------
    async def _handle(self, stream: anyio.abc.SocketStream) -> None:
        async with stream:
            data = b""
            with anyio.move_on_after(_READ_SECONDS):
                while b"\r\n\r\n" not in data and len(data) <= _MAX_REQUEST:
                    try:
                        data += await stream.receive(4096)
                    except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                        return
            status, title, text = self._answer(data)
            page = _PAGE.format(title=title, text=text).encode("utf-8")
            head = (
                f"HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\n"
                f"Content-Length: {len(page)}\r\nCache-Control: no-store\r\n"
                "Connection: close\r\n\r\n"
            ).encode("ascii")
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                await stream.send(head + page)

    def _answer(self, data: bytes) -> tuple[str, str, str]:
        parts = data.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            return "400 Bad Request", "Bad request", "This is tooldeck's login listener."
        method, target = parts[0], urlsplit(parts[1])
        if target.path != CALLBACK_PATH:
            return "404 Not Found", "Not found", "This is tooldeck's login listener."
        if method != "GET":
            return "405 Method Not Allowed", "Not allowed", "Use GET."
        if self._result is not None:
            return "409 Conflict", "Already done", "This login is over; close this tab."
        query = {k: v[0] for k, v in parse_qs(target.query, keep_blank_values=True).items()}
        state = query.get("state", "")
        if self._state is None or not secrets.compare_digest(state.encode(), self._state.encode()):
            self.refused += 1
            return (
                "400 Bad Request",
                "Not this login",
                "This redirect does not belong to the login tooldeck started (its state "
                "does not match); it was ignored.",
            )
        if "error" in query:
            why = query["error"] + (
                f" ({query['error_description']})" if query.get("error_description") else ""
            )
            self._finish(LoginFailed(f"the authorization server refused the login: {why}"))
            return "400 Bad Request", "Login refused", "The authorization server said no."
        if not query.get("code"):
            self._finish(LoginFailed("the redirect carried no authorization code"))
            return "400 Bad Request", "No code", "The redirect carried no authorization code."
        self._finish(AuthorizationCodeResult(code=query["code"], state=state, iss=query.get("iss")))
        return "200 OK", "Logged in", "tooldeck has the authorization; you can close this tab."

    def _finish(self, result: AuthorizationCodeResult | LoginFailed) -> None:
        self._result = result
        self._done.set()


def _callback_port(server: ServerConfig, stored: dict[str, Any]) -> int:
    """The configured port; else the one the stored registration was made for; else any."""
    configured = server.oauth.callback_port if server.oauth else 0
    if configured:
        return configured
    client = stored.get("client_info") or {}
    for uri in client.get("redirect_uris") or []:
        parts = urlsplit(str(uri))
        if parts.hostname == "127.0.0.1" and parts.path == CALLBACK_PATH and parts.port:
            return parts.port
    return 0


async def _listen(server: ServerConfig, file: TokenFile) -> CallbackServer:
    stored = await anyio.to_thread.run_sync(file.read)
    port = _callback_port(server, stored)
    try:
        return await CallbackServer(port).__aenter__()
    except LoginFailed:
        if server.oauth is not None and server.oauth.callback_port:
            raise
        return await CallbackServer(0).__aenter__()  # the old port is taken: register again


async def login(
    server: ServerConfig,
    *,
    hint: str,
    say: Callable[[str], None],
    open_browser: bool = True,
    wait_seconds: float = 300.0,
    directory: Path | None = None,
) -> LoginResult:
    """Log in to ``server`` interactively and store its tokens (see the module docstring)."""
    assert server.url is not None and server.oauth is not None
    from .. import __version__

    file = token_file(server.url, directory)
    callback = await _listen(server, file)
    try:

        async def redirect(url: str) -> None:
            state = parse_qs(urlsplit(url).query).get("state", [""])[0]
            callback.expect(state)
            if open_browser:
                say(f"Opening a browser to log in to {server.name!r}; if none opens, visit:")
                say(f"  {url}")
                if not await anyio.to_thread.run_sync(webbrowser.open, url):
                    say("(no browser could be started: open the URL above yourself)")
            else:
                say(f"Open this URL in a browser to log in to {server.name!r}:")
                say(f"  {url}")
            say(f"Waiting for the redirect (at most {wait_seconds:g}s)...")

        async def wait() -> AuthorizationCodeResult:
            return await callback.wait(wait_seconds)

        provider = OAuthProvider(
            server,
            file,
            hint=hint,
            redirect_uri=callback.redirect_uri,
            redirect_handler=redirect,
            callback_handler=wait,
            fresh_login=True,
        )
        info = types.Implementation(name=server.oauth.client_name, version=__version__)
        try:
            async with Client(
                http_transport(server.url, dict(server.headers), provider),
                client_info=info,
                cache=None,
                mode=server.protocol,
            ) as client:
                tools = await client.list_tools()
        except Exception as exc:
            raise _failure(server, exc) from exc
        if provider.context.current_tokens is None:
            raise LoginFailed(
                f"server {server.name!r} answered without asking for a login; nothing was "
                'stored (remove its "oauth" entry if it needs none)'
            )
    finally:
        await callback.__aexit__(None, None, None)
    return LoginResult(server.name, len(tools.tools), file.path)


def _failure(server: ServerConfig, exc: BaseException) -> LoginFailed:
    leaves = error_leaves(exc)
    for leaf in leaves:
        if isinstance(leaf, LoginFailed):
            return leaf
    for leaf in leaves:
        if isinstance(leaf, OAuthRegistrationError):
            return LoginFailed(
                f"login to {server.name!r} failed: the authorization server offers no dynamic "
                f"client registration ({' '.join(str(leaf).split())[:200]}); register a client "
                'there and put its client_id (and client_secret) in the server\'s "oauth" entry'
            )
        if isinstance(leaf, OAuthFlowError | TooldeckError):
            return LoginFailed(f"login to {server.name!r} failed: {' '.join(str(leaf).split())}")
    return LoginFailed(f"login to {server.name!r} failed: {describe_error(exc)}")


async def logout(server: ServerConfig, *, directory: Path | None = None) -> tuple[bool, str]:
    """Revoke (best effort) and remove the stored login; (whether one existed, what happened)."""
    assert server.url is not None
    file = token_file(server.url, directory)
    data = await anyio.to_thread.run_sync(file.read)
    if not data:
        return False, "nothing was stored"
    note = await _revoke(server, file, data)
    await anyio.to_thread.run_sync(file.remove)
    return True, note


async def _revoke(server: ServerConfig, file: TokenFile, data: dict[str, Any]) -> str:
    tokens = data.get("tokens") or {}
    endpoint = (data.get("oauth_metadata") or {}).get("revocation_endpoint")
    if not tokens:
        return "no tokens were stored"
    if not endpoint:
        return "the authorization server offers no revocation; the tokens expire on their own"
    provider = OAuthProvider(server, file, hint="")
    provider._apply(data)
    outcomes: list[int] = []
    async with httpx2.AsyncClient(timeout=10.0) as http:
        for kind in ("refresh_token", "access_token"):
            if not tokens.get(kind):
                continue
            form = {"token": tokens[kind], "token_type_hint": kind}
            client = provider.context.client_info
            if client is not None:
                form["client_id"] = client.client_id
            headers = {"Content-Type": "application/x-www-form-urlencoded"}
            form, headers = provider.context.prepare_token_auth(form, headers)
            try:
                response = await http.post(endpoint, data=form, headers=headers)
                outcomes.append(response.status_code)
            except httpx2.HTTPError:
                outcomes.append(0)
    if outcomes and all(code == 200 for code in outcomes):
        return "revoked at the authorization server"
    failed = next(code for code in outcomes if code != 200)
    why = f"HTTP {failed}" if failed else "unreachable"
    return f"the authorization server did not confirm the revocation ({why})"
