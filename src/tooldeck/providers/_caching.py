"""Prompt caching, asked for with ``ModelSettings(cache=...)``: one place per provider rule.

Providers cache the longest request prefix they have seen (tools, then instructions, then
the transcript) and bill it at a fraction of the input price; a prefix that changes is
billed in full again. What tooldeck does when ``cache`` is set:

- **Anthropic**: ``cache_control`` breakpoints (``{"type": "ephemeral"}``, the 5-minute
  cache) on the growing transcript (the last block of the last user message, which the
  next step reads back, and of the user message before it, which the previous step
  wrote), on the tool list (its last eager entry: deferred tools stay out of the
  prefix) and on the system prompt, in that order of priority and never more than the
  API's limit of 4 per request, counting breakpoints already set (``ModelSettings.extra``);
- **OpenAI** (Responses and Chat Completions, also on Azure): ``prompt_cache_key``, the
  string given, or for ``cache=True`` a key made from the model and the instructions, so
  every step of a session (and every session of the same agent) lands on the same cache;
- **every provider**: tools keep the position they were first sent at (:class:`ToolOrder`),
  so a tool that a search finds later is appended after them instead of being inserted
  in catalog order, which would change the prefix from that point on.

Cache reads and writes come back in :class:`~tooldeck.transcript.Usage`
(``cache_read_tokens`` / ``cache_write_tokens``) and in telemetry.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

__all__ = ["MAX_BREAKPOINTS", "ToolOrder", "anthropic_breakpoints", "prompt_cache_key"]

MAX_BREAKPOINTS = 4  # Anthropic's limit of cache_control blocks per request
_NOT_CACHEABLE = frozenset({"thinking", "redacted_thinking"})


def _key(tool: Mapping[str, Any]) -> str:
    function = tool.get("function")  # Chat Completions nests the name
    if isinstance(function, Mapping) and function.get("name"):
        return str(function["name"])
    return str(tool.get("name") or tool.get("type") or "")


class ToolOrder:
    """The order tools were first sent in; a tool seen later goes after all of them."""

    def __init__(self) -> None:
        self._seen: dict[str, int] = {}

    def apply(self, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for tool in tools:
            self._seen.setdefault(_key(tool), len(self._seen))
        return sorted(tools, key=lambda t: self._seen[_key(t)])


def prompt_cache_key(cache: bool | str, model: str, instructions: str | None) -> str | None:
    """OpenAI's ``prompt_cache_key`` for the ``cache`` setting (``None``: caching off)."""
    if cache is False:
        return None
    if isinstance(cache, str):
        return cache
    digest = hashlib.sha256(f"{model}\0{instructions or ''}".encode()).hexdigest()
    return f"tooldeck-{digest[:24]}"


def _count(value: Any) -> int:
    if isinstance(value, Mapping):
        return ("cache_control" in value) + sum(_count(v) for v in value.values())
    if isinstance(value, list):
        return sum(_count(v) for v in value)
    return 0


def _last_cacheable(blocks: list[Any]) -> dict[str, Any] | None:
    for block in reversed(blocks):
        if isinstance(block, dict) and block.get("type") not in _NOT_CACHEABLE:
            return block
    return None


def anthropic_breakpoints(body: dict[str, Any]) -> None:
    """Place ``cache_control`` breakpoints in a Messages request body, in place."""
    room = MAX_BREAKPOINTS - _count([body.get("tools"), body.get("system"), body.get("messages")])
    spots: list[dict[str, Any]] = []
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    for message in users:  # one shape for a message whether or not it holds a breakpoint
        if isinstance(message["content"], str):
            message["content"] = [{"type": "text", "text": message["content"]}]
    for message in reversed(users[-2:]):
        block = _last_cacheable(message["content"])
        if block is not None:
            spots.append(block)
    eager = [t for t in body.get("tools", []) if not t.get("defer_loading")]
    if eager:
        spots.append(eager[-1])
    system = body.get("system")
    if isinstance(system, str) and system:
        body["system"] = system = [{"type": "text", "text": system}]
    if isinstance(system, list) and system and isinstance(system[-1], dict):
        spots.append(system[-1])
    for spot in [s for s in spots if "cache_control" not in s][: max(room, 0)]:
        spot["cache_control"] = {"type": "ephemeral"}
