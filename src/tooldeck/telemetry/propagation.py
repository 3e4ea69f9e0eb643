"""Trace context across boundaries: threads, HTTP requests, processes.

Only the W3C trace context travels (``traceparent`` / ``tracestate``), never baggage:
baggage is the application's own data, and a trace id is all an MCP server or a worker
needs to join the trace. Everything here does nothing when there is no valid span.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

__all__ = ["current", "inject_headers"]

_W3C = TraceContextTextMapPropagator()


def current() -> otel_context.Context | None:
    """The current context if it holds a valid span (to carry to another thread)."""
    ctx = otel_context.get_current()
    return ctx if trace.get_current_span(ctx).get_span_context().is_valid else None


def carrier() -> dict[str, str]:
    """The current trace context as W3C headers (``{}`` when there is no valid span)."""
    out: dict[str, str] = {}
    if current() is not None:
        _W3C.inject(out)
    return out


def inject_headers(headers: MutableMapping[str, str]) -> None:
    """Add ``traceparent`` (and ``tracestate``) of the current span to ``headers``."""
    if current() is not None:
        _W3C.inject(headers)


@contextlib.contextmanager
def joined(trace_carrier: Mapping[str, Any] | None) -> Iterator[None]:
    """Run the block in the trace of ``trace_carrier`` (a :func:`carrier` from elsewhere).

    A missing or malformed carrier changes nothing: the block runs in the context it has.
    """
    ctx = None
    if isinstance(trace_carrier, Mapping) and trace_carrier:
        try:
            extracted = _W3C.extract({str(k): str(v) for k, v in trace_carrier.items()})
        except Exception:  # a carrier from a queue is data: never let it stop a task
            extracted = None
        if extracted is not None and trace.get_current_span(extracted).get_span_context().is_valid:
            ctx = extracted
    if ctx is None:
        yield
        return
    token = otel_context.attach(ctx)
    try:
        yield
    finally:
        otel_context.detach(token)


@contextlib.contextmanager
def restored(ctx: otel_context.Context | None) -> Iterator[None]:
    """Make ``ctx`` (from :func:`current`, in another thread) current for the block."""
    if ctx is None:
        yield
        return
    token = otel_context.attach(ctx)
    try:
        yield
    finally:
        otel_context.detach(token)
