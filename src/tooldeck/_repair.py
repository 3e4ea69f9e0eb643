"""The bounded repair ladder for malformed argument JSON.

Runs only after a strict ``json.loads`` has failed. The rungs below are tried in this
fixed order, each at most once, each only where its pattern is present; after every rung
that changed the text, a strict parse is tried again. Nothing is ever invented: a text
cut inside a string, number, literal or key, or inside an array (whose further elements
may have been lost), is refused.

1. ``extract_json``     unwrap a code fence, or prose around one JSON object (never an
                        element of an array, never cut at a "}" that closes a nested value)
2. ``python_literals``  Python literal syntax, alone or mixed with JSON's: ``'...'``
                        strings, ``True`` / ``False`` / ``None`` beside ``true`` / ``null``
                        (token by token; never strings Python would join)
3. ``trailing_commas``  drop a comma after a value, directly before ``}`` or ``]``
4. ``surplus_closers``  drop closing brackets left over after the object closed
5. ``close_brackets``   close objects left open at the very end, after a complete value

(``double_encoded``, a JSON string holding the JSON object, is handled by the caller:
its text parses, so it is not malformed JSON.)
"""

from __future__ import annotations

import ast
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from .errors import TooldeckError

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
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?(?![0-9A-Za-z_.])")
_DIGITS = r"[0-9](?:_?[0-9])*"
_PY_NUMBER = re.compile(
    r"[+-]?(?:0[xX](?:_?[0-9a-fA-F])+|0[oO](?:_?[0-7])+|0[bB](?:_?[01])+"
    rf"|(?:{_DIGITS}(?:\.(?:{_DIGITS})?)?|\.{_DIGITS})(?:[eE][+-]?{_DIGITS})?)"
    r"(?![0-9A-Za-z_.])"
)
_CLOSERS = {"{": "}", "[": "]"}
_JSON_WS = " \t\r\n"
# The rest of a string after its opening quote, through its closing quote (a backslash
# escapes the next character, a line break included); no match: the string is not closed.
_REST_OF = {
    '"': re.compile(r'[^"\\]*(?:\\.[^"\\]*)*"', re.S),
    "'": re.compile(r"[^'\\]*(?:\\.[^'\\]*)*'", re.S),
}
# A Python '...' string ends at a line break (Python would refuse it).
_REST_OF_LINE = re.compile(r"[^'\\\r\n]*(?:\\.[^'\\\r\n]*)*'", re.S)
_BRACKET_OR_QUOTE = re.compile(r"[{}\[\]\"']")
_QUOTE = re.compile(r"[\"']")
_COMMA_BEFORE_CLOSER = re.compile(r",[ \t\r\n]*[}\]]")


class RepairFailed(TooldeckError):
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
    rest_of_string = _REST_OF['"'].match
    while i < n:
        ch = text[i]
        if ch in " \t\r\n":
            i += 1
            continue
        if s.top_end is not None:
            return s  # text after the top-level value: judged by the caller
        if ch == '"':
            s.string_is_key = bool(s.stack) and s.stack[-1] == "{" and s.last in ("open", "comma")
            end = rest_of_string(text, i + 1)
            if end is None:
                s.in_string = True  # cut inside it: the rest of the text is the string
                return s
            s.last = "key" if s.string_is_key else "value"
            i = end.end()
            continue
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
    i, n = 0, len(text)
    find = _BRACKET_OR_QUOTE.search
    while (found := find(text, i)) is not None:
        ch, i = found.group(), found.end()
        if ch in "\"'":
            end = _REST_OF[ch].match(text, i)
            if end is None:
                return False  # a string that is never closed
            i = end.end()
        elif ch in "{[":
            depth += 1
        else:
            depth -= 1
            if depth <= 0 and i != n:
                return False
    return depth == 0


def _extract_json(text: str) -> str | None:
    stripped = text.strip()
    if stripped.startswith("{") and _balanced(stripped):
        return None  # one whole object: a fence or a brace inside its strings is data
    fences = _FENCE.findall(text)
    if len(fences) == 1:
        inner: str = fences[0].strip()
        return inner if inner != text.strip(_JSON_WS) else None
    if len(fences) > 1:
        return None  # several blocks: which one is meant would be a guess
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


def _quote_outside_strings(text: str) -> bool:
    """Whether a ``'`` occurs outside JSON (double-quoted) strings."""
    i = 0
    find = _QUOTE.search
    while (found := find(text, i)) is not None:
        if found.group() == "'":
            return True
        end = _REST_OF['"'].match(text, found.end())
        if end is None:
            return False  # the rest of the text is inside a string
        i = end.end()
    return False


def _string_end(text: str, i: int, quote: str) -> int:
    """Index just past the string literal opening at ``i``, or -1 if it is not closed.

    Backslashes escape the next character. A triple-quoted literal runs to its closing
    triple; any other ends at its quote, and a ``'`` string also at a line break (Python
    would refuse it).
    """
    n = len(text)
    if text.startswith(quote * 3, i):
        j = i + 3
        while j < n:
            if text[j] == "\\":
                j += 2
            elif text.startswith(quote * 3, j):
                return j + 3
            else:
                j += 1
        return -1
    end = (_REST_OF_LINE if quote == "'" else _REST_OF[quote]).match(text, i + 1)
    return -1 if end is None else end.end()


_PY_ESCAPE = re.compile(r"\\(.)", re.S)
_PY_ESCAPES = frozenset("\n\\'\"abfnrtv01234567xNuU")


def _keep_unknown_escape(match: re.Match[str]) -> str:
    return match.group(0) if match.group(1) in _PY_ESCAPES else "\\" + match.group(0)


def _python_string(token: str) -> str | None:
    """The value of one Python string literal (``'...'``, ``r'...'``, triple-quoted)."""
    if token[0] == "'" and "\\" not in token and not token.startswith("'" * 3):
        return token[1:-1]  # the common case needs no parser
    if token[0] not in "rR":
        # An unknown escape (``\\d``) keeps its backslash, as Python reads it today,
        # without the warning (or, in a later Python, the error) it would raise.
        token = _PY_ESCAPE.sub(_keep_unknown_escape, token)
    try:
        value = ast.literal_eval(token)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, str) else None


def _python_number(token: str) -> str | None:
    """JSON for a Python number JSON does not write so (``1_000``, ``.5``, ``0x1f``, ``+1``)."""
    try:
        value = ast.literal_eval(token)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return json.dumps(value)


def _string_as_json(token: str, python_only: bool) -> str | None:
    """One string literal of :func:`_python_literals` as JSON text, or ``None`` to refuse.

    A valid JSON ``"..."`` keeps JSON's meaning; otherwise the JSON string of its Python
    value. A Python-only literal (``'...'``, a prefix) that Python cannot read is refused;
    a ``"..."`` neither reads stays as it is (and fails to parse later).
    """
    if not python_only and not token.startswith('"' * 3):
        try:
            json.loads(token)
            return token
        except ValueError:
            pass
    value = _python_string(token)
    if value is not None:
        return json.dumps(value, ensure_ascii=False)
    return None if python_only else token


def _python_literals(text: str) -> str | None:
    """Python literal syntax, alone or mixed with JSON's, as JSON text; None if absent.

    Token by token, never evaluating anything but one string or number literal at a
    time: ``True`` / ``False`` / ``None`` become JSON's literals (JSON's own stay), a
    ``'...'`` (or ``r'...'``, ``u'...'``, triple-quoted) string becomes the JSON string of
    its Python value, and a ``"..."`` string that is valid JSON keeps JSON's meaning
    (Python's only where JSON gives none, e.g. ``\\'`` or ``\\x41``). A text with
    Python-quoted strings is Python syntax throughout: a comma before a closer is
    dropped (Python allows it) and Python's number forms are written as JSON. A text
    without one keeps its trailing commas for ``trailing_commas``. Everything else is
    copied unchanged, so what is neither JSON nor Python (a tuple, a set, a call, bytes,
    two strings side by side, which Python would join) still fails to parse and is
    refused.
    """
    if not ("'" in text or _PY_MARKERS.search(text)):
        return None
    python = _quote_outside_strings(text)  # Python-quoted strings: Python syntax throughout
    if python and len(text) > _LITERAL_EVAL_LIMIT:
        return None
    out: list[str] = []
    last = ""  # the last character written that is not whitespace
    changed = False
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        start = i
        if ch in _JSON_WS:
            out.append(ch)
            i += 1
            continue
        word = _WORD.match(text, i) if (ch.isalpha() or ch == "_") else None
        prefix = ""
        if word and word.end() < n and text[word.end()] in "'\"":
            prefix = word.group()
            if prefix.lower() not in ("r", "u"):
                return None  # bytes, an f-string (an evaluation), or no string at all
            i = word.end()
            ch = text[i]
            word = None
        if ch in "'\"":
            end = _string_end(text, i, ch)
            if end < 0:
                if ch == "'" or prefix:
                    return None  # an unclosed Python string: nothing to read
                out.append(text[start:])  # cut inside a JSON string: later rungs judge it
                break
            token = text[start:end]
            piece = _string_as_json(token, python_only=ch == "'" or bool(prefix))
            if piece is None:
                return None
            changed |= piece != token
            out.append(piece)
            last = '"'
            i = end
            continue
        if word:
            name = word.group()
            literal = _PY_LITERALS.get(name)
            out.append(literal or name)
            changed |= literal is not None
            last = "a"
            i = word.end()
            continue
        if ch in "-+.0123456789":
            number = _JSON_NUMBER.match(text, i)
            if number:
                out.append(number.group())
                last = "0"
                i = number.end()
                continue
            number = _PY_NUMBER.match(text, i) if python else None
            piece = _python_number(number.group()) if number else None
            if number and piece is not None:
                out.append(piece)
                changed = True
                last = "0"
                i = number.end()
                continue
        if ch == "," and python and last not in ("", "{", "[", ",", ":"):
            j = i + 1
            while j < n and text[j] in _JSON_WS:
                j += 1
            if j < n and text[j] in "}]":
                changed = True  # Python's trailing comma
                i += 1
                continue
        out.append(ch)
        last = ch
        i += 1
    return "".join(out) if changed else None


def _trailing_commas(text: str) -> str | None:
    if _COMMA_BEFORE_CLOSER.search(text) is None:
        return None  # (a comma inside a string is data; the scan below tells them apart)
    out: list[str] = []
    changed = False
    i, n = 0, len(text)
    in_string = False
    last = ""  # the last character outside strings that is not whitespace
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
        elif ch == "," and last not in ("", "[", "{", ",", ":"):  # only a comma after a value
            j = i + 1
            while j < n and text[j] in " \t\r\n":
                j += 1
            if j < n and text[j] in "}]":
                changed = True
                i += 1
                continue
        if ch not in " \t\r\n":
            last = ch
        out.append(ch)
        i += 1
    return "".join(out) if changed else None


def _surplus_closers(text: str, s: _Scan) -> str | None:
    if s.top_end is None or s.problem:
        return None
    tail = text[s.top_end :]
    if tail.strip() and not tail.strip(" \t\r\n}]"):
        return text[: s.top_end]
    return None


def _close_brackets(text: str, s: _Scan) -> str:
    """Close what is open at the very end, or raise ``ValueError`` saying why not."""
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
    # The last two rungs read the same scan of the text (one scan, unless the first changed it).
    scan = _scan(text)
    new = _surplus_closers(text, scan)
    if new is not None:
        used.append("surplus_closers")
        text = new
        ok, value, error = _loads(text)
        if ok:
            return value, used
        scan = _scan(text)
    try:
        closed = _close_brackets(text, scan)
    except ValueError as exc:
        raise RepairFailed(f"{error}; cannot repair: {exc}", used) from None
    used.append("close_brackets")
    ok, value, error = _loads(closed)
    if ok:
        return value, used
    raise RepairFailed(f"{error}; repair did not produce JSON", used)
