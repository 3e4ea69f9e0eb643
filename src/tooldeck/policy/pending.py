"""Runs waiting for approval, on disk: :class:`PendingFiles` and answer files.

``Session(..., pending_store=PendingFiles(directory))`` writes a step that waits for
approval to ``<directory>/<session_id>.pending.json``: the transcript up to and
including the step's assistant message, the outputs the step already has, and the
calls waiting for an answer (name, tier, reason, what the human is shown). Writes are
atomic (a temporary file, then a rename).

``Session.resume(answers)`` (in the same process, or a fresh one with the same
``pending_store``) *claims* the file by renaming it to ``<session_id>.resumed.json``
before anything runs. A rename succeeds once, so a step is finished at most once: two
processes resuming the same step cannot both run its tools.

Answers can be given on the command line (``tooldeck approve FILE``) and saved to a
JSON file that :func:`load_answers` reads back for ``resume``.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from .._atomic_json import write_json_atomic
from ..approvals import PendingCall, PendingStep, not_answered
from ..dispatch import ApprovalAnswer
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
from ._files import locked, session_file
from .session import ApproveAlways

__all__ = [
    "FORMAT",
    "PendingFiles",
    "answer_from_dict",
    "answer_to_dict",
    "decode_item",
    "decode_pending",
    "encode_item",
    "load_answers",
    "pending_waiter",
    "read_pending",
    "save_answers",
]

FORMAT = "tooldeck.pending/1"
ANSWERS_FORMAT = "tooldeck.answers/1"


# -- the transcript as JSON ---------------------------------------------------------------------
def _plain(value: Any) -> Any:
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


def _unpart(data: Mapping[str, Any]) -> ContentPart:
    kind = data["type"]
    if kind == "text":
        return TextPart(data["text"])
    if kind == "image":
        return ImagePart(data.get("data"), data.get("mime_type", "image/png"), data.get("url"))
    if kind == "json":
        if "text" in data:
            return JsonPart.from_text(data["text"])
        return JsonPart(data.get("value"))  # written before JSON parts kept their text
    raise ValueError(f"unknown content part {kind!r}")


def _content(content: str | Sequence[ContentPart]) -> Any:
    return content if isinstance(content, str) else [_part(p) for p in content]


def _uncontent(data: Any) -> Any:
    return data if isinstance(data, str) else [_unpart(p) for p in data]


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
                "details": _plain(result.details),
                "events": _plain(result.events),
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
                    else _plain(part.arguments),
                    "item_id": part.item_id,
                    "namespace": part.namespace,
                    "incomplete": part.incomplete,
                    "provider_data": _plain(part.provider_data),
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
                    "data": _plain(part.data),
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
        "provider_data": _plain(item.provider_data),
        "structured": _plain(item.structured),
    }


def decode_item(data: Mapping[str, Any]) -> Item:
    """The transcript item :func:`encode_item` wrote."""
    kind = data["type"]
    if kind == "user":
        return UserMessage(_uncontent(data["content"]))
    if kind == "tool_output":
        r = data["result"]
        return ToolOutput(
            data["call_id"],
            data["name"],
            ToolResult(
                _uncontent(r["content"]),
                r.get("details"),
                list(r.get("events") or []),
                bool(r.get("is_error")),
                bool(r.get("terminate")),
                bool(r.get("complete_actor_event")),
            ),
            tuple(data.get("repairs", ())),
        )
    if kind != "assistant":
        raise ValueError(f"unknown transcript item {kind!r}")
    parts: list[AssistantPart] = []
    for p in data["parts"]:
        if p["type"] == "text":
            parts.append(TextPart(p["text"]))
        elif p["type"] == "tool_call":
            parts.append(
                ToolCall(
                    p["call_id"],
                    p["name"],
                    p["arguments"],
                    p.get("item_id"),
                    p.get("namespace"),
                    bool(p.get("incomplete")),
                    p.get("provider_data"),
                )
            )
        else:
            parts.append(
                OpaqueItem(
                    p["provider"],
                    p["adapter"],
                    p["model"],
                    p["kind"],
                    p.get("data"),
                    bool(p.get("model_bound", True)),
                )
            )
    return AssistantMessage(
        parts,
        StopReason(data["stop_reason"]),
        data.get("refusal"),
        Usage(**data.get("usage", {})),
        data.get("provider", ""),
        data.get("adapter", ""),
        data.get("model", ""),
        data.get("response_id"),
        data.get("provider_data"),
        data.get("structured"),
    )


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
                "display": _plain(c.display),
            }
            for c in step.calls
        ],
        "start": step.start,
        "steps": step.steps,
        "usage": asdict(step.usage),
    }


def _decode_step(data: Mapping[str, Any]) -> PendingStep:
    message = decode_item(data["message"])
    outputs = [decode_item(o) for o in data["outputs"]]
    if not isinstance(message, AssistantMessage) or not all(
        isinstance(o, ToolOutput) for o in outputs
    ):
        raise ValueError("a pending step holds an assistant message and tool outputs")
    waiting = [str(c["call_id"]) for c in data["calls"]]
    stored = [str(p["call_id"]) for p in data["message"]["parts"] if p["type"] == "tool_call"]
    ids = [c.call_id for c in message.tool_calls]
    if len(set(waiting)) != len(waiting) or stored != ids or not set(waiting) <= set(ids):
        # two calls of the step share an id (or the file names calls the step does not
        # have): an answer could not be matched to exactly one call, so none is taken
        raise ValueError(
            "the waiting step's calls do not each have their own id, so its answers "
            "could not be matched to exactly one call; it cannot be resumed"
        )
    return PendingStep(
        message,
        tuple(o for o in outputs if isinstance(o, ToolOutput)),
        tuple(
            PendingCall(c["call_id"], c["name"], c["tier"], c["reason"], c.get("display"))
            for c in data["calls"]
        ),
        int(data["start"]),
        int(data["steps"]),
        Usage(**data.get("usage", {})),
    )


def read_pending(path: str | Path) -> tuple[str, list[Item], PendingStep]:
    """``(session_id, transcript, step)`` from a pending file."""
    return decode_pending(json.loads(Path(path).read_text(encoding="utf-8")), path)


def decode_pending(data: Any, path: str | Path) -> tuple[str, list[Item], PendingStep]:
    """:func:`read_pending` of a pending file's parsed JSON (``path`` names it in errors)."""
    if not isinstance(data, Mapping) or data.get("format") != FORMAT:
        raise ValueError(f"{path}: not a pending-approval file ({FORMAT})")
    transcript = [decode_item(i) for i in data["transcript"]]
    return str(data["session_id"]), transcript, _decode_step(data["step"])


def pending_waiter(data: Any) -> dict[str, Any] | None:
    """Who waits for the answers of a pending file's parsed JSON (``None``: a run to
    resume later)."""
    waiter = data.get("waiter") if isinstance(data, Mapping) else None
    return dict(waiter) if isinstance(waiter, Mapping) else None


class PendingFiles:
    """A :class:`~tooldeck.loop.PendingStore` keeping one JSON file per waiting session.

    Loading then claiming is a read-modify-write: under the file's inter-process lock,
    :meth:`claim` renames the file only if it is still the one this object loaded or
    saved, so a step another process resumed (and maybe replaced with a new waiting
    step) is never finished twice.
    """

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self._seen: dict[str, tuple[int, int, str]] = {}  # session -> (inode, size, sha256)

    def path(self, session_id: str) -> Path:
        return session_file(self.directory, session_id, ".pending.json")

    def _identity(self, path: Path) -> tuple[int, int, str]:
        with path.open("rb") as f:
            st = os.fstat(f.fileno())
            return (st.st_ino, st.st_size, hashlib.sha256(f.read()).hexdigest())

    def save(
        self,
        session_id: str,
        transcript: Sequence[Item],
        step: PendingStep,
        *,
        waiter: Mapping[str, Any] | None = None,
    ) -> None:
        """Write the waiting step. ``waiter`` says who waits for the answers, if a
        process does (``tooldeck serve``: :func:`pending_waiter` reads it back)."""
        path = self.path(session_id)
        document: dict[str, Any] = {
            "format": FORMAT,
            "session_id": session_id,
            "transcript": [encode_item(i) for i in transcript],
            "step": _encode_step(step),
        }
        if waiter is not None:
            document["waiter"] = _plain(dict(waiter))
        with locked(path):
            write_json_atomic(path, document)
            self._seen[session_id] = self._identity(path)

    def load(self, session_id: str) -> tuple[list[Item], PendingStep] | None:
        path = self.path(session_id)
        if not path.exists():
            return None
        with locked(path):
            try:
                seen = self._identity(path)
            except FileNotFoundError:
                return None
            found, transcript, step = read_pending(path)
        if found != session_id:
            raise ValueError(f"{path} belongs to session {found!r}, not {session_id!r}")
        self._seen[session_id] = seen
        return transcript, step

    def forget(self, session_id: str) -> None:
        """Drop what this object remembers of ``session_id``'s file (its owner removed it
        without :meth:`claim`), so a long-lived owner keeps nothing per finished ask."""
        self._seen.pop(session_id, None)

    def claim(self, session_id: str) -> bool:
        path = self.path(session_id)
        with locked(path):
            seen = self._seen.pop(session_id, None)
            try:
                if seen is not None and self._identity(path) != seen:
                    return False  # resumed elsewhere since; the file holds another step
                os.replace(path, session_file(self.directory, session_id, ".resumed.json"))
            except FileNotFoundError:
                return False
        return True


# -- answers on disk -----------------------------------------------------------------------------
def answer_to_dict(answer: ApprovalAnswer) -> dict[str, Any]:
    out: dict[str, Any] = {"approved": answer.approved}
    if answer.message:
        out["message"] = answer.message
    if answer.arguments is not None:
        out["arguments"] = _plain(dict(answer.arguments))
    if isinstance(answer, ApproveAlways):
        out["always"] = True
        if answer.pattern is not None:
            out["pattern"] = _plain(dict(answer.pattern))
    return out


def answer_from_dict(data: Any) -> ApprovalAnswer:
    """An answer from JSON; anything but an explicit ``"approved": true`` is a deny."""
    if not isinstance(data, Mapping):
        return not_answered("no answer was given")
    approved = data.get("approved") is True
    message = data["message"] if isinstance(data.get("message"), str) else ""
    arguments = data.get("arguments") if isinstance(data.get("arguments"), Mapping) else None
    if approved and data.get("always") is True:
        pattern = data.get("pattern") if isinstance(data.get("pattern"), Mapping) else None
        return ApproveAlways(True, message, arguments, pattern)
    return ApprovalAnswer(approved, message, arguments if approved else None)


def save_answers(path: str | Path, session_id: str, answers: Mapping[str, ApprovalAnswer]) -> None:
    write_json_atomic(
        Path(path),
        {
            "format": ANSWERS_FORMAT,
            "session_id": session_id,
            "answers": {cid: answer_to_dict(a) for cid, a in answers.items()},
        },
    )


def load_answers(path: str | Path, *, session_id: str | None = None) -> dict[str, ApprovalAnswer]:
    """Answers saved by ``tooldeck approve`` (or :func:`save_answers`), by call id.

    :class:`ValueError` for a file that is not one, has no answers, or (with
    ``session_id``) answers another session's step."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, Mapping) or data.get("format") != ANSWERS_FORMAT:
        raise ValueError(f"{path}: not an answers file ({ANSWERS_FORMAT})")
    if session_id is not None and data.get("session_id") != session_id:
        raise ValueError(
            f"{path}: the answers are for {data.get('session_id')!r}, not {session_id!r}"
        )
    given = data.get("answers")
    if not isinstance(given, Mapping):
        raise ValueError(f"{path}: the file has no answers")
    return {str(cid): answer_from_dict(a) for cid, a in given.items()}
