"""The spans of a turn: ``invoke_agent`` for the turn, ``chat {model}`` for each request.

The loop starts a :class:`TurnTrace` when a turn starts (only when telemetry is on) and
makes its span the current one for the whole turn, so everything the turn does (model
requests, tool calls, a sub-agent's own turn, an MCP request, a task queued for a
worker) nests under it. Attributes follow the GenAI conventions; content (the prompt,
the request's messages, the completion) only when content capture is on.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from ..transcript import AssistantMessage, StopReason, Usage
from . import names as n
from .content import FINISH_REASONS, clip, input_messages, output_messages, prompt_messages
from .runtime import Telemetry

__all__ = ["ChatTrace", "TurnTrace", "model_identity"]

_EXTRA: ContextVar[Mapping[str, Any] | None] = ContextVar("tooldeck_turn_attributes", default=None)


@contextlib.contextmanager
def turn_attributes(attributes: Mapping[str, Any]) -> Iterator[None]:
    """Extra attributes for the ``invoke_agent`` spans of turns started inside this block.

    ``delegate_task`` names the sub-agent (``gen_ai.agent.name``), a workflow task its
    run and task. Costs nothing to the turn when telemetry is off.
    """
    outer = _EXTRA.get()
    token = _EXTRA.set({**outer, **attributes} if outer else dict(attributes))
    try:
        yield
    finally:
        _EXTRA.reset(token)


def model_identity(model: Any) -> tuple[str, str]:
    """``(gen_ai.provider.name, gen_ai.request.model)`` of a :class:`~tooldeck.model.Model`."""
    name = str(getattr(model, "name", "") or "")
    prefix, sep, rest = name.partition(":")
    provider = getattr(model, "provider", None)
    if not isinstance(provider, str) or not provider:
        provider = prefix if sep else (name or "unknown")
    model_id = getattr(model, "model", None)
    if not isinstance(model_id, str) or not model_id:
        model_id = rest if sep else (name or "unknown")
    return provider, model_id


def _usage(usage: Usage) -> dict[str, int]:
    out = {n.INPUT_TOKENS: usage.input_tokens, n.OUTPUT_TOKENS: usage.output_tokens}
    if usage.cache_read_tokens:
        out[n.CACHE_READ_TOKENS] = usage.cache_read_tokens
    if usage.cache_write_tokens:
        out[n.CACHE_WRITE_TOKENS] = usage.cache_write_tokens
    if usage.reasoning_tokens:
        out[n.REASONING_TOKENS] = usage.reasoning_tokens
    return out


def _error_status(span: Any, kind: str) -> None:
    span.set_attribute(n.ERROR_TYPE, kind)
    span.set_status(Status(StatusCode.ERROR, kind))


def _exception(tel: Telemetry, span: Any, exc: BaseException) -> str:
    """Mark ``span`` failed by ``exc``: its type always, its message only with content."""
    kind = type(exc).__qualname__
    _error_status(span, kind)
    if tel.capture:
        span.record_exception(exc)
    return kind


class TurnTrace:
    """The ``invoke_agent`` span of one turn, current while the turn runs."""

    __slots__ = ("_token", "context", "model", "provider", "span", "started", "tel")

    def __init__(
        self,
        tel: Telemetry,
        *,
        session_id: str,
        model: Any,
        prompt: str,
        instructions: str | None,
        streamed: bool,
    ) -> None:
        self.tel = tel
        self.provider, self.model = model_identity(model)
        extra = _EXTRA.get()
        agent = extra.get(n.AGENT_NAME) if extra else None
        attrs: dict[str, Any] = {
            n.OPERATION: n.INVOKE_AGENT,
            n.PROVIDER: self.provider,
            n.REQUEST_MODEL: self.model,
            n.CONVERSATION_ID: session_id,
            n.SESSION_ID: session_id,
            n.STREAMED: streamed,
        }
        if extra:
            attrs.update(extra)
        if tel.capture:
            attrs[n.INPUT_MESSAGES] = prompt_messages(prompt, tel.content_limit)
            if instructions:
                attrs[n.SYSTEM_INSTRUCTIONS] = _instructions(instructions, tel.content_limit)
        self.span = tel.tracer.start_span(
            f"{n.INVOKE_AGENT} {agent}" if agent else n.INVOKE_AGENT,
            kind=SpanKind.INTERNAL,
            attributes=attrs,
        )
        self.context = trace.set_span_in_context(self.span)
        self._token = otel_context.attach(self.context)
        self.started = time.perf_counter()

    def chat(self, request: Any, step: int) -> ChatTrace:
        return ChatTrace(self, request, step)

    def end(
        self,
        stop: StopReason,
        reason: str,
        steps: int,
        usage: Usage,
        last: AssistantMessage | None,
        exc: BaseException | None,
    ) -> None:
        """End the span (in the task that started it: the turn's context is detached)."""
        span, tel = self.span, self.tel
        try:
            span.set_attributes({n.STOP_REASON: stop.value, n.STEPS: steps, **_usage(usage)})
            error: str | None = None
            if exc is not None:
                error = _exception(tel, span, exc)
            elif stop is StopReason.ERROR:
                error = "aborted" if reason.startswith("aborted") else "error"
                _error_status(span, error)
            if tel.capture and last is not None and exc is None:
                span.set_attribute(n.OUTPUT_MESSAGES, output_messages(last, tel.content_limit))
            tel.record_duration(
                n.INVOKE_AGENT,
                time.perf_counter() - self.started,
                {n.PROVIDER: self.provider, n.REQUEST_MODEL: self.model},
                error,
            )
        finally:
            otel_context.detach(self._token)
            span.end()


def _instructions(text: str, limit: int) -> str:
    return json.dumps([{"type": "text", "content": clip(text, limit)}], ensure_ascii=False)


class ChatTrace:
    """The ``chat {model}`` span of one model request (``with turn.chat(...) as chat``)."""

    __slots__ = ("_token", "attrs", "span", "started", "turn")

    def __init__(self, turn: TurnTrace, request: Any, step: int) -> None:
        self.turn = turn
        tel = turn.tel
        self.attrs = {n.PROVIDER: turn.provider, n.REQUEST_MODEL: turn.model}
        attrs: dict[str, Any] = {n.OPERATION: n.CHAT, **self.attrs, n.STEP: step}
        settings = request.settings
        if settings.max_output_tokens is not None:
            attrs[n.REQUEST_MAX_TOKENS] = settings.max_output_tokens
        if settings.temperature is not None:
            attrs[n.REQUEST_TEMPERATURE] = settings.temperature
        if tel.capture:
            attrs[n.INPUT_MESSAGES] = input_messages(request.transcript, tel.content_limit)
            if request.instructions:
                attrs[n.SYSTEM_INSTRUCTIONS] = _instructions(
                    request.instructions, tel.content_limit
                )
        self.span = tel.tracer.start_span(
            f"{n.CHAT} {turn.model}", turn.context, kind=SpanKind.CLIENT, attributes=attrs
        )
        self._token: Any = None
        self.started = 0.0

    def __enter__(self) -> ChatTrace:
        self._token = otel_context.attach(trace.set_span_in_context(self.span))
        self.started = time.perf_counter()
        return self

    def finished(self, message: AssistantMessage) -> None:
        tel, span = self.turn.tel, self.span
        response_model = message.model or self.turn.model
        attrs: dict[str, Any] = {
            n.RESPONSE_MODEL: response_model,
            n.FINISH_REASONS: (FINISH_REASONS.get(message.stop_reason, message.stop_reason.value),),
            n.TOOL_CALLS: len(message.tool_calls),
            **_usage(message.usage),
        }
        if message.response_id:
            attrs[n.RESPONSE_ID] = message.response_id
        if tel.capture:
            attrs[n.OUTPUT_MESSAGES] = output_messages(message, tel.content_limit)
        span.set_attributes(attrs)
        if message.stop_reason is StopReason.ERROR:
            _error_status(span, "provider_error")
        tel.record_tokens(
            message.usage.input_tokens,
            message.usage.output_tokens,
            {**self.attrs, n.RESPONSE_MODEL: response_model},
        )

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> None:
        tel, span = self.turn.tel, self.span
        try:
            error = _exception(tel, span, exc) if exc is not None else None
            tel.record_duration(n.CHAT, time.perf_counter() - self.started, self.attrs, error)
        finally:
            otel_context.detach(self._token)
            span.end()
