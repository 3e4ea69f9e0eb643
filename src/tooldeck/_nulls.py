"""Map ``null`` back to "absent" for optional properties that do not accept null.

OpenAI's strict mode makes every property required, so tooldeck sends an optional
property as a nullable one; the model then answers ``null`` where it meant "not given".
Before validation, such a ``null`` is removed so that the property's default applies.
A property whose own schema accepts ``null`` keeps it: there ``null`` is a real value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["drop_absent_nulls", "has_optional_non_nullable"]


def _resolve(schema: Any, root: Mapping[str, Any]) -> Any:
    seen = 0
    while isinstance(schema, Mapping) and isinstance(schema.get("$ref"), str) and seen < 32:
        ref: str = schema["$ref"]
        if ref == "#":
            return root
        if not ref.startswith("#/"):
            return schema
        node: Any = root
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, Mapping) or part not in node:
                return schema
            node = node[part]
        schema = node
        seen += 1
    return schema


def _accepts_null(schema: Any, root: Mapping[str, Any], _depth: int = 0) -> bool:
    """Whether ``null`` is valid against ``schema``: true unless a keyword rejects it.

    Keywords for other types (``minimum``, ``properties``...) do not apply to null, so a
    schema without ``type``, ``enum`` or ``const`` (``{}``, ``{"description": ...}``)
    accepts it. What cannot be resolved is taken to accept it: keeping a null the schema
    rejects only costs a validation error; dropping a valid one would change the value.
    """
    schema = _resolve(schema, root)
    if not isinstance(schema, Mapping):
        return schema is not False
    if _depth > 32:
        return True
    kind = schema.get("type")
    if kind is not None and kind != "null" and not (isinstance(kind, list) and "null" in kind):
        return False
    enum = schema.get("enum")
    if isinstance(enum, list) and None not in enum:
        return False
    if "const" in schema and schema["const"] is not None:
        return False
    any_of = schema.get("anyOf")
    if isinstance(any_of, list) and not any(_accepts_null(b, root, _depth + 1) for b in any_of):
        return False
    one_of = schema.get("oneOf")
    if isinstance(one_of, list) and sum(_accepts_null(b, root, _depth + 1) for b in one_of) != 1:
        return False
    all_of = schema.get("allOf")
    if isinstance(all_of, list) and not all(_accepts_null(b, root, _depth + 1) for b in all_of):
        return False
    return not ("not" in schema and _accepts_null(schema["not"], root, _depth + 1))


def _is_kind(schema: Mapping[str, Any], kind: str) -> bool:
    declared = schema.get("type")
    if declared == kind or (isinstance(declared, list) and kind in declared):
        return True
    return ("properties" if kind == "object" else "items") in schema


def _branch(schema: Any, root: Mapping[str, Any], kind: str) -> Any:
    """The one ``kind`` ("object" or "array") branch of a union, if there is exactly one."""
    schema = _resolve(schema, root)
    if not isinstance(schema, Mapping):
        return None
    all_of = schema.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and not _is_kind(schema, kind):
        schema = _resolve(all_of[0], root)  # {"allOf": [{"$ref": ...}], "description": ...}
        if not isinstance(schema, Mapping):
            return None
    branches = schema.get("anyOf") or schema.get("oneOf")
    if not branches:
        return schema
    found = [
        b
        for b in (_resolve(x, root) for x in branches)
        if isinstance(b, Mapping) and _is_kind(b, kind)
    ]
    return found[0] if len(found) == 1 else None


def has_optional_non_nullable(
    schema: Any, root: Mapping[str, Any] | None = None, _seen: set[int] | None = None
) -> bool:
    """Whether any object in ``schema`` has an optional property that rejects null."""
    root = root if root is not None else schema
    seen = _seen if _seen is not None else set()
    schema = _resolve(schema, root)
    if not isinstance(schema, Mapping) or id(schema) in seen:
        return False
    seen.add(id(schema))
    props = schema.get("properties")
    if isinstance(props, Mapping):
        required = set(schema.get("required", ()))
        for name, sub in props.items():
            if name not in required and not _accepts_null(sub, root):
                return True
    children: list[Any] = []
    if isinstance(props, Mapping):
        children.extend(props.values())
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), Mapping):
            children.append(schema[key])
    for key in ("anyOf", "oneOf", "allOf"):
        children.extend(schema.get(key) or ())
    for key in ("$defs", "definitions"):
        if isinstance(schema.get(key), Mapping):
            children.extend(schema[key].values())
    return any(has_optional_non_nullable(c, root, seen) for c in children)


def drop_absent_nulls(value: Any, schema: Any, root: Mapping[str, Any]) -> Any:
    """A copy of ``value`` without nulls that can only mean "absent" (``value`` if none)."""
    if isinstance(value, dict):
        node = _branch(schema, root, "object")
        if not isinstance(node, Mapping):
            return value
        props = node.get("properties")
        props = props if isinstance(props, Mapping) else {}
        extra = None if "patternProperties" in node else node.get("additionalProperties")
        required = node.get("required", ())
        out: dict[str, Any] | None = None
        for key, item in value.items():
            sub = props.get(key)
            if sub is None:
                if item is None or not isinstance(extra, Mapping):
                    continue
                sub = extra  # a map's value: its own optional nulls are mapped
            elif item is None:
                if key not in required and not _accepts_null(sub, root):
                    if out is None:
                        out = dict(value)
                    del out[key]
                continue
            new = drop_absent_nulls(item, sub, root)
            if new is not item:
                if out is None:
                    out = dict(value)
                out[key] = new
        return value if out is None else out
    if isinstance(value, list):
        node = _branch(schema, root, "array")
        if not (isinstance(node, Mapping) and isinstance(node.get("items"), Mapping)):
            return value
        items = node["items"]
        new_list = [drop_absent_nulls(v, items, root) for v in value]
        if any(a is not b for a, b in zip(new_list, value, strict=True)):
            return new_list
    return value
