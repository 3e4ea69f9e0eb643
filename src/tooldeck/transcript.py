"""Provider-neutral transcript types.

A transcript is a list of items: :class:`UserMessage`, :class:`AssistantMessage` and
:class:`ToolOutput`. An assistant message keeps its parts in the order the provider sent
them (text, tool calls and provider-opaque items such as reasoning or server-side tool
use), because several providers require that order on replay. Provider-opaque items are
kept verbatim with the provider, adapter and model that produced them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, TypeAlias

from .result import ContentPart, TextPart, ToolResult

_log = logging.getLogger("tooldeck.transcript")

__all__ = ["AssistantPart", "Item", "distinct_call_ids"]


class StopReason(StrEnum):
    """Why the model stopped; a closed set every provider's reason is mapped onto."""

    END_TURN = "end_turn"
    TOOL_CALLS = "tool_calls"
    MAX_TOKENS = "max_tokens"  # also OpenAI's status "incomplete"
    REFUSAL = "refusal"
    PAUSE_TURN = "pause_turn"
    CONTENT_FILTER = "content_filter"
    ERROR = "error"
    BUDGET = "budget"  # never a provider's: a turn stopped by its budget (tooldeck.budget)


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    requests: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.requests + other.requests,
        )

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True, slots=True)
class UserMessage:
    content: str | Sequence[ContentPart]

    @property
    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "\n".join(p.text for p in self.content if isinstance(p, TextPart))


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One function call the model asked for.

    ``arguments`` is raw: a JSON string (OpenAI, OpenRouter, GLM) or an object
    (Anthropic). ``item_id`` is the provider's item id where it has one (OpenAI
    Responses ``fc_...``), distinct from the ``call_id`` that outputs answer to.
    ``incomplete`` marks a call from a truncated response: it is never executed.
    """

    call_id: str
    name: str
    arguments: str | Mapping[str, Any]
    item_id: str | None = None
    namespace: str | None = None
    incomplete: bool = False
    provider_data: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class OpaqueItem:
    """A provider item kept verbatim: reasoning, thinking, server-side tool use...

    ``data`` is exactly what the provider sent. ``model_bound`` items (reasoning,
    thinking) are replayed only to the same provider, adapter and model; others
    (server-side tool use and its results) are replayed to the same provider.
    Neither ever reaches the local dispatcher.
    """

    provider: str
    adapter: str
    model: str
    kind: str
    data: Any
    model_bound: bool = True

    def replayable_to(self, provider: str, adapter: str, model: str) -> bool:
        if self.provider != provider or self.adapter != adapter:
            return False
        return not self.model_bound or self.model == model


AssistantPart: TypeAlias = TextPart | ToolCall | OpaqueItem


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    """One model response, its parts in the provider's order."""

    parts: Sequence[AssistantPart] = ()
    stop_reason: StopReason = StopReason.END_TURN
    refusal: str | None = None  # a classified reason such as "refusal:safety", never free text
    usage: Usage = field(default_factory=Usage)
    provider: str = ""
    adapter: str = ""
    model: str = ""
    response_id: str | None = None
    provider_data: Mapping[str, Any] | None = None
    structured: Any = None  # a validated structured final answer, when one was requested

    def __post_init__(self) -> None:
        parts = distinct_call_ids(self.parts)
        if parts is not self.parts:
            object.__setattr__(self, "parts", parts)

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [p for p in self.parts if isinstance(p, ToolCall)]

    @property
    def opaque(self) -> list[OpaqueItem]:
        return [p for p in self.parts if isinstance(p, OpaqueItem)]


def distinct_call_ids(parts: Sequence[AssistantPart]) -> Sequence[AssistantPart]:
    """``parts`` with every tool call's id distinct and non-empty.

    A call's id is its identity everywhere inside tooldeck (its output, its approval, a
    resumed step), so it must name exactly one call of the message. A provider may send
    an empty id or the same id twice; the first call keeps an id it shares, and every
    later one (and every empty one) gets a new id, ``<id>_<n>`` or ``call_<n>``, that no
    call of the message has. The provider's id is kept in ``provider_data`` under
    ``"provider_call_id"``. Messages are replayed with the new ids, consistently with
    their outputs. ``parts`` itself comes back when nothing had to change.
    """
    calls = [p for p in parts if isinstance(p, ToolCall)]
    if not calls:
        return parts
    ids = [c.call_id for c in calls]
    if "" not in ids and len(set(ids)) == len(ids):
        return parts
    taken = set(ids)
    kept: set[str] = set()
    out: list[AssistantPart] = []
    for part in parts:
        if not isinstance(part, ToolCall):
            out.append(part)
            continue
        if part.call_id and part.call_id not in kept:
            kept.add(part.call_id)
            out.append(part)
            continue
        base = part.call_id or "call"
        n = 2
        while f"{base}_{n}" in taken:
            n += 1
        new_id = f"{base}_{n}"
        taken.add(new_id)
        kept.add(new_id)
        data = {**(part.provider_data or {}), "provider_call_id": part.call_id}
        out.append(replace(part, call_id=new_id, provider_data=data))
        _log.warning(
            "call %r (%s): its id is %s; it is known as %r from now on",
            part.call_id,
            part.name,
            "empty" if not part.call_id else "shared with an earlier call",
            new_id,
        )
    return tuple(out)


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """The one output recorded for one call id."""

    call_id: str
    name: str
    result: ToolResult
    repairs: tuple[str, ...] = ()

    @property
    def is_error(self) -> bool:
        return self.result.is_error

    @property
    def text(self) -> str:
        return self.result.text()


Item: TypeAlias = UserMessage | AssistantMessage | ToolOutput
