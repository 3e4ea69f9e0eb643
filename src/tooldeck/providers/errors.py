"""Provider errors a person can act on, made from the SDKs' exceptions in one place.

Every adapter wraps its ``respond`` and ``stream`` with :func:`translated` /
:func:`translated_stream`: an exception of the ``openai`` or ``anthropic`` SDK (or of the
HTTP layer under them, when a stream drops half-way) becomes one
:class:`~tooldeck.errors.ProviderError` kind whose message is one line naming the provider,
the model and what to do. The SDK's exception stays as ``__cause__``; anything else
(a :class:`~tooldeck.errors.SchemaError`, a bug) passes through untouched.

Nothing here retries. The SDKs retry connection errors, timeouts, 408, 409, 429 and 5xx
themselves (``max_retries``, honouring ``retry-after-ms`` / ``retry-after``); what arrives
here has already been retried, and the message says how often (the SDK's
``x-stainless-retry-count`` request header of the last attempt).

The SDK and HTTP modules are looked up in ``sys.modules``, never imported: an exception
of a module that is not loaded cannot occur, and building an error costs no import.
"""

from __future__ import annotations

import email.utils
import functools
import re
import socket
import ssl
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from ..errors import (
    AuthenticationFailed,
    ContextTooLong,
    MissingCredentials,
    ModelNotFound,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
    ProviderUnreachable,
    QuotaExceeded,
    RateLimited,
    RequestRejected,
    TLSFailure,
)
from ._clouds import CLOUDS, credential_error

__all__ = [
    "Target",
    "missing_credentials",
    "provider_error",
    "timeout_seconds",
    "translated",
    "translated_stream",
]

_LABELS = {
    "openai": "OpenAI",
    "anthropic": "Anthropic",
    "openrouter": "OpenRouter",
    "glm": "GLM (Z.ai)",
    "compatible": "compatible server",
    "bedrock": "Claude on Amazon Bedrock",
    "vertex": "Claude on Google Vertex AI",
    "azure": "Azure OpenAI",
    "gemini": "Gemini",
}
_DETAIL_LIMIT = 200


@dataclass(frozen=True, slots=True)
class Target:
    """What an error message names: the provider kind, the model, where, which key."""

    provider: str
    model: str
    base_url: str | None = None
    key_env: tuple[str, ...] = ()
    timeout: float | None = None
    custom_url: bool = False  # base_url was set by the user (a 404 may mean a wrong address)

    @property
    def label(self) -> str:
        return f"{_LABELS.get(self.provider, self.provider)} model {self.model!r}"


def timeout_seconds(timeout: Any) -> float | None:
    """An SDK client's ``timeout`` (a number or an ``httpx`` ``Timeout``) in seconds."""
    if isinstance(timeout, (int, float)):
        return float(timeout)
    value = getattr(timeout, "read", None)
    return float(value) if isinstance(value, (int, float)) else None


def missing_credentials(target: Target) -> MissingCredentials:
    """The error for a provider whose key is nowhere, raised before any request."""
    where = " or ".join(target.key_env) if target.key_env else "the provider's key variable"
    return MissingCredentials(
        f"{target.label}: no API key; set {where} (or pass api_key=)",
        env=target.key_env,
        provider=target.provider,
        model=target.model,
    )


# -- mapping ---------------------------------------------------------------------------

# Anthropic error types (also what its streams send in an ``error`` event) as statuses.
_TYPE_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
    # OpenAI codes and types seen in stream ``error`` events and error bodies
    "rate_limit_exceeded": 429,
    "server_error": 500,
    "context_length_exceeded": 400,
}

# Context-window overflows by provider: OpenAI (Chat and Responses) and vLLM say "maximum
# context length" / code context_length_exceeded, the Responses API "exceeds the context
# window", OpenRouter "maximum context length", Anthropic "prompt is too long", llama.cpp
# "exceed_context_size_error" / "context size", GLM code 1261 "Prompt exceeds max length",
# Gemini "The input token count (N) exceeds the maximum number of tokens allowed (M)".
_CONTEXT = re.compile(
    r"context[ _-]?length|context window|context size|exceed_context_size|"
    r"prompt is too long|prompt exceeds max length|input is too long|too many tokens|"
    r"input token count",
    re.IGNORECASE,
)
_CONTEXT_CODES = {"context_length_exceeded", "string_above_max_length", "1261"}
_QUOTA_CODES = {"insufficient_quota", "billing_error", "billing_not_active", "1113"}
_MODEL_CODES = {"model_not_found", "1211"}
_MODEL_TEXT = re.compile(
    r"not a valid model|model .*(does not exist|not found|not exist)|no endpoints found|"
    r"unknown model|model_not_found",
    re.IGNORECASE,
)
_QUOTA_TEXT = re.compile(r"credit balance|insufficient (credits|balance|quota)", re.IGNORECASE)
# GLM (Z.ai / Zhipu) business codes, sent with HTTP 400/401/429 (from Zhipu's error-code
# table as quoted in issue reports; not in the official English docs).
_GLM_AUTH = {"1000", "1001", "1002", "1003", "1004"}
_GLM_RATE = {"1302", "1303", "1304", "1305"}


def _loaded(*names: str) -> list[ModuleType]:
    return [m for m in (sys.modules.get(n) for n in names) if m is not None]


def provider_error(exc: BaseException, target: Target) -> ProviderError | None:
    """The tooldeck error for an SDK / HTTP exception, or ``None`` for any other one."""
    if isinstance(exc, ProviderError):
        return None
    if target.provider in CLOUDS:  # a credential the cloud SDK could not find
        missing = credential_error(exc, CLOUDS[target.provider], target.model)
        if missing is not None:
            return missing
    for sdk in _loaded("openai", "anthropic"):
        if isinstance(exc, sdk.APIStatusError):
            return _from_answer(exc, target, getattr(exc, "status_code", None), exc.body)
        if isinstance(exc, sdk.APITimeoutError):
            return _timeout(exc, target)
        if isinstance(exc, sdk.APIConnectionError):
            return _unreachable(exc, target)
        if isinstance(exc, sdk.APIError):  # an error event in a stream, or a bad body
            body = exc.body
            if not isinstance(body, Mapping) or not (body.get("message") or body.get("error")):
                body = {"message": str(exc), **(body if isinstance(body, Mapping) else {})}
            return _from_answer(exc, target, None, body)
    for genai in _loaded("google.genai.errors"):  # an error answer (after the SDK's retries)
        if isinstance(exc, genai.APIError):
            code = exc.code if isinstance(exc.code, int) else None
            return _from_answer(exc, target, code, exc.details or {"message": str(exc)})
    for http in _loaded("httpx2", "httpx"):
        if isinstance(exc, http.TimeoutException):
            return _timeout(exc, target)
        if isinstance(exc, http.TransportError):  # the connection dropped mid-stream
            # (google-genai raises httpx's own errors, connecting included)
            return _unreachable(exc, target, dropped=not isinstance(exc, http.ConnectError))
    return None


def _fields(body: Any) -> tuple[str, str | None, str | None]:
    """The provider's message, code and type from an error body, however it nests them."""
    if isinstance(body, Mapping):
        inner = body.get("error")
        err: Mapping[str, Any] = inner if isinstance(inner, Mapping) else body
        message = err.get("message") or err.get("msg") or body.get("message")
        if message is None and isinstance(inner, str):
            message = inner
        message = message or body.get("detail") or ""
        code = err.get("code")
        kind = err.get("type")
        return (
            str(message),
            str(code) if code is not None else None,
            str(kind) if isinstance(kind, str) else None,
        )
    if isinstance(body, (str, bytes)):
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        return text, None, None
    return "", None, None


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _DETAIL_LIMIT else text[: _DETAIL_LIMIT - 1] + "…"


def _retries(exc: BaseException) -> int:
    request = getattr(exc, "request", None)
    try:
        return int(request.headers.get("x-stainless-retry-count") or 0) if request else 0
    except (TypeError, ValueError, AttributeError):
        return 0


def _after(retries: int) -> str:
    return f" after {retries} {'retry' if retries == 1 else 'retries'}" if retries else ""


def _retry_after(exc: BaseException) -> float | None:
    """Seconds to wait from ``retry-after-ms`` / ``retry-after`` (seconds or a date)."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) / scale
        except ValueError:
            parsed = email.utils.parsedate_tz(value)
            if parsed is None:
                continue
            seconds = email.utils.mktime_tz(parsed) - time.time()
        if seconds == seconds and seconds >= 0:  # not NaN
            return seconds
    return None


def _effective_status(status: int | None, code: str | None, kind: str | None) -> int | None:
    """The HTTP status, or for an error inside a 200 stream the status its type implies."""
    if status is not None and status >= 400:
        return status
    for value in (kind, code):
        if value in _TYPE_STATUS:
            return _TYPE_STATUS[value]
    if code is not None and code.isdigit() and 400 <= int(code) < 600:
        return int(code)  # OpenRouter and vLLM put the status in error.code
    return None


def _from_answer(
    exc: BaseException, target: Target, status: int | None, body: Any
) -> ProviderError:
    message, code, kind = _fields(body)
    effective = _effective_status(status, code, kind)
    retries = _retries(exc)
    text = message.lower()
    shown = str(effective if effective is not None else status or "")
    tag = _one_line(code or kind or "")[:60]  # a code is provider text too: one short line
    detail = " ".join(p for p in (shown, tag if tag != shown else "") if p)
    if message:
        detail = f"{detail}: {_one_line(message)}" if detail else _one_line(message)
    kw: dict[str, Any] = {
        "provider": target.provider,
        "model": target.model,
        "status": status if status is not None and status >= 400 else effective,
        "code": code or kind,
        "request_id": getattr(exc, "request_id", None),
        "retries": retries,
    }
    label = target.label
    glm = target.provider == "glm"

    if code in _CONTEXT_CODES or (effective in (None, 400, 413, 422) and _CONTEXT.search(text)):
        return ContextTooLong(
            f"{label}: the request is longer than the model's context window ({detail}); "
            "start a new session or shorten the prompt and tool results (offload large "
            "results), or use a model with a larger context window",
            **kw,
        )
    if effective == 402 or code in _QUOTA_CODES or kind in _QUOTA_CODES or _QUOTA_TEXT.search(text):
        return QuotaExceeded(
            f"{label}: the account's quota or credit is used up ({detail}); "
            "check the plan and billing of the account this key belongs to",
            **kw,
        )
    if effective in (401, 403) or (glm and code in _GLM_AUTH):
        key = " or ".join(target.key_env) if target.key_env else "the api_key"
        if effective == 403:
            what = "the key may not use this model or endpoint"
            todo = f"check the key's project, organisation and permissions ({key})"
        else:
            what = "the API key was rejected"
            todo = f"check {key}"
        return AuthenticationFailed(f"{label}: {what} ({detail}); {todo}", **kw)
    if effective == 404 or code in _MODEL_CODES or (effective == 400 and _MODEL_TEXT.search(text)):
        where = (
            f", and that {target.base_url.rstrip('/')} is the provider's API address"
            if target.custom_url and target.base_url
            else ""
        )
        return ModelNotFound(
            f"{label}: the provider has no such model ({detail}); check the model name{where}",
            **kw,
        )
    if effective == 429 or (glm and code in _GLM_RATE):
        wait = _retry_after(exc)
        when = f"wait {wait:.0f}s" if wait is not None else "wait a little"
        return RateLimited(
            f"{label}: rate limited{_after(retries)} ({detail}); {when} and try again, "
            "lower the request rate, or raise max_retries",
            retry_after=wait,
            **kw,
        )
    if effective is not None and (effective >= 500 or effective in (408, 409)):
        return ProviderUnavailable(
            f"{label}: the provider failed{_after(retries)} ({detail}); "
            "try again later, or raise max_retries",
            **kw,
        )
    if effective is not None and 400 <= effective < 500:
        return RequestRejected(
            f"{label}: the provider rejected the request ({detail}); check the request "
            "options (ModelSettings, extra_body); if tooldeck built it wrongly, please "
            "report it",
            **kw,
        )
    return ProviderError(
        f"{label}: the provider reported an error ({detail or type(exc).__name__}); "
        "try again, or run with -v / look at __cause__ for the provider's answer",
        **kw,
    )


def _where(exc: BaseException, target: Target) -> str:
    request = getattr(exc, "request", None)
    url = getattr(request, "url", None)
    if url is not None:
        return f"{url.scheme}://{url.netloc.decode('ascii', 'replace')}{url.path}"
    return target.base_url or "the provider"


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not s for s in seen):
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _unreachable(exc: BaseException, target: Target, *, dropped: bool = False) -> ProviderError:
    where = _where(exc, target)
    retries = _retries(exc)
    kw: dict[str, Any] = {"provider": target.provider, "model": target.model, "retries": retries}
    chain = _chain(exc)
    for cause in chain:
        if isinstance(cause, ssl.SSLError):
            why = getattr(cause, "verify_message", None) or getattr(cause, "reason", None)
            return TLSFailure(
                f"{target.label}: the TLS handshake with {where} failed "
                f"({why or _one_line(str(cause))}); check the address, and for a private "
                "certificate authority set SSL_CERT_FILE to its bundle",
                **kw,
            )
    reason: str | None = None
    for cause in chain:
        if isinstance(cause, ConnectionRefusedError):
            reason = "connection refused"
        elif isinstance(cause, socket.gaierror):
            reason = "the host name does not resolve"
        elif isinstance(cause, OSError) and cause.strerror:
            reason = cause.strerror.lower()
        if reason is not None:
            break
    if reason is None:
        last = chain[-1]
        reason = _one_line(str(last)) if last is not exc or dropped else ""
        reason = reason or "the connection failed"
    http = _loaded("httpx2", "httpx")
    in_transport = [c for c in chain if any(isinstance(c, h.TransportError) for h in http)]
    if in_transport and not any(isinstance(c, h.ConnectError) for h in http for c in chain):
        dropped = True  # connected, then the connection broke while sending or reading
    if dropped:
        problem = f"the connection to {where} dropped during the answer ({reason})"
    else:
        problem = f"cannot connect to {where} ({reason}){_after(retries)}"
    return ProviderUnreachable(
        f"{target.label}: {problem}; check that the server is up and the address "
        "(base_url or TOOLDECK_BASE_URL), or try again",
        **kw,
    )


def _timeout(exc: BaseException, target: Target) -> ProviderError:
    retries = _retries(exc)
    within = f" within {target.timeout:g}s" if target.timeout else ""
    return ProviderTimeout(
        f"{target.label}: no answer from {_where(exc, target)}{within}{_after(retries)}; "
        "try again, or raise timeout= (TOOLDECK_TIMEOUT)",
        provider=target.provider,
        model=target.model,
        retries=retries,
    )


# -- the decorators the adapters use -----------------------------------------------------


class _Targeted(Protocol):
    def _error_target(self) -> Target: ...


S = TypeVar("S", bound=_Targeted)
P = ParamSpec("P")
R = TypeVar("R")
Y = TypeVar("Y")


def translated(
    method: Callable[Concatenate[S, P], Awaitable[R]],
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]:
    """Wrap an adapter's ``respond``: SDK exceptions leave it as tooldeck errors."""

    @functools.wraps(method)
    async def call(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await method(self, *args, **kwargs)
        except Exception as exc:
            error = provider_error(exc, self._error_target())
            if error is None:
                raise
            raise error from exc

    return call


def translated_stream(
    method: Callable[Concatenate[S, P], AsyncIterator[Y]],
) -> Callable[Concatenate[S, P], AsyncIterator[Y]]:
    """Wrap an adapter's ``stream``, an async generator, the same way."""

    @functools.wraps(method)
    async def stream(self: S, /, *args: P.args, **kwargs: P.kwargs) -> AsyncIterator[Y]:
        inner = method(self, *args, **kwargs)
        try:
            async for item in inner:
                yield item
        except Exception as exc:
            error = provider_error(exc, self._error_target())
            if error is None:
                raise
            raise error from exc
        finally:
            close = getattr(inner, "aclose", None)
            if close is not None:
                await close()

    return stream
