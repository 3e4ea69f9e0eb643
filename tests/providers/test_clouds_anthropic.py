"""Claude on Amazon Bedrock and Google Vertex AI, over real HTTP against local servers.

The official ``AsyncAnthropicBedrock`` / ``AsyncAnthropicVertex`` clients talk to
``fake_provider`` at the cloud's own paths (Bedrock ``/model/{id}/invoke`` and
``/invoke-with-response-stream`` with AWS's binary event stream; Vertex
``...:rawPredict`` / ``:streamRawPredict`` with SSE) and sign requests the cloud's way:
SigV4 from fake AWS credentials in the environment, or a Bearer token that google-auth
fetches from the local server's token endpoint with a credentials file that points there.
The scenarios are the Anthropic adapter's: parallel calls, malformed arguments, refusal,
truncation, reasoning replay, streaming, errors.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs

import pytest
from anthropic import AsyncAnthropicBedrock, AsyncAnthropicVertex

import tooldeck
from tooldeck import ModelRequest, Session, StopReason
from tooldeck.errors import AuthenticationFailed, MissingCredentials, ModelConfigError
from tooldeck.providers import model_from_string
from tooldeck.providers.anthropic import AnthropicModel
from tooldeck.transcript import AssistantMessage, UserMessage

from .fake_server import SSE, EventStream, FakeProvider, Reply
from .test_anthropic import (
    RAN,
    THINKING,
    _block_start,
    _json,
    _message_delta,
    _start,
    _stop,
    _text,
    get_weather,
    msg,
    text,
    tool_use,
    write_file,
)

T = TypeVar("T")
BEDROCK_MODEL = "anthropic.claude-sonnet-4-6-v1:0"
VERTEX_MODEL = "claude-sonnet-4-6@20260101"
TOKEN = "ya29.local-access-token"
CLOUDS = ["bedrock", "vertex"]
_KEYS: dict[str, Any] = {}


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """No real credential of this machine is read, and nothing probes a metadata server."""
    from anthropic.lib.aws._auth import _get_session

    _get_session.cache_clear()  # the SDK keeps one boto3 session (and its credentials)
    RAN.clear()
    for var in (
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_BEARER_TOKEN_BEDROCK",
        "AWS_SESSION_TOKEN",
        "ANTHROPIC_BEDROCK_BASE_URL",
        "ANTHROPIC_VERTEX_BASE_URL",
        "GOOGLE_CLOUD_PROJECT",
        "TOOLDECK_BASE_URL",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("NO_GCE_CHECK", "True")
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "no-gcloud"))
    yield


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake AWS credentials, read by boto3's chain from the environment."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDLOCALTEST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "local-secret")
    monkeypatch.setenv("AWS_REGION", "us-east-1")


@pytest.fixture(scope="module")
def service_key() -> tuple[str, Any]:
    """A freshly made RSA key pair for a local service account (PEM text, public key)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    _KEYS["public"] = key.public_key()
    return pem, key.public_key()


@pytest.fixture
def gcp(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    fake_provider: FakeProvider,
    service_key: tuple[str, Any],
) -> None:
    """A service-account credentials file whose token endpoint is the local server."""
    creds = tmp_path / "service-account.json"
    creds.write_text(
        json.dumps(
            {
                "type": "service_account",
                "project_id": "local-project",
                "private_key_id": "local-key-1",
                "private_key": service_key[0],
                "client_email": "agent@local-project.iam.gserviceaccount.com",
                "client_id": "1234567890",
                "token_uri": f"{fake_provider.url}/token",
            }
        )
    )
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(creds))
    monkeypatch.setenv("CLOUD_ML_REGION", "us-east5")
    monkeypatch.setenv("ANTHROPIC_VERTEX_PROJECT_ID", "local-project")
    fake_provider.queue(Reply({"access_token": TOKEN, "expires_in": 3600, "token_type": "Bearer"}))


def arun(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def cloud_model(cloud: str, fake: FakeProvider, **options: Any) -> AnthropicModel:
    """The adapter on a cloud client the user built, pointed at the local server."""
    if cloud == "bedrock":
        client: Any = AsyncAnthropicBedrock(base_url=fake.url, max_retries=0)
        return AnthropicModel(BEDROCK_MODEL, client=client, **options)
    client = AsyncAnthropicVertex(base_url=fake.url, max_retries=0)
    return AnthropicModel(VERTEX_MODEL, client=client, **options)


@pytest.fixture(params=CLOUDS)
def cloud(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    request.getfixturevalue("aws" if name == "bedrock" else "gcp")
    return name


def calls(fake: FakeProvider) -> list[Any]:
    """The Messages requests (the token request, if any, left out)."""
    return [r for r in fake.requests if r.path != "/token"]


def check_wire(cloud: str, fake: FakeProvider, *, stream: bool = False) -> None:
    """Each request went to the cloud's path, signed the cloud's way, in its body shape."""
    for recorded in calls(fake):
        body, headers = recorded.body, recorded.headers
        assert "model" not in body and body["anthropic_version"]
        assert "x-api-key" not in headers
        if cloud == "bedrock":
            end = "invoke-with-response-stream" if stream else "invoke"
            assert recorded.path == f"/model/{BEDROCK_MODEL}/{end}"
            auth = headers["authorization"]
            assert auth.startswith("AWS4-HMAC-SHA256 Credential=AKIDLOCALTEST/")
            assert "/us-east-1/bedrock/aws4_request" in auth and "Signature=" in auth
            assert headers["x-amz-date"]
            assert "stream" not in body
        else:
            verb = "streamRawPredict" if stream else "rawPredict"
            assert recorded.path == (
                "/projects/local-project/locations/us-east5/publishers/anthropic/models/"
                f"{VERTEX_MODEL}:{verb}"
            )
            assert headers["authorization"] == f"Bearer {TOKEN}"
            assert body.get("stream", False) is stream
    if cloud == "vertex":
        token = [r for r in fake.requests if r.path == "/token"]
        assert len(token) == 1  # fetched once, then reused
        form = parse_qs(token[0].body)
        assert form["grant_type"] == ["urn:ietf:params:oauth:grant-type:jwt-bearer"]
        check_assertion(form["assertion"][0], fake)


def check_assertion(jwt: str, fake: FakeProvider) -> None:
    """google-auth's signed JWT: RS256 over header.claims, for the cloud-platform scope."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    def part(text: str) -> bytes:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))

    header, claims, signature = jwt.split(".")
    assert json.loads(part(header))["alg"] == "RS256"
    body = json.loads(part(claims))
    assert body["iss"] == "agent@local-project.iam.gserviceaccount.com"
    assert body["aud"] == "https://oauth2.googleapis.com/token"  # what google-auth signs for
    assert "cloud-platform" in body["scope"]
    public = _KEYS["public"]
    public.verify(
        part(signature), f"{header}.{claims}".encode(), padding.PKCS1v15(), hashes.SHA256()
    )


def streamed(cloud: str, *events: dict[str, Any]) -> SSE | EventStream:
    if cloud == "bedrock":
        return EventStream(list(events))
    return SSE([(e["type"], e) for e in events])


# -- the scenarios ----------------------------------------------------------------------------


def test_parallel_calls_turn(cloud: str, fake_provider: FakeProvider) -> None:
    fake_provider.queue(
        Reply(
            msg(
                tool_use("toolu_01", "get_weather", {"city": "Paris"}),
                tool_use("toolu_02", "get_weather", {"city": "London"}),
            )
        ),
        Reply(msg(text("Both are 18°C."), stop="end_turn", id="msg_002")),
    )
    result = arun(tooldeck.run(cloud_model(cloud, fake_provider), [get_weather], "Both?"))

    assert result.output == "Both are 18°C." and result.steps == 2
    assert sorted(RAN) == [("get_weather", "London"), ("get_weather", "Paris")]
    second = calls(fake_provider)[1].body["messages"]
    assert [(b["type"], b["tool_use_id"]) for b in second[2]["content"]] == [
        ("tool_result", "toolu_01"),
        ("tool_result", "toolu_02"),
    ]
    check_wire(cloud, fake_provider)


def test_malformed_arguments_go_back_as_an_error_result(
    cloud: str, fake_provider: FakeProvider
) -> None:
    fake_provider.queue(
        Reply(msg(tool_use("toolu_01", "get_weather", {"town": "Paris"}))),
        Reply(msg(text("Understood."), stop="end_turn", id="msg_002")),
    )
    result = arun(tooldeck.run(cloud_model(cloud, fake_provider), [get_weather], "Weather?"))
    assert RAN == [] and result.output == "Understood."
    block = calls(fake_provider)[1].body["messages"][2]["content"][0]
    assert block["is_error"] is True and "city" in json.dumps(block["content"])
    check_wire(cloud, fake_provider)


def test_refusal_runs_nothing_and_keeps_only_the_category(
    cloud: str, fake_provider: FakeProvider
) -> None:
    fake_provider.queue(
        Reply(
            msg(
                text("I can't help with that exploit."),
                tool_use("toolu_01", "write_file", {"path": "x.py", "content": "..."}),
                stop="refusal",
                stop_details={"type": "refusal", "category": "cyber", "explanation": "malware"},
            )
        )
    )
    result = arun(Session(cloud_model(cloud, fake_provider), [write_file]).run("Exploit?"))
    assert RAN == [] and result.stop_reason is StopReason.REFUSAL
    last = result.last_message
    assert last is not None and last.refusal == "refusal:cyber" and last.text == ""
    check_wire(cloud, fake_provider)


def test_truncated_call_is_never_executed(cloud: str, fake_provider: FakeProvider) -> None:
    fake_provider.queue(
        Reply(msg(tool_use("toolu_01", "write_file", {"path": "n.txt"}), stop="max_tokens"))
    )
    result = arun(tooldeck.run(cloud_model(cloud, fake_provider), [write_file], "Write."))
    assert RAN == [] and result.stop_reason is StopReason.MAX_TOKENS
    last = result.last_message
    assert last is not None and [c.incomplete for c in last.tool_calls] == [True]
    assert len(calls(fake_provider)) == 1
    check_wire(cloud, fake_provider)


def test_thinking_is_replayed_verbatim(cloud: str, fake_provider: FakeProvider) -> None:
    fake_provider.queue(
        Reply(msg(THINKING, tool_use("toolu_01", "get_weather", {"city": "Paris"}))),
        Reply(msg(text("18°C."), stop="end_turn", id="msg_002")),
    )
    m = cloud_model(cloud, fake_provider, thinking={"type": "enabled", "budget_tokens": 2048})
    result = arun(tooldeck.run(m, [get_weather], "Weather?"))
    assert result.output == "18°C."
    first, second = (r.body for r in calls(fake_provider))
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert second["messages"][1]["content"][0] == THINKING
    check_wire(cloud, fake_provider)


def test_streaming_assembles_the_same_message(cloud: str, fake_provider: FakeProvider) -> None:
    events = [
        _start(),
        _block_start(0, {"type": "text", "text": ""}),
        _text(0, "Checking."),
        _stop(0),
        _block_start(1, tool_use("toolu_01", "get_weather", {})),
        _json(1, '{"city": '),
        _json(1, '"Paris"}'),
        _stop(1),
        _message_delta("tool_use", 60),
        {"type": "message_stop"},
    ]
    fake_provider.queue(streamed(cloud, *events))
    m = cloud_model(cloud, fake_provider)
    request = ModelRequest([UserMessage("Paris?")], [get_weather])

    async def collect() -> list[Any]:
        return [x async for x in m.stream(request)]

    *deltas, final = arun(collect())
    assert isinstance(final, AssistantMessage)
    assert final.text == "Checking." and final.stop_reason is StopReason.TOOL_CALLS
    assert final.tool_calls[0].arguments == {"city": "Paris"}
    assert [d.kind for d in deltas] == ["text", "tool_call_start", "tool_call", "tool_call"]
    check_wire(cloud, fake_provider, stream=True)


def test_an_error_frame_inside_a_bedrock_stream_is_a_typed_error(
    aws: None, fake_provider: FakeProvider
) -> None:
    fake_provider.queue(
        EventStream([_start()], exception=("throttlingException", "Too many requests"))
    )
    m = cloud_model("bedrock", fake_provider)

    async def drain() -> None:
        async for _ in m.stream(ModelRequest([UserMessage("hi")], [])):
            pass

    with pytest.raises(tooldeck.errors.ProviderError, match="Claude on Amazon Bedrock"):
        arun(drain())


def test_a_refused_signature_names_the_cloud_credentials(
    cloud: str, fake_provider: FakeProvider
) -> None:
    fake_provider.queue(
        Reply({"message": "The security token included in the request is invalid."}, 403)
    )
    with pytest.raises(AuthenticationFailed) as caught:
        arun(tooldeck.run(cloud_model(cloud, fake_provider), [], "hi"))
    line = str(caught.value)
    assert "\n" not in line
    if cloud == "bedrock":
        assert line.startswith("Claude on Amazon Bedrock model") and "AWS_ACCESS_KEY_ID" in line
    else:
        assert line.startswith("Claude on Google Vertex AI model")
        assert "GOOGLE_APPLICATION_CREDENTIALS" in line


# -- model strings and missing configuration ------------------------------------------------


def test_model_strings_read_the_documented_environment(
    aws: None, gcp: None, fake_provider: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    # after the token reply the gcp fixture queued: Vertex asks first, then Bedrock
    fake_provider.queue(
        Reply(msg(text("from Vertex"), stop="end_turn")),
        Reply(msg(text("from Bedrock"), stop="end_turn")),
    )
    monkeypatch.setenv("ANTHROPIC_BEDROCK_BASE_URL", fake_provider.url)
    monkeypatch.setenv("ANTHROPIC_VERTEX_BASE_URL", fake_provider.url)
    bedrock = model_from_string(f"bedrock:{BEDROCK_MODEL}", max_retries=0)
    vertex = model_from_string(f"vertex:{VERTEX_MODEL}", max_retries=0)
    assert isinstance(bedrock, AnthropicModel) and isinstance(vertex, AnthropicModel)

    async def both() -> tuple[str, str]:
        async with bedrock, vertex:
            v = await tooldeck.run(vertex, [], "hi")
            b = await tooldeck.run(bedrock, [], "hi")
            return b.output, v.output

    assert arun(both()) == ("from Bedrock", "from Vertex")
    paths = [r.path for r in fake_provider.requests]
    assert paths[0] == "/token"
    assert any(p.endswith(":rawPredict") for p in paths)
    assert f"/model/{BEDROCK_MODEL}/invoke" in paths


def test_missing_aws_credentials_is_one_line(
    fake_provider: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY", raising=False)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    m = model_from_string(f"bedrock:{BEDROCK_MODEL}", base_url=fake_provider.url)
    with pytest.raises(MissingCredentials) as caught:
        arun(tooldeck.run(m, [], "hi"))
    line = str(caught.value)
    assert "\n" not in line and "AWS_ACCESS_KEY_ID" in line and "AWS_PROFILE" in line
    assert fake_provider.requests == []  # nothing unsigned was sent


def test_missing_google_credentials_is_one_line(
    fake_provider: FakeProvider, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    monkeypatch.setenv("CLOUD_ML_REGION", "us-east5")
    monkeypatch.setenv("ANTHROPIC_VERTEX_PROJECT_ID", "local-project")
    m = model_from_string(f"vertex:{VERTEX_MODEL}", base_url=fake_provider.url)
    with pytest.raises(MissingCredentials, match="GOOGLE_APPLICATION_CREDENTIALS") as caught:
        arun(tooldeck.run(m, [], "hi"))
    assert "\n" not in str(caught.value)
    assert fake_provider.requests == []


def test_missing_region_is_one_line_when_the_model_is_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.delenv("CLOUD_ML_REGION", raising=False)
    with pytest.raises(ModelConfigError, match="AWS_REGION") as bedrock:
        model_from_string(f"bedrock:{BEDROCK_MODEL}")
    with pytest.raises(ModelConfigError, match="CLOUD_ML_REGION") as vertex:
        model_from_string(f"vertex:{VERTEX_MODEL}")
    for caught in (bedrock, vertex):
        assert "\n" not in str(caught.value)


def test_the_cli_says_what_is_missing_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from tooldeck.cli import app

    monkeypatch.delenv("CLOUD_ML_REGION", raising=False)
    result = CliRunner().invoke(app, ["demo", "--model", f"vertex:{VERTEX_MODEL}"])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: Claude on Google Vertex AI model")
    assert "CLOUD_ML_REGION" in lines[0]
