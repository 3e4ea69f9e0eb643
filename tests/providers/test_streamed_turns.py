"""Streamed turns over real HTTP and SSE, per provider, with the official SDK clients.

``Session.stream`` against the local fake provider: the events in order and their content
(text, reasoning, parallel calls), a refusal mid-stream, a response cut off inside a call's
arguments, server-side tool use; the streamed turn against the same turn run with
``run()`` (the same request bodies apart from the streaming flag, the same transcript);
cancelling the consumer (after the first text delta: the SDK stream is closed; during a
tool call: one output per call, a valid next request); and continuing after a cut-off
with a larger output limit. The wire builders come from the adapters' own test modules,
so the replies are validated the same way (OpenAPI, the SDKs' stream event types).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import pytest

from tooldeck import (
    AssistantMessage,
    ContinuePolicy,
    ModelSettings,
    OpaqueItem,
    Session,
    StopReason,
    ToolOutput,
    UserMessage,
    tool,
)
from tooldeck.errors import ProviderUnavailable
from tooldeck.events import (
    CallStarted,
    Event,
    ModelStepFinished,
    OutputRecorded,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    ToolCallDone,
    ToolCallStarted,
    TurnContinued,
    TurnFinished,
)
from tooldeck.model import Model
from tooldeck.providers.anthropic import AnthropicModel
from tooldeck.providers.chat_completions import ChatCompletionsModel
from tooldeck.providers.openai_responses import OpenAIResponsesModel

from . import test_anthropic as an
from . import test_chat_completions as cc
from . import test_openai_responses as oa
from .fake_server import SSE, FakeProvider, Reply

RAN: list[str] = []


@pytest.fixture(autouse=True)
def _clear() -> Iterator[None]:
    RAN.clear()
    yield
    RAN.clear()


@tool(read_only=True)
def get_weather(city: str) -> dict[str, Any]:
    """Get the current weather for a city."""
    RAN.append(f"get_weather:{city}")
    return {"city": city, "temp_c": 18}


@tool(read_only=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    RAN.append(f"add:{a}+{b}")
    return a + b


TOOLS = [get_weather, add]


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _pieces(text: str, size: int = 5) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


@dataclass(frozen=True)
class Step:
    """One model response, said once and built for each provider (streamed and not)."""

    text: str = ""
    calls: tuple[tuple[str, str, dict[str, Any]], ...] = ()
    reasoning: str = ""
    cut: tuple[str, str, str] | None = None  # a last call cut off inside its arguments
    refusal: str = ""  # a refusal (Anthropic streams it as text before it stops)

    def wire_calls(self) -> list[tuple[str, str, str]]:
        made = [(cid, name, _dumps(args)) for cid, name, args in self.calls]
        return made + ([self.cut] if self.cut else [])


class Wire(Protocol):
    name: str
    reasons: bool  # streams reasoning
    limit_field: str  # where max_output_tokens goes
    stream_keys: dict[str, Any]  # what only the streamed request body has
    sdk_headers: frozenset[str]  # headers the SDK sets differently when it streams

    def model(self, fake: FakeProvider) -> Model: ...
    def sse(self, step: Step, n: int) -> SSE: ...
    def reply(self, step: Step, n: int) -> Reply: ...
    def is_text(self, event: tuple[str | None, Any]) -> bool: ...
    def history(self, body: Any) -> list[Any]: ...
    def users(self, *texts: str) -> list[Any]: ...
    def answered(self, body: Any) -> tuple[list[str], list[str]]: ...


class Responses:
    name = "openai-responses"
    reasons = True
    limit_field = "max_output_tokens"
    sdk_headers = frozenset({"content-length"})

    def __init__(self) -> None:
        self.stream_keys: dict[str, Any] = {"stream": True}

    def model(self, fake: FakeProvider) -> Model:
        return OpenAIResponsesModel(
            oa.MODEL, api_key="test", base_url=fake.url + "/v1", max_retries=0
        )

    def _final(self, step: Step, n: int) -> dict[str, Any]:
        items: list[dict[str, Any]] = []
        if step.reasoning:
            items.append(
                {
                    "type": "reasoning",
                    "id": f"rs_{n}",
                    "summary": [{"type": "summary_text", "text": step.reasoning}],
                    "encrypted_content": f"gAAAA-{n}",
                }
            )
        if step.refusal:
            items.append(
                {
                    "type": "message",
                    "id": f"msg_{n}",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "refusal", "refusal": step.refusal}],
                }
            )
        elif step.text:
            items.append(oa.msg(step.text, mid=f"msg_{n}"))
        for call_id, name, args in step.wire_calls():
            status = "incomplete" if step.cut and call_id == step.cut[0] else "completed"
            items.append(oa.fc(call_id, name, args, status=status))
        if step.cut:
            return oa.response(
                *items, rid=f"resp_{n}", status="incomplete", reason="max_output_tokens"
            )
        return oa.response(*items, rid=f"resp_{n}")

    def reply(self, step: Step, n: int) -> Reply:
        return Reply(self._final(step, n))

    def sse(self, step: Step, n: int) -> SSE:
        final = self._final(step, n)
        terminal = "response.incomplete" if step.cut else "response.completed"
        made = oa.sse_for(final, terminal=terminal, chunk=5)
        if not step.refusal:
            return made
        events = [e for _, e in made.events]
        at = next(i for i, e in enumerate(events) if e["type"] == "response.output_item.added")
        deltas = [
            {
                "type": "response.refusal.delta",
                "item_id": f"msg_{n}",
                "output_index": events[at]["output_index"],
                "content_index": 0,
                "delta": piece,
            }
            for piece in _pieces(step.refusal)
        ]
        events[at + 1 : at + 1] = deltas
        for number, event in enumerate(events):
            event["sequence_number"] = number
            oa.check_spec("ResponseStreamEvent", event)
        return SSE([(e["type"], e) for e in events])

    def is_text(self, event: tuple[str | None, Any]) -> bool:
        return event[0] == "response.output_text.delta"

    def history(self, body: Any) -> list[Any]:
        oa.check_spec("CreateResponse", body)
        return list(body["input"])

    def users(self, *texts: str) -> list[Any]:
        return [{"role": "user", "content": t} for t in texts]

    def answered(self, body: Any) -> tuple[list[str], list[str]]:
        items = self.history(body)
        calls = [i["call_id"] for i in items if i.get("type") == "function_call"]
        outputs = [i["call_id"] for i in items if i.get("type") == "function_call_output"]
        return calls, outputs


class Chat:
    reasons = False
    sdk_headers = frozenset({"content-length"})

    def __init__(self, flavour: cc.Flavour) -> None:
        self.flavour = flavour
        self.name = f"chat-{flavour}"
        self.reasons = flavour == "glm"  # reasoning_content deltas
        self.limit_field = "max_completion_tokens" if flavour == "openai" else "max_tokens"
        glm = flavour == "glm"
        self.stream_keys = (
            {"stream": True} if glm else {"stream": True, "stream_options": {"include_usage": True}}
        )

    def model(self, fake: FakeProvider) -> Model:
        return ChatCompletionsModel(
            cc.MODELS[self.flavour],
            self.flavour,
            api_key="test",
            base_url=fake.url + cc.PATHS[self.flavour],
            max_retries=0,
        )

    def _finish(self, step: Step) -> str:
        return "length" if step.cut else "tool_calls" if step.wire_calls() else "stop"

    def reply(self, step: Step, n: int) -> Reply:
        calls = [cc.fn_call(cid, name, args) for cid, name, args in step.wire_calls()]
        message: dict[str, Any] = {}
        if step.reasoning and self.reasons:
            message["reasoning_content"] = step.reasoning
        if step.refusal:
            message["refusal"] = step.refusal
        top: dict[str, Any] = {"id": "chatcmpl-stream"}
        if self.flavour == "glm":
            top["request_id"] = None  # the stream chunks carry none either
        return Reply(
            cc.completion(
                self.flavour,
                content=step.text or None,
                calls=calls,
                finish=self._finish(step),
                message=message,
                top=top,
            )
        )

    def sse(self, step: Step, n: int) -> SSE:
        f = self.flavour

        def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **kw: Any) -> Any:
            return cc.chunk(delta, finish, flavour=f, **kw)

        chunks = [chunk({"role": "assistant", "content": ""})]
        if step.reasoning and self.reasons:
            chunks += [chunk({"reasoning_content": p}) for p in _pieces(step.reasoning)]
        chunks += [chunk({"content": p}) for p in _pieces(step.text)]
        chunks += [chunk({"refusal": p}) for p in _pieces(step.refusal)]
        calls = step.wire_calls()
        for index, (call_id, name, _) in enumerate(calls):
            first = {"name": name, "arguments": ""}
            chunks.append(
                chunk(
                    {
                        "tool_calls": [
                            {"index": index, "id": call_id, "type": "function", "function": first}
                        ]
                    }
                )
            )
        fragments = [_pieces(args, 4) for _, _, args in calls]
        for at in range(max((len(x) for x in fragments), default=0)):  # interleaved
            for index, pieces in enumerate(fragments):
                if at < len(pieces):
                    delta = {"index": index, "function": {"arguments": pieces[at]}}
                    chunks.append(chunk({"tool_calls": [delta]}))
        if f == "glm":
            chunks.append(chunk({}, self._finish(step), usage=cc.USAGE))
        else:
            chunks += [chunk({}, self._finish(step)), chunk(usage=cc.USAGE)]
        return cc.sse(*chunks)

    def is_text(self, event: tuple[str | None, Any]) -> bool:
        data = event[1]
        choices = data.get("choices") if isinstance(data, dict) else None
        return bool(choices and choices[0]["delta"].get("content"))

    def history(self, body: Any) -> list[Any]:
        if self.flavour == "openai":
            cc.check_openapi("CreateChatCompletionRequest", body)
        return list(body["messages"])

    def users(self, *texts: str) -> list[Any]:
        return [{"role": "user", "content": t} for t in texts]

    def answered(self, body: Any) -> tuple[list[str], list[str]]:
        messages = self.history(body)
        calls = [c["id"] for m in messages for c in m.get("tool_calls") or ()]
        outputs = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
        return calls, outputs


class Anthropic:
    name = "anthropic"
    reasons = True
    limit_field = "max_tokens"
    # the SDK's own telemetry of how it reads the response
    sdk_headers = frozenset({"content-length", "x-stainless-raw-response", "x-stainless-timeout"})
    USAGE: ClassVar[dict[str, Any]] = {
        "input_tokens": 400,
        "output_tokens": 60,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }

    def __init__(self) -> None:
        self.stream_keys: dict[str, Any] = {"stream": True}

    def model(self, fake: FakeProvider) -> Model:
        return AnthropicModel(an.MODEL, api_key="test", base_url=fake.url, max_retries=0)

    def _stop(self, step: Step) -> str:
        if step.cut:
            return "max_tokens"
        if step.refusal:
            return "refusal"
        return "tool_use" if step.calls else "end_turn"

    def reply(self, step: Step, n: int) -> Reply:
        blocks: list[dict[str, Any]] = []
        if step.reasoning:
            blocks.append({"type": "thinking", "thinking": step.reasoning, "signature": f"sig{n}"})
        if step.text or step.refusal:
            blocks.append(an.text(step.text or step.refusal))
        blocks += [an.tool_use(cid, name, args) for cid, name, args in step.calls]
        extra: dict[str, Any] = {}
        if step.refusal:
            extra["stop_details"] = {"type": "refusal", "category": "cyber", "explanation": None}
        return Reply(
            an.msg(*blocks, stop=self._stop(step), id=f"msg_{n}", usage=self.USAGE, **extra)
        )

    def sse(self, step: Step, n: int) -> SSE:
        events: list[dict[str, Any]] = [an._start(id=f"msg_{n}")]
        index = 0
        if step.reasoning:
            events.append(
                an._block_start(index, {"type": "thinking", "thinking": "", "signature": ""})
            )
            for piece in _pieces(step.reasoning):
                events.append(an._delta(index, {"type": "thinking_delta", "thinking": piece}))
            events.append(an._delta(index, {"type": "signature_delta", "signature": f"sig{n}"}))
            events.append(an._stop(index))
            index += 1
        if step.text or step.refusal:
            events.append(an._block_start(index, {"type": "text", "text": ""}))
            events += [an._text(index, p) for p in _pieces(step.text or step.refusal)]
            events.append(an._stop(index))
            index += 1
        calls = step.wire_calls()
        for at, (call_id, name, _) in enumerate(calls):
            events.append(an._block_start(index + at, an.tool_use(call_id, name, {})))
        fragments = [_pieces(args, 4) for _, _, args in calls]
        for at in range(max((len(x) for x in fragments), default=0)):  # interleaved
            for k, pieces in enumerate(fragments):
                if at < len(pieces):
                    events.append(an._json(index + k, pieces[at]))
        events += [an._stop(index + k) for k in range(len(calls))]
        delta = an._message_delta(self._stop(step), 60)
        if step.refusal:
            delta["delta"]["stop_details"] = {
                "type": "refusal",
                "category": "cyber",
                "explanation": None,
            }
        events += [delta, {"type": "message_stop"}]
        return an.sse(*events)

    def is_text(self, event: tuple[str | None, Any]) -> bool:
        data = event[1]
        return bool(data["type"] == "content_block_delta" and data["delta"]["type"] == "text_delta")

    def history(self, body: Any) -> list[Any]:
        return list(body["messages"])

    def users(self, *texts: str) -> list[Any]:
        return [{"role": "user", "content": [{"type": "text", "text": t} for t in texts]}]

    def answered(self, body: Any) -> tuple[list[str], list[str]]:
        calls, outputs = [], []
        for message in self.history(body):
            for block in message["content"] if isinstance(message["content"], list) else ():
                if block["type"] == "tool_use":
                    calls.append(block["id"])
                elif block["type"] == "tool_result":
                    outputs.append(block["tool_use_id"])
        return calls, outputs


WIRES: list[Wire] = [Responses(), Chat("openai"), Chat("glm"), Anthropic()]
by_name = pytest.mark.parametrize("wire", WIRES, ids=lambda w: w.name)


@dataclass
class Turn:
    session: Session
    events: list[Event]
    result: Any

    def of(self, kind: type[Any]) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]


async def _turn(
    wire: Wire,
    fake: FakeProvider,
    steps: Sequence[Step],
    *,
    streamed: bool = True,
    prompt: str = "Weather in Paris, and 2+3?",
    **options: Any,
) -> Turn:
    fake.queue(*((wire.sse if streamed else wire.reply)(s, n) for n, s in enumerate(steps, 1)))
    model = wire.model(fake)
    try:
        session = Session(model, options.pop("tools", TOOLS), **options)
        if streamed:
            stream = session.stream(prompt)
            events = [e async for e in stream]
            return Turn(session, events, stream.result)
        events = []
        session.events.subscribe(events.append)
        return Turn(session, events, await session.run(prompt))
    finally:
        await close_client(model)


async def close_client(model: Model) -> None:
    """Close the SDK client of a wire's model (google-genai closes its async side with
    ``aio.aclose()``; the other SDKs with ``close()``)."""
    client = model.client  # type: ignore[attr-defined]
    aio = getattr(client, "aio", None)
    await (aio.aclose() if aio is not None else client.close())


def turn(wire: Wire, fake: FakeProvider, steps: Sequence[Step], **options: Any) -> Turn:
    return asyncio.run(_turn(wire, fake, steps, **options))


def collapsed(events: Sequence[Event], keep: Callable[[Event], bool]) -> list[str]:
    out: list[str] = []
    for event in events:
        if keep(event) and (not out or out[-1] != event.type):
            out.append(event.type)
    return out


THINK = "The user wants two things; call both tools."
FIRST = Step(
    text="Checking both.",
    calls=(("call_1", "get_weather", {"city": "Paris"}), ("call_2", "add", {"a": 2, "b": 3})),
    reasoning=THINK,
)
LAST = Step(text="Paris is 18 °C, and 2+3 is 5.")


# -- order and content --------------------------------------------------------------------


@by_name
def test_events_in_order_with_reasoning_text_and_parallel_calls(
    fake_provider: FakeProvider, wire: Wire
) -> None:
    t = turn(wire, fake_provider, [FIRST, LAST])
    assert t.result.stop_reason is StopReason.END_TURN and t.result.output == LAST.text
    assert sorted(RAN) == ["add:2+3", "get_weather:Paris"]
    model_side = (TurnFinished, ModelStepFinished, TextDelta, ReasoningDelta, OutputRecorded)
    thinking = ["reasoning_delta"] if wire.reasons else []
    assert collapsed(
        t.events,
        lambda e: (
            isinstance(e, model_side) or e.type.startswith("model_step") or e.type == "turn_started"
        ),
    ) == [
        "turn_started",
        "model_step_started",
        *thinking,
        "text_delta",
        "model_step_finished",
        "output_recorded",
        "model_step_started",
        "text_delta",
        "model_step_finished",
        "turn_finished",
    ]
    step_one = [e for e in t.events if getattr(e, "step", None) == 1]
    assert "".join(e.text for e in step_one if isinstance(e, ReasoningDelta)) == (
        THINK if wire.reasons else ""
    )
    assert "".join(e.text for e in step_one if isinstance(e, TextDelta)) == FIRST.text
    texts = [e.text for e in t.of(TextDelta) if e.step == 2]
    assert len(texts) > 1 and "".join(texts) == LAST.text  # really streamed in pieces
    # the calls: announced, written (interleaved where the provider interleaves), done
    position = {id(e): i for i, e in enumerate(t.events)}
    started = t.of(ToolCallStarted)
    assert [(e.index, e.call_id, e.name) for e in started] == [
        (0, "call_1", "get_weather"),
        (1, "call_2", "add"),
    ]
    for index, (_, _, args) in enumerate(FIRST.calls):
        pieces = [e for e in t.of(ToolCallDelta) if e.index == index]
        assert "".join(e.arguments for e in pieces) == _dumps(args)
        assert all(position[id(started[index])] < position[id(e)] for e in pieces)
    done = t.of(ToolCallDone)
    finished = t.of(ModelStepFinished)[0]
    assert [e.call for e in done] == finished.message.tool_calls
    last_delta = max(position[id(e)] for e in t.of(ToolCallDelta))
    assert last_delta < position[id(done[0])] < position[id(done[1])] < position[id(finished)]
    for event in t.of(CallStarted):
        assert position[id(finished)] < position[id(event)]
    assert finished.usage.requests == 1 and finished.stop_reason is StopReason.TOOL_CALLS
    end = t.events[-1]
    assert isinstance(end, TurnFinished) and end.usage == t.result.usage
    assert end.usage.requests == 2


@by_name
def test_stream_and_run_send_the_same_requests_and_keep_the_same_transcript(
    fake_provider: FakeProvider, wire: Wire
) -> None:
    streamed = turn(wire, fake_provider, [FIRST, LAST])
    ran = turn(wire, fake_provider, [FIRST, LAST], streamed=False)
    assert streamed.session.transcript == ran.session.transcript
    assert streamed.result.items == ran.result.items
    assert streamed.result.usage == ran.result.usage
    sent = fake_provider.requests
    assert len(sent) == 4
    for s, r in zip(sent[:2], sent[2:], strict=True):
        # exactly the streaming flag, and nothing else, tells the two bodies apart
        extra = {k: v for k, v in s.body.items() if k not in r.body}
        assert extra == wire.stream_keys
        assert {k: v for k, v in s.body.items() if k not in extra} == r.body
        assert (s.method, s.path) == (r.method, r.path)
        differs = {k for k in {*s.headers, *r.headers} if s.headers.get(k) != r.headers.get(k)}
        assert differs <= wire.sdk_headers


@by_name
def test_refusal_mid_stream_runs_nothing_and_keeps_no_text(
    fake_provider: FakeProvider, wire: Wire
) -> None:
    if wire.name == "chat-glm":
        pytest.skip("GLM has no refusal field (it stops with 'sensitive')")
    refused = Step(refusal="I can't help with that malware loader: i")
    t = turn(wire, fake_provider, [refused])
    streamed_text = "".join(e.text for e in t.of(TextDelta))
    # Anthropic's classifier stops a response already being written; the others send
    # refusal text that never streams as text
    assert streamed_text == (refused.refusal if wire.name == "anthropic" else "")
    message = t.of(ModelStepFinished)[0].message
    assert message.stop_reason is StopReason.REFUSAL and message.text == ""
    assert message.refusal == "refusal:cyber"
    assert t.result.stop_reason is StopReason.REFUSAL and t.result.reason == "refusal:cyber"
    assert not t.of(CallStarted) and RAN == []
    assert "malware" not in repr(t.session.transcript)


@by_name
def test_a_response_cut_off_inside_a_call_runs_none_of_its_calls(
    fake_provider: FakeProvider, wire: Wire
) -> None:
    cut = Step(
        text="Checking.",
        calls=(("call_1", "get_weather", {"city": "Paris"}),),
        cut=("call_2", "add", '{"a": 2, "b'),
    )
    t = turn(wire, fake_provider, [cut])
    assert [e.index for e in t.of(ToolCallStarted)] == [0, 1]
    assert "".join(e.arguments for e in t.of(ToolCallDelta) if e.index == 1) == '{"a": 2, "b'
    done = [e.call for e in t.of(ToolCallDone)]
    assert [c.call_id for c in done] == ["call_1", "call_2"] and all(c.incomplete for c in done)
    assert t.of(ModelStepFinished)[0].stop_reason is StopReason.MAX_TOKENS
    outputs = [e.output for e in t.of(OutputRecorded)]
    assert [o.call_id for o in outputs] == ["call_1", "call_2"]
    assert all(o.text.startswith("Not executed: the response was cut off") for o in outputs)
    assert not t.of(CallStarted) and RAN == []
    assert t.result.reason == "max_tokens; 2 call(s) not executed"


# -- server-side tool use -----------------------------------------------------------------


def test_anthropic_server_tool_use_streams_no_local_call(fake_provider: FakeProvider) -> None:
    events = [
        an._start(),
        an._block_start(0, {**an.SERVER_USE, "input": {}}),
        an._json(0, json.dumps(an.SERVER_USE["input"])),
        an._stop(0),
        an._block_start(1, an.SEARCH_RESULT),
        an._stop(1),
        an._block_start(2, {"type": "text", "text": ""}),
        an._text(2, "It is "),
        an._text(2, "18 °C."),
        an._stop(2),
        an._message_delta("end_turn", 60),
        {"type": "message_stop"},
    ]
    fake_provider.queue(an.sse(*events))

    async def main() -> Turn:
        model = AnthropicModel(an.MODEL, api_key="test", base_url=fake_provider.url, max_retries=0)
        session = Session(model, [], session_id="s")
        stream = session.stream("Weather in Paris?")
        seen = [e async for e in stream]
        await model.aclose()
        return Turn(session, seen, stream.result)

    t = asyncio.run(main())
    assert not any(type(e).__name__.startswith(("ToolCall", "Call")) for e in t.events)
    assert "".join(e.text for e in t.of(TextDelta)) == "It is 18 °C."
    message = t.of(ModelStepFinished)[0].message
    assert [p.kind for p in message.opaque] == ["server_tool_use", "web_search_tool_result"]
    assert message.opaque[0].data == an.SERVER_USE and message.tool_calls == []


def test_responses_hosted_search_streams_no_local_call(fake_provider: FakeProvider) -> None:
    search = {
        "type": "web_search_call",
        "id": "ws_1",
        "status": "completed",
        "action": {"type": "search", "query": "Paris weather"},
    }
    final = oa.response(search, oa.msg("It is 18 °C."))
    fake_provider.queue(oa.sse_for(final, chunk=3))

    async def main() -> Turn:
        model = OpenAIResponsesModel(
            oa.MODEL, api_key="test", base_url=fake_provider.url + "/v1", max_retries=0
        )
        session = Session(model, [get_weather])
        stream = session.stream("Weather in Paris?")
        seen = [e async for e in stream]
        await model.client.close()
        return Turn(session, seen, stream.result)

    t = asyncio.run(main())
    assert not any(type(e).__name__.startswith(("ToolCall", "Call")) for e in t.events)
    assert "".join(e.text for e in t.of(TextDelta)) == "It is 18 °C."
    message = t.of(ModelStepFinished)[0].message
    assert message.opaque == [
        OpaqueItem(
            "openai", "openai-responses", oa.MODEL, "web_search_call", search, model_bound=False
        )
    ]
    assert RAN == []


def test_glm_mcp_call_streams_no_local_call_and_keeps_the_index(
    fake_provider: FakeProvider,
) -> None:
    mcp = {
        "index": 0,
        "id": "call_mcp",
        "type": "mcp",
        "mcp": {"type": "mcp_call", "server_label": "docs", "name": "search", "output": "ok"},
    }
    fn = {"index": 1, **cc.fn_call("call_fn", "add", '{"a":1,"b":1}')}
    fake_provider.queue(
        cc.sse(
            cc.chunk({"role": "assistant", "content": ""}, flavour="glm"),
            cc.chunk({"tool_calls": [mcp]}, flavour="glm"),
            cc.chunk({"tool_calls": [fn]}, flavour="glm"),
            cc.chunk({}, "tool_calls", flavour="glm", usage=cc.USAGE),
        ),
        Chat("glm").sse(Step(text="2"), 2),
    )
    t = turn(Chat("glm"), fake_provider, [], prompt="1+1?")
    assert [(e.index, e.call_id) for e in t.of(ToolCallStarted)] == [(0, "call_fn")]
    assert [e.call.call_id for e in t.of(ToolCallDone)] == ["call_fn"]
    assert RAN == ["add:1+1"] and t.result.output == "2"


# -- cancellation -------------------------------------------------------------------------


@by_name
def test_break_after_the_first_text_delta_closes_the_sdk_stream(
    fake_provider: FakeProvider, wire: Wire
) -> None:
    events = list(wire.sse(FIRST, 1).events)
    first_text = next(i for i, e in enumerate(events) if wire.is_text(e))
    held = SSE(events[: first_text + 1], hold=True)  # the provider is still writing
    fake_provider.queue(held, wire.reply(LAST, 2))

    async def main() -> tuple[Session, list[Event]]:
        model = wire.model(fake_provider)
        session = Session(model, TOOLS)
        seen: list[Event] = []
        async with session.stream("first") as stream:
            async for event in stream:
                seen.append(event)
                if isinstance(event, TextDelta):
                    break
        closed = await asyncio.to_thread(held.closed.wait, 10)
        assert closed, "the SDK stream was not closed"
        assert session.transcript == [UserMessage("first")]  # nothing of the cut-short step
        result = await session.run("second")
        assert result.output == LAST.text
        await model.aclose()
        return session, seen

    _, seen = asyncio.run(main())
    assert isinstance(seen[-1], TextDelta) and RAN == []
    # the next request is valid: both user turns, nothing dangling
    assert wire.history(fake_provider.bodies()[1]) == wire.users("first", "second")


@by_name
def test_cancel_during_a_tool_call_one_output_per_call_and_a_valid_next_request(
    fake_provider: FakeProvider, wire: Wire
) -> None:
    step = Step(
        text="Fetching.",
        calls=(
            ("call_1", "fetch", {"url": "https://a.example"}),
            ("call_2", "add", {"a": 2, "b": 3}),
        ),
    )
    fake_provider.queue(wire.sse(step, 1), wire.reply(LAST, 2))

    async def main() -> Session:
        started = asyncio.Event()

        @tool(read_only=True)
        async def fetch(url: str) -> str:
            """Fetch a page (this one never answers)."""
            started.set()
            await asyncio.Event().wait()
            return "page"

        @tool(read_only=True, name="add")
        async def quick_add(a: int, b: int) -> int:
            """Add two integers (async: done before the consumer is cancelled)."""
            return a + b

        model = wire.model(fake_provider)
        session = Session(model, [fetch, quick_add])

        async def consume() -> None:
            async for _ in session.stream("go"):
                pass

        task = asyncio.create_task(consume())
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        outputs = [i for i in session.transcript if isinstance(i, ToolOutput)]
        assert [(o.call_id, o.text) for o in outputs] == [
            ("call_1", "fetch was stopped: the turn was cancelled while it ran."),
            ("call_2", "5"),
        ]
        assert (await session.run("and now?")).output == LAST.text
        await close_client(model)
        return session

    asyncio.run(main())
    calls, outputs = wire.answered(fake_provider.bodies()[1])
    assert calls == outputs == ["call_1", "call_2"]


# -- continue after truncation ------------------------------------------------------------


@by_name
def test_continue_after_a_cut_off_with_a_larger_limit(
    fake_provider: FakeProvider, wire: Wire
) -> None:
    steps = [
        Step(text="Let me add.", cut=("call_1", "add", '{"a": 2,')),
        Step(calls=(("call_2", "add", {"a": 2, "b": 3}),)),
        Step(text="5"),
    ]
    t = turn(
        wire,
        fake_provider,
        steps,
        prompt="2+3?",
        settings=ModelSettings(max_output_tokens=100),
        continue_on_max_tokens=ContinuePolicy(max_continuations=1, factor=2),
    )
    assert t.result.stop_reason is StopReason.END_TURN and t.result.output == "5"
    assert RAN == ["add:2+3"]  # the cut-off call never ran
    bodies = fake_provider.bodies()
    assert [b[wire.limit_field] for b in bodies] == [100, 200, 200]
    continued = t.of(TurnContinued)
    assert [(e.previous_limit, e.output_limit, e.not_executed) for e in continued] == [
        (100, 200, ("call_1",))
    ]
    calls, outputs = wire.answered(bodies[1])
    assert calls == outputs == ["call_1"]
    sent = json.dumps(bodies[1], ensure_ascii=False)
    assert "Not executed: the response was cut off at its token limit" in sent
    assert "[tooldeck] Your previous response was cut off at its output limit (100 tokens)" in sent
    messages = [i for i in t.session.transcript if isinstance(i, AssistantMessage)]
    assert [m.stop_reason for m in messages] == [
        StopReason.MAX_TOKENS,
        StopReason.TOOL_CALLS,
        StopReason.END_TURN,
    ]


# -- the CLI ------------------------------------------------------------------------------


def test_demo_with_a_model_shows_the_text_as_it_streams(
    fake_provider: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from tooldeck.cli import app

    wire = Responses()
    first = Step(
        text="Reading the notes first.", calls=(("call_1", "read_document", {"path": "notes.md"}),)
    )
    fake_provider.queue(wire.sse(first, 1), wire.sse(Step(text="Two items are open."), 2))
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    monkeypatch.setenv("TOOLDECK_BASE_URL", fake_provider.url + "/v1")
    result = CliRunner().invoke(app, ["demo", "--model", "openai:gpt-5.4"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    # the streamed text, then the call's line, then the final step's text
    spoken = lines.index("Reading the notes first.")
    ran = next(i for i, line in enumerate(lines) if line.startswith("✓") and "notes.md" in line)
    assert spoken < ran < lines.index("Two items are open.")
    assert "final answer: Two items are open." in result.output
    assert all(body["stream"] is True for body in fake_provider.bodies())
    assert len(fake_provider.requests) == 2


def test_a_provider_error_mid_stream_ends_the_turn_after_turn_finished(
    fake_provider: FakeProvider,
) -> None:
    import anthropic

    wire = Anthropic()
    events = [*list(wire.sse(FIRST, 1).events)[:4]]  # start, a thinking block begun
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    fake_provider.queue(SSE([*events, ("error", overloaded)]), wire.reply(LAST, 2))

    async def main() -> tuple[Session, list[Event]]:
        model = wire.model(fake_provider)
        session = Session(model, TOOLS)
        seen: list[Event] = []
        with pytest.raises(ProviderUnavailable, match="Overloaded") as caught:
            async for event in session.stream("first"):
                seen.append(event)
        assert isinstance(caught.value.__cause__, anthropic.APIStatusError)
        assert session.transcript == [UserMessage("first")]
        assert (await session.run("second")).output == LAST.text
        await model.aclose()
        return session, seen

    _, seen = asyncio.run(main())
    assert collapsed(seen, lambda e: True) == [
        "turn_started",
        "model_step_started",
        "reasoning_delta",
        "turn_finished",
    ]
    finished = seen[-1]
    assert isinstance(finished, TurnFinished) and finished.stop_reason is StopReason.ERROR
    assert wire.history(fake_provider.bodies()[1]) == wire.users("first", "second")
