"""Gemini's answers read by the adapter, as properties: any JSON body is read without an
exception and runs no call unless the answer finished with STOP; an answer streamed in
pieces is read as the same message as the answer sent whole."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as hs

from tooldeck.providers.gemini_response import StreamAssembler, parse_response
from tooldeck.transcript import StopReason, ToolCall

MODEL = "gemini-2.5-flash"

_json = hs.recursive(
    hs.one_of(hs.none(), hs.booleans(), hs.integers(), hs.text(max_size=8)),
    lambda inner: hs.one_of(
        hs.lists(inner, max_size=3), hs.dictionaries(hs.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=15,
)
_keys = hs.sampled_from(
    ["candidates", "content", "parts", "text", "functionCall", "finishReason", "args",
     "name", "id", "thought", "thoughtSignature", "usageMetadata", "promptFeedback"]
)  # fmt: skip


def _shaped() -> hs.SearchStrategy[Any]:
    """JSON that looks like a response in places: its own keys, values of any type."""
    return hs.recursive(
        hs.one_of(hs.none(), hs.booleans(), hs.integers(), hs.text(max_size=8), hs.just("STOP")),
        lambda inner: hs.one_of(
            hs.lists(inner, max_size=3), hs.dictionaries(_keys, inner, max_size=4)
        ),
        max_leaves=25,
    )


@settings(max_examples=300, deadline=None)
@given(hs.one_of(hs.dictionaries(_keys, _shaped(), max_size=4), hs.dictionaries(hs.text(), _json)))
def test_any_body_is_read_and_runs_no_call_unless_it_stopped(body: dict[str, Any]) -> None:
    message = parse_response(body, MODEL)
    streamed = StreamAssembler()
    streamed.feed(body)
    parse_response(streamed.response(), MODEL)
    candidates = body.get("candidates")
    first = candidates[0] if isinstance(candidates, list) and candidates else None
    stopped = isinstance(first, dict) and first.get("finishReason") == "STOP"
    # a call runs only from an answer that finished with STOP
    assert stopped or all(call.incomplete for call in message.tool_calls)
    if message.stop_reason is StopReason.REFUSAL:
        assert message.text == ""


_text = hs.text(hs.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=12)


@hs.composite
def _answers(draw: hs.DrawFn) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for n in range(draw(hs.integers(0, 5))):
        kind = draw(hs.sampled_from(["text", "thought", "call"]))
        signed = draw(hs.booleans())
        if kind == "call":
            part: dict[str, Any] = {
                "functionCall": {"id": f"c{n}", "name": "add", "args": {"a": n, "b": draw(_text)}}
            }
        else:
            last = parts[-1] if parts else None
            same = last is not None and ("thought" in last) == (kind == "thought")
            if same and "functionCall" not in last and "thoughtSignature" not in last:
                continue  # two pieces of one kind in a row are one part
            part = {"text": draw(_text)}
            if kind == "thought":
                part["thought"] = True
        if signed:
            part["thoughtSignature"] = f"sig-{n}"
        parts.append(part)
    return parts


def _chunks(parts: list[dict[str, Any]], cut: int) -> list[dict[str, Any]]:
    """The answer as Gemini streams it: text in pieces (a signature on the last piece),
    calls whole, the finish reason and usage in the last chunk."""
    pieces: list[dict[str, Any]] = []
    for part in parts:
        if "functionCall" in part:
            pieces.append(part)
            continue
        text = part["text"]
        bits = [text[i : i + cut] for i in range(0, len(text), cut)]
        for at, bit in enumerate(bits):
            piece = {k: v for k, v in part.items() if k != "thoughtSignature"} | {"text": bit}
            if at == len(bits) - 1 and "thoughtSignature" in part:
                piece["thoughtSignature"] = part["thoughtSignature"]
            pieces.append(piece)
    chunks = [{"candidates": [{"content": {"role": "model", "parts": [p]}}]} for p in pieces]
    chunks.append(
        {
            "candidates": [{"content": {"role": "model", "parts": []}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 7, "candidatesTokenCount": 3},
            "responseId": "r1",
        }
    )
    return chunks


@settings(max_examples=200, deadline=None)
@given(_answers(), hs.integers(1, 5))
def test_a_streamed_answer_is_the_answer_sent_whole(parts: list[dict[str, Any]], cut: int) -> None:
    whole = {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 7, "candidatesTokenCount": 3},
        "responseId": "r1",
    }
    assembler = StreamAssembler()
    deltas = [d for chunk in _chunks(parts, cut) for d in assembler.feed(chunk)]
    streamed = parse_response(assembler.response(), MODEL)
    sent = parse_response(whole, MODEL)
    assert streamed.parts == sent.parts
    assert dataclasses.replace(streamed, parts=[]) == dataclasses.replace(sent, parts=[])
    text = "".join(p["text"] for p in parts if "text" in p and not p.get("thought"))
    assert "".join(d.text for d in deltas if d.kind == "text") == text
    calls = [d for d in deltas if d.kind == "tool_call_start"]
    assert [d.call_id for d in calls] == [c.call_id for c in sent.tool_calls]
    assert all(isinstance(c, ToolCall) and not c.incomplete for c in sent.tool_calls)
