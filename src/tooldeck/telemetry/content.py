"""Content for spans, only when content capture is on: prompts, completions, arguments,
results, in the GenAI conventions' message format, each value cut to the size limit.

A trace backend is not where a 50 MB tool result belongs: what is recorded is what the
model was shown (a large result's offload summary, a guarded result's cut view), and
every value is cut to ``content_limit_tokens`` (by default the offload store's
threshold), with a note of how much was left out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..result import TextPart
from ..tokens import estimate_tokens, prefix_within
from ..transcript import AssistantMessage, Item, StopReason, ToolCall, ToolOutput

__all__ = ["arguments_text", "input_messages", "output_messages", "prompt_messages"]

FINISH_REASONS = {
    StopReason.END_TURN: "stop",
    StopReason.TOOL_CALLS: "tool_call",
    StopReason.MAX_TOKENS: "length",
    StopReason.CONTENT_FILTER: "content_filter",
    StopReason.ERROR: "error",
    StopReason.REFUSAL: "refusal",
    StopReason.PAUSE_TURN: "pause_turn",
}


def clip(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` tokens, saying how many characters were cut."""
    if estimate_tokens(text) <= limit:
        return text
    keep = prefix_within(text, limit, estimate_tokens)
    return text[:keep] + f"[… {len(text) - keep:,} characters not recorded]"


def arguments_text(arguments: str | Mapping[str, Any], limit: int) -> str:
    if isinstance(arguments, str):
        return clip(arguments, limit)
    try:
        text = json.dumps(dict(arguments), ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(arguments)
    return clip(text, limit)


def _arguments_value(arguments: str | Mapping[str, Any], limit: int) -> Any:
    """The arguments as JSON data when they are (and fit), else their (cut) text."""
    text = arguments_text(arguments, limit)
    try:
        return json.loads(text)
    except ValueError:
        return text


def _message(item: Item, limit: int) -> dict[str, Any]:
    if isinstance(item, AssistantMessage):
        parts: list[dict[str, Any]] = []
        for part in item.parts:
            if isinstance(part, TextPart):
                parts.append({"type": "text", "content": clip(part.text, limit)})
            elif isinstance(part, ToolCall):
                parts.append(
                    {
                        "type": "tool_call",
                        "id": part.call_id,
                        "name": part.name,
                        "arguments": _arguments_value(part.arguments, limit),
                    }
                )
        return {
            "role": "assistant",
            "parts": parts,
            "finish_reason": FINISH_REASONS.get(item.stop_reason, item.stop_reason.value),
        }
    if isinstance(item, ToolOutput):
        return {
            "role": "tool",
            "parts": [
                {
                    "type": "tool_call_response",
                    "id": item.call_id,
                    "response": clip(item.text, limit),
                }
            ],
        }
    return {"role": "user", "parts": [{"type": "text", "content": clip(item.text, limit)}]}


def _within(messages: list[dict[str, Any]], limit: int) -> str:
    """The newest messages that fit in ``limit`` tokens, with a note of those left out."""
    kept: list[dict[str, Any]] = []
    used = 0
    for message in reversed(messages):
        text = json.dumps(message, ensure_ascii=False)
        cost = estimate_tokens(text)
        if kept and used + cost > limit:
            break
        kept.append(message)
        used += cost
    kept.reverse()
    left = len(messages) - len(kept)
    if left:
        note = f"[{left} earlier message(s) not recorded: over the content limit]"
        kept.insert(0, {"role": "user", "parts": [{"type": "text", "content": note}]})
    return json.dumps(kept, ensure_ascii=False)


def input_messages(transcript: Sequence[Item], limit: int) -> str:
    """A request's transcript as ``gen_ai.input.messages`` (JSON)."""
    return _within([_message(i, limit) for i in transcript], limit)


def output_messages(message: AssistantMessage, limit: int) -> str:
    """A response as ``gen_ai.output.messages`` (JSON)."""
    return _within([_message(message, limit)], limit)


def prompt_messages(prompt: str, limit: int) -> str:
    return json.dumps(
        [{"role": "user", "parts": [{"type": "text", "content": clip(prompt, limit)}]}],
        ensure_ascii=False,
    )
