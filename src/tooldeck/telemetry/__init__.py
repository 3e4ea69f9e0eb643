"""OpenTelemetry traces and metrics of turns, model requests and tool calls.

An operator running agents needs to answer "why was this turn slow, which tool failed,
who approved that call, how many tokens did this cost" without reading logs by hand.
The loop and the dispatcher already know all of it; this package says it in the
ecosystem's language, the OpenTelemetry GenAI semantic conventions, so any OTLP backend
(Jaeger, Phoenix, Logfire, Grafana Tempo) shows it:

- ``invoke_agent`` per turn, ``chat {model}`` per model request, ``execute_tool {name}``
  per call (every call, whatever happened to it), an approval span per approval
  request, spans of workflow runs and task turns; events for policy decisions,
  approvals, offloaded and guarded results (:mod:`.turns`, :mod:`.calls`,
  :mod:`.runs`);
- the GenAI metrics (token usage, operation duration) and tool calls by outcome;
- the trace context carried to MCP servers over HTTP and to workflow workers
  (:mod:`.propagation`);
- content (prompts, completions, arguments, results) only when switched on
  (:mod:`.content`, :func:`configure`).

Off until a tracer or meter provider is configured, and then free: see
:mod:`.settings`. ``setup_otlp`` (:mod:`.otlp`) is the short way to send it all to an
OTLP/HTTP endpoint.
"""

from __future__ import annotations

from typing import Any

from opentelemetry import trace

from . import names
from .calls import note_approver
from .otlp import setup_from_env, setup_otlp
from .propagation import carrier, joined
from .runtime import Telemetry
from .settings import CAPTURE_ENV, Settings, active, configure, reset, settings
from .turns import turn_attributes

__all__ = [
    "CAPTURE_ENV",
    "Settings",
    "Telemetry",
    "active",
    "carrier",
    "configure",
    "joined",
    "names",
    "note_approver",
    "reset",
    "result_prepared",
    "settings",
    "setup_from_env",
    "setup_otlp",
    "turn_attributes",
]


def result_prepared(ref: Any, before: Any, after: Any) -> None:
    """Events on the current call's span: ``after`` was offloaded (``ref``) and/or cut.

    Called by the offload store's hook only when it changed a result; does nothing
    when the current span is not recording.
    """
    span = trace.get_current_span()
    if not span.is_recording():
        return
    if ref is not None:
        span.add_event(
            names.OFFLOAD_EVENT,
            {
                names.REF_ID: ref.ref_id,
                names.ORIGINAL_TOKENS: ref.original_tokens,
                "tooldeck.offload.summary_tokens": ref.summary_tokens,
                names.TOTAL_CHARS: ref.total_chars,
                "tooldeck.offload.size_bytes": ref.size_bytes,
            },
        )
    cut = _guarded(after)
    if cut is not None and cut != _guarded(before):
        span.add_event(
            names.GUARD_EVENT,
            {
                names.ORIGINAL_TOKENS: int(cut.get("original_tokens", 0)),
                names.SHOWN_TOKENS: int(cut.get("shown_tokens", 0)),
                names.TOTAL_CHARS: int(cut.get("total_chars", 0)),
                names.SHOWN_CHARS: int(cut.get("shown_chars", 0)),
            },
        )


def _guarded(result: Any) -> Any:
    details = getattr(result, "details", None)
    found = details.get("guarded") if isinstance(details, dict) else None
    return found if isinstance(found, dict) else None
