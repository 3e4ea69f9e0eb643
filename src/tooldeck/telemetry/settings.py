"""Whether telemetry is on, where it goes, and whether content is recorded.

Telemetry is off until the application configures OpenTelemetry: with no tracer
provider and no meter provider set (the API's proxies, or its no-op providers),
:func:`active` returns ``None`` and tooldeck builds no span, event or attribute at all.
The loop and the dispatcher ask once per turn (and once per dispatcher), so "off" costs
them one ``is None`` test where it matters. The answer is cached per provider pair and
settings, so asking again is cheap.

``configure`` is tooldeck's own setting: explicit providers (instead of the global
ones), the content switch, whether an approver's identity is recorded, and the size
limit of recorded content. Content (prompts, completions, tool arguments and results)
is recorded only when it is switched on, here or by the GenAI conventions' environment
variable ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.metrics import NoOpMeterProvider

from .runtime import Telemetry

try:  # the API's stand-in until a meter provider is set (private in every release)
    from opentelemetry.metrics._internal import _ProxyMeterProvider as _ProxyMeter
except ImportError:  # pragma: no cover - a future API without it
    _ProxyMeter = NoOpMeterProvider  # type: ignore[assignment,misc]

CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The GenAI conventions' switch for recording message content."""
_CAPTURE_ON = frozenset({"true", "1", "yes", "on", "span_only", "span_and_event"})
DEFAULT_CONTENT_LIMIT = 15_000
"""Tokens of one recorded content value: the offload store's default threshold (a larger
result is offloaded, and the model sees a summary of it)."""


@dataclass(frozen=True, slots=True)
class Settings:
    """tooldeck's telemetry settings (see :func:`configure`)."""

    tracer_provider: Any = None  # None: the global one (opentelemetry.trace)
    meter_provider: Any = None  # None: the global one (opentelemetry.metrics)
    capture_content: bool | None = None  # None: the environment variable decides
    record_approver: bool = False  # record who answered an approval
    content_limit_tokens: int = DEFAULT_CONTENT_LIMIT


_settings = Settings()
_key: tuple[Any, Any, Settings, str | None] | None = None
_cached: Telemetry | None = None
_UNSET: Any = object()


def settings() -> Settings:
    return _settings


def configure(
    *,
    tracer_provider: Any = _UNSET,
    meter_provider: Any = _UNSET,
    capture_content: bool | None = _UNSET,
    record_approver: bool = _UNSET,
    content_limit_tokens: int = _UNSET,
) -> Settings:
    """Change tooldeck's telemetry settings; what is not given stays as it is.

    - ``tracer_provider`` / ``meter_provider``: send tooldeck's spans / metrics there
      instead of the global providers (``None``: the global ones again);
    - ``capture_content``: record prompts, completions, tool arguments and results
      (``None``: as ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` says; off when
      it is not set);
    - ``record_approver``: put who answered an approval on its span event (off: an
      answer says approved or denied, never by whom);
    - ``content_limit_tokens``: the most one recorded content value may hold (longer
      values are cut, with a note saying how much).
    """
    global _settings
    changes = {
        k: v
        for k, v in {
            "tracer_provider": tracer_provider,
            "meter_provider": meter_provider,
            "capture_content": capture_content,
            "record_approver": record_approver,
            "content_limit_tokens": content_limit_tokens,
        }.items()
        if v is not _UNSET
    }
    limit = changes.get("content_limit_tokens", 1)
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise ValueError(f"content_limit_tokens must be a positive whole number, got {limit!r}")
    _settings = dataclasses.replace(_settings, **changes)
    return _settings


def reset() -> None:
    """Back to the defaults: the global providers, no content, no approver identity."""
    global _settings, _key, _cached
    _settings = Settings()
    _key = _cached = None


def _tracing(provider: Any) -> bool:
    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)


def _metering(provider: Any) -> bool:
    return not isinstance(provider, _ProxyMeter | NoOpMeterProvider)


def active() -> Telemetry | None:
    """The telemetry to record with, or ``None`` when no provider is configured."""
    global _key, _cached
    s = _settings
    tp = s.tracer_provider if s.tracer_provider is not None else trace.get_tracer_provider()
    mp = s.meter_provider if s.meter_provider is not None else metrics.get_meter_provider()
    env = os.environ.get(CAPTURE_ENV) if s.capture_content is None else None
    key = _key
    if key is not None and key[0] is tp and key[1] is mp and key[2] is s and key[3] == env:
        return _cached
    tracing, metering = _tracing(tp), _metering(mp)
    capture = s.capture_content
    if capture is None:
        capture = (env or "").strip().lower() in _CAPTURE_ON
    made = (
        Telemetry(
            tp,
            mp,
            tracing=tracing,
            metering=metering,
            capture=capture,
            record_approver=s.record_approver,
            content_limit=s.content_limit_tokens,
        )
        if tracing or metering
        else None
    )
    _key, _cached = (tp, mp, s, env), made
    return made
