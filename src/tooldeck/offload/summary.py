"""What the model is shown instead of an offloaded result: a summary within a budget.

For JSON (a JSON part, or text holding JSON) its shape, keys, lengths and first items;
for text its head and tail and how much was left out; then the ref id and an example
``recall_tool_result`` call. Everything here reads the frozen text of the result.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..tokens import TokenEstimator, prefix_within
from .view import View

__all__ = ["JSON_PARSE_LIMIT", "clip", "example", "plural", "summarise"]

JSON_PARSE_LIMIT = 8_000_000
"""A result's JSON is parsed for its summary up to this many characters."""

_PREVIEW = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)


def plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def example(ref_id: str, offset: int) -> str:
    return f'recall_tool_result(ref_id="{ref_id}", offset={offset})'


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    return type(value).__name__


def _shape(value: Any, depth: int = 3) -> str:
    """A compact type signature, e.g. ``{items: array(120) of {id: number, ...}}``."""
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        if depth <= 0:
            return f"object({len(value)} keys)"
        keys = list(value)[:12]
        inner = ", ".join(f"{k}: {_shape(value[k], depth - 1)}" for k in keys)
        more = f", … {len(value) - len(keys)} more keys" if len(value) > len(keys) else ""
        return "{" + inner + more + "}"
    if isinstance(value, list | tuple):
        if not value:
            return "array(0)"
        kinds = {_json_type(v) for v in value[:50]}
        first = _shape(value[0], depth - 1) if depth > 0 else _json_type(value[0])
        mixed = f" (mixed: {', '.join(sorted(kinds))})" if len(kinds) > 1 else ""
        return f"array({len(value):,}) of {first}{mixed}"
    if isinstance(value, str):
        return f"string({len(value):,})"
    return _json_type(value)


def _preview(value: Any, limit: int) -> str:
    """Compact JSON of ``value``, cut at ``limit`` characters, without encoding all of it."""
    if isinstance(value, str):
        return clip(_PREVIEW.encode(value[: limit + 1]), limit)
    pieces: list[str] = []
    size = 0
    for piece in _PREVIEW.iterencode(value):
        pieces.append(piece[: limit + 1])
        size += len(pieces[-1])
        if size > limit:
            break
    return clip("".join(pieces), limit)


def _brief(value: Any) -> str:
    if isinstance(value, str):
        return f"string of {plural(len(value), 'character')}: {_preview(value, 120)}"
    if isinstance(value, Mapping):
        keys = ", ".join(str(k) for k in list(value)[:10])
        more = ", …" if len(value) > 10 else ""
        return f"object with {plural(len(value), 'key')} ({keys}{more})"
    if isinstance(value, list | tuple):
        kinds: dict[str, int] = {}
        for item in value[:200]:
            kinds[_json_type(item)] = kinds.get(_json_type(item), 0) + 1
        types = ", ".join(kinds)
        return f"array of {plural(len(value), 'item')}" + (f" ({types})" if types else "")
    return _preview(value, 120)


def _is_list(value: Any) -> bool:
    return isinstance(value, list | tuple) and bool(value)


def _first_items(items: Any, label: str) -> str:
    shown = [f"  {_preview(item, 400)}" for item in list(items[:3])]
    return f"First items of {label}:\n" + "\n".join(shown)


def _json_lines(value: Any) -> list[str]:
    lines = [f"Shape: {clip(_shape(value), 1_500)}"]
    if isinstance(value, Mapping):
        keys = list(value)
        listed = ", ".join(str(k) for k in keys[:60]) + (", …" if len(keys) > 60 else "")
        lines.append(f"Object with {plural(len(keys), 'key')}: {listed}")
        for key in keys[:40]:
            lines.append(f"- {clip(str(key), 80)}: {_brief(value[key])}")
        lines.extend(_first_items(value[k], f"{k}") for k in keys[:5] if _is_list(value[k]))
    elif isinstance(value, list | tuple):
        lines.append(f"Array: {_brief(value)}")
        objects = [v for v in value[:100] if isinstance(v, Mapping)]
        if objects:
            seen: dict[str, None] = {}
            for item in objects:
                seen.update(dict.fromkeys(str(k) for k in item))
            keys = list(seen)
            more = ", …" if len(keys) > 60 else ""
            lines.append(f"Keys of the first items: {', '.join(keys[:60])}{more}")
        lines.append(_first_items(value, "the array"))
    else:
        lines.append(f"Value: {_preview(value, 2_000)}")
    return [line for line in lines if line]


def _take_lines(text: str, max_lines: int, max_chars: int, *, from_end: bool) -> str:
    lines = text.split("\n")
    if from_end:
        lines = lines[-max_lines:]
        if len(text) >= max_chars and len(lines) > 1:
            lines = lines[1:]  # the first may be a cut line
    else:
        lines = lines[:max_lines]
        if len(text) >= max_chars and len(lines) > 1:
            lines = lines[:-1]  # the last may be a cut line
    return "\n".join(clip(line, 400) for line in lines)


def _text_lines(view: View, budget_chars: int) -> list[str]:
    total = view.total_chars
    lines = view.count("\n") + 1
    head_chars = max(200, budget_chars * 6 // 10)
    tail_chars = max(100, budget_chars * 3 // 10)
    head = _take_lines(view.head(head_chars), 40, head_chars, from_end=False)
    tail = _take_lines(view.tail(tail_chars), 20, tail_chars, from_end=True)
    if len(head) + len(tail) >= total:
        return [f"Text: {plural(lines, 'line')}, {plural(total, 'character')}.", head]
    omitted = total - len(head) - len(tail)
    omitted_lines = max(0, lines - head.count("\n") - tail.count("\n") - 1)
    return [
        f"Text: {plural(lines, 'line')}, {plural(total, 'character')}. Beginning:",
        head,
        f"[… {plural(omitted_lines, 'line')} ({plural(omitted, 'character')}) not shown here …]",
        "End:",
        tail,
    ]


def looks_like_json(text: str) -> bool:
    return text[:4_096].lstrip()[:1] in ("{", "[")


def _parse_json(view: View) -> tuple[bool, Any]:
    """The JSON value of a single JSON part, or of a single text part holding JSON."""
    if view.json_text is not None:
        text = view.json_text
    elif len(view.parts) == 1 and view.parts[0]["type"] == "text":
        text = view.segments[0]
        if not looks_like_json(text):
            return False, None
    else:
        return False, None
    if len(text) > JSON_PARSE_LIMIT:
        return False, None
    try:
        return True, json.loads(text)
    except (ValueError, RecursionError):
        return False, None


def _body_lines(view: View, budget_chars: int) -> list[str]:
    is_json, value = _parse_json(view)
    if is_json:
        return ["Summary of the JSON value:", *_json_lines(value)]
    lines = []
    if len(view.parts) > 1:
        kinds = ", ".join(
            f"{p['type']} ({p['end'] - p['start']:,} characters)"
            if p["type"] != "image"
            else "image"
            for p in view.parts[:20]
        )
        lines.append(f"Content parts: {kinds}.")
    elif view.segments and looks_like_json(view.segments[0]):
        lines.append("(Text that looks like JSON; too large to parse for a summary.)")
    return lines + _text_lines(view, max(400, budget_chars))


def _fit_lines(lines: list[str], budget: int, count: TokenEstimator) -> str:
    """The lines, dropping from the end (then clipping) until within ``budget``."""
    if budget <= 0:
        return ""
    text = "\n".join(lines)
    while lines and count(text) > budget:
        if len(lines) > 2:
            lines = lines[:-1]
        else:
            keep = prefix_within(text, budget - 1, count)
            return text[:keep] + "…" if keep else ""
        text = "\n".join(lines)
    return text


def summarise(
    view: View,
    *,
    ref_id: str,
    tool_name: str,
    call_id: str,
    threshold_tokens: int,
    summary_tokens: int,
    count: TokenEstimator,
) -> str:
    """The text shown instead of the stored result: at most about ``summary_tokens``."""
    total_chars = view.total_chars
    budget = max(summary_tokens, 1)
    opening = (
        f"[The result of {tool_name} (call {call_id}) is about "
        f"{view.text_tokens:,} tokens ({total_chars:,} characters), over the "
        f"{threshold_tokens:,}-token limit for one tool result, so it was stored "
        f"in full as {ref_id} and this summary is shown instead.]"
    )
    hint = (
        f"To read the stored result, call recall_tool_result with this ref id, page by "
        f"page: {example(ref_id, 0)} returns the first page, and every page says the "
        f"offset of the next one (offsets count characters of the full text, "
        f"{total_chars:,} in all). Read only what you need."
    )
    if view.images:
        hint += f" Its {plural(len(view.images), 'image')} are shown below."
    fixed = count(opening) + count(hint) + 10
    room = max(0, budget - fixed)
    body = _fit_lines(_body_lines(view, room * 3), room, count)
    return "\n\n".join(x for x in (opening, body, hint) if x)
