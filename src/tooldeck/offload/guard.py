"""The hard guard: nothing the model receives from one call exceeds the limit.

It cuts only the model's view of a result: it keeps the head and the tail of the text,
says what was cut and whether the rest can be recalled, and records ``{"guarded": ...}``
in ``details``. Each image counts :data:`~tooldeck.offload.view.IMAGE_TOKENS`; images are
kept while they fit in half the limit. The stored copy (if any) is never cut.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ..result import ContentPart, TextPart, ToolResult
from ..tokens import TokenEstimator, prefix_within, suffix_within
from .summary import plural
from .view import IMAGE_TOKENS, View

__all__ = ["NOTICE_TOKENS", "guard", "merge_details"]

NOTICE_TOKENS = 200  # reserved for the guard's notice


def merge_details(details: Any, key: str, value: Any) -> Any:
    if details is None:
        return {key: value}
    if isinstance(details, Mapping):
        return {**details, key: value}
    return {"details": details, key: value}


def guard(
    result: ToolResult, view: View, why: str, *, limit: int, count: TokenEstimator
) -> ToolResult:
    """``result`` cut to at most ``limit`` tokens (returned as is when it fits)."""
    if view.tokens <= limit:
        return result
    image_room = max(0, limit // 2 - NOTICE_TOKENS)
    kept_images = view.images[: image_room // IMAGE_TOKENS]
    if view.images:  # the text of the non-image parts, joined like text() would
        joined = "\n".join(view.texts())
        total_chars, text_tokens = len(joined), count(joined)
        head_src = tail_src = joined
        total_lines = joined.count("\n")
    else:
        total_chars, text_tokens = view.total_chars, view.text_tokens
        window = max(limit * 16, 4_096)
        head_src, tail_src = view.head(window), view.tail(window)
        total_lines = view.count("\n")

    def build(head: str, tail: str) -> ToolResult:
        omitted = total_chars - len(head) - len(tail)
        notice = (
            f"[This tool result was cut to fit the limit of {limit:,} tokens "
            f"for one result: it is about {view.tokens:,} tokens ({total_chars:,} "
            "characters of text"
            + (f", {plural(len(view.images), 'image')}" if view.images else "")
            + f"); shown are the first {len(head):,} and the last {len(tail):,} characters"
            + (f" and {plural(len(kept_images), 'image')}" if view.images else "")
            + (f". {why}" if why else ".")
            + "]"
        )
        body = head + tail
        if omitted > 0:
            lines = max(0, total_lines - head.count("\n") - tail.count("\n"))
            marker = f"[… {plural(omitted, 'character')} ({plural(lines, 'line')}) cut here …]"
            body = f"{head}\n\n{marker}\n\n{tail}"
        info = {
            "original_tokens": view.tokens,
            "shown_tokens": count(head) + count(tail),
            "total_chars": total_chars,
            "shown_chars": len(head) + len(tail),
            "images_dropped": len(view.images) - len(kept_images),
        }
        content: list[ContentPart] = [TextPart(notice + "\n" + body), *kept_images]
        details = merge_details(result.details, "guarded", info)
        return dataclasses.replace(result, content=content, details=details)

    def tokens_of(candidate: ToolResult) -> int:
        return View.of(candidate, count).tokens

    # everything but the kept text (notice, marker, images), with room for the numbers
    # in the notice to grow; the loop below checks the finished view anyway
    frame = tokens_of(build("", "")) + count(f"{total_chars:,}") * 2
    budget = limit - frame - 8
    for _ in range(6):
        if budget <= 0:
            head = tail = ""
        elif text_tokens <= budget:  # only the images were too many
            head, tail = head_src, ""
        else:
            head = head_src[: prefix_within(head_src, budget * 2 // 3, count)]
            room = budget - count(head)
            tail_n = min(suffix_within(tail_src, room, count), total_chars - len(head))
            tail = tail_src[len(tail_src) - tail_n :] if tail_n > 0 else ""
        guarded = build(head, tail)
        excess = tokens_of(guarded) - limit
        if excess <= 0:
            return guarded
        budget -= excess + 4  # the estimate is not exactly additive: try a bit less
    # a pathological estimator: cut the finished text itself
    text = guarded.parts[0].text  # type: ignore[union-attr]
    room = limit - IMAGE_TOKENS * len(kept_images) - 2 * len(kept_images)
    cut = text[: prefix_within(text, max(0, room), count)]
    return dataclasses.replace(guarded, content=[TextPart(cut), *kept_images])
