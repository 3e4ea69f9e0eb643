"""Result schemas: the closed shapes a workflow task may submit, checked when defined.

A task's result schema is a JSON Schema (or a Pydantic model, turned into one) limited to
*closed shapes*, so that the same schema can be sent to every provider with
``strict: true`` and validated again, exactly, by the control plane:

- objects with fixed ``properties``, every one of them ``required``, and
  ``additionalProperties: false``;
- arrays whose ``items`` is a closed shape;
- enums (and ``const``) of scalar values;
- strings, numbers, integers and booleans, with a few value constraints;
- nullable variants of any of these (``type: [T, "null"]``, ``anyOf: [S, {type: null}]``
  or an enum that lists ``null``).

Anything else (free-form maps, unions, tuples, ``not``, recursion...) is rejected with
:class:`ResultSchemaError`, which lists every problem with the JSON path where it was
found. :func:`result_schema` returns the checked, self-contained schema (local ``$ref``
inlined) and the schema of the ``submit_result`` tool built from it; both provider
projections (OpenAI and Anthropic, strict) are tried at definition time, so a schema that
is accepted here can always be sent.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema_rs
from pydantic import BaseModel, RootModel

from .._parameters import schema_of
from .._strict import convert
from ..errors import ToolDefinitionError
from ..schema import ANTHROPIC_MAX_OPTIONAL_PARAMS, ANTHROPIC_MAX_UNION_PARAMS

SCALARS = ("string", "number", "integer", "boolean")
KINDS = (*SCALARS, "object", "array")
ANNOTATIONS = frozenset({"title", "description", "examples", "$comment", "default"})
CONSTRAINTS: Mapping[str, frozenset[str]] = {
    "string": frozenset({"minLength", "maxLength", "pattern", "format"}),
    "number": frozenset(
        {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
    ),
    "integer": frozenset(
        {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
    ),
    "boolean": frozenset(),
    "object": frozenset({"properties", "required", "additionalProperties"}),
    "array": frozenset({"items", "minItems", "maxItems"}),
}
WRAPPED_PROPERTY = "value"  # where a non-object result goes in submit_result's arguments


class WorkflowDefinitionError(ToolDefinitionError):
    """A workflow or one of its tasks is defined wrongly (names, dependencies, inputs)."""


class ResultSchemaError(WorkflowDefinitionError):
    """A task's result schema is not a supported closed shape.

    ``problems`` lists every problem found, each starting with its JSON path (``$`` is
    the result itself, ``$.a.b`` a property, ``$.items[]`` an array's items).
    """

    def __init__(self, owner: str, problems: list[str]):
        self.owner = owner
        self.problems = tuple(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"{owner}: result schema not supported:\n{lines}")


@dataclass(frozen=True, slots=True)
class ResultSchema:
    """A checked result schema.

    ``schema`` is the closed, self-contained JSON Schema that is stored and that the
    control plane validates submissions against; ``tool_schema`` is ``submit_result``'s
    parameters (the same schema when its root is an object, else ``schema`` wrapped in a
    required ``value`` property: ``wrapped`` is true).
    """

    schema: dict[str, Any]
    tool_schema: dict[str, Any]
    wrapped: bool

    def unwrap(self, arguments: Mapping[str, Any]) -> Any:
        """The result inside ``submit_result``'s validated arguments."""
        return arguments[WRAPPED_PROPERTY] if self.wrapped else dict(arguments)


# -- turning the input into one JSON Schema ---------------------------------------------------


def _from_model(model: type[BaseModel]) -> dict[str, Any]:
    if issubclass(model, RootModel):
        raise WorkflowDefinitionError(
            f"{model.__name__}: a RootModel is not supported as a result; use a BaseModel "
            "or a JSON Schema"
        )
    return schema_of(model)


def _subschemas(node: Mapping[str, Any], path: str, walk: Any) -> dict[str, Any]:
    """``node`` with ``walk(sub, sub_path)`` applied to each of its direct subschemas.

    Only schema positions are walked: ``properties`` values, ``items``, the branches of
    ``anyOf`` / ``oneOf`` / ``allOf``, ``not`` and a schema-valued ``additionalProperties``;
    a property *named* ``default`` or ``$defs`` is a name, never a keyword.
    """
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "properties" and isinstance(value, Mapping):
            out[key] = {name: walk(sub, f"{path}.{name}") for name, sub in value.items()}
        elif key == "items":
            if isinstance(value, list):
                out[key] = [walk(sub, f"{path}[]") for sub in value]
            else:
                out[key] = walk(value, f"{path}[]")
        elif key in ("anyOf", "oneOf", "allOf", "prefixItems") and isinstance(value, list):
            out[key] = [walk(sub, path) for sub in value]
        elif key in ("not", "additionalProperties") and isinstance(value, Mapping):
            out[key] = walk(value, path)
        else:
            out[key] = value
    return out


def _inline(schema: dict[str, Any], problems: list[str]) -> dict[str, Any]:
    """Replace every local ``$ref`` by its target; recursion and other refs are problems."""
    defs: dict[str, Any] = {}
    for key in ("$defs", "definitions"):
        found = schema.get(key)
        if isinstance(found, Mapping):
            defs.update({f"#/{key}/{name}": value for name, value in found.items()})

    def walk(node: Any, path: str, trail: tuple[str, ...] = ()) -> Any:
        if not isinstance(node, Mapping):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str):
            if ref in trail:
                problems.append(
                    f"{path}: recursive reference {' -> '.join([*trail, ref])} is not a "
                    "closed shape"
                )
                return {}
            target = defs.get(ref)
            if target is None:
                problems.append(f"{path}: $ref {ref!r} does not point into $defs")
                return {}
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            return walk({**copy.deepcopy(target), **siblings}, path, (*trail, ref))
        return _subschemas(node, path, lambda sub, sub_path: walk(sub, sub_path, trail))

    root = {k: v for k, v in schema.items() if k not in ("$defs", "definitions")}
    result = walk(root, "$")
    assert isinstance(result, dict)
    return result


def _close_model_objects(node: Any, path: str = "$") -> Any:
    """A Pydantic model's objects: every property required, closed; titles, defaults dropped.

    Pydantic marks fields with defaults optional and leaves ``additionalProperties`` out
    unless ``extra='forbid'``; a result always carries every field, so both are closed
    here. ``extra='allow'`` (``additionalProperties: true``) is left for the checker to
    reject.
    """
    if not isinstance(node, Mapping):
        return node
    out = _subschemas(node, path, _close_model_objects)
    out.pop("default", None)
    out.pop("title", None)
    if out.get("type") == "object" and isinstance(out.get("properties"), Mapping):
        out["required"] = list(out["properties"])
        out.setdefault("additionalProperties", False)
    return out


# -- the closed-shape check --------------------------------------------------------------------


def _is_null_branch(node: Any) -> bool:
    return (
        isinstance(node, Mapping)
        and node.get("type") == "null"
        and set(node)
        <= {
            "type",
            *ANNOTATIONS,
        }
    )


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _matches(kind: str, value: Any) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return False


class _Checker:
    def __init__(self) -> None:
        self.problems: list[str] = []

    def fail(self, path: str, message: str) -> None:
        self.problems.append(f"{path}: {message}")

    def node(self, schema: Any, path: str, *, nullable_ok: bool = True) -> None:
        if not isinstance(schema, Mapping):
            what = "true (any value)" if schema is True else repr(schema)
            self.fail(path, f"a schema must be an object describing a closed shape, got {what}")
            return
        if "anyOf" in schema or "oneOf" in schema:
            self.union(schema, path, nullable_ok)
            return
        for key in ("allOf", "not", "if", "then", "else", "$ref"):
            if key in schema:
                self.fail(path, f"'{key}' is not supported in a result schema")
        if "enum" in schema or "const" in schema:
            self.enum(schema, path, nullable_ok)
            return
        kind = schema.get("type")
        if isinstance(kind, list):
            kinds = [k for k in kind if k != "null"]
            if len(kind) != 2 or len(kinds) != 1 or "null" not in kind:
                self.fail(
                    path,
                    f"type {kind!r}: a list of types is only supported as a nullable "
                    "variant, [T, 'null']",
                )
                return
            if not nullable_ok:
                self.fail(path, "a nullable variant of a nullable value")
            kind = kinds[0]
        if kind is None:
            self.fail(
                path,
                "no 'type': every value needs a type (string, number, integer, boolean, "
                "object, array) or an enum",
            )
            return
        if kind == "null":
            self.fail(path, "'null' alone is not a value; use a nullable variant [T, 'null']")
            return
        if kind not in KINDS:
            self.fail(path, f"unknown type {kind!r}")
            return
        allowed = CONSTRAINTS[kind] | ANNOTATIONS | {"type"}
        for key in schema:
            if key not in allowed:
                self.fail(path, f"'{key}' is not supported for a {kind} in a result schema")
        if kind == "object":
            self.object(schema, path)
        elif kind == "array":
            self.array(schema, path)
        self.numeric_bounds(schema, path)

    def union(self, schema: Mapping[str, Any], path: str, nullable_ok: bool) -> None:
        key = "anyOf" if "anyOf" in schema else "oneOf"
        branches = schema[key]
        extra = set(schema) - {key} - ANNOTATIONS
        shape_ok = (
            isinstance(branches, list)
            and len(branches) == 2
            and sum(_is_null_branch(b) for b in branches) == 1
            and not extra
        )
        if not shape_ok:
            self.fail(
                path,
                f"'{key}' is only supported as a nullable variant of one closed shape "
                "(exactly [S, {'type': 'null'}]); unions of several shapes are not closed",
            )
            return
        if not nullable_ok:
            self.fail(path, "a nullable variant of a nullable value")
            return
        inner = next(b for b in branches if not _is_null_branch(b))
        self.node(inner, path, nullable_ok=False)

    def enum(self, schema: Mapping[str, Any], path: str, nullable_ok: bool) -> None:
        values = schema["enum"] if "enum" in schema else [schema["const"]]
        key = "enum" if "enum" in schema else "const"
        if not isinstance(values, list) or not values:
            self.fail(path, f"'{key}' must list at least one value")
            return
        if not all(_scalar(v) for v in values):
            self.fail(path, f"'{key}' values must be strings, numbers, booleans or null")
            return
        if len({json.dumps(v, sort_keys=True) for v in values}) != len(values):
            self.fail(path, f"'{key}' lists a value twice")
        kind = schema.get("type")
        kinds = kind if isinstance(kind, list) else [kind] if kind is not None else []
        for k in kinds:
            if k != "null" and k not in SCALARS:
                self.fail(path, f"an enum of type {k!r} is not supported; enums are scalar")
                return
        if kinds:
            for v in values:
                if v is None and "null" not in kinds:
                    self.fail(path, f"'{key}' lists null but the type {kind!r} does not allow it")
                elif v is not None and not any(_matches(k, v) for k in kinds if k != "null"):
                    self.fail(path, f"'{key}' value {v!r} does not match the type {kind!r}")
        if None in values and not nullable_ok:
            self.fail(path, "a nullable variant of a nullable value")
        allowed = ANNOTATIONS | {"enum", "const", "type"}
        for k in schema:
            if k not in allowed:
                self.fail(path, f"'{k}' is not supported next to '{key}'")

    def object(self, schema: Mapping[str, Any], path: str) -> None:
        props = schema.get("properties")
        extra = schema.get("additionalProperties", "missing")
        if extra is not False:
            if extra == "missing":
                self.fail(path, "an object must set additionalProperties: false (closed)")
            else:
                self.fail(
                    path,
                    "additionalProperties must be false: a free-form map is not a closed shape",
                )
        if not isinstance(props, Mapping):
            self.fail(path, "an object needs fixed 'properties'")
            return
        required = schema.get("required", [])
        if not isinstance(required, list):
            self.fail(path, "'required' must be a list of property names")
            required = []
        for name in required:
            if name not in props:
                self.fail(path, f"'required' names {name!r}, which is not a property")
        for name, sub in props.items():
            child = f"{path}.{name}"
            if name not in required:
                self.fail(
                    child,
                    "optional property: every property of a closed shape is required "
                    "(use a nullable type for a value that may be missing)",
                )
            self.node(sub, child)

    def array(self, schema: Mapping[str, Any], path: str) -> None:
        items = schema.get("items")
        if items is None:
            self.fail(path, "an array needs 'items' with a closed shape")
            return
        if isinstance(items, list):
            self.fail(path, "tuple 'items' (a list of schemas) is not supported")
            return
        self.node(items, f"{path}[]")
        for key in ("minItems", "maxItems"):
            value = schema.get(key)
            if value is not None and (
                not isinstance(value, int) or isinstance(value, bool) or value < 0
            ):
                self.fail(path, f"'{key}' must be a non-negative integer")

    def numeric_bounds(self, schema: Mapping[str, Any], path: str) -> None:
        for key in (
            "minimum",
            "maximum",
            "exclusiveMinimum",
            "exclusiveMaximum",
            "multipleOf",
            "minLength",
            "maxLength",
        ):
            value = schema.get(key)
            if value is not None and (
                not isinstance(value, int | float) or isinstance(value, bool)
            ):
                self.fail(path, f"'{key}' must be a number")
        if "pattern" in schema and not isinstance(schema["pattern"], str):
            self.fail(path, "'pattern' must be a string")
        if "format" in schema and not isinstance(schema["format"], str):
            self.fail(path, "'format' must be a string")


def _wrap(schema: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    kind = schema.get("type")
    if kind == "object" and "enum" not in schema and "const" not in schema:
        return copy.deepcopy(schema), False
    return (
        {
            "type": "object",
            "properties": {WRAPPED_PROPERTY: copy.deepcopy(schema)},
            "required": [WRAPPED_PROPERTY],
            "additionalProperties": False,
        },
        True,
    )


def _projection_problems(tool_schema: dict[str, Any], wrapped: bool) -> list[str]:
    problems: list[str] = []

    def relative(problem: str) -> str:
        prefix = f"$.{WRAPPED_PROPERTY}"
        if wrapped and problem.startswith(prefix):
            return "$" + problem[len(prefix) :]
        return problem

    openai = convert(tool_schema, "openai")
    anthropic = convert(tool_schema, "anthropic")
    problems += [f"{relative(p)} (OpenAI strict)" for p in openai.incompatible]
    problems += [f"{relative(p)} (Anthropic strict)" for p in anthropic.incompatible]
    if anthropic.union_params > ANTHROPIC_MAX_UNION_PARAMS:
        problems.append(
            f"$: {anthropic.union_params} nullable values exceed Anthropic's per-request "
            f"strict limit of {ANTHROPIC_MAX_UNION_PARAMS} union parameters"
        )
    if anthropic.optional_params > ANTHROPIC_MAX_OPTIONAL_PARAMS:  # pragma: no cover
        problems.append(f"$: {anthropic.optional_params} optional parameters for Anthropic")
    return problems


def result_schema(source: Mapping[str, Any] | type[BaseModel], owner: str = "task") -> ResultSchema:
    """Check ``source`` (a JSON Schema or a Pydantic model class) and build its schemas.

    Raises :class:`ResultSchemaError` listing every problem, each with its JSON path.
    ``owner`` names the task in the message.
    """
    if isinstance(source, type) and issubclass(source, BaseModel):
        raw = _from_model(source)
        from_model = True
    elif isinstance(source, Mapping):
        try:
            raw = json.loads(json.dumps(source, allow_nan=False))
        except (TypeError, ValueError) as exc:
            raise ResultSchemaError(owner, [f"$: not JSON-serialisable: {exc}"]) from exc
        from_model = False
    else:
        raise WorkflowDefinitionError(
            f"{owner}: a result schema is a JSON Schema (a dict) or a Pydantic model class, "
            f"not {type(source).__name__}"
        )
    problems: list[str] = []
    schema = _inline(raw, problems)
    schema.pop("$schema", None)
    if from_model:
        schema = _close_model_objects(schema)
    if problems:
        raise ResultSchemaError(owner, problems)
    checker = _Checker()
    checker.node(schema, "$")
    if checker.problems:
        raise ResultSchemaError(owner, checker.problems)
    try:
        jsonschema_rs.validator_for(schema, validate_formats=True)
    except Exception as exc:  # e.g. a pattern the regex engine refuses
        raise ResultSchemaError(owner, [f"$: not a usable JSON Schema: {exc}"]) from exc
    tool_schema, wrapped = _wrap(schema)
    problems = _projection_problems(tool_schema, wrapped)
    if problems:
        raise ResultSchemaError(owner, problems)
    return ResultSchema(schema, tool_schema, wrapped)
