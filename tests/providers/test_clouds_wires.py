"""The enterprise clouds through the streamed-turn scenarios, over real HTTP.

Claude on Bedrock (AWS's binary event stream at ``invoke-with-response-stream``, SigV4
from fake AWS credentials in the environment) and on Vertex AI (SSE at
``:streamRawPredict``, a Bearer access token), and OpenAI on Azure (the Responses API at
``/openai/responses`` and Chat Completions at ``/openai/deployments/{name}/...``, the
``api-key`` header) run the scenarios of ``test_streamed_turns``: reasoning, text and
parallel calls in order; a refusal mid-stream; a response cut off inside a call; a
cancelled tool call; continuing after a cut-off. The replies are built by the same wire
builders (a Bedrock stream carries the same events, framed the AWS way), and every
request is checked for the cloud's path and authentication. Malformed arguments and
reasoning replay are checked per cloud below; the google-auth token flow and model
strings are in ``test_clouds_anthropic``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from anthropic import AsyncAnthropicBedrock, AsyncAnthropicVertex
from openai import AsyncAzureOpenAI

import tooldeck
from tooldeck.model import Model
from tooldeck.providers import model_from_string
from tooldeck.providers.anthropic import AnthropicModel
from tooldeck.providers.chat_completions import ChatCompletionsModel
from tooldeck.providers.openai_responses import OpenAIResponsesModel

from . import test_anthropic as an
from . import test_chat_completions as cc
from . import test_openai_responses as oa
from . import test_streamed_turns as st
from .fake_server import EventStream, FakeProvider, Recorded, Reply

BEDROCK_MODEL = "anthropic.claude-sonnet-4-6-v1:0"
VERTEX_MODEL = "claude-sonnet-4-6@20260101"
DEPLOYMENT = "gpt-54-prod"
API_VERSION = "2025-04-01-preview"
VERTEX_TOKEN = "ya29.local-access-token"


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    from anthropic.lib.aws._auth import _get_session

    _get_session.cache_clear()
    for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_BEARER_TOKEN_BEDROCK"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDLOCALTEST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "local-secret")
    st.RAN.clear()
    yield


class Bedrock(st.Anthropic):
    id = "bedrock"

    def __init__(self) -> None:
        super().__init__()
        self.stream_keys = {}  # Bedrock says "stream" in the path, not the body

    def model(self, fake: FakeProvider) -> Model:
        client = AsyncAnthropicBedrock(base_url=fake.url, aws_region="us-east-1", max_retries=0)
        return AnthropicModel(BEDROCK_MODEL, client=client)

    def sse(self, step: st.Step, n: int) -> Any:
        return EventStream([event for _, event in super().sse(step, n).events])

    def check(self, recorded: Recorded) -> None:
        assert recorded.path in (
            f"/model/{BEDROCK_MODEL}/invoke",
            f"/model/{BEDROCK_MODEL}/invoke-with-response-stream",
        )
        auth = recorded.headers["authorization"]
        assert auth.startswith("AWS4-HMAC-SHA256 Credential=AKIDLOCALTEST/")
        assert "/us-east-1/bedrock/aws4_request" in auth and recorded.headers["x-amz-date"]
        assert "model" not in recorded.body and recorded.body["anthropic_version"]


class Vertex(st.Anthropic):
    id = "vertex"

    def model(self, fake: FakeProvider) -> Model:
        client = AsyncAnthropicVertex(
            base_url=fake.url,
            region="us-east5",
            project_id="local-project",
            access_token=VERTEX_TOKEN,
            max_retries=0,
        )
        return AnthropicModel(VERTEX_MODEL, client=client)

    def check(self, recorded: Recorded) -> None:
        base = (
            f"/projects/local-project/locations/us-east5/publishers/anthropic/models/{VERTEX_MODEL}"
        )
        assert recorded.path in (f"{base}:rawPredict", f"{base}:streamRawPredict")
        assert recorded.headers["authorization"] == f"Bearer {VERTEX_TOKEN}"
        assert "model" not in recorded.body and recorded.body["anthropic_version"]


def _azure(fake: FakeProvider) -> AsyncAzureOpenAI:
    return AsyncAzureOpenAI(
        azure_endpoint=fake.url, api_key="az-local-key", api_version=API_VERSION, max_retries=0
    )


def _check_azure(recorded: Recorded, path: str) -> None:
    assert recorded.path == f"{path}?api-version={API_VERSION}"
    assert recorded.headers["api-key"] == "az-local-key"
    assert "authorization" not in recorded.headers
    assert recorded.body["model"] == DEPLOYMENT


class AzureResponses(st.Responses):
    id = "azure-responses"

    def model(self, fake: FakeProvider) -> Model:
        return OpenAIResponsesModel(DEPLOYMENT, client=_azure(fake))

    def check(self, recorded: Recorded) -> None:
        _check_azure(recorded, "/openai/responses")


class AzureChat(st.Chat):
    id = "azure-chat"

    def __init__(self) -> None:
        super().__init__("openai")

    def model(self, fake: FakeProvider) -> Model:
        return ChatCompletionsModel(DEPLOYMENT, client=_azure(fake))

    def check(self, recorded: Recorded) -> None:
        _check_azure(recorded, f"/openai/deployments/{DEPLOYMENT}/chat/completions")


CLOUD_WIRES = [Bedrock(), Vertex(), AzureResponses(), AzureChat()]
by_cloud = pytest.mark.parametrize("wire", CLOUD_WIRES, ids=lambda w: w.id)


def checked(fake: FakeProvider, wire: Any) -> None:
    assert fake.requests
    for recorded in fake.requests:
        wire.check(recorded)


# -- the streamed-turn scenarios ----------------------------------------------------------


@by_cloud
def test_reasoning_text_and_parallel_calls_in_order(fake_provider: FakeProvider, wire: Any) -> None:
    st.test_events_in_order_with_reasoning_text_and_parallel_calls(fake_provider, wire)
    checked(fake_provider, wire)


@by_cloud
def test_refusal_mid_stream(fake_provider: FakeProvider, wire: Any) -> None:
    st.test_refusal_mid_stream_runs_nothing_and_keeps_no_text(fake_provider, wire)
    checked(fake_provider, wire)


@by_cloud
def test_truncated_inside_a_call(fake_provider: FakeProvider, wire: Any) -> None:
    st.test_a_response_cut_off_inside_a_call_runs_none_of_its_calls(fake_provider, wire)
    checked(fake_provider, wire)


@by_cloud
def test_cancelled_tool_call(fake_provider: FakeProvider, wire: Any) -> None:
    st.test_cancel_during_a_tool_call_one_output_per_call_and_a_valid_next_request(
        fake_provider, wire
    )
    checked(fake_provider, wire)


@by_cloud
def test_continue_after_a_cut_off(fake_provider: FakeProvider, wire: Any) -> None:
    st.test_continue_after_a_cut_off_with_a_larger_limit(fake_provider, wire)
    checked(fake_provider, wire)


@by_cloud
def test_stream_and_run_send_the_same_bodies_and_replay_reasoning(
    fake_provider: FakeProvider, wire: Any
) -> None:
    streamed = st.turn(wire, fake_provider, [st.FIRST, st.LAST])
    ran = st.turn(wire, fake_provider, [st.FIRST, st.LAST], streamed=False)
    assert streamed.session.transcript == ran.session.transcript
    sent = fake_provider.requests
    for s, r in zip(sent[:2], sent[2:], strict=True):
        extra = {k: v for k, v in s.body.items() if k not in r.body}
        assert extra == wire.stream_keys
        assert {k: v for k, v in s.body.items() if k not in extra} == r.body
    if wire.reasons:  # the reasoning of step one goes back, verbatim, in step two
        second = json.dumps(sent[1].body)
        assert ("gAAAA-1" if wire.id == "azure-responses" else "sig1") in second
    checked(fake_provider, wire)


# -- malformed arguments -------------------------------------------------------------------


def _malformed(wire: Any) -> Reply:
    bad = '{"city": "Paris", "unit": celsius}'  # not JSON
    if isinstance(wire, st.Anthropic):
        return Reply(an.msg(an.tool_use("call_1", "get_weather", {"town": "Paris"})))
    if isinstance(wire, st.Responses):
        return Reply(oa.response(oa.fc("call_1", "get_weather", bad)))
    return Reply(cc.completion(calls=[cc.fn_call("call_1", "get_weather", bad)]))


@by_cloud
def test_malformed_arguments_go_back_as_an_error_result(
    fake_provider: FakeProvider, wire: Any
) -> None:
    fake_provider.queue(_malformed(wire), wire.reply(st.Step(text="Understood."), 2))
    model = wire.model(fake_provider)

    async def main() -> Any:
        try:
            return await tooldeck.run(model, st.TOOLS, "Weather?")
        finally:
            await model.client.close()

    result = asyncio.run(main())
    assert result.output == "Understood." and st.RAN == []
    assert result.tool_outputs[0].is_error
    calls, outputs = wire.answered(fake_provider.bodies()[1])
    assert calls == outputs == ["call_1"]
    checked(fake_provider, wire)


# -- Azure model strings -------------------------------------------------------------------


def test_azure_model_strings_read_the_documented_environment(
    fake_provider: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", fake_provider.url)
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "az-local-key")
    monkeypatch.setenv("OPENAI_API_VERSION", API_VERSION)
    monkeypatch.delenv("AZURE_OPENAI_AD_TOKEN", raising=False)
    responses = AzureResponses()
    chat = AzureChat()
    fake_provider.queue(
        responses.reply(st.Step(text="from Responses"), 1),
        chat.reply(st.Step(text="from Chat"), 2),
    )

    async def main() -> tuple[str, str]:
        async with (
            model_from_string(f"azure:{DEPLOYMENT}", max_retries=0) as r,  # type: ignore[attr-defined]
            model_from_string(f"azure-chat:{DEPLOYMENT}", max_retries=0) as c,  # type: ignore[attr-defined]
        ):
            assert isinstance(r, OpenAIResponsesModel) and isinstance(c, ChatCompletionsModel)
            return (
                (await tooldeck.run(r, [], "hi")).output,
                (await tooldeck.run(c, [], "hi")).output,
            )

    assert asyncio.run(main()) == ("from Responses", "from Chat")
    first, second = fake_provider.requests
    responses.check(first)
    chat.check(second)


def test_azure_without_a_key_or_endpoint_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("AZURE_OPENAI_API_KEY", "AZURE_OPENAI_AD_TOKEN", "AZURE_OPENAI_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_API_VERSION", API_VERSION)
    with pytest.raises(tooldeck.errors.MissingCredentials, match="AZURE_OPENAI_API_KEY") as key:
        model_from_string(f"azure:{DEPLOYMENT}")
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "k")
    with pytest.raises(tooldeck.errors.ModelConfigError, match="AZURE_OPENAI_ENDPOINT") as url:
        model_from_string(f"azure-chat:{DEPLOYMENT}")
    for caught in (key, url):
        assert "\n" not in str(caught.value)


def test_an_azure_rejection_names_the_azure_key(fake_provider: FakeProvider) -> None:
    fake_provider.queue(Reply({"error": {"code": "401", "message": "Access denied"}}, 401))
    model = OpenAIResponsesModel(DEPLOYMENT, client=_azure(fake_provider))
    with pytest.raises(tooldeck.errors.AuthenticationFailed) as caught:
        asyncio.run(tooldeck.run(model, [], "hi"))
    assert str(caught.value).startswith(f"Azure OpenAI model {DEPLOYMENT!r}")
    assert "AZURE_OPENAI_API_KEY" in str(caught.value)
