"""Walking a directory tree by descriptor, and the globs the file tools match paths with.

A search must not be steered out of the home by a directory that turns into a symlink
while it is walked, so :func:`walk_files` never opens a directory by its full name: each
one is opened from its parent's descriptor with ``O_NOFOLLOW | O_DIRECTORY``, and what
it yields is a directory descriptor and a name for the caller to open the same way.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from fnmatch import fnmatchcase
from pathlib import Path

from ._confined import DIR_FLAGS

__all__ = ["SKIP_DIRS", "glob_matches", "glob_segments", "split_glob", "walk_files"]

# Directories that are almost never what a search means and can be huge.
SKIP_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", ".tox"})

_GLOB_CHARS = frozenset("*?[")


def split_glob(path: str, glob: str) -> tuple[str, str]:
    """Let ``path`` itself be a glob (``src/**/*.py``): split off its literal prefix."""
    if glob.strip() or not any(c in path for c in _GLOB_CHARS):
        return path, glob.strip()
    parts = Path(path).parts
    for i, part in enumerate(parts):
        if any(c in part for c in _GLOB_CHARS):
            root = str(Path(*parts[:i])) if i else "."
            return root, "/".join(parts[i:])
    return path, glob  # pragma: no cover


def glob_segments(glob: str) -> list[str] | None:
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


def glob_matches(segments: list[str] | None, rel: str) -> bool:
    """Match a path relative to the search root.

    A glob without ``/`` matches the file name at any depth (``*.py``); one with ``/``
    matches the whole relative path, ``**`` standing for any number of directories.
    """
    if segments is None:
        return True
    if len(segments) == 1 and segments[0] != "**":
        return fnmatchcase(rel.rsplit("/", 1)[-1], segments[0])
    return _match_segments(segments, rel.split("/"))


def walk_files(
    dir_fd: int, segments: list[str] | None, prefix: str = ""
) -> Generator[tuple[int, str, str, bool], None, None]:
    """(directory fd, name, path relative to the root, is a symlink) of matching files.

    Walked by descriptor: each directory's files (sorted), then its subdirectories
    (sorted, :data:`SKIP_DIRS` left out), each opened from its parent without following
    a symlink; symlinked directories are not walked, as ``os.walk`` does not.
    """
    try:
        with os.scandir(dir_fd) as it:
            entries = list(it)
    except OSError:
        return
    names: list[tuple[str, bool]] = []
    subdirs: list[str] = []
    for entry in entries:
        try:
            is_dir, is_link = entry.is_dir(), entry.is_symlink()
        except OSError:
            is_dir, is_link = False, False
        if not is_dir:
            names.append((entry.name, is_link))
        elif not is_link and entry.name not in SKIP_DIRS:
            subdirs.append(entry.name)
    for name, is_link in sorted(names):
        rel = f"{prefix}{name}"
        if glob_matches(segments, rel):
            yield dir_fd, name, rel, is_link
    for name in sorted(subdirs):
        try:
            sub = os.open(name, DIR_FLAGS, dir_fd=dir_fd)
        except OSError:
            continue  # gone, or swapped for a symlink since the listing: not followed
        try:
            yield from walk_files(sub, segments, f"{prefix}{name}/")
        finally:
            os.close(sub)
