"""The live telemetry of a process: its tracer, its instruments, its content switch.

One :class:`Telemetry` exists per configuration (see :mod:`.settings`); the span
helpers (:mod:`.turns`, :mod:`.calls`, :mod:`.workflows`) take it from there.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

from . import names as n


def _version() -> str:
    try:
        return version("tooldeck")
    except PackageNotFoundError:  # pragma: no cover - a source tree
        return "0"


class Telemetry:
    """A tracer, the metric instruments, and what may be recorded."""

    __slots__ = (
        "calls",
        "capture",
        "content_limit",
        "duration",
        "metering",
        "record_approver",
        "tokens",
        "tracer",
        "tracing",
    )

    def __init__(
        self,
        tracer_provider: Any,
        meter_provider: Any,
        *,
        tracing: bool,
        metering: bool,
        capture: bool,
        record_approver: bool,
        content_limit: int,
    ) -> None:
        self.tracing = tracing
        self.metering = metering
        self.capture = capture
        self.record_approver = record_approver
        self.content_limit = content_limit
        self.tracer = tracer_provider.get_tracer(n.INSTRUMENTATION, _version())
        self.tokens: Any = None
        self.duration: Any = None
        self.calls: Any = None
        if metering:
            meter = meter_provider.get_meter(n.INSTRUMENTATION, _version())
            self.tokens = meter.create_histogram(
                n.TOKEN_USAGE_METRIC,
                unit="{token}",
                description="Number of input and output tokens used.",
                explicit_bucket_boundaries_advisory=n.TOKEN_BUCKETS,
            )
            self.duration = meter.create_histogram(
                n.DURATION_METRIC,
                unit="s",
                description="GenAI operation duration.",
                explicit_bucket_boundaries_advisory=n.DURATION_BUCKETS,
            )
            self.calls = meter.create_counter(
                n.TOOL_CALLS_METRIC,
                unit="{call}",
                description="Tool calls, by tool and outcome (ok, error, denied, timed_out, "
                "cancelled, not_run).",
            )

    # -- metrics ----------------------------------------------------------------------------
    def record_duration(
        self, operation: str, seconds: float, attributes: dict[str, Any], error: str | None
    ) -> None:
        if self.duration is None:
            return
        attrs = {n.OPERATION: operation, **attributes}
        if error:
            attrs[n.ERROR_TYPE] = error
        self.duration.record(seconds, attrs)

    def record_tokens(
        self, input_tokens: int, output_tokens: int, attributes: dict[str, Any]
    ) -> None:
        if self.tokens is None:
            return
        base = {n.OPERATION: n.CHAT, **attributes}
        self.tokens.record(input_tokens, {**base, n.TOKEN_TYPE: "input"})
        self.tokens.record(output_tokens, {**base, n.TOKEN_TYPE: "output"})

    def count_call(self, tool: str, outcome: str, error: str | None) -> None:
        if self.calls is None:
            return
        attrs = {n.TOOL_NAME: tool, n.TOOL_OUTCOME: outcome}
        if error:
            attrs[n.ERROR_TYPE] = error
        self.calls.add(1, attrs)
