"""Argument validation: the model's raw arguments in, validated parameters out.

``validate_arguments(tool, raw)`` accepts the JSON *string* OpenAI, OpenRouter and GLM
send, or the already-parsed object Anthropic sends, and returns
:class:`ValidatedArguments` or raises :class:`~tooldeck.errors.ArgumentError`.

1. A strict parse comes first; valid JSON is never altered and reports no repairs.
2. Only if it fails, the bounded repair ladder runs (``_repair.py``), each rung at most
   once; a JSON string that holds the JSON object (arguments encoded twice) is decoded
   once (``double_encoded``).
3. ``null`` for an optional property that does not accept null means "absent" and is
   dropped, so defaults apply (OpenAI strict sends optional properties as nullable).
4. The value is validated against the tool's schema: its Pydantic model, or the
   external JSON Schema (``jsonschema_rs``). A repaired value that does not validate is
   an error, never a guess.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema_rs
from pydantic import BaseModel, ValidationError

from ._nulls import drop_absent_nulls, has_optional_non_nullable
from ._repair import RepairFailed, repair
from .errors import MODEL_MESSAGE_LIMIT, ArgumentError
from .tool import Tool

__all__ = ["ValidatedArguments", "validate_arguments"]

_MAX_REPORTED = 4


@dataclass(frozen=True, slots=True)
class ValidatedArguments:
    """Parameters ready for ``execute``, and the repair rungs that were needed (if any).

    ``params`` is an instance of the tool's Pydantic model, or a ``dict`` for a tool
    defined by an external JSON Schema.
    """

    params: Any
    repairs: tuple[str, ...] = ()


class _Spec:
    """What validating one tool's arguments needs, compiled once per tool."""

    __slots__ = ("map_nulls", "model", "schema", "validator")

    def __init__(self, tool: Tool):
        self.schema: Mapping[str, Any] = tool.schema
        self.model: type[BaseModel] | None = tool.params
        self.map_nulls = has_optional_non_nullable(self.schema)
        self.validator: Any = (
            None
            if self.model is not None
            else jsonschema_rs.validator_for(dict(self.schema), validate_formats=True)
        )


def _spec(tool: Tool) -> _Spec:
    spec: _Spec | None = tool._arg_spec
    if spec is None:
        spec = tool._arg_spec = _Spec(tool)
    return spec


def _path(loc: Any) -> str:
    out = "$"
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _short(value: Any, limit: int = 60) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _fail(tool: Tool, problems: list[str], repairs: list[str], lead: str) -> ArgumentError:
    shown = "; ".join(problems[:_MAX_REPORTED])
    more = len(problems) - _MAX_REPORTED
    if more > 0:
        shown += f"; and {more} more"
    repaired = f" (after repairs: {', '.join(repairs)})" if repairs else ""
    message = f"Invalid arguments for {tool.name}{repaired}: {lead}{shown}. Fix and call again."
    if len(message) > MODEL_MESSAGE_LIMIT:
        message = message[: MODEL_MESSAGE_LIMIT - 1] + "…"
    return ArgumentError(tool.name, message, problems=problems, repairs=repairs)


def _pydantic_problems(exc: ValidationError) -> list[str]:
    problems = []
    for err in exc.errors(include_url=False):
        kind = err.get("type", "")
        path = _path(err.get("loc", ()))
        if kind == "missing":
            problems.append(f"{path}: required property missing")
        elif kind == "extra_forbidden":
            problems.append(f"{path}: unexpected property")
        else:
            problems.append(f"{path}: {err.get('msg', kind)}, got {_short(err.get('input'))}")
    return problems


def _check(tool: Tool, spec: _Spec, value: Any, repairs: list[str]) -> ValidatedArguments:
    if not isinstance(value, dict):
        raise _fail(
            tool,
            [f"$: expected a JSON object, got {type(value).__name__} {_short(value)}"],
            repairs,
            "",
        )
    if spec.map_nulls:
        value = drop_absent_nulls(value, spec.schema, spec.schema)
    if spec.model is not None:
        try:
            params = spec.model.model_validate(value)
        except ValidationError as exc:
            raise _fail(tool, _pydantic_problems(exc), repairs, "") from None
        return ValidatedArguments(params, tuple(repairs))
    errors = [f"{_path(e.instance_path)}: {e.message}" for e in spec.validator.iter_errors(value)]
    if errors:
        raise _fail(tool, errors, repairs, "")
    return ValidatedArguments(value, tuple(repairs))


def _fast(spec: _Spec, raw: str) -> ValidatedArguments | None:
    """Parse and validate in one pass through pydantic-core; None means "take the slow path".

    Used only where it cannot disagree with the slow path: a Pydantic model, no null
    mapping, and the text valid JSON. Any failure falls back to the full path.
    """
    if spec.model is None or spec.map_nulls:
        return None
    try:
        return ValidatedArguments(spec.model.model_validate_json(raw))
    except ValidationError:
        return None


def validate_arguments(tool: Tool, raw: str | Mapping[str, Any] | None) -> ValidatedArguments:
    """Turn a model's raw arguments into validated parameters, or raise ArgumentError."""
    spec = _spec(tool)
    if raw is None:
        raw = ""
    if not isinstance(raw, str):
        if isinstance(raw, Mapping):
            return _check(tool, spec, dict(raw), [])
        raise _fail(tool, [f"$: expected a JSON object, got {type(raw).__name__}"], [], "")
    fast = _fast(spec, raw)
    if fast is not None:
        return fast
    if not raw.strip():
        return _check(tool, spec, {}, [])
    repairs: list[str] = []
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        first = (
            f"{exc.msg} at line {exc.lineno} column {exc.colno}"
            if isinstance(exc, json.JSONDecodeError)
            else type(exc).__name__
        )
        try:
            value, repairs = repair(raw, first)
        except RepairFailed as failed:
            raise _fail(tool, [f"$: not valid JSON: {failed.reason}"], failed.tried, "") from None
    if isinstance(value, str):
        try:
            inner = json.loads(value)
        except (ValueError, RecursionError):
            inner = None
        if isinstance(inner, dict):
            value = inner
            repairs.append("double_encoded")
    return _check(tool, spec, value, repairs)
