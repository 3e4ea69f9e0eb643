"""Minimal valid arguments for a tool, made from its JSON Schema (for smoke tests).

:func:`schema_arguments` walks a tool's parameters schema and builds the smallest value it
can that the schema accepts: only the required properties, the fewest items, the lowest
number in range, a short string of the right length, format and pattern. It follows local
references (``#/$defs/...``), ``allOf`` (merged), ``anyOf`` / ``oneOf`` (the first branch
whose value the whole schema accepts, checked with the same validator tooldeck compiles
external schemas with), ``const`` and ``enum``. A pattern is sampled from the regular
expression itself. What it cannot satisfy (a ``false`` schema, a contradiction, a pattern
beyond its sampler) raises :class:`ValueError` naming the place.

Nothing here is random: the same schema gives the same arguments.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

import jsonschema_rs

from .patterns import sample_pattern

__all__ = ["schema_value"]

_MAX_DEPTH = 24
_FORMATS: dict[str, str] = {
    "date-time": "2024-01-01T00:00:00Z",
    "date": "2024-01-01",
    "time": "00:00:00Z",
    "duration": "P1D",
    "email": "a@example.com",
    "idn-email": "a@example.com",
    "hostname": "example.com",
    "idn-hostname": "example.com",
    "ipv4": "127.0.0.1",
    "ipv6": "::1",
    "uri": "https://example.com/",
    "iri": "https://example.com/",
    "uri-reference": "https://example.com/",
    "iri-reference": "https://example.com/",
    "url": "https://example.com/",
    "uuid": "00000000-0000-4000-8000-000000000000",
    "json-pointer": "",
    "regex": "a",
}


def schema_arguments(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The smallest arguments object ``schema`` (a tool's parameters schema) accepts."""
    value = schema_value(schema)
    if not isinstance(value, dict):
        raise ValueError(f"a tool's parameters are an object, this schema makes {value!r}")
    return value


def schema_value(schema: Mapping[str, Any] | bool, root: Mapping[str, Any] | None = None) -> Any:
    """The smallest value ``schema`` accepts (``root``: where its ``#`` references point)."""
    top = root if root is not None else (schema if isinstance(schema, Mapping) else {})
    return _Maker(top).value(schema, "$", 0, 0)


class _Maker:
    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        self._checks: dict[str, Any] = {}

    def accepts(self, schema: Mapping[str, Any] | bool, value: Any) -> bool:
        """Whether ``schema`` (a part of the root, its references resolved there) accepts
        ``value``."""
        if isinstance(schema, bool):
            return schema
        whole = dict(schema)
        for defs in ("$defs", "definitions"):  # where its references point
            if defs in self.root and defs not in whole:
                whole[defs] = self.root[defs]
        key = json.dumps(whole, sort_keys=True, default=str)
        check = self._checks.get(key)
        if check is None:
            try:
                check = jsonschema_rs.validator_for(whole)
            except Exception:  # a schema the validator cannot compile: assume it accepts
                return True
            self._checks[key] = check
        return bool(check.is_valid(value))

    def value(self, schema: Mapping[str, Any] | bool, at: str, depth: int, nth: int) -> Any:
        if depth > _MAX_DEPTH:
            raise ValueError(f"{at}: the schema nests deeper than {_MAX_DEPTH} levels")
        if schema is True:
            return None
        if schema is False or not isinstance(schema, Mapping):
            raise ValueError(f"{at}: the schema accepts no value")
        if "$ref" in schema:
            target = self._resolve(str(schema["$ref"]), at)
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            merged = _merge(target, rest) if rest else target
            return self.value(merged, at, depth + 1, nth)
        if "const" in schema:
            return schema["const"]
        if "enum" in schema:
            options = list(schema["enum"])
            if not options:
                raise ValueError(f"{at}: an empty enum accepts no value")
            return options[nth % len(options)]
        if "allOf" in schema:
            merged = {k: v for k, v in schema.items() if k != "allOf"}
            for part in schema["allOf"]:
                part = self._resolve(part["$ref"], at) if "$ref" in part else part
                merged = _merge(merged, part)
            return self.value(merged, at, depth + 1, nth)
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return self._branch(schema, key, at, depth, nth)
        return self._typed(schema, at, depth, nth)

    def _resolve(self, ref: str, at: str) -> Mapping[str, Any]:
        if not ref.startswith("#"):
            raise ValueError(f"{at}: only local references are followed, not {ref!r}")
        node: Any = self.root
        for part in [p for p in ref[1:].split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, Mapping) or part not in node:
                raise ValueError(f"{at}: the reference {ref!r} points nowhere")
            node = node[part]
        if not isinstance(node, Mapping):
            raise ValueError(f"{at}: the reference {ref!r} is not a schema")
        return node

    def _branch(self, schema: Mapping[str, Any], key: str, at: str, depth: int, nth: int) -> Any:
        rest = {k: v for k, v in schema.items() if k != key}
        branches = list(schema[key])
        # a branch that is not null first: a smoke test should pass real values
        branches.sort(key=lambda b: isinstance(b, Mapping) and b.get("type") == "null")
        problems: list[str] = []
        for index, branch in enumerate(branches):
            if not isinstance(branch, Mapping | bool):
                continue
            candidate = _merge(rest, branch) if isinstance(branch, Mapping) else branch
            try:
                value = self.value(candidate, f"{at}.{key}[{index}]", depth + 1, nth)
            except ValueError as exc:
                problems.append(str(exc))
                continue
            if self.accepts(schema, value):
                return value
            problems.append(f"{at}.{key}[{index}]: its value is not accepted by the whole")
        raise ValueError("; ".join(problems) or f"{at}: no branch of {key} gives a value")

    def _typed(self, schema: Mapping[str, Any], at: str, depth: int, nth: int) -> Any:
        declared = schema.get("type")
        if isinstance(declared, str):
            types = [declared]
        elif isinstance(declared, list) and declared:
            types = sorted(declared, key=lambda t: t == "null")  # null last
        else:
            types = [_implied_type(schema)]
        problems: list[str] = []
        for kind in types:
            try:
                return self._of_type(kind, schema, at, depth, nth)
            except ValueError as exc:
                problems.append(str(exc))
        raise ValueError("; ".join(problems))

    def _of_type(self, kind: str, schema: Mapping[str, Any], at: str, depth: int, nth: int) -> Any:
        if kind == "object":
            return self._object(schema, at, depth, nth)
        if kind == "array":
            return self._array(schema, at, depth, nth)
        if kind == "string":
            return _string(schema, at, nth)
        if kind in ("integer", "number"):
            return _number(schema, at, nth, kind == "integer")
        if kind == "boolean":
            return nth % 2 == 1
        if kind == "null" or kind == "any":
            return None
        raise ValueError(f"{at}: unknown type {kind!r}")

    def _object(self, schema: Mapping[str, Any], at: str, depth: int, nth: int) -> dict[str, Any]:
        properties: Mapping[str, Any] = schema.get("properties") or {}
        required = [str(r) for r in schema.get("required") or ()]
        made: dict[str, Any] = {}
        for name in required:
            sub = properties.get(name, schema.get("additionalProperties", True))
            if sub is False:
                sub = True
            made[name] = self.value(sub, f"{at}.{name}", depth + 1, nth)
        wanted = int(schema.get("minProperties") or 0)
        for name, sub in properties.items():
            if len(made) >= wanted:
                break
            if name not in made:
                made[name] = self.value(sub, f"{at}.{name}", depth + 1, nth)
        extra = 0
        while len(made) < wanted:
            name = f"p{extra}"
            extra += 1
            if name in made:
                continue
            more = schema.get("additionalProperties", True)
            if more is False:
                raise ValueError(f"{at}: minProperties cannot be met")
            made[name] = self.value(more, f"{at}.{name}", depth + 1, nth)
        return made

    def _array(self, schema: Mapping[str, Any], at: str, depth: int, nth: int) -> list[Any]:
        prefix = list(schema.get("prefixItems") or ())
        items = schema.get("items", True)
        if isinstance(items, list):  # the older tuple form
            prefix, items = items, schema.get("additionalItems", True)
        count = max(int(schema.get("minItems") or 0), len(prefix) if prefix else 0)
        contains = schema.get("contains")
        if contains is not None:
            count = max(count, int(schema.get("minContains", 1)))
        unique = bool(schema.get("uniqueItems"))
        made: list[Any] = []
        for index in range(count):
            if contains is not None and index < int(schema.get("minContains", 1)):
                sub = contains
            else:
                sub = prefix[index] if index < len(prefix) else items
            value = self.value(sub, f"{at}[{index}]", depth + 1, index if unique else nth)
            made.append(value)
        if unique and len({json.dumps(v, sort_keys=True) for v in made}) < len(made):
            raise ValueError(f"{at}: cannot make {count} distinct items")
        return made


def _implied_type(schema: Mapping[str, Any]) -> str:
    if "properties" in schema or "required" in schema or "additionalProperties" in schema:
        return "object"
    if "items" in schema or "prefixItems" in schema or "minItems" in schema:
        return "array"
    if "minLength" in schema or "maxLength" in schema or "pattern" in schema:
        return "string"
    if any(k in schema for k in ("minimum", "maximum", "multipleOf")):
        return "number"
    return "any"


def _merge(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """``a`` and ``b`` as one schema (``allOf``): properties and required joined, bounds
    the tighter; any other keyword of ``b`` wins."""
    merged = dict(a)
    for key, value in b.items():
        if key == "properties" and isinstance(merged.get(key), Mapping):
            merged[key] = {**merged[key], **value}
        elif key == "required" and key in merged:
            merged[key] = [*merged[key], *[r for r in value if r not in merged[key]]]
        elif key in ("minimum", "exclusiveMinimum", "minLength", "minItems") and key in merged:
            merged[key] = max(merged[key], value)
        elif key in ("maximum", "exclusiveMaximum", "maxLength", "maxItems") and key in merged:
            merged[key] = min(merged[key], value)
        else:
            merged[key] = value
    return merged


def _string(schema: Mapping[str, Any], at: str, nth: int) -> str:
    low = int(schema.get("minLength") or 0)
    high = schema.get("maxLength")
    fmt = schema.get("format")
    pattern = schema.get("pattern")
    candidates: list[str] = []
    if isinstance(fmt, str) and fmt in _FORMATS:
        candidates.append(_FORMATS[fmt] if nth == 0 else _nth_format(fmt, nth))
    if isinstance(pattern, str):
        candidates.extend(sample_pattern(pattern, low, nth))
    letter = chr(ord("a") + nth % 26)
    size = max(low, 1) if high is None else min(max(low, 1), int(high))
    candidates += [letter * size + str(nth // 26) * (nth >= 26), letter * size]
    for text in candidates:
        if _fits(text, low, high, pattern):
            return text
    raise ValueError(f"{at}: no string found for {dict(schema)!r}")


def _nth_format(fmt: str, nth: int) -> str:
    base = _FORMATS[fmt]
    if fmt == "uuid":
        return f"{nth:08x}-0000-4000-8000-000000000000"
    if fmt in ("email", "idn-email"):
        return f"a{nth}@example.com"
    if fmt in ("uri", "iri", "url", "uri-reference", "iri-reference"):
        return f"https://example.com/{nth}"
    if fmt in ("date", "date-time"):
        return base.replace("01-01", f"01-{1 + nth % 28:02d}", 1)
    return base


def _fits(text: str, low: int, high: Any, pattern: Any) -> bool:
    if len(text) < low or (high is not None and len(text) > int(high)):
        return False
    if isinstance(pattern, str):
        try:
            return re.search(pattern, text) is not None
        except re.error:
            return True  # a pattern Python cannot read: the validator will say
    return True


def _number(schema: Mapping[str, Any], at: str, nth: int, integer: bool) -> int | float:
    step = schema.get("multipleOf")
    low, low_open = _bound(schema, "minimum", "exclusiveMinimum", max)
    high, high_open = _bound(schema, "maximum", "exclusiveMaximum", min)
    start: float = 0
    if low is not None and (low > 0 or (low == 0 and low_open)):
        start = low
    elif high is not None and (high < 0 or (high == 0 and high_open)):
        start = high
    unit: float = step if isinstance(step, int | float) and step > 0 else 1
    if integer and not float(unit).is_integer():
        unit = math.ceil(unit)
    firsts = [start, math.ceil(start / unit) * unit]
    if low is not None:
        firsts.append(math.floor(low / unit) * unit + unit)
    if high is not None:
        firsts.append(math.ceil(high / unit) * unit - unit)

    def valid(value: float) -> int | float | None:
        made = int(value) if integer or float(value).is_integer() else value
        ok = _in_range(made, low, low_open, high, high_open) and _multiple(made, step)
        return made if ok else None

    for first in firsts:
        if valid(first) is None:
            continue
        for value in (first + nth * unit, first - nth * unit):  # the nth distinct value
            made = valid(value)
            if made is not None:
                return made
    raise ValueError(f"{at}: no number found for {dict(schema)!r}")


def _bound(
    schema: Mapping[str, Any], inclusive: str, exclusive: str, pick: Any
) -> tuple[Any, bool]:
    closed, opened = schema.get(inclusive), schema.get(exclusive)
    if isinstance(opened, bool):  # draft 4: exclusiveMinimum is a flag on minimum
        return closed, opened and closed is not None
    if closed is None:
        return opened, opened is not None
    if opened is None:
        return closed, False
    chosen = pick(closed, opened)
    return chosen, chosen == opened and opened != closed


def _in_range(value: float, low: Any, low_open: bool, high: Any, high_open: bool) -> bool:
    if low is not None and (value < low or (low_open and value == low)):
        return False
    return not (high is not None and (value > high or (high_open and value == high)))


def _multiple(value: float, step: Any) -> bool:
    if not isinstance(step, int | float) or step <= 0:
        return True
    quotient = value / step
    return abs(quotient - round(quotient)) < 1e-9
