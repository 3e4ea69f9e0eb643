"""Conversion of a JSON Schema to a provider's strict subset.

The walk never mutates its input. It sorts every finding into one of three buckets:

- ``changes``: rewrites that keep the set of accepted arguments (as tooldeck validates
  them) the same, such as ``additionalProperties: false`` on a closed object, an
  optional property made required-and-nullable for OpenAI (a ``null`` coming back is
  mapped to "absent" before validation, so defaults still apply), ``oneOf`` sent as
  ``anyOf``, or dropped annotations (``title``, ``default``, ``examples``);
- ``lossy``: constraints the provider cannot enforce, moved into the description; the
  model is told, and tooldeck's own validation still enforces them;
- ``incompatible``: shapes the strict subset cannot express at all (free-form maps,
  ``not``, recursion for Anthropic, limits exceeded...).

``strict=None`` takes the converted schema only when there is nothing lossy or
incompatible; ``strict=True`` accepts lossy changes and raises on any incompatibility.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["StrictConversion", "convert"]

Dialect = Literal["openai", "anthropic"]

# Keywords that only annotate: dropping them never changes what is accepted.
_ANNOTATIONS = frozenset(
    {
        "title",
        "examples",
        "default",
        "deprecated",
        "readOnly",
        "writeOnly",
        "$comment",
        "$schema",
        "$id",
        "discriminator",
        "example",
        "nullable",
    }
)
_STRUCTURAL = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "anyOf",
        "oneOf",
        "enum",
        "const",
        "description",
        "$ref",
        "$defs",
        "definitions",
    }
)
_OPENAI_KEEP = frozenset(
    {
        "pattern",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minItems",
        "maxItems",
    }
)
_OPENAI_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
_OPENAI_NEVER = frozenset(
    {
        "allOf",
        "not",
        "dependentRequired",
        "dependentSchemas",
        "if",
        "then",
        "else",
        "patternProperties",
        "prefixItems",
        "unevaluatedProperties",
        "unevaluatedItems",
        "propertyNames",
        "contains",
        "minContains",
        "maxContains",
        "dependencies",
    }
)
_ANTHROPIC_KEEP = frozenset({"pattern", "format", "allOf"})
_ANTHROPIC_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"}
)
_ANTHROPIC_NEVER = frozenset(
    {
        "not",
        "dependentRequired",
        "dependentSchemas",
        "if",
        "then",
        "else",
        "patternProperties",
        "prefixItems",
        "unevaluatedProperties",
        "unevaluatedItems",
        "propertyNames",
        "contains",
        "minContains",
        "maxContains",
        "dependencies",
    }
)
# Regex features Anthropic's grammar engine rejects: backreferences, lookarounds, \b.
_ANTHROPIC_BAD_REGEX = re.compile(r"\\[1-9]|\\k<|\(\?<?[=!]|\\b|\\B")

OPENAI_MAX_PROPERTIES = 5000
OPENAI_MAX_DEPTH = 10
OPENAI_MAX_ENUM_VALUES = 1000
OPENAI_MAX_STRING_CHARS = 120_000
OPENAI_LARGE_ENUM = 250
OPENAI_LARGE_ENUM_CHARS = 15_000


@dataclass(slots=True)
class StrictConversion:
    schema: dict[str, Any] | None
    changes: list[str] = field(default_factory=list)
    lossy: list[str] = field(default_factory=list)
    incompatible: list[str] = field(default_factory=list)
    # Counted for Anthropic's per-request limits.
    optional_params: int = 0
    union_params: int = 0


def accepts_null(schema: Any) -> bool:
    """True when ``schema`` obviously admits ``null`` (type, enum, const or an anyOf branch)."""
    if not isinstance(schema, Mapping):
        return schema is True
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    if "enum" in schema and None in schema["enum"]:
        return True
    if "const" in schema and schema["const"] is None:
        return True
    return any(accepts_null(b) for b in schema.get("anyOf", ()) or schema.get("oneOf", ()))


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    kind = schema.get("type")
    if isinstance(kind, str) and "enum" not in schema and "const" not in schema:
        return {**schema, "type": [kind, "null"]}
    if isinstance(kind, list) and "enum" not in schema and "const" not in schema:
        return {**schema, "type": [*kind, "null"]}
    wrapped: dict[str, Any] = {"anyOf": [schema, {"type": "null"}]}
    if "description" in schema and "$ref" not in schema:
        inner = {k: v for k, v in schema.items() if k != "description"}
        wrapped = {"anyOf": [inner, {"type": "null"}], "description": schema["description"]}
    return wrapped


def _is_object(schema: Any) -> bool:
    """Whether ``schema`` describes an object (by its type, or untyped with object keywords)."""
    if not isinstance(schema, Mapping):
        return False
    kind = schema.get("type")
    if kind is None:
        return "properties" in schema or "additionalProperties" in schema
    return kind == "object" or (isinstance(kind, list) and "object" in kind)


def _describe_constraint(key: str, value: Any) -> str:
    return f"{key}: {value}" if not isinstance(value, str) else f"{key}: {value!r}"


class _Walker:
    def __init__(self, dialect: Dialect, root: Mapping[str, Any]):
        self.dialect = dialect
        self.root = root
        self.out = StrictConversion(schema=None)
        self.properties = 0
        self.enum_values = 0
        self.string_chars = 0
        self.max_depth = 0

    # ------------------------------------------------------------------------------
    def run(self) -> StrictConversion:
        if "anyOf" in self.root or "oneOf" in self.root:
            self.out.incompatible.append("$: the root must be a plain object, not a union")
        converted = self.node(self.root, "$", depth=1)
        for key in ("$defs", "definitions"):
            defs = self.root.get(key)
            if isinstance(defs, Mapping):
                new_defs = {}
                for name, sub in defs.items():
                    self.string_chars += len(name)
                    new_defs[name] = self.node(sub, f"$.{key}.{name}", depth=1)
                converted[key] = new_defs
        if self.dialect == "openai":
            self.check_openai_limits()
        else:
            self.check_anthropic_recursion()
        self.out.schema = converted
        return self.out

    def check_openai_limits(self) -> None:
        inc = self.out.incompatible
        if self.properties > OPENAI_MAX_PROPERTIES:
            inc.append(f"$: {self.properties} properties exceed OpenAI's limit of 5,000")
        if self.max_depth > OPENAI_MAX_DEPTH:
            inc.append(f"$: {self.max_depth} nesting levels exceed OpenAI's limit of 10")
        if self.enum_values > OPENAI_MAX_ENUM_VALUES:
            inc.append(f"$: {self.enum_values} enum values exceed OpenAI's limit of 1,000")
        if self.string_chars > OPENAI_MAX_STRING_CHARS:
            inc.append(
                f"$: {self.string_chars} characters of names, enum and const values exceed "
                "OpenAI's limit of 120,000"
            )

    def check_anthropic_recursion(self) -> None:
        """Report every reference cycle: through "#", $defs, definitions or any pointer."""
        root = self.root

        def resolve(ref: str) -> Any:
            if ref == "#":
                return root
            if not ref.startswith("#/"):
                return None  # external: reported where it occurs
            node: Any = root
            for part in ref[2:].split("/"):
                part = part.replace("~1", "/").replace("~0", "~")
                if isinstance(node, Mapping) and part in node:
                    node = node[part]
                elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                    node = node[int(part)]
                else:
                    return None
            return node

        def refs(node: Any) -> set[str]:
            found: set[str] = set()
            if isinstance(node, Mapping):
                ref = node.get("$ref")
                if isinstance(ref, str):
                    found.add(ref)
                for key, value in node.items():
                    if key not in ("$defs", "definitions"):
                        found |= refs(value)
            elif isinstance(node, list):
                for item in node:
                    found |= refs(item)
            return found

        # Every reference reachable from the root, plus every definition (sent even unused).
        pending = {"#"}
        for key in ("$defs", "definitions"):
            defs = root.get(key)
            if isinstance(defs, Mapping):
                pending |= {f"#/{key}/{name}" for name in defs}
        graph: dict[str, set[str]] = {}
        while pending:
            ref = pending.pop()
            target = resolve(ref)
            graph[ref] = refs(target) if target is not None else set()
            pending |= graph[ref] - graph.keys()

        visiting: set[str] = set()
        done: set[str] = set()

        def visit(name: str, trail: list[str]) -> None:
            if name in visiting:
                cycle = " -> ".join([*trail[trail.index(name) :], name])
                self.out.incompatible.append(
                    f"$: recursive schema ({cycle}), unsupported by Anthropic"
                )
                return
            if name in done or name not in graph:
                return
            visiting.add(name)
            for nxt in sorted(graph[name]):
                visit(nxt, [*trail, name])
            visiting.discard(name)
            done.add(name)

        for name in sorted(graph):
            visit(name, [])

    # ------------------------------------------------------------------------------
    def node(self, schema: Any, path: str, depth: int) -> dict[str, Any]:
        out = self.out
        if schema is True or (
            isinstance(schema, Mapping) and set(schema) <= _ANNOTATIONS | {"description"}
        ):
            out.incompatible.append(f"{path}: an unconstrained value (any JSON) cannot be strict")
            return {}
        if not isinstance(schema, Mapping):
            out.incompatible.append(f"{path}: a schema must be an object, got {schema!r}")
            return {}
        self.max_depth = max(self.max_depth, depth)
        openai = self.dialect == "openai"
        keep = _OPENAI_KEEP if openai else _ANTHROPIC_KEEP
        never = _OPENAI_NEVER if openai else _ANTHROPIC_NEVER
        formats = _OPENAI_FORMATS if openai else _ANTHROPIC_FORMATS
        provider = "OpenAI" if openai else "Anthropic"

        result: dict[str, Any] = {}
        moved: list[str] = []
        for key, value in schema.items():
            if key in ("$defs", "definitions"):
                continue  # converted once, at the root
            if key in _STRUCTURAL:
                continue  # handled below
            if key in never:
                out.incompatible.append(f"{path}: '{key}' is not supported by {provider} strict")
            elif key in _ANNOTATIONS:
                if key not in ("title", "$schema"):
                    out.changes.append(f"{path}: dropped '{key}' (annotation)")
            elif key == "format":
                if value in formats:
                    result[key] = value
                else:
                    moved.append(_describe_constraint(key, value))
            elif key == "pattern" and not openai and _ANTHROPIC_BAD_REGEX.search(str(value)):
                moved.append(_describe_constraint(key, value))
            elif key == "minItems" and not openai and value in (0, 1):
                result[key] = value
            elif key == "allOf" and not openai:
                if any(isinstance(b, Mapping) and "$ref" in b for b in value):
                    out.incompatible.append(f"{path}: 'allOf' with '$ref' is not supported")
                elif _is_object(schema) + sum(_is_object(b) for b in value) > 1:
                    # Each object is closed (additionalProperties false) on its own, so
                    # an instance would have to match every closed object at once.
                    out.incompatible.append(
                        f"{path}: 'allOf' combining object schemas cannot be strict"
                    )
                else:
                    result[key] = [
                        self.node(b, f"{path}.allOf[{i}]", depth) for i, b in enumerate(value)
                    ]
            elif key in keep:
                result[key] = value
            else:
                moved.append(_describe_constraint(key, value))

        description = schema.get("description")
        if moved:
            out.lossy.append(f"{path}: {provider} strict cannot enforce " + ", ".join(moved))
            note = "Constraints: " + "; ".join(moved) + "."
            description = f"{description} ({note})" if description else note
        if description is not None:
            result["description"] = description

        if "$ref" in schema:
            ref = schema["$ref"]
            if not isinstance(ref, str) or not ref.startswith("#"):
                out.incompatible.append(f"{path}: external $ref {ref!r} cannot be strict")
            result["$ref"] = ref

        kind = schema.get("type")
        if kind is not None:
            result["type"] = kind
            if isinstance(kind, list) and not openai:
                out.union_params += 1
        self.values(schema, result, path)
        self.unions(schema, result, path, depth)
        if _is_object(schema):
            self.object(schema, result, path, depth)
        if "items" in schema:
            items = schema["items"]
            if isinstance(items, list):
                out.incompatible.append(f"{path}: tuple 'items' is not supported")
            else:
                result["items"] = self.node(items, f"{path}[]", depth + 1)
        elif kind == "array":
            out.incompatible.append(f"{path}: an array without 'items' cannot be strict")
        return result

    def values(self, schema: Mapping[str, Any], result: dict[str, Any], path: str) -> None:
        """``enum`` and ``const`` of one node, counted against the provider's limits."""
        out, openai = self.out, self.dialect == "openai"
        for key in ("enum", "const"):
            if key in schema:
                values = schema[key] if key == "enum" else [schema[key]]
                if not openai and any(isinstance(v, dict | list) for v in values):
                    out.incompatible.append(f"{path}: Anthropic strict allows scalar {key} only")
                self.enum_values += len(values) if key == "enum" else 0
                self.string_chars += sum(len(str(v)) for v in values)
                if (
                    key == "enum"
                    and openai
                    and len(values) > OPENAI_LARGE_ENUM
                    and sum(len(str(v)) for v in values) > OPENAI_LARGE_ENUM_CHARS
                ):
                    out.incompatible.append(
                        f"{path}: an enum of over 250 values may total at most 15,000 characters"
                    )
                result[key] = schema[key]

    def unions(
        self, schema: Mapping[str, Any], result: dict[str, Any], path: str, depth: int
    ) -> None:
        """``anyOf`` and ``oneOf`` of one node, each branch converted (sent as ``anyOf``)."""
        out, openai = self.out, self.dialect == "openai"
        for key in ("anyOf", "oneOf"):
            if key in schema:
                branches = schema[key]
                if not isinstance(branches, list) or not branches:
                    out.incompatible.append(f"{path}: '{key}' must be a non-empty list")
                    continue
                if key == "oneOf":
                    out.changes.append(f"{path}: 'oneOf' sent as 'anyOf' (validated as oneOf)")
                if not openai:
                    out.union_params += 1
                result["anyOf"] = [
                    self.node(b, f"{path}.{key}[{i}]", depth) for i, b in enumerate(branches)
                ]

    def object(
        self, schema: Mapping[str, Any], result: dict[str, Any], path: str, depth: int
    ) -> None:
        out = self.out
        extra = schema.get("additionalProperties")
        props = schema.get("properties")
        if extra not in (None, False):
            out.incompatible.append(
                f"{path}: additionalProperties must be false for strict (a free-form map "
                "cannot be strict)"
            )
        if props is None:
            if extra is None:  # (a free-form map was reported just above)
                out.incompatible.append(
                    f"{path}: an object without 'properties' accepts anything; declare them"
                )
            props = {}
        elif extra is None:
            out.changes.append(f"{path}: set additionalProperties false")
        required = list(schema.get("required", []))
        converted: dict[str, Any] = {}
        for name, sub in props.items():
            self.properties += 1
            self.string_chars += len(name)
            child = self.node(sub, f"{path}.{name}", depth + 1)
            if name not in required:
                if self.dialect == "openai":
                    if not accepts_null(child):
                        child = _nullable(child)
                    out.changes.append(f"{path}.{name}: optional, sent as required and nullable")
                else:
                    out.optional_params += 1
            converted[name] = child
        result["type"] = result.get("type", "object")
        result["properties"] = converted
        if self.dialect == "openai":
            result["required"] = list(converted)
        else:
            result["required"] = [n for n in required if n in converted]
        result["additionalProperties"] = False


def convert(schema: Mapping[str, Any], dialect: Dialect) -> StrictConversion:
    """Convert ``schema`` to ``dialect``'s strict subset, sorting every finding."""
    return _Walker(dialect, schema).run()
