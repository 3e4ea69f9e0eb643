"""Stateful OpenAI Responses (``stateful=True``) over real HTTP against the fake provider.

The official SDK talks to the local server; every request body is checked against
OpenAI's OpenAPI description (``CreateResponse``, by the ``fake`` fixture) and the
chained bodies are compared with hand-reviewed golden files. What is pinned down: only
the new items are sent after ``previous_response_id``; the chain is derived from the
transcript alone (so it survives a resume in a fresh process and one adapter can serve
many sessions); and the full replay happens, once and logged, when the server no longer
has the response, when the model changes, when the transcript was edited, or when the
last response was not stored.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tooldeck
from tooldeck import (
    AssistantMessage,
    OpaqueItem,
    Protection,
    StopReason,
    TextPart,
    ToolCall,
    ToolOutput,
    ToolResult,
    UserMessage,
    tool,
)
from tooldeck.approvals import PendingApproval, PolicyDecision
from tooldeck.errors import ProviderError
from tooldeck.model import ModelRequest, ModelSettings
from tooldeck.policy import PendingFiles
from tooldeck.providers._responses_chain import STORED_CONTEXT, rejected_previous
from tooldeck.providers.openai_responses import OpenAIResponsesModel

from . import test_openai_responses as responses_tests
from .fake_server import FakeProvider, Reply, assert_golden
from .test_openai_responses import (
    MODEL,
    RAN,
    add,
    aio,
    check_spec,
    fc,
    get_weather,
    make,
    msg,
    reasoning,
    response,
    run,
    sse_for,
    stream,
    usage,
)

fake = responses_tests.fake  # the fixture: every request body is checked against the spec
ROOT = Path(__file__).resolve().parents[2]
LOGGER = "tooldeck.providers.openai_responses"
RIDS = itertools.count(100)


def stored(*output: dict[str, Any], previous: str | None = None, **kwargs: Any) -> dict[str, Any]:
    """A Responses ``response`` made with ``store: true`` (as the API echoes it)."""
    body = response(*output, **kwargs)
    body["store"] = True
    body["previous_response_id"] = previous
    check_spec("Response", body)
    return body


def ok(*output: dict[str, Any], **kwargs: Any) -> Reply:
    return Reply(stored(*output, **kwargs))


def not_found(rid: str = "resp_1", status: int = 404) -> Reply:
    """The error OpenAI sends for an unknown or expired ``previous_response_id``."""
    error = {
        "message": f"Previous response with id '{rid}' not found.",
        "type": "invalid_request_error",
        "param": "previous_response_id",
        "code": "previous_response_not_found",
    }
    check_spec("Error", error)
    return Reply({"error": error}, status)


def golden(name: str, body: Any) -> None:
    assert_golden(f"openai_responses_stateful/{name}", body)


def fco(call_id: str, output: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def weather_loop(fake: FakeProvider) -> None:
    """Queue a three-step tool loop: weather, then add, then the answer."""
    fake.queue(
        ok(reasoning(), fc("call_1", "get_weather", '{"city":"Paris","unit":"c"}')),
        ok(
            reasoning("rs_2", "gAAAAB-encrypted-2"),
            fc("call_2", "add", '{"a":18,"b":2}'),
            rid="resp_2",
        ),
        ok(msg("It is 18C; plus 2 makes 20.", mid="msg_3"), rid="resp_3", use=usage(200, 12)),
    )


PROMPT = "Weather in Paris, then add 2 to the temperature."


def strip_digest(items: list[Any]) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if isinstance(item, AssistantMessage) and item.provider_data:
            data = {k: v for k, v in item.provider_data.items() if k != STORED_CONTEXT}
            item = dataclasses.replace(item, provider_data=data or None)
        out.append(item)
    return out


# -- the chain ---------------------------------------------------------------------------


def test_options(fake: FakeProvider) -> None:
    assert make(fake).store is False and make(fake).stateful is False
    chained = make(fake, stateful=True)
    assert chained.store is True and chained.stateful is True
    assert make(fake, store=True).stateful is False
    with pytest.raises(ValueError, match="stateful implies store=True"):
        make(fake, stateful=True, store=False)


def test_a_tool_loop_sends_only_the_new_items(fake: FakeProvider) -> None:
    weather_loop(fake)
    model = make(fake, stateful=True, reasoning_effort="medium")
    session = tooldeck.Session(model, [get_weather, add], instructions="Use the tools.")
    result = aio(session.run(PROMPT))
    assert result.output == "It is 18C; plus 2 makes 20." and result.steps == 3
    assert RAN == ["get_weather:Paris", "add:18+2"]
    first, second, third = fake.bodies()
    assert "previous_response_id" not in first
    assert first["input"] == [{"role": "user", "content": PROMPT}] and first["store"] is True
    assert second["previous_response_id"] == "resp_1"
    assert second["input"] == [fco("call_1", '{"temp_c":18,"sky":"cloudy"}')]
    assert third["previous_response_id"] == "resp_2"
    assert third["input"] == [fco("call_2", "20")]
    for body in (first, second, third):  # re-sent every time: neither is carried over
        assert body["instructions"] == "Use the tools." and body["tools"] == first["tools"]
        assert body["include"] == ["reasoning.encrypted_content"]  # kept for a fallback
        assert body["store"] is True and body["reasoning"] == {"effort": "medium"}
    golden("loop_step2", second)
    golden("loop_step3", third)
    # the next turn of the session chains on the last answer and sends just the prompt
    fake.queue(ok(msg("You're welcome.", mid="msg_4"), rid="resp_4"))
    aio(session.run("Thanks!"))
    fourth = fake.bodies()[3]
    assert fourth["previous_response_id"] == "resp_3"
    assert fourth["input"] == [{"role": "user", "content": "Thanks!"}]
    golden("next_turn", fourth)


def test_stateful_and_stateless_loops_record_the_same_transcript(fake: FakeProvider) -> None:
    results = {}
    for mode, options in {
        "stateful": {"stateful": True},
        "stored": {"store": True},
        "stateless": {},
    }.items():
        RAN.clear()
        before = len(fake.requests)
        weather_loop(fake)
        results[mode] = run(make(fake, **options), [get_weather, add], PROMPT)
        assert RAN == ["get_weather:Paris", "add:18+2"]
        assert len(fake.requests) - before == 3
    assert results["stateful"].items == results["stored"].items  # exactly, digests included
    assert results["stateful"].usage == results["stateless"].usage
    assert strip_digest(results["stateful"].items) == results["stateless"].items
    stateless_only = [m for m in results["stateless"].items if isinstance(m, AssistantMessage)]
    assert all(STORED_CONTEXT not in (m.provider_data or {}) for m in stateless_only)
    bodies = fake.bodies()
    stateful, stored_bodies, stateless = bodies[0:3], bodies[3:6], bodies[6:9]
    # store=True without stateful still replays everything; only the flag differs
    assert [{**b, "store": False} for b in stored_bodies] == stateless
    assert [len(b["input"]) for b in stateful] == [1, 1, 1]
    assert [len(b["input"]) for b in stateless] == [1, 4, 7]


def test_streaming_chains_like_respond(fake: FakeProvider) -> None:
    model = make(fake, stateful=True)
    fake.queue(ok(reasoning(), fc("call_1", "get_weather", '{"city":"Paris","unit":null}')))
    first = aio(model.respond(ModelRequest([UserMessage("Weather?")], [get_weather])))
    transcript = [
        UserMessage("Weather?"),
        first,
        ToolOutput("call_1", "get_weather", ToolResult('{"temp_c":18}')),
    ]
    final = stored(msg("18C.", mid="msg_2"), rid="resp_2", previous="resp_1")
    fake.queue(sse_for(final))
    *_, message = stream(model, ModelRequest(transcript, [get_weather]))
    body = fake.bodies()[1]
    assert body["stream"] is True and body["previous_response_id"] == "resp_1"
    assert body["input"] == [fco("call_1", '{"temp_c":18}')]
    assert isinstance(message, AssistantMessage) and message.text == "18C."
    assert message.provider_data is not None and STORED_CONTEXT in message.provider_data
    # the streamed message is chainable in turn
    fake.queue(ok(msg("Bye.", mid="msg_3"), rid="resp_3"))
    aio(model.respond(ModelRequest([*transcript, message, UserMessage("Bye")], [get_weather])))
    assert fake.bodies()[2]["previous_response_id"] == "resp_2"


# -- the fallback when the server no longer has the response ------------------------------


@pytest.mark.parametrize("status", [404, 400])
def test_an_unknown_previous_response_is_replayed_once_in_full(
    fake: FakeProvider, status: int, caplog: pytest.LogCaptureFixture
) -> None:
    fake.queue(
        ok(reasoning(), fc("call_1", "get_weather", '{"city":"Paris","unit":null}')),
        not_found("resp_1", status),
        ok(msg("18C and cloudy.", mid="msg_2"), rid="resp_2"),
    )
    model = make(fake, stateful=True)
    session = tooldeck.Session(model, [get_weather])
    with caplog.at_level(logging.INFO, LOGGER):
        result = aio(session.run("Weather in Paris?"))
    assert result.output == "18C and cloudy." and result.stop_reason is StopReason.END_TURN
    assert RAN == ["get_weather:Paris"] and result.steps == 2
    _, chained, replay = fake.bodies()  # exactly two requests for the second step
    assert chained["previous_response_id"] == "resp_1" and len(chained["input"]) == 1
    assert "previous_response_id" not in replay
    assert replay["input"] == [
        {"role": "user", "content": "Weather in Paris?"},
        reasoning(),  # verbatim, encrypted content and all: it needs no server state
        fc("call_1", "get_weather", '{"city":"Paris","unit":null}'),
        fco("call_1", '{"temp_c":18,"sky":"cloudy"}'),
    ]
    assert {**replay, "input": chained["input"], "previous_response_id": "resp_1"} == chained
    golden("fallback_replay", replay)
    [warning] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.name == LOGGER
    text = warning.getMessage()
    assert "resp_1" in text and "previous_response_not_found" in text
    assert "whole transcript (4 items)" in text
    # the replayed response was stored: the next turn chains on it
    fake.queue(ok(msg("Bye.", mid="msg_3"), rid="resp_3"))
    aio(session.run("Thanks"))
    assert fake.bodies()[3]["previous_response_id"] == "resp_2"
    assert fake.bodies()[3]["input"] == [{"role": "user", "content": "Thanks"}]


def test_a_stream_falls_back_too(fake: FakeProvider) -> None:
    model = make(fake, stateful=True)
    fake.queue(ok(fc("call_1", "get_weather", '{"city":"Oslo","unit":null}')))
    first = aio(model.respond(ModelRequest([UserMessage("Oslo?")], [get_weather])))
    transcript = [
        UserMessage("Oslo?"),
        first,
        ToolOutput("call_1", "get_weather", ToolResult('{"temp_c":3}')),
    ]
    fake.queue(not_found(), sse_for(stored(msg("3C.", mid="msg_2"), rid="resp_2")))
    *deltas, message = stream(model, ModelRequest(transcript, [get_weather]))
    assert isinstance(message, AssistantMessage) and message.text == "3C."
    assert "".join(d.text for d in deltas) == "3C."  # nothing from the refused attempt
    chained, replay = fake.bodies()[1:]
    assert chained["previous_response_id"] == "resp_1" and chained["stream"] is True
    assert "previous_response_id" not in replay and replay["stream"] is True
    assert replay["input"] == model.input_items(transcript)


def test_other_errors_are_never_retried(fake: FakeProvider) -> None:
    model = make(fake, stateful=True)
    fake.queue(ok(fc("call_1", "get_weather", '{"city":"Paris","unit":null}')))
    first = aio(model.respond(ModelRequest([UserMessage("x")], [get_weather])))
    chained = ModelRequest(
        [UserMessage("x"), first, ToolOutput("call_1", "get_weather", ToolResult("18"))],
        [get_weather],
    )
    bad_input = {
        "message": "Invalid value for 'input'.",
        "type": "invalid_request_error",
        "param": "input",
        "code": "invalid_value",
    }
    no_model = {
        "message": "The model 'gpt-9' does not exist.",
        "type": "invalid_request_error",
        "param": "model",
        "code": "model_not_found",
    }
    for error, status, raised in (
        (bad_input, 400, openai.BadRequestError),
        (no_model, 404, openai.NotFoundError),
        ({"message": "boom", "type": "server_error", "param": None, "code": None}, 500, None),
    ):
        before = len(fake.requests)
        fake.queue(Reply({"error": error}, status))
        with pytest.raises(ProviderError) as caught:  # tooldeck's kind, the SDK's as cause
            aio(model.respond(chained))
        assert isinstance(caught.value.__cause__, raised or openai.InternalServerError)
        assert len(fake.requests) - before == 1
    # the replay itself failing is the caller's error (one fallback, never a loop)
    fake.queue(not_found(), not_found())
    with pytest.raises(ProviderError) as caught:
        aio(model.respond(chained))
    assert isinstance(caught.value.__cause__, openai.NotFoundError)
    assert "previous_response_id" not in fake.bodies()[-1]
    # an unchained request is never retried, whatever the error says
    fake.queue(not_found())
    with pytest.raises(ProviderError) as caught:
        aio(model.respond(ModelRequest([UserMessage("fresh")], [get_weather])))
    assert isinstance(caught.value.__cause__, openai.NotFoundError)
    assert len(fake.requests) == 7


class MappedError(Exception):
    """Stands for a tooldeck error raised from the SDK's error around the SDK call."""


class MappingModel(OpenAIResponsesModel):
    async def _create(self, body: Any, stream: bool) -> Any:
        try:
            return await super()._create(body, stream)
        except openai.APIStatusError as exc:
            raise MappedError(f"{self.name}: {exc.message}") from exc


def test_the_fallback_sees_through_an_error_raised_from_the_sdks(fake: FakeProvider) -> None:
    model = MappingModel(
        MODEL, api_key="test", base_url=fake.url + "/v1", max_retries=0, stateful=True
    )
    fake.queue(ok(fc("call_1", "get_weather", '{"city":"Paris","unit":null}')))
    first = aio(model.respond(ModelRequest([UserMessage("x")], [get_weather])))
    request = ModelRequest(
        [UserMessage("x"), first, ToolOutput("call_1", "get_weather", ToolResult("18"))],
        [get_weather],
    )
    fake.queue(not_found(), ok(msg("18C.", mid="msg_2"), rid="resp_2"))
    assert aio(model.respond(request)).text == "18C."
    assert len(fake.requests) == 3
    fake.queue(Reply({"error": {"message": "no", "type": "x", "param": None, "code": None}}, 400))
    with pytest.raises(MappedError):
        aio(model.respond(request))
    assert len(fake.requests) == 4


def test_rejected_previous_reads_only_the_previous_response_errors() -> None:
    error = {"code": "previous_response_not_found", "param": "previous_response_id"}
    assert rejected_previous(404, {**error, "message": "gone"}) == (
        "previous_response_not_found: gone"
    )
    assert rejected_previous(400, {"error": error}) == "previous_response_not_found"
    assert rejected_previous(404, {"param": "previous_response_id", "code": None}) == "HTTP 404"
    for status, body in (
        (500, error),
        (429, error),
        (404, {"code": "model_not_found", "param": "model"}),
        (400, "Previous response not found"),
        (404, {"error": "previous_response_not_found"}),
        (404, None),
    ):
        assert rejected_previous(status, body) is None


# -- when the chain cannot be used ---------------------------------------------------------


def test_a_model_switch_replays_in_full(
    fake: FakeProvider, caplog: pytest.LogCaptureFixture
) -> None:
    fake.queue(
        ok(reasoning(), fc("call_1", "get_weather", '{"city":"Paris","unit":null}')),
        ok(reasoning("rs_2", "gAAAAB-encrypted-2"), msg("18C.", mid="msg_2"), rid="resp_2"),
    )
    session = tooldeck.Session(make(fake, stateful=True), [get_weather])
    aio(session.run("Weather in Paris?"))
    session.model = make(fake, "gpt-5.4-mini", stateful=True)
    fake.queue(
        ok(fc("call_3", "get_weather", '{"city":"Oslo","unit":null}'), rid="resp_3"),
        ok(msg("3C.", mid="msg_4"), rid="resp_4"),
    )
    with caplog.at_level(logging.INFO, LOGGER):
        aio(session.run("And Oslo?"))
    switched, mini_next = fake.bodies()[2:4]
    assert switched["model"] == "gpt-5.4-mini" and "previous_response_id" not in switched
    assert [i.get("type") for i in switched["input"]] == [
        None,  # the first prompt
        "function_call",
        "function_call_output",
        None,  # the assistant's text, without its message id
        None,
    ]
    assert all("id" not in i for i in switched["input"])  # no reasoning: no ids either
    golden("model_switch", switched)
    assert any(
        "model changed from gpt-5.4 to gpt-5.4-mini since response resp_2" in r.getMessage()
        for r in caplog.records
    )
    assert mini_next["previous_response_id"] == "resp_3"  # then the new model chains
    assert len(mini_next["input"]) == 1
    # back to the first model: the last response is the mini's, so a full replay again,
    # with the first model's own reasoning back in its place
    session.model = make(fake, stateful=True)
    fake.queue(ok(msg("Done.", mid="msg_5"), rid="resp_5"))
    aio(session.run("Thanks"))
    back = fake.bodies()[4]
    assert "previous_response_id" not in back
    assert [i["id"] for i in back["input"] if i.get("type") == "reasoning"] == ["rs_1", "rs_2"]


def edit_user(items: list[Any]) -> None:
    items[0] = UserMessage("Weather in Lyon?")


def edit_output(items: list[Any]) -> None:
    items[2] = ToolOutput("call_1", "get_weather", ToolResult('{"temp_c":-40}'))


def edit_reasoning(items: list[Any]) -> None:
    message = items[1]
    [thought] = message.opaque
    changed = OpaqueItem(
        thought.provider, thought.adapter, thought.model, "reasoning", reasoning(enc="forged")
    )
    items[1] = dataclasses.replace(message, parts=[changed, *message.parts[1:]])


def edit_answer(items: list[Any]) -> None:
    answer = items[3]
    items[3] = dataclasses.replace(answer, parts=[TextPart("It is 40C.")])


def drop_first_turn(items: list[Any]) -> None:
    del items[0:3]


def append_foreign(items: list[Any]) -> None:
    items.append(
        AssistantMessage(
            parts=[TextPart("Anthropic here.")],
            provider="anthropic",
            adapter="anthropic-messages",
            model="claude-sonnet-4-6",
        )
    )


def append_stray_output(items: list[Any]) -> None:
    items.append(ToolOutput("call_9", "get_weather", ToolResult("late")))


def strip_store(items: list[Any]) -> None:
    items[3] = dataclasses.replace(items[3], provider_data=None)


def mark_failed(items: list[Any]) -> None:
    data = {**(items[3].provider_data or {}), "status": "failed"}
    items[3] = dataclasses.replace(items[3], provider_data=data)


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        (edit_user, "changed after it was answered"),
        (edit_output, "changed after it was answered"),
        (edit_reasoning, "changed after it was answered"),
        (edit_answer, "changed after it was answered"),
        (drop_first_turn, "changed after it was answered"),
        (append_foreign, "a response from anthropic/anthropic-messages came after"),
        (append_stray_output, "the output for call_9 answers no call of response resp_2"),
        (strip_store, "was not stored"),
        (mark_failed, "is failed, not completed"),
    ],
)
def test_a_transcript_that_no_longer_matches_the_server_is_replayed(
    fake: FakeProvider, edit: Any, why: str, caplog: pytest.LogCaptureFixture
) -> None:
    fake.queue(
        ok(reasoning(), fc("call_1", "get_weather", '{"city":"Paris","unit":null}')),
        ok(msg("18C.", mid="msg_2"), rid="resp_2"),
    )
    session = tooldeck.Session(make(fake, stateful=True), [get_weather])
    aio(session.run("Weather in Paris?"))
    assert fake.bodies()[1]["previous_response_id"] == "resp_1"  # untouched: chained
    edit(session.transcript)
    fake.queue(ok(msg("Bye.", mid="msg_3"), rid="resp_3"))
    with caplog.at_level(logging.INFO, LOGGER):
        aio(session.run("Thanks"))
    body = fake.bodies()[2]
    assert "previous_response_id" not in body
    assert body["input"] == session.model.input_items(session.transcript[:-1])  # type: ignore[attr-defined]
    assert any(why in r.getMessage() for r in caplog.records), [
        r.getMessage() for r in caplog.records
    ]


def test_history_made_without_store_or_by_another_provider_is_replayed(
    fake: FakeProvider, caplog: pytest.LogCaptureFixture
) -> None:
    fake.queue(ok(fc("call_1", "get_weather", '{"city":"Paris","unit":null}')))
    unstored = aio(make(fake).respond(ModelRequest([UserMessage("Paris?")], [get_weather])))
    assert STORED_CONTEXT not in (unstored.provider_data or {})
    outputs = ToolOutput("call_1", "get_weather", ToolResult("18"))
    foreign = AssistantMessage(
        parts=[ToolCall("toolu_1", "get_weather", {"city": "Oslo", "unit": None})],
        stop_reason=StopReason.TOOL_CALLS,
        provider="anthropic",
        adapter="anthropic-messages",
        model="claude-sonnet-4-6",
    )
    model = make(fake, stateful=True)
    with caplog.at_level(logging.INFO, LOGGER):
        for transcript in (
            [UserMessage("Paris?"), unstored, outputs],
            [UserMessage("Oslo?"), foreign, ToolOutput("toolu_1", "get_weather", ToolResult("3"))],
        ):
            fake.queue(ok(msg("ok")))
            aio(model.respond(ModelRequest(transcript, [get_weather])))
            assert "previous_response_id" not in fake.bodies()[-1]
            assert fake.bodies()[-1]["input"] == model.input_items(transcript)
    messages = [r.getMessage() for r in caplog.records]
    assert any("resp_1 was not stored (it was made with store=False)" in m for m in messages)
    assert any("no earlier response from openai-responses" in m for m in messages)


def test_only_a_finished_response_is_chained_on(
    fake: FakeProvider, caplog: pytest.LogCaptureFixture
) -> None:
    model = make(fake, stateful=True)
    failed = stored(status="failed", error={"code": "server_error", "message": "boom"})
    cut = stored(
        fc("call_1", "get_weather", '{"city":"Pa', status="incomplete"),
        status="incomplete",
        reason="max_output_tokens",
        rid="resp_2",
    )
    fake.queue(Reply(failed), Reply(cut))
    first = aio(model.respond(ModelRequest([UserMessage("x")], [get_weather])))
    second = aio(model.respond(ModelRequest([UserMessage("y")], [get_weather])))
    assert first.stop_reason is StopReason.ERROR and second.stop_reason is StopReason.MAX_TOKENS
    after_failed = [UserMessage("x"), first, UserMessage("again")]
    body, _ = model.build_request(ModelRequest(after_failed, [get_weather]))
    assert "previous_response_id" not in body
    # a cut-off response is kept by the server; its call's "not executed" output follows
    not_run = ToolOutput("call_1", "get_weather", ToolResult.error("Not executed."))
    body, _ = model.build_request(ModelRequest([UserMessage("y"), second, not_run], []))
    assert body["previous_response_id"] == "resp_2" and len(body["input"]) == 1
    with caplog.at_level(logging.INFO, LOGGER):
        model.build_request(ModelRequest(after_failed, [get_weather]))
    assert "response resp_1 is failed, not completed" in caplog.text


def test_calls_renamed_for_shared_ids_are_replayed_with_their_new_ids(
    fake: FakeProvider, caplog: pytest.LogCaptureFixture
) -> None:
    fake.queue(
        ok(
            fc("call_1", "get_weather", '{"city":"Paris","unit":null}', fid="fc_a"),
            fc("call_1", "get_weather", '{"city":"Oslo","unit":null}', fid="fc_b"),
        ),
        ok(msg("Both 18C.", mid="msg_2"), rid="resp_2"),
    )
    with caplog.at_level(logging.INFO, LOGGER):
        result = run(make(fake, stateful=True), [get_weather], "Paris and Oslo?")
    assert [o.call_id for o in result.tool_outputs] == ["call_1", "call_1_2"]
    second = fake.bodies()[1]
    # chained, the server would get an output for call_1_2, a call it never made
    assert "previous_response_id" not in second
    assert [i.get("call_id") for i in second["input"][1:]] == [
        "call_1",
        "call_1_2",
        "call_1",
        "call_1_2",
    ]
    assert "gave calls shared or empty ids, renamed here (call_1_2)" in caplog.text


def test_the_callers_own_state_keys_turn_chaining_off(fake: FakeProvider) -> None:
    fake.queue(ok(fc("call_1", "get_weather", '{"city":"Paris","unit":null}')))
    model = make(fake, stateful=True)
    first = aio(model.respond(ModelRequest([UserMessage("Paris?")], [get_weather])))
    transcript = [
        UserMessage("Paris?"),
        first,
        ToolOutput("call_1", "get_weather", ToolResult("1")),
    ]
    chained, _ = model.build_request(ModelRequest(transcript, [get_weather]))
    assert chained["previous_response_id"] == "resp_1"
    for extra in ({"previous_response_id": "resp_mine"}, {"conversation": "conv_1"}):
        request = ModelRequest(transcript, [get_weather], ModelSettings(extra=extra))
        body, _ = model.build_request(request)
        assert body["input"] == model.input_items(transcript)
        assert body.get("previous_response_id") == extra.get("previous_response_id")


def test_a_reply_with_nothing_new_after_it_is_replayed(fake: FakeProvider) -> None:
    fake.queue(ok(msg("Hello.")))
    model = make(fake, stateful=True)
    first = aio(model.respond(ModelRequest([UserMessage("hi")], [])))
    body, _ = model.build_request(ModelRequest([UserMessage("hi"), first], []))
    assert "previous_response_id" not in body and len(body["input"]) == 2


# -- one adapter, many sessions; and a resume in another process ---------------------------


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(order=st.lists(st.integers(0, 2), min_size=1, max_size=8))
def test_one_adapter_serves_interleaved_sessions(fake: FakeProvider, order: list[int]) -> None:
    model = make(fake, stateful=True)  # shared: it must keep no chain state of its own
    sessions = [tooldeck.Session(model, [get_weather]) for _ in range(3)]
    last: dict[int, str] = {}
    for turn, who in enumerate(order):
        rid = f"resp_{next(RIDS)}"
        fake.queue(ok(msg(f"turn {turn}", mid=f"msg_{turn}"), rid=rid))
        aio(sessions[who].run(f"session {who} turn {turn}"))
        body = fake.bodies()[-1]
        assert body.get("previous_response_id") == last.get(who)
        assert body["input"][-1] == {"role": "user", "content": f"session {who} turn {turn}"}
        assert len(body["input"]) == 1  # unchained, a later turn would re-send 3+ items
        last[who] = rid


WRITE_TOOL = '''
from typing import Any
import tooldeck

@tooldeck.tool()
def write_note(text: str) -> str:
    """Write a note."""
    return f"noted: {text}"

def ask(tool: Any, params: Any, call: Any) -> tooldeck.PolicyDecision:
    return tooldeck.PolicyDecision("ask", "writes need approval")
'''

RESUME = """
import asyncio, json, logging, sys
from tooldeck.policy import PendingFiles
from tooldeck.providers.openai_responses import OpenAIResponsesModel
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
url, state = sys.argv[1], sys.argv[2]
model = OpenAIResponsesModel("gpt-5.4", api_key="test", base_url=url, max_retries=0,
                             stateful=True)
session = tooldeck.Session(model, [write_note], protect=tooldeck.Protection.policy(ask),
                           session_id="s1",
                           pending_store=PendingFiles(state))
result = asyncio.run(session.resume([tooldeck.ApprovalAnswer(True)]))
print(json.dumps({"output": result.output, "stop": result.stop_reason.value,
                  "outputs": [o.text for o in result.tool_outputs]}))
"""


@tool()
def write_note(text: str) -> str:
    """Write a note."""
    return f"noted: {text}"


def ask_for_writes(tool: Any, params: Any, call: Any) -> PolicyDecision:
    return PolicyDecision("ask", "writes need approval")


@pytest.mark.parametrize("server_kept_it", [True, False])
def test_a_step_resumed_in_another_process(
    fake: FakeProvider, tmp_path: Path, server_kept_it: bool
) -> None:
    async def later(requests: Any) -> Any:
        raise PendingApproval()

    fake.queue(ok(reasoning(), fc("call_1", "write_note", '{"text":"buy milk"}')))
    waiting = aio(
        tooldeck.Session(
            make(fake, stateful=True),
            [write_note],
            protect=Protection.policy(ask_for_writes, approver=later),
            session_id="s1",
            pending_store=PendingFiles(tmp_path),
        ).run("Note: buy milk")
    )
    assert waiting.waiting and len(fake.requests) == 1
    if not server_kept_it:
        fake.queue(not_found())  # expired, deleted, or another project's key
    fake.queue(ok(msg("Noted.", mid="msg_2"), rid="resp_2"))
    script = WRITE_TOOL + "\nimport tooldeck\n" + RESUME
    done = subprocess.run(
        [sys.executable, "-c", script, fake.url + "/v1", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")},
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result == {"output": "Noted.", "stop": "end_turn", "outputs": ["noted: buy milk"]}
    resumed = fake.bodies()[1:]
    assert resumed[0]["previous_response_id"] == "resp_1"  # the saved transcript proves it
    assert resumed[0]["input"] == [fco("call_1", "noted: buy milk")]
    if server_kept_it:
        assert len(resumed) == 1
        assert "previous_response_not_found" not in done.stderr
    else:
        assert len(resumed) == 2 and "previous_response_id" not in resumed[1]
        assert resumed[1]["input"] == [
            {"role": "user", "content": "Note: buy milk"},
            reasoning(),
            fc("call_1", "write_note", '{"text":"buy milk"}'),
            fco("call_1", "noted: buy milk"),
        ]
        assert re.search(r"WARNING:.*refused previous response resp_1", done.stderr)


# -- the documentation's example -----------------------------------------------------------


def test_the_docs_example_runs(fake: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (ROOT / "docs" / "providers.md").read_text()
    section = text.split("## Stateful Responses", 1)[1].split("\n## ", 1)[0]
    [block] = re.findall(r"```python\n(.*?)```", section, re.S)
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    monkeypatch.setenv("OPENAI_BASE_URL", fake.url + "/v1")
    fake.queue(
        ok(fc("call_1", "get_weather", '{"city":"Paris"}')),
        ok(msg("18C and cloudy.", mid="msg_2"), rid="resp_2"),
        ok(msg("You're welcome.", mid="msg_3"), rid="resp_3"),
    )
    exec(compile(textwrap.dedent(block), "docs/providers.md", "exec"), {"__name__": "docs"})
    bodies = fake.bodies()
    assert [b.get("previous_response_id") for b in bodies] == [None, "resp_1", "resp_2"]
    assert [b["input"] for b in bodies[1:]] == [
        [fco("call_1", "18C, cloudy")],
        [{"role": "user", "content": "Thanks!"}],
    ]
