"""Who may use the gateway's HTTP endpoint: a static bearer token, or OAuth access tokens.

**A static token** (:class:`BearerToken`, an ASGI middleware): every HTTP request must
carry ``Authorization: Bearer <token>``; the token is compared in constant time
(:func:`hmac.compare_digest`). Anything else is answered ``401`` with
``WWW-Authenticate: Bearer`` and never reaches the MCP server. Tokens shorter than
:data:`MIN_TOKEN` characters are refused when the gateway starts.

**OAuth resource-server mode** (:class:`OAuthResourceServer`): the gateway accepts the
access tokens an authorization server issued for it, with the ``mcp`` SDK's server auth:
RFC 9728 protected-resource metadata at ``/.well-known/oauth-protected-resource/mcp``,
``401`` with ``WWW-Authenticate: Bearer resource_metadata=...`` (``403
insufficient_scope`` for a token without the required scopes), and each token checked by
RFC 7662 introspection at the authorization server (:class:`IntrospectionVerifier`):
active, not expired, issued for this gateway (``aud``), by the configured issuer. The
SDK binds each HTTP session to the token's client and subject, so one client cannot use
another's session.
"""

from __future__ import annotations

import hmac
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..errors import TooldeckError

if TYPE_CHECKING:
    import httpx2
    from mcp.server.auth.provider import AccessToken
    from mcp.server.auth.settings import AuthSettings

__all__ = [
    "LOOPBACK",
    "MIN_TOKEN",
    "BearerToken",
    "IntrospectionVerifier",
    "OAuthResourceServer",
    "TokenError",
    "check_token",
    "resource_server",
]

_log = logging.getLogger("tooldeck.gateway")

LOOPBACK = ("127.0.0.1", "::1", "localhost")
"""Host names that reach only this machine: plain HTTP and no token are allowed there."""

INTROSPECTION_SECONDS = 10.0

MIN_TOKEN = 32

ASGIApp = Any


class TokenError(TooldeckError, ValueError):
    """An unusable token (the message is one line for the user)."""


def check_token(token: str) -> str:
    token = token.strip()
    if len(token) < MIN_TOKEN:
        raise TokenError(f"the bearer token must be at least {MIN_TOKEN} characters")
    if not token.isascii() or any(c.isspace() for c in token):
        raise TokenError("the bearer token must be ASCII without spaces")
    return token


class BearerToken:
    """``app`` behind a static bearer token."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {check_token(token)}".encode("ascii")

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") != "http":  # lifespan: the app's own
            await self.app(scope, receive, send)
            return
        given = b""
        for key, value in scope.get("headers") or ():
            if key.lower() == b"authorization":
                given = value
                break
        if hmac.compare_digest(given, self._expected):
            await self.app(scope, receive, send)
            return
        body = b'{"error": "unauthorized", "message": "a valid bearer token is required"}'
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b'Bearer realm="tooldeck"'),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


# -- OAuth resource-server mode ------------------------------------------------------------
def _same_url(a: str, b: str) -> bool:
    """Equal as URLs: scheme and host case, and a trailing slash, aside."""

    def norm(url: str) -> tuple[str, str, str]:
        parts = urlsplit(url.strip())
        return parts.scheme.lower(), parts.netloc.lower(), parts.path.rstrip("/")

    return norm(a) == norm(b)


def _oauth_url(what: str, url: str) -> str:
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise TokenError(f"{what} must be an http:// or https:// URL, got {url!r}")
    if parts.fragment or parts.query:
        raise TokenError(f"{what} must not have a query or a fragment")
    if parts.scheme == "http" and parts.hostname not in LOOPBACK:
        raise TokenError(f"{what} must be https:// (plain http only on a loopback address)")
    return url.strip()


@dataclass(frozen=True, slots=True)
class OAuthResourceServer:
    """The gateway as an OAuth resource server of the authorization server ``issuer``.

    ``resource`` is the gateway's own URL as clients reach it (the tokens' audience);
    ``client_id`` / ``client_secret`` authenticate the introspection requests (HTTP Basic).
    """

    issuer: str
    introspection_endpoint: str
    resource: str
    scopes: tuple[str, ...] = ()
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)

    def auth_settings(self) -> AuthSettings:
        from mcp.server.auth.settings import AuthSettings
        from pydantic import AnyHttpUrl

        return AuthSettings(
            issuer_url=AnyHttpUrl(self.issuer),
            resource_server_url=AnyHttpUrl(self.resource),
            required_scopes=list(self.scopes) or None,
            validate_token_resource=True,
        )

    def verifier(self) -> IntrospectionVerifier:
        return IntrospectionVerifier(self)


def resource_server(
    issuer: str,
    introspect: str | None,
    resource: str,
    scopes: list[str] | tuple[str, ...] = (),
    client_id: str | None = None,
    client_secret: str | None = None,
) -> OAuthResourceServer:
    """Check the resource-server settings; :class:`TokenError` (one line) when unusable."""
    if not introspect:
        raise TokenError(
            "--oauth-introspect is needed with --oauth-issuer: the authorization server's "
            "token introspection endpoint (RFC 7662)"
        )
    bad = [s for s in scopes if not s or any(c.isspace() for c in s)]
    if bad:
        raise TokenError(f"--oauth-scope takes one scope without spaces, got {bad[0]!r}")
    if client_secret is not None and client_id is None:
        raise TokenError("an introspection secret needs --oauth-client-id")
    return OAuthResourceServer(
        issuer=_oauth_url("--oauth-issuer", issuer),
        introspection_endpoint=_oauth_url("--oauth-introspect", introspect),
        resource=_oauth_url("--oauth-resource", resource),
        scopes=tuple(scopes),
        client_id=client_id,
        client_secret=client_secret,
    )


class IntrospectionVerifier:
    """The SDK's ``TokenVerifier``: an access token checked by RFC 7662 introspection.

    Accepted only when the answer says ``active: true``, its ``exp`` (if given) is in the
    future, its ``aud`` names this gateway's resource URL, and its ``iss`` (if given) is the
    configured issuer. The required scopes are checked by the SDK's middleware (``403``).
    Each request is introspected (no cache: a revoked token stops working at once), over
    one HTTP client kept open (its connections reused) until :meth:`aclose`. An
    introspection that fails (unreachable, not 200, not JSON) refuses the token; the
    token itself is never logged.
    """

    def __init__(self, settings: OAuthResourceServer) -> None:
        self.settings = settings
        self._http: httpx2.AsyncClient | None = None

    async def aclose(self) -> None:
        """Close the HTTP client (the next verification opens another)."""
        http, self._http = self._http, None
        if http is not None:
            await http.aclose()

    async def verify_token(self, token: str) -> AccessToken | None:
        import httpx2
        from mcp.server.auth.provider import AccessToken

        s = self.settings
        if self._http is None:
            auth = httpx2.BasicAuth(s.client_id, s.client_secret or "") if s.client_id else None
            self._http = httpx2.AsyncClient(timeout=INTROSPECTION_SECONDS, auth=auth)
        try:
            response = await self._http.post(
                s.introspection_endpoint,
                data={"token": token, "token_type_hint": "access_token"},
                headers={"Accept": "application/json"},
            )
            answer = response.json() if response.status_code == 200 else None
        except (httpx2.HTTPError, ValueError) as exc:
            _log.warning("token introspection at %s failed: %s", s.introspection_endpoint, exc)
            return None
        if not isinstance(answer, dict):
            _log.warning(
                "token introspection at %s answered HTTP %d",
                s.introspection_endpoint,
                response.status_code,
            )
            return None
        why = self._refusal(answer)
        if why is not None:
            _log.info("access token refused: %s", why)
            return None
        exp = answer.get("exp")
        scope = answer.get("scope")
        issuer = answer.get("iss")
        return AccessToken(
            token=token,
            client_id=str(answer.get("client_id") or "unknown"),
            scopes=scope.split() if isinstance(scope, str) else [],
            expires_at=int(exp) if isinstance(exp, int | float) else None,
            resource=s.resource,
            subject=str(answer["sub"]) if answer.get("sub") is not None else None,
            claims={"iss": issuer} if isinstance(issuer, str) else None,
        )

    def _refusal(self, answer: dict[str, Any]) -> str | None:
        s = self.settings
        if answer.get("active") is not True:
            return "not active"
        exp = answer.get("exp")
        if exp is not None and (not isinstance(exp, int | float) or exp < time.time()):
            return "expired"
        audience = answer.get("aud")
        audiences = [audience] if isinstance(audience, str) else audience
        if not isinstance(audiences, list) or not any(
            isinstance(a, str) and _same_url(a, s.resource) for a in audiences
        ):
            return f"issued for another audience ({audience!r}), not {s.resource}"
        issuer = answer.get("iss")
        if issuer is not None and not (isinstance(issuer, str) and _same_url(issuer, s.issuer)):
            return f"issued by {issuer!r}, not {s.issuer}"
        return None
