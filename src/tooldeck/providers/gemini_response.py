"""Gemini's ``GenerateContentResponse`` (raw JSON) as an :class:`AssistantMessage`, and the
assembler that rebuilds one response from the chunks of ``streamGenerateContent``.

Parts become message parts in order: ``text`` -> :class:`TextPart`; ``functionCall`` ->
:class:`ToolCall` (its ``args`` object as arguments; the part kept, with its
``thoughtSignature``, to go back verbatim); a ``thought: true`` part (a thought summary)
or a bare ``thoughtSignature`` -> an :class:`OpaqueItem` bound to the model; anything
else (``executableCode``, ``codeExecutionResult``, ``inlineData``...) -> an
:class:`OpaqueItem` bound to the provider. A text part that carries a signature is
remembered in ``provider_data["signed_text"]`` so it goes back signed.

``finishReason`` maps onto :class:`StopReason`: ``STOP`` is ``TOOL_CALLS`` when the
message has calls, else ``END_TURN``; ``MAX_TOKENS`` cuts calls short (marked
``incomplete``, never run); the safety blocks (``SAFETY``, ``PROHIBITED_CONTENT``,
``BLOCKLIST``, ``SPII``, ``IMAGE_SAFETY``, ``MODEL_ARMOR``...) and a prompt blocked
before any answer (``promptFeedback.blockReason``) are ``REFUSAL`` with a classified reason
(``refusal:dangerous_content`` from the blocking safety rating, else the block reason),
keeping no text; ``RECITATION`` is ``CONTENT_FILTER``; the rest (``MALFORMED_FUNCTION_CALL``,
``OTHER``, unknown or missing) is ``ERROR``, the raw value in
``provider_data["finish_reason"]``.
"""

from __future__ import annotations

import copy
import json
import logging
import uuid
from collections.abc import Mapping
from typing import Any

from ..model import ModelDelta
from ..result import TextPart
from ..transcript import AssistantMessage, AssistantPart, OpaqueItem, StopReason, ToolCall, Usage
from ._common import StructuredOutput

__all__ = ["StreamAssembler", "parse_response", "usage"]

_log = logging.getLogger("tooldeck.providers.gemini")

PROVIDER = "gemini"
ADAPTER = "gemini-generate-content"

_REFUSED = frozenset(
    {
        "SAFETY",
        "PROHIBITED_CONTENT",
        "BLOCKLIST",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "MODEL_ARMOR",
    }
)
_FILTERED = frozenset({"RECITATION", "IMAGE_RECITATION"})


def usage(raw: Any) -> Usage:
    """``usageMetadata`` as :class:`Usage`: thoughts count as output (and as reasoning),
    cached content as cache reads (it is part of the prompt count)."""
    if not isinstance(raw, Mapping):
        return Usage(requests=1)

    def count(key: str) -> int:
        value = raw.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    thoughts = count("thoughtsTokenCount")
    return Usage(
        input_tokens=count("promptTokenCount") + count("toolUsePromptTokenCount"),
        output_tokens=count("candidatesTokenCount") + thoughts,
        reasoning_tokens=thoughts,
        cache_read_tokens=count("cachedContentTokenCount"),
        requests=1,
    )


def _refusal(candidate: Mapping[str, Any], reason: str, feedback: Any) -> str:
    ratings = candidate.get("safetyRatings")
    if not isinstance(ratings, list) and isinstance(feedback, Mapping):
        ratings = feedback.get("safetyRatings")
    for rating in ratings if isinstance(ratings, list) else ():
        if isinstance(rating, Mapping) and rating.get("blocked"):
            category = str(rating.get("category", ""))
            label = category.removeprefix("HARM_CATEGORY_").lower()
            if label:
                return f"refusal:{label}"
    return f"refusal:{reason.lower()}" if reason and reason != "SAFETY" else "refusal:safety"


def _stop(reason: Any, has_calls: bool) -> StopReason:
    if not isinstance(reason, str):  # missing (a cut stream) or not Gemini's
        return StopReason.ERROR
    if reason == "STOP":
        return StopReason.TOOL_CALLS if has_calls else StopReason.END_TURN
    if reason == "MAX_TOKENS":
        return StopReason.MAX_TOKENS
    if reason in _REFUSED:
        return StopReason.REFUSAL
    if reason in _FILTERED:
        return StopReason.CONTENT_FILTER
    return StopReason.ERROR


def _part(
    raw: Any, index: int, model: str, truncated: bool, signed: list[dict[str, Any]]
) -> AssistantPart | None:
    if not isinstance(raw, Mapping):
        _log.warning("skipping a Gemini part that is not an object: %.200r", raw)
        return None
    part = copy.deepcopy(dict(raw))
    if part.get("thought") is True:
        return OpaqueItem(PROVIDER, ADAPTER, model, "thought", part, model_bound=True)
    call = part.get("functionCall")
    if isinstance(call, Mapping):
        args = call.get("args")
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id:
            call_id = f"call_{uuid.uuid4().hex[:24]}"  # the Gemini API may send none
        return ToolCall(
            call_id,
            str(call.get("name", "")),
            dict(args) if isinstance(args, Mapping) else {},
            incomplete=truncated,
            provider_data={"part": part},
        )
    if isinstance(part.get("text"), str):
        text = part["text"]
        if "thoughtSignature" in part:
            if not text:  # a signature alone (sent after the text it signs)
                return OpaqueItem(PROVIDER, ADAPTER, model, "thought_signature", part)
            signed.append({"index": index, "part": part})
        return TextPart(text)
    kind = next(iter(part), "unknown")
    return OpaqueItem(PROVIDER, ADAPTER, model, kind, part, model_bound=False)


def parse_response(
    raw: Mapping[str, Any], model: str, structured: StructuredOutput | None = None
) -> AssistantMessage:
    """An :class:`AssistantMessage` from a raw ``GenerateContentResponse`` body."""
    candidates = raw.get("candidates")
    candidate: Mapping[str, Any] = {}
    if isinstance(candidates, list) and candidates and isinstance(candidates[0], Mapping):
        candidate = candidates[0]
    feedback = raw.get("promptFeedback")
    blocked = feedback.get("blockReason") if isinstance(feedback, Mapping) else None
    blocked = blocked if isinstance(blocked, str) else None
    reason = candidate.get("finishReason")
    content = candidate.get("content")
    raw_parts = content.get("parts") if isinstance(content, Mapping) else None
    raw_parts = raw_parts if isinstance(raw_parts, list) else []
    has_calls = any(isinstance(p, Mapping) and "functionCall" in p for p in raw_parts)
    stop = _stop(reason, has_calls)
    if blocked and not candidate:
        stop = StopReason.REFUSAL
    # calls from a response cut off at its limit, or without a finish reason, may be
    # half-made: they are marked and never executed
    truncated = stop is not StopReason.TOOL_CALLS
    refused = stop is StopReason.REFUSAL
    parts: list[AssistantPart] = []
    signed: list[dict[str, Any]] = []
    for raw_part in raw_parts:
        part = _part(raw_part, len(parts), model, truncated, signed)
        if part is None or (refused and isinstance(part, TextPart)):
            continue  # a refusal keeps no free text
        parts.append(part)
    provider_data: dict[str, Any] = {"finish_reason": reason}
    if signed:
        provider_data["signed_text"] = signed
    if blocked:
        provider_data["block_reason"] = blocked
    if raw.get("modelVersion") is not None:
        provider_data["modelVersion"] = raw["modelVersion"]
    for key in ("finishMessage", "groundingMetadata", "citationMetadata"):
        value = candidate.get(key)
        if value is not None and not (refused and key == "finishMessage"):
            provider_data[key] = copy.deepcopy(value)  # what grounded or cited the answer
    refusal = None
    if refused:
        refusal = _refusal(candidate, str(blocked or reason or ""), feedback)
    answer: Any = None
    if structured is not None:
        answer, stop = structured.answer(parts, stop, provider_data)
    response_id = raw.get("responseId")
    return AssistantMessage(
        parts=parts,
        stop_reason=stop,
        refusal=refusal,
        usage=usage(raw.get("usageMetadata")),
        provider=PROVIDER,
        adapter=ADAPTER,
        model=model,
        response_id=response_id if isinstance(response_id, str) else None,
        provider_data=provider_data,
        structured=answer,
    )


class StreamAssembler:
    """Merges the chunks of a streamed answer into one response, yielding deltas.

    Consecutive text pieces of the same kind (answer or thought) merge into one part;
    a ``thoughtSignature`` that arrives on a later piece is kept on the merged part.
    Calls arrive whole: each gives a start and its arguments as one fragment.
    """

    def __init__(self) -> None:
        self._parts: list[dict[str, Any]] = []
        self._top: dict[str, Any] = {}
        self._candidate: dict[str, Any] = {}
        self._calls = 0

    def feed(self, chunk: Mapping[str, Any]) -> list[ModelDelta]:
        for key, value in chunk.items():
            if key != "candidates" and value is not None:
                self._top[key] = copy.deepcopy(value)  # usage is cumulative: last wins
        candidates = chunk.get("candidates")
        if not isinstance(candidates, list) or not candidates:
            return []
        candidate = candidates[0]
        if not isinstance(candidate, Mapping):
            return []
        for key, value in candidate.items():
            if key not in ("content", "index") and value is not None:
                self._candidate[key] = copy.deepcopy(value)
        content = candidate.get("content")
        parts = content.get("parts") if isinstance(content, Mapping) else None
        deltas: list[ModelDelta] = []
        for part in parts if isinstance(parts, list) else ():
            if isinstance(part, Mapping):
                deltas += self._add(part)
        return deltas

    def _add(self, part: Mapping[str, Any]) -> list[ModelDelta]:
        call = part.get("functionCall")
        if isinstance(call, Mapping):
            self._parts.append(copy.deepcopy(dict(part)))
            index, self._calls = self._calls, self._calls + 1
            call_id, name = call.get("id"), call.get("name")
            args = call.get("args")
            written = json.dumps(args if isinstance(args, Mapping) else {}, separators=(",", ":"))
            return [
                ModelDelta("tool_call_start", call_id=call_id, name=name, index=index),
                ModelDelta("tool_call", written, call_id=call_id, name=name, index=index),
            ]
        text = part.get("text")
        if not isinstance(text, str):
            self._parts.append(copy.deepcopy(dict(part)))
            return []
        thought = part.get("thought") is True
        last = self._parts[-1] if self._parts else None
        mergeable = (
            last is not None
            and isinstance(last.get("text"), str)
            and (last.get("thought") is True) == thought
            and "thoughtSignature" not in last
            and set(part) <= {"text", "thought", "thoughtSignature"}
        )
        if last is not None and mergeable:
            last["text"] = str(last["text"]) + text
            if "thoughtSignature" in part:
                last["thoughtSignature"] = part["thoughtSignature"]
        else:
            self._parts.append(copy.deepcopy(dict(part)))
        if not text:
            return []
        return [ModelDelta("reasoning" if thought else "text", text)]

    def response(self) -> dict[str, Any]:
        """The response the chunks make up (no candidate when none came)."""
        out = dict(self._top)
        if self._parts or self._candidate:
            candidate = dict(self._candidate)
            candidate["content"] = {"role": "model", "parts": self._parts}
            out["candidates"] = [candidate]
        return out
