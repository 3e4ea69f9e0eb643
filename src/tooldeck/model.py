"""The ``Model`` protocol that every provider adapter implements.

Given the transcript, the turn's tools and the settings, a model returns the next
:class:`~tooldeck.transcript.AssistantMessage` (its tool calls and stop reason). Adapters
also stream: ``stream()`` yields :class:`ModelDelta` fragments and finally the same message
``respond()`` would return (the request body differs only by the provider's streaming
flag).

:class:`ModelSettings` carries the request settings every adapter maps, among them the
type of a structured final answer (``output_type``): the one place it is named, so the
adapters (which send its schema), ``ScriptedModel`` and the loop (which validates the
answer and asks again) all read the same :class:`~tooldeck.structured.OutputType`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from .structured import OutputType
from .tools import Tool
from .transcript import AssistantMessage, Item

__all__ = ["ModelDelta", "ToolChoice"]

ToolChoice: TypeAlias = Literal["auto", "none", "required"] | str  # a str = force that tool


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """Request settings, mapped per provider by each adapter.

    A structured final answer: ``output_type`` is a Pydantic model class, a dataclass, a
    TypedDict or a JSON Schema ``dict`` (``output_schema`` is its older name and accepts
    the same; give one of them). Its JSON Schema is sent (strict where the provider's
    strict subset loses nothing), the answer is validated into an instance of the type
    (``RunResult.structured``), and an answer that does not validate is sent back to the
    model with the validation message up to ``output_retries`` times. ``output_spec`` is
    the resolved :class:`~tooldeck.structured.OutputType` (``None`` when none is asked).

    ``cache=True`` turns on prompt caching: Anthropic cache breakpoints on the tool list,
    the system prompt and the growing transcript, OpenAI's ``prompt_cache_key`` (a string
    given as ``cache`` is that key, e.g. a session id), and tools kept in the order they
    were first sent (docs/providers.md, "Prompt caching").
    """

    tool_choice: ToolChoice = "auto"
    parallel_tool_calls: bool = True
    max_output_tokens: int | None = None
    temperature: float | None = None
    output_schema: Any = None  # the older name of output_type: a JSON Schema dict (or a type)
    output_schema_name: str = "final_answer"
    extra: Mapping[str, Any] = field(default_factory=dict)  # provider-specific passthrough
    output_type: Any = None  # Pydantic model class, dataclass, TypedDict or JSON Schema dict
    output_retries: int = 2  # answers sent back for a retry before the turn gives up
    cache: bool | str = False  # prompt caching; a str is OpenAI's prompt_cache_key
    output_spec: OutputType | None = field(init=False, default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        kind, legacy = self.output_type, self.output_schema
        if kind is not None and legacy is not None and kind is not legacy and kind != legacy:
            raise ValueError(
                "ModelSettings: give output_type or output_schema (its older name), not both"
            )
        retries = self.output_retries
        if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
            raise ValueError(
                f"ModelSettings: output_retries must be a whole number >= 0, got {retries!r}"
            )
        if not isinstance(self.cache, (bool, str)) or self.cache == "":
            raise ValueError(
                f"ModelSettings: cache must be True, False or a cache key, got {self.cache!r}"
            )
        source = kind if kind is not None else legacy
        if source is not None:
            spec = OutputType.of(source, self.output_schema_name)
            object.__setattr__(self, "output_spec", spec)

    def expecting(self, output_type: Any, *, retries: int | None = None) -> ModelSettings:
        """These settings with ``output_type`` as the structured answer (``None``: none)."""
        return replace(
            self,
            output_type=output_type,
            output_schema=None,
            output_retries=self.output_retries if retries is None else retries,
        )


@dataclass(frozen=True, slots=True)
class ModelRequest:
    transcript: Sequence[Item]
    tools: Sequence[Tool]
    settings: ModelSettings = field(default_factory=ModelSettings)
    instructions: str | None = None
    deferred: frozenset[str] = frozenset()  # tool names sent with defer_loading
    # Provider-hosted tools the plan chose (wire entries made by this model's adapter, e.g.
    # its web search), sent after the function tools; never executed locally.
    hosted: tuple[Mapping[str, Any], ...] = ()


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
