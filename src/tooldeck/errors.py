"""One exception hierarchy for tooldeck.

Every error a user can meet derives from :class:`TooldeckError`, so a caller can catch
the whole family with one clause and still tell definition problems (raised at import or
build time) from model-output problems (raised per call) from provider problems (a model
that cannot be built or reached: :class:`ProviderError` and its kinds).

The classes defined here are the shared ones; a module's own error lives next to the
code that raises it (``WorkflowError``, ``StoreError``, ``WebSearchError``,
``ConfigFileError``...) and derives from :class:`TooldeckError` too, keeping the
built-in base its callers catch: ``class ConfigFileError(TooldeckError, ValueError)``, so
``except ValueError`` still works. ``tests/test_exception_hierarchy.py`` imports every
module and fails on a public exception class outside the family.

Control flow that is not a failure is in the family as well, on purpose:

- :class:`~tooldeck.approvals.PendingApproval` (an approver cannot answer now) never
  leaves a turn: the loop turns it into a waiting :class:`~tooldeck.loop.RunResult`. It is
  caught by name before any broader clause, so being a :class:`TooldeckError` changes
  nothing for the dispatcher, the loop or the gateway.
- :class:`~tooldeck.context.Aborted` (raised by ``AbortSignal.raise_if_aborted``) stays an
  :class:`Exception`, not a :class:`BaseException` like :class:`asyncio.CancelledError`:
  what stops an aborted call is the cancellation of its task, which a tool's ``except
  Exception`` (or ``except TooldeckError``) cannot swallow; ``Aborted`` only lets a tool
  stop sooner, and a tool that catches it just ends its own call.

One public class is outside, deliberately: ``tooldeck.workflows.store.protocol.Rollback``
is not an error but the signal an operation raises to roll its transaction back and
return a value; the store that runs the operation catches it, and keeping it out of the
family means an operation's own ``except TooldeckError`` cannot swallow the rollback.
Exceptions whose names start with ``_`` are signals raised and caught inside one module.
No tooldeck exception derives from :class:`BaseException` directly.

Provider errors live here, not next to the adapters, so that code catching them (the CLI,
a caller's ``except``) never has to import a provider SDK. They are made from the SDKs'
own exceptions in one place, :mod:`tooldeck.providers.errors`, and keep the SDK's
exception as ``__cause__``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "AuthenticationFailed",
    "ContextTooLong",
    "MissingCredentials",
    "MissingExtra",
    "ModelConfigError",
    "ModelNotFound",
    "ProviderError",
    "ProviderTimeout",
    "ProviderUnavailable",
    "ProviderUnreachable",
    "QuotaExceeded",
    "RateLimited",
    "RequestRejected",
    "ResultEncodingError",
    "TLSFailure",
    "UnknownModel",
    "exception_line",
]


def exception_line(exc: BaseException, limit: int = 300) -> str:
    """``Type: message`` on one line (whitespace folded), at most ``limit`` characters:
    how a log line of a long-running process (worker, scheduler) names an exception."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}"[:limit] if text else type(exc).__name__


class TooldeckError(Exception):
    """Base class of every error raised by tooldeck."""


class ToolDefinitionError(TooldeckError, ValueError):
    """A tool is defined wrongly (bad name, bad options, bad function signature)."""


class SchemaError(ToolDefinitionError):
    """A tool's JSON Schema cannot be used, or cannot be projected as requested.

    ``problems`` lists every problem found (not only the first), each prefixed with the
    JSON path inside the schema where it was found.
    """

    def __init__(self, tool: str, problems: Sequence[str], *, provider: str | None = None):
        self.tool = tool
        self.provider = provider
        self.problems = tuple(problems)
        where = f" for {provider}" if provider else ""
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"tool {tool!r}: schema unusable{where}:\n{lines}")


MODEL_MESSAGE_LIMIT = 500


class ArgumentError(TooldeckError):
    """The model's arguments for one call could not be parsed, repaired or validated.

    ``model_message`` is what the model is told (at most 500 characters: JSON path,
    expected, got) so it can retry; ``problems`` keeps the full list for logs;
    ``repairs`` names the repair rungs that were tried before giving up.
    """

    def __init__(
        self,
        tool: str,
        model_message: str,
        *,
        problems: Sequence[str] = (),
        repairs: Sequence[str] = (),
    ):
        self.tool = tool
        if len(model_message) > MODEL_MESSAGE_LIMIT:
            model_message = model_message[: MODEL_MESSAGE_LIMIT - 1] + "…"
        self.model_message = model_message
        self.problems = tuple(problems) or (model_message,)
        self.repairs = tuple(repairs)
        super().__init__(model_message)


class ResultEncodingError(TooldeckError, TypeError):
    """A tool's result cannot be frozen into what the model is sent (see tooldeck.result).

    Raised where the result is made; the dispatcher turns it into that call's error
    output ("ran, but its result cannot be recorded: ..."), so the session stays usable.
    """


class MissingExtra(TooldeckError, ImportError):
    """Something needs an optional package that is not installed; the message is one line
    naming the extra that brings it: ``cron schedules need the cron extra (no module
    named 'cronsim'): pip install 'tooldeck[cron]'``.

    Raised by ``tooldeck._extras.needs_extra`` around every import of an optional
    package. ``extra`` is the extra's name, ``name`` (as on :class:`ImportError`) the
    missing module. An :class:`ImportError` too, so code that falls back when a package
    is missing (``except ImportError``) still does.
    """

    def __init__(self, extra: str, purpose: str, module: str) -> None:
        self.extra = extra
        super().__init__(
            f"{purpose} the {extra} extra (no module named {module!r}): "
            f"pip install 'tooldeck[{extra}]'",
            name=module,
        )


class ProviderError(TooldeckError):
    """A model provider could not be used; the message is one line saying what to do.

    ``provider`` and ``model`` name the target (``provider`` is the model-string kind:
    ``openai``, ``anthropic``, ``openrouter``, ``glm``, ``compatible``...). When the
    provider answered, ``status`` is the HTTP status, ``code`` the provider's error code
    or type and ``request_id`` its request id; ``retries`` is how many times the SDK
    retried before giving up. The SDK's own exception is ``__cause__``.
    """

    def __init__(
        self,
        message: str,
        *,
        provider: str | None = None,
        model: str | None = None,
        status: int | None = None,
        code: str | None = None,
        request_id: str | None = None,
        retries: int = 0,
    ):
        self.provider = provider
        self.model = model
        self.status = status
        self.code = code
        self.request_id = request_id
        self.retries = retries
        super().__init__(message)


class ModelConfigError(ProviderError, ValueError):
    """The model cannot be built as asked; raised before any request is sent."""


class UnknownModel(ModelConfigError):
    """A model string that names no known provider kind, or names no model."""


class MissingCredentials(ModelConfigError):
    """No API key for the provider; ``env`` names the variables that would supply one."""

    def __init__(self, message: str, *, env: Sequence[str] = (), **kw: Any):
        self.env = tuple(env)
        super().__init__(message, **kw)


class ProviderUnreachable(ProviderError):
    """No answer from the provider's address: refused, unresolvable, dropped."""


class TLSFailure(ProviderUnreachable):
    """The TLS handshake failed (for example a certificate that cannot be verified)."""


class ProviderTimeout(ProviderUnreachable):
    """The provider did not answer within the timeout (after the SDK's retries)."""


class AuthenticationFailed(ProviderError):
    """The provider refused the credentials (401) or their access to this model (403)."""


class ModelNotFound(ProviderError):
    """The provider has no such model (or the address is not the provider's API)."""


class RateLimited(ProviderError):
    """Too many requests (429) even after the SDK's retries.

    ``retry_after`` is the wait in seconds the provider asked for, when it said.
    """

    def __init__(self, message: str, *, retry_after: float | None = None, **kw: Any):
        self.retry_after = retry_after
        super().__init__(message, **kw)


class QuotaExceeded(ProviderError):
    """The account's quota or credit is spent: retrying will not help, billing will."""


class ProviderUnavailable(ProviderError):
    """The provider failed or is overloaded (5xx, 529) even after the SDK's retries."""


class ContextTooLong(ProviderError):
    """The request is longer than the model's context window."""


class RequestRejected(ProviderError):
    """The provider rejected the request itself (another 4xx); retrying will not help."""
