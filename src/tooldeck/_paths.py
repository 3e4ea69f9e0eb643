"""What path a file tool touches: the one normalisation shared by the tools and the policy.

A policy rule on a path argument (``prefix = "secrets/"``) is only worth something if it
judges the same path the tool then opens. So the steps that turn the model's text into
that path live here, below both the built-in file tools (``builtin/_common.py``) and the
policy's predicates (``policy/rules.py``), and neither has its own copy:

1. a NUL character is refused (no file name holds one);
2. surrounding whitespace is dropped, and an empty path means the home itself;
3. ``~`` and ``~/...`` are the agent's home (not the process's);
4. a relative path is taken relative to the home; an absolute path stays as it is;
5. every symbolic link is resolved and ``..`` applied after that, as the OS would;
6. the result must lie in the (resolved) home.
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import TooldeckError

__all__ = ["PathRefused", "home_path", "home_text", "resolve_home", "resolve_in_home"]


class PathRefused(TooldeckError, ValueError):
    """A path no file tool would touch; ``message`` says why, for the model."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def resolve_home(home: str | os.PathLike[str]) -> Path:
    """The home directory as the tools confine to it: absolute, symlinks resolved."""
    return Path(home).resolve()


def home_text(path: str) -> str:
    """Steps 1-3: the path as text, absolute or relative to the home."""
    if "\x00" in path:
        raise PathRefused(f"Path {path!r} contains a NUL character.")
    text = path.strip() or "."
    if text == "~" or text.startswith("~/"):  # "~" is the agent's home, not the process's
        text = "." + text[1:]
    return text


def home_path(home: Path, path: str) -> Path:
    """Steps 1-4: the absolute path ``path`` names, before any link is resolved."""
    raw = Path(home_text(path))
    return raw if raw.is_absolute() else home / raw


def resolve_in_home(home: Path, path: str) -> Path:
    """``path`` (relative to ``home``, or absolute) resolved; refused if it leaves ``home``.

    ``home`` must already be resolved (:func:`resolve_home`). Symlinks are followed,
    including a dangling one whose target is outside, so a link can never be used to
    step out.
    """
    candidate = home_path(home, path)
    try:
        resolved = Path(os.path.realpath(candidate))
    except (OSError, ValueError) as exc:
        raise PathRefused(f"Path {path!r} cannot be resolved: {exc}") from exc
    if resolved != home and not resolved.is_relative_to(home):
        raise PathRefused(
            f"Path {path!r} is outside the agent's home directory ({home}) and was refused; "
            "file tools only work inside the home directory (relative paths are relative "
            "to it)."
        )
    return resolved
