"""The on-disk format of a stored result, and where a session's results live.

One file per ref, ``<home>/.tooldeck/tool-offload/<session dir>/<ref_id>.json``, one JSON
document written so that a page is read without loading the rest:

- line 1: ``{"format": ..., "meta": {...},`` (tool, call id, SHA-256 of the canonical JSON
  arguments, time, is_error, sizes);
- line 2: ``"parts": [...],``: each part with its span in the text (and image data);
- then ``"text": [`` and the text as JSON strings of :data:`CHUNK_CHARS` characters, one
  per line, and ``]}``.

The text is exactly the frozen model-facing text of the result (``ToolResult.text()``),
so a recall returns exactly what the model would have been sent. A file is never partial:
it is written to a hidden temporary file in the same directory, flushed, fsynced and
moved into place with ``os.replace``.

Session directories: a session id that is a plain lowercase name (``[a-z0-9][a-z0-9_.-]*``,
at most 100 characters, not starting with ``s-``) is its own directory name; every other
id is stored under ``s-`` and the full SHA-256 of the id. No two ids share a directory.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from ..errors import TooldeckError
from ..result import ContentPart, ImagePart, JsonPart, TextPart, ToolResult
from .view import View

__all__ = [
    "CHUNK_CHARS",
    "REF_FILE",
    "DamagedFile",
    "read_chars",
    "read_index",
    "read_result",
    "session_dir_name",
    "write_document",
]

FORMAT = "tooldeck.offload/1"
CHUNK_CHARS = 65_536  # characters per stored text line
REF_PATTERN = re.compile(r"ref_[0-9a-f]{16}")
"""Every ref id matches this, and nothing else is ever looked up."""
REF_FILE = re.compile(r"(ref_[0-9a-f]{16})\.json")
_PLAIN_SESSION = re.compile(r"(?!s-)[a-z0-9][a-z0-9_.-]{0,99}")


class DamagedFile(TooldeckError, ValueError):
    """A stored file does not have the expected layout."""


def session_dir_name(session_id: str) -> str:
    """The directory of a session's results: injective (see the module docstring)."""
    if _PLAIN_SESSION.fullmatch(session_id) and ".." not in session_id:
        return session_id
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()
    return "s-" + digest


def arguments_digest(arguments: str | Mapping[str, Any]) -> str:
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
    """One stored text line: the chunk as a JSON string (no raw newline inside).

    Frozen text never holds lone surrogates (they are replaced when a result is made),
    so every chunk is valid UTF-8 and decodes back to exactly itself.
    """
    return json.dumps(chunk, ensure_ascii=False).encode("utf-8")


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


def write_document(path: Path, meta: dict[str, Any], view: View) -> list[int]:
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
            for chunk in view.chunks(CHUNK_CHARS):
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


def read_meta(handle: IO[bytes]) -> dict[str, Any]:
    """The metadata on the first line."""
    handle.seek(0)
    first = handle.readline(1 << 20)
    try:
        meta = json.loads(first.rstrip(b",\n") + b"}")["meta"]
    except (ValueError, KeyError, TypeError) as exc:
        raise DamagedFile(str(exc)) from exc
    if not isinstance(meta, dict):
        raise DamagedFile("no metadata")
    return meta


def read_index(handle: IO[bytes]) -> tuple[dict[str, Any], list[int]]:
    """The metadata and the byte offset of every text line."""
    meta = read_meta(handle)
    handle.readline()  # the parts
    if handle.readline() != b'"text":[\n':
        raise DamagedFile("no text section")
    offsets: list[int] = []
    while True:
        position = handle.tell()
        line = handle.readline()
        if not line or line.startswith(b"]}"):
            break
        offsets.append(position)
    return meta, offsets


def read_chars(
    handle: IO[bytes], meta: Mapping[str, Any], offsets: Sequence[int], start: int, end: int
) -> str:
    """Characters ``start`` to ``end`` of the stored text."""
    size = int(meta["chunk_chars"])
    first, last = start // size, (end - 1) // size
    pieces: list[str] = []
    for index in range(first, min(last, len(offsets) - 1) + 1):
        handle.seek(offsets[index])
        line = handle.readline().rstrip(b"\n").removesuffix(b",")
        piece = json.loads(line)
        if not isinstance(piece, str):
            raise DamagedFile(f"text line {index} is not a string")
        pieces.append(piece)
    text = "".join(pieces)
    base = first * size
    return text[start - base : end - base]


def read_result(handle: IO[bytes], meta: Mapping[str, Any], offsets: Sequence[int]) -> ToolResult:
    """The complete stored result, rebuilt (text, JSON parts' text, images, is_error)."""
    handle.seek(0)
    handle.readline()
    parts_line = handle.readline().rstrip(b"\n").removesuffix(b",")
    described = json.loads(b"{" + parts_line + b"}")["parts"]
    text = read_chars(handle, meta, offsets, 0, int(meta["total_chars"]))
    parts: list[ContentPart] = []
    for entry in described:
        piece = text[entry["start"] : entry["end"]]
        if entry["type"] == "text":
            parts.append(TextPart(piece))
        elif entry["type"] == "json":
            parts.append(JsonPart.from_text(piece))
        else:
            parts.append(
                ImagePart(
                    data=entry.get("data"), url=entry.get("url"), mime_type=entry["mime_type"]
                )
            )
    content: str | list[ContentPart] = parts
    if len(parts) == 1 and isinstance(parts[0], TextPart):
        content = parts[0].text
    return ToolResult(content=content, is_error=bool(meta["is_error"]), details=dict(meta))
