"""What a tool returns: :class:`ToolResult` and its content parts.

``content`` is what the model sees; ``details`` is for logs and UIs and is never sent to
the model. Plain return values are wrapped by :meth:`ToolResult.wrap`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from pydantic import BaseModel

__all__ = ["ContentPart", "ImagePart", "JsonPart", "TextPart", "ToolResult"]


@dataclass(frozen=True, slots=True)
class TextPart:
    text: str
    type: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class ImagePart:
    """An image, either inline (``data`` as base64 with ``mime_type``) or by ``url``."""

    data: str | None = None
    mime_type: str = "image/png"
    url: str | None = None
    type: Literal["image"] = "image"

    def __post_init__(self) -> None:
        if (self.data is None) == (self.url is None):
            raise ValueError("ImagePart needs exactly one of data (base64) or url")


@dataclass(frozen=True, slots=True)
class JsonPart:
    """A JSON value; serialised compactly when it is sent as text."""

    value: Any
    type: Literal["json"] = "json"


ContentPart: TypeAlias = TextPart | ImagePart | JsonPart


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)
_PART_TYPES = (TextPart, ImagePart, JsonPart)
_SCALARS = (int, float, bool, dict)


def _dumps(value: Any) -> str:
    return _ENCODER.encode(value)


@dataclass(slots=True)
class ToolResult:
    """The outcome of one tool call.

    - ``content``: for the model; text, or a list of text / image / JSON parts.
    - ``details``: structured data for logs and UIs; never sent to the model.
    - ``events``: presentation events produced while running (progress, previews).
    - ``is_error``: the call failed; the content says why, for the model.
    - ``terminate``: end the turn after the current batch of calls.
    - ``complete_actor_event``: tells a UI that this call completes the actor's event.
    """

    content: str | list[ContentPart] = ""
    details: Any = None
    events: list[Any] = field(default_factory=list)
    is_error: bool = False
    terminate: bool = False
    complete_actor_event: bool = False

    @classmethod
    def wrap(cls, value: Any) -> ToolResult:
        """Turn a plain return value into a result.

        ``ToolResult`` passes through; ``str`` becomes text; a Pydantic model, ``dict``,
        ``list`` or other JSON value becomes a JSON part; a content part (or a list of
        them) is used as is; ``None`` becomes empty text.
        """
        kind = type(value)
        if kind is ToolResult:
            return value  # type: ignore[no-any-return]
        if kind is str:
            return cls(content=value)
        if kind in _SCALARS:  # the common plain JSON values, before any ABC check
            return cls(content=[JsonPart(value)])
        if isinstance(value, ToolResult):
            return value
        if isinstance(value, str):
            return cls(content=value)
        if value is None:
            return cls(content="")
        if isinstance(value, BaseModel):
            return cls(content=[JsonPart(value.model_dump(mode="json"))])
        if isinstance(value, _PART_TYPES):
            return cls(content=[value])
        if isinstance(value, list) and value and all(isinstance(p, _PART_TYPES) for p in value):
            return cls(content=list(value))
        return cls(content=[JsonPart(value)])

    @classmethod
    def error(cls, message: str, *, details: Any = None) -> ToolResult:
        return cls(content=message, details=details, is_error=True)

    @property
    def parts(self) -> Sequence[ContentPart]:
        """The content as a list of parts (text content becomes one text part)."""
        if isinstance(self.content, str):
            return [TextPart(self.content)]
        return self.content

    def text(self) -> str:
        """The model-facing content as one string (JSON parts serialised, images noted)."""
        content = self.content
        if isinstance(content, str):
            return content
        if len(content) == 1:
            part = content[0]
            if isinstance(part, TextPart):
                return part.text
            if isinstance(part, JsonPart):
                return _dumps(part.value)
        pieces: list[str] = []
        for part in content:
            if isinstance(part, TextPart):
                pieces.append(part.text)
            elif isinstance(part, JsonPart):
                pieces.append(_dumps(part.value))
            else:
                pieces.append(f"[image {part.mime_type}]")
        return "\n".join(pieces)
