"""Sending tooldeck's traces and metrics over OTLP/HTTP, in one call.

Any OpenTelemetry setup works (tooldeck uses the global providers, or those given to
:func:`~tooldeck.telemetry.configure`); this is the short way for the common case, and
what ``tooldeck worker`` and ``tooldeck demo`` do when ``OTEL_EXPORTER_OTLP_ENDPOINT``
(or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is set. It needs the SDK and the OTLP/HTTP
exporter, the ``otel`` extra (without it, :func:`setup_otlp` raises
:class:`~tooldeck.errors.MissingExtra`, one line naming it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from opentelemetry import metrics, trace

from .._extras import needs_extra
from .settings import _tracing, configure

_ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def setup_otlp(
    endpoint: str | None = None,
    *,
    service_name: str = "tooldeck",
    headers: Mapping[str, str] | None = None,
    metrics_too: bool = True,
    set_global: bool = True,
) -> tuple[Any, Any]:
    """Export spans (and metrics) to the OTLP/HTTP receiver at ``endpoint``.

    ``endpoint`` is the receiver's base URL (``http://localhost:4318``: Jaeger, Phoenix,
    Grafana Tempo, an OpenTelemetry Collector); ``/v1/traces`` and ``/v1/metrics`` are
    added. Without it, the exporter reads the standard ``OTEL_EXPORTER_OTLP_*`` variables
    (endpoint, headers such as a Logfire token). With ``set_global`` the providers become
    the process's global ones (other libraries' spans join the same traces); otherwise
    only tooldeck uses them. Returns ``(tracer_provider, meter_provider)``.
    """
    with needs_extra("otel"):
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    base = endpoint.rstrip("/") if endpoint else None
    given = dict(headers) if headers else None
    resource = Resource.create({SERVICE_NAME: service_name})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(
        BatchSpanProcessor(
            OTLPSpanExporter(endpoint=f"{base}/v1/traces" if base else None, headers=given)
        )
    )
    meter_provider = None
    if metrics_too:
        reader = PeriodicExportingMetricReader(
            OTLPMetricExporter(endpoint=f"{base}/v1/metrics" if base else None, headers=given)
        )
        meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
    if set_global:
        trace.set_tracer_provider(tracer_provider)
        if meter_provider is not None:
            metrics.set_meter_provider(meter_provider)
    else:
        configure(tracer_provider=tracer_provider, meter_provider=meter_provider)
    return tracer_provider, meter_provider


def setup_from_env(service_name: str = "tooldeck") -> bool:
    """Export over OTLP when the environment names an endpoint and nothing is set up yet.

    Returns whether it did. ``OTEL_SDK_DISABLED=true`` turns it off.
    """
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if not any(os.environ.get(v) for v in _ENDPOINT_VARS):
        return False
    if _tracing(trace.get_tracer_provider()):
        return False  # the application set up its own
    setup_otlp(service_name=os.environ.get("OTEL_SERVICE_NAME") or service_name)
    return True
