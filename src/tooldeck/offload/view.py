"""The model-facing view of a frozen result, as the offload store measures and cuts it.

A :class:`View` is the result's text (exactly :meth:`ToolResult.text`) as the texts of
its parts, never joined (it may be 50 MB), with each part's span in that text, its images
and its token count. Results are frozen when they are made, so the view only reads
text that already exists: nothing is serialised here.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..result import ImagePart, JsonPart, TextPart, ToolResult
from ..tokens import TokenEstimator

__all__ = ["SMALL_CHARS", "View", "is_small"]

IMAGE_TOKENS = 1_600
"""What one image part is counted as (about a 1-megapixel image for current models)."""

SMALL_CHARS = 65_536


@dataclass(slots=True)
class View:
    """A result's model-facing text as segments, one per part and separator."""

    segments: list[str]  # concatenated, they are exactly ToolResult.text()
    parts: list[dict[str, Any]]  # each part with its [start, end) span in that text
    images: list[ImagePart]
    ranges: list[tuple[int, int]]  # each part's slice of ``segments``
    json_text: str | None = None  # a single JSON part: its text
    text_tokens: int = 0

    @classmethod
    def of(cls, result: ToolResult, count: TokenEstimator) -> View:
        parts = result.parts
        segments: list[str] = []
        described: list[dict[str, Any]] = []
        images: list[ImagePart] = []
        ranges: list[tuple[int, int]] = []
        position = 0
        text_tokens = 0
        for index, part in enumerate(parts):
            if index:
                segments.append("\n")
                position += 1
            entry: dict[str, Any]
            if isinstance(part, TextPart):
                text, entry = part.text, {"type": "text"}
            elif isinstance(part, JsonPart):
                text, entry = part.text, {"type": "json"}
            else:
                text = f"[image {part.mime_type}]"
                entry = {"type": "image", "mime_type": part.mime_type}
                entry.update({"data": part.data} if part.data is not None else {"url": part.url})
                images.append(part)
            if not isinstance(part, ImagePart):
                text_tokens += count(text)
            entry.update(start=position, end=position + len(text))
            ranges.append((len(segments), len(segments) + 1))
            segments.append(text)
            described.append(entry)
            position += len(text)
        if len(parts) > 1:
            text_tokens += count("\n") * (len(parts) - 1)
        view = cls(segments, described, images, ranges, text_tokens=text_tokens)
        if len(parts) == 1 and isinstance(parts[0], JsonPart):
            view.json_text = parts[0].text
        return view

    def texts(self) -> list[str]:
        """The text of every part that is not an image, in order."""
        return [
            "".join(self.segments[a:b])
            for (a, b), p in zip(self.ranges, self.parts, strict=True)
            if p["type"] != "image"
        ]

    @property
    def total_chars(self) -> int:
        return sum(len(s) for s in self.segments)

    @property
    def tokens(self) -> int:
        return self.text_tokens + IMAGE_TOKENS * len(self.images)

    def head(self, chars: int) -> str:
        out: list[str] = []
        for seg in self.segments:
            if chars <= 0:
                break
            out.append(seg[:chars])
            chars -= len(out[-1])
        return "".join(out)

    def tail(self, chars: int) -> str:
        out: list[str] = []
        for seg in reversed(self.segments):
            if chars <= 0:
                break
            piece = seg[-chars:] if chars < len(seg) else seg
            out.append(piece)
            chars -= len(piece)
        return "".join(reversed(out))

    def count(self, sub: str) -> int:
        return sum(seg.count(sub) for seg in self.segments)

    def chunks(self, size: int) -> Iterator[str]:
        """The text in pieces of exactly ``size`` characters (the last may be shorter)."""
        pending: list[str] = []
        held = 0
        for seg in self.segments:
            start = 0
            while start < len(seg):
                take = min(size - held, len(seg) - start)
                pending.append(seg[start : start + take])
                held += take
                start += take
                if held == size:
                    yield "".join(pending)
                    pending, held = [], 0
        if held:
            yield "".join(pending)


def is_small(result: ToolResult) -> bool:
    """Cheap enough to measure on the event loop: short text."""
    total = 0
    for part in result.parts:
        if not isinstance(part, ImagePart):
            total += len(part.text)
            if total > SMALL_CHARS:
                return False
    return True
