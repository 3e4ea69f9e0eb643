"""Pieces every provider adapter shares: replay filtering, structured output, refusals."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import jsonschema_rs

from .._nulls import drop_absent_nulls
from .._strict import Dialect, convert
from ..errors import SchemaError
from ..transcript import AssistantMessage, AssistantPart, OpaqueItem

__all__ = [
    "StructuredOutput",
    "classify_refusal",
    "prepare_output_schema",
    "replay_parts",
]


def replay_parts(
    message: AssistantMessage, provider: str, adapter: str, model: str
) -> list[AssistantPart]:
    """The parts of ``message`` to send back to ``provider``/``adapter``/``model``.

    Text and tool calls always go back. Opaque items go back verbatim, in their original
    order, only when they are replayable to this target (reasoning: same provider,
    adapter and model; server-side items: same provider and adapter); otherwise they are
    dropped, never translated.
    """
    kept: list[AssistantPart] = []
    for part in message.parts:
        if isinstance(part, OpaqueItem) and not part.replayable_to(provider, adapter, model):
            continue
        kept.append(part)
    return kept


def same_origin(message: AssistantMessage, provider: str, adapter: str, model: str) -> bool:
    return (message.provider, message.adapter, message.model) == (provider, adapter, model)


class StructuredOutput:
    """A requested structured final answer: checked before any request, validated after."""

    def __init__(
        self, schema: Mapping[str, Any], name: str, strict: bool, wire_schema: Mapping[str, Any]
    ):
        self.schema = schema
        self.name = name
        self.strict = strict
        self.wire_schema = wire_schema
        self._validator = jsonschema_rs.validator_for(dict(schema))

    def parse(self, text: str) -> Any:
        """Parse and validate the model's answer; raises ``ValueError`` saying what is wrong."""
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"the structured answer is not JSON: {exc}") from None
        if self.strict:  # optional properties were sent as required-nullable
            value = drop_absent_nulls(value, self.schema, self.schema)
        errors = [
            f"{'/'.join(map(str, e.instance_path)) or '$'}: {e.message}"
            for e in self._validator.iter_errors(value)
        ]
        if errors:
            raise ValueError(
                "the structured answer does not match its schema: " + "; ".join(errors[:5])
            )
        return value


def prepare_output_schema(
    schema: Mapping[str, Any], name: str, dialect: Dialect, provider: str
) -> StructuredOutput:
    """Check an output schema before the network call and decide strict.

    The root must be ``type: object`` (not a union) and the schema must be valid JSON
    Schema, otherwise :class:`SchemaError`. Strict is used when the schema converts to
    the provider's strict subset without losing anything.
    """
    problems: list[str] = []
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        got = schema.get("type") if isinstance(schema, Mapping) else type(schema).__name__
        problems.append(f"$: an output schema needs an object root, got {got!r}")
    else:
        try:
            jsonschema_rs.meta.validate(dict(schema))
        except Exception as exc:
            problems.append(f"$: not a valid JSON Schema: {exc}")
    if problems:
        raise SchemaError(name, problems, provider=provider)
    conversion = convert(schema, dialect)
    strict = not conversion.incompatible and not conversion.lossy
    wire = conversion.schema if strict and conversion.schema is not None else dict(schema)
    return StructuredOutput(schema, name, strict, wire)


_REFUSAL_WORDS = {
    "cyber": ("malware", "exploit", "hack", "cyber"),
    "bio": ("biolog", "pathogen", "virus", "weapon"),
    "self_harm": ("self-harm", "suicide"),
}


def classify_refusal(category: str | None = None, texts: Iterable[str] = ()) -> str:
    """A classified refusal reason such as ``refusal:cyber``; never the provider's text.

    A provider category wins (Anthropic ``stop_details.category``); otherwise the text is
    only scanned for a coarse class and then discarded.
    """
    if category:
        return f"refusal:{category}"
    joined = " ".join(texts).lower()
    for label, words in _REFUSAL_WORDS.items():
        if any(w in joined for w in words):
            return f"refusal:{label}"
    return "refusal:unspecified"
