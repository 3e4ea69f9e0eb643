"""A tool's parameters, prepared from each of its three sources, each in one place.

A :class:`Parameters` is what :class:`~tooldeck.tools.Tool` is built from: the JSON
Schema the model sees (computed once, shared, never mutated) and what turns arguments
into the ``params`` that ``execute`` receives. Its three sources:

- :func:`model_parameters`: a Pydantic model class; its schema is generated once,
  without field titles;
- :func:`function_parameters`: a typed function's signature, read by
  :mod:`tooldeck._function_schema`; the schema comes without the model class, which is
  created on first use;
- :func:`schema_parameters`: an external JSON Schema, copied, checked and compiled now
  (:mod:`tooldeck._compile`: an unusable schema is a definition error, not a failure of
  the first call) and sent exactly as given; the arguments stay a ``dict``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, RootModel
from pydantic.json_schema import JsonSchemaValue

from ._compile import compile_schema, located
from ._function_schema import FunctionSignature, LazyModel, NoTitles
from .errors import SchemaError, ToolDefinitionError

__all__ = [
    "Parameters",
    "function_parameters",
    "model_parameters",
    "schema_of",
    "schema_parameters",
]


@dataclass(frozen=True, slots=True, eq=False)
class Parameters:
    """A tool's prepared parameters (build one with the functions of this module).

    ``schema`` is what the model sees; ``model`` validates the arguments into a model
    instance (a :class:`LazyModel` creates its class on first use), or is ``None`` for an
    external schema, whose compiled ``validator`` checks the arguments as a ``dict``.
    """

    schema: dict[str, Any]
    model: type[BaseModel] | LazyModel | None
    validator: Any = None


def schema_of(model: type[BaseModel]) -> JsonSchemaValue:
    """The JSON Schema tooldeck generates for a parameters model (no field titles)."""
    schema: dict[str, Any] = model.model_json_schema(schema_generator=NoTitles)
    schema.pop("title", None)
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/") and len(schema) == 2:
        # A self-referencing model comes back as a root $ref; inline the root definition
        # so the root is an object, and keep $defs for the recursive references inside.
        defs = dict(schema["$defs"])
        root = dict(defs[ref.removeprefix("#/$defs/")])
        root.pop("title", None)
        schema = {**root, "$defs": defs}
    return schema


def model_parameters(tool: str, model: type[BaseModel]) -> Parameters:
    """The parameters of tool ``tool`` from a Pydantic model class."""
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        hint = ""
        if isinstance(model, Mapping):
            hint = "; for a JSON Schema use Tool.from_schema"
        elif callable(model) and not isinstance(model, type):
            hint = "; it is a function: use Tool.from_function"
        raise ToolDefinitionError(
            f"tool {tool!r}: the parameters must be a Pydantic model class, got {model!r}{hint}"
        )
    if issubclass(model, RootModel):
        raise SchemaError(tool, ["$: a RootModel has no object root; use a BaseModel"])
    try:
        schema = schema_of(model)
    except Exception as exc:
        raise SchemaError(tool, [f"$: cannot generate a JSON Schema: {exc}"]) from exc
    _check_object_root(tool, schema)
    return Parameters(schema, model)


def function_parameters(tool: str, signature: FunctionSignature) -> Parameters:
    """The parameters of tool ``tool`` from a function's signature."""
    if signature.schema is None:  # the model was created eagerly: its own schema
        return model_parameters(tool, signature.params.get())
    _check_object_root(tool, signature.schema)
    return Parameters(signature.schema, signature.params)


def schema_parameters(tool: str, json_schema: Mapping[str, Any]) -> Parameters:
    """The parameters of tool ``tool`` from an external JSON Schema (a private copy)."""
    _check_object_root(tool, json_schema)
    try:  # a private JSON copy: later edits to the caller's dict change nothing
        schema = json.loads(json.dumps(json_schema))
    except (TypeError, ValueError) as exc:
        raise SchemaError(tool, [f"$: not JSON-serialisable: {exc}"]) from exc
    except RecursionError as exc:  # e.g. from a hostile MCP server
        raise SchemaError(tool, ["$: nested too deeply to be used"]) from exc
    validator, problems = compile_schema(schema)
    if problems:
        raise SchemaError(tool, located(problems))
    return Parameters(schema, None, validator)


def _check_object_root(tool: str, schema: Any) -> None:
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        raise ToolDefinitionError(
            f"tool {tool!r}: a Pydantic model, not a JSON Schema: use Tool.from_model"
        )
    if callable(schema) and not isinstance(schema, Mapping):
        raise ToolDefinitionError(
            f"tool {tool!r}: the schema is a function: use Tool.from_function"
        )
    if not isinstance(schema, Mapping):
        raise SchemaError(
            tool, [f"$: the schema must be a JSON object, got {type(schema).__name__}"]
        )
    if schema.get("type") != "object":
        got = schema.get("type", "no 'type'")
        raise SchemaError(
            tool,
            [f"$: the root must be 'type: object' (tool arguments are an object), got {got!r}"],
        )
