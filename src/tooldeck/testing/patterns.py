"""Strings a regular expression matches, sampled from the expression itself.

A JSON Schema ``pattern`` is searched for anywhere in the string (unanchored). The sampler
reads the pattern with Python's own regular-expression parser and writes the shortest
string it describes (each repeat its minimum, each alternative the first, each class its
first member), then, for a ``minLength``, the same with every repeat one longer and so on.
What it cannot read (look-arounds, back-references, a pattern Python refuses) gives no
sample; the caller then tries plain strings.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

try:  # Python 3.11+: the parser behind ``re`` (``sre_parse`` before, now deprecated)
    from re import _parser as _sre  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover
    import sre_parse as _sre

__all__ = ["sample_pattern"]

_MAXREPEAT = 40  # an unbounded repeat writes at most this many (when a length asks more)
_CATEGORY = {
    "CATEGORY_DIGIT": "0",
    "CATEGORY_NOT_DIGIT": "a",
    "CATEGORY_WORD": "a",
    "CATEGORY_NOT_WORD": "-",
    "CATEGORY_SPACE": " ",
    "CATEGORY_NOT_SPACE": "a",
}


_CANDIDATES = "abcxyzABC0129_-.:/@ " + "".join(map(chr, range(0xA1, 0x100)))
_IN_CATEGORY: dict[str, Callable[[str], bool]] = {
    "CATEGORY_DIGIT": str.isdigit,
    "CATEGORY_NOT_DIGIT": lambda c: not c.isdigit(),
    "CATEGORY_WORD": lambda c: c.isalnum() or c == "_",
    "CATEGORY_NOT_WORD": lambda c: not (c.isalnum() or c == "_"),
    "CATEGORY_SPACE": str.isspace,
    "CATEGORY_NOT_SPACE": lambda c: not c.isspace(),
}


def _in_category(c: str, kind: str) -> bool:
    test = _IN_CATEGORY.get(kind)
    if test is None:
        raise _Unsupported(kind)
    return bool(test(c))


class _Unsupported(Exception):
    pass


def sample_pattern(pattern: str, min_length: int = 0, nth: int = 0) -> list[str]:
    """Strings ``pattern`` matches (checked with :func:`re.search`), shortest first;
    empty when the sampler cannot read the pattern."""
    try:
        parsed = _sre.parse(pattern)
    except (re.error, RecursionError, OverflowError):
        return []
    found: list[str] = []
    for extra in range(0, _MAXREPEAT, 1 if min_length < 8 else max(1, min_length // 8)):
        try:
            text = _write(parsed, extra, nth)
        except (_Unsupported, RecursionError):
            return found
        if text not in found and re.search(pattern, text) is not None:
            found.append(text)
            if len(text) >= min_length:
                break
    return found


def _write(parsed: Any, extra: int, nth: int) -> str:
    return "".join(_one(op, arg, extra, nth) for op, arg in parsed)


def _one(op: Any, arg: Any, extra: int, nth: int) -> str:
    name = str(op)
    if name == "LITERAL":
        return chr(arg)
    if name == "NOT_LITERAL":
        return "a" if chr(arg) != "a" else "b"
    if name == "ANY":
        return "a"
    if name == "IN":
        return _member(arg, nth)
    if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
        low, high, body = arg
        count = low + extra
        if high is not _sre.MAXREPEAT:
            count = min(count, high)
        return "".join(_write(body, extra, nth) for _ in range(count))
    if name == "SUBPATTERN":
        return _write(arg[-1], extra, nth)
    if name == "ATOMIC_GROUP":
        return _write(arg, extra, nth)
    if name == "BRANCH":
        return _write(arg[1][0], extra, nth)
    if name == "AT":
        return ""
    if name == "CATEGORY":
        return _CATEGORY.get(str(arg), "a")
    raise _Unsupported(name)


def _member(items: Any, nth: int) -> str:
    """A character of a class ``[...]``: the first it allows (``nth`` steps into a range)."""
    negated = bool(items) and str(items[0][0]) == "NEGATE"
    if negated:
        excluded: set[str] = set()
        kinds: set[str] = set()
        for op, arg in items[1:]:
            if str(op) == "LITERAL":
                excluded.add(chr(arg))
            elif str(op) == "RANGE":
                excluded.update(chr(c) for c in range(arg[0], arg[1] + 1))
            elif str(op) == "CATEGORY":
                kinds.add(str(arg))
            else:
                raise _Unsupported("a negated class of " + str(op))
        for c in _CANDIDATES:
            if c not in excluded and not any(_in_category(c, k) for k in kinds):
                return c
        raise _Unsupported("a negated class that excludes every candidate")
    for op, arg in items:
        kind = str(op)
        if kind == "LITERAL":
            return chr(arg)
        if kind == "RANGE":
            low, high = arg
            return chr(low + nth % (high - low + 1))
        if kind == "CATEGORY":
            return _CATEGORY.get(str(arg), "a")
    raise _Unsupported("an empty class")
