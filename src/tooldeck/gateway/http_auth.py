"""A static bearer token in front of the gateway's HTTP endpoint (an ASGI middleware).

Every HTTP request must carry ``Authorization: Bearer <token>``; the token is compared in
constant time (:func:`hmac.compare_digest`). Anything else is answered ``401`` with
``WWW-Authenticate: Bearer`` and never reaches the MCP server. Tokens shorter than
:data:`MIN_TOKEN` characters are refused when the gateway starts. This is item 5's
simple form; OAuth (an authorization server, per-user tokens) is not implemented.
"""

from __future__ import annotations

import hmac
from typing import Any

__all__ = ["MIN_TOKEN", "BearerToken", "TokenError", "check_token"]

MIN_TOKEN = 32

ASGIApp = Any


class TokenError(ValueError):
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
