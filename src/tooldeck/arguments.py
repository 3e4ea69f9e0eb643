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
4. The value is validated against the tool's schema: its Pydantic model (in JSON mode
   and strict, on every path: what a tool accepts is what its advertised schema says,
   so ``"3"`` is no integer and ``"no"`` no boolean), or the external JSON Schema
   (``jsonschema_rs``, compiled when the tool was defined). A repaired value that does
   not validate is an error, never a guess.
5. Whatever else goes wrong while checking (a validator that raises, a parameters model
   that cannot be built) is an :class:`ArgumentError` for that call, never an exception
   out of the dispatcher.

Where pydantic's strict mode still takes a value the schema forbids (a ``bool`` for an
integer ``Literal``/``Enum``, which Python counts as equal; duplicates for a ``set``,
which it drops), the schema is checked too, for those tools only (``_needs_schema_check``).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from ._compile import compile_schema, located
from ._nulls import drop_absent_nulls, has_optional_non_nullable
from ._repair import RepairFailed, repair
from .errors import MODEL_MESSAGE_LIMIT, ArgumentError, SchemaError
from .tools import Tool

_MAX_REPORTED = 4
_PROBLEM_LIMIT = 200  # one problem in the model message, at most (cut in the middle)
_PROBLEM_MIN = 40  # a problem that cannot have this much room is counted, not shown
_SURROGATE = re.compile("[\ud800-\udfff]")
_to_json = json.JSONEncoder(ensure_ascii=False).encode
_log = logging.getLogger("tooldeck.arguments")


class ValidatedArguments:
    """Parameters ready for ``execute``, and the repair rungs that were needed (if any).

    ``params`` is an instance of the tool's Pydantic model, or a ``dict`` for a tool
    defined by an external JSON Schema. (A plain slots class: it is built on every call.)
    """

    __slots__ = ("params", "repairs")

    def __init__(self, params: Any, repairs: tuple[str, ...] = ()) -> None:
        self.params = params
        self.repairs = repairs

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ValidatedArguments):
            return NotImplemented
        return (self.params, self.repairs) == (other.params, other.repairs)

    def __hash__(self) -> int:
        return hash(self.repairs)

    def __repr__(self) -> str:
        return f"ValidatedArguments(params={self.params!r}, repairs={self.repairs!r})"


class _Spec:
    """What validating one tool's arguments needs, built once per tool (first call)."""

    __slots__ = ("map_nulls", "model", "quick", "schema", "schema_check", "validator")

    def __init__(self, tool: Tool):
        self.schema: Mapping[str, Any] = tool.schema
        self.model: type[BaseModel] | None = tool.params
        self.map_nulls = has_optional_non_nullable(self.schema)
        self.validator: Any = None
        self.schema_check: Any = None
        if self.model is None:
            self.validator = getattr(tool, "_validator", None)
            if self.validator is None:  # not built by Tool.__init__ (e.g. params set later)
                self.validator, problems = compile_schema(self.schema)
                if problems:
                    raise SchemaError(tool.name, located(problems))
        elif _needs_schema_check(self.schema):
            # formats stay pydantic's to judge (see README, "The argument contract")
            self.schema_check, problems = compile_schema(self.schema, validate_formats=False)
            if problems:
                _log.warning(
                    "tool %s: its generated schema does not compile: %s", tool.name, problems
                )
        # the one-pass parse and validation of valid JSON text (see _fast), when nothing
        # but the model has to judge it: validate_json(raw, strict=True)
        self.quick: Any = None
        if self.model is not None and self.schema_check is None:
            self.quick = self.model.__pydantic_validator__.validate_json


def _needs_schema_check(schema: Any) -> bool:
    """Whether pydantic's strict mode may accept a value ``schema`` forbids.

    A number or boolean in ``enum``/``const`` (pydantic matches ``true`` to ``1`` and
    ``1`` to ``True``) and ``uniqueItems`` (a ``set`` drops duplicates) are the cases.
    """
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("uniqueItems") is True:
                return True
            options = node.get("enum")
            options = [*options] if isinstance(options, list) else []
            if "const" in node:
                options.append(node["const"])
            if any(isinstance(o, bool | int | float) for o in options):
                return True
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


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


def _clip(text: str, limit: int) -> str:
    """``text`` cut in the middle to ``limit`` characters: the path and the end survive."""
    if len(text) <= limit:
        return text
    head = (limit - 1) * 2 // 3
    return text[:head] + "…" + text[len(text) - (limit - 1 - head) :]


def _fail(tool: Tool, problems: list[str], repairs: list[str], lead: str) -> ArgumentError:
    repaired = f" (after repairs: {', '.join(repairs)})" if repairs else ""
    head = f"Invalid arguments for {tool.name}{repaired}: {lead}"
    end = ". Fix and call again."
    # Room for the problems, keeping space for "; and N more".
    room = MODEL_MESSAGE_LIMIT - len(head) - len(end) - len(f"; and {len(problems)} more")
    shown: list[str] = []
    for problem in problems[:_MAX_REPORTED]:
        fit = min(_PROBLEM_LIMIT, room - (2 if shown else 0))
        if fit < _PROBLEM_MIN and shown:
            break
        shown.append(_clip(problem, max(fit, 1)))
        room -= len(shown[-1]) + (2 if len(shown) > 1 else 0)
    text = "; ".join(shown)
    more = len(problems) - len(shown)
    if more > 0:
        text += f"; and {more} more"
    message = head + text + end
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


def _model_validate(
    model: type[BaseModel], value: dict[str, Any], from_json: bool = False
) -> BaseModel:
    """Validate strictly in JSON mode, as the fast path does: the value came from JSON.

    (Python mode differs for strict validation: a datetime, UUID or tuple arrives from
    JSON as a string or a list.) A value tooldeck itself parsed from JSON text
    (``from_json``) needs no round-trip check. A value JSON does not carry unchanged (a
    lone surrogate, which pydantic-core's JSON parser refuses; a tuple or a non-string
    key in a caller's mapping) is judged by its JSON image (lone surrogates as U+FFFD)
    in strict JSON mode, then built from the value itself; a value that is no JSON at
    all (an object in a caller's mapping) is validated strictly in Python mode.
    """
    try:
        text = _to_json(value)
        exact = from_json or json.loads(text) == value
    except (TypeError, ValueError, RecursionError):
        return model.model_validate(value, strict=True)
    validate_json = model.__pydantic_validator__.validate_json  # model_validate_json's call
    if exact and not _SURROGATE.search(text):
        return validate_json(text, strict=True)  # type: ignore[no-any-return]
    validate_json(_SURROGATE.sub("\ufffd", text), strict=True)
    return model.model_validate(value)


def _not_json(value: Any) -> str:
    """Where ``value`` holds something jsonschema_rs cannot take, and what it is."""
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), value)]
    while stack:
        loc, node = stack.pop()
        if isinstance(node, str):
            try:
                node.encode("utf-8")
            except UnicodeEncodeError:
                return f"{_path(loc)}: not valid Unicode (an unpaired surrogate)"
        elif isinstance(node, dict):
            for key, item in reversed(node.items()):
                if not isinstance(key, str):
                    return f"{_path(loc)}: a key is not a string but {type(key).__name__}"
                try:
                    key.encode("utf-8")
                except UnicodeEncodeError:
                    return f"{_path(loc)}: a key is not valid Unicode (an unpaired surrogate)"
                stack.append(((*loc, key), item))
        elif isinstance(node, list):
            stack.extend(((*loc, i), item) for i, item in reversed(list(enumerate(node))))
        elif not (node is None or isinstance(node, bool | int | float)):
            return f"{_path(loc)}: not a JSON value but {type(node).__name__}"
    return "$: not JSON data"


def _check(
    tool: Tool,
    spec: _Spec,
    value: Any,
    repairs: list[str],
    *,
    from_json: bool = False,
    may_hold_null: bool = True,
) -> ValidatedArguments:
    try:
        return _check_value(tool, spec, value, repairs, from_json, may_hold_null)
    except RecursionError:
        raise _fail(tool, ["$: the arguments are nested too deeply"], repairs, "") from None


def _check_value(
    tool: Tool,
    spec: _Spec,
    value: Any,
    repairs: list[str],
    from_json: bool,
    may_hold_null: bool,
) -> ValidatedArguments:
    if not isinstance(value, dict):
        raise _fail(
            tool,
            [f"$: expected a JSON object, got {type(value).__name__} {_short(value)}"],
            repairs,
            "",
        )
    if spec.map_nulls and may_hold_null:
        value = drop_absent_nulls(value, spec.schema, spec.schema)
    if spec.model is not None:
        try:
            params = _model_validate(spec.model, value, from_json)
        except ValidationError as exc:
            raise _fail(tool, _pydantic_problems(exc), repairs, "") from None
        if spec.schema_check is not None:
            _schema_check(tool, spec.schema_check, value, repairs)
        return ValidatedArguments(params, tuple(repairs))
    _schema_check(tool, spec.validator, value, repairs)
    return ValidatedArguments(value, tuple(repairs))


def _schema_check(tool: Tool, validator: Any, value: Any, repairs: list[str]) -> None:
    try:
        errors = [f"{_path(e.instance_path)}: {e.message}" for e in validator.iter_errors(value)]
    except ValueError:  # jsonschema_rs takes JSON data in valid Unicode only
        errors = [_not_json(value)]
    if errors:
        raise _fail(tool, errors, repairs, "")


def _fast(spec: _Spec, raw: str) -> ValidatedArguments | None:
    """Parse and validate in one pass through pydantic-core; None means "take the slow path".

    Used only where it cannot disagree with the slow path: a Pydantic model, no null to
    map back to "absent" (none in the schema, or the text holds no ``null``), and the
    text valid JSON. Any failure falls back to the full path.
    """
    if spec.model is None or (spec.map_nulls and "null" in raw):
        return None
    try:  # what model_validate_json(raw, strict=True) calls, without its Python wrapper
        params = spec.model.__pydantic_validator__.validate_json(raw, strict=True)
    except ValidationError:
        return None
    if spec.schema_check is not None and not spec.schema_check.is_valid(json.loads(raw)):
        return None  # the full path reports the schema's errors
    return ValidatedArguments(params)


def checked_arguments(
    tool: Tool, raw: str | Mapping[str, Any] | None
) -> tuple[Any, tuple[str, ...]]:
    """``validate_arguments(tool, raw)`` as ``(params, repairs)``: what the dispatcher
    calls for every call, with ``_fast``'s one pass inlined (the same checks, in the
    same order, each validator run as often)."""
    spec = tool._arg_spec
    fast = True
    if spec is not None and type(raw) is str:
        quick = spec.quick
        if quick is not None and not (spec.map_nulls and "null" in raw):
            try:
                return quick(raw, strict=True), ()
            except ValidationError:
                fast = False  # the full path judges it again and says what is wrong
            except Exception as exc:
                raise _unchecked(tool, exc) from exc
    validated = _validated(tool, raw, fast)
    return validated.params, validated.repairs


def validate_arguments(tool: Tool, raw: str | Mapping[str, Any] | None) -> ValidatedArguments:
    """Turn a model's raw arguments into validated parameters, or raise ArgumentError."""
    return _validated(tool, raw, True)


def _validated(tool: Tool, raw: str | Mapping[str, Any] | None, fast: bool) -> ValidatedArguments:
    try:
        spec = tool._arg_spec
        if spec is None:
            spec = _spec(tool)
        if fast and isinstance(raw, str):
            done = _fast(spec, raw)
            if done is not None:
                return done
        return _validate(tool, spec, raw)
    except ArgumentError:
        raise
    except Exception as exc:
        raise _unchecked(tool, exc) from exc


def _unchecked(tool: Tool, exc: Exception) -> ArgumentError:
    """A validator or model that fails: this call's error, no more."""
    _log.warning("checking the arguments of %s failed", tool.name, exc_info=exc)
    cause = f"{type(exc).__name__}: {exc}".strip().splitlines()[0]
    return _fail(tool, [f"$: the arguments could not be checked ({cause})"], [], "")


def _validate(tool: Tool, spec: _Spec, raw: str | Mapping[str, Any] | None) -> ValidatedArguments:
    if raw is None:
        raw = ""
    if not isinstance(raw, str):
        if isinstance(raw, Mapping):
            return _check(tool, spec, dict(raw), [])
        raise _fail(tool, [f"$: expected a JSON object, got {type(raw).__name__}"], [], "")
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
    # A text without "null" cannot hold a null to map back to "absent"; a repaired value
    # (a Python None, a double-encoded object) is always walked.
    return _check(
        tool,
        spec,
        value,
        repairs,
        from_json=True,
        may_hold_null=bool(repairs) or "null" in raw,
    )
