"""GeminiModel's set-up and failures, over real HTTP: model strings and the key, the
errors a user can act on (each one line), structured output, Gemini on Vertex AI."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from typing import Any

import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as gt
from google.oauth2.credentials import Credentials
from pydantic import BaseModel

import tooldeck
from tooldeck import ModelSettings, StopReason
from tooldeck.errors import (
    AuthenticationFailed,
    ContextTooLong,
    MissingCredentials,
    ModelConfigError,
    ModelNotFound,
    ProviderError,
    ProviderTimeout,
    ProviderUnreachable,
    RateLimited,
    SchemaError,
)
from tooldeck.providers import GeminiModel, model_from_string

from . import test_streamed_turns as st
from .fake_server import SSE, FakeProvider, Reply
from .gemini_wire import MODEL, Gemini, chunk, response
from .test_clouds_anthropic import TOKEN, gcp, service_key  # noqa: F401 (fixtures)

WIRE = Gemini()


@pytest.fixture
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "TOOLDECK_BASE_URL"):
        monkeypatch.delenv(var, raising=False)


# -- model strings and the key ----------------------------------------------------------------


@pytest.mark.usefixtures("no_keys")
def test_without_a_key_is_one_line_naming_both_variables() -> None:
    with pytest.raises(MissingCredentials) as caught:
        model_from_string(f"gemini:{MODEL}")
    assert str(caught.value) == (
        f"Gemini model {MODEL!r}: no API key; set GEMINI_API_KEY or GOOGLE_API_KEY "
        "(or pass api_key=)"
    )


@pytest.mark.usefixtures("no_keys")
@pytest.mark.parametrize("variable", ["GEMINI_API_KEY", "GOOGLE_API_KEY"])
def test_the_model_string_reads_the_key_and_the_address(
    fake_provider: FakeProvider, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    monkeypatch.setenv(variable, "env-key")
    monkeypatch.setenv("TOOLDECK_BASE_URL", fake_provider.url)
    fake_provider.queue(WIRE.reply(st.Step(text="hello"), 1))
    model = model_from_string(f"gemini:{MODEL}", max_retries=0)
    assert isinstance(model, GeminiModel) and model.name == f"gemini-generate-content:{MODEL}"

    async def main() -> str:
        async with model:
            return (await tooldeck.run(model, [], "hi")).output

    assert asyncio.run(main()) == "hello"
    assert fake_provider.requests[0].headers["x-goog-api-key"] == "env-key"


# -- errors ------------------------------------------------------------------------------------


def _error(status: int, message: str, state: str) -> Reply:
    return Reply({"error": {"code": status, "message": message, "status": state}}, status)


def _ask(fake: FakeProvider, *, stream: bool = False) -> Any:
    model = WIRE.model(fake)

    async def main() -> Any:
        async with model:
            if stream:
                session = tooldeck.Session(model, [])
                return [e async for e in session.stream("hi")]
            return await tooldeck.run(model, [], "hi")

    return asyncio.run(main())


@pytest.mark.parametrize(
    ("reply", "kind", "says"),
    [
        (
            _error(429, "Resource has been exhausted (e.g. check quota).", "RESOURCE_EXHAUSTED"),
            RateLimited,
            "rate limited",
        ),
        (
            _error(
                400,
                "The input token count (1200000) exceeds the maximum number of tokens "
                "allowed (1048576).",
                "INVALID_ARGUMENT",
            ),
            ContextTooLong,
            "longer than the model's context window",
        ),
        (
            _error(403, "Method doesn't allow unregistered callers.", "PERMISSION_DENIED"),
            AuthenticationFailed,
            "GEMINI_API_KEY or GOOGLE_API_KEY",
        ),
        (
            _error(404, f"models/{MODEL} is not found for API version v1", "NOT_FOUND"),
            ModelNotFound,
            "no such model",
        ),
    ],
)
@pytest.mark.parametrize("stream", [False, True])
def test_error_answers_are_one_line_kinds(
    fake_provider: FakeProvider, reply: Reply, kind: type[ProviderError], says: str, stream: bool
) -> None:
    fake_provider.queue(reply)
    with pytest.raises(kind) as caught:
        _ask(fake_provider, stream=stream)
    text = str(caught.value)
    assert text.startswith(f"Gemini model {MODEL!r}: ") and says in text and "\n" not in text
    assert isinstance(caught.value.__cause__, genai_errors.APIError)


def test_an_error_inside_the_stream_ends_the_turn(fake_provider: FakeProvider) -> None:
    overloaded = {
        "error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}
    }
    fake_provider.queue(SSE([(None, chunk({"text": "Par"})), (None, overloaded)]))
    with pytest.raises(ProviderError, match="overloaded") as caught:
        _ask(fake_provider, stream=True)
    assert caught.value.status == 503


@pytest.mark.parametrize("stream", [False, True])
def test_connection_refused(stream: bool) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    model = GeminiModel(MODEL, api_key="k", base_url=f"http://127.0.0.1:{port}", max_retries=0)

    async def main() -> None:
        async with model:
            if stream:
                async for _ in tooldeck.Session(model, []).stream("hi"):
                    pass
            else:
                await tooldeck.run(model, [], "hi")

    with pytest.raises(ProviderUnreachable, match="connection refused") as caught:
        asyncio.run(main())
    assert str(caught.value).startswith(f"Gemini model {MODEL!r}: cannot connect to ")


# -- structured output ---------------------------------------------------------------------------


class Weather(BaseModel):
    city: str
    temp_c: int
    note: str | None = None


@pytest.mark.parametrize("stream", [False, True])
def test_structured_output_sends_the_json_schema_and_validates(
    fake_provider: FakeProvider, stream: bool
) -> None:
    answer = '{"city": "Paris", "temp_c": 18}'
    fake_provider.queue(
        SSE(
            [
                (None, chunk({"text": answer[:10]})),
                (None, chunk({"text": answer[10:]}, finishReason="STOP")),
            ]
        )
        if stream
        else Reply(response({"text": answer}))
    )
    model = WIRE.model(fake_provider)

    async def main() -> Any:
        async with model:
            session = tooldeck.Session(model, [], settings=ModelSettings(output_type=Weather))
            if stream:
                run = session.stream("Weather in Paris?")
                async for _ in run:
                    pass
                return run.result
            return await session.run("Weather in Paris?")

    result = asyncio.run(main())
    assert result.structured == Weather(city="Paris", temp_c=18)
    config = fake_provider.bodies()[0]["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert config["responseJsonSchema"]["required"] == ["city", "temp_c"]
    assert "title" in config["responseJsonSchema"] or "properties" in config["responseJsonSchema"]
    gt.GenerationConfig.model_validate(config)


def test_an_answer_that_does_not_validate_is_sent_back(fake_provider: FakeProvider) -> None:
    fake_provider.queue(
        Reply(response({"text": '{"city": "Paris"}'})),
        Reply(response({"text": '{"city": "Paris", "temp_c": 18}'}, n=2)),
    )
    model = WIRE.model(fake_provider)

    async def main() -> Any:
        async with model:
            return await tooldeck.run(
                model, [], "Weather?", settings=ModelSettings(output_type=Weather)
            )

    result = asyncio.run(main())
    assert result.structured == Weather(city="Paris", temp_c=18)
    retry = fake_provider.bodies()[1]["contents"][-1]["parts"][-1]["text"]
    assert "temp_c" in retry


def test_an_output_schema_without_an_object_root_fails_before_any_request(
    fake_provider: FakeProvider,
) -> None:
    model = WIRE.model(fake_provider)
    settings = ModelSettings(output_type={"type": "array", "items": {"type": "string"}})
    with pytest.raises(SchemaError, match="object root"):
        asyncio.run(tooldeck.run(model, [], "hi", settings=settings))
    assert fake_provider.requests == []


# -- Gemini on Vertex AI -------------------------------------------------------------------------


def test_a_vertex_client_speaks_the_vertex_path_with_a_bearer_token(
    fake_provider: FakeProvider,
) -> None:
    client = genai.Client(
        vertexai=True,
        project="local-project",
        location="us-central1",
        credentials=Credentials(token="ya29.local-token"),
        http_options=gt.HttpOptions(base_url=fake_provider.url),
    )
    fake_provider.queue(
        WIRE.reply(st.Step(text="from Vertex"), 1),
        WIRE.sse(st.LAST, 2),
        _error(401, "Request had invalid authentication credentials.", "UNAUTHENTICATED"),
    )
    model = GeminiModel(MODEL, client=client)

    async def main() -> list[str]:
        session = tooldeck.Session(model, [])
        said = [(await session.run("hi")).output]
        run = session.stream("again")
        async for _ in run:
            pass
        said.append(run.result.output)
        with pytest.raises(AuthenticationFailed, match="GOOGLE_APPLICATION_CREDENTIALS"):
            await session.run("and once more")
        await model.aclose()  # a client passed in is left open
        await client.aio.aclose()
        return said

    assert asyncio.run(main()) == ["from Vertex", st.LAST.text]
    base = f"/projects/local-project/locations/us-central1/publishers/google/models/{MODEL}"
    paths = [r.path.partition("/projects/")[2] for r in fake_provider.requests]
    assert [f"/projects/{p}" for p in paths] == [
        f"{base}:generateContent",
        f"{base}:streamGenerateContent?alt=sse",
        f"{base}:generateContent",
    ]
    for recorded in fake_provider.requests:
        assert recorded.headers["authorization"] == "Bearer ya29.local-token"
        assert "x-goog-api-key" not in recorded.headers
    assert fake_provider.requests[0].body["contents"][0]["role"] == "user"


# -- hostile or broken answers ------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        {"candidates": "nonsense"},
        {"candidates": [None, 3]},
        {"candidates": [{"content": {"parts": "x"}, "finishReason": 7}]},
        {
            "candidates": [
                {
                    "content": {
                        "parts": [
                            1,
                            {"functionCall": "add"},
                            {"functionCall": {"name": 5, "args": [1, 2]}},
                            {"text": None, "thoughtSignature": 9},
                        ]
                    },
                    "finishReason": "STOP",
                }
            ],
            "usageMetadata": {"promptTokenCount": "many", "thoughtsTokenCount": True},
        },
    ],
)
def test_a_hostile_answer_never_runs_a_call_or_crashes(
    fake_provider: FakeProvider, body: Any
) -> None:
    fake_provider.queue(Reply(body), WIRE.reply(st.Step(text="done"), 2))
    model = WIRE.model(fake_provider)

    async def main() -> Any:
        async with model:
            return await tooldeck.run(model, st.TOOLS, "hi")

    result = asyncio.run(main())
    assert st.RAN == []
    first = result.items[1]
    assert first.usage.input_tokens == 0 and first.usage.reasoning_tokens == 0
    if first.stop_reason is StopReason.TOOL_CALLS:  # a call to no tool: an error output
        assert result.output == "done" and all(o.is_error for o in result.tool_outputs)
    else:
        assert first.stop_reason is StopReason.ERROR and result.output == ""


@pytest.mark.parametrize("body", ["not json at all", [1, 2]])
def test_an_answer_that_is_not_an_object_is_a_provider_failure(
    fake_provider: FakeProvider, body: Any
) -> None:
    fake_provider.queue(Reply(body))
    with pytest.raises(ProviderError, match="not a JSON object") as caught:
        _ask(fake_provider)
    assert "\n" not in str(caught.value)


def test_a_stream_that_ends_without_a_finish_reason_runs_no_call(
    fake_provider: FakeProvider,
) -> None:
    fake_provider.queue(
        SSE(
            [
                (None, chunk({"text": "Adding."})),
                (None, chunk({"functionCall": {"id": "c1", "name": "add", "args": {"a": 1}}})),
                (None, "{not json"),
            ]
        )
    )
    t = st.turn(WIRE, fake_provider, [], prompt="1+?")
    message = t.of(st.ModelStepFinished)[0].message
    assert message.stop_reason is StopReason.ERROR and message.text == "Adding."
    assert [c.incomplete for c in message.tool_calls] == [True] and st.RAN == []


def test_a_server_that_never_answers_times_out(fake_provider: FakeProvider) -> None:
    held = SSE([], hold=True)
    fake_provider.queue(held)
    model = GeminiModel(MODEL, api_key="k", base_url=fake_provider.url, max_retries=0, timeout=0.5)

    async def main() -> None:
        async with model:
            async for _ in tooldeck.Session(model, []).stream("hi"):
                pass

    with pytest.raises(ProviderTimeout, match=r"within 0\.5s"):
        asyncio.run(main())


def test_a_server_gone_mid_stream_is_one_line_and_records_nothing(tmp_path: Any) -> None:
    """The server writes half a chunked SSE answer and goes away (as a killed process)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    first = json.dumps(chunk({"text": "Par"}))

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            event = f"data: {first}\r\n\r\n".encode()
            conn.sendall(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"transfer-encoding: chunked\r\n\r\n"
                + f"{len(event):x}\r\n".encode()
                + event
                + b"\r\n5\r\ndata:"  # a chunk cut off, then the socket is gone
            )
        listener.close()

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    model = GeminiModel(MODEL, api_key="k", base_url=f"http://127.0.0.1:{port}", max_retries=0)
    session = tooldeck.Session(model, st.TOOLS)
    seen: list[Any] = []

    async def main() -> None:
        async with model:
            async for event in session.stream("hi"):
                seen.append(event)

    with pytest.raises(ProviderUnreachable, match="dropped during the answer") as caught:
        asyncio.run(main())
    server.join(5)
    assert "\n" not in str(caught.value)
    assert [e.text for e in seen if isinstance(e, st.TextDelta)] == ["Par"]
    assert session.transcript == [tooldeck.UserMessage("hi")] and st.RAN == []


@pytest.mark.usefixtures("gcp")
def test_vertex_from_the_sdk_variables(
    fake_provider: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``gemini:M`` with ``vertex=True`` (or GOOGLE_GENAI_USE_VERTEXAI): the project and
    location from the SDK's variables, a token google-auth fetches with the credentials
    file (its token endpoint is the local server)."""
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "local-project")
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "europe-west4")
    monkeypatch.setenv("GOOGLE_GENAI_USE_VERTEXAI", "true")
    for var in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    fake_provider.queue(WIRE.reply(st.Step(text="from Vertex"), 1))
    model = model_from_string(f"gemini:{MODEL}", base_url=fake_provider.url, max_retries=0)

    async def main() -> str:
        async with model:
            return (await tooldeck.run(model, [], "hi")).output

    assert asyncio.run(main()) == "from Vertex"
    token, call = fake_provider.requests
    assert token.path == "/token"
    assert call.path.endswith(
        f"/projects/local-project/locations/europe-west4/publishers/google/models/{MODEL}"
        ":generateContent"
    )
    assert call.headers["authorization"] == f"Bearer {TOKEN}"


def test_vertex_without_a_project_or_credentials_is_one_line(
    fake_provider: FakeProvider, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    for var in ("GOOGLE_CLOUD_PROJECT", "GOOGLE_GENAI_USE_VERTEXAI"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ModelConfigError) as no_project:
        GeminiModel(MODEL, vertex=True)
    assert str(no_project.value) == (
        f"Gemini on Vertex AI model {MODEL!r}: no project; set GOOGLE_CLOUD_PROJECT "
        "(or pass project=)"
    )
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    model = GeminiModel(
        MODEL, vertex=True, project="p", location="us-central1", base_url=fake_provider.url
    )
    for stream in (False, True):

        async def main(stream: bool = stream) -> None:
            async with model:
                if stream:
                    async for _ in tooldeck.Session(model, []).stream("hi"):
                        pass
                else:
                    await tooldeck.run(model, [], "hi")

        with pytest.raises(MissingCredentials, match="GOOGLE_APPLICATION_CREDENTIALS") as caught:
            asyncio.run(main())
        assert "\n" not in str(caught.value)
    assert fake_provider.requests == []  # nothing unsigned was sent


def test_the_demo_runs_a_live_turn_on_gemini(
    fake_provider: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from tooldeck.cli import app

    first = st.Step(
        text="Reading the notes first.", calls=(("call_1", "read_document", {"path": "notes.md"}),)
    )
    fake_provider.queue(WIRE.sse(first, 1), WIRE.sse(st.Step(text="Two items are open."), 2))
    monkeypatch.setenv("GEMINI_API_KEY", "test-key")
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.setenv("TOOLDECK_BASE_URL", fake_provider.url)
    result = CliRunner().invoke(app, ["demo", "--model", f"gemini:{MODEL}"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "Reading the notes first." in result.output
    assert "final answer: Two items are open." in result.output
    assert all(r.path.endswith(":streamGenerateContent?alt=sse") for r in fake_provider.requests)
    answer = fake_provider.bodies()[1]["contents"][-1]["parts"][0]["functionResponse"]
    assert answer["id"] == "call_1" and answer["name"] == "read_document"


@pytest.mark.usefixtures("no_keys")
def test_the_demo_without_a_key_is_one_line(fake_provider: FakeProvider) -> None:
    from typer.testing import CliRunner

    from tooldeck.cli import app

    result = CliRunner().invoke(app, ["demo", "--model", f"gemini:{MODEL}"], env={"COLUMNS": "200"})
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"error: Gemini model {MODEL!r}: no API key; set GEMINI_API_KEY or GOOGLE_API_KEY "
        "(or pass api_key=)"
    ]
    assert fake_provider.requests == []
