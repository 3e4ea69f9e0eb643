"""The ``uri`` test of a policy rule: a URI (an MCP resource's) against glob patterns.

``args = { uri = { uri = ["file:///etc/*", "demo://resource/secret/*"] } }`` holds when
the argument, read as a URI, matches one of the patterns. Before matching, the value's
scheme and host are lower-cased and the percent-escapes of its path decoded (so
``FILE:///etc/%70asswd`` is ``file:///etc/passwd``); the patterns' scheme and host are
lower-cased too. In a pattern ``*`` is any run of characters, ``/`` included, and ``?``
one character (:func:`fnmatch.fnmatchcase`).

A value that could name another place than it spells is **uncertain** (a deny or ask
rule matches it, an allow rule does not): not a string, no scheme, a ``.`` or ``..``
segment, an empty segment (``//`` in the path), a backslash, a control character or
space, an escape that decodes to ``%`` again or is not UTF-8. A server resolving such a
URI its own way can then never be walked out of a denied pattern.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator, Sequence
from urllib.parse import unquote, urlsplit

__all__ = ["normal_pattern", "normal_uri", "uri_matches", "uri_samples"]


def _unsafe(text: str) -> bool:
    return any(ord(c) < 0x21 or c == "\x7f" or c == "\\" for c in text)


def _lowered_authority(text: str) -> str:
    scheme, sep, rest = text.partition(":")
    if not sep:
        return text
    if rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        return f"{scheme.lower()}://{authority.lower()}{slash}{path}"
    return f"{scheme.lower()}:{rest}"


def normal_pattern(pattern: str) -> str:
    """A pattern with its scheme and host lower-cased."""
    return _lowered_authority(pattern.strip())


def normal_uri(value: object) -> str | None:
    """``value`` as the URI it names (see the module docstring), or ``None`` (uncertain)."""
    if not isinstance(value, str) or not value or _unsafe(value):
        return None
    try:
        parts = urlsplit(value)
        path = unquote(parts.path, errors="strict")
    except (ValueError, UnicodeDecodeError):
        return None
    if not parts.scheme or "%" in path or _unsafe(path):
        return None
    segments = path.split("/")
    inner = segments[1:-1] if path.startswith("/") else segments[:-1]
    if any(s in (".", "..") for s in segments) or any(not s for s in inner):
        return None
    netloc = parts.netloc.lower()
    scheme = parts.scheme.lower()
    slashes = value[len(scheme) + 1 : len(scheme) + 3] == "//"
    head = f"{scheme}://{netloc}" if slashes else f"{scheme}:"
    tail = (f"?{parts.query}" if parts.query else "") + (
        f"#{parts.fragment}" if parts.fragment else ""
    )
    return head + path + tail


def uri_matches(value: object, patterns: Sequence[str]) -> bool | None:
    """True / False / uncertain (``None``): ``value`` matches one of ``patterns``."""
    normal = normal_uri(value)
    if normal is None:
        return None
    return any(fnmatch.fnmatchcase(normal, normal_pattern(p)) for p in patterns)


def uri_samples(patterns: Sequence[str]) -> Iterator[str]:
    """Values that between them reach every outcome of a ``uri`` test (for visibility)."""
    for pattern in patterns:
        yield pattern.replace("*", "tooldeck-sample").replace("?", "x")
    yield "tooldeck-sample://tooldeck-sample/"  # matches no pattern but ``*``
    yield "tooldeck-sample://x/../y"  # uncertain for every pattern
