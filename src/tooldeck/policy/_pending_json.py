"""The pending-approval file as JSON (``tooldeck.pending/1``): written here, and read back
through a strict typed model, since anyone who can write to its folder can write one.

:func:`encode_item` / :func:`encode_pending` turn the transcript and the waiting step
into JSON data. Reading is the other way round, and checked: the file is read as every
file tooldeck is given is read (:mod:`tooldeck._config_files`: size, encoding, nesting),
then :func:`decode_pending` validates it against the models below (every field of the
right type, counts and positions in range, a session id that can name a file, a known
tier and stop reason, no unknown field) before anything is built from it. A file that
fails is a :class:`~tooldeck._config_files.ConfigFileError` (a ``ValueError``) naming
the file and the place in it (``step.calls[0].call_id: input should be a valid string``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    RootModel,
    model_validator,
)

from .._config_files import ConfigFileError, check_model
from ..approvals import PendingCall, PendingStep
from ..result import ContentPart, ImagePart, JsonPart, TextPart, ToolResult
from ..transcript import (
    AssistantMessage,
    AssistantPart,
    Item,
    OpaqueItem,
    StopReason,
    ToolCall,
    ToolOutput,
    Usage,
    UserMessage,
)
from ._files import safe_id

__all__ = [
    "MAX_DEPTH",
    "PendingDocument",
    "decode_item",
    "decode_pending",
    "encode_item",
    "encode_pending",
    "plain",
]

FORMAT = "tooldeck.pending/1"
# A pending file holds the session's transcript, whose values (a tool's details, a call's
# arguments, what the human is shown) nest as deep as their tools and model made them:
# read with more room than a config file's 100 levels, up to what the typed model below
# can check (pydantic checks a JSON value to 255 levels). Deeper is refused, one line.
MAX_DEPTH = 250


# -- writing ------------------------------------------------------------------------------------
def plain(value: Any) -> Any:
    """JSON data for ``value`` (Pydantic models dumped, anything else as text)."""
    return json.loads(json.dumps(value, default=_fallback))


def _fallback(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return str(value)


def _part(part: ContentPart) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, ImagePart):
        return {"type": "image", "data": part.data, "mime_type": part.mime_type, "url": part.url}
    return {"type": "json", "text": part.text}  # the frozen text, exactly as the model got it


def _content(content: str | Sequence[ContentPart]) -> Any:
    return content if isinstance(content, str) else [_part(p) for p in content]


def encode_item(item: Item) -> dict[str, Any]:
    """One transcript item as JSON data."""
    if isinstance(item, UserMessage):
        return {"type": "user", "content": _content(item.content)}
    if isinstance(item, ToolOutput):
        result = item.result
        return {
            "type": "tool_output",
            "call_id": item.call_id,
            "name": item.name,
            "repairs": list(item.repairs),
            "result": {
                "content": _content(result.content),
                "details": plain(result.details),
                "events": plain(result.events),
                "is_error": result.is_error,
                "terminate": result.terminate,
                "complete_actor_event": result.complete_actor_event,
            },
        }
    parts: list[dict[str, Any]] = []
    for part in item.parts:
        if isinstance(part, TextPart):
            parts.append({"type": "text", "text": part.text})
        elif isinstance(part, ToolCall):
            parts.append(
                {
                    "type": "tool_call",
                    "call_id": part.call_id,
                    "name": part.name,
                    "arguments": part.arguments
                    if isinstance(part.arguments, str)
                    else plain(part.arguments),
                    "item_id": part.item_id,
                    "namespace": part.namespace,
                    "incomplete": part.incomplete,
                    "provider_data": plain(part.provider_data),
                }
            )
        else:
            parts.append(
                {
                    "type": "opaque",
                    "provider": part.provider,
                    "adapter": part.adapter,
                    "model": part.model,
                    "kind": part.kind,
                    "data": plain(part.data),
                    "model_bound": part.model_bound,
                }
            )
    return {
        "type": "assistant",
        "parts": parts,
        "stop_reason": item.stop_reason.value,
        "refusal": item.refusal,
        "usage": asdict(item.usage),
        "provider": item.provider,
        "adapter": item.adapter,
        "model": item.model,
        "response_id": item.response_id,
        "provider_data": plain(item.provider_data),
        "structured": plain(item.structured),
    }


def _encode_step(step: PendingStep) -> dict[str, Any]:
    return {
        "message": encode_item(step.message),
        "outputs": [encode_item(o) for o in step.outputs],
        "calls": [
            {
                "call_id": c.call_id,
                "name": c.name,
                "tier": c.tier,
                "reason": c.reason,
                "display": plain(c.display),
            }
            for c in step.calls
        ],
        "start": step.start,
        "steps": step.steps,
        "usage": asdict(step.usage),
    }


def encode_pending(
    session_id: str,
    transcript: Sequence[Item],
    step: PendingStep,
    waiter: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The whole pending file's JSON data."""
    document: dict[str, Any] = {
        "format": FORMAT,
        "session_id": session_id,
        "transcript": [encode_item(i) for i in transcript],
        "step": _encode_step(step),
    }
    if waiter is not None:
        document["waiter"] = plain(waiter)
    return document


# -- reading: the format, typed ------------------------------------------------------------------
class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class _Text(_Strict):
    type: Literal["text"]
    text: str

    def build(self) -> TextPart:
        return TextPart(self.text)


class _Image(_Strict):
    type: Literal["image"]
    data: str | None = None
    mime_type: str = "image/png"
    url: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> _Image:
        if (self.data is None) == (self.url is None):
            raise ValueError("an image part needs exactly one of data (base64) or url")
        return self

    def build(self) -> ImagePart:
        return ImagePart(self.data, self.mime_type, self.url)


class _Json(_Strict):
    type: Literal["json"]
    text: str | None = None  # the frozen text, exactly as the model got it
    value: JsonValue = None  # written before JSON parts kept their text

    @model_validator(mode="after")
    def _is_json(self) -> _Json:
        if self.text is not None:
            try:
                json.loads(self.text)
            except (ValueError, RecursionError):
                raise ValueError("a JSON part's text is not JSON") from None
        return self

    def build(self) -> JsonPart:
        return JsonPart(self.value) if self.text is None else JsonPart.from_text(self.text)


_Part = Annotated[_Text | _Image | _Json, Field(discriminator="type")]
_Content = str | list[_Part]


def _content_of(content: _Content) -> str | list[ContentPart]:
    return content if isinstance(content, str) else [p.build() for p in content]


def _known_stop(value: str) -> str:
    if value not in StopReason.__members__.values():
        known = ", ".join(r.value for r in StopReason)
        raise ValueError(f"{value[:40]!r} is not a stop reason ({known})")
    return value


_Count = Annotated[int, Field(ge=0)]


class _Usage(_Strict):
    input_tokens: _Count = 0
    output_tokens: _Count = 0
    reasoning_tokens: _Count = 0
    cache_read_tokens: _Count = 0
    cache_write_tokens: _Count = 0
    requests: _Count = 0

    def build(self) -> Usage:
        return Usage(**self.model_dump())


class _User(_Strict):
    type: Literal["user"]
    content: _Content

    def build(self) -> UserMessage:
        return UserMessage(_content_of(self.content))


class _Result(_Strict):
    content: _Content
    details: JsonValue = None
    events: list[JsonValue] | None = None
    is_error: bool = False
    terminate: bool = False
    complete_actor_event: bool = False


class _Output(_Strict):
    type: Literal["tool_output"]
    call_id: str
    name: str
    repairs: list[str] = []
    result: _Result

    def build(self) -> ToolOutput:
        r = self.result
        return ToolOutput(
            self.call_id,
            self.name,
            ToolResult(
                _content_of(r.content),
                r.details,
                list(r.events or ()),
                r.is_error,
                r.terminate,
                r.complete_actor_event,
            ),
            tuple(self.repairs),
        )


class _Call(_Strict):
    type: Literal["tool_call"]
    call_id: str
    name: str
    arguments: str | dict[str, JsonValue]
    item_id: str | None = None
    namespace: str | None = None
    incomplete: bool = False
    provider_data: dict[str, JsonValue] | None = None

    def build(self) -> ToolCall:
        return ToolCall(
            self.call_id,
            self.name,
            self.arguments,
            self.item_id,
            self.namespace,
            self.incomplete,
            self.provider_data,
        )


class _Opaque(_Strict):
    type: Literal["opaque"]
    provider: str
    adapter: str
    model: str
    kind: str
    data: JsonValue = None
    model_bound: bool = True

    def build(self) -> OpaqueItem:
        return OpaqueItem(
            self.provider, self.adapter, self.model, self.kind, self.data, self.model_bound
        )


class _Assistant(_Strict):
    type: Literal["assistant"]
    parts: list[Annotated[_Text | _Call | _Opaque, Field(discriminator="type")]]
    stop_reason: Annotated[str, AfterValidator(_known_stop)]
    refusal: str | None = None
    usage: _Usage = _Usage()
    provider: str = ""
    adapter: str = ""
    model: str = ""
    response_id: str | None = None
    provider_data: dict[str, JsonValue] | None = None
    structured: JsonValue = None

    def build(self) -> AssistantMessage:
        parts: list[AssistantPart] = [p.build() for p in self.parts]
        return AssistantMessage(
            parts,
            StopReason(self.stop_reason),
            self.refusal,
            self.usage.build(),
            self.provider,
            self.adapter,
            self.model,
            self.response_id,
            self.provider_data,
            self.structured,
        )


class _Item(RootModel[Annotated[_User | _Output | _Assistant, Field(discriminator="type")]]):
    model_config = ConfigDict(strict=True, frozen=True)


class _Waiting(_Strict):
    call_id: str
    name: str
    tier: Literal["STANDARD", "WRITE", "DANGEROUS"]
    reason: str
    display: JsonValue = None


class _Step(_Strict):
    message: _Assistant
    outputs: list[_Output]
    calls: list[_Waiting] = Field(min_length=1)
    start: _Count
    steps: _Count
    usage: _Usage = _Usage()

    @model_validator(mode="after")
    def _one_call_per_id(self) -> _Step:
        waiting = [c.call_id for c in self.calls]
        stored = [p.call_id for p in self.message.parts if isinstance(p, _Call)]
        if len(set(waiting)) != len(waiting) or len(set(stored)) != len(stored):
            # two calls of the step share an id: an answer could not be matched to
            # exactly one call, so none is taken
            raise ValueError(
                "the waiting step's calls do not each have their own id, so its answers "
                "could not be matched to exactly one call; it cannot be resumed"
            )
        if not set(waiting) <= set(stored):
            raise ValueError(
                "the waiting step names calls its message does not have; it cannot be resumed"
            )
        return self


class _Waiter(_Strict):
    by: str = "a process"
    gateway_session: str | None = None
    until: str | None = None


class _Pending(_Strict):
    format: Literal["tooldeck.pending/1"]
    session_id: Annotated[str, AfterValidator(safe_id)]
    transcript: list[_Item]
    step: _Step
    waiter: _Waiter | None = None

    @model_validator(mode="after")
    def _start_in_transcript(self) -> _Pending:
        if self.step.start > len(self.transcript):
            raise ValueError(
                f"the turn starts at item {self.step.start} of a transcript of "
                f"{len(self.transcript)} items"
            )
        return self


# -- reading ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PendingDocument:
    """A pending file, read and checked: whose step it is, the transcript before it, the
    step, and who waits for its answers (``None``: a run to resume later)."""

    session_id: str
    transcript: list[Item]
    step: PendingStep
    waiter: dict[str, Any] | None


def decode_item(data: Any) -> Item:
    """The transcript item :func:`encode_item` wrote (checked: a ``ConfigFileError``
    says what is wrong with anything else)."""
    return check_model(_Item, data).root.build()


def decode_pending(data: Any, path: str | Path) -> PendingDocument:
    """A pending file's parsed JSON, checked against the format; ``path`` names the file
    in the :class:`ConfigFileError` (a ``ValueError``) for a file that is not one."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ConfigFileError(f"not a pending-approval file ({FORMAT})", path=str(path))
    try:
        document = check_model(_Pending, data)
    except ConfigFileError as exc:
        raise ConfigFileError(exc.problem, path=str(path)) from None
    step = document.step
    message = step.message.build()
    if [c.call_id for c in message.tool_calls] != [
        p.call_id for p in step.message.parts if isinstance(p, _Call)
    ]:  # the message gave some of them other ids (an empty one, say)
        raise ConfigFileError(
            "step.message: its calls' ids are not each their own; it cannot be resumed",
            path=str(path),
        )
    return PendingDocument(
        document.session_id,
        [i.root.build() for i in document.transcript],
        PendingStep(
            message,
            tuple(o.build() for o in step.outputs),
            tuple(PendingCall(c.call_id, c.name, c.tier, c.reason, c.display) for c in step.calls),
            step.start,
            step.steps,
            step.usage.build(),
        ),
        document.waiter.model_dump() if document.waiter is not None else None,
    )
