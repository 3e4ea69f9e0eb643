"""File tools: read, search, list, write and edit files inside the agent's home directory.

Every path goes through :func:`~tooldeck.builtin._common.resolve_in_home`; nothing here
reads or writes outside the home, whether by ``..``, an absolute path or a symlink.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import IO

from ..context import ToolContext
from ..registry import Handlers
from ..result import ToolResult
from ._common import (
    BINARY_SNIFF_BYTES,
    ToolFailure,
    atomic_write,
    display_path,
    home_of,
    is_binary_file,
    looks_binary,
    resolve_in_home,
)

handlers = Handlers("files")

# read_document
READ_MAX_CHARS = 60_000  # characters of file text in one page, at most
READ_LINE_CHARS = 2_000  # a longer line is cut, with a note
READ_COUNT_MAX_BYTES = 50_000_000  # past the page, larger files are not read to the end
# grep_files
GREP_MAX_FILES = 5_000  # files scanned per call, at most
GREP_MAX_FILE_BYTES = 10_000_000  # larger files are skipped
GREP_LINE_CHARS = 300  # a matching line is shown up to this long, around the match
# list_files
LIST_MAX_VISITED = 20_000  # entries walked per call, at most
# Directories that are almost never what a search means and can be huge.
SKIP_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", ".tox"})

_GLOB_CHARS = frozenset("*?[")


# -- shared ------------------------------------------------------------------------------


def _human_size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"  # pragma: no cover


def _split_glob(path: str, glob: str) -> tuple[str, str]:
    """Let ``path`` itself be a glob (``src/**/*.py``): split off its literal prefix."""
    if glob.strip() or not any(c in path for c in _GLOB_CHARS):
        return path, glob.strip()
    parts = Path(path).parts
    for i, part in enumerate(parts):
        if any(c in part for c in _GLOB_CHARS):
            root = str(Path(*parts[:i])) if i else "."
            return root, "/".join(parts[i:])
    return path, glob  # pragma: no cover


def _glob_segments(glob: str) -> list[str] | None:
    glob = glob.strip()
    while glob.startswith("./"):
        glob = glob[2:]
    if not glob:
        return None
    return [s for s in glob.split("/") if s]


def _match_segments(pattern: list[str], parts: list[str]) -> bool:
    if not pattern:
        return not parts
    head = pattern[0]
    if head == "**":
        return any(_match_segments(pattern[1:], parts[k:]) for k in range(len(parts) + 1))
    return bool(parts) and fnmatchcase(parts[0], head) and _match_segments(pattern[1:], parts[1:])


def _glob_matches(segments: list[str] | None, rel: str) -> bool:
    """Match a path relative to the search root.

    A glob without ``/`` matches the file name at any depth (``*.py``); one with ``/``
    matches the whole relative path, ``**`` standing for any number of directories.
    """
    if segments is None:
        return True
    if len(segments) == 1 and segments[0] != "**":
        return fnmatchcase(rel.rsplit("/", 1)[-1], segments[0])
    return _match_segments(segments, rel.split("/"))


def _resolve(ctx: ToolContext, path: str) -> tuple[Path, Path]:
    home = home_of(ctx)
    return home, resolve_in_home(home, path)


# -- read_document ------------------------------------------------------------------------


def _lines(f: IO[str]) -> Iterator[tuple[str, int, bool]]:
    """(text kept, full length, ends with newline) per line, never holding a huge line."""
    while True:
        chunk = f.readline(READ_LINE_CHARS + 1)
        if not chunk:
            return
        if chunk.endswith("\n") or len(chunk) <= READ_LINE_CHARS:
            text = chunk.rstrip("\r\n")
            yield text, len(text), chunk.endswith("\n")
            continue
        kept, length = chunk, len(chunk)
        while True:  # drain the rest of an overlong line
            more = f.readline(64 * 1024)
            if not more:
                yield kept, length, False
                return
            length += len(more.rstrip("\r\n"))
            if more.endswith("\n"):
                yield kept, length, True
                break


@handlers("read_document")
def read_document(path: str, ctx: ToolContext, offset: int = 1, limit: int = 250) -> ToolResult:
    try:
        home, target = _resolve(ctx, path)
        shown = display_path(home, target)
        if not target.exists():
            raise ToolFailure(f"No such file: {shown}. Use list_files to see what exists.")
        if target.is_dir():
            raise ToolFailure(f"{shown} is a directory, not a file. Use list_files to list it.")
        size = target.stat().st_size
        with target.open("rb") as raw:
            sample = raw.read(BINARY_SNIFF_BYTES)
        if looks_binary(sample):
            raise ToolFailure(
                f"{shown} looks like a binary file ({_human_size(size)}); read_document only "
                "reads text files."
            )
        out: list[str] = []
        chars = 0
        total = 0
        last_shown = offset - 1
        cut_lines = 0
        stopped_by_chars = False
        total_known = True
        with target.open("r", encoding="utf-8", errors="replace", newline="") as f:
            for number, (text, length, _nl) in enumerate(_lines(f), start=1):
                total = number
                if number >= offset + limit or stopped_by_chars:
                    if size > READ_COUNT_MAX_BYTES:
                        total_known = False  # do not read a huge file to the end to count
                        break
                    continue
                if number < offset:
                    continue
                if length > READ_LINE_CHARS:
                    text = (
                        text[:READ_LINE_CHARS]
                        + f"… [line cut: {length - READ_LINE_CHARS} more characters]"
                    )
                    cut_lines += 1
                line = f"{number:>6}\t{text}"
                if out and chars + len(line) + 1 > READ_MAX_CHARS:
                    stopped_by_chars = True
                    continue
                out.append(line)
                chars += len(line) + 1
                last_shown = number
    except ToolFailure as failure:
        return failure.result()
    except OSError as exc:
        return ToolResult.error(f"Cannot read {path}: {exc.strerror or exc}")

    details = {
        "path": shown,
        "offset": offset,
        "end": last_shown,
        "total_lines": total if total_known else None,
    }
    if total == 0:
        return ToolResult(content=f"{shown} is empty (0 lines).", details=details)
    if offset > total:
        return ToolResult.error(
            f"offset {offset} is past the end of {shown}, which has {total} line(s). "
            f"Use an offset between 1 and {total}.",
            details=details,
        )
    of_total = f"of {total}" if total_known else f"of more than {total - 1}"
    header = f"{shown} — lines {offset}-{last_shown} {of_total}"
    notes: list[str] = []
    if last_shown < total:
        why = " (the page reached the character limit)" if stopped_by_chars else ""
        notes.append(
            f"[Showing lines {offset}-{last_shown} {of_total}{why}. To read on, call "
            f"read_document with path={shown!r} and offset={last_shown + 1}.]"
        )
    else:
        notes.append("[End of file.]")
    if cut_lines:
        notes.append(
            f"[{cut_lines} line(s) longer than {READ_LINE_CHARS} characters were cut; use "
            "grep_files to find text inside them.]"
        )
    body = "\n".join([header, *out, *notes])
    return ToolResult(content=body, details={**details, "truncated": last_shown < total})


# -- grep_files ------------------------------------------------------------------------


def _walk_files(root: Path, segments: list[str] | None) -> Iterator[tuple[Path, str]]:
    """Files under ``root`` (sorted, symlinked directories not followed) that match."""
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        base = Path(dirpath)
        for name in sorted(filenames):
            file = base / name
            rel = file.relative_to(root).as_posix()
            if _glob_matches(segments, rel):
                yield file, rel


def _show_line(line: str, match: re.Match[str]) -> str:
    if len(line) <= GREP_LINE_CHARS:
        return line
    start = max(0, min(match.start() - GREP_LINE_CHARS // 3, len(line) - GREP_LINE_CHARS))
    piece = line[start : start + GREP_LINE_CHARS]
    return ("…" if start > 0 else "") + piece + ("…" if start + GREP_LINE_CHARS < len(line) else "")


@dataclass(slots=True)
class _GrepStats:
    scanned: int = 0
    files_with_matches: int = 0
    skipped_binary: int = 0
    skipped_large: int = 0
    skipped_outside: int = 0
    file_limit_hit: bool = False
    match_limit_hit: bool = False


def _grep_file(
    file: Path,
    rel: str,
    regex: re.Pattern[str],
    out: list[str],
    max_matches: int,
    stats: _GrepStats,
) -> None:
    found = False
    with file.open("r", encoding="utf-8", errors="replace", newline="") as f:
        for number, raw in enumerate(f, start=1):
            line = raw.rstrip("\r\n")
            match = regex.search(line)
            if match is None:
                continue
            if len(out) >= max_matches:
                stats.match_limit_hit = True
                break
            found = True
            out.append(f"{rel}:{number}: {_show_line(line, match)}")
    if found:
        stats.files_with_matches += 1


@handlers("grep_files")
def grep_files(
    pattern: str,
    ctx: ToolContext,
    path: str = ".",
    glob: str = "",
    ignore_case: bool = False,
    max_matches: int = 100,
) -> ToolResult:
    try:
        regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        where = f" at position {exc.pos}" if exc.pos is not None else ""
        return ToolResult.error(
            f"Invalid regular expression {pattern!r}: {exc.msg}{where}. The pattern is a Python "
            "regular expression; escape special characters such as ( [ . * + ? with a "
            "backslash to match them literally."
        )
    try:
        root_text, glob = _split_glob(path, glob)
        home, root = _resolve(ctx, root_text)
        shown_root = display_path(home, root)
        if not root.exists():
            raise ToolFailure(f"No such file or directory: {shown_root}.")
        segments = _glob_segments(glob)
        if root.is_file():
            candidates: Iterator[tuple[Path, str]] = iter([(root, shown_root)])
        else:
            candidates = (
                (file, rel if shown_root == "." else f"{shown_root}/{rel}")
                for file, rel in _walk_files(root, segments)
            )
        stats = _GrepStats()
        out: list[str] = []
        for file, rel in candidates:
            if stats.match_limit_hit:
                break
            if stats.scanned >= GREP_MAX_FILES:
                stats.file_limit_hit = True
                break
            if ctx.signal.aborted:
                return ToolResult.error("grep_files was aborted.")
            try:
                real = resolve_in_home(home, str(file))
            except ToolFailure:
                stats.skipped_outside += 1  # a symlink pointing out of the home
                continue
            try:
                if not real.is_file():
                    continue
                if real.stat().st_size > GREP_MAX_FILE_BYTES:
                    stats.skipped_large += 1
                    continue
                if is_binary_file(real):
                    stats.skipped_binary += 1
                    continue
                stats.scanned += 1
                _grep_file(real, rel, regex, out, max_matches, stats)
            except OSError:
                continue
    except ToolFailure as failure:
        return failure.result()

    where = f"{shown_root}" + (f" (glob {glob!r})" if glob else "")
    details = {
        "matches": len(out),
        "files_scanned": stats.scanned,
        "files_with_matches": stats.files_with_matches,
        "skipped_binary": stats.skipped_binary,
        "skipped_large": stats.skipped_large,
        "skipped_outside_home": stats.skipped_outside,
        "match_limit_hit": stats.match_limit_hit,
        "file_limit_hit": stats.file_limit_hit,
    }
    if not out:
        head = f"No matches for /{pattern}/ in {stats.scanned} file(s) under {where}."
        lines = [head]
    else:
        head = (
            f"{len(out)} match(es) for /{pattern}/ in {stats.files_with_matches} file(s) "
            f"under {where} ({stats.scanned} file(s) scanned):"
        )
        lines = [head, *out]
    if stats.match_limit_hit:
        lines.append(
            f"[Stopped at {max_matches} matches; there are more. Narrow the pattern, path or "
            "glob, or raise max_matches.]"
        )
    if stats.file_limit_hit:
        lines.append(
            f"[Stopped after scanning {GREP_MAX_FILES} files; narrow the path or glob to "
            "search the rest.]"
        )
    skipped = []
    if stats.skipped_binary:
        skipped.append(f"{stats.skipped_binary} binary")
    if stats.skipped_large:
        skipped.append(f"{stats.skipped_large} larger than {_human_size(GREP_MAX_FILE_BYTES)}")
    if stats.skipped_outside:
        skipped.append(f"{stats.skipped_outside} linking outside the home directory")
    if skipped:
        lines.append(f"[Skipped files: {', '.join(skipped)}.]")
    return ToolResult(content="\n".join(lines), details=details)


# -- list_files ------------------------------------------------------------------------


@dataclass(slots=True)
class _Listing:
    home: Path
    entries: list[str]
    limit: int
    visited: int = 0
    more: int = 0
    walk_limit_hit: bool = False


def _entry_line(rel: str, entry: os.DirEntry[str], home: Path) -> str | None:
    try:
        if entry.is_symlink():
            line = f"{rel} -> {os.readlink(entry.path)}"
            try:
                resolve_in_home(home, entry.path)
            except ToolFailure:
                line += " (outside the home directory: not accessible)"
            return line
        if entry.is_dir(follow_symlinks=False):
            return f"{rel}/"
        return f"{rel}  {_human_size(entry.stat(follow_symlinks=False).st_size)}"
    except OSError:
        return None


def _list_dir(
    directory: Path,
    prefix: str,
    depth: int,
    segments: list[str] | None,
    listing: _Listing,
) -> None:
    try:
        with os.scandir(directory) as it:
            entries = list(it)
    except OSError:
        return
    entries.sort(key=lambda e: (not _is_real_dir(e), e.name.lower(), e.name))
    for entry in entries:
        if listing.visited >= LIST_MAX_VISITED:
            listing.walk_limit_hit = True
            return
        listing.visited += 1
        rel = f"{prefix}{entry.name}"
        is_dir = _is_real_dir(entry)
        if segments is None or (not is_dir and _glob_matches(segments, rel)):
            line = _entry_line(rel, entry, listing.home)
            if line is not None:
                if len(listing.entries) < listing.limit:
                    listing.entries.append(line)
                else:
                    listing.more += 1
        if is_dir and depth > 1:
            _list_dir(Path(entry.path), f"{rel}/", depth - 1, segments, listing)


def _is_real_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


@handlers("list_files")
def list_files(
    ctx: ToolContext, path: str = ".", glob: str = "", depth: int = 1, limit: int = 200
) -> ToolResult:
    try:
        root_text, glob = _split_glob(path, glob)
        home, root = _resolve(ctx, root_text)
        shown = display_path(home, root)
        if not root.exists():
            raise ToolFailure(f"No such file or directory: {shown}.")
        if not root.is_dir():
            size = root.stat().st_size
            return ToolResult(content=f"{shown}  {_human_size(size)} (a file, not a directory)")
        listing = _Listing(home=home, entries=[], limit=limit)
        _list_dir(root, "", depth, _glob_segments(glob), listing)
    except ToolFailure as failure:
        return failure.result()
    except OSError as exc:
        return ToolResult.error(f"Cannot list {path}: {exc.strerror or exc}")

    title = "the home directory" if shown == "." else f"{shown}/"
    filters = [f"depth {depth}"] + ([f"glob {glob!r}"] if glob else [])
    lines = [f"Contents of {title} ({', '.join(filters)}); paths are relative to it:"]
    lines += listing.entries or ["(no entries)" if not glob else "(no files match the glob)"]
    if listing.more or listing.walk_limit_hit:
        more = f"{listing.more}{'+' if listing.walk_limit_hit else ''}"
        lines.append(
            f"[Showing the first {len(listing.entries)} entries; {more} more not shown. "
            "Use a glob, a subdirectory, a smaller depth or a larger limit.]"
        )
    details = {
        "path": shown,
        "entries": len(listing.entries),
        "more": listing.more,
        "walk_limit_hit": listing.walk_limit_hit,
    }
    return ToolResult(content="\n".join(lines), details=details)


# -- write_file / edit_file ---------------------------------------------------------------


def _write(target: Path, shown: str, text: str) -> bool:
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ToolFailure(f"Cannot write {shown}: the content is not valid text ({exc}).") from exc
    try:
        return atomic_write(target, data)
    except OSError as exc:
        raise ToolFailure(f"Cannot write {shown}: {exc.strerror or exc}.") from exc


@handlers("write_file")
def write_file(path: str, content: str, ctx: ToolContext) -> ToolResult:
    try:
        home, target = _resolve(ctx, path)
        shown = display_path(home, target)
        if target == home or target.is_dir():
            raise ToolFailure(f"{shown} is a directory; give a file path to write.")
        for parent in target.parents:
            if parent == home:
                break
            if parent.exists() and not parent.is_dir():
                raise ToolFailure(
                    f"Cannot write {shown}: {display_path(home, parent)} is a file, not a "
                    "directory."
                )
        existed = _write(target, shown, content)
    except ToolFailure as failure:
        return failure.result()
    size = len(content.encode("utf-8"))
    lines = content.count("\n") + (1 if content and not content.endswith("\n") else 0)
    verb = "Overwrote" if existed else "Created"
    return ToolResult(
        content=f"{verb} {shown} ({size} bytes, {lines} line(s)).",
        details={"path": shown, "bytes": size, "created": not existed},
    )


def _line_numbers(text: str, needle: str, limit: int = 10) -> list[int]:
    numbers: list[int] = []
    start = 0
    while len(numbers) < limit:
        at = text.find(needle, start)
        if at < 0:
            break
        numbers.append(text.count("\n", 0, at) + 1)
        start = at + len(needle)
    return numbers


@handlers("edit_file")
def edit_file(
    path: str,
    old_string: str,
    new_string: str,
    ctx: ToolContext,
    replace_all: bool = False,
) -> ToolResult:
    try:
        home, target = _resolve(ctx, path)
        shown = display_path(home, target)
        if old_string == "":
            raise ToolFailure(
                "old_string is empty. Give the exact text to replace; to create or replace a "
                "whole file use write_file."
            )
        if old_string == new_string:
            raise ToolFailure("old_string and new_string are identical; nothing would change.")
        if not target.exists():
            raise ToolFailure(f"No such file: {shown}. Use write_file to create a new file.")
        if target.is_dir():
            raise ToolFailure(f"{shown} is a directory, not a file.")
        raw = target.read_bytes()
        if looks_binary(raw[:BINARY_SNIFF_BYTES]):
            raise ToolFailure(f"{shown} looks like a binary file; edit_file only edits text.")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ToolFailure(f"{shown} is not UTF-8 text ({exc.reason}); cannot edit it.") from exc
        old, new = old_string, new_string
        count = text.count(old)
        if count == 0 and "\r\n" in text and "\n" in old and "\r\n" not in old:
            # The file uses CRLF line endings; the model wrote LF.
            crlf_old = old.replace("\n", "\r\n")
            if text.count(crlf_old):
                old, new = crlf_old, new.replace("\r\n", "\n").replace("\n", "\r\n")
                count = text.count(old)
        if count == 0:
            raise ToolFailure(
                f"old_string was not found in {shown}. It must match the file exactly, "
                "including whitespace, indentation and line breaks; read the file with "
                "read_document and copy the text exactly (without the line-number prefix)."
            )
        lines = _line_numbers(text, old)
        if count > 1 and not replace_all:
            where = ", ".join(map(str, lines)) + (", …" if count > len(lines) else "")
            raise ToolFailure(
                f"old_string occurs {count} times in {shown} (starting on lines {where}). "
                "Include more surrounding text so that it matches exactly one place, or set "
                "replace_all=true to replace every occurrence."
            )
        updated = text.replace(old, new) if replace_all else text.replace(old, new, 1)
        _write(target, shown, updated)
    except ToolFailure as failure:
        return failure.result()
    except OSError as exc:
        return ToolResult.error(f"Cannot edit {path}: {exc.strerror or exc}.")
    where = ", ".join(map(str, lines)) + (", …" if count > len(lines) else "")
    noun = "occurrence" if count == 1 else "occurrences"
    return ToolResult(
        content=f"Replaced {count} {noun} in {shown} (line {where}).",
        details={"path": shown, "replacements": count, "lines": lines},
    )
