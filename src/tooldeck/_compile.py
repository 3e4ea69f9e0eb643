"""Compiling a JSON Schema that came from someone else, without trusting it.

A tool's external schema is data from an untrusted party: an MCP server, a definitions
file, a library caller. jsonschema_rs resolves a ``$ref`` over HTTP and from the disk by
default, and fetches an unknown ``$schema`` meta-schema, so merely defining or validating
against a schema could make tooldeck send a request or read a file. Here a schema is:

1. walked for references: only references inside the schema itself (``#...``: a JSON
   pointer or an anchor) resolve; any other ``$ref`` / ``$dynamicRef`` /
   ``$recursiveRef``, and a ``$schema`` that is not a dialect jsonschema_rs has built in,
   is refused with its location;
2. checked against its meta-schema and compiled, with a retriever that refuses every
   URI (the guard that holds wherever the walk in 1 does not look, e.g. a local
   pointer into an unknown keyword).

Done once, when the tool is defined (or an MCP listing is turned into tools), so an
unusable schema is a definition problem and never an exception, a request or a file read
when a call is validated.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jsonschema_rs

__all__ = ["Problem", "compile_schema", "located", "reference_problems"]

Problem = tuple[tuple[str | int, ...], str]  # (path inside the schema, what is wrong)

_REFERENCES = ("$ref", "$dynamicRef", "$recursiveRef")
# Keywords whose value is a schema, a list of schemas, or a map of names to schemas (in
# every draft jsonschema_rs supports). Data keywords (enum, const, default, examples)
# and unknown keywords are not walked: what is there is no schema unless a local
# pointer makes it one, and then step 2 refuses whatever it would fetch.
_ONE = frozenset(
    {
        "additionalItems",
        "additionalProperties",
        "contains",
        "contentSchema",
        "else",
        "if",
        "items",
        "not",
        "propertyNames",
        "then",
        "unevaluatedItems",
        "unevaluatedProperties",
    }
)
_MANY = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "items"})
_NAMED = frozenset(
    {"$defs", "definitions", "dependencies", "dependentSchemas", "patternProperties", "properties"}
)
_LOOKED_AT = frozenset({*_REFERENCES, "$schema", *_ONE, *_MANY, *_NAMED})
_DIALECTS = frozenset(
    {
        "json-schema.org/draft-04/schema",
        "json-schema.org/draft-06/schema",
        "json-schema.org/draft-07/schema",
        "json-schema.org/draft/2019-09/schema",
        "json-schema.org/draft/2020-12/schema",
    }
)
_NO_FETCH = (
    "tooldeck never fetches a schema from the network or the disk; only references "
    "inside the schema ('#/...', '#anchor') resolve"
)


def _refuse(uri: str) -> Any:
    raise ValueError(f"{uri} was not retrieved: {_NO_FETCH}")


def _known_dialect(uri: str) -> bool:
    bare = uri[:-1] if uri.endswith("#") else uri
    for scheme in ("https://", "http://"):
        if bare.startswith(scheme):
            return bare[len(scheme) :] in _DIALECTS
    return False


def _walk(schema: Any) -> tuple[list[Problem], list[tuple[tuple[str | int, ...], str]]]:
    """Refused references and ``$schema`` values, and the local references (for messages)."""
    problems: list[Problem] = []
    local: list[tuple[tuple[str | int, ...], str]] = []
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), schema)]
    while stack:
        path, node = stack.pop()
        if not isinstance(node, dict):
            continue
        for key in _LOOKED_AT.intersection(node):
            value = node[key]
            here = (*path, key)
            if key in _REFERENCES:
                if not isinstance(value, str):
                    continue
                if value.startswith("#"):
                    local.append((here, value))
                else:
                    problems.append(
                        (here, f"the reference {value!r} points outside this schema: {_NO_FETCH}")
                    )
            elif key == "$schema":
                if isinstance(value, str) and not _known_dialect(value):
                    problems.append(
                        (
                            here,
                            f"unknown dialect {value!r}: use a JSON Schema draft (4, 6, 7, "
                            f"2019-09 or 2020-12); {_NO_FETCH}",
                        )
                    )
            elif key in _NAMED and isinstance(value, dict):
                stack.extend(((*here, name), sub) for name, sub in value.items())
            elif key in _MANY and isinstance(value, list):
                stack.extend(((*here, i), sub) for i, sub in enumerate(value))
            elif key in _ONE:
                stack.append((here, value))
    problems.sort(key=lambda p: [str(part) for part in p[0]])
    return problems, local


def reference_problems(schema: Any) -> list[Problem]:
    """References and dialects in ``schema`` that would need a fetch (refused)."""
    return _walk(schema)[0]


def located(problems: list[Problem], root: str = "$") -> list[str]:
    """Problems as text: ``$['properties']['a']: what is wrong``."""
    return [root + "".join(f"[{p!r}]" for p in path) + f": {why}" for path, why in problems]


def _message(exc: Exception) -> str:
    text = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return str(text).strip().splitlines()[0]


def compile_schema(
    schema: Mapping[str, Any], *, validate_formats: bool = True
) -> tuple[Any, list[Problem]]:
    """``(validator, [])`` for a usable schema, or ``(None, problems)``; never fetches."""
    problems, local = _walk(schema)
    if problems:
        return None, problems
    try:  # checks the schema against its meta-schema too (same messages as meta.validate)
        validator = jsonschema_rs.validator_for(
            dict(schema), validate_formats=validate_formats, retriever=_refuse
        )
    except jsonschema_rs.ValidationError as exc:
        message = _message(exc)
        where = tuple(exc.instance_path)
        if type(exc.kind).__name__ != "Referencing":
            return None, [(where, f"not a valid JSON Schema: {message}")]
        for at, ref in local:
            if f"'{ref[1:]}'" in message or f"'{ref}'" in message:
                return None, [(at, f"the reference {ref!r} points to nothing: {message}")]
        return None, [(where, f"cannot be compiled: {message}")]
    except Exception as exc:  # e.g. a dialect jsonschema_rs does not know
        return None, [((), f"not a usable JSON Schema: {_message(exc)}")]
    return validator, []
