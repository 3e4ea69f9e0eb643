"""Large tool results: offload to disk, recall by reference, and a hard guard.

One :class:`OffloadStore` per session::

    store = OffloadStore(home, session_id, events=bus)
    turn = TurnContext(session_id, home, status_sources={"offload": store.status_source})
    session = Session(
        model,
        tools=lambda ctx: assemble(ctx, [my_creator, store.creator]),
        session_id=session_id, turn=turn, events=bus, result_hooks=[store.hook],
    )

What :meth:`OffloadStore.hook` does to every executed call's result:

1. Its model-facing text (exactly :meth:`ToolResult.text`) is measured with
   :func:`tooldeck.tokens.estimate_tokens` (or the store's ``estimator``). Over
   ``threshold_tokens`` (default 15,000; ``0`` turns offloading off) the complete original
   is written to ``<home>/.tooldeck/tool-offload/<session>/<ref_id>.json`` and the model
   gets, instead of the text, a summary of at most ``summary_tokens`` (default 1,500):
   for JSON (a JSON part, or text holding JSON up to 2 M characters) its shape, keys,
   lengths and first items; for text its head and tail and how many lines and characters
   were left out; then the ref id and an example ``recall_tool_result`` call. Image parts
   stay. ``details`` keep the original details plus ``{"offloaded": {ref_id,
   original_tokens, summary_tokens}}`` (non-dict details move under ``"details"``), and a
   :class:`ToolResultOffloaded` event is emitted on ``events``.
2. Whatever comes out of step 1 goes through the guard: nothing the model receives from
   one call exceeds ``guard_tokens`` (default 25,000), also when offloading is off, failed,
   or the result belongs to another session (then it is not stored). The guard cuts only
   the model's view: it keeps the head and the tail, says in the text what was cut and
   whether the rest can be recalled, and records ``{"guarded": ...}`` in ``details``. The
   stored copy is never cut. Each image counts :data:`IMAGE_TOKENS`; images are kept while
   they fit in half the guard.

Large results are measured and written in a worker thread. A result that cannot even be
rendered (a JSON part with a cycle) becomes an error output instead of escaping the hook.

The stored file is never partial: it is written to a hidden temporary file in the same
directory, flushed, fsynced and moved into place with ``os.replace``; a failed or killed
write leaves no ``ref_*.json`` (a stray hidden ``.ref_*.tmp`` from a killed process is
not a ref and is removed by :meth:`~OffloadStore.expire` after an hour). The file is one
JSON document: metadata (tool, call id, SHA-256 of the canonical JSON arguments, time,
is_error, sizes) on the first line, the parts (their spans, image data) on the second,
then the text as an array of 65,536-character strings, one per line, so that a page is
read without loading the rest. :meth:`~OffloadStore.load` rebuilds the whole result.

Ref ids are made here (``ref_`` + 16 random hex digits), checked against
:data:`REF_PATTERN` before they come near a path, and looked up only in this session's
directory with symlinks refused, so a session reads only its own results; another
session's ref is "not found". :meth:`~OffloadStore.expire` removes this session's refs
older than ``ttl_seconds`` (default 4 h, by file time on the store's clock; a recall of an
expired ref removes it too); :meth:`~OffloadStore.cleanup` removes this session's
directory. Neither touches another session.

``recall_tool_result(ref_id, offset=0, limit=None)`` pages through the stored text by
**character offsets** into exactly the text the model would have seen. A page holds at
most ``limit`` characters (default ``page_tokens * 4``) and at most ``page_tokens`` tokens
(default 8,000, always under the guard together with its header line), ends at a line
break when it was cut for size, and its header gives the offset of the next page;
concatenating the pages gives the original text exactly. Recall results carry
``details["no_offload"] = True`` and are never offloaded again. The store's ``creator``
offers the recall tool whenever this session has stored results, so with a per-step
tools factory it is callable from the step after the first offload.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import re
import secrets
import shutil
import stat
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import anyio.to_thread
from pydantic import BaseModel, ConfigDict, Field

from .assembly import TurnContext
from .context import ToolContext
from .events import Event, EventBus
from .result import ContentPart, ImagePart, JsonPart, TextPart, ToolResult
from .tokens import TokenEstimator, estimate_tokens, prefix_within, suffix_within
from .tool import Tool
from .transcript import ToolCall

__all__ = [
    "IMAGE_TOKENS",
    "NO_OFFLOAD",
    "RECALL_TOOL_NAME",
    "REF_PATTERN",
    "OffloadStore",
    "OffloadedRef",
    "Page",
    "RecallError",
    "ToolResultOffloaded",
]

_log = logging.getLogger("tooldeck.offload")

REF_PATTERN = re.compile(r"ref_[0-9a-f]{16}")
"""Every ref id matches this, and nothing else is ever looked up."""
_REF_FILE = re.compile(r"(ref_[0-9a-f]{16})\.json")
RECALL_TOOL_NAME = "recall_tool_result"
NO_OFFLOAD = "no_offload"
"""A ``details`` key: a result whose details map it to ``True`` is never offloaded."""
IMAGE_TOKENS = 1_600
"""What one image part is counted as (about a 1-megapixel image for current models)."""

FORMAT = "tooldeck.offload/1"
_CHUNK_CHARS = 65_536  # characters per stored text line
_JSON_PARSE_LIMIT = 2_000_000  # text holding JSON is parsed for a summary up to this size
_RECALL_HEADER_TOKENS = 120  # reserved for a recall page's header line
_NOTICE_TOKENS = 200  # reserved for the guard's notice
_TEMP_MAX_AGE = 3_600.0  # a hidden temp file older than this is debris of a crashed write
_SAFE_SESSION = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,99}")


class RecallError(Exception):
    """A recall that cannot be served; the message is written for the model."""


@dataclass(frozen=True, slots=True)
class ToolResultOffloaded(Event):
    """A tool result was stored on disk and the model got a summary instead."""

    type: ClassVar[str] = "TOOL_RESULT_OFFLOADED"
    tool_name: str
    call_id: str
    ref_id: str
    original_tokens: int
    summary_tokens: int


@dataclass(frozen=True, slots=True)
class OffloadedRef:
    """What the store knows about one stored result (from its first line)."""

    ref_id: str
    tool_name: str
    call_id: str
    created: float
    original_tokens: int
    summary_tokens: int
    total_chars: int
    is_error: bool
    size_bytes: int


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a stored result: ``text`` is characters ``offset`` to ``end``."""

    ref_id: str
    offset: int
    end: int
    total_chars: int
    text: str
    tokens: int

    @property
    def eof(self) -> bool:
        return self.end >= self.total_chars

    @property
    def next_offset(self) -> int | None:
        return None if self.eof else self.end


class _RecallParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ref_id: str = Field(
        description="The ref id named in the notice of the stored result, "
        "e.g. ref_0123456789abcdef."
    )
    offset: int = Field(
        0,
        ge=0,
        description="Character offset to start reading at: 0 for the beginning, then the "
        "next_offset given at the top of the previous page.",
    )
    limit: int | None = Field(
        None,
        ge=1,
        description="At most this many characters (default: one page). A page is also "
        "cut to stay within the per-result token limit.",
    )


# -- the model-facing view of a result ----------------------------------------------------


def _dumps(value: Any) -> str:
    # exactly how ToolResult.text() serialises a JSON part
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


_BATCH = 1_000  # items per json.dumps call when a big container is encoded in pieces


def _is_big(item: Any) -> bool:
    if isinstance(item, str):
        return len(item) > _CHUNK_CHARS
    return isinstance(item, dict | list | tuple) and len(item) > _BATCH


def _json_pieces(value: Any, depth: int = 0) -> Iterator[str]:
    """Exactly ``_dumps(value)``, in pieces, so a 50 MB value is never encoded in one go.

    ``json.dumps`` of a huge value briefly holds about twice its output. Here the top
    three levels are walked: small items are encoded a batch at a time, big ones (long
    strings, containers of more than ``_BATCH`` items) piece by piece. Dicts whose keys
    are not all strings (JSON would convert them) are left to ``json.dumps``.
    """
    if depth >= 3:
        yield _dumps(value)
    elif isinstance(value, str) and len(value) > _CHUNK_CHARS:
        yield '"'
        for start in range(0, len(value), _CHUNK_CHARS):  # JSON escapes per character
            yield _dumps(value[start : start + _CHUNK_CHARS])[1:-1]
        yield '"'
    elif isinstance(value, dict) and all(type(k) is str for k in value):
        yield "{"
        pending: dict[str, Any] = {}
        comma = ""
        for key, item in value.items():
            big = _is_big(item)
            if pending and (big or len(pending) >= _BATCH):
                yield comma + _dumps(pending)[1:-1]
                pending, comma = {}, ","
            if big:
                yield comma + _dumps(key) + ":"
                yield from _json_pieces(item, depth + 1)
                comma = ","
            else:
                pending[key] = item
        if pending:
            yield comma + _dumps(pending)[1:-1]
        yield "}"
    elif isinstance(value, list | tuple):
        yield "["
        batch: list[Any] = []
        comma = ""
        for item in value:
            big = _is_big(item)
            if batch and (big or len(batch) >= _BATCH):
                yield comma + _dumps(batch)[1:-1]
                batch, comma = [], ","
            if big:
                yield comma
                yield from _json_pieces(item, depth + 1)
                comma = ","
            else:
                batch.append(item)
        if batch:
            yield comma + _dumps(batch)[1:-1]
        yield "]"
    else:
        yield _dumps(value)


def _json_chunks(value: Any, size: int = _CHUNK_CHARS) -> list[str]:
    """``_dumps(value)`` as strings of about ``size`` characters (concatenated: exact)."""
    chunks: list[str] = []
    pending: list[str] = []
    held = 0
    for piece in _json_pieces(value):
        pending.append(piece)
        held += len(piece)
        if held >= size:
            chunks.append("".join(pending))
            pending, held = [], 0
    if pending or not chunks:
        chunks.append("".join(pending))
    return chunks


@dataclass(slots=True)
class _View:
    """A result's model-facing text as segments (never joined: it may be 50 MB)."""

    segments: list[str]  # concatenated, they are exactly ToolResult.text()
    parts: list[dict[str, Any]]  # each part with its [start, end) span in that text
    images: list[ImagePart]
    ranges: list[tuple[int, int]]  # each part's slice of ``segments``
    json_value: Any = None
    has_json: bool = False  # a single JSON part: json_value is its value
    text_tokens: int = 0

    @classmethod
    def of(cls, result: ToolResult, count: TokenEstimator) -> _View:
        content = result.content
        parts: Sequence[ContentPart] = [TextPart(content)] if isinstance(content, str) else content
        segments: list[str] = []
        described: list[dict[str, Any]] = []
        images: list[ImagePart] = []
        ranges: list[tuple[int, int]] = []
        position = 0
        for index, part in enumerate(parts):
            if index:
                segments.append("\n")
                position += 1
            entry: dict[str, Any]
            if isinstance(part, TextPart):
                texts, entry = [part.text], {"type": "text"}
            elif isinstance(part, JsonPart):
                texts, entry = _json_chunks(part.value), {"type": "json"}
            else:
                texts = [f"[image {part.mime_type}]"]
                entry = {"type": "image", "mime_type": part.mime_type}
                entry.update({"data": part.data} if part.data is not None else {"url": part.url})
                images.append(part)
            length = sum(len(t) for t in texts)
            entry.update(start=position, end=position + length)
            ranges.append((len(segments), len(segments) + len(texts)))
            segments.extend(texts)
            described.append(entry)
            position += length
        view = cls(segments, described, images, ranges)
        if len(parts) == 1 and isinstance(parts[0], JsonPart):
            view.json_value, view.has_json = parts[0].value, True
        separators = count("\n") * (len(parts) - 1) if len(parts) > 1 else 0
        view.text_tokens = separators + sum(
            count(segments[i])
            for (a, b), p in zip(ranges, described, strict=True)
            if p["type"] != "image"
            for i in range(a, b)
        )
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


# -- summaries -----------------------------------------------------------------------


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


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


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


_PREVIEW = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)


def _preview(value: Any, limit: int) -> str:
    """Compact JSON of ``value``, cut at ``limit`` characters, without encoding all of it."""
    if isinstance(value, str):
        return _clip(_dumps(value[: limit + 1]), limit)
    pieces: list[str] = []
    size = 0
    for piece in _PREVIEW.iterencode(value):
        pieces.append(piece[: limit + 1])
        size += len(pieces[-1])
        if size > limit:
            break
    return _clip("".join(pieces), limit)


def _brief(value: Any) -> str:
    if isinstance(value, str):
        return f"string of {_plural(len(value), 'character')}: {_preview(value, 120)}"
    if isinstance(value, Mapping):
        keys = ", ".join(str(k) for k in list(value)[:10])
        more = ", …" if len(value) > 10 else ""
        return f"object with {_plural(len(value), 'key')} ({keys}{more})"
    if isinstance(value, list | tuple):
        kinds: dict[str, int] = {}
        for item in value[:200]:
            kinds[_json_type(item)] = kinds.get(_json_type(item), 0) + 1
        types = ", ".join(kinds)
        return f"array of {_plural(len(value), 'item')}" + (f" ({types})" if types else "")
    return _preview(value, 120)


def _json_lines(value: Any) -> list[str]:
    lines = [f"Shape: {_clip(_shape(value), 1_500)}"]
    if isinstance(value, Mapping):
        keys = list(value)
        listed = ", ".join(str(k) for k in keys[:60]) + (", …" if len(keys) > 60 else "")
        lines.append(f"Object with {_plural(len(keys), 'key')}: {listed}")
        for key in keys[:40]:
            lines.append(f"- {_clip(str(key), 80)}: {_brief(value[key])}")
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


def _is_list(value: Any) -> bool:
    return isinstance(value, list | tuple) and bool(value)


def _first_items(items: Any, label: str) -> str:
    shown = [f"  {_preview(item, 400)}" for item in list(items[:3])]
    return f"First items of {label}:\n" + "\n".join(shown)


def _text_lines(view: _View, budget_chars: int) -> list[str]:
    total = view.total_chars
    lines = view.count("\n") + 1
    head_chars = max(200, budget_chars * 6 // 10)
    tail_chars = max(100, budget_chars * 3 // 10)
    head = _take_lines(view.head(head_chars), 40, head_chars, from_end=False)
    tail = _take_lines(view.tail(tail_chars), 20, tail_chars, from_end=True)
    if len(head) + len(tail) >= total:
        return [f"Text: {_plural(lines, 'line')}, {_plural(total, 'character')}.", head]
    omitted = total - len(head) - len(tail)
    omitted_lines = max(0, lines - head.count("\n") - tail.count("\n") - 1)
    return [
        f"Text: {_plural(lines, 'line')}, {_plural(total, 'character')}. Beginning:",
        head,
        f"[… {_plural(omitted_lines, 'line')} ({_plural(omitted, 'character')}) not shown here …]",
        "End:",
        tail,
    ]


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
    return "\n".join(_clip(line, 400) for line in lines)


def _looks_like_json(text: str) -> bool:
    return text[:4_096].lstrip()[:1] in ("{", "[")


def _parse_json_text(view: _View) -> tuple[bool, Any]:
    """A single text part that holds JSON (and is small enough to parse) as a value."""
    if view.has_json:
        return True, view.json_value
    if len(view.parts) != 1 or view.parts[0]["type"] != "text":
        return False, None
    text = view.segments[0]
    if len(text) > _JSON_PARSE_LIMIT or not _looks_like_json(text):
        return False, None
    try:
        return True, json.loads(text)
    except ValueError:
        return False, None


_SMALL_CHARS = 65_536


def _is_small(result: ToolResult) -> bool:
    """Cheap enough to measure on the event loop: short text, no JSON to serialise."""
    content = result.content
    if isinstance(content, str):
        return len(content) <= _SMALL_CHARS
    total = 0
    for part in content:
        if isinstance(part, JsonPart):
            return False
        if isinstance(part, TextPart):
            total += len(part.text)
    return total <= _SMALL_CHARS


# -- small helpers -------------------------------------------------------------------


def _merge_details(details: Any, key: str, value: Any) -> Any:
    if details is None:
        return {key: value}
    if isinstance(details, Mapping):
        return {**details, key: value}
    return {"details": details, key: value}


def _arguments_digest(arguments: str | Mapping[str, Any]) -> str:
    """SHA-256 of the call's arguments as canonical JSON (raw text if not JSON).

    Canonical: keys sorted, no whitespace, UTF-8 with non-ASCII characters unescaped.
    """
    value: Any = arguments
    if isinstance(arguments, str):
        try:
            value = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return hashlib.sha256(arguments.encode("utf-8", "surrogatepass")).hexdigest()
    canonical = json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    )
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def _chunk_line(chunk: str) -> bytes:
    """One stored text line: the chunk as a JSON string (no raw newline inside)."""
    try:
        return _dumps(chunk).encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: escape them instead
        return json.dumps(chunk).encode("ascii")


def _session_dir_name(session_id: str) -> str:
    if _SAFE_SESSION.fullmatch(session_id):
        return session_id
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()
    return "s-" + digest[:32]


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _age(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


def _example(ref_id: str, offset: int) -> str:
    return f'recall_tool_result(ref_id="{ref_id}", offset={offset})'


# -- the store -----------------------------------------------------------------------


class OffloadStore:
    """Offloaded results of one session, the recall tool, and the size guard.

    See the module docstring. ``estimator`` overrides the token estimator (default: the
    module-level :func:`~tooldeck.tokens.estimate_tokens`); ``clock`` is for tests.
    """

    def __init__(
        self,
        home: str | os.PathLike[str],
        session_id: str,
        *,
        threshold_tokens: int = 15_000,
        guard_tokens: int = 25_000,
        ttl_seconds: float = 4 * 3600,
        events: EventBus | None = None,
        page_tokens: int = 8_000,
        summary_tokens: int = 1_500,
        estimator: TokenEstimator | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not isinstance(session_id, str) or not session_id:
            raise ValueError("an OffloadStore needs a non-empty session id")
        if guard_tokens < 2 * _NOTICE_TOKENS:
            raise ValueError(f"guard_tokens must be at least {2 * _NOTICE_TOKENS}")
        if threshold_tokens < 0:
            raise ValueError("threshold_tokens must be >= 0 (0 turns offloading off)")
        if threshold_tokens > guard_tokens:
            raise ValueError(
                f"threshold_tokens ({threshold_tokens}) is above guard_tokens "
                f"({guard_tokens}): results in between would be cut without being stored"
            )
        if page_tokens < 1 or summary_tokens < 1 or ttl_seconds <= 0:
            raise ValueError("page_tokens, summary_tokens and ttl_seconds must be positive")
        self.home = Path(os.path.realpath(os.fspath(home)))
        self.session_id = session_id
        self.threshold_tokens = threshold_tokens
        self.guard_tokens = guard_tokens
        self.ttl_seconds = float(ttl_seconds)
        self.events = events
        self.page_tokens = max(1, min(page_tokens, guard_tokens - _RECALL_HEADER_TOKENS))
        self.page_chars = self.page_tokens * 4
        self.summary_tokens = summary_tokens
        self.estimator = estimator
        self.clock = clock
        self.root = self.home / ".tooldeck" / "tool-offload"
        self.directory = self.root / _session_dir_name(session_id)
        self._lock = threading.Lock()
        self._index: OrderedDict[str, tuple[dict[str, Any], list[int]]] = OrderedDict()
        self.recall_tool = self._make_recall_tool()

    # -- measuring --------------------------------------------------------------------
    def count(self, text: str) -> int:
        """Tokens of ``text`` by this store's estimator."""
        return (self.estimator or estimate_tokens)(text)

    def tokens_of(self, result: ToolResult) -> int:
        """What ``result`` costs the model: its text, plus :data:`IMAGE_TOKENS` per image."""
        return _View.of(result, self.count).tokens

    # -- paths ------------------------------------------------------------------------
    def _check_ref(self, ref_id: Any) -> str:
        if not isinstance(ref_id, str) or not REF_PATTERN.fullmatch(ref_id.strip()):
            shown = _clip(repr(ref_id), 80)
            raise RecallError(
                f"{shown} is not a ref id: ref ids look like ref_0123456789abcdef "
                "(ref_ and 16 hex digits), exactly as the offload notice gives them."
            )
        return ref_id.strip()

    def _safe_directory(self, *, create: bool) -> Path | None:
        """This session's directory, checked: a real directory, no symlink on the way."""
        directory = self.directory
        if create:
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            info = os.lstat(directory)
        except FileNotFoundError:
            return None
        if not stat.S_ISDIR(info.st_mode) or os.path.realpath(directory) != str(directory):
            raise RecallError(
                f"The offload directory {directory} is not a plain directory (a symlink?); "
                "refusing to use it."
            )
        return directory

    def ref_path(self, ref_id: str) -> Path:
        """Where ``ref_id`` of this session is stored (the id is validated first)."""
        return self.directory / f"{self._check_ref(ref_id)}.json"

    # -- the hook ---------------------------------------------------------------------
    async def hook(
        self, call: ToolCall, tool: Tool, result: ToolResult, ctx: ToolContext
    ) -> ToolResult:
        """The result hook: offload when over the threshold, then guard. Never raises.

        Small text results are handled on the event loop; anything bigger (or holding
        JSON, which must be serialised to be measured) in a worker thread, so a 50 MB
        result never blocks the loop.
        """
        try:
            if _is_small(result):
                processed, ref = self.process(call, tool, result, ctx)
            else:
                processed, ref = await anyio.to_thread.run_sync(
                    self.process, call, tool, result, ctx
                )
        except Exception as exc:  # e.g. a JSON part that cannot be serialised at all
            _log.exception("preparing the result of %s (%s) failed", call.name, call.call_id)
            message = (
                f"The result of {call.name} could not be prepared for the model "
                f"({type(exc).__name__}: {_clip(str(exc), 200)})."
            )
            details = _merge_details(result.details, "result_hook_error", repr(exc))
            return ToolResult.error(message, details=details)
        if ref is not None and self.events is not None:
            await self.events.emit(
                ToolResultOffloaded(
                    self.session_id,
                    tool.name,
                    call.call_id,
                    ref.ref_id,
                    ref.original_tokens,
                    ref.summary_tokens,
                )
            )
        return processed

    def process(
        self, call: ToolCall, tool: Tool, result: ToolResult, ctx: ToolContext
    ) -> tuple[ToolResult, OffloadedRef | None]:
        """What :meth:`hook` does, synchronously: the model's view, and the new ref if any.

        Emits no event (the hook does). Raises only if the result cannot be rendered.
        """
        view = _View.of(result, self.count)
        if self._exempt(tool, result):
            return self._guard(result, view, ""), None
        if not self.threshold_tokens:
            why = "Offloading of large results is off, so the cut part is not available."
            return self._guard(result, view, why), None
        if view.text_tokens <= self.threshold_tokens:
            return self._guard(result, view, ""), None
        if ctx.session_id and ctx.session_id != self.session_id:
            _log.warning(
                "offload store of session %s got a result of session %s; not storing it",
                self.session_id,
                ctx.session_id,
            )
            why = "The result was not stored (the offload store belongs to another session)."
            return self._guard(result, view, why), None
        try:
            offloaded, ref = self._offload(call, tool.name, result, view)
        except Exception as exc:
            _log.exception("offloading the result of %s (%s) failed", call.name, call.call_id)
            why = f"Storing the full result failed ({type(exc).__name__}: {_clip(str(exc), 200)})"
            return self._guard(result, view, why + ", so the cut part is not available."), None
        notice = f"The complete result is stored as {ref.ref_id}; read it with recall_tool_result."
        return self._guard(offloaded, _View.of(offloaded, self.count), notice), ref

    def _exempt(self, tool: Tool, result: ToolResult) -> bool:
        details = result.details
        marked = isinstance(details, Mapping) and details.get(NO_OFFLOAD) is True
        return marked or tool is self.recall_tool or tool.name == RECALL_TOOL_NAME

    # -- offloading -------------------------------------------------------------------
    def offload(
        self, result: ToolResult, *, tool_name: str, call_id: str, arguments: Any = None
    ) -> tuple[ToolResult, OffloadedRef]:
        """Store ``result`` unconditionally; returns the summary result and the new ref.

        Raises ``OSError`` (or :class:`RecallError` for an unsafe directory) on failure,
        in which case nothing is left behind.
        """
        call = ToolCall(call_id, tool_name, arguments if arguments is not None else {})
        return self._offload(call, tool_name, result, _View.of(result, self.count))

    def _offload(
        self, call: ToolCall, tool_name: str, result: ToolResult, view: _View
    ) -> tuple[ToolResult, OffloadedRef]:
        with contextlib.suppress(Exception):
            self.expire()
        directory = self._safe_directory(create=True)
        assert directory is not None
        while True:
            ref_id = "ref_" + secrets.token_hex(8)
            path = directory / f"{ref_id}.json"
            if not os.path.lexists(path):
                break
        total_chars = view.total_chars
        summary = self._summary(view, ref_id, tool_name, call.call_id, total_chars)
        summary_tokens = self.count(summary)
        now = self.clock()
        meta = {
            "ref_id": ref_id,
            "session_id": self.session_id,
            "tool": tool_name,
            "call_id": call.call_id,
            "arguments_sha256": _arguments_digest(call.arguments),
            "created": now,
            "created_at": datetime.fromtimestamp(now, UTC).isoformat(),
            "is_error": result.is_error,
            "original_tokens": view.text_tokens,
            "summary_tokens": summary_tokens,
            "images": len(view.images),
            "total_chars": total_chars,
            "chunk_chars": _CHUNK_CHARS,
        }
        offsets = self._write(path, meta, view)
        ref = OffloadedRef(
            ref_id,
            tool_name,
            call.call_id,
            now,
            view.text_tokens,
            summary_tokens,
            total_chars,
            result.is_error,
            os.path.getsize(path),
        )
        with self._lock:
            self._remember(ref_id, meta, offsets)
        info = {
            "ref_id": ref_id,
            "original_tokens": view.text_tokens,
            "summary_tokens": summary_tokens,
        }
        content: list[ContentPart] = [TextPart(summary), *view.images]
        offloaded = dataclasses.replace(
            result, content=content, details=_merge_details(result.details, "offloaded", info)
        )
        return offloaded, ref

    def _write(self, path: Path, meta: dict[str, Any], view: _View) -> list[int]:
        """Write the document atomically; returns the byte offset of every text line."""
        fd, temp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".tmp", dir=path.parent)
        offsets: list[int] = []
        try:
            with os.fdopen(fd, "wb") as out:
                head = json.dumps({"format": FORMAT, "meta": meta}, default=str)
                out.write(head[:-1].encode("ascii") + b",\n")
                parts = json.dumps(view.parts).encode("ascii")
                out.write(b'"parts":' + parts + b',\n"text":[\n')
                written = out.tell()
                first = True
                for chunk in view.chunks(_CHUNK_CHARS):
                    line = _chunk_line(chunk)
                    if not first:
                        out.write(b",\n")
                        written += 2
                    offsets.append(written)
                    out.write(line)
                    written += len(line)
                    first = False
                out.write(b"\n]}\n" if offsets else b"]}\n")
                out.flush()
                os.fsync(out.fileno())
            created = float(meta["created"])
            os.utime(temp, (created, created))  # expiry reads the mtime, on the store's clock
            os.replace(temp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
        _fsync_dir(path.parent)
        return offsets

    def _remember(self, ref_id: str, meta: dict[str, Any], offsets: list[int]) -> None:
        self._index[ref_id] = (meta, offsets)
        self._index.move_to_end(ref_id)
        while len(self._index) > 64:
            self._index.popitem(last=False)

    # -- the summary ------------------------------------------------------------------
    def _summary(
        self, view: _View, ref_id: str, tool_name: str, call_id: str, total_chars: int
    ) -> str:
        budget = max(self.summary_tokens, 1)
        opening = (
            f"[The result of {tool_name} (call {call_id}) is about "
            f"{view.text_tokens:,} tokens ({total_chars:,} characters), over the "
            f"{self.threshold_tokens:,}-token limit for one tool result, so it was stored "
            f"in full as {ref_id} and this summary is shown instead.]"
        )
        hint = (
            f"To read the stored result, call recall_tool_result with this ref id, page by "
            f"page: {_example(ref_id, 0)} returns the first page, and every page says the "
            f"offset of the next one (offsets count characters of the full text, "
            f"{total_chars:,} in all). Read only what you need."
        )
        if view.images:
            hint += f" Its {_plural(len(view.images), 'image')} are shown below."
        fixed = self.count(opening) + self.count(hint) + 10
        room = max(0, budget - fixed)
        body = self._fit_lines(self._body_lines(view, room * 3), room)
        return "\n\n".join(x for x in (opening, body, hint) if x)

    def _body_lines(self, view: _View, budget_chars: int) -> list[str]:
        is_json, value = _parse_json_text(view)
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
        elif view.segments and _looks_like_json(view.segments[0]):
            lines.append("(Text that looks like JSON; too large to parse for a summary.)")
        return lines + _text_lines(view, max(400, budget_chars))

    def _fit_lines(self, lines: list[str], budget: int) -> str:
        """The lines, dropping from the end (then clipping) until within ``budget``."""
        if budget <= 0:
            return ""
        text = "\n".join(lines)
        while lines and self.count(text) > budget:
            if len(lines) > 2:
                lines = lines[:-1]
            else:
                keep = prefix_within(text, budget - 1, self.count)
                return text[:keep] + "…" if keep else ""
            text = "\n".join(lines)
        return text

    # -- the guard --------------------------------------------------------------------
    def guard(self, result: ToolResult) -> ToolResult:
        """``result`` cut to at most ``guard_tokens`` (returned as is when it fits)."""
        return self._guard(result, _View.of(result, self.count), "")

    def _guard(self, result: ToolResult, view: _View, why: str) -> ToolResult:
        if view.tokens <= self.guard_tokens:
            return result
        image_room = max(0, self.guard_tokens // 2 - _NOTICE_TOKENS)
        kept_images = view.images[: image_room // IMAGE_TOKENS]
        if view.images:  # the text of the non-image parts, joined like text() would
            joined = "\n".join(view.texts())
            total_chars, text_tokens = len(joined), self.count(joined)
            head_src = tail_src = joined
            total_lines = joined.count("\n")
        else:
            total_chars, text_tokens = view.total_chars, view.text_tokens
            window = max(self.guard_tokens * 16, 4_096)
            head_src, tail_src = view.head(window), view.tail(window)
            total_lines = view.count("\n")

        def build(head: str, tail: str) -> ToolResult:
            omitted = total_chars - len(head) - len(tail)
            notice = (
                f"[This tool result was cut to fit the limit of {self.guard_tokens:,} tokens "
                f"for one result: it is about {view.tokens:,} tokens ({total_chars:,} "
                "characters of text"
                + (f", {_plural(len(view.images), 'image')}" if view.images else "")
                + f"); shown are the first {len(head):,} and the last {len(tail):,} characters"
                + (f" and {_plural(len(kept_images), 'image')}" if view.images else "")
                + (f". {why}" if why else ".")
                + "]"
            )
            body = head + tail
            if omitted > 0:
                lines = max(0, total_lines - head.count("\n") - tail.count("\n"))
                marker = (
                    f"[… {_plural(omitted, 'character')} ({_plural(lines, 'line')}) cut here …]"
                )
                body = f"{head}\n\n{marker}\n\n{tail}"
            info = {
                "original_tokens": view.tokens,
                "shown_tokens": self.count(head) + self.count(tail),
                "total_chars": total_chars,
                "shown_chars": len(head) + len(tail),
                "images_dropped": len(view.images) - len(kept_images),
            }
            content: list[ContentPart] = [TextPart(notice + "\n" + body), *kept_images]
            details = _merge_details(result.details, "guarded", info)
            return dataclasses.replace(result, content=content, details=details)

        # everything but the kept text (notice, marker, images), with room for the numbers
        # in the notice to grow; the loop below checks the finished view anyway
        frame = self.tokens_of(build("", "")) + self.count(f"{total_chars:,}") * 2
        budget = self.guard_tokens - frame - 8
        for _ in range(6):
            if budget <= 0:
                head = tail = ""
            elif text_tokens <= budget:  # only the images were too many
                head, tail = head_src, ""
            else:
                head = head_src[: prefix_within(head_src, budget * 2 // 3, self.count)]
                room = budget - self.count(head)
                tail_n = min(suffix_within(tail_src, room, self.count), total_chars - len(head))
                tail = tail_src[len(tail_src) - tail_n :] if tail_n > 0 else ""
            guarded = build(head, tail)
            excess = self.tokens_of(guarded) - self.guard_tokens
            if excess <= 0:
                return guarded
            budget -= excess + 4  # the estimate is not exactly additive: try a bit less
        # a pathological estimator: cut the finished text itself
        text = guarded.parts[0].text  # type: ignore[union-attr]
        room = self.guard_tokens - IMAGE_TOKENS * len(kept_images) - 2 * len(kept_images)
        cut = text[: prefix_within(text, max(0, room), self.count)]
        return dataclasses.replace(guarded, content=[TextPart(cut), *kept_images])

    # -- reading ----------------------------------------------------------------------
    def _open(self, ref_id: str) -> tuple[int, os.stat_result]:
        """An fd for the ref's file (no symlink followed), after the expiry check."""
        ref_id = self._check_ref(ref_id)
        directory = self._safe_directory(create=False)

        def missing() -> RecallError:
            known = ", ".join(r.ref_id for r in self.refs()) or "none"
            return RecallError(
                f"There is no stored result {ref_id} in this session (it may have expired "
                f"after {_age(self.ttl_seconds)}, or been cleaned up). Stored results now: "
                f"{known}."
            )

        if directory is None:
            raise missing()
        path = directory / f"{ref_id}.json"
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except FileNotFoundError:
            raise missing() from None
        except OSError as exc:  # ELOOP: a symlink where a ref should be
            raise RecallError(
                f"The stored result {ref_id} cannot be read: {exc.strerror}."
            ) from exc
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            raise RecallError(f"The stored result {ref_id} is not a regular file; refused.")
        if self.clock() - info.st_mtime > self.ttl_seconds:
            os.close(fd)
            with contextlib.suppress(OSError):
                path.unlink()
            with self._lock:
                self._index.pop(ref_id, None)
            raise RecallError(
                f"The stored result {ref_id} has expired (results are kept "
                f"{_age(self.ttl_seconds)}) and was removed."
            )
        return fd, info

    def _load_index(self, ref_id: str, handle: Any) -> tuple[dict[str, Any], list[int]]:
        with self._lock:
            known = self._index.get(ref_id)
        if known is not None:
            return known
        handle.seek(0)
        first = handle.readline()
        try:
            meta = json.loads(first.rstrip(b",\n") + b"}")["meta"]
        except (ValueError, KeyError, TypeError) as exc:
            raise RecallError(f"The stored result {ref_id} is damaged: {exc}.") from exc
        handle.readline()  # the parts
        if handle.readline() != b'"text":[\n':
            raise RecallError(f"The stored result {ref_id} is damaged (no text section).")
        offsets: list[int] = []
        while True:
            position = handle.tell()
            line = handle.readline()
            if not line or line.startswith(b"]}"):
                break
            offsets.append(position)
        with self._lock:
            self._remember(ref_id, meta, offsets)
        return meta, offsets

    def _read_chars(
        self, handle: Any, meta: Mapping[str, Any], offsets: list[int], start: int, end: int
    ) -> str:
        size = int(meta["chunk_chars"])
        first, last = start // size, (end - 1) // size
        pieces: list[str] = []
        for index in range(first, min(last, len(offsets) - 1) + 1):
            handle.seek(offsets[index])
            line = handle.readline().rstrip(b"\n").removesuffix(b",")
            pieces.append(json.loads(line))
        text = "".join(pieces)
        base = first * size
        return text[start - base : end - base]

    def read_page(
        self,
        ref_id: str,
        offset: int = 0,
        limit: int | None = None,
        *,
        max_tokens: int | None = None,
    ) -> Page:
        """One page of a stored result (see the module docstring); raises RecallError.

        ``max_tokens`` lowers the page's token budget below ``page_tokens``.
        """
        budget = (
            self.page_tokens if max_tokens is None else max(1, min(max_tokens, self.page_tokens))
        )
        fd, _ = self._open(ref_id)
        ref_id = ref_id.strip()
        with os.fdopen(fd, "rb") as handle:
            meta, offsets = self._load_index(ref_id, handle)
            total = int(meta["total_chars"])
            if offset < 0:
                raise RecallError("offset must be 0 or more.")
            if offset >= total and not (offset == 0 and total == 0):
                raise RecallError(
                    f"offset {offset:,} is past the end of {ref_id}: it has "
                    f"{_plural(total, 'character')} (valid offsets 0 to {max(0, total - 1):,})."
                )
            asked = self.page_chars if limit is None else max(1, limit)
            window = min(asked, budget * 12, total - offset)
            try:
                text = self._read_chars(handle, meta, offsets, offset, offset + window)
            except (ValueError, KeyError, IndexError) as exc:
                raise RecallError(f"The stored result {ref_id} is damaged: {exc}.") from exc
        tokens = self.count(text)
        cut = False
        if tokens > budget:
            keep = max(1, prefix_within(text, budget, self.count, total=tokens))
            text, cut = text[:keep], True
        cut = cut or window < min(asked, total - offset)
        if (cut or limit is None) and offset + len(text) < total:
            newline = text.rfind("\n", len(text) * 4 // 5)
            if newline >= 0 and newline + 1 < len(text):
                text = text[: newline + 1]
                tokens = self.count(text)
        return Page(ref_id, offset, offset + len(text), total, text, tokens)

    def load(self, ref_id: str) -> ToolResult:
        """The complete stored result, rebuilt (text, JSON values, images, is_error)."""
        fd, _ = self._open(ref_id)
        ref_id = ref_id.strip()
        with os.fdopen(fd, "rb") as handle:
            meta, offsets = self._load_index(ref_id, handle)
            handle.seek(0)
            handle.readline()
            parts_line = handle.readline().rstrip(b"\n").removesuffix(b",")
            described = json.loads(b"{" + parts_line + b"}")["parts"]
            text = self._read_chars(handle, meta, offsets, 0, int(meta["total_chars"]))
        parts: list[ContentPart] = []
        for entry in described:
            piece = text[entry["start"] : entry["end"]]
            if entry["type"] == "text":
                parts.append(TextPart(piece))
            elif entry["type"] == "json":
                parts.append(JsonPart(json.loads(piece)))
            else:
                parts.append(
                    ImagePart(
                        data=entry.get("data"), url=entry.get("url"), mime_type=entry["mime_type"]
                    )
                )
        content: str | list[ContentPart] = parts
        if len(parts) == 1 and isinstance(parts[0], TextPart):
            content = parts[0].text
        return ToolResult(content=content, is_error=bool(meta["is_error"]), details=meta)

    # -- the recall tool --------------------------------------------------------------
    def _make_recall_tool(self) -> Tool:
        description = (
            "Read a large tool result that was stored instead of being shown to you. Its "
            "notice names a ref id (like ref_0123456789abcdef). Returns one page of the "
            "stored text, starting at `offset` (a character offset; 0 is the beginning); "
            "the first line of every page gives the offset of the next page. Pages are at "
            f"most about {self.page_tokens:,} tokens. Only results of this session can be read."
        )
        return Tool(
            name=RECALL_TOOL_NAME,
            description=description,
            params=_RecallParams,
            execute=self._recall,
            read_only=True,
            describe_activity=lambda p: f"Reading stored result {getattr(p, 'ref_id', '')}",
        )

    def _recall(self, params: _RecallParams, ctx: ToolContext) -> ToolResult:
        details: dict[str, Any] = {NO_OFFLOAD: True}
        try:
            if ctx.session_id and ctx.session_id != self.session_id:
                raise RecallError(
                    f"There is no stored result {_clip(params.ref_id, 40)} in this session."
                )
            page = self.read_page(params.ref_id, params.offset, params.limit)
            result = self._page_result(page, details)
            excess = self.tokens_of(result) - self.guard_tokens
            if excess > 0:  # a long header with a tight guard: take a shorter page
                budget = page.tokens - excess - 4
                page = self.read_page(params.ref_id, params.offset, params.limit, max_tokens=budget)
                result = self._page_result(page, details)
        except RecallError as exc:
            return ToolResult.error(str(exc), details=details)
        except OSError as exc:
            message = f"The stored result {_clip(params.ref_id, 40)} cannot be read: {exc}."
            return ToolResult.error(message, details=details)
        return result

    @staticmethod
    def _page_result(page: Page, details: dict[str, Any]) -> ToolResult:
        if page.eof:
            where = "this is the end of it."
        else:
            where = f"next page: {_example(page.ref_id, page.end)}."
        header = (
            f"[{page.ref_id}: characters {page.offset:,} to {page.end:,} of "
            f"{page.total_chars:,}; {where}]"
        )
        recall = {
            "ref_id": page.ref_id,
            "offset": page.offset,
            "end": page.end,
            "next_offset": page.next_offset,
            "total_chars": page.total_chars,
            "tokens": page.tokens,
        }
        return ToolResult(
            content=[TextPart(header), TextPart(page.text)], details={**details, "recall": recall}
        )

    # -- listing, the creator, status -------------------------------------------------
    def _entries(self) -> list[tuple[str, os.stat_result]]:
        try:
            directory = self._safe_directory(create=False)
        except RecallError:
            return []
        if directory is None:
            return []
        found = []
        with os.scandir(directory) as entries:
            for entry in entries:
                match = _REF_FILE.fullmatch(entry.name)
                if match and entry.is_file(follow_symlinks=False):
                    with contextlib.suppress(OSError):
                        found.append((match.group(1), entry.stat(follow_symlinks=False)))
        return found

    def refs(self) -> list[OffloadedRef]:
        """This session's stored results that have not expired, oldest first."""
        now = self.clock()
        out: list[OffloadedRef] = []
        for ref_id, info in self._entries():
            if now - info.st_mtime > self.ttl_seconds:
                continue
            meta = self._meta(ref_id)
            if meta is None:
                continue
            out.append(
                OffloadedRef(
                    ref_id,
                    str(meta.get("tool", "")),
                    str(meta.get("call_id", "")),
                    float(meta.get("created", info.st_mtime)),
                    int(meta.get("original_tokens", 0)),
                    int(meta.get("summary_tokens", 0)),
                    int(meta.get("total_chars", 0)),
                    bool(meta.get("is_error", False)),
                    info.st_size,
                )
            )
        out.sort(key=lambda r: (r.created, r.ref_id))
        return out

    def _meta(self, ref_id: str) -> dict[str, Any] | None:
        with self._lock:
            known = self._index.get(ref_id)
        if known is not None:
            return known[0]
        try:
            fd = os.open(
                self.directory / f"{ref_id}.json", os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
            )
            with os.fdopen(fd, "rb") as handle:
                first = handle.readline(1 << 20)
            meta = json.loads(first.rstrip(b",\n") + b"}")["meta"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return meta if isinstance(meta, dict) else None

    def has_refs(self) -> bool:
        """Whether this session has at least one stored result that has not expired."""
        now = self.clock()
        return any(now - info.st_mtime <= self.ttl_seconds for _, info in self._entries())

    def creator(self, ctx: TurnContext) -> list[Tool]:
        """Category creator: the recall tool, once this session has stored results."""
        if ctx.session_id != self.session_id:
            return []
        return [self.recall_tool] if self.has_refs() else []

    def status_source(self) -> str:
        """For ``TurnContext.status_sources``: this session's stored results."""
        refs = self.refs()
        if not refs:
            return "No stored (offloaded) tool results in this session."
        now = self.clock()
        lines = [f"{_plural(len(refs), 'stored tool result')} (read with recall_tool_result):"]
        for ref in refs:
            left = self.ttl_seconds - (now - ref.created)
            lines.append(
                f"- {ref.ref_id}: {ref.tool_name} (call {ref.call_id}), about "
                f"{ref.original_tokens:,} tokens / {ref.total_chars:,} characters"
                + (", an error result" if ref.is_error else "")
                + f", stored {_age(now - ref.created)} ago, expires in {_age(left)}"
            )
        return "\n".join(lines)

    # -- cleanup ----------------------------------------------------------------------
    def expire(self, now: float | None = None) -> list[str]:
        """Remove this session's refs older than the TTL (and stale temp files)."""
        now = self.clock() if now is None else now
        removed: list[str] = []
        try:
            directory = self._safe_directory(create=False)
        except RecallError:
            return removed
        if directory is None:
            return removed
        with os.scandir(directory) as entries:
            for entry in entries:
                match = _REF_FILE.fullmatch(entry.name)
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                age = now - info.st_mtime
                temp = entry.name.startswith(".ref_") and entry.name.endswith(".tmp")
                if match and age > self.ttl_seconds:
                    removed.append(match.group(1))
                elif not (temp and age > min(self.ttl_seconds, _TEMP_MAX_AGE)):
                    continue  # a live ref, a write in progress, or not ours
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)
        with self._lock:
            for ref_id in removed:
                self._index.pop(ref_id, None)
        return sorted(removed)

    def cleanup(self) -> None:
        """Remove this session's directory and everything in it (other sessions untouched)."""
        with self._lock:
            self._index.clear()
        directory = self.directory
        try:
            info = os.lstat(directory)
        except FileNotFoundError:
            return
        if stat.S_ISLNK(info.st_mode):  # never follow a link out of the store
            directory.unlink()
            return
        shutil.rmtree(directory)
