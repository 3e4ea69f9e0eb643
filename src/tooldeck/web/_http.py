"""One JSON request to a search service, through the network guard, errors made typed.

Provider API calls go through :func:`tooldeck.web.netguard.guarded_client` like every other
request of the web tools, with one difference: the service's own host is allowed, even on
a private address, because a user configured that URL (a self-hosted SearXNG on
``10.0.0.5`` is legitimate). Nothing else private is: a redirect from the service to
another private host is refused like any other. Proxy environment variables are ignored;
``TOOLDECK_WEB_PROXY`` (the policy's proxy) is used.

Every failure becomes a :class:`~tooldeck.web._base.WebSearchError`. Secrets (keys,
passwords in a URL) are removed from anything a service echoes back before it reaches a
message, and request headers are never logged.
"""

from __future__ import annotations

import email.utils
import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import anyio
import httpx

from ._base import WebSearchError
from .netbody import read_capped
from .netguard import NetPolicy, Refused, guarded_client

__all__ = ["MAX_RESPONSE_BYTES", "USER_AGENT", "api_request", "redact", "shown_url"]

MAX_RESPONSE_BYTES = 5_000_000  # a search answer larger than this is not a search answer
USER_AGENT = "tooldeck-web_search/0.1"

_log = logging.getLogger("tooldeck.web")


def redact(text: str, secrets: Sequence[str]) -> str:
    """``text`` with every secret replaced by ``***``."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return text


def shown_url(url: str) -> str:
    """``url`` without credentials, for messages."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        return "(an invalid URL)"
    if parsed.userinfo:
        parsed = parsed.copy_with(username=None, password=None)
    return str(parsed.copy_with(query=None))


def _policy(net: NetPolicy | None, url: str) -> NetPolicy:
    base = net if net is not None else NetPolicy.from_env()
    host = httpx.URL(url).host
    if not host or base.host_allowed(host):
        return base
    return replace(base, allow=(*base.allow, host))


def _retry_after(headers: httpx.Headers) -> float | None:
    """Seconds to wait, from ``Retry-After`` or ``X-RateLimit-Reset`` (Brave: ``1, 86400``)."""
    value = headers.get("retry-after")
    if value:
        try:
            return max(0.0, float(value))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            if when is not None:
                return max(0.0, when.timestamp() - time.time())
    reset = headers.get("x-ratelimit-reset")
    if reset:
        try:
            return min(float(part) for part in reset.split(",") if part.strip())
        except ValueError:
            return None
    return None


async def api_request(
    provider: str,
    method: str,
    url: str,
    *,
    timeout: float,  # noqa: ASYNC109 - the whole request's deadline, applied with fail_after
    net: NetPolicy | None,
    headers: Mapping[str, str] | None = None,
    params: Mapping[str, Any] | None = None,
    body: Any = None,
    secrets: Sequence[str] = (),
) -> tuple[int, httpx.Headers, Any]:
    """``(status, headers, json)`` of one request; any HTTP status comes back as it is.

    Raises :class:`WebSearchError` for what is not an answer: a timeout (the whole
    request, body included, has one deadline), a refused or failed connection, a body
    over :data:`MAX_RESPONSE_BYTES` once decoded (counted as it inflates:
    :func:`tooldeck.web.netbody.read_capped`), one that cannot be decoded, or a 2xx body that
    is not JSON.
    """
    try:
        policy = _policy(net, url)
    except (ValueError, httpx.InvalidURL) as exc:
        raise WebSearchError(provider, "config", str(exc)) from None
    client = guarded_client(
        policy,
        timeout=httpx.Timeout(timeout),
        headers={"User-Agent": USER_AGENT, "Accept": "application/json", **(headers or {})},
        follow_redirects=True,
        max_redirects=3,
    )
    where = shown_url(url)
    try:
        with anyio.fail_after(timeout):
            async with (
                client,
                client.stream(
                    method,
                    url,
                    params=dict(params) if params else None,
                    content=None if body is None else json.dumps(body).encode(),
                    headers={"Content-Type": "application/json"} if body is not None else None,
                ) as response,
            ):
                data, capped = await read_capped(response, MAX_RESPONSE_BYTES)
                if capped:
                    raise WebSearchError(
                        provider,
                        "bad_response",
                        f"the answer from {where} is larger than {MAX_RESPONSE_BYTES} bytes",
                        status=response.status_code,
                    )
                status, got = response.status_code, response.headers
    except Refused as exc:
        raise WebSearchError(provider, "refused", exc.line("web_search")) from None
    except (TimeoutError, httpx.TimeoutException):
        raise WebSearchError(
            provider, "timeout", f"no answer from {where} in {timeout:g} s"
        ) from None
    except httpx.DecodingError as exc:  # a coding not asked for, or a corrupt body
        raise WebSearchError(
            provider, "bad_response", f"the answer from {where} cannot be read: {exc}"
        ) from None
    except httpx.HTTPError as exc:
        reason = redact(f"{type(exc).__name__}: {exc}", secrets)
        raise WebSearchError(provider, "unavailable", f"cannot reach {where} ({reason})") from None
    except OSError as exc:
        reason = redact(str(exc), secrets)
        raise WebSearchError(provider, "unavailable", f"cannot reach {where} ({reason})") from None
    _log.debug("%s: %s %s -> %d (%d bytes)", provider, method, where, status, len(data))
    try:
        parsed: Any = json.loads(data) if data else None
    except ValueError:
        parsed = None
        if 200 <= status < 300:
            raise WebSearchError(
                provider, "bad_response", f"the answer from {where} is not JSON", status=status
            ) from None
    return status, got, parsed if parsed is not None else _text(data, secrets)


def _text(data: bytes, secrets: Sequence[str]) -> str:
    return redact(data[:300].decode("utf-8", "replace").strip(), secrets)


def status_error(
    provider: str,
    status: int,
    headers: httpx.Headers,
    message: str,
    *,
    code: str | None = None,
    auth: bool = False,
    quota: bool = False,
    secrets: Sequence[str] = (),
) -> WebSearchError:
    """The error for an HTTP status a service answered with (``auth``/``quota``: forced).

    ``message`` is usually the service's own words, which may echo what it was sent:
    every secret is removed from it.
    """
    message = redact(message, secrets)
    retry = _retry_after(headers)
    if auth or status in (401, 403):
        kind: Any = "auth"
    elif quota or status == 429:
        kind = "quota"
    elif status >= 500:
        kind = "unavailable"
    else:
        kind = "bad_request"
    return WebSearchError(
        provider,
        kind,
        message,
        status=status,
        retry_after=retry if kind == "quota" else None,
        code=code,
    )
