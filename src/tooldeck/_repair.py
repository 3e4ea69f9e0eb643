"""The bounded repair ladder for malformed argument JSON.

Runs only after a strict ``json.loads`` has failed. The rungs below are tried in this
fixed order, each at most once, each only where its pattern is present; after every rung
that changed the text, a strict parse is tried again. Nothing is ever invented: a text
cut inside a string, number, literal or key, or inside an array (whose further elements
may have been lost), is refused.

1. ``extract_json``     unwrap a code fence, or prose around one JSON object (never an
                        element of an array, never cut at a "}" that closes a nested value)
2. ``python_literals``  a Python dict literal (only with Python-quoted strings, and no
                        strings Python would join), or ``True`` / ``False`` / ``None`` tokens
3. ``trailing_commas``  drop commas directly before ``}`` or ``]``
4. ``surplus_closers``  drop closing brackets left over after the object closed
5. ``close_brackets``   close objects left open at the very end, after a complete value

(``double_encoded``, a JSON string holding the JSON object, is handled by the caller:
its text parses, so it is not malformed JSON.)
"""

from __future__ import annotations

import ast
import io
import json
import math
import re
import tokenize
from dataclasses import dataclass, field
from typing import Any

__all__ = ["RUNGS", "RepairFailed", "repair"]

RUNGS = (
    "extract_json",
    "python_literals",
    "trailing_commas",
    "surplus_closers",
    "close_brackets",
)

# Inputs larger than this skip the Python-literal rung (ast is slow and memory-hungry).
_LITERAL_EVAL_LIMIT = 1_000_000
_FENCE = re.compile(r"```[ \t]*(?:json|JSON|json5)?[ \t]*\r?\n?(.*?)```", re.S)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PY_LITERALS = {"True": "true", "False": "false", "None": "null"}
_PY_MARKERS = re.compile(r"\b(?:True|False|None)\b")
_CLOSERS = {"{": "}", "[": "]"}
_JSON_WS = " \t\r\n"


class RepairFailed(Exception):
    def __init__(self, reason: str, tried: list[str]):
        super().__init__(reason)
        self.reason = reason
        self.tried = tried


def _loads(text: str) -> tuple[bool, Any, str]:
    try:
        return True, json.loads(text), ""
    except json.JSONDecodeError as exc:
        return False, None, f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    except (ValueError, RecursionError) as exc:
        return False, None, str(exc) or type(exc).__name__


# --------------------------------------------------------------------------------------
# A small scanner that understands strings and nesting well enough to tell where a text
# stops being JSON, without ever guessing what the missing part was.


@dataclass(slots=True)
class _Scan:
    stack: list[str] = field(default_factory=list)
    in_string: bool = False
    string_is_key: bool = False
    last: str = "start"  # start, open, comma, colon, key, value, number, literal, close
    top_end: int | None = None  # index just past the top-level value's closing bracket
    problem: str | None = None  # invalid (not merely cut) text
    partial_word: bool = False


def _scan(text: str) -> _Scan:
    s = _Scan()
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if s.in_string:
            if ch == "\\":
                i += 2
                continue
            if ch == '"':
                s.in_string = False
                s.last = "key" if s.string_is_key else "value"
            i += 1
            continue
        if ch in " \t\r\n":
            i += 1
            continue
        if s.top_end is not None:
            return s  # text after the top-level value: judged by the caller
        if ch == '"':
            s.in_string = True
            s.string_is_key = bool(s.stack) and s.stack[-1] == "{" and s.last in ("open", "comma")
        elif ch in "{[":
            s.stack.append(ch)
            s.last = "open"
        elif ch in "}]":
            if not s.stack or _CLOSERS[s.stack[-1]] != ch:
                s.problem = f"unexpected {ch!r} at position {i}"
                return s
            s.stack.pop()
            s.last = "close"
            if not s.stack:
                s.top_end = i + 1
        elif ch == ",":
            s.last = "comma"
        elif ch == ":":
            s.last = "colon"
        elif ch in "-0123456789":
            j = i
            while j < n and text[j] in "+-0123456789.eE":
                j += 1
            s.last = "number"
            i = j
            continue
        else:
            m = _WORD.match(text, i)
            if not m:
                s.problem = f"unexpected {ch!r} at position {i}"
                return s
            word = m.group()
            if word in ("true", "false", "null"):
                s.last = "literal"
            elif m.end() == n and any(w.startswith(word) for w in ("true", "false", "null")):
                s.partial_word = True
                s.last = "literal"
            else:
                s.problem = f"unexpected word {word!r} at position {i}"
                return s
            i = m.end()
            continue
        i += 1
    return s


# --------------------------------------------------------------------------------------
# The rungs. Each returns the new text, or None when its pattern is absent.


def _balanced(text: str) -> bool:
    """Whether ``text`` is one bracketed value: its depth returns to 0 only at its end.

    Strings in either quote style are skipped (this also serves Python literals).
    """
    depth = 0
    quote = ""
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth <= 0 and i != n - 1:
                return False
        i += 1
    return depth == 0 and not quote


def _extract_json(text: str) -> str | None:
    fences = _FENCE.findall(text)
    if len(fences) == 1:
        inner: str = fences[0].strip()
        return inner if inner != text.strip(_JSON_WS) else None
    if len(fences) > 1:
        return None  # several blocks: which one is meant would be a guess
    stripped = text.strip()
    start = stripped.find("{")
    if start < 0:
        return None
    if stripped[:start].rstrip().endswith(("[", ",")):
        return None  # the object is an element of an array, not an object wrapped in prose
    end = stripped.rfind("}")
    tail = stripped[end + 1 :] if end > start else ""
    candidate = stripped[start:]
    # Cut at the last "}" only when what follows is prose (no other object) and what
    # precedes is one whole object; otherwise the "}" may close a nested value of a text
    # that was cut later.
    if tail.strip(" \t\r\n}],") and "{" not in tail and _balanced(stripped[start : end + 1]):
        candidate = stripped[start : end + 1]
    return candidate if candidate != text.strip(_JSON_WS) else None


def _json_compatible(value: Any, depth: int = 0) -> bool:
    if depth > 500:
        return False
    if value is None or isinstance(value, bool | int | str):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_json_compatible(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _json_compatible(v, depth + 1) for k, v in value.items())
    return False


def _quote_outside_strings(text: str) -> bool:
    """Whether a ``'`` occurs outside JSON (double-quoted) strings."""
    in_string = False
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if in_string:
            if ch == "\\":
                i += 1
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == "'":
            return True
        i += 1
    return False


def _adjacent_strings(text: str) -> bool:
    """Whether two string literals stand side by side (Python would join them)."""
    previous = None
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT):
                continue
            if token.type == tokenize.STRING and previous == tokenize.STRING:
                return True
            previous = token.type
    except (tokenize.TokenError, SyntaxError):
        return True
    return False


def _python_literals(text: str) -> str | None:
    if not ("'" in text or _PY_MARKERS.search(text)):
        return None
    # Only a text with Python-quoted strings is read as a Python literal: JSON text that
    # merely has an apostrophe inside a string keeps JSON's string semantics.
    if len(text) <= _LITERAL_EVAL_LIMIT and _quote_outside_strings(text):
        try:
            value = ast.literal_eval(text.strip())
        except Exception:  # SyntaxError, ValueError, MemoryError, RecursionError...
            value = None
        if isinstance(value, dict) and _json_compatible(value) and not _adjacent_strings(text):
            return json.dumps(value, ensure_ascii=False)
    out: list[str] = []
    changed = False
    i, n = 0, len(text)
    in_string = False
    while i < n:
        ch = text[i]
        if in_string:
            out.append(ch)
            if ch == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if ch == '"':
                in_string = False
            i += 1
            continue
        if ch == '"':
            in_string = True
            out.append(ch)
            i += 1
            continue
        m = _WORD.match(text, i) if (ch.isalpha() or ch == "_") else None
        if m:
            word = m.group()
            if word in _PY_LITERALS:
                out.append(_PY_LITERALS[word])
                changed = True
            else:
                out.append(word)
            i = m.end()
            continue
        out.append(ch)
        i += 1
    return "".join(out) if changed else None


def _trailing_commas(text: str) -> str | None:
    out: list[str] = []
    changed = False
    i, n = 0, len(text)
    in_string = False
    while i < n:
        ch = text[i]
        if in_string:
            out.append(ch)
            if ch == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if ch == '"':
                in_string = False
            i += 1
            continue
        if ch == '"':
            in_string = True
        elif ch == ",":
            j = i + 1
            while j < n and text[j] in " \t\r\n":
                j += 1
            if j < n and text[j] in "}]":
                changed = True
                i += 1
                continue
        out.append(ch)
        i += 1
    return "".join(out) if changed else None


def _surplus_closers(text: str) -> str | None:
    s = _scan(text)
    if s.top_end is None or s.problem:
        return None
    tail = text[s.top_end :]
    if tail.strip() and not tail.strip(" \t\r\n}]"):
        return text[: s.top_end]
    return None


def _close_brackets(text: str) -> str:
    """Close what is open at the very end, or raise ``ValueError`` saying why not."""
    s = _scan(text)
    if s.problem:
        raise ValueError(f"not JSON: {s.problem}")
    if s.in_string:
        what = "a key" if s.string_is_key else "a string"
        raise ValueError(f"the text is cut inside {what}; its end cannot be known")
    if s.partial_word:
        raise ValueError("the text is cut inside a literal (true/false/null)")
    if s.top_end is not None or not s.stack:
        raise ValueError("nothing is left open at the end")
    if s.last == "number":
        raise ValueError("the text ends in a number that may have been cut")
    if s.last in ("comma", "colon", "key", "open"):
        raise ValueError("the text is cut before a value or key was complete")
    if "[" in s.stack:
        raise ValueError(
            "the text is cut inside an array; elements after the last one may be missing"
        )
    return text + "".join(_CLOSERS[c] for c in reversed(s.stack))


_STEPS = (
    ("extract_json", _extract_json),
    ("python_literals", _python_literals),
    ("trailing_commas", _trailing_commas),
    ("surplus_closers", _surplus_closers),
)


def repair(text: str, first_error: str) -> tuple[Any, list[str]]:
    """Climb the ladder; return ``(value, rungs_used)`` or raise :class:`RepairFailed`."""
    used: list[str] = []
    error = first_error
    for name, step in _STEPS:
        new = step(text)
        if new is None:
            continue
        used.append(name)
        text = new
        ok, value, error = _loads(text)
        if ok:
            return value, used
    try:
        closed = _close_brackets(text)
    except ValueError as exc:
        raise RepairFailed(f"{error}; cannot repair: {exc}", used) from None
    used.append("close_brackets")
    ok, value, error = _loads(closed)
    if ok:
        return value, used
    raise RepairFailed(f"{error}; repair did not produce JSON", used)
