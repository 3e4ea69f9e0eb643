"""What a tool returns: :class:`ToolResult` and its content parts, frozen at creation.

``content`` is what the model sees; ``details`` is for logs and UIs and is never sent to
the model. Plain return values are wrapped by :meth:`ToolResult.wrap`.

**Freezing.** A result is fixed the moment it is made, which is the moment the tool
returns: a JSON value is serialised into its text at once (:class:`JsonPart` keeps only
that text), ``content`` becomes a tuple of immutable parts, ``details`` becomes a private
JSON copy, and the model-facing text is computed once. Every later reader (the
transcript, every provider adapter on every request, persistence, offload) sees exactly
that frozen form; nothing ever calls back into the objects the tool returned, so a tool
that later changes them cannot change what the model was told.

What can be encoded: JSON values; any other finite real number (a :class:`numbers.Real`
that is not a ``float``: ``fractions.Fraction``, numpy scalars, ``mpmath.mpf``...) as the
JSON number it stands for (an integral one, :class:`numbers.Integral`, exactly; others as
``float(value)``, the double every JSON reader takes the number for); and what pydantic
turns into JSON in JSON mode (datetime / date / time / timedelta as ISO 8601, UUID /
Decimal / Path as text, Enum as its value, set / frozenset / tuple as arrays, UTF-8 bytes
as text, dataclasses and Pydantic models as objects). A real number with no finite
double (a non-finite one, or a ``Fraction`` beyond the double range) is handed to
pydantic as before. Anything else (a dict key that is not a string, number,
bool or None; an arbitrary object; bytes that are not UTF-8; a cycle) raises
:class:`ResultEncodingError` where the result is made, so that call gets an error output
naming the cause, and the session stays usable. Text that UTF-8 cannot carry (lone
surrogate code points) has them replaced by U+FFFD, since no provider could be sent it.

``None`` returned by a tool is rendered as ``null`` (a JSON part), so the model can tell
"returned nothing" from "returned an empty string" (which stays empty).
"""

from __future__ import annotations

import json
import math
import numbers
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TypeAlias

import pydantic_core
from pydantic import BaseModel

from .errors import ResultEncodingError

__all__ = ["encode_json"]


def _jsonable(value: Any) -> Any:
    # json's `default` hook: only called for values json cannot encode itself (so never
    # for bool, int, float or their subclasses)
    if isinstance(value, numbers.Real):
        number = _real_number(value)
        if number is not None:
            return number
    try:
        return pydantic_core.to_jsonable_python(value)
    except (pydantic_core.PydanticSerializationError, UnicodeDecodeError) as exc:
        raise ResultEncodingError(
            f"{type(value).__name__} value cannot be encoded as JSON ({exc})"
        ) from None


def _real_number(value: numbers.Real) -> int | float | None:
    """The JSON number a real number that is not an int or a float stands for: an
    integral one exactly, any other as its double; ``None`` when it has no finite double
    (or its own conversion fails), which leaves it to pydantic, as before."""
    try:
        if isinstance(value, numbers.Integral):
            return int(value)
        number = float(value)
    except Exception:  # a type's own __int__ / __float__ may raise anything
        return None
    return number if math.isfinite(number) else None


_SURROGATE = re.compile("[\ud800-\udfff]")
_encode_str = json.encoder.encode_basestring  # the C function json uses (no ASCII escaping)
_make_encoder = getattr(json.encoder, "c_make_encoder", None)
_local = threading.local()  # one encoder per thread: its cycle markers are its own


def _new_encoder() -> Any:
    if _make_encoder is None:  # pragma: no cover - CPython always has the C encoder
        encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=_jsonable)
        made: Any = lambda value, _level: (encoder.encode(value),)  # noqa: E731
    else:
        made = _make_encoder({}, _jsonable, _encode_str, None, ":", ",", False, False, True)
    _local.encoder = made
    return made


def _utf8_safe(text: str) -> str:
    """``text`` with lone surrogates (which UTF-8 cannot carry) replaced by U+FFFD."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


def encode_json(value: Any) -> str:
    """``value`` as compact JSON text, exactly as a result's JSON part is rendered.

    The same text ``json.dumps(value, ensure_ascii=False, separators=(",", ":"))`` gives
    for JSON values. Raises :class:`ResultEncodingError` (a ``TypeError``) naming the
    cause when the value cannot be encoded (see the module docstring).
    """
    kind = type(value)
    if kind is str:
        return _encode_str(value)
    if kind is int:
        return int.__repr__(value)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if kind is float and value - value == 0.0:  # finite (json spells nan/inf itself)
        return float.__repr__(value)
    encoder = _local.__dict__.get("encoder") or _new_encoder()
    try:
        return "".join(encoder(value, 0))
    except ResultEncodingError:
        _local.encoder = None  # its cycle markers may be left half-filled
        raise
    except (TypeError, ValueError, RecursionError) as exc:
        _local.encoder = None
        raise ResultEncodingError(str(exc) or type(exc).__name__) from None
    except Exception as exc:  # a value's own code (a pydantic computed field...) raised
        _local.encoder = None
        raise ResultEncodingError(f"encoding it raised {type(exc).__name__}: {exc}") from None


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


@dataclass(frozen=True, slots=True, init=False)
class JsonPart:
    """A JSON value, serialised the moment the part is made.

    ``JsonPart(value)`` encodes ``value`` at once (raising :class:`ResultEncodingError`
    if it cannot be encoded) and keeps only the text: ``text`` is what the model gets,
    and ``value`` decodes a fresh copy of it on every access, so nobody can change the
    part afterwards. :meth:`from_text` wraps text that is already JSON.
    """

    text: str
    type: ClassVar[Literal["json"]] = "json"

    def __init__(self, value: Any) -> None:
        object.__setattr__(self, "text", _utf8_safe(encode_json(value)))

    @classmethod
    def from_text(cls, text: str) -> JsonPart:
        """A part for ``text``, which must already be JSON (checked)."""
        json.loads(text)
        part = object.__new__(cls)
        object.__setattr__(part, "text", _utf8_safe(text))
        return part

    @property
    def value(self) -> Any:
        """A fresh decoded copy of the value (changing it changes nothing here)."""
        return json.loads(self.text)


ContentPart: TypeAlias = TextPart | ImagePart | JsonPart

_PART_TYPES = (TextPart, ImagePart, JsonPart)
_JSON_KINDS = (int, float, bool, dict, list)


def _freeze_parts(content: Any) -> str | tuple[ContentPart, ...]:
    if type(content) is str:
        return _utf8_safe(content)
    if isinstance(content, str):
        return _utf8_safe(str(content))
    if isinstance(content, _PART_TYPES):
        content = (content,)
    if not isinstance(content, Sequence):
        raise ResultEncodingError(
            "ToolResult content must be text or a list of TextPart / ImagePart / JsonPart, "
            f"got {type(content).__name__}"
        )
    parts: list[ContentPart] = []
    for part in content:
        if type(part) is TextPart:
            text = _utf8_safe(part.text) if isinstance(part.text, str) else None
            if text is None:
                raise ResultEncodingError(
                    f"TextPart.text must be a str, got {type(part.text).__name__}"
                )
            parts.append(part if text is part.text else TextPart(text))
        elif isinstance(part, _PART_TYPES):
            parts.append(part)
        else:
            raise ResultEncodingError(
                "ToolResult content parts must be TextPart, ImagePart or JsonPart, "
                f"got {type(part).__name__}"
            )
    return tuple(parts)


def _render(content: str | tuple[ContentPart, ...]) -> str:
    if isinstance(content, str):
        return content
    if len(content) == 1:
        part = content[0]
        if not isinstance(part, ImagePart):
            return part.text
    return "\n".join(
        f"[image {part.mime_type}]" if isinstance(part, ImagePart) else part.text
        for part in content
    )


def _freeze_details(details: Any) -> Any:
    if details is None:
        return None
    kind = type(details)
    if kind is str or kind is int or kind is bool:
        return details
    return json.loads(encode_json(details))


@dataclass(frozen=True)
class ToolResult:
    """The outcome of one tool call, frozen when it is made (see the module docstring).

    - ``content``: for the model; text, or parts (text / image / JSON). Given as a list,
      it is kept as a tuple.
    - ``details``: structured data for logs and UIs, kept as a private JSON copy; never
      sent to the model.
    - ``events``: presentation events produced while running (progress, previews).
    - ``is_error``: the call failed; the content says why, for the model.
    - ``terminate``: end the turn after the current batch of calls.
    - ``complete_actor_event``: tells a UI that this call completes the actor's event.

    Change a result with :func:`dataclasses.replace`, which makes (and freezes) a new one.
    """

    content: str | Sequence[ContentPart] = ""
    details: Any = None
    events: Sequence[Any] = ()
    is_error: bool = False
    terminate: bool = False
    complete_actor_event: bool = False
    _text: str = field(default="", init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        content = self.content
        setattr_ = object.__setattr__
        if type(content) is tuple and len(content) == 1 and type(content[0]) is JsonPart:
            setattr_(self, "_text", content[0].text)  # the common case: one frozen JSON part
        else:
            content = _freeze_parts(content)
            setattr_(self, "content", content)
            setattr_(self, "_text", _render(content))
        details = self.details
        if details is not None:
            setattr_(self, "details", _freeze_details(details))
        events = self.events
        if type(events) is not tuple:
            setattr_(self, "events", tuple(events))

    @classmethod
    def wrap(cls, value: Any) -> ToolResult:
        """Turn a plain return value into a (frozen) result.

        ``ToolResult`` passes through; ``str`` becomes text; a Pydantic model, ``dict``,
        ``list``, ``None`` or other JSON value becomes a JSON part (``None`` is ``null``);
        a content part (or a list of them) is used as is. Raises
        :class:`ResultEncodingError` for a value that cannot be encoded.
        """
        kind = type(value)
        if kind is ToolResult:
            return value  # type: ignore[no-any-return]
        if cls is ToolResult:  # the common plain values, without the generic checks
            if kind is int:
                return _json_result(repr(value))
            if kind is str:
                return _made(_utf8_safe(value))
            if kind in _JSON_KINDS and not (kind is list and _all_parts(value)):
                return _json_result(_utf8_safe(encode_json(value)))
            if value is None:
                return _json_result("null")
        if kind is str:
            return cls(value)
        if kind in _JSON_KINDS:  # the other plain JSON values, before any ABC check
            if kind is list and _all_parts(value):
                return cls(tuple(value))
            return cls((JsonPart(value),))
        if isinstance(value, ToolResult):
            return value
        if isinstance(value, str):
            return cls(str(value))
        if isinstance(value, BaseModel):
            return cls((JsonPart(value.model_dump(mode="json")),))
        if isinstance(value, _PART_TYPES):
            return cls((value,))
        if (
            isinstance(value, list | tuple)
            and value
            and all(isinstance(p, _PART_TYPES) for p in value)
        ):
            return cls(tuple(value))
        return cls((JsonPart(value),))

    @classmethod
    def error(cls, message: str, *, details: Any = None) -> ToolResult:
        return cls(message, details, is_error=True)

    @property
    def parts(self) -> tuple[ContentPart, ...]:
        """The content as parts (text content becomes one text part)."""
        content = self.content
        if isinstance(content, str):
            return (TextPart(content),)
        return content  # type: ignore[return-value]

    def text(self) -> str:
        """The model-facing content as one string (JSON parts as their text, images noted).

        Computed once, when the result was made.
        """
        return self._text


_new = object.__new__
_set = object.__setattr__


def _all_parts(value: list[Any]) -> bool:
    return bool(value) and all(isinstance(p, _PART_TYPES) for p in value)


def _json_result(text: str) -> ToolResult:
    """``ToolResult((JsonPart(value),))`` for ``text``, the value's JSON (UTF-8 safe)."""
    part: JsonPart = _new(JsonPart)
    _set(part, "text", text)
    result: ToolResult = _new(ToolResult)
    _set(result, "__dict__", {"content": (part,), "_text": text})  # see _made
    return result


def _made(text: str) -> ToolResult:
    """``ToolResult(text)`` for UTF-8 safe ``text``, without the dataclass's generic
    ``__init__`` and checks (the hot path): its ``__dict__`` set at once, instead of
    seven frozen attribute sets. It holds ``content`` and ``_text`` only: the other
    fields keep their defaults, which a dataclass without ``__slots__`` (``ToolResult``
    has none, for this) keeps as class attributes, so reading, comparing, hashing,
    copying, pickling and ``dataclasses.replace`` see them as set."""
    result: ToolResult = _new(ToolResult)
    _set(result, "__dict__", {"content": text, "_text": text})
    return result


def made_result(
    content: str | tuple[ContentPart, ...], text: str, details: Any, is_error: bool
) -> ToolResult:
    """``ToolResult(content, details, is_error=is_error)``, made as :func:`_made` makes
    one, for a caller that hands over what it made itself and keeps nothing of: UTF-8
    safe ``content`` (text, or a tuple of frozen parts), ``text`` its rendering (what
    :meth:`ToolResult.text` gives), and ``details`` a fresh JSON value (plain dicts,
    lists, strings, numbers; no object anyone else holds), so no private copy is made.
    """
    result: ToolResult = _new(ToolResult)
    _set(
        result,
        "__dict__",
        {"content": content, "_text": text, "details": details, "is_error": is_error},
    )
    return result
