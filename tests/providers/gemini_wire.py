"""Gemini's side of the wire for the adapter tests: ``GenerateContentResponse`` bodies and
``streamGenerateContent`` SSE chunks, built per scenario step and checked against the
SDK's own types (``google.genai.types``: unknown fields are refused), and the request
bodies the adapter sends checked the same way.

``Gemini`` plays the :class:`test_streamed_turns.Wire` part, so the streamed-turn
scenarios run against Gemini too.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from google.genai import types as gt

from tooldeck.model import Model
from tooldeck.providers.gemini import GeminiModel

from .fake_server import SSE, FakeProvider, Recorded, Reply
from .test_streamed_turns import Step, _pieces

MODEL = "gemini-2.5-flash"
USAGE: dict[str, Any] = {
    "promptTokenCount": 400,
    "candidatesTokenCount": 50,
    "thoughtsTokenCount": 10,
    "cachedContentTokenCount": 128,
    "totalTokenCount": 460,
}
DANGEROUS = [
    {"category": "HARM_CATEGORY_HARASSMENT", "probability": "NEGLIGIBLE"},
    {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": True},
]


def checked_response(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` after the SDK's response type accepted it (camelCase, no unknown field)."""
    gt.GenerateContentResponse.model_validate(body)
    return body


def check_request(body: Any) -> None:
    """A request body as the SDK's types define its fields (unknown fields are refused)."""
    assert isinstance(body, dict), body
    assert set(body) <= {
        "contents",
        "systemInstruction",
        "tools",
        "toolConfig",
        "generationConfig",
        "safetySettings",
        "cachedContent",
    }, sorted(body)
    for content in body["contents"]:
        gt.Content.model_validate(content)
        assert content["role"] in ("user", "model")
    if "systemInstruction" in body:
        gt.Content.model_validate(body["systemInstruction"])
    for entry in body.get("tools", ()):
        gt.Tool.model_validate(entry)
    if "toolConfig" in body:
        gt.ToolConfig.model_validate(body["toolConfig"])
    if "generationConfig" in body:
        gt.GenerationConfig.model_validate(body["generationConfig"])


def call_part(call_id: str | None, name: str, args: Any, signature: str | None = None) -> Any:
    call: dict[str, Any] = {"name": name, "args": args}
    if call_id is not None:
        call = {"id": call_id, **call}
    part: dict[str, Any] = {"functionCall": call}
    if signature is not None:
        part["thoughtSignature"] = signature
    return part


def response(
    *parts: dict[str, Any],
    finish: str | None = "STOP",
    n: int = 1,
    usage: dict[str, Any] | None = None,
    **candidate: Any,
) -> dict[str, Any]:
    cand: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish is not None:
        cand["finishReason"] = finish
    cand.update(candidate)
    return checked_response(
        {
            "candidates": [cand],
            "usageMetadata": USAGE if usage is None else usage,
            "modelVersion": MODEL,
            "responseId": f"resp_{n}",
        }
    )


def chunk(*parts: dict[str, Any], **top: Any) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    for key in ("finishReason", "safetyRatings", "finishMessage"):
        if key in top:
            candidate[key] = top.pop(key)
    body = {"candidates": [candidate], "modelVersion": MODEL, **top}
    return checked_response(body)


def sse(*chunks: dict[str, Any]) -> SSE:
    return SSE([(None, c) for c in chunks])


class Gemini:
    """The streamed-turn scenarios' wire, spoken the Gemini way."""

    name = "gemini"
    id = "gemini"
    reasons = True
    limit_field = "maxOutputTokens"  # inside generationConfig
    stream_keys: ClassVar[dict[str, Any]] = {}  # streaming is in the path, not the body
    sdk_headers = frozenset({"content-length"})

    def model(self, fake: FakeProvider) -> Model:
        return GeminiModel(MODEL, api_key="test-key", base_url=fake.url, max_retries=0)

    def _finish(self, step: Step) -> str:
        return "MAX_TOKENS" if step.cut else "SAFETY" if step.refusal else "STOP"

    def _calls(self, step: Step, n: int) -> list[dict[str, Any]]:
        parts = []
        for at, (call_id, name, args) in enumerate(step.wire_calls()):
            cut = step.cut is not None and call_id == step.cut[0]
            value = {} if cut else json.loads(args)  # Gemini sends objects, never half a one
            parts.append(call_part(call_id, name, value, f"sig{n}" if at == 0 else None))
        return parts

    def _parts(self, step: Step, n: int) -> list[dict[str, Any]]:
        parts: list[dict[str, Any]] = []
        if step.reasoning:
            parts.append({"text": step.reasoning, "thought": True})
        calls = self._calls(step, n)
        if step.text:
            text: dict[str, Any] = {"text": step.text}
            if not calls:
                text["thoughtSignature"] = f"sig{n}"
            parts.append(text)
        return parts + calls

    def _extra(self, step: Step) -> dict[str, Any]:
        return {"safetyRatings": DANGEROUS} if step.refusal else {}

    def reply(self, step: Step, n: int) -> Reply:
        return Reply(
            response(*self._parts(step, n), finish=self._finish(step), n=n, **self._extra(step))
        )

    def sse(self, step: Step, n: int) -> SSE:
        chunks = [chunk({"text": p, "thought": True}) for p in _pieces(step.reasoning)]
        chunks += [chunk({"text": p}) for p in _pieces(step.text)]
        if step.refusal:  # the safety filter stops an answer already being written
            chunks += [chunk({"text": p}) for p in _pieces(step.refusal)]
        calls = self._calls(step, n)
        if calls:
            chunks.append(chunk(*calls))
        last: list[dict[str, Any]] = []
        if step.text and not calls:
            last.append({"text": "", "thoughtSignature": f"sig{n}"})
        chunks.append(
            chunk(
                *last,
                finishReason=self._finish(step),
                usageMetadata=USAGE,
                responseId=f"resp_{n}",
                **self._extra(step),
            )
        )
        return sse(*chunks)

    def is_text(self, event: tuple[str | None, Any]) -> bool:
        parts = event[1]["candidates"][0]["content"]["parts"]
        return any(p.get("text") and not p.get("thought") for p in parts)

    def history(self, body: Any) -> list[Any]:
        check_request(body)
        return list(body["contents"])

    def users(self, *texts: str) -> list[Any]:
        return [{"role": "user", "parts": [{"text": t} for t in texts]}]

    def answered(self, body: Any) -> tuple[list[str], list[str]]:
        calls, outputs = [], []
        for content in self.history(body):
            for part in content["parts"]:
                if "functionCall" in part:
                    calls.append(part["functionCall"]["id"])
                elif "functionResponse" in part:
                    outputs.append(part["functionResponse"]["id"])
        return calls, outputs

    def check(self, recorded: Recorded) -> None:
        # the API version is the SDK's choice (v1 in recent SDKs, v1beta before)
        version, _, rest = recorded.path.removeprefix("/").partition("/")
        assert version in ("v1", "v1beta"), recorded.path
        assert rest in (
            f"models/{MODEL}:generateContent",
            f"models/{MODEL}:streamGenerateContent?alt=sse",
        ), recorded.path
        assert recorded.headers["x-goog-api-key"] == "test-key"
        check_request(recorded.body)
