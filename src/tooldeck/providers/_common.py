"""Pieces every provider adapter shares: replay filtering, structured output, refusals."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from typing import Any

import jsonschema_rs

from .._nulls import drop_absent_nulls
from .._strict import Dialect
from ..errors import SchemaError
from ..result import TextPart
from ..structured import project_output
from ..transcript import AssistantMessage, AssistantPart, OpaqueItem, StopReason

__all__ = [
    "StructuredOutput",
    "classify_refusal",
    "prepare_output_schema",
    "replay_parts",
]

_log = logging.getLogger("tooldeck.providers")


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
    """A requested structured final answer: checked before any request, validated after.

    ``wire_schema`` is what the provider is sent, ``strict`` whether it is sent strict,
    ``reason`` why not (``None`` when strict).
    """

    def __init__(
        self,
        schema: Mapping[str, Any],
        name: str,
        strict: bool,
        wire_schema: Mapping[str, Any],
        reason: str | None = None,
    ):
        self.schema = schema
        self.name = name
        self.strict = strict
        self.wire_schema = wire_schema
        self.reason = reason
        self._validator = jsonschema_rs.validator_for(dict(schema))

    def parse(self, text: str) -> Any:
        """Parse and validate the model's answer; raises ``ValueError`` saying what is wrong."""
        try:
            value = json.loads(text)
            if self.strict:  # optional properties were sent as required-nullable
                value = drop_absent_nulls(value, self.schema, self.schema)
            errors = [
                f"{'/'.join(map(str, e.instance_path)) or '$'}: {e.message}"
                for e in self._validator.iter_errors(value)
            ]
        except RecursionError:  # a hostile or broken answer: a retry, never a crash
            raise ValueError("the structured answer is nested too deeply to read") from None
        except ValueError as exc:
            raise ValueError(f"the structured answer is not JSON: {exc}") from None
        if errors:
            raise ValueError(
                "the structured answer does not match its schema: " + "; ".join(errors[:5])
            )
        return value

    def answer(
        self, parts: Iterable[AssistantPart], stop: StopReason, provider_data: dict[str, Any]
    ) -> tuple[Any, StopReason]:
        """A response's final answer and stop reason, the same for every adapter: the text
        of a message that ended its turn, parsed; one that does not parse ends the turn
        as ``ERROR`` (why in ``provider_data["structured_error"]``), never an exception,
        so the loop can send it back for a retry."""
        if stop is not StopReason.END_TURN:
            return None, stop
        text = "".join(p.text for p in parts if isinstance(p, TextPart))
        try:
            return self.parse(text), stop
        except ValueError as exc:
            provider_data["structured_error"] = str(exc)
            return None, StopReason.ERROR


def prepare_output_schema(
    schema: Mapping[str, Any], name: str, dialect: Dialect, provider: str
) -> StructuredOutput:
    """Check an output schema before the network call and decide strict.

    The root must be ``type: object`` (not a union) and the schema must be valid JSON
    Schema, otherwise :class:`SchemaError`. Strict is decided by
    :func:`tooldeck.structured.project_output`; a non-strict schema is sent with the
    reason logged and kept in ``StructuredOutput.reason``, except to Anthropic, whose
    structured output is always constrained: there it is a :class:`SchemaError`.
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
    projection = project_output(schema, dialect, name)
    if dialect == "anthropic" and not projection.strict:
        # output_config.format has no non-strict mode: the API would refuse the schema
        reason = projection.reason or "not strict-compatible"
        raise SchemaError(
            name,
            [f"$: Anthropic structured output needs a strict-compatible schema ({reason})"],
            provider=provider,
        )
    if projection.reason is not None:
        _log.debug(
            "output schema %r for %s is sent non-strict: %s", name, provider, projection.reason
        )
    return StructuredOutput(schema, name, projection.strict, projection.schema, projection.reason)


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
