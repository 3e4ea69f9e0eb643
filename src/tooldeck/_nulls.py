"""Map ``null`` back to "absent" for optional properties that do not accept null.

OpenAI's strict mode makes every property required, so tooldeck sends an optional
property as a nullable one; the model then answers ``null`` where it meant "not given".
Before validation, such a ``null`` is removed so that the property's default applies.
A property whose own schema accepts ``null`` keeps it: there ``null`` is a real value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._strict import accepts_null

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


def _object_branch(schema: Any, root: Mapping[str, Any]) -> Any:
    """The one object-shaped branch of a union, if there is exactly one."""
    schema = _resolve(schema, root)
    if not isinstance(schema, Mapping):
        return None
    branches = schema.get("anyOf") or schema.get("oneOf")
    if not branches:
        return schema
    objects = [
        b
        for b in (_resolve(x, root) for x in branches)
        if isinstance(b, Mapping) and (b.get("type") == "object" or "properties" in b)
    ]
    return objects[0] if len(objects) == 1 else None


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
            if name not in required and not accepts_null(_resolve(sub, root)):
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
    node = _object_branch(schema, root)
    if isinstance(value, dict) and isinstance(node, Mapping):
        props = node.get("properties")
        if not isinstance(props, Mapping):
            return value
        required = node.get("required", ())
        out: dict[str, Any] | None = None
        for key, item in value.items():
            sub = props.get(key)
            if sub is None:
                continue
            if item is None:
                if key not in required and not accepts_null(_resolve(sub, root)):
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
    if (
        isinstance(value, list)
        and isinstance(node, Mapping)
        and isinstance(node.get("items"), Mapping)
    ):
        items = node["items"]
        new_list = [drop_absent_nulls(v, items, root) for v in value]
        if any(a is not b for a, b in zip(new_list, value, strict=True)):
            return new_list
    return value
