"""File tools: read, search, list, write and edit files inside the agent's home directory.

Every path goes through :func:`~tooldeck.builtin._common.resolve_in_home`; nothing here
reads or writes outside the home, whether by ``..``, an absolute path or a symlink. What
is then read or written is opened by descriptor from the home
(:func:`~tooldeck.builtin._common.locate`), never by its full name, so a process racing
the tool (swapping a directory for a symlink between the check and the use) cannot
redirect it; directories are walked the same way. Symlinks that stay inside the home are
followed; one that leads out is refused (or skipped, when searching or listing).

``edit_file`` is a compare-and-swap: it reads the file and its identity, computes the
change, then, holding an exclusive lock on the file, replaces it only if it is still
the same file with the same bytes; otherwise it fails and says to read the file again.
``write_file`` takes the same lock, so an edit never silently undoes a write. Files
larger than :data:`EDIT_MAX_BYTES` are refused before anything is read.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ..context import ToolContext
from ..registry import Handlers
from ..result import ToolResult
from ._common import (
    BINARY_SNIFF_BYTES,
    ToolFailure,
    display_path,
    exclusive,
    home_of,
    locate,
    looks_binary,
    read_upto,
    resolve_in_home,
    same_file,
    write_locked,
)
from ._confined import DIR_FLAGS, READ_FLAGS, Home, LeavesHome, Spot, replace_at
from ._tree import glob_matches, glob_segments, split_glob, walk_files

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
# edit_file
EDIT_MAX_BYTES = 10 * 1024 * 1024  # larger files are refused before they are read


# -- shared ------------------------------------------------------------------------------


def _human_size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"  # pragma: no cover


def _resolve(ctx: ToolContext, path: str) -> tuple[Path, Path]:
    home = home_of(ctx)
    return home, resolve_in_home(home, path)


def _open_file(
    confined: Home, path: str, target: Path, shown: str, missing: str, directory: str
) -> tuple[Spot, os.stat_result]:
    """``target`` opened for reading by descriptor: a regular file, else a clear failure."""
    try:
        spot = locate(confined, path, target, open_flags=READ_FLAGS)
    except (FileNotFoundError, NotADirectoryError):
        raise ToolFailure(missing) from None
    if spot.fd is None:
        spot.close()
        raise ToolFailure(missing)
    try:
        st = os.fstat(spot.fd)
        if stat.S_ISDIR(st.st_mode):
            raise ToolFailure(directory)
        if not stat.S_ISREG(st.st_mode):
            raise ToolFailure(
                f"{shown} is not a regular file (a device, FIFO or socket); file tools only "
                "work on regular files."
            )
    except BaseException:
        spot.close()
        raise
    return spot, st


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
        with Home(home) as confined:
            spot, st = _open_file(
                confined,
                path,
                target,
                shown,
                missing=f"No such file: {shown}. Use list_files to see what exists.",
                directory=f"{shown} is a directory, not a file. Use list_files to list it.",
            )
        with spot:
            assert spot.fd is not None
            size = st.st_size
            sample = os.pread(spot.fd, BINARY_SNIFF_BYTES, 0)
            if looks_binary(sample):
                raise ToolFailure(
                    f"{shown} looks like a binary file ({_human_size(size)}); read_document "
                    "only reads text files."
                )
            page = _read_page(spot.fd, offset, limit, size)
    except ToolFailure as failure:
        return failure.result()
    except OSError as exc:
        return ToolResult.error(f"Cannot read {path}: {exc.strerror or exc}")
    return _render_page(shown, offset, page)


@dataclass(slots=True)
class _Page:
    out: list[str]
    total: int = 0
    last_shown: int = 0
    cut_lines: int = 0
    stopped_by_chars: bool = False
    total_known: bool = True


def _read_page(fd: int, offset: int, limit: int, size: int) -> _Page:
    page = _Page(out=[], last_shown=offset - 1)
    out = page.out
    chars = 0
    with open(fd, encoding="utf-8", errors="replace", newline="", closefd=False) as f:
        for number, (text, length, _nl) in enumerate(_lines(f), start=1):
            page.total = number
            if number >= offset + limit or page.stopped_by_chars:
                if size > READ_COUNT_MAX_BYTES:
                    page.total_known = False  # do not read a huge file to the end to count
                    break
                continue
            if number < offset:
                continue
            if length > READ_LINE_CHARS:
                text = (
                    text[:READ_LINE_CHARS]
                    + f"… [line cut: {length - READ_LINE_CHARS} more characters]"
                )
                page.cut_lines += 1
            line = f"{number:>6}\t{text}"
            if out and chars + len(line) + 1 > READ_MAX_CHARS:
                page.stopped_by_chars = True
                continue
            out.append(line)
            chars += len(line) + 1
            page.last_shown = number
    return page


def _render_page(shown: str, offset: int, page: _Page) -> ToolResult:
    out, total, last_shown = page.out, page.total, page.last_shown
    total_known, stopped_by_chars, cut_lines = (
        page.total_known,
        page.stopped_by_chars,
        page.cut_lines,
    )
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
    fd: int,
    rel: str,
    regex: re.Pattern[str],
    out: list[str],
    max_matches: int,
    stats: _GrepStats,
) -> None:
    found = False
    with open(fd, encoding="utf-8", errors="replace", newline="", closefd=False) as f:
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


def _grep_one(
    fd: int, rel: str, regex: re.Pattern[str], out: list[str], max_matches: int, stats: _GrepStats
) -> None:
    """Grep the open file ``fd`` unless it is not a regular file, too large or binary."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        return
    if st.st_size > GREP_MAX_FILE_BYTES:
        stats.skipped_large += 1
        return
    if looks_binary(os.pread(fd, BINARY_SNIFF_BYTES, 0)):
        stats.skipped_binary += 1
        return
    stats.scanned += 1
    _grep_file(fd, rel, regex, out, max_matches, stats)


def _open_in_walk(
    confined: Home, root: tuple[str, ...], dir_fd: int, name: str, rel: str, is_link: bool
) -> int | None:
    """The walked file opened for reading; a symlink is followed inside the home only.

    Raises :class:`LeavesHome` for a link out of the home; ``None`` if it cannot be opened.
    """
    if not is_link:
        try:
            return os.open(name, READ_FLAGS, dir_fd=dir_fd)
        except OSError:
            return None  # gone, or swapped for a symlink since the listing
    try:
        spot = confined.locate((*root, *rel.split("/")), open_flags=READ_FLAGS)
    except LeavesHome:
        raise
    except OSError:
        return None
    fd, spot.fd = spot.fd, None
    spot.close()
    return fd


def _open_root(confined: Home, path: str, root: Path, shown: str) -> Spot:
    """The directory (or file) to search or list, opened by descriptor; it must exist."""
    missing = ToolFailure(f"No such file or directory: {shown}.")
    try:
        spot = locate(confined, path, root, open_flags=READ_FLAGS)
    except (FileNotFoundError, NotADirectoryError):
        raise missing from None
    if spot.fd is None:
        spot.close()
        raise missing
    return spot


def _grep_tree(
    confined: Home,
    spot: Spot,
    shown_root: str,
    segments: list[str] | None,
    regex: re.Pattern[str],
    out: list[str],
    max_matches: int,
    stats: _GrepStats,
    ctx: ToolContext,
) -> bool:
    """Grep the files under the directory ``spot``; ``False`` if the call was aborted."""
    assert spot.fd is not None
    with closing(walk_files(spot.fd, segments)) as walk:
        for dir_fd, name, rel, is_link in walk:
            if stats.match_limit_hit:
                break
            if stats.scanned >= GREP_MAX_FILES:
                stats.file_limit_hit = True
                break
            if ctx.signal.aborted:
                return False
            try:
                fd = _open_in_walk(confined, spot.parts, dir_fd, name, rel, is_link)
            except LeavesHome:
                stats.skipped_outside += 1  # a symlink pointing out of the home
                continue
            if fd is None:
                continue
            shown = rel if shown_root == "." else f"{shown_root}/{rel}"
            try:
                _grep_one(fd, shown, regex, out, max_matches, stats)
            except OSError:
                continue
            finally:
                os.close(fd)
    return True


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
    stats = _GrepStats()
    out: list[str] = []
    try:
        root_text, glob = split_glob(path, glob)
        home, root = _resolve(ctx, root_text)
        shown_root = display_path(home, root)
        segments = glob_segments(glob)
        with Home(home) as confined, _open_root(confined, root_text, root, shown_root) as spot:
            assert spot.fd is not None
            if not stat.S_ISDIR(os.fstat(spot.fd).st_mode):
                _grep_one(spot.fd, shown_root, regex, out, max_matches, stats)
            elif not _grep_tree(
                confined, spot, shown_root, segments, regex, out, max_matches, stats, ctx
            ):
                return ToolResult.error("grep_files was aborted.")
    except ToolFailure as failure:
        return failure.result()
    except OSError as exc:
        return ToolResult.error(f"Cannot search {path}: {exc.strerror or exc}")

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
    confined: Home
    root: tuple[str, ...]  # the listed directory, relative to the home
    entries: list[str]
    limit: int
    visited: int = 0
    more: int = 0
    walk_limit_hit: bool = False

    def leads_out(self, rel: str) -> bool:
        """Whether the symlink at ``rel`` (under the root) leads out of the home."""
        try:
            self.confined.locate((*self.root, *rel.split("/"))).close()
        except LeavesHome:
            return True
        except OSError:
            pass  # dangling, a loop...: not outside, just not usable
        return False


def _entry_line(rel: str, entry: os.DirEntry[str], dir_fd: int, listing: _Listing) -> str | None:
    try:
        if entry.is_symlink():
            line = f"{rel} -> {os.readlink(entry.name, dir_fd=dir_fd)}"
            if listing.leads_out(rel):
                line += " (outside the home directory: not accessible)"
            return line
        if entry.is_dir(follow_symlinks=False):
            return f"{rel}/"
        return f"{rel}  {_human_size(entry.stat(follow_symlinks=False).st_size)}"
    except OSError:
        return None


def _list_dir(
    dir_fd: int,
    prefix: str,
    depth: int,
    segments: list[str] | None,
    listing: _Listing,
) -> None:
    try:
        with os.scandir(dir_fd) as it:
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
        if segments is None or (not is_dir and glob_matches(segments, rel)):
            line = _entry_line(rel, entry, dir_fd, listing)
            if line is not None:
                if len(listing.entries) < listing.limit:
                    listing.entries.append(line)
                else:
                    listing.more += 1
        if is_dir and depth > 1:
            try:
                sub = os.open(entry.name, DIR_FLAGS, dir_fd=dir_fd)
            except OSError:
                continue  # gone, or swapped for a symlink since the listing: not followed
            try:
                _list_dir(sub, f"{rel}/", depth - 1, segments, listing)
            finally:
                os.close(sub)


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
        root_text, glob = split_glob(path, glob)
        home, root = _resolve(ctx, root_text)
        shown = display_path(home, root)
        with Home(home) as confined, _open_root(confined, root_text, root, shown) as spot:
            assert spot.fd is not None
            st = os.fstat(spot.fd)
            if not stat.S_ISDIR(st.st_mode):
                return ToolResult(
                    content=f"{shown}  {_human_size(st.st_size)} (a file, not a directory)"
                )
            listing = _Listing(confined=confined, root=spot.parts, entries=[], limit=limit)
            _list_dir(spot.fd, "", depth, glob_segments(glob), listing)
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


def _encode(text: str, shown: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ToolFailure(f"Cannot write {shown}: the content is not valid text ({exc}).") from exc


@handlers("write_file")
def write_file(path: str, content: str, ctx: ToolContext) -> ToolResult:
    shown = path
    try:
        home, target = _resolve(ctx, path)
        shown = display_path(home, target)
        if target == home:
            raise ToolFailure(f"{shown} is a directory; give a file path to write.")
        data = _encode(content, shown)
        with Home(home) as confined:
            try:
                spot = locate(confined, path, target, make_dirs=True)
            except NotADirectoryError as exc:
                parent = display_path(home, home / str(exc.filename))
                raise ToolFailure(
                    f"Cannot write {shown}: {parent} is a file, not a directory."
                ) from exc
        with spot:
            if spot.name == ".":
                raise ToolFailure(f"{shown} is a directory; give a file path to write.")
            existed = write_locked(spot, shown, data)
    except ToolFailure as failure:
        return failure.result()
    except OSError as exc:
        return ToolResult.error(f"Cannot write {shown}: {exc.strerror or exc}.")
    size = len(data)
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


def _too_large(shown: str, size: int) -> ToolFailure:
    return ToolFailure(
        f"{shown} is {_human_size(size)}; edit_file only edits files up to "
        f"{_human_size(EDIT_MAX_BYTES)}, which it reads whole. Replace the file with "
        "write_file, or split it into smaller files."
    )


def _changed(shown: str) -> ToolFailure:
    return ToolFailure(
        f"{shown} changed while this edit was being made (another edit or process wrote "
        "it), so the edit was not applied; read it again with read_document and redo the "
        "edit on what it holds now."
    )


def _replacement(
    text: str, shown: str, old_string: str, new_string: str, replace_all: bool
) -> tuple[str, int, list[int]]:
    """The edited text, how many places changed and the first lines they start on."""
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
    return updated, count, lines


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
        with Home(home) as confined:
            spot, st = _open_file(
                confined,
                path,
                target,
                shown,
                missing=f"No such file: {shown}. Use write_file to create a new file.",
                directory=f"{shown} is a directory, not a file.",
            )
        with spot:
            assert spot.fd is not None
            # Compare: the size is checked before anything is read, the bytes kept.
            if st.st_size > EDIT_MAX_BYTES:
                raise _too_large(shown, st.st_size)
            if looks_binary(os.pread(spot.fd, BINARY_SNIFF_BYTES, 0)):
                raise ToolFailure(f"{shown} looks like a binary file; edit_file only edits text.")
            raw = read_upto(spot.fd, EDIT_MAX_BYTES)
            if len(raw) > EDIT_MAX_BYTES:  # it grew since fstat
                raise _too_large(shown, os.fstat(spot.fd).st_size)
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ToolFailure(
                    f"{shown} is not UTF-8 text ({exc.reason}); cannot edit it."
                ) from exc
            updated, count, lines = _replacement(text, shown, old_string, new_string, replace_all)
            data = _encode(updated, shown)
            # Swap: only if the name still holds the same file with the same bytes.
            with exclusive(spot.fd, shown):
                if not same_file(spot, st) or read_upto(spot.fd, EDIT_MAX_BYTES) != raw:
                    raise _changed(shown)
                replace_at(spot.dir_fd, spot.name, data, mode=stat.S_IMODE(st.st_mode))
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
