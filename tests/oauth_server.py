"""A local OAuth authorization server and a protected MCP server, on the SDK's own server auth.

``with serving(**options) as servers:`` runs both on free 127.0.0.1 ports, in a thread
(``servers.issuer``, ``servers.mcp``); ``python tests/oauth_server.py`` runs them by hand.

- the **authorization server** (``issuer``): the SDK's ``create_auth_routes`` (RFC 8414
  metadata, ``/authorize``, ``/token`` with the SDK's PKCE check, ``/register`` (RFC 7591)
  unless ``dcr=False``, ``/revoke``) over :class:`Provider`, which approves every
  authorization at once (the redirect carries the code: a test follows it with httpx), plus
  ``/introspect`` (RFC 7662, HTTP Basic as ``introspector``) and ``/test/*``
  controls: ``expire-access``, ``revoke-refresh``, ``mint`` (an access token for any
  resource, scopes and lifetime), ``stats``;
- the **protected MCP server** (``mcp``, path ``/mcp``): an ``MCPServer`` with the SDK's
  bearer middleware and RFC 9728 metadata, accepting only tokens issued for its URL with
  the ``mcp`` scope. Tools: ``add``, ``whoami`` (the token's client id).

Access tokens live ``access_ttl`` seconds; refresh tokens rotate (the old one is revoked
when used); ``refresh_delay`` slows the refresh grant down so two refreshes overlap.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import uvicorn
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    TokenError,
    construct_redirect_uri,
)
from mcp.server.auth.routes import create_auth_routes
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import AnyHttpUrl, AnyUrl
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

SCOPE = "mcp"


class Provider:
    """An ``OAuthAuthorizationServerProvider`` that approves every authorization request."""

    def __init__(self, access_ttl: int, refresh_delay: float) -> None:
        self.access_ttl = access_ttl
        self.refresh_delay = refresh_delay
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.stats = {"registered": 0, "authorized": 0, "exchanged": 0, "refreshed": 0}
        self.refused_refresh = 0
        self.introspected_from: list[int] = []  # the client port of each introspection

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        self.stats["registered"] += 1
        self.clients[client_info.client_id] = client_info

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        self.stats["authorized"] += 1
        code = secrets.token_urlsafe(32)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [SCOPE],
            expires_at=time.time() + 300,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
            subject="user-1",
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    def issue(
        self, client_id: str, scopes: list[str], resource: str | None, subject: str | None
    ) -> OAuthToken:
        access, refresh = "at_" + secrets.token_urlsafe(24), "rt_" + secrets.token_urlsafe(24)
        expires = int(time.time()) + self.access_ttl
        self.access[access] = AccessToken(
            token=access,
            client_id=client_id,
            scopes=scopes,
            expires_at=expires,
            resource=resource,
            subject=subject,
        )
        self.refresh[refresh] = RefreshToken(
            token=refresh, client_id=client_id, scopes=scopes, resource=resource, subject=subject
        )
        return OAuthToken(
            access_token=access,
            expires_in=self.access_ttl,
            scope=" ".join(scopes),
            refresh_token=refresh,
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        if self.codes.pop(authorization_code.code, None) is None:
            raise TokenError("invalid_grant", "the code was used already")
        self.stats["exchanged"] += 1
        return self.issue(
            client.client_id,
            authorization_code.scopes,
            authorization_code.resource,
            authorization_code.subject,
        )

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        found = self.refresh.get(refresh_token)
        if found is None:
            self.refused_refresh += 1
        return found

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        await anyio.sleep(self.refresh_delay)
        if self.refresh.pop(refresh_token.token, None) is None:  # rotated meanwhile
            self.refused_refresh += 1
            raise TokenError("invalid_grant", "refresh token was already used")
        self.stats["refreshed"] += 1
        return self.issue(client.client_id, scopes, refresh_token.resource, refresh_token.subject)

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            return None
        return found

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)


class ResourceVerifier:
    """The protected MCP server's ``TokenVerifier``: a token this AS issued, not expired."""

    def __init__(self, provider: Provider) -> None:
        self.provider = provider

    async def verify_token(self, token: str) -> AccessToken | None:
        return await self.provider.load_access_token(token)


def _basic(request: Request) -> tuple[str, str] | None:
    header = request.headers.get("authorization", "")
    if not header.lower().startswith("basic "):
        return None
    try:
        user, _, password = base64.b64decode(header[6:]).decode().partition(":")
    except ValueError:
        return None
    return user, password


def as_app(provider: Provider, issuer: str, dcr: bool, introspector: tuple[str, str]) -> Starlette:
    routes = create_auth_routes(
        provider,
        AnyHttpUrl(issuer),
        client_registration_options=ClientRegistrationOptions(
            enabled=dcr, valid_scopes=[SCOPE], default_scopes=[SCOPE]
        ),
        revocation_options=RevocationOptions(enabled=True),
    )

    async def introspect(request: Request) -> Response:
        if _basic(request) != introspector:
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        provider.introspected_from.append(request.client.port if request.client else 0)
        form = await request.form()
        token = await provider.load_access_token(str(form.get("token", "")))
        if token is None:
            return JSONResponse({"active": False})
        return JSONResponse(
            {
                "active": True,
                "client_id": token.client_id,
                "scope": " ".join(token.scopes),
                "exp": token.expires_at,
                "aud": token.resource,
                "sub": token.subject,
                "iss": issuer,
                "token_type": "Bearer",
            }
        )

    async def expire_access(request: Request) -> Response:
        for token in provider.access.values():
            token.expires_at = int(time.time()) - 1
        return JSONResponse({"expired": len(provider.access)})

    async def revoke_refresh(request: Request) -> Response:
        count = len(provider.refresh)
        provider.refresh.clear()
        return JSONResponse({"revoked": count})

    async def mint(request: Request) -> Response:
        body = await request.json()
        token = provider.issue(
            body.get("client_id", "minted"),
            body.get("scopes", [SCOPE]),
            body.get("resource"),
            body.get("subject", "user-minted"),
        )
        if "ttl" in body:
            provider.access[token.access_token].expires_at = int(time.time()) + int(body["ttl"])
        return JSONResponse({"access_token": token.access_token})

    async def stats(request: Request) -> Response:
        return JSONResponse(
            {
                **provider.stats,
                "refused_refresh": provider.refused_refresh,
                "clients": sorted(provider.clients),
                "live_access": len(provider.access),
                "live_refresh": len(provider.refresh),
                "introspected_from": provider.introspected_from,
            }
        )

    routes += [
        Route("/introspect", introspect, methods=["POST"]),
        Route("/test/expire-access", expire_access, methods=["POST"]),
        Route("/test/revoke-refresh", revoke_refresh, methods=["POST"]),
        Route("/test/mint", mint, methods=["POST"]),
        Route("/test/stats", stats, methods=["GET"]),
    ]
    return Starlette(routes=routes)


def mcp_app(provider: Provider, issuer: str, url: str) -> Starlette:
    server = MCPServer(
        "protected",
        instructions="A test MCP server behind OAuth.",
        token_verifier=ResourceVerifier(provider),
        auth=AuthSettings(
            issuer_url=AnyHttpUrl(issuer),
            resource_server_url=AnyHttpUrl(url),
            required_scopes=[SCOPE],
            validate_token_resource=True,
        ),
    )

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    def whoami() -> str:
        """The client id of the token this call came with."""
        token = get_access_token()
        return token.client_id if token else "nobody"

    return server.streamable_http_app()


def _socket() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    return sock


class OAuthServers:
    """The two servers, running on their own event loop in a thread (see :func:`serving`)."""

    def __init__(
        self,
        access_ttl: int = 3600,
        refresh_delay: float = 0.0,
        dcr: bool = True,
        clients: list[tuple[str, str, str]] | None = None,
        introspector: tuple[str, str] = ("gateway", "introspection-secret"),
    ) -> None:
        self.provider = Provider(access_ttl, refresh_delay)
        for client_id, secret, redirect in clients or []:
            self.provider.clients[client_id] = OAuthClientInformationFull(
                client_id=client_id,
                client_secret=secret,
                redirect_uris=[AnyUrl(redirect)],
                token_endpoint_auth_method="client_secret_post",
                scope=SCOPE,
            )
        self._sockets = [_socket(), _socket()]
        self.issuer = f"http://127.0.0.1:{self._sockets[0].getsockname()[1]}"
        self.mcp = f"http://127.0.0.1:{self._sockets[1].getsockname()[1]}/mcp"
        self.introspector = introspector
        apps = [
            as_app(self.provider, self.issuer, dcr, introspector),
            mcp_app(self.provider, self.issuer, self.mcp),
        ]
        self._servers = [
            uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on")) for app in apps
        ]
        self._thread: threading.Thread | None = None

    async def run(self) -> None:
        async with anyio.create_task_group() as tg:
            for server, sock in zip(self._servers, self._sockets, strict=True):
                tg.start_soon(lambda s=server, k=sock: s.serve(sockets=[k]))

    def start(self) -> OAuthServers:
        self._thread = threading.Thread(target=anyio.run, args=(self.run,), daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not all(s.started for s in self._servers):
            assert time.monotonic() < deadline, "the OAuth test servers did not start"
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        for server in self._servers:
            server.should_exit = True
        if self._thread is not None:
            self._thread.join(15)

    # -- the /test controls, over HTTP ---------------------------------------------------
    def control(self, what: str, body: dict[str, Any] | None = None) -> Any:
        if what == "stats":
            response = httpx.get(f"{self.issuer}/test/stats")
        else:
            response = httpx.post(f"{self.issuer}/test/{what}", json=body or {})
        response.raise_for_status()
        return response.json()


@contextlib.contextmanager
def serving(**options: Any) -> Iterator[OAuthServers]:
    """An authorization server and a protected MCP server on free loopback ports."""
    servers = OAuthServers(**options).start()
    try:
        yield servers
    finally:
        servers.stop()


def main() -> None:  # by hand: python tests/oauth_server.py [--access-ttl N] [--no-dcr]
    parser = argparse.ArgumentParser()
    parser.add_argument("--access-ttl", type=int, default=3600)
    parser.add_argument("--refresh-delay", type=float, default=0.0)
    parser.add_argument("--no-dcr", action="store_true")
    args = parser.parse_args()
    servers = OAuthServers(args.access_ttl, args.refresh_delay, not args.no_dcr)
    print(json.dumps({"issuer": servers.issuer, "mcp": servers.mcp}), flush=True)
    anyio.run(servers.run)


if __name__ == "__main__":
    main()
