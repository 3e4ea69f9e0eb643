"""Stateful Responses: how much of a transcript the server already holds.

In stateful mode (``OpenAIResponsesModel(stateful=True)``) a request names the previous
response (``previous_response_id``) and sends only the items that came after it, instead
of replaying the whole history. Whether that is safe is decided from the transcript
alone, on every request, so the adapter keeps no state that could drift from it: one
adapter can serve many sessions at once, and a transcript loaded from disk (a resumed
session) chains exactly like one kept in memory.

The proof is a digest. A response made with ``store: true`` records, in
``provider_data["stored_context"]``, a SHA-256 of the whole context it answered plus its
own output, as replayed to its model. A later request chains on the last response of
this provider and adapter only when:

- it was stored and finished (``completed`` or ``incomplete``; never ``failed``),
- it came from the same model (reasoning is model-bound, and so is the server's chain),
- everything after it is new input (tool outputs for its own calls, user messages), and
  there is some; and none of its calls had to be given a new id (a provider's shared or
  empty id: the server knows the call by the old one, the transcript by the new one),
- the transcript up to and including it still has that digest: nothing before it was
  edited, dropped or re-ordered since, so the server's context is the transcript's.

Otherwise the whole transcript is replayed and the reason is logged. A server that no
longer has the response (expired, deleted, another project's key) says so with
``previous_response_not_found``; the adapter then replays once in full
(:func:`rejected_previous`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..transcript import AssistantMessage, Item, ToolOutput, UserMessage

__all__ = ["STORED_CONTEXT", "Chain", "Context", "find_chain", "rejected_previous"]

STORED_CONTEXT = "stored_context"  # the provider_data key of a stored response's digest

_FINISHED = (None, "incomplete")  # provider_data["status"]: absent means completed


def _canonical(item: Mapping[str, Any]) -> bytes:
    text = json.dumps(item, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=repr)
    return text.encode("ascii") + b"\n"


class Context:
    """A transcript as replay items, entry by entry, with a running digest."""

    def __init__(self, entries: Sequence[list[dict[str, Any]]]) -> None:
        self.entries = list(entries)
        self.items = [item for entry in self.entries for item in entry]
        self._through: list[str] = []
        self._digest: hashlib._Hash | None = None  # on first use: stateless requests need none

    def _hash(self) -> hashlib._Hash:
        if self._digest is None:
            digest = hashlib.sha256()
            for entry in self.entries:
                for item in entry:
                    digest.update(_canonical(item))
                self._through.append("sha256:" + digest.hexdigest())
            self._digest = digest
        return self._digest

    def digest_through(self, index: int) -> str:
        """The digest of entries ``0..index`` (inclusive)."""
        self._hash()
        return self._through[index]

    def digest_with(self, items: Sequence[Mapping[str, Any]]) -> str:
        """The digest of the whole context followed by ``items`` (a response's output)."""
        digest = self._hash().copy()
        for item in items:
            digest.update(_canonical(item))
        return "sha256:" + digest.hexdigest()


@dataclass(frozen=True, slots=True)
class Chain:
    """Send ``items`` after ``previous_response_id`` instead of the whole transcript."""

    previous_response_id: str
    items: list[dict[str, Any]]


def find_chain(
    transcript: Sequence[Item], context: Context, provider: str, adapter: str, model: str
) -> tuple[Chain | None, str | None]:
    """The chain to use, or ``(None, why)``; ``why`` is ``None`` when nothing came before.

    ``context`` holds ``transcript``'s replay items for ``model``, entry by entry.
    """
    index, last = -1, None
    for i in range(len(transcript) - 1, -1, -1):
        entry = transcript[i]
        if isinstance(entry, AssistantMessage) and (entry.provider, entry.adapter) == (
            provider,
            adapter,
        ):
            index, last = i, entry
            break
    if last is None:
        if any(isinstance(e, AssistantMessage) for e in transcript):
            return None, f"no earlier response from {adapter} to chain on"
        return None, None
    rid = last.response_id or "(no id)"
    data = last.provider_data or {}
    tail = transcript[index + 1 :]
    foreign = next((e for e in tail if not isinstance(e, (ToolOutput, UserMessage))), None)
    if isinstance(foreign, AssistantMessage):
        return None, (
            f"a response from {foreign.provider or '?'}/{foreign.adapter or '?'} "
            f"came after response {rid}"
        )
    if foreign is not None:
        return None, f"a {type(foreign).__name__} came after response {rid}"
    if last.model != model:
        return None, f"the model changed from {last.model} to {model} since response {rid}"
    if not last.response_id:
        return None, "the last response has no id"
    recorded = data.get(STORED_CONTEXT)
    if not isinstance(recorded, str):
        return None, f"response {rid} was not stored (it was made with store=False)"
    if data.get("status") not in _FINISHED:
        return None, f"response {rid} is {data.get('status')}, not completed"
    if not tail:
        return None, f"nothing new came after response {rid}"
    renamed = [
        c for c in last.tool_calls if c.provider_data and "provider_call_id" in c.provider_data
    ]
    if renamed:  # the server knows them by the ids it sent, which name two calls (or none)
        return None, (
            f"response {rid} gave calls shared or empty ids, renamed here "
            f"({', '.join(c.call_id for c in renamed)})"
        )
    calls = {call.call_id for call in last.tool_calls}
    stray = next((e for e in tail if isinstance(e, ToolOutput) and e.call_id not in calls), None)
    if stray is not None:
        return None, f"the output for {stray.call_id} answers no call of response {rid}"
    if context.digest_through(index) != recorded:
        return None, f"the transcript up to response {rid} changed after it was answered"
    items = [item for entry in context.entries[index + 1 :] for item in entry]
    return Chain(last.response_id, items), None


def rejected_previous(status: int, body: object) -> str | None:
    """Why the server refused the request's ``previous_response_id``, or ``None``.

    OpenAI answers an unknown or expired previous response with 404 (or 400) and
    ``code: previous_response_not_found``, ``param: previous_response_id``. Any 400/404
    that names that code or that parameter means the chain cannot be used, and a full
    replay (without ``previous_response_id``) is the remedy; any other error is not.
    ``body`` is the error object (the SDK's ``APIStatusError.body``) or the whole reply.
    """
    if status not in (400, 404) or not isinstance(body, Mapping):
        return None
    error = body.get("error", body)
    if not isinstance(error, Mapping):
        return None
    code, param = error.get("code"), error.get("param")
    if code != "previous_response_not_found" and param != "previous_response_id":
        return None
    message = str(error.get("message") or "").strip()
    label = str(code or f"HTTP {status}")
    return f"{label}: {message}" if message else label
