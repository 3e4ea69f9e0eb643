"""The offload store of one session: the result hook, the files, reading, expiry.

See the package docstring (:mod:`tooldeck.offload`) for what the hook does to every
executed call's result. Results reach the hook frozen (:mod:`tooldeck.result`): what is
measured, stored and summarised is exactly the text the model would have been sent.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import secrets
import shutil
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import anyio.to_thread

from ..assembly import Source, TurnContext
from ..context import ToolContext
from ..events import Event, EventBus
from ..result import ContentPart, ImagePart, TextPart, ToolResult
from ..telemetry import result_prepared
from ..tokens import (
    TokenEstimator,
    default_estimate_tokens,
    estimate_tokens,
    get_token_estimator,
    prefix_within,
)
from ..tools import Tool
from ..transcript import ToolCall
from . import format as fmt
from .guard import NOTICE_TOKENS, guard, merge_details
from .recall import NO_OFFLOAD, RECALL_HEADER_TOKENS, RECALL_TOOL_NAME, Page, RecallError
from .recall import recall_tool as make_recall_tool
from .summary import clip, plural, summarise
from .view import View, is_small

_log = logging.getLogger("tooldeck.offload")

_TEMP_MAX_AGE = 3_600.0  # a hidden temp file older than this is debris of a crashed write


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


def _age(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


class OffloadStore(Source):
    """Offloaded results of one session, the recall tool, and the size guard.

    See the package docstring. ``estimator`` overrides the token estimator (default: the
    module-level :func:`~tooldeck.tokens.estimate_tokens`); ``clock`` is for tests. As a
    tool source it gives the recall tool once this session has stored results.
    """

    label = "offload"

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
        if guard_tokens < 2 * NOTICE_TOKENS:
            raise ValueError(f"guard_tokens must be at least {2 * NOTICE_TOKENS}")
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
        self.page_tokens = max(1, min(page_tokens, guard_tokens - RECALL_HEADER_TOKENS))
        self.page_chars = self.page_tokens * 4
        self.summary_tokens = summary_tokens
        self.estimator = estimator
        self.clock = clock
        self.root = self.home / ".tooldeck" / "tool-offload"
        self.directory = self.root / fmt.session_dir_name(session_id)
        self._lock = threading.Lock()
        self._index: OrderedDict[str, tuple[dict[str, Any], list[int]]] = OrderedDict()
        self.recall_tool = make_recall_tool(self)

    # -- measuring --------------------------------------------------------------------
    def count(self, text: str) -> int:
        """Tokens of ``text`` by this store's estimator."""
        return (self.estimator or estimate_tokens)(text)

    def tokens_of(self, result: ToolResult) -> int:
        """What ``result`` costs the model: its text, plus ``IMAGE_TOKENS`` per image."""
        return View.of(result, self.count).tokens

    # -- paths ------------------------------------------------------------------------
    def _check_ref(self, ref_id: Any) -> str:
        if not isinstance(ref_id, str) or not fmt.REF_PATTERN.fullmatch(ref_id.strip()):
            shown = clip(repr(ref_id), 80)
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

        Small results are handled on the event loop; bigger ones in a worker thread, so a
        50 MB result never blocks the loop.
        """
        if self._fits(result):
            return result  # what process gives it back, unmeasured
        try:
            if is_small(result):
                processed, ref = self.process(call, tool, result, ctx)
            else:
                processed, ref = await anyio.to_thread.run_sync(
                    self.process, call, tool, result, ctx
                )
        except Exception as exc:
            _log.exception("preparing the result of %s (%s) failed", call.name, call.call_id)
            message = (
                f"The result of {call.name} could not be prepared for the model "
                f"({type(exc).__name__}: {clip(str(exc), 200)})."
            )
            details = merge_details(result.details, "result_hook_error", repr(exc))
            return ToolResult.error(message, details=details)
        if processed is not result:  # offloaded or cut: events on the call's span
            result_prepared(ref, result, processed)
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

    def _fits(self, result: ToolResult) -> bool:
        """Whether ``result`` is certainly under both the offload threshold and the
        guard, without counting its tokens: a result of text (no image) of at most half
        as many characters as the smaller limit, measured by the built-in estimator,
        which counts at most 2 tokens a character (tooldeck.tokens: the heaviest
        weight, a 4-byte character's lead byte, is 2 tokens; a separator, one newline,
        is 2 at most too). :meth:`process` would give it back as it is."""
        if self.estimator is not None or get_token_estimator() is not default_estimate_tokens:
            return False
        limit = self.guard_tokens
        if self.threshold_tokens:
            limit = min(limit, self.threshold_tokens)
        if 2 * len(result.text()) > limit:
            return False
        content = result.content
        return type(content) is str or not any(isinstance(p, ImagePart) for p in content)

    def process(
        self, call: ToolCall, tool: Tool, result: ToolResult, ctx: ToolContext
    ) -> tuple[ToolResult, OffloadedRef | None]:
        """What :meth:`hook` does, synchronously: the model's view, and the new ref if any.

        Emits no event (the hook does).
        """
        view = View.of(result, self.count)
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
            why = f"Storing the full result failed ({type(exc).__name__}: {clip(str(exc), 200)})"
            return self._guard(result, view, why + ", so the cut part is not available."), None
        notice = f"The complete result is stored as {ref.ref_id}; read it with recall_tool_result."
        return self._guard(offloaded, View.of(offloaded, self.count), notice), ref

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
        return self._offload(call, tool_name, result, View.of(result, self.count))

    def _offload(
        self, call: ToolCall, tool_name: str, result: ToolResult, view: View
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
        summary = summarise(
            view,
            ref_id=ref_id,
            tool_name=tool_name,
            call_id=call.call_id,
            threshold_tokens=self.threshold_tokens,
            summary_tokens=self.summary_tokens,
            count=self.count,
        )
        summary_tokens = self.count(summary)
        now = self.clock()
        meta = {
            "ref_id": ref_id,
            "session_id": self.session_id,
            "tool": tool_name,
            "call_id": call.call_id,
            "arguments_sha256": fmt.arguments_digest(call.arguments),
            "created": now,
            "created_at": datetime.fromtimestamp(now, UTC).isoformat(),
            "is_error": result.is_error,
            "original_tokens": view.text_tokens,
            "summary_tokens": summary_tokens,
            "images": len(view.images),
            "total_chars": total_chars,
            "chunk_chars": fmt.CHUNK_CHARS,
        }
        offsets = fmt.write_document(path, meta, view)
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
            result, content=content, details=merge_details(result.details, "offloaded", info)
        )
        return offloaded, ref

    def _remember(self, ref_id: str, meta: dict[str, Any], offsets: list[int]) -> None:
        self._index[ref_id] = (meta, offsets)
        self._index.move_to_end(ref_id)
        while len(self._index) > 64:
            self._index.popitem(last=False)

    # -- the guard --------------------------------------------------------------------
    def guard(self, result: ToolResult) -> ToolResult:
        """``result`` cut to at most ``guard_tokens`` (returned as is when it fits)."""
        return self._guard(result, View.of(result, self.count), "")

    def _guard(self, result: ToolResult, view: View, why: str) -> ToolResult:
        return guard(result, view, why, limit=self.guard_tokens, count=self.count)

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
        try:
            meta, offsets = fmt.read_index(handle)
        except fmt.DamagedFile as exc:
            raise RecallError(f"The stored result {ref_id} is damaged: {exc}.") from exc
        with self._lock:
            self._remember(ref_id, meta, offsets)
        return meta, offsets

    def read_page(
        self,
        ref_id: str,
        offset: int = 0,
        limit: int | None = None,
        *,
        max_tokens: int | None = None,
    ) -> Page:
        """One page of a stored result (see :mod:`tooldeck.offload.recall`).

        Raises :class:`RecallError`. ``max_tokens`` lowers the page's token budget below
        ``page_tokens``. A page of a non-empty result always holds at least one
        character; a file that cannot give one is reported as damaged.
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
                    f"{plural(total, 'character')} (valid offsets 0 to {max(0, total - 1):,})."
                )
            asked = self.page_chars if limit is None else max(1, limit)
            window = min(asked, budget * 12, total - offset)
            try:
                text = fmt.read_chars(handle, meta, offsets, offset, offset + window)
            except (ValueError, KeyError, IndexError) as exc:
                raise RecallError(f"The stored result {ref_id} is damaged: {exc}.") from exc
        if len(text) != window:
            raise RecallError(
                f"The stored result {ref_id} is damaged: characters {offset:,} to "
                f"{offset + window:,} could not be read back."
            )
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
        """The complete stored result, rebuilt (text, JSON parts, images, is_error)."""
        fd, _ = self._open(ref_id)
        ref_id = ref_id.strip()
        with os.fdopen(fd, "rb") as handle:
            meta, offsets = self._load_index(ref_id, handle)
            try:
                return fmt.read_result(handle, meta, offsets)
            except (ValueError, KeyError, IndexError) as exc:
                raise RecallError(f"The stored result {ref_id} is damaged: {exc}.") from exc

    # -- listing, the tool source, status -------------------------------------------------
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
                match = fmt.REF_FILE.fullmatch(entry.name)
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
                return fmt.read_meta(handle)
        except (OSError, fmt.DamagedFile):
            return None

    def has_refs(self) -> bool:
        """Whether this session has at least one stored result that has not expired."""
        now = self.clock()
        return any(now - info.st_mtime <= self.ttl_seconds for _, info in self._entries())

    def tools_for(self, ctx: TurnContext, /) -> list[Tool]:
        """As a tool source: the recall tool, once this session has stored results."""
        if ctx.session_id != self.session_id:
            return []
        return [self.recall_tool] if self.has_refs() else []

    def status_source(self) -> str:
        """For ``TurnContext.status_sources``: this session's stored results."""
        refs = self.refs()
        if not refs:
            return "No stored (offloaded) tool results in this session."
        now = self.clock()
        lines = [f"{plural(len(refs), 'stored tool result')} (read with recall_tool_result):"]
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
                match = fmt.REF_FILE.fullmatch(entry.name)
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
