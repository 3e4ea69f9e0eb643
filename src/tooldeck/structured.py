"""Typed structured output: a Python type as the schema of the final answer, and back.

A turn can ask for its final answer as data of a fixed shape. The user names that shape
once, as a Pydantic model class, a dataclass, a TypedDict or a JSON Schema ``dict``
(:class:`OutputType`); tooldeck derives the JSON Schema the provider is sent (projected
strict per provider where that loses nothing, with the reason recorded where it does
not: :func:`project_output`), and turns the model's JSON back into an instance of the
type. The type is the single source of truth, so the schema the model sees and the
validation the answer goes through cannot drift apart.

A model does not always comply: a non-strict schema, a validator the schema cannot
express, a cut-off or chatty answer. :class:`AnswerCheck` is the loop's side of that:
an answer that does not validate is sent back to the model with the validation message,
as a user message, a bounded number of times; then the turn ends with ``StopReason.ERROR``
and a reason that starts with ``structured output invalid``. ``StopReason`` stays the
closed set every provider's reasons map onto: this is a way for a turn to fail, not a new
way for a model to stop.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

import jsonschema_rs
from pydantic import BaseModel, PydanticUserError, TypeAdapter, ValidationError
from pydantic.errors import PydanticInvalidForJsonSchema, PydanticSchemaGenerationError

from ._function_schema import NoTitles
from ._nulls import drop_absent_nulls
from ._strict import Dialect, convert
from .errors import SchemaError
from .transcript import AssistantMessage, StopReason, UserMessage

__all__ = [
    "INVALID_AFTER_RETRIES",
    "AnswerCheck",
    "OutputKind",
    "OutputProjection",
    "OutputType",
    "OutputTypeSpec",
    "project_output",
]

_log = logging.getLogger("tooldeck.structured")

OutputKind: TypeAlias = Literal["pydantic", "dataclass", "typeddict", "schema"]
OutputProvider: TypeAlias = Literal["openai-responses", "openai-chat", "anthropic"]

INVALID_AFTER_RETRIES = "structured output invalid after {n} retries"
"""How the reason of a turn that ran out of retries starts (``n`` = retries used)."""

_MESSAGE_LIMIT = 1500  # what the model is told about a failed answer, at most
_ERRORS_SHOWN = 8
_TOO_DEEP = "the structured answer is nested too deeply to read"

_KINDS = "a Pydantic model class, a dataclass, a TypedDict or a JSON Schema dict"


def _kind_of(source: Any) -> OutputKind | None:
    if isinstance(source, Mapping):
        return "schema"
    if not isinstance(source, type):
        return None
    if issubclass(source, BaseModel):
        return "pydantic"
    if dataclasses.is_dataclass(source):
        return "dataclass"
    if issubclass(source, dict) and hasattr(source, "__required_keys__"):
        return "typeddict"  # typing.TypedDict or typing_extensions.TypedDict
    return None


def _type_schema(adapter: TypeAdapter[Any]) -> dict[str, Any]:
    """The JSON Schema of a type (no field titles), its root an object where it can be."""
    schema: dict[str, Any] = adapter.json_schema(schema_generator=NoTitles)
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/") and len(schema) == 2:
        # A self-referencing type comes back as a root $ref: inline the root definition
        # so the root is an object, and keep $defs for the references inside.
        defs = dict(schema["$defs"])
        schema = {**defs[ref.removeprefix("#/$defs/")], "$defs": defs}
    return schema


def _path(parts: Any) -> str:
    return "/".join(str(p) for p in parts) or "$"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


_cache: dict[type, OutputType] = {}
_cache_lock = threading.Lock()


@dataclass(frozen=True, eq=False)
class OutputType:
    """The type of a structured final answer, its JSON Schema and its validation.

    Build it with :meth:`of`. ``kind`` says what ``source`` is; ``schema`` is the JSON
    Schema the answer must match (for a type, generated once, without field titles);
    :meth:`load` turns the answer's JSON data into an instance of the type (a ``dict``
    for a TypedDict or a JSON Schema).
    """

    source: Any
    kind: OutputKind
    schema: Mapping[str, Any]
    adapter: TypeAdapter[Any] | None = None
    _validator: Any = field(default=None, init=False, repr=False)

    @classmethod
    def of(cls, source: Any, name: str = "final_answer") -> OutputType:
        """The output type for ``source`` (cached per type).

        Raises :class:`~tooldeck.errors.SchemaError` (named ``name``) when ``source`` is
        none of the supported kinds, when pydantic cannot build a schema for it, or when
        its schema's root is not an object. A JSON Schema ``dict`` is taken as it is and
        checked when a request is built, like ``ModelSettings(output_schema=...)``.
        """
        if isinstance(source, OutputType):
            return source
        kind = _kind_of(source)
        if kind is None:
            raise SchemaError(name, [f"$: an output type is {_KINDS}, not {source!r}"])
        if kind == "schema":
            return cls(source, kind, source)
        with _cache_lock:
            cached = _cache.get(source)
        if cached is not None:
            return cached
        label = getattr(source, "__name__", repr(source))
        try:
            adapter: TypeAdapter[Any] = TypeAdapter(source)
            schema = _type_schema(adapter)
        except (
            PydanticSchemaGenerationError,
            PydanticInvalidForJsonSchema,
            PydanticUserError,
        ) as exc:
            raise SchemaError(
                name, [f"$: {label} cannot be an output type: {_first_line(exc)}"]
            ) from exc
        if schema.get("type") != "object":
            raise SchemaError(
                name,
                [
                    f"$: {label} is not an object (its JSON Schema root is "
                    f"{schema.get('type', 'not typed')!r}); a structured answer is an object"
                ],
            )
        made = cls(source, kind, schema, adapter)
        with _cache_lock:
            _cache.setdefault(source, made)
        return made

    @property
    def label(self) -> str:
        """The type's name, for messages."""
        return getattr(self.source, "__name__", "the JSON Schema")

    def load(self, value: Any) -> Any:
        """An instance of the type from the answer's JSON data.

        Raises ``ValueError`` saying, path by path, what does not match.
        """
        if self.adapter is None:
            validator = self._validator
            if validator is None:
                validator = jsonschema_rs.validator_for(dict(self.schema))
                object.__setattr__(self, "_validator", validator)
            try:
                errors = [
                    f"{_path(e.instance_path)}: {e.message}" for e in validator.iter_errors(value)
                ]
            except RecursionError:
                raise ValueError(_TOO_DEEP) from None
            if errors:
                raise ValueError(
                    "the structured answer does not match its schema: "
                    + "; ".join(errors[:_ERRORS_SHOWN])
                )
            return value
        try:
            return self.adapter.validate_json(json.dumps(value, allow_nan=False))
        except RecursionError:
            raise ValueError(_TOO_DEEP) from None
        except ValidationError as exc:
            errors = [f"{_path(e['loc'])}: {e['msg']}" for e in exc.errors(include_url=False)]
            raise ValueError(
                f"the structured answer is not a valid {self.label}: "
                + "; ".join(errors[:_ERRORS_SHOWN])
            ) from None
        except ValueError as exc:  # NaN or infinity cannot be JSON
            raise ValueError(f"the structured answer is not JSON data: {exc}") from None

    def parse(self, text: str) -> Any:
        """An instance of the type from the answer's text (JSON); ``ValueError`` if not.

        A ``null`` for an optional property that does not accept null is read as
        "absent" first (OpenAI strict sends optional properties as nullable).
        """
        try:
            value = json.loads(text)
            value = drop_absent_nulls(value, self.schema, self.schema)
        except RecursionError:
            raise ValueError(_TOO_DEEP) from None
        except ValueError as exc:
            raise ValueError(f"the structured answer is not JSON: {exc}") from None
        return self.load(value)


OutputTypeSpec: TypeAlias = type[Any] | Mapping[str, Any] | OutputType
"""What ``output_type=`` takes: a Pydantic model class, a dataclass, a TypedDict, a JSON
Schema (a mapping), or an :class:`OutputType` already made."""


@dataclass(frozen=True, slots=True)
class OutputProjection:
    """An output schema as one provider will be sent it.

    ``schema`` is what goes on the wire; ``strict`` the decision; ``reason`` says why it
    is not strict (or ``None``); ``changes`` lists what the strict conversion rewrote.
    """

    name: str
    dialect: Dialect
    schema: dict[str, Any]
    strict: bool
    reason: str | None
    changes: tuple[str, ...] = ()


def project_output(
    output: Any, dialect: Dialect | OutputProvider, name: str = "final_answer"
) -> OutputProjection:
    """Decide strict for an output schema and build what is sent.

    ``output`` is anything :meth:`OutputType.of` accepts; ``dialect`` is ``"openai"`` or
    ``"anthropic"`` (or a provider name: ``openai-responses``, ``openai-chat``,
    ``anthropic``).

    - OpenAI: strict when the schema converts to the strict subset without losing
      anything; otherwise the schema is sent as it is with ``strict: false``, and
      ``reason`` says what could not be enforced or expressed.
    - Anthropic: its ``output_config.format`` is always grammar-constrained (there is no
      non-strict mode), so the converted schema is sent whenever the conversion is
      possible; constraints it cannot enforce move into descriptions (listed in
      ``changes``). A schema it cannot express at all is not strict, with the reason
      (the adapter refuses to send it).

    Either way tooldeck validates the answer against the original schema (or type).
    """
    schema = OutputType.of(output, name).schema
    resolved: Dialect = "anthropic" if dialect == "anthropic" else "openai"
    conversion = convert(schema, resolved)
    blockers = list(conversion.incompatible)
    if resolved == "openai":
        blockers += conversion.lossy
    if blockers or conversion.schema is None:
        reason = "not strict-compatible: " + "; ".join(blockers)
        return OutputProjection(name, resolved, dict(schema), False, reason)
    changes = conversion.changes + (conversion.lossy if resolved == "anthropic" else [])
    return OutputProjection(name, resolved, conversion.schema, True, None, tuple(changes))


class AnswerCheck:
    """One turn's structured final answer: validated, asked for again, or given up on.

    The loop calls :meth:`review` with each model response. For a final answer (no tool
    calls, ``end_turn``, or the ``error`` an adapter reports for an answer that failed
    its schema) it validates the answer into an instance of the output type. A failure
    is answered with a :class:`UserMessage` carrying the validation message (the loop
    appends it and asks the model again) until ``retries`` are used up; then the reason
    the turn ends with is returned instead.
    """

    def __init__(self, output: OutputType | None, retries: int, name: str = "final_answer"):
        self.output = output
        self.retries = retries
        self.name = name
        self.retried = 0
        self.value: Any = None  # the validated instance, once there is one

    def review(self, message: AssistantMessage) -> UserMessage | str | None:
        """``None``: carry on as usual; a message: send it and ask again; a text: give up."""
        if self.output is None or message.tool_calls:
            return None
        error = (message.provider_data or {}).get("structured_error")
        if message.stop_reason is StopReason.ERROR and isinstance(error, str):
            problem = error  # the adapter parsed and validated it against the schema
        elif message.stop_reason is StopReason.END_TURN:
            try:
                self.value = (
                    self.output.load(message.structured)
                    if message.structured is not None
                    else self.output.parse(message.text)
                )
                return None
            except ValueError as exc:
                problem = str(exc)
        else:
            return None  # refused, cut off, filtered, failed: not an answer to check
        if self.retried >= self.retries:
            return f"{INVALID_AFTER_RETRIES.format(n=self.retried)}: {problem}"
        self.retried += 1
        _log.info(
            "structured answer %s rejected (retry %d of %d): %s",
            self.name,
            self.retried,
            self.retries,
            problem,
        )
        return UserMessage(self.retry_text(problem))

    def retry_text(self, problem: str) -> str:
        """What the model is told about an answer that failed validation."""
        if len(problem) > _MESSAGE_LIMIT:
            problem = problem[: _MESSAGE_LIMIT - 1] + "…"
        return (
            f"Your final answer could not be used: {problem.rstrip('.')}.\n"
            "Reply again with only a JSON object that matches the required schema exactly, "
            "with no text around it."
        )
