"""Model adapters: one module per wire protocol, plus the scripted stand-in for tests.

``model_from_string("openai:gpt-5.4")`` builds an adapter from a short spec:

===================  ===========================================================
``openai:M``         OpenAI Responses (``OPENAI_API_KEY``)
``openai-chat:M``    OpenAI Chat Completions (``OPENAI_API_KEY``)
``openrouter:M``     OpenRouter Chat Completions (``OPENROUTER_API_KEY``)
``glm:M``            Z.ai / Zhipu GLM Chat Completions (``ZAI_API_KEY``)
``compatible:M``     any OpenAI-compatible server (vLLM, Ollama...); needs ``base_url``
``anthropic:M``      Anthropic Messages (``ANTHROPIC_API_KEY``)
``bedrock:M``        Claude on Amazon Bedrock (AWS credentials, ``AWS_REGION``)
``vertex:M``         Claude on Google Vertex AI (Google credentials, ``CLOUD_ML_REGION``,
                     ``ANTHROPIC_VERTEX_PROJECT_ID``)
``azure:M``          Azure OpenAI Responses, M the deployment (``AZURE_OPENAI_ENDPOINT``,
                     ``AZURE_OPENAI_API_KEY``, ``OPENAI_API_VERSION``)
``azure-chat:M``     Azure OpenAI Chat Completions, M the deployment (the same variables)
``gemini:M``         Gemini ``generateContent`` (``GEMINI_API_KEY`` or ``GOOGLE_API_KEY``)
``scripted``         not a model: the offline demo's script
===================  ===========================================================

``base_url`` overrides the provider's address for every kind (also read from
``TOOLDECK_BASE_URL`` when not given). ``max_retries`` (default 2, or
``TOOLDECK_MAX_RETRIES``) is the SDK's own retry budget for connection errors, timeouts,
408, 409, 429 and 5xx (it honours ``retry-after``); ``timeout`` (seconds per attempt, or
``TOOLDECK_TIMEOUT``; default the SDK's 600 s). tooldeck adds no retry loop of its own.

Each SDK is an extra (``tooldeck[openai]`` for the OpenAI kinds, ``tooldeck[anthropic]``,
``tooldeck[gemini]`` for ``gemini``); only the adapter asked for is imported, and a missing SDK is
:class:`~tooldeck.errors.MissingExtra`, one line naming the extra.

A string that names no kind raises :class:`~tooldeck.errors.UnknownModel`, a provider
whose key is not set :class:`~tooldeck.errors.MissingCredentials` (naming the variable),
both before any request; what goes wrong later is one of the
:class:`~tooldeck.errors.ProviderError` kinds (:mod:`tooldeck.providers.errors`).
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import ModelConfigError, UnknownModel
from ..model import Model

if TYPE_CHECKING:
    from .anthropic import AnthropicModel
    from .chat_completions import ChatCompletionsModel
    from .gemini import GeminiModel
    from .openai_responses import OpenAIResponsesModel

# The adapters import their SDKs (seconds of start-up); load them on first use only.
_LAZY = {
    "AnthropicModel": ".anthropic",
    "ChatCompletionsModel": ".chat_completions",
    "GeminiModel": ".gemini",
    "OpenAIResponsesModel": ".openai_responses",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AnthropicModel",
    "ChatCompletionsModel",
    "GeminiModel",
    "OpenAIResponsesModel",
    "model_from_env",
    "model_from_string",
]

KINDS = (
    "openai",
    "openai-chat",
    "openrouter",
    "glm",
    "compatible",
    "anthropic",
    "bedrock",
    "vertex",
    "azure",
    "azure-chat",
    "gemini",
)


def model_from_string(
    spec: str,
    *,
    base_url: str | None = None,
    max_retries: int | None = None,
    timeout: float | None = None,
    **options: Any,
) -> Model:
    """Build a model adapter from ``kind:model`` (see the module docstring).

    Other ``options`` go to the adapter (``api_key``, ``store``, ``thinking``...).
    """
    kind, sep, name = spec.strip().partition(":")
    if not sep or not name or kind not in KINDS:
        what = f"unknown provider {kind!r} in" if sep and name else "unknown model string"
        raise UnknownModel(
            f"{what} {spec!r}: use KIND:MODEL with KIND one of {', '.join(KINDS)} "
            "(e.g. openai:gpt-5.4, anthropic:claude-sonnet-4-6)",
            provider=kind if sep and kind in KINDS else None,
            model=name or None,
        )
    base_url = base_url or os.environ.get("TOOLDECK_BASE_URL") or None
    options["max_retries"] = _env_number(
        "TOOLDECK_MAX_RETRIES", max_retries, int, default=2, minimum=0
    )
    chosen_timeout = _env_number("TOOLDECK_TIMEOUT", timeout, float, default=None, minimum=0)
    if chosen_timeout is not None:
        options["timeout"] = chosen_timeout
    flavour = "openai" if kind == "openai-chat" else kind
    if flavour == "compatible" and base_url is None:
        raise ModelConfigError(
            f"compatible server model {name!r}: no address; pass base_url= or set "
            "TOOLDECK_BASE_URL (e.g. http://localhost:8000/v1)",
            provider=kind,
            model=name,
        )
    # only the adapter asked for is imported: its SDK is its own extra (one line if missing)
    if kind == "openai":
        from .openai_responses import OpenAIResponsesModel

        return OpenAIResponsesModel(name, base_url=base_url, **options)
    if kind == "anthropic":
        from .anthropic import AnthropicModel

        return AnthropicModel(name, base_url=base_url, **options)
    if kind in ("bedrock", "vertex"):
        from .anthropic import AnthropicModel

        return AnthropicModel(name, base_url=base_url, cloud=kind, **options)  # type: ignore[arg-type]
    if kind == "gemini":
        from .gemini import GeminiModel

        return GeminiModel(name, base_url=base_url, **options)
    if kind == "azure":
        from .openai_responses import OpenAIResponsesModel

        return OpenAIResponsesModel(name, base_url=base_url, cloud="azure", **options)
    from .chat_completions import ChatCompletionsModel

    if kind == "azure-chat":
        return ChatCompletionsModel(name, base_url=base_url, cloud="azure", **options)
    return ChatCompletionsModel(name, flavour, base_url=base_url, **options)  # type: ignore[arg-type]


def model_from_env(offline: Model, *, variable: str = "TOOLDECK_MODEL", **options: Any) -> Model:
    """The model named by ``$TOOLDECK_MODEL`` (``kind:model``, as ``tooldeck demo --model``
    takes), else ``offline`` (a :class:`~tooldeck.providers.scripted.ScriptedModel`, so a
    program runs without a key).

    A set variable with a bad spec or a missing key raises one line, as
    :func:`model_from_string` does; it never falls back silently.
    """
    spec = os.environ.get(variable, "").strip()
    return model_from_string(spec, **options) if spec else offline


N = TypeVar("N", int, float)


def _env_number(
    name: str, given: N | None, kind: type[N], *, default: N | None, minimum: N
) -> N | None:
    """``given``, else the environment variable ``name``, else ``default``."""
    if given is not None:
        return given
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = kind(raw)
    except ValueError:
        value = None
    if value is None or value < minimum:
        raise ModelConfigError(f"{name}={raw!r} is not a {kind.__name__} >= {minimum}")
    return value
