"""The ``Model`` protocol that every provider adapter implements.

Given the transcript, the turn's tools and the settings, a model returns the next
:class:`~tooldeck.transcript.AssistantMessage` (its tool calls and stop reason). Adapters
also stream: ``stream()`` yields :class:`ModelDelta` fragments and finally the same message
``respond()`` would return (the request body differs only by the provider's streaming
flag).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from .tool import Tool
from .transcript import AssistantMessage, Item

__all__ = ["Model", "ModelDelta", "ModelRequest", "ModelSettings", "ToolChoice"]

ToolChoice: TypeAlias = Literal["auto", "none", "required"] | str  # a str = force that tool


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """Request settings, mapped per provider by each adapter."""

    tool_choice: ToolChoice = "auto"
    parallel_tool_calls: bool = True
    max_output_tokens: int | None = None
    temperature: float | None = None
    output_schema: Mapping[str, Any] | None = None  # a structured final answer
    output_schema_name: str = "final_answer"
    extra: Mapping[str, Any] = field(default_factory=dict)  # provider-specific passthrough


@dataclass(frozen=True, slots=True)
class ModelRequest:
    transcript: Sequence[Item]
    tools: Sequence[Tool]
    settings: ModelSettings = field(default_factory=ModelSettings)
    instructions: str | None = None
    deferred: frozenset[str] = frozenset()  # tool names sent with defer_loading


@dataclass(frozen=True, slots=True)
class ModelDelta:
    """A streamed fragment of the message a model is writing.

    ``kind`` is one of:

    - ``"text"``: a piece of visible text (``text``);
    - ``"reasoning"``: a piece of a reasoning summary or thinking text the provider shows
      (never encrypted or omitted reasoning);
    - ``"tool_call_start"``: the model began a tool call (``call_id`` and ``name`` as the
      provider sent them, either may still be missing);
    - ``"tool_call"``: a fragment of that call's arguments (``text``, JSON text).

    ``index`` is the call's position among the message's tool calls (0 for its first
    call), the same in the start, every fragment and the final message's
    ``tool_calls``; provider-run calls (server-side tools) are not counted.
    """

    kind: Literal["text", "reasoning", "tool_call_start", "tool_call"]
    text: str = ""
    call_id: str | None = None
    name: str | None = None
    index: int | None = None


@runtime_checkable
class Model(Protocol):
    """What the loop needs from a model."""

    @property
    def name(self) -> str: ...

    async def respond(self, request: ModelRequest) -> AssistantMessage: ...

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta | AssistantMessage]: ...
