"""Reading the files tooldeck is given, so that a hostile or broken one fails cleanly.

Toolkit manifests, policy files, agent definitions, ``SKILL.md`` front matter, MCP
configs and definitions files can come from anyone (a repository being worked on, a
downloaded skill); pending approvals, answers, grants, saved timelines and trace files
are written by other processes, or by anyone who can write to their folder. Handed
straight to the standard parsers, a deeply nested document raises
:class:`RecursionError`, a file that is not UTF-8 :class:`UnicodeDecodeError` and a
5,000-digit number :class:`ValueError` (tracebacks instead of the loader's own error),
and a few hundred bytes of YAML whose aliases nest ("billion laughs") stand for
billions of values: building them is cheap (aliases are shared), but whatever then walks
the value as a tree (``str()``, JSON encoding, validation) runs out of memory. Here one
reader does what every loader needs:

- read at most :data:`MAX_BYTES` (a larger file is refused before it is parsed);
- decode strictly as UTF-8, naming the line and column of the first bad byte;
- parse TOML (``tomllib``), JSON, JSONC (JSON with ``//`` and ``/* */`` comments and
  trailing commas, as VS Code and Zed write their settings), or YAML (``yaml.SafeLoader``,
  so no Python objects);
- refuse nesting deeper than :data:`MAX_DEPTH`, and a YAML document that refers to itself
  or expands to more than :data:`MAX_YAML_NODES` values once aliases are counted every
  time they are used (checked on the composed node graph, before anything is built).
- refuse a value the parser recognises but cannot build: an integer longer than Python
  converts (4,300 digits), a YAML date that is no date.

Where the format is tooldeck's own, :func:`check_model` then validates the parsed value
against a strict typed model (types, ranges, no unknown fields) and names the place in
the document that is wrong.

Every failure is a :class:`ConfigFileError` whose ``problem`` says what is wrong and
what to do; each loader turns it into its own documented error type, naming the file.
"""

from __future__ import annotations

import json
import re
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import yaml

from .errors import TooldeckError

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError

__all__ = [
    "MAX_YAML_NODES",
    "ConfigFileError",
    "check_model",
    "decode_text",
    "load_json",
    "load_jsonc",
    "load_toml",
    "parse_json",
    "parse_jsonc",
    "parse_toml",
    "parse_yaml",
    "read_bytes",
    "read_text",
]

MAX_BYTES = 10 * 1024 * 1024  # a config file larger than this is refused unread
MAX_DEPTH = 100  # levels of nested arrays / tables / mappings
MAX_YAML_NODES = 100_000  # values of a YAML document, aliases counted at every use


class ConfigFileError(TooldeckError, ValueError):
    """A config file cannot be used; ``problem`` says why, without the file's name."""

    def __init__(self, problem: str, *, path: str | None = None):
        self.problem = problem
        self.path = path
        super().__init__(f"{path}: {problem}" if path else problem)


def read_text(path: str | Path, *, max_bytes: int = MAX_BYTES) -> str:
    """The file's text: at most ``max_bytes`` bytes, strictly UTF-8.

    :class:`OSError` (missing file, no permission...) is left to the caller, whose
    message for it already exists; everything else is a :class:`ConfigFileError`
    (``str()`` names the file; ``problem`` does not).
    """
    data = read_bytes(path, max_bytes=max_bytes)
    try:
        return decode_text(data)
    except ConfigFileError as exc:
        raise ConfigFileError(exc.problem, path=str(path)) from None


def read_bytes(path: str | Path, *, max_bytes: int = MAX_BYTES) -> bytes:
    """The file's bytes, at most ``max_bytes`` (a larger file is refused, not read whole);
    for a caller that keeps the bytes (to compare them later) and decodes them with
    :func:`decode_text`."""
    with open(path, "rb") as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ConfigFileError(
            f"the file is larger than {_size(max_bytes)}, the most tooldeck reads of such "
            "a file; it was not read",
            path=str(path),
        )
    return data


def decode_text(data: bytes) -> str:
    """``data`` decoded strictly as UTF-8, naming the line and column of a bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ConfigFileError(
            f"not UTF-8 text (byte 0x{data[exc.start]:02x} at line {line}, column {column}); "
            "save the file as UTF-8"
        ) from None


def parse_toml(text: str) -> dict[str, Any]:
    try:
        value = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigFileError(f"not valid TOML: {exc}") from None
    except (RecursionError, _TooDeep):
        raise _too_deep(MAX_DEPTH) from None
    except ValueError as exc:  # a number longer than int() converts, a date that is none
        raise _unreadable_value(exc) from None
    _check_depth(value, MAX_DEPTH)
    return value


def parse_json(text: str, *, max_depth: int = MAX_DEPTH) -> Any:
    """JSON text, checked; ``max_depth`` for a format of tooldeck's own whose documents
    carry values of their own (a pending file holds a session's transcript)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigFileError(
            f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except RecursionError:
        raise _too_deep(max_depth) from None
    except ValueError as exc:  # a number longer than int() converts, a date that is none
        raise _unreadable_value(exc) from None
    _check_depth(value, max_depth)
    return value


# JSONC: a string is kept as it is; a comment goes (a block comment leaves its line breaks,
# so that line numbers in errors stay the file's); then a comma right before a closing
# bracket goes. Every alternative is possessive or can only end one way, so a scan never
# backtracks: linear in the text, whatever it holds (an unclosed comment or string too).
_STRING = r'"(?:[^"\\\n]++|\\.)*+"?'
_COMMENTS = re.compile(rf"{_STRING}|//[^\n]*+|/\*(?:[^*]++|\*(?!/))*+(?:\*/)?")
_TRAILING_COMMA = re.compile(rf"{_STRING}|,(\s*+)(?=[}}\]])")


def _uncommented(match: re.Match[str]) -> str:
    found = match.group()
    if found.startswith('"'):
        return found
    if found.startswith("/*") and (len(found) < 4 or not found.endswith("*/")):
        line = match.string.count("\n", 0, match.start()) + 1
        raise ConfigFileError(f"a /* comment opened on line {line} is never closed (*/)")
    return " " + "\n" * found.count("\n")


def _no_trailing_comma(match: re.Match[str]) -> str:
    return match.group() if match.group(1) is None else match.group(1)


def parse_jsonc(text: str) -> Any:
    """JSON with comments and trailing commas (JSONC), checked as :func:`parse_json`."""
    try:  # most such files are plain JSON (~/.claude.json: megabytes of it), which has
        return parse_json(text)  # nothing to strip: json's C parser reads it at once
    except ConfigFileError:
        pass  # JSONC, or broken: stripped below, then what is wrong is said
    if "/" in text:
        text = _COMMENTS.sub(_uncommented, text)
    if "," in text:
        text = _TRAILING_COMMA.sub(_no_trailing_comma, text)
    return parse_json(text)


class _TooDeep(Exception):
    """Raised by :class:`_BoundedLoader`'s scanner at the first level over the bound."""


class _BoundedLoader(yaml.SafeLoader):
    """The safe loader, counting nesting while it scans: PyYAML's scanner costs time
    quadratic in the depth of the text it reads (each token walks every open level), so
    a check made after the document is composed would let a 200 KB file of brackets take
    tens of seconds of CPU first. This one stops at level ``MAX_DEPTH + 1``."""

    def fetch_flow_collection_start(self, TokenClass: Any) -> None:
        if self.flow_level >= MAX_DEPTH:
            raise _TooDeep
        super().fetch_flow_collection_start(TokenClass)

    def add_indent(self, column: int) -> bool:
        if len(self.indents) > MAX_DEPTH:
            raise _TooDeep
        return bool(super().add_indent(column))


def parse_yaml(text: str) -> Any:
    """One YAML document (``None`` if empty), with the safe loader and the checks above."""
    loader: yaml.SafeLoader | None = None
    try:
        loader = _BoundedLoader(text)  # the reader may refuse a character already
        node = loader.get_single_node()
        if node is None:
            return None
        _check_yaml_nodes(node)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise ConfigFileError(f"not valid YAML: {_one_line(exc)}") from None
    except (RecursionError, _TooDeep):
        raise _too_deep(MAX_DEPTH) from None
    except ValueError as exc:  # a number longer than int() converts, a date that is none
        raise _unreadable_value(exc) from None
    finally:
        if loader is not None:
            loader.dispose()


def load_toml(path: str | Path, *, max_bytes: int = MAX_BYTES) -> dict[str, Any]:
    """:func:`read_text` then :func:`parse_toml`; a :class:`ConfigFileError` names the file."""
    return _load(path, max_bytes, parse_toml)


def load_json(path: str | Path, *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    """:func:`read_text` then :func:`parse_json`; a :class:`ConfigFileError` names the file."""
    return _load(path, max_bytes, lambda text: parse_json(text, max_depth=max_depth))


def load_jsonc(path: str | Path, *, max_bytes: int = MAX_BYTES) -> Any:
    """:func:`read_text` then :func:`parse_jsonc`; a :class:`ConfigFileError` names the file."""
    return _load(path, max_bytes, parse_jsonc)


_Parsed = TypeVar("_Parsed")


def _load(path: str | Path, max_bytes: int, parse: Callable[[str], _Parsed]) -> _Parsed:
    text = read_text(path, max_bytes=max_bytes)
    try:
        return parse(text)
    except ConfigFileError as exc:
        raise ConfigFileError(exc.problem, path=str(path)) from None


_Model = TypeVar("_Model", bound="BaseModel")


def check_model(model: type[_Model], value: Any) -> _Model:
    """``value`` (parsed JSON) validated against ``model``, a strict pydantic model of one
    of tooldeck's own formats; a :class:`ConfigFileError` names the first place in the
    document that is wrong (``step.calls[0].call_id: input should be a valid string``)."""
    from pydantic import ValidationError

    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise ConfigFileError(_model_problem(exc, value)) from None


# -- checks ------------------------------------------------------------------------------


def _too_deep(max_depth: int) -> ConfigFileError:
    return ConfigFileError(
        f"nested more than {max_depth} levels deep; no file tooldeck reads needs that, so "
        "it was refused (flatten the nesting)"
    )


def _unreadable_value(exc: ValueError) -> ConfigFileError:
    """A value the parser recognised but could not build: a number longer than Python
    converts (``sys.get_int_max_str_digits``), or a YAML date that is no date."""
    limit = sys.get_int_max_str_digits()
    if "integer string conversion" in str(exc):
        return ConfigFileError(f"a number in it has more than {limit:,} digits; shorten it")
    return ConfigFileError(f"a value in it cannot be read ({' '.join(str(exc).split())})")


def _model_problem(exc: ValidationError, document: Any) -> str:
    """One line for a validation error: the deepest problem (in a union the other
    branches' complaints are less precise), where it is in the document, and what it is.

    A pydantic location also names union branches (``str``, ``list[...]``, a tag); only
    the keys and indexes that exist in the document are kept, so the place is a real one.
    """
    best: tuple[int, str] | None = None
    for error in exc.errors(include_url=False):
        node, where, steps = document, "", 0
        for part in error["loc"]:
            if isinstance(node, dict) and isinstance(part, str) and part in node:
                node = node[part]
                where += f".{part}" if part.isidentifier() else f"[{json.dumps(part)}]"
            elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
                node = node[part]
                where += f"[{part}]"
            elif error["type"] in ("missing", "extra_forbidden") and isinstance(part, str):
                where += f".{part}" if part.isidentifier() else f"[{json.dumps(part)}]"
                steps += 1
                break  # the field itself, which is not (or should not be) there
            else:
                continue
            steps += 1
        kind = error["type"]
        if kind == "missing":
            what = "missing (a field this format needs)"
        elif kind == "extra_forbidden":
            what = "not a field of this format"
        else:
            message = str(error["msg"]).removeprefix("Value error, ")
            what = message[:1].lower() + message[1:]
        line = f"{where.lstrip('.') or 'the top level'}: {what}"
        if best is None or steps > best[0]:
            best = (steps, line)
    return best[1] if best is not None else str(exc)


def _check_depth(value: Any, max_depth: int) -> None:
    """Refuse nesting deeper than ``max_depth`` (iteratively: no recursion here)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > max_depth:
            raise _too_deep(max_depth)
        stack.extend((child, depth + 1) for child in children)


def _check_yaml_nodes(root: yaml.Node) -> None:
    """Depth, self-reference and expanded size of a composed YAML node graph.

    An alias is the same node object as its anchor, so the graph is a DAG (or has a
    cycle, for an anchor used inside itself). Its expanded size (every alias counted
    where it is used, which is what building and walking the value costs, merges
    included) is computed once per node, in post-order, without recursion.
    """
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        kids = _children(node)
        if done:
            on_path.discard(key)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            depth[key] = 1 + max((depth[id(k)] for k in kids), default=0)
            if depth[key] > MAX_DEPTH:
                raise _too_deep(MAX_DEPTH)
            if size[key] > MAX_YAML_NODES:
                raise ConfigFileError(
                    f"the YAML expands to more than {MAX_YAML_NODES:,} values through its "
                    "aliases (*name); use fewer or smaller aliases"
                )
            continue
        if key in size:
            continue
        if key in on_path:
            raise ConfigFileError(
                "the YAML refers to itself (an alias used inside its own anchor); remove "
                "the recursive alias"
            )
        on_path.add(key)
        stack.append((node, True))
        stack.extend((k, False) for k in kids if id(k) not in size)
        if len(on_path) > MAX_DEPTH + 1:
            raise _too_deep(MAX_DEPTH)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _one_line(exc: yaml.YAMLError) -> str:
    problem = getattr(exc, "problem", None)
    mark = getattr(exc, "problem_mark", None)
    if problem and mark is not None:
        return f"{problem} at line {mark.line + 1}, column {mark.column + 1}"
    return " ".join(str(exc).split())


def _size(n: int) -> str:
    return f"{n // (1024 * 1024)} MB" if n >= 1024 * 1024 else f"{n} bytes"
