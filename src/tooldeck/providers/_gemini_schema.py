"""A tool's JSON Schema as Gemini's ``functionDeclarations`` entry: the supported subset.

Gemini takes a function's parameters as JSON Schema in ``parametersJsonSchema`` (and a
structured answer's schema in ``responseJsonSchema``), but honours only a subset of it:
``$id``, ``$defs``, ``$ref``, ``$anchor``, ``type``, ``format``, ``title``,
``description``, ``enum`` (strings and numbers), ``items``, ``prefixItems``, ``minItems``,
``maxItems``, ``minimum``, ``maximum``, ``anyOf``, ``oneOf`` (read as ``anyOf``),
``properties``, ``additionalProperties``, ``required`` and the non-standard
``propertyOrdering``; beside a ``$ref`` only ``$``-keywords may stand.

:func:`project_gemini` walks the schema (never mutating it) and sorts what it finds, as
the OpenAI strict conversion does (``tooldeck._strict``):

- ``changes``: rewrites that keep what is accepted, e.g. ``oneOf`` sent as ``anyOf``,
  ``const`` sent as a one-value ``enum``, ``definitions`` sent as ``$defs``, dropped
  annotations (``default``, ``examples``, ``$schema``...);
- ``dropped``: constraints Gemini does not take (``pattern``, ``maxLength``,
  ``exclusiveMinimum``, ``allOf``, ``not``...), removed from the wire schema and written
  into the description so the model is still told. tooldeck validates every call's
  arguments against the original schema, so nothing dropped goes unchecked.

``reason`` says why the declaration is not the tool's exact schema (``None`` when nothing
was dropped); it is logged at debug level when a request is built. Projections are cached
on the tool; the entries are shared: copy them, never mutate them.
"""

from __future__ import annotations

import copy
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import SchemaError
from ..tools import Tool

__all__ = [
    "GeminiProjection",
    "GeminiSchema",
    "project_gemini",
    "project_gemini_tools",
    "project_schema",
]

_log = logging.getLogger("tooldeck.providers.gemini")

SUPPORTED = frozenset(
    {
        "$id",
        "$defs",
        "$ref",
        "$anchor",
        "type",
        "format",
        "title",
        "description",
        "enum",
        "items",
        "prefixItems",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
        "anyOf",
        "properties",
        "additionalProperties",
        "required",
        "propertyOrdering",
    }
)
# Annotations: dropping them never changes what is accepted.
_ANNOTATIONS = frozenset(
    {
        "default",
        "examples",
        "example",
        "deprecated",
        "readOnly",
        "writeOnly",
        "$comment",
        "$schema",
        "discriminator",
        "nullable",
    }
)
# Gemini's function names: a letter or underscore, then letters, digits, _ . : -; 64 at most.
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,63}$")
_SHOWN = 120  # characters of a dropped value written into a description


@dataclass(frozen=True, slots=True)
class GeminiSchema:
    """A schema as Gemini takes it, with what the projection rewrote and dropped."""

    schema: dict[str, Any]
    changes: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()

    @property
    def reason(self) -> str | None:
        if not self.dropped:
            return None
        return "not Gemini's schema subset, dropped (told in descriptions): " + "; ".join(
            self.dropped
        )


@dataclass(frozen=True, slots=True)
class GeminiProjection:
    """One tool as Gemini sees it: its ``functionDeclarations`` entry and why it differs."""

    tool: str
    entry: dict[str, Any]
    changes: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()
    reason: str | None = None

    @property
    def parameters(self) -> dict[str, Any]:
        params: dict[str, Any] = self.entry["parametersJsonSchema"]
        return params


@dataclass
class _Walk:
    changes: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)

    def node(self, schema: Any, path: str) -> Any:
        if not isinstance(schema, Mapping):
            return copy.deepcopy(schema)  # true / false
        out: dict[str, Any] = {}
        notes: list[str] = []
        if "$ref" in schema:
            return self._ref(schema, path)
        for key, value in schema.items():
            where = f"{path}.{key}"
            if key in _ANNOTATIONS:
                self.changes.append(f"{where}: annotation dropped")
            elif key in ("oneOf", "anyOf") and isinstance(value, list):
                if key == "oneOf":
                    self.changes.append(f"{where}: sent as anyOf")
                branches = [self.node(v, f"{where}[{i}]") for i, v in enumerate(value)]
                out["anyOf"] = [*out.get("anyOf", []), *branches]
            elif key in ("$defs", "definitions") and isinstance(value, Mapping):
                if key == "definitions":
                    self.changes.append(f"{where}: sent as $defs")
                defs = {k: self.node(v, f"{path}.$defs.{k}") for k, v in value.items()}
                out["$defs"] = {**out.get("$defs", {}), **defs}
            elif key == "properties" and isinstance(value, Mapping):
                out[key] = {k: self.node(v, f"{where}.{k}") for k, v in value.items()}
            elif key in ("items", "additionalProperties") and isinstance(value, (Mapping, bool)):
                out[key] = self.node(value, where)
            elif key in ("prefixItems", "items") and isinstance(value, list):
                out["prefixItems"] = [self.node(v, f"{where}[{i}]") for i, v in enumerate(value)]
            elif key == "enum":
                self._enum(value, where, out, notes)
            elif key == "const":
                self._enum([value], where, out, notes, const=True)
            elif key in SUPPORTED:
                out[key] = copy.deepcopy(value)
            else:
                self.dropped.append(f"{where}")
                notes.append(f"{key}: {_shown(value)}")
        if notes:
            told = "; ".join(notes)
            description = out.get("description")
            out["description"] = f"{description} ({told})" if description else f"({told})"
        return out

    def _ref(self, schema: Mapping[str, Any], path: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in schema.items():
            if key == "$ref" and isinstance(value, str) and value.startswith("#/definitions/"):
                self.changes.append(f"{path}.$ref: points into $defs")
                out[key] = "#/$defs/" + value.removeprefix("#/definitions/")
            elif key.startswith("$") and key not in _ANNOTATIONS:
                out[key] = copy.deepcopy(value)
            elif key in _ANNOTATIONS or key == "title":
                self.changes.append(f"{path}.{key}: annotation beside $ref dropped")
            else:  # Gemini takes nothing but $-keywords beside a $ref
                self.dropped.append(f"{path}.{key} (beside $ref)")
        return out

    def _enum(
        self,
        values: Any,
        where: str,
        out: dict[str, Any],
        notes: list[str],
        const: bool = False,
    ) -> None:
        fits = isinstance(values, list) and all(
            isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in values
        )
        if fits:
            if const:
                self.changes.append(f"{where}: sent as a one-value enum")
            out["enum"] = list(values)
            return
        self.dropped.append(f"{where} (only strings and numbers)")
        notes.append(f"{'const' if const else 'enum'}: {_shown(values[0] if const else values)}")


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


def project_schema(schema: Mapping[str, Any]) -> GeminiSchema:
    """``schema`` in Gemini's JSON Schema subset (see the module docstring)."""
    walk = _Walk()
    projected = walk.node(schema, "$")
    if not isinstance(projected, dict):
        projected = {"type": "object", "properties": {}}
    return GeminiSchema(projected, tuple(walk.changes), tuple(walk.dropped))


def project_gemini(tool: Tool) -> GeminiProjection:
    """``tool`` as a Gemini function declaration (cached on the tool).

    A name Gemini refuses (it must start with a letter or ``_`` and hold only letters,
    digits, ``_ . : -``, 64 at most) is a :class:`~tooldeck.errors.SchemaError`.
    """
    key = ("gemini",)
    cached: GeminiProjection | None = tool._projections.get(key)
    if cached is not None:
        return cached
    if not _NAME.match(tool.name):
        raise SchemaError(
            tool.name,
            [
                "$: Gemini function names start with a letter or '_' and hold only letters, "
                "digits, '_', '.', ':' and '-' (64 at most); rename the tool"
            ],
            provider="gemini",
        )
    projected = project_schema(tool.schema)
    entry = {
        "name": tool.name,
        "description": tool.description,
        "parametersJsonSchema": projected.schema,
    }
    projection = GeminiProjection(
        tool.name, entry, projected.changes, projected.dropped, projected.reason
    )
    tool._projections[key] = projection
    return projection


def project_gemini_tools(tools: list[Tool]) -> list[GeminiProjection]:
    """Every tool of one request (names unique), reasons logged at debug level."""
    seen: set[str] = set()
    out: list[GeminiProjection] = []
    for tool in tools:
        if tool.name in seen:
            raise SchemaError(
                tool.name, ["$: two tools with this name in one request"], provider="gemini"
            )
        seen.add(tool.name)
        projection = project_gemini(tool)
        if projection.reason is not None:
            _log.debug("tool %r for Gemini: %s", tool.name, projection.reason)
        out.append(projection)
    return out
