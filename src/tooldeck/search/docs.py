"""The searchable text of a tool: :class:`ToolDoc`, read from a Tool or a definition.

A definition may come from tooldeck's ``definitions.json``, an MCP server, an OpenAI-style
function, or a benchmark catalog; :meth:`ToolDoc.from_definition` reads them all. The
parameter text (names, descriptions, enum values, nested ones included) is where many
tools say what they act on, so both the lexical index and the embeddings read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from .._config_files import load_json
from ..tools import Tool
from .text import one_line, words

__all__ = [
    "EMBEDDING_FIELDS",
    "embedding_fields",
    "embedding_text",
    "schema_text",
]


@dataclass(frozen=True, slots=True)
class ToolDoc:
    """The searchable text of one tool."""

    name: str
    description: str = ""
    input_schema: Mapping[str, Any] = field(default_factory=dict)
    namespace: str | None = None
    namespace_description: str | None = None

    @classmethod
    def from_tool(cls, tool: Tool) -> ToolDoc:
        return cls(
            name=tool.name,
            description=tool.description or "",
            input_schema=tool.schema,
            namespace=tool.namespace,
            namespace_description=tool.namespace_description,
        )

    @classmethod
    def from_definition(cls, definition: Mapping[str, Any]) -> ToolDoc:
        """A plain definition: ``name``, ``description``, an input schema under
        ``input_schema``, ``parameters``, ``inputSchema`` or ``json_schema``, and optional
        ``namespace`` / ``namespace_description``. An OpenAI-style
        ``{"type": "function", "function": {...}}`` wrapper is unwrapped."""
        if isinstance(definition.get("function"), Mapping):
            definition = definition["function"]
        name = definition.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"a tool definition needs a non-empty 'name': {definition!r:.120}")
        schema: Any = {}
        for key in ("input_schema", "parameters", "inputSchema", "json_schema"):
            if isinstance(definition.get(key), Mapping):
                schema = definition[key]
                break
        description = definition.get("description")
        namespace = definition.get("namespace")
        namespace_description = definition.get("namespace_description")
        return cls(
            name=name,
            description=description if isinstance(description, str) else "",
            input_schema=schema,
            namespace=namespace if isinstance(namespace, str) else None,
            namespace_description=(
                namespace_description if isinstance(namespace_description, str) else None
            ),
        )


def load_definitions(path: str | Path) -> list[ToolDoc]:
    """Tool definitions from a JSON file: a list, or an object with a ``tools`` list
    (tooldeck's ``definitions.json`` and ``bench/catalog/tools.json`` both work)."""
    data = load_json(path)  # ConfigFileError (a ValueError) for a hostile or broken file
    items = data.get("tools") if isinstance(data, Mapping) else data
    if not isinstance(items, list):
        raise ValueError(f"{path}: expected a JSON list of tools or an object with 'tools'")
    return [ToolDoc.from_definition(item) for item in items]


def _is_map(value: Any) -> TypeGuard[Mapping[str, Any]]:
    return type(value) is dict or isinstance(value, Mapping)


def schema_text(schema: Any, depth: int = 0) -> tuple[list[str], list[str]]:
    """(parameter names, parameter descriptions) of a JSON Schema, nested ones included."""
    names: list[str] = []
    texts: list[str] = []
    if not _is_map(schema) or depth > 6:
        return names, texts
    subs: list[Any] = []
    props = schema.get("properties")
    if _is_map(props):
        for key, sub in props.items():
            names.append(str(key))
            if _is_map(sub):
                for text_key in ("description", "title"):
                    value = sub.get(text_key)
                    if isinstance(value, str):
                        texts.append(value)
                enum = sub.get("enum")
                if isinstance(enum, list):
                    texts.extend(e for e in enum[:30] if isinstance(e, str))
                subs.append(sub)
    for key in ("items", "additionalProperties"):
        sub = schema.get(key)
        if _is_map(sub):
            subs.append(sub)
    for key in ("anyOf", "oneOf", "allOf"):
        alternatives = schema.get(key)
        if isinstance(alternatives, list):
            subs.extend(alternatives)
    defs = schema.get("$defs") if depth == 0 else None
    if _is_map(defs):
        subs.extend(defs.values())
    for sub in subs:
        n, t = schema_text(sub, depth + 1)
        names += n
        texts += t
    return names, texts


def embedding_text(doc: ToolDoc, parts: str = "full", chars: int = 0) -> str:
    """What a tool's embedding is made of (see ``SearchConfig.semantic_text``)."""
    name = " ".join(words(doc.name.split("__", 1)[-1], joined=False))
    head = f"{doc.namespace or ''} {name}."
    if parts == "summary":
        text = f"{head} {one_line(doc.description, 1000)}"
    else:
        text = f"{head} {' '.join(doc.description.split())}"
        if parts == "full":
            names, texts = schema_text(doc.input_schema)
            params = " ".join(" ".join(words(n, joined=False)) for n in names)
            text = f"{text} {params}. {' '.join(' '.join(texts).split())}"
    return text[:chars] if chars > 0 else text


#: the parts of a tool embedded one by one (``SearchConfig.semantic_text == "fields"``)
EMBEDDING_FIELDS = ("name", "summary", "description", "param_names", "param_descriptions")


def embedding_fields(doc: ToolDoc, chars: int = 600) -> tuple[str, ...]:
    """The texts of :data:`EMBEDDING_FIELDS` for one tool: namespace + name words, the
    first sentence, the description, the parameters' names (split into words) and their
    descriptions and enum values; the last two and the description cut at ``chars``."""
    name = " ".join(words(doc.name.split("__", 1)[-1], joined=False))
    names, texts = schema_text(doc.input_schema)
    params = " ".join(" ".join(words(n, joined=False)) for n in names)

    def cut(text: str) -> str:
        return text[:chars] if chars > 0 else text

    return (
        f"{doc.namespace or ''} {name}".strip(),
        one_line(doc.description, 1000),
        cut(" ".join(doc.description.split())),
        cut(params),
        cut(" ".join(" ".join(texts).split())),
    )
