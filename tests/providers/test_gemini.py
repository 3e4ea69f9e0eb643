"""``GeminiModel`` over real HTTP: the google-genai SDK against a local server speaking
``generateContent`` and ``streamGenerateContent`` (SSE).

The streamed-turn scenarios of ``test_streamed_turns`` (events in order with reasoning,
text and parallel calls; breaking off a stream; cancelling during a tool call) run with
the Gemini wire; then what is Gemini's own: the same bodies streamed or not (only the
path differs), thought signatures replayed verbatim and only to the same Gemini model,
safety and recitation stops, MAX_TOKENS, malformed arguments, calls without ids,
structured output, usage, and the request a user's tools make (golden file).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

import tooldeck
from tooldeck import (
    AssistantMessage,
    ContinuePolicy,
    ModelSettings,
    OpaqueItem,
    Session,
    StopReason,
    ToolCall,
    tool,
)
from tooldeck.events import CallStarted, ModelStepFinished, OutputRecorded, TextDelta, TurnContinued
from tooldeck.providers.anthropic import AnthropicModel
from tooldeck.providers.gemini import GeminiModel
from tooldeck.transcript import Usage

from . import test_anthropic as an
from . import test_streamed_turns as st
from .fake_server import FakeProvider, Reply, assert_golden
from .gemini_wire import (
    MODEL,
    Gemini,
    call_part,
    chunk,
    response,
    sse,
)

WIRE = Gemini()


@pytest.fixture(autouse=True)
def _clear() -> Iterator[None]:
    st.RAN.clear()
    yield
    st.RAN.clear()


def checked(fake: FakeProvider) -> None:
    assert fake.requests
    for recorded in fake.requests:
        WIRE.check(recorded)


# -- the streamed-turn scenarios ----------------------------------------------------------


def test_reasoning_text_and_parallel_calls_in_order(fake_provider: FakeProvider) -> None:
    st.test_events_in_order_with_reasoning_text_and_parallel_calls(fake_provider, WIRE)
    checked(fake_provider)
    # both calls answered in one user turn, in the order of the calls, by id and name
    second = fake_provider.bodies()[1]
    answers = second["contents"][-1]
    assert answers["role"] == "user"
    assert [p["functionResponse"] for p in answers["parts"]] == [
        {
            "id": "call_1",
            "name": "get_weather",
            "response": {"output": '{"city":"Paris","temp_c":18}'},
        },
        {"id": "call_2", "name": "add", "response": {"output": "5"}},
    ]


def test_break_after_the_first_text_delta_closes_the_stream(fake_provider: FakeProvider) -> None:
    st.test_break_after_the_first_text_delta_closes_the_sdk_stream(fake_provider, WIRE)
    checked(fake_provider)


def test_cancel_during_a_tool_call(fake_provider: FakeProvider) -> None:
    st.test_cancel_during_a_tool_call_one_output_per_call_and_a_valid_next_request(
        fake_provider, WIRE
    )
    checked(fake_provider)


# -- one body, two paths; thought signatures ------------------------------------------------


def test_stream_and_run_send_the_same_bodies_and_replay_signatures(
    fake_provider: FakeProvider,
) -> None:
    streamed = st.turn(WIRE, fake_provider, [st.FIRST, st.LAST])
    ran = st.turn(WIRE, fake_provider, [st.FIRST, st.LAST], streamed=False)
    assert streamed.session.transcript == ran.session.transcript
    assert streamed.result.usage == ran.result.usage
    sent = fake_provider.requests
    for s, r in zip(sent[:2], sent[2:], strict=True):
        assert s.body == r.body  # streaming is the path, never the body
        assert s.path.endswith(":streamGenerateContent?alt=sse")
        assert r.path.endswith(":generateContent")
    # step two sends step one's model turn back exactly as received: the thought summary,
    # the text, the calls with the signature on the first
    model_turn = sent[1].body["contents"][1]
    assert model_turn == {
        "role": "model",
        "parts": [
            {"text": st.THINK, "thought": True},
            {"text": st.FIRST.text},
            call_part("call_1", "get_weather", {"city": "Paris"}, "sig1"),
            call_part("call_2", "add", {"a": 2, "b": 3}),
        ],
    }
    message = ran.result.items[1]
    assert isinstance(message, AssistantMessage)
    assert [p.kind for p in message.opaque] == ["thought"]
    checked(fake_provider)


def test_a_signed_text_answer_goes_back_signed(fake_provider: FakeProvider) -> None:
    fake_provider.queue(WIRE.sse(st.LAST, 1), WIRE.reply(st.Step(text="Again."), 2))

    async def main() -> None:
        model = WIRE.model(fake_provider)
        async with Session(model, st.TOOLS, owns_model=True) as session:
            async for _ in session.stream("first"):
                pass
            await session.run("second")

    asyncio.run(main())
    contents = fake_provider.bodies()[1]["contents"]
    assert contents[1] == {
        "role": "model",
        "parts": [{"text": st.LAST.text, "thoughtSignature": "sig1"}],
    }


def _gemini_history(fake: FakeProvider) -> list[Any]:
    """A finished Gemini turn's transcript: thought, text, signed calls, outputs, answer."""
    turn = st.turn(WIRE, fake, [st.FIRST, st.LAST], streamed=False)
    return list(turn.session.transcript)


def test_signatures_and_thoughts_go_only_to_the_same_gemini_model(
    fake_provider: FakeProvider,
) -> None:
    history = _gemini_history(fake_provider)
    # another Gemini model: the calls and text, without signatures or thoughts
    fake_provider.queue(WIRE.reply(st.Step(text="ok"), 3))
    other = GeminiModel("gemini-2.5-pro", api_key="k", base_url=fake_provider.url, max_retries=0)
    asyncio.run(_continue(other, history))
    sent = json.dumps(fake_provider.bodies()[-1])
    assert "sig1" not in sent and st.THINK not in sent and '"thought"' not in sent
    model_turn = fake_provider.bodies()[-1]["contents"][1]
    assert model_turn["parts"] == [
        {"text": st.FIRST.text},
        call_part("call_1", "get_weather", {"city": "Paris"}),
        call_part("call_2", "add", {"a": 2, "b": 3}),
    ]
    # Anthropic: the calls as tool_use blocks, nothing of Gemini's reasoning
    fake_provider.queue(Reply(an.msg(an.text("ok"))))
    claude = AnthropicModel(an.MODEL, api_key="k", base_url=fake_provider.url, max_retries=0)
    asyncio.run(_continue(claude, history))
    sent = json.dumps(fake_provider.bodies()[-1])
    assert "sig1" not in sent and st.THINK not in sent
    assert '"tool_use"' in sent


async def _continue(model: Any, history: list[Any]) -> None:
    async with Session(model, st.TOOLS, transcript=history, owns_model=True) as session:
        await session.run("and?")


# -- safety, recitation, refusals ------------------------------------------------------------


def test_a_safety_stop_mid_stream_is_a_refusal_that_keeps_no_text(
    fake_provider: FakeProvider,
) -> None:
    refused = st.Step(refusal="Here is how to build the malware loader: i")
    t = st.turn(WIRE, fake_provider, [refused])
    assert "".join(e.text for e in t.of(TextDelta))  # it was being written when stopped
    message = t.of(ModelStepFinished)[0].message
    assert message.stop_reason is StopReason.REFUSAL and message.text == ""
    assert message.refusal == "refusal:dangerous_content"
    assert t.result.stop_reason is StopReason.REFUSAL
    assert t.result.reason == "refusal:dangerous_content"
    assert not t.of(CallStarted) and st.RAN == []
    assert "malware" not in repr(t.session.transcript)
    checked(fake_provider)


@pytest.mark.parametrize("streamed", [False, True])
def test_a_blocked_prompt_is_a_refusal(fake_provider: FakeProvider, streamed: bool) -> None:
    blocked = {
        "promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},
        "usageMetadata": {"promptTokenCount": 12, "totalTokenCount": 12},
        "modelVersion": MODEL,
    }
    fake_provider.queue(sse(blocked) if streamed else Reply(blocked))
    t = st.turn(WIRE, fake_provider, [], streamed=streamed)
    message = t.of(ModelStepFinished)[0].message
    assert message.stop_reason is StopReason.REFUSAL and message.parts == []
    assert message.refusal == "refusal:prohibited_content"
    assert message.provider_data["block_reason"] == "PROHIBITED_CONTENT"
    assert message.usage.input_tokens == 12


def test_recitation_is_a_content_filter_stop(fake_provider: FakeProvider) -> None:
    fake_provider.queue(
        sse(
            chunk({"text": "It was the best of times, "}),
            chunk(finishReason="RECITATION", usageMetadata={"promptTokenCount": 5}),
        )
    )
    t = st.turn(WIRE, fake_provider, [])
    message = t.of(ModelStepFinished)[0].message
    assert message.stop_reason is StopReason.CONTENT_FILTER
    assert message.provider_data["finish_reason"] == "RECITATION"
    assert t.result.stop_reason is StopReason.CONTENT_FILTER


def test_a_malformed_function_call_stop_runs_nothing(fake_provider: FakeProvider) -> None:
    fake_provider.queue(
        Reply(
            response(
                finish="MALFORMED_FUNCTION_CALL",
                finishMessage="Malformed function call: print(default_api.add(a=2",
            )
        )
    )
    t = st.turn(WIRE, fake_provider, [], streamed=False)
    assert t.result.stop_reason is StopReason.ERROR and st.RAN == []
    message = t.of(ModelStepFinished)[0].message
    assert message.provider_data["finish_reason"] == "MALFORMED_FUNCTION_CALL"


# -- truncation ------------------------------------------------------------------------------


@pytest.mark.parametrize("streamed", [False, True])
def test_calls_of_a_max_tokens_answer_are_not_run(
    fake_provider: FakeProvider, streamed: bool
) -> None:
    cut = st.Step(
        text="Checking.",
        calls=(("call_1", "get_weather", {"city": "Paris"}),),
        cut=("call_2", "add", '{"a": 2'),
    )
    t = st.turn(WIRE, fake_provider, [cut], streamed=streamed)
    message = t.of(ModelStepFinished)[0].message
    assert message.stop_reason is StopReason.MAX_TOKENS
    assert [c.call_id for c in message.tool_calls] == ["call_1", "call_2"]
    assert all(c.incomplete for c in message.tool_calls)
    outputs = [e.output for e in t.of(OutputRecorded)]
    assert all(o.text.startswith("Not executed: the response was cut off") for o in outputs)
    assert not t.of(CallStarted) and st.RAN == []
    assert t.result.reason == "max_tokens; 2 call(s) not executed"


def test_continue_after_a_cut_off_with_a_larger_limit(fake_provider: FakeProvider) -> None:
    steps = [
        st.Step(text="Let me add.", cut=("call_1", "add", '{"a": 2,')),
        st.Step(calls=(("call_2", "add", {"a": 2, "b": 3}),)),
        st.Step(text="5"),
    ]
    t = st.turn(
        WIRE,
        fake_provider,
        steps,
        prompt="2+3?",
        settings=ModelSettings(max_output_tokens=100),
        continue_on_max_tokens=ContinuePolicy(max_continuations=1, factor=2),
    )
    assert t.result.stop_reason is StopReason.END_TURN and t.result.output == "5"
    assert st.RAN == ["add:2+3"]
    bodies = fake_provider.bodies()
    assert [b["generationConfig"]["maxOutputTokens"] for b in bodies] == [100, 200, 200]
    assert [(e.previous_limit, e.output_limit) for e in t.of(TurnContinued)] == [(100, 200)]
    calls, outputs = WIRE.answered(bodies[1])
    assert calls == outputs == ["call_1"]
    assert "Not executed: the response was cut off" in json.dumps(bodies[1])
    checked(fake_provider)


# -- arguments and call ids ------------------------------------------------------------------


def test_malformed_arguments_go_back_as_an_error_response(fake_provider: FakeProvider) -> None:
    fake_provider.queue(
        Reply(response(call_part("call_1", "get_weather", {"town": "Paris"}, "sigA"))),
        WIRE.reply(st.Step(text="Understood."), 2),
    )
    model = WIRE.model(fake_provider)

    async def main() -> Any:
        async with model:
            return await tooldeck.run(model, st.TOOLS, "Weather?")

    result = asyncio.run(main())
    assert result.output == "Understood." and st.RAN == []
    assert result.tool_outputs[0].is_error
    answer = fake_provider.bodies()[1]["contents"][-1]["parts"][0]["functionResponse"]
    assert answer["id"] == "call_1" and answer["name"] == "get_weather"
    assert set(answer["response"]) == {"error"} and "city" in answer["response"]["error"]
    checked(fake_provider)


def test_calls_without_ids_are_answered_by_name_in_order(fake_provider: FakeProvider) -> None:
    fake_provider.queue(
        Reply(
            response(
                call_part(None, "add", {"a": 1, "b": 2}, "sigA"),
                call_part(None, "add", {"a": 3, "b": 4}),
            )
        ),
        WIRE.reply(st.Step(text="3 and 7"), 2),
    )
    t = st.turn(WIRE, fake_provider, [], streamed=False, prompt="1+2, 3+4?")
    assert t.result.output == "3 and 7" and st.RAN == ["add:1+2", "add:3+4"]
    message = t.of(ModelStepFinished)[0].message
    ids = [c.call_id for c in message.tool_calls]
    assert len(set(ids)) == 2 and all(i.startswith("call_") for i in ids)
    contents = fake_provider.bodies()[1]["contents"]
    assert contents[1]["parts"] == [
        call_part(None, "add", {"a": 1, "b": 2}, "sigA"),
        call_part(None, "add", {"a": 3, "b": 4}),
    ]
    assert [p["functionResponse"] for p in contents[2]["parts"]] == [
        {"name": "add", "response": {"output": "3"}},
        {"name": "add", "response": {"output": "7"}},
    ]
    checked(fake_provider)


# -- usage -----------------------------------------------------------------------------------


def test_gemini_usage_fields_map_to_usage(fake_provider: FakeProvider) -> None:
    t = st.turn(WIRE, fake_provider, [st.LAST])
    assert t.result.usage == Usage(
        input_tokens=400,
        output_tokens=60,
        reasoning_tokens=10,
        cache_read_tokens=128,
        cache_write_tokens=0,
        requests=1,
    )


def test_unknown_parts_are_kept_and_replayed_to_gemini_only(fake_provider: FakeProvider) -> None:
    code = {"executableCode": {"language": "PYTHON", "code": "print(2+3)"}}
    result = {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "5\n"}}
    fake_provider.queue(
        Reply(response(code, result, {"text": "5"})), WIRE.reply(st.Step(text="yes"), 2)
    )

    async def main() -> Session:
        model = WIRE.model(fake_provider)
        async with Session(model, [], owns_model=True) as session:
            await session.run("2+3?")
            await session.run("sure?")
            return session

    session = asyncio.run(main())
    message = session.transcript[1]
    assert isinstance(message, AssistantMessage)
    assert message.opaque == [
        OpaqueItem("gemini", "gemini-generate-content", MODEL, "executableCode", code, False),
        OpaqueItem(
            "gemini", "gemini-generate-content", MODEL, "codeExecutionResult", result, False
        ),
    ]
    assert fake_provider.bodies()[1]["contents"][1]["parts"] == [code, result, {"text": "5"}]


# -- the request a user's tools make -----------------------------------------------------------


@tool(read_only=True)
def search_flights(
    origin: str, destination: str, max_stops: int = 1, cabin: str = "economy"
) -> list[str]:
    """Search flights between two airports."""
    return []


def test_the_request_body(fake_provider: FakeProvider) -> None:
    fake_provider.queue(WIRE.reply(st.Step(text="None found."), 1))
    model = WIRE.model(fake_provider)
    settings = ModelSettings(max_output_tokens=512, temperature=0.2, tool_choice="required")

    async def main() -> None:
        async with Session(
            model, [search_flights], instructions="Be brief.", settings=settings, owns_model=True
        ) as session:
            await session.run("Flights from CDG to JFK?")

    asyncio.run(main())
    assert_golden("gemini_request", fake_provider.bodies()[0])
    checked(fake_provider)


def test_forcing_one_tool_names_it(fake_provider: FakeProvider) -> None:
    fake_provider.queue(WIRE.reply(st.Step(text="ok"), 1))
    t = st.turn(WIRE, fake_provider, [], settings=ModelSettings(tool_choice="add"), streamed=False)
    assert t.result.output == "ok"
    assert fake_provider.bodies()[0]["toolConfig"] == {
        "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["add"]}
    }


def test_a_call_from_another_provider_goes_as_a_function_call(
    fake_provider: FakeProvider,
) -> None:
    history = [
        tooldeck.UserMessage("2+3?"),
        AssistantMessage(
            parts=[ToolCall("toolu_1", "add", '{"a": 2, "b": 3}')],
            stop_reason=StopReason.TOOL_CALLS,
            provider="anthropic",
            adapter="anthropic-messages",
            model=an.MODEL,
        ),
    ]
    fake_provider.queue(WIRE.reply(st.Step(text="5"), 1))
    model = WIRE.model(fake_provider)
    asyncio.run(_continue(model, [*history]))
    contents = fake_provider.bodies()[0]["contents"]
    assert contents[1] == {
        "role": "model",
        "parts": [call_part("toolu_1", "add", {"a": 2, "b": 3})],
    }
    checked(fake_provider)


def test_thinking_safety_settings_and_extra_reach_the_body(fake_provider: FakeProvider) -> None:
    fake_provider.queue(WIRE.reply(st.Step(text="ok"), 1))
    safety = [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_ONLY_HIGH"}]
    model = GeminiModel(
        MODEL,
        api_key="test-key",
        base_url=fake_provider.url,
        max_retries=0,
        max_tokens=2048,
        thinking={"includeThoughts": True, "thinkingBudget": 1024},
        safety_settings=safety,
    )
    settings = ModelSettings(extra={"generationConfig": {"topK": 20}})

    async def main() -> None:
        async with model:
            await tooldeck.run(model, [], "hi", settings=settings)

    asyncio.run(main())
    body = fake_provider.bodies()[0]
    assert body["generationConfig"] == {
        "maxOutputTokens": 2048,
        "thinkingConfig": {"includeThoughts": True, "thinkingBudget": 1024},
        "topK": 20,
    }
    assert body["safetySettings"] == safety and "tools" not in body
    checked(fake_provider)


def test_grounding_and_citations_are_kept_with_the_message(fake_provider: FakeProvider) -> None:
    grounding = {
        "webSearchQueries": ["paris weather"],
        "groundingChunks": [{"web": {"uri": "https://weather.example/paris", "title": "Paris"}}],
    }
    citations = {"citations": [{"startIndex": 0, "endIndex": 5, "uri": "https://a.example"}]}
    fake_provider.queue(
        Reply(response({"text": "18 °C"}, groundingMetadata=grounding, citationMetadata=citations))
    )
    t = st.turn(WIRE, fake_provider, [], streamed=False)
    data = t.of(ModelStepFinished)[0].message.provider_data
    assert data["groundingMetadata"] == grounding and data["citationMetadata"] == citations


def test_a_saved_gemini_session_resumes_with_the_same_signed_contents(
    fake_provider: FakeProvider,
) -> None:
    from tooldeck.policy._pending_json import decode_item, encode_item

    history = _gemini_history(fake_provider)
    saved = json.loads(json.dumps([encode_item(i) for i in history]))
    resumed = [decode_item(d) for d in saved]
    assert resumed == history
    fake_provider.queue(WIRE.reply(st.Step(text="a"), 3), WIRE.reply(st.Step(text="b"), 4))
    for transcript in (history, resumed):
        asyncio.run(_continue(WIRE.model(fake_provider), transcript))
    first, second = fake_provider.bodies()[-2:]
    assert first == second and "sig1" in json.dumps(first)


def test_streamed_calls_without_ids_run_and_are_answered(fake_provider: FakeProvider) -> None:
    fake_provider.queue(
        sse(
            chunk(call_part(None, "add", {"a": 1, "b": 2}, "sigA")),
            chunk(call_part(None, "add", {"a": 3, "b": 4})),
            chunk(finishReason="STOP", usageMetadata={"promptTokenCount": 9}),
        ),
        WIRE.sse(st.Step(text="3 and 7"), 2),
    )
    t = st.turn(WIRE, fake_provider, [], prompt="1+2, 3+4?")
    assert t.result.output == "3 and 7" and st.RAN == ["add:1+2", "add:3+4"]
    done = [e.call for e in t.of(st.ToolCallDone)]
    assert [c.call_id for c in done] == [
        c.call_id for c in t.of(ModelStepFinished)[0].message.tool_calls
    ]
    assert [e.index for e in t.of(st.ToolCallStarted)] == [0, 1]
    answers = fake_provider.bodies()[1]["contents"][2]["parts"]
    assert [p["functionResponse"] for p in answers] == [
        {"name": "add", "response": {"output": "3"}},
        {"name": "add", "response": {"output": "7"}},
    ]
    checked(fake_provider)
