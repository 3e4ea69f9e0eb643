"""Model adapters: one module per wire protocol, plus the scripted stand-in for tests.

``model_from_string("openai:gpt-5.4")`` builds an adapter from a short spec:

===================  ===========================================================
``openai:M``         OpenAI Responses (``OPENAI_API_KEY``)
``openai-chat:M``    OpenAI Chat Completions (``OPENAI_API_KEY``)
``openrouter:M``     OpenRouter Chat Completions (``OPENROUTER_API_KEY``)
``glm:M``            Z.ai / Zhipu GLM Chat Completions (``ZAI_API_KEY``)
``compatible:M``     any OpenAI-compatible server (vLLM, Ollama...); needs ``base_url``
``anthropic:M``      Anthropic Messages (``ANTHROPIC_API_KEY``)
``scripted``         not a model: the offline demo's script
===================  ===========================================================

``base_url`` overrides the provider's address for every kind (also read from
``TOOLDECK_BASE_URL`` when not given).
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any

from ..model import Model
from .scripted import ScriptedModel, call, reply

if TYPE_CHECKING:
    from .anthropic import AnthropicModel
    from .chat_completions import ChatCompletionsModel
    from .openai_responses import OpenAIResponsesModel

# The adapters import their SDKs (seconds of start-up); load them on first use only.
_LAZY = {
    "AnthropicModel": ".anthropic",
    "ChatCompletionsModel": ".chat_completions",
    "OpenAIResponsesModel": ".openai_responses",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AnthropicModel",
    "ChatCompletionsModel",
    "OpenAIResponsesModel",
    "ScriptedModel",
    "call",
    "model_from_string",
    "reply",
]

KINDS = ("openai", "openai-chat", "openrouter", "glm", "compatible", "anthropic")


def model_from_string(spec: str, *, base_url: str | None = None, **options: Any) -> Model:
    """Build a model adapter from ``kind:model`` (see the module docstring)."""
    kind, sep, name = spec.partition(":")
    if not sep or not name or kind not in KINDS:
        raise ValueError(
            f"model spec {spec!r} should look like KIND:MODEL with KIND one of "
            f"{', '.join(KINDS)} (e.g. openai:gpt-5.4, anthropic:claude-sonnet-4-6)"
        )
    base_url = base_url or os.environ.get("TOOLDECK_BASE_URL") or None
    from .anthropic import AnthropicModel
    from .chat_completions import ChatCompletionsModel
    from .openai_responses import OpenAIResponsesModel

    if kind == "openai":
        return OpenAIResponsesModel(name, base_url=base_url, **options)
    if kind == "anthropic":
        return AnthropicModel(name, base_url=base_url, **options)
    flavour = "openai" if kind == "openai-chat" else kind
    if flavour == "compatible" and base_url is None:
        raise ValueError("compatible:MODEL needs a base_url (or TOOLDECK_BASE_URL)")
    return ChatCompletionsModel(name, flavour, base_url=base_url, **options)  # type: ignore[arg-type]
