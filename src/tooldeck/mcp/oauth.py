"""OAuth for streamable-HTTP MCP servers: the SDK's ``OAuthClientProvider`` on tooldeck's store.

The MCP authorization flow is the ``mcp`` SDK's own (:class:`OAuthClientProvider`):
RFC 9728 protected-resource discovery from the server's ``401``, RFC 8414
authorization-server metadata, dynamic client registration (RFC 7591) or a configured
client, PKCE (S256), the RFC 8707 ``resource`` parameter, token refresh. What
:class:`OAuthProvider` adds:

- **storage**: tokens, client registration and discovered metadata live in the server's
  :class:`~tooldeck.mcp.oauth_store.TokenFile` (never in the config), with the token's
  absolute expiry, so a new process refreshes an expired token before using it and
  refreshes at the right token endpoint;
- **one refresh at a time across processes**: the refresh runs under the file's lock;
  whoever waited reads the stored tokens again and uses the fresh ones instead of
  spending a refresh token the first one just rotated;
- **never interactive unless asked**: without a redirect handler (every non-interactive
  use: :class:`~tooldeck.mcp.McpSource`, ``tooldeck mcp list/call``, the gateway) the
  provider never starts a browser login. No stored token, a refresh the authorization
  server refuses, or a server that refuses the token after a refresh raise
  :class:`LoginRequired`, whose message is the one line to show
  (``server 'X' needs you to log in: run tooldeck mcp login CONFIG X``). An access token
  that expired (by the clock, or because the server answered ``401``) is refreshed
  silently, once.

The interactive login (``tooldeck mcp login``) is :mod:`tooldeck.mcp.oauth_login`.
"""

from __future__ import annotations

import json
import logging
import shlex
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.oauth2 import OAuthContext
from mcp.client.auth.utils import extract_field_from_www_auth
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthMetadata,
    OAuthToken,
    ProtectedResourceMetadata,
)
from pydantic import AnyUrl, BaseModel, ValidationError

from ..errors import TooldeckError
from .config import OAuthSettings, ServerConfig
from .oauth_store import TokenFile, token_file

__all__ = [
    "DEFAULT_REDIRECT",
    "FileTokenStorage",
    "LoginRequired",
    "OAuthProvider",
    "OAuthUnavailable",
    "check_login",
    "login_command",
    "oauth_provider",
]

_log = logging.getLogger("tooldeck.mcp")
_Model = TypeVar("_Model", bound=BaseModel)

DEFAULT_REDIRECT = "http://127.0.0.1/callback"
"""The redirect URI a non-interactive provider declares (it never receives a redirect)."""


class LoginRequired(TooldeckError):
    """The server needs an interactive login; the message is one line naming the command."""

    def __init__(self, message: str, server: str) -> None:
        super().__init__(message)
        self.server = server


class OAuthUnavailable(TooldeckError):
    """The authorization server could not refresh a token right now (it will be retried)."""


def login_command(config_source: str, server: str) -> str:
    """``tooldeck mcp login CONFIG SERVER`` for a config file (``CONFIG`` when there is none)."""
    config = config_source if config_source and not config_source.startswith("<") else "CONFIG"
    return f"tooldeck mcp login {shlex.quote(config)} {shlex.quote(server)}"


def _needs_login(server: str, hint: str) -> LoginRequired:
    return LoginRequired(f"server {server!r} needs you to log in: run {hint}", server)


def _revoked(server: str, hint: str) -> LoginRequired:
    return LoginRequired(
        f"the token for {server!r} was revoked or expired and could not be refreshed; run {hint}",
        server,
    )


def _settings(server: ServerConfig) -> OAuthSettings:
    return server.oauth or OAuthSettings()


def check_login(server: ServerConfig, hint: str, directory: Path | None = None) -> None:
    """Raise :class:`LoginRequired` unless tokens are stored for ``server`` (reads one file).

    A stored refresh token counts even if the access token expired: it is refreshed when
    the server is reached. :class:`~tooldeck.mcp.oauth_store.OAuthStoreError` if the file
    cannot be trusted.
    """
    assert server.url is not None
    data = token_file(server.url, directory).read()
    if data.get("tokens"):
        return
    raise _revoked(server.name, hint) if data.get("revoked") else _needs_login(server.name, hint)


class FileTokenStorage:
    """The SDK's ``TokenStorage`` protocol over one :class:`TokenFile`.

    A configured client (``oauth.client_id``) comes from the config and is never written
    to the file (its secret stays where the user put it); a dynamically registered one is
    stored. Storing tokens also stores their absolute expiry and the metadata the provider
    discovered (``context``), so the next process refreshes without rediscovery.
    """

    def __init__(self, file: TokenFile, settings: OAuthSettings, redirect_uri: str) -> None:
        self.file = file
        self.settings = settings
        self.redirect_uri = redirect_uri
        self.context: OAuthContext | None = None

    async def load(self) -> dict[str, Any]:
        return await anyio.to_thread.run_sync(self.file.read)

    async def update(self, change: Callable[[dict[str, Any]], dict[str, Any] | None]) -> None:
        await anyio.to_thread.run_sync(self.file.update, change)

    def configured_client(self) -> OAuthClientInformationFull | None:
        s = self.settings
        if s.client_id is None:
            return None
        method = s.token_endpoint_auth_method or (
            "client_secret_post" if s.client_secret else "none"
        )
        return OAuthClientInformationFull(
            client_id=s.client_id,
            client_secret=s.client_secret,
            redirect_uris=[AnyUrl(self.redirect_uri)],
            token_endpoint_auth_method=method,
            client_name=s.client_name,
            scope=" ".join(s.scopes) or None,
        )

    def client_from(self, data: dict[str, Any]) -> OAuthClientInformationFull | None:
        configured = self.configured_client()
        if configured is not None:
            return configured
        raw = data.get("client_info")
        return None if raw is None else self._parse(OAuthClientInformationFull, raw)

    def tokens_from(self, data: dict[str, Any], client_id: str | None) -> OAuthToken | None:
        raw = data.get("tokens")
        if raw is None or data.get("token_client") != client_id:
            return None  # issued to another client (the config changed): not ours to use
        return self._parse(OAuthToken, raw)

    def _parse(self, model: type[_Model], raw: Any) -> _Model:
        try:
            return model.model_validate(raw)
        except ValidationError as exc:
            raise self.file._error("holds data tooldeck cannot read") from exc

    # -- the SDK's TokenStorage protocol ---------------------------------------------
    async def get_tokens(self) -> OAuthToken | None:
        data = await self.load()
        client = self.client_from(data)
        return self.tokens_from(data, client.client_id if client else None)

    async def set_tokens(self, tokens: OAuthToken) -> None:
        context = self.context
        expires = None if tokens.expires_in is None else time.time() + int(tokens.expires_in)
        client = context.client_info if context is not None else None

        def change(data: dict[str, Any]) -> dict[str, Any]:
            data.pop("revoked", None)
            data["tokens"] = tokens.model_dump(mode="json", exclude_none=True)
            data["expires_at"] = expires
            data["token_client"] = client.client_id if client else None
            data["saved_at"] = time.time()
            if context is not None:
                data.update(_metadata_of(context))
            return data

        await self.update(change)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_from(await self.load())

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        if self.settings.client_id is not None:
            return  # the configured client is not stored

        def change(data: dict[str, Any]) -> dict[str, Any]:
            data["client_info"] = client_info.model_dump(mode="json", exclude_none=True)
            return data

        await self.update(change)


def _metadata_of(context: OAuthContext) -> dict[str, Any]:
    out: dict[str, Any] = {"auth_server_url": context.auth_server_url}
    for key, model in (
        ("oauth_metadata", context.oauth_metadata),
        ("resource_metadata", context.protected_resource_metadata),
    ):
        out[key] = None if model is None else model.model_dump(mode="json", exclude_none=True)
    return out


def _challenged(response: httpx2.Response) -> bool:
    """The server asks for (other) credentials: 401, or 403 ``insufficient_scope``."""
    if response.status_code == 401:
        return True
    return (
        response.status_code == 403
        and extract_field_from_www_auth(response, "error") == "insufficient_scope"
    )


def _oauth_error(response: httpx2.Response) -> str:
    try:
        body = json.loads(response.content)
    except ValueError:
        return f"HTTP {response.status_code}"
    error = body.get("error") if isinstance(body, dict) else None
    return str(error) if isinstance(error, str) and error else f"HTTP {response.status_code}"


class OAuthProvider(OAuthClientProvider):
    """The SDK's OAuth client provider for one configured server, on its token file.

    Without ``redirect_handler`` it is non-interactive (see the module docstring). With
    one (``tooldeck mcp login``), ``fresh_login`` ignores the stored tokens so the full
    authorization flow runs, and a dynamically registered client whose redirect URIs do
    not include ``redirect_uri`` is registered again.
    """

    def __init__(
        self,
        server: ServerConfig,
        file: TokenFile,
        *,
        hint: str,
        redirect_uri: str = DEFAULT_REDIRECT,
        redirect_handler: Callable[[str], Awaitable[None]] | None = None,
        callback_handler: Callable[[], Awaitable[AuthorizationCodeResult]] | None = None,
        fresh_login: bool = False,
    ) -> None:
        assert server.url is not None, "OAuth is for HTTP servers"
        settings = _settings(server)
        metadata = OAuthClientMetadata(
            redirect_uris=[AnyUrl(redirect_uri)],
            client_name=settings.client_name,
            scope=" ".join(settings.scopes) or None,
            token_endpoint_auth_method=settings.token_endpoint_auth_method,
        )
        self.storage = FileTokenStorage(file, settings, redirect_uri)
        super().__init__(server.url, metadata, self.storage, redirect_handler, callback_handler)
        self.storage.context = self.context
        self.server = server
        self.settings = settings
        self.hint = hint
        self.interactive = redirect_handler is not None
        self._fresh = fresh_login
        self._refused: str | None = None  # an access token the server answered 401 to

    # -- state from the file ---------------------------------------------------------
    async def _initialize(self) -> None:
        self._apply(await self.storage.load())
        self._initialized = True

    def _apply(self, data: dict[str, Any]) -> None:
        ctx, storage = self.context, self.storage
        client = storage.client_from(data)
        if (
            self.interactive
            and client is not None
            and self.settings.client_id is None
            and AnyUrl(storage.redirect_uri) not in (client.redirect_uris or [])
        ):
            client = None  # registered for another callback port: register again
        ctx.client_info = client
        client_id = client.client_id if client else None
        tokens = None if self._fresh else storage.tokens_from(data, client_id)
        self._fresh = False
        ctx.current_tokens = tokens
        expires = data.get("expires_at")
        ctx.token_expiry_time = float(expires) if tokens and expires is not None else None
        raw = data.get("oauth_metadata")
        ctx.oauth_metadata = None if raw is None else storage._parse(OAuthMetadata, raw)
        raw = data.get("resource_metadata")
        ctx.protected_resource_metadata = (
            None if raw is None else storage._parse(ProtectedResourceMetadata, raw)
        )
        ctx.auth_server_url = data.get("auth_server_url")

    def _should_refresh(self) -> bool:
        ctx = self.context
        tokens = ctx.current_tokens
        if tokens is None or not ctx.can_refresh_token():
            return False
        return tokens.access_token == self._refused or not ctx.is_token_valid()

    # -- the flow ---------------------------------------------------------------------
    async def _auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        name = self.server.name
        retried = False
        while True:
            async with self.context.lock:
                if not self._initialized:
                    await self._initialize()
                if self._should_refresh():
                    async with self.storage.file.alocked():
                        # Another process may have refreshed while this one waited.
                        self._apply(await self.storage.load())
                        if self._should_refresh():
                            response = yield await self._refresh_token()
                            await self._refreshed(response)
                if not self.interactive and self.context.current_tokens is None:
                    raise _needs_login(name, self.hint)
            flow = super()._auth_flow(request)
            challenge: httpx2.Response | None = None
            try:
                outgoing = await flow.__anext__()
                while True:
                    response = yield outgoing
                    if outgoing is request and not self.interactive and _challenged(response):
                        challenge = response  # never the browser: decided below
                        break
                    outgoing = await flow.asend(response)
            except StopAsyncIteration:
                return
            finally:
                await flow.aclose()
            assert challenge is not None
            tokens = self.context.current_tokens
            if challenge.status_code == 403:
                scope = extract_field_from_www_auth(challenge, "scope") or "more scopes"
                why = f"it needs {scope}"
            elif not self.context.can_refresh_token():
                raise _revoked(name, self.hint)  # expired, and nothing to refresh it with
            elif not retried:
                retried = True  # the server no longer takes this token: refresh it, once
                self._refused = tokens.access_token if tokens else None
                continue
            else:
                why = "it answered 401 to a freshly refreshed token"
            raise LoginRequired(
                f"server {name!r} does not accept the stored token ({why}); run {self.hint}", name
            )

    async def _refreshed(self, response: httpx2.Response) -> None:
        """Handle the token endpoint's answer to a refresh (the file's lock is held)."""
        name = self.server.name
        if response.status_code == 200:
            if await self._handle_refresh_response(response):
                self._refused = None
                return
            raise OAuthUnavailable(
                f"the authorization server of {name!r} answered the token refresh with "
                "something that is not a token; tooldeck will try again"
            )
        status = response.status_code
        if status >= 500 or status in (408, 429) or 300 <= status < 400:
            raise OAuthUnavailable(
                f"the authorization server of {name!r} answered HTTP {status} to the token "
                "refresh; tooldeck will try again"
            )
        await response.aread()
        reason = _oauth_error(response)
        _log.debug("MCP server %r: token refresh refused (%s)", name, reason)

        def forget(data: dict[str, Any]) -> dict[str, Any]:
            for key in ("tokens", "expires_at", "token_client"):
                data.pop(key, None)
            data["revoked"] = {"reason": reason, "at": time.time()}
            return data

        await self.storage.update(forget)
        self.context.clear_tokens()
        if not self.interactive:
            raise _revoked(name, self.hint)


def oauth_provider(server: ServerConfig, hint: str, directory: Path | None = None) -> OAuthProvider:
    """The non-interactive provider of a configured server (never opens a browser)."""
    assert server.url is not None
    return OAuthProvider(server, token_file(server.url, directory), hint=hint)
