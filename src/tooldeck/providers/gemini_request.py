"""Gemini's request body: ``contents`` from the transcript, function declarations,
``toolConfig``, ``generationConfig``; the same body for ``generateContent`` and
``streamGenerateContent``.

An assistant message goes back as one ``model`` content whose parts keep their order.
Parts the same model produced go back exactly as received, ``thoughtSignature``
included; thought parts and bare signatures only to the same provider, adapter and
model (:func:`~tooldeck.providers._common.replay_parts`); another Gemini model gets the
calls and text without signatures. Other providers' calls are sent as ``functionCall``
parts (their id, name and arguments). The outputs that follow become one ``user``
content that starts with a ``functionResponse`` per call, in order.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import jsonschema_rs

from ..errors import SchemaError
from ..model import ModelRequest, ModelSettings
from ..result import ImagePart, TextPart
from ..transcript import AssistantMessage, Item, OpaqueItem, ToolCall, ToolOutput, UserMessage
from ._caching import ToolOrder
from ._common import StructuredOutput, replay_parts, same_origin
from ._gemini_schema import project_gemini_tools, project_schema
from .gemini_response import ADAPTER, PROVIDER

__all__ = ["build_body", "build_contents"]

_log = logging.getLogger("tooldeck.providers.gemini")


def _tool_config(settings: ModelSettings) -> dict[str, Any]:
    choice = settings.tool_choice
    if choice in ("auto", "none"):
        return {"functionCallingConfig": {"mode": choice.upper()}}
    if choice == "required":
        return {"functionCallingConfig": {"mode": "ANY"}}
    return {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [choice]}}


def _content_parts(parts: Sequence[Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, ImagePart):
            if part.url is not None:
                out.append({"fileData": {"mimeType": part.mime_type, "fileUri": part.url}})
            else:
                out.append({"inlineData": {"mimeType": part.mime_type, "data": part.data}})
        elif part.text:
            out.append({"text": part.text})
    return out


def _args(call: ToolCall) -> dict[str, Any]:
    """A call's arguments as the object ``functionCall.args`` needs ({} when not one)."""
    if isinstance(call.arguments, Mapping):
        return copy.deepcopy(dict(call.arguments))
    try:
        value = json.loads(call.arguments) if call.arguments.strip() else {}
    except ValueError:
        value = None
    if isinstance(value, dict):
        return value
    _log.warning(
        "call %s (%s): arguments are not a JSON object; sent as {}", call.call_id, call.name
    )
    return {}


class _Contents:
    """Builds ``contents``, merging consecutive turns of the same role."""

    def __init__(self) -> None:
        self.contents: list[dict[str, Any]] = []
        self.with_id: dict[str, bool] = {}  # call id -> sent with its id

    def add(self, role: str, parts: list[dict[str, Any]]) -> None:
        if not parts:
            return
        last = self.contents[-1] if self.contents else None
        if last is not None and last["role"] == role:
            if role == "user" and any("functionResponse" in p for p in parts):
                # responses come first in a user turn, in the order of their calls
                plain = [p for p in last["parts"] if "functionResponse" not in p]
                answers = [p for p in last["parts"] if "functionResponse" in p]
                last["parts"] = [*answers, *parts, *plain]
            else:
                last["parts"].extend(parts)
        else:
            self.contents.append({"role": role, "parts": parts})

    def output(self, output: ToolOutput) -> None:
        key = "error" if output.is_error else "output"
        response: dict[str, Any] = {"name": output.name, "response": {key: output.text}}
        if self.with_id.get(output.call_id, True):
            response = {"id": output.call_id, **response}
        images = [p for p in output.result.parts if isinstance(p, ImagePart)]
        self.add("user", [{"functionResponse": response}, *_content_parts(images)])


def build_body(
    request: ModelRequest,
    model: str,
    *,
    max_tokens: int | None = None,
    thinking: Mapping[str, Any] | None = None,
    safety_settings: Sequence[Mapping[str, Any]] = (),
    order: ToolOrder | None = None,
) -> tuple[dict[str, Any], StructuredOutput | None]:
    """The request body (the same for both paths), and the structured output if asked.

    ``order`` (with ``ModelSettings(cache=...)``) keeps every declaration where it was
    first sent, so a tool found later is appended (Gemini caches the prompt prefix).

    Raises :class:`SchemaError` for unusable tool or output schemas; nothing is sent.
    """
    settings = request.settings
    projections = project_gemini_tools(list(request.tools))
    body: dict[str, Any] = {"contents": build_contents(request.transcript, model)}
    if request.instructions:
        body["systemInstruction"] = {"parts": [{"text": request.instructions}]}
    declarations = [copy.deepcopy(p.entry) for p in projections]
    if order is not None and settings.cache:
        declarations = order.apply(declarations)
    tools: list[dict[str, Any]] = []
    if declarations:
        tools.append({"functionDeclarations": declarations})
    tools += [copy.deepcopy(dict(t)) for t in request.hosted]
    if tools:
        body["tools"] = tools
        body["toolConfig"] = _tool_config(settings)
    config: dict[str, Any] = {}
    limit = settings.max_output_tokens or max_tokens
    if limit is not None:
        config["maxOutputTokens"] = limit
    if settings.temperature is not None:
        config["temperature"] = settings.temperature
    if thinking is not None:
        config["thinkingConfig"] = copy.deepcopy(dict(thinking))
    structured = None
    if settings.output_spec is not None:
        structured = _output_schema(settings.output_spec.schema, settings.output_schema_name)
        config["responseMimeType"] = "application/json"
        config["responseJsonSchema"] = copy.deepcopy(structured.wire_schema)
    if config:
        body["generationConfig"] = config
    if safety_settings:
        body["safetySettings"] = [copy.deepcopy(dict(s)) for s in safety_settings]
    for key, value in settings.extra.items():
        if key == "generationConfig" and isinstance(value, Mapping):
            body[key] = {**body.get(key, {}), **value}
        else:
            body[key] = copy.deepcopy(value)
    return body, structured


def build_contents(transcript: Sequence[Item], model: str) -> list[dict[str, Any]]:
    """The ``contents`` array for ``transcript``, sent to ``model``."""
    builder = _Contents()
    for item in transcript:
        if isinstance(item, UserMessage):
            if isinstance(item.content, str):
                parts = [{"text": item.content}] if item.content else []
            else:
                parts = _content_parts(item.content)
            builder.add("user", parts)
        elif isinstance(item, ToolOutput):
            builder.output(item)
        elif isinstance(item, AssistantMessage):
            builder.add("model", _model_parts(item, model, builder.with_id))
    return builder.contents


def _model_parts(
    message: AssistantMessage, model: str, with_id: dict[str, bool]
) -> list[dict[str, Any]]:
    ours = (message.provider, message.adapter) == (PROVIDER, ADAPTER)
    signed_ok = same_origin(message, PROVIDER, ADAPTER, model)
    signed = {
        s["index"]: s.get("part")
        for s in ((message.provider_data or {}).get("signed_text") or ())
        if signed_ok and isinstance(s, Mapping) and isinstance(s.get("index"), int)
    }
    parts: list[dict[str, Any]] = []
    kept = {id(p) for p in replay_parts(message, PROVIDER, ADAPTER, model)}
    for index, part in enumerate(message.parts):
        if id(part) not in kept:
            continue
        if isinstance(part, TextPart):
            original = signed.get(index)
            if isinstance(original, Mapping) and original.get("text") == part.text:
                parts.append(copy.deepcopy(dict(original)))
            elif part.text:
                parts.append({"text": part.text})
        elif isinstance(part, ToolCall):
            parts.append(_call_part(part, ours, signed_ok, with_id))
        elif isinstance(part, OpaqueItem):
            parts.append(copy.deepcopy(part.data))  # verbatim, never translated
    return parts


def _call_part(
    call: ToolCall, ours: bool, signed_ok: bool, with_id: dict[str, bool]
) -> dict[str, Any]:
    original = (call.provider_data or {}).get("part") if ours else None
    if isinstance(original, Mapping) and isinstance(original.get("functionCall"), Mapping):
        sent = original["functionCall"]
        with_id[call.call_id] = sent.get("id") == call.call_id
        if signed_ok:
            return copy.deepcopy(dict(original))  # as received, signature included
        return {"functionCall": copy.deepcopy(dict(sent))}
    with_id[call.call_id] = True
    return {"functionCall": {"id": call.call_id, "name": call.name, "args": _args(call)}}


def _output_schema(schema: Mapping[str, Any], name: str) -> StructuredOutput:
    """Check an output schema before any request and project it for Gemini."""
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
        raise SchemaError(name, problems, provider=PROVIDER)
    projected = project_schema(schema)
    if projected.reason is not None:
        _log.debug("output schema %r for Gemini: %s", name, projected.reason)
    return StructuredOutput(schema, name, False, projected.schema, projected.reason)
