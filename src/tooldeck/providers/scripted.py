"""``ScriptedModel``: NOT a real model. It replays assistant turns you give it.

Use it for tests, demos and benchmarks, where a real model would be slow, costly or
nondeterministic. It never reads the network. Give it a list of turns (each an
:class:`~tooldeck.transcript.AssistantMessage`, or built with :func:`call` and
:func:`reply`), or a function of the request that returns the next turn.

When the request asks for a structured final answer (``ModelSettings(output_type=...)``),
a scripted final answer goes through the same check a real adapter makes: the schema is
checked before the "request", the text is parsed and validated, and an answer that does
not validate comes back with stop reason ``ERROR`` and ``provider_data["structured_error"]``,
so the loop's retry path can be tested offline.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any

from ..model import ModelDelta, ModelRequest
from ..result import TextPart
from ..transcript import AssistantMessage, AssistantPart, StopReason, ToolCall, Usage
from ._common import StructuredOutput, prepare_output_schema

_ids = itertools.count(1)


def call(
    name: str,
    arguments: str | Mapping[str, Any] | None = None,
    *,
    call_id: str | None = None,
    incomplete: bool = False,
) -> ToolCall:
    """A scripted tool call; dict arguments are sent as a JSON string, like OpenAI does."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    return ToolCall(call_id or f"call_{next(_ids)}", name, raw, incomplete=incomplete)


def reply(
    *parts: str | ToolCall,
    stop_reason: StopReason | None = None,
    refusal: str | None = None,
    usage: Usage | None = None,
) -> AssistantMessage:
    """A scripted assistant turn from text and calls; the stop reason is inferred if omitted."""
    built: list[AssistantPart] = [TextPart(p) if isinstance(p, str) else p for p in parts]
    has_calls = any(isinstance(p, ToolCall) for p in built)
    reason = stop_reason or (StopReason.TOOL_CALLS if has_calls else StopReason.END_TURN)
    return AssistantMessage(
        parts=built,
        stop_reason=reason,
        refusal=refusal,
        usage=usage or Usage(input_tokens=10, output_tokens=5, requests=1),
        provider="scripted",
        adapter="scripted",
        model="scripted",
    )


Script = Callable[[ModelRequest], AssistantMessage]


class ScriptedModel:
    """A stand-in for a model that replays a script (not a real model).

    ``ScriptedModel([reply(call("add", {"a": 1, "b": 2})), reply("3")])`` answers the
    first request with a tool call and the second with text. When the script runs out
    it raises ``RuntimeError`` so a test never loops silently. ``requests`` keeps every
    request it received, for assertions.

    :meth:`stream` plays each turn as a provider streams one: a ``tool_call_start`` per
    call, then the text and the arguments in pieces of ``stream_chunk`` characters (whole
    when ``None``); an :class:`~tooldeck.transcript.OpaqueItem` of kind ``"reasoning"``
    whose data is a string streams as reasoning.
    """

    def __init__(
        self,
        script: Iterable[AssistantMessage] | Script,
        *,
        name: str = "scripted",
        stream_chunk: int | None = None,
    ):
        if stream_chunk is not None and stream_chunk < 1:
            raise ValueError("stream_chunk must be a positive number of characters")
        self._name = name
        self._chunk = stream_chunk
        self.requests: list[ModelRequest] = []
        if callable(script):
            self._fn: Script | None = script
            self._turns: list[AssistantMessage] = []
        else:
            self._fn = None
            self._turns = list(script)

    @property
    def name(self) -> str:
        return self._name

    async def respond(self, request: ModelRequest) -> AssistantMessage:
        spec = request.settings.output_spec
        structured = (
            None
            if spec is None
            else prepare_output_schema(
                spec.schema, request.settings.output_schema_name, "openai", "scripted"
            )
        )
        self.requests.append(request)
        if self._fn is not None:
            return _answer(self._fn(request), structured)
        index = len(self.requests) - 1
        if index >= len(self._turns):
            raise RuntimeError(
                f"ScriptedModel script exhausted after {len(self._turns)} turns "
                f"(request {index + 1})"
            )
        return _answer(self._turns[index], structured)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta | AssistantMessage]:
        message = await self.respond(request)
        index = 0
        for part in message.parts:
            if isinstance(part, TextPart):
                for piece in self._pieces(part.text):
                    yield ModelDelta("text", piece)
            elif isinstance(part, ToolCall):
                args = (
                    part.arguments
                    if isinstance(part.arguments, str)
                    else json.dumps(part.arguments)
                )
                yield ModelDelta(
                    "tool_call_start", call_id=part.call_id, name=part.name, index=index
                )
                for piece in self._pieces(args):
                    yield ModelDelta(
                        "tool_call", piece, call_id=part.call_id, name=part.name, index=index
                    )
                index += 1
            elif part.kind == "reasoning" and isinstance(part.data, str):
                for piece in self._pieces(part.data):
                    yield ModelDelta("reasoning", piece)
        yield message

    def _pieces(self, text: str) -> list[str]:
        if not text:
            return []
        size = self._chunk or len(text)
        return [text[at : at + size] for at in range(0, len(text), size)]


def _answer(message: AssistantMessage, structured: StructuredOutput | None) -> AssistantMessage:
    """``message`` with its structured answer checked, as a real adapter would."""
    if (
        structured is None
        or message.stop_reason is not StopReason.END_TURN
        or message.tool_calls
        or message.structured is not None
    ):
        return message
    try:
        value = structured.parse(message.text)
    except ValueError as exc:
        data = {**(message.provider_data or {}), "structured_error": str(exc)}
        return dataclasses.replace(message, stop_reason=StopReason.ERROR, provider_data=data)
    return dataclasses.replace(message, structured=value)
