"""Provider errors a person can act on, over real HTTP with the official SDKs.

Each provider's real error replies (status, body, retry headers) are queued at the local
fake server; the adapters must raise one typed tooldeck error with a one-line message
naming the provider, the model and what to do, with the SDK's exception as ``__cause__``.
SDK retries stay at 0 except where a test is about the SDK's own retry.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
import trustme
from hypothesis import given, settings
from hypothesis import strategies as st

from tooldeck import ModelRequest, UserMessage
from tooldeck.errors import (
    AuthenticationFailed,
    ContextTooLong,
    MissingCredentials,
    ModelConfigError,
    ModelNotFound,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
    ProviderUnreachable,
    QuotaExceeded,
    RateLimited,
    RequestRejected,
    TLSFailure,
    TooldeckError,
    UnknownModel,
)
from tooldeck.model import Model
from tooldeck.providers import model_from_string
from tooldeck.providers.errors import Target, provider_error

from .fake_server import SSE, FakeProvider, Reply

# kind -> (model string, URL path under the fake server, SDK error base)
SPECS: dict[str, tuple[str, str, type[Exception]]] = {
    "openai": ("openai:gpt-5.4", "/v1", openai.APIError),
    "openai-chat": ("openai-chat:gpt-4.1", "/v1", openai.APIError),
    "openrouter": ("openrouter:anthropic/claude-sonnet-4.5", "/api/v1", openai.APIError),
    "glm": ("glm:glm-4.6", "/api/paas/v4", openai.APIError),
    "anthropic": ("anthropic:claude-sonnet-4-6", "", anthropic.APIError),
}
KEY_ENV = {
    "openai": "OPENAI_API_KEY",
    "openai-chat": "OPENAI_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
    "glm": "ZAI_API_KEY or ZHIPUAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
}
LABEL = {
    "openai": "OpenAI model 'gpt-5.4'",
    "openai-chat": "OpenAI model 'gpt-4.1'",
    "openrouter": "OpenRouter model 'anthropic/claude-sonnet-4.5'",
    "glm": "GLM (Z.ai) model 'glm-4.6'",
    "anthropic": "Anthropic model 'claude-sonnet-4-6'",
}
ALL_KEYS = (
    "OPENAI_API_KEY",
    "OPENROUTER_API_KEY",
    "ZAI_API_KEY",
    "ZHIPUAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_PROFILE",
    "TOOLDECK_BASE_URL",
    "TOOLDECK_MAX_RETRIES",
    "TOOLDECK_TIMEOUT",
    "OPENAI_BASE_URL",
    "ANTHROPIC_BASE_URL",
)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ALL_KEYS:
        monkeypatch.delenv(var, raising=False)


def build(kind: str, url: str, **options: Any) -> Model:
    spec, path, _ = SPECS[kind]
    options.setdefault("max_retries", 0)
    return model_from_string(spec, base_url=url + path, api_key="test", **options)


def ask(model: Model, *, stream: bool = False) -> Any:
    """One request over real HTTP on a fresh event loop; the model is closed after it."""
    request = ModelRequest([UserMessage("hi")], [])

    async def main() -> Any:
        try:
            if stream:
                return [x async for x in model.stream(request)]
            return await model.respond(request)
        finally:
            await model.aclose()  # type: ignore[attr-defined]

    return asyncio.run(main())


def fails(kind: str, fake: FakeProvider, reply: Reply, *, stream: bool = False) -> ProviderError:
    fake.queue(reply)
    with pytest.raises(ProviderError) as info:
        ask(build(kind, fake.url), stream=stream)
    error = info.value
    assert isinstance(error.__cause__, SPECS[kind][2]), repr(error.__cause__)
    assert "\n" not in str(error)
    assert str(error).startswith(LABEL[kind] + ": ")
    return error


def openai_error(message: str, type_: str, code: str | None, param: str | None = None) -> Any:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def anthropic_error(type_: str, message: str) -> Any:
    return {
        "type": "error",
        "error": {"type": type_, "message": message},
        "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy",
    }


# -- before any request --------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(SPECS))
def test_missing_key_fails_when_the_model_is_made(kind: str) -> None:
    spec = SPECS[kind][0]
    with pytest.raises(MissingCredentials) as info:
        model_from_string(spec)
    assert str(info.value) == f"{LABEL[kind]}: no API key; set {KEY_ENV[kind]} (or pass api_key=)"
    assert isinstance(info.value, ValueError) and isinstance(info.value, TooldeckError)
    assert info.value.env == tuple(KEY_ENV[kind].split(" or "))


def test_anthropic_auth_token_counts_as_a_credential(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "token")
    assert model_from_string("anthropic:claude-sonnet-4-6").model == "claude-sonnet-4-6"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("spec", "start"),
    [
        ("foo", "unknown model string 'foo'"),
        ("openai:", "unknown model string 'openai:'"),
        ("mistral:large", "unknown provider 'mistral' in 'mistral:large'"),
        (":gpt-5.4", "unknown provider '' in ':gpt-5.4'"),
    ],
)
def test_unknown_model_strings(spec: str, start: str) -> None:
    with pytest.raises(UnknownModel) as info:
        model_from_string(spec)
    assert str(info.value) == (
        f"{start}: use KIND:MODEL with KIND one of openai, openai-chat, openrouter, glm, "
        "compatible, anthropic, bedrock, vertex, azure, azure-chat, gemini "
        "(e.g. openai:gpt-5.4, anthropic:claude-sonnet-4-6)"
    )


def test_bad_retry_settings_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLDECK_MAX_RETRIES", "lots")
    with pytest.raises(ModelConfigError, match="TOOLDECK_MAX_RETRIES='lots'"):
        model_from_string("openai:gpt-5.4", api_key="k")


def test_retry_and_timeout_reach_the_sdk_client(monkeypatch: pytest.MonkeyPatch) -> None:
    for kind in SPECS:
        model = build(kind, "http://127.0.0.1:9", max_retries=5, timeout=7.5)
        client = model.client  # type: ignore[attr-defined]
        assert (client.max_retries, client.timeout) == (5, 7.5), kind
    monkeypatch.setenv("TOOLDECK_MAX_RETRIES", "3")
    monkeypatch.setenv("TOOLDECK_TIMEOUT", "12")
    model = model_from_string("anthropic:claude-sonnet-4-6", api_key="k")
    assert (model.client.max_retries, model.client.timeout) == (3, 12.0)  # type: ignore[attr-defined]


# -- no answer -----------------------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("kind", list(SPECS))
@pytest.mark.parametrize("stream", [False, True])
def test_connection_refused(kind: str, stream: bool) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    with pytest.raises(ProviderUnreachable) as info:
        ask(build(kind, url), stream=stream)
    error = info.value
    assert not isinstance(error, (TLSFailure, ProviderTimeout))
    endpoint = {"anthropic": "/v1/messages", "openai": "/responses"}.get(kind, "/chat/completions")
    assert str(error) == (
        f"{LABEL[kind]}: cannot connect to {url}{SPECS[kind][1]}{endpoint} "
        "(connection refused); check that the server is up and the address "
        "(base_url or TOOLDECK_BASE_URL), or try again"
    )
    assert isinstance(error.__cause__, SPECS[kind][2])


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[FakeProvider, Path]]:
    """The fake provider behind TLS with a certificate from a private CA (trustme)."""
    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    server = FakeProvider()
    server.server.socket = context.wrap_socket(server.server.socket, server_side=True)
    bundle = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    try:
        yield server, bundle
    finally:
        server.close()


@pytest.mark.parametrize("kind", ["openai", "glm", "anthropic"])
def test_tls_failure_and_the_fix_it_names(
    kind: str, tls_server: tuple[FakeProvider, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, bundle = tls_server
    url = server.url.replace("http://", "https://")
    with pytest.raises(TLSFailure) as info:
        ask(build(kind, url))
    assert "the TLS handshake with https://127.0.0.1:" in str(info.value)
    assert "(unable to get local issuer certificate)" in str(info.value)
    assert str(info.value).endswith(
        "check the address, and for a private certificate authority set SSL_CERT_FILE to its bundle"
    )
    assert isinstance(info.value, ProviderUnreachable)
    # what the message says to do does work: trust the CA, and the same server answers
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    server.queue(Reply({"error": {"message": "no such model", "type": "not_found_error"}}, 404))
    with pytest.raises(ModelNotFound):
        ask(build(kind, url))
    assert len(server.requests) == 1


def test_timeout_after_the_sdk_retries() -> None:
    # A server that accepts connections but never answers.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        with pytest.raises(ProviderTimeout) as info:
            ask(build("openai", url, timeout=0.2))
    assert str(info.value) == (
        f"OpenAI model 'gpt-5.4': no answer from {url}/v1/responses within 0.2s; try again, "
        "or raise timeout= (TOOLDECK_TIMEOUT)"
    )
    assert isinstance(info.value.__cause__, openai.APITimeoutError)


# -- the provider answers with an error ----------------------------------------------------

AUTH_401 = {
    "openai": openai_error(
        "Incorrect API key provided: test. You can find your API key at "
        "https://platform.openai.com/account/api-keys.",
        "invalid_request_error",
        "invalid_api_key",
    ),
    "openrouter": {"error": {"message": "No auth credentials found", "code": 401}},
    "glm": {
        "error": {
            "code": "1002",
            "message": "Authorization Token非法，请确认Authorization Token正确传递。",
        }
    },
    "anthropic": anthropic_error("authentication_error", "invalid x-api-key"),
}


@pytest.mark.parametrize("kind", list(SPECS))
def test_401_names_the_key_variable(kind: str, fake_provider: FakeProvider) -> None:
    body = AUTH_401.get(kind, AUTH_401["openai"])
    error = fails(kind, fake_provider, Reply(body, 401))
    assert isinstance(error, AuthenticationFailed) and error.status == 401
    assert str(error).endswith(f"; check {KEY_ENV[kind]}")
    assert ": the API key was rejected (401" in str(error)


def test_401_exact_message(fake_provider: FakeProvider) -> None:
    error = fails("anthropic", fake_provider, Reply(AUTH_401["anthropic"], 401))
    assert str(error) == (
        "Anthropic model 'claude-sonnet-4-6': the API key was rejected "
        "(401 authentication_error: invalid x-api-key); check ANTHROPIC_API_KEY"
    )
    assert error.request_id is None or error.request_id.startswith("req_")


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_403_says_the_key_may_not_use_the_model(kind: str, fake_provider: FakeProvider) -> None:
    body = (
        openai_error(
            "Project `proj_abc` does not have access to model `gpt-5.4`",
            "invalid_request_error",
            "model_not_found",
        )
        if kind == "openai"
        else anthropic_error(
            "permission_error",
            "Your API key does not have permission to use the specified resource.",
        )
    )
    error = fails(kind, fake_provider, Reply(body, 403))
    assert isinstance(error, AuthenticationFailed)
    assert "the key may not use this model or endpoint (403" in str(error)


NOT_FOUND = {
    "openai": (
        404,
        openai_error(
            "The model `gpt-5.4` does not exist or you do not have access to it.",
            "invalid_request_error",
            "model_not_found",
        ),
    ),
    "openrouter": (
        400,
        {"error": {"message": "anthropic/claude-sonnet-4.5 is not a valid model ID", "code": 400}},
    ),
    "glm": (
        400,
        {"error": {"code": "1211", "message": "Unknown Model, please check the model code."}},
    ),
    "anthropic": (404, anthropic_error("not_found_error", "model: claude-sonnet-4-6")),
}


@pytest.mark.parametrize("kind", ["openai", "openai-chat", "openrouter", "glm", "anthropic"])
def test_model_not_found(kind: str, fake_provider: FakeProvider) -> None:
    status, body = NOT_FOUND.get(kind, NOT_FOUND["openai"])
    error = fails(kind, fake_provider, Reply(body, status))
    assert isinstance(error, ModelNotFound)
    assert ": the provider has no such model (" in str(error)
    # the base_url was set: the address itself may be wrong, so the message says so too
    assert str(error).endswith(
        f"; check the model name, and that {fake_provider.url}{SPECS[kind][1]} is the "
        "provider's API address"
    )
    assert (error.status, error.code) == (
        status,
        str(body["error"].get("code") or body["error"]["type"]),
    )


def test_404_exact_message(fake_provider: FakeProvider) -> None:
    error = fails("openai", fake_provider, Reply(NOT_FOUND["openai"][1], 404))
    assert str(error) == (
        "OpenAI model 'gpt-5.4': the provider has no such model (404 model_not_found: The "
        "model `gpt-5.4` does not exist or you do not have access to it.); check the model "
        f"name, and that {fake_provider.url}/v1 is the provider's API address"
    )


@pytest.mark.parametrize(
    ("kind", "headers", "wait"),
    [
        ("openai", {"retry-after-ms": "20000"}, 20.0),
        ("openai-chat", {"retry-after": "7"}, 7.0),
        ("anthropic", {"retry-after": "20"}, 20.0),
        ("openrouter", {}, None),
    ],
)
def test_429_keeps_retry_after(
    kind: str, headers: dict[str, str], wait: float | None, fake_provider: FakeProvider
) -> None:
    body = {
        "anthropic": anthropic_error(
            "rate_limit_error",
            "This request would exceed your organization's rate limit of 50 requests per minute.",
        ),
        "openrouter": {
            "error": {"message": "Rate limit exceeded: free-models-per-min.", "code": 429}
        },
    }.get(
        kind,
        openai_error(
            "Rate limit reached for gpt-5.4 on requests per min (RPM): Limit 500, Used 500.",
            "requests",
            "rate_limit_exceeded",
        ),
    )
    error = fails(kind, fake_provider, Reply(body, 429, headers))
    assert isinstance(error, RateLimited) and error.retry_after == wait
    when = f"wait {wait:.0f}s" if wait is not None else "wait a little"
    assert str(error).endswith(
        f"; {when} and try again, lower the request rate, or raise max_retries"
    )


def test_429_retry_after_as_a_date(fake_provider: FakeProvider) -> None:
    past = "Wed, 21 Oct 2015 07:28:00 GMT"  # a moment already gone: no wait to report
    error = fails(
        "anthropic",
        fake_provider,
        Reply(anthropic_error("rate_limit_error", "slow down"), 429, {"retry-after": past}),
    )
    assert isinstance(error, RateLimited) and error.retry_after is None


@pytest.mark.parametrize(
    ("kind", "status", "body"),
    [
        (
            "openai",
            429,
            openai_error(
                "You exceeded your current quota, please check your plan and billing details.",
                "insufficient_quota",
                "insufficient_quota",
            ),
        ),
        (
            "openrouter",
            402,
            {
                "error": {
                    "message": "Insufficient credits. Add more using https://openrouter.ai/settings/credits",
                    "code": 402,
                }
            },
        ),
        (
            "glm",
            429,
            {
                "error": {
                    "code": "1113",
                    "message": "Insufficient balance or no resource package. Please recharge.",
                }
            },
        ),
        (
            "anthropic",
            400,
            anthropic_error(
                "invalid_request_error",
                "Your credit balance is too low to access the Anthropic API. Please go to "
                "Plans & Billing to upgrade or purchase credits.",
            ),
        ),
    ],
)
def test_quota_is_not_a_rate_limit(
    kind: str, status: int, body: Any, fake_provider: FakeProvider
) -> None:
    error = fails(kind, fake_provider, Reply(body, status))
    assert isinstance(error, QuotaExceeded) and not isinstance(error, RateLimited)
    assert str(error).endswith("; check the plan and billing of the account this key belongs to")


@pytest.mark.parametrize(
    ("kind", "status", "body"),
    [
        (
            "openai",
            503,
            openai_error(
                "The engine is currently overloaded, please try again later.", "server_error", None
            ),
        ),
        (
            "openai-chat",
            500,
            openai_error(
                "The server had an error while processing your request.", "server_error", None
            ),
        ),
        (
            "openrouter",
            502,
            {
                "error": {
                    "message": "Provider returned error",
                    "code": 502,
                    "metadata": {"provider_name": "Anthropic"},
                }
            },
        ),
        ("anthropic", 529, anthropic_error("overloaded_error", "Overloaded")),
    ],
)
def test_5xx_after_the_sdk_retries(
    kind: str, status: int, body: Any, fake_provider: FakeProvider
) -> None:
    fake_provider.queue(*[Reply(body, status, {"retry-after-ms": "1"}) for _ in range(2)])
    with pytest.raises(ProviderUnavailable) as info:
        ask(build(kind, fake_provider.url, max_retries=1))
    error = info.value
    assert len(fake_provider.requests) == 2  # the SDK retried once; nothing of ours did
    retries = [r.headers.get("x-stainless-retry-count") for r in fake_provider.requests]
    assert retries == ["0", "1"]
    assert error.retries == 1 and error.status == status
    assert f": the provider failed after 1 retry ({status}" in str(error)
    assert str(error).endswith("; try again later, or raise max_retries")


@pytest.mark.parametrize("kind", ["openai", "glm", "anthropic"])
def test_the_sdks_own_retry_is_used(kind: str, fake_provider: FakeProvider) -> None:
    """A 503 then a success with max_retries=1: one answer, two requests at the server."""
    ok: Any
    if kind == "anthropic":
        ok = {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-6",
            "content": [{"type": "text", "text": "fine"}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 3, "output_tokens": 1},
        }
    elif kind == "openai":
        ok = {
            "id": "resp_1",
            "object": "response",
            "created_at": 1767225600,
            "status": "completed",
            "model": "gpt-5.4",
            "output": [
                {
                    "type": "message",
                    "id": "msg_1",
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "fine", "annotations": []}],
                }
            ],
            "usage": {"input_tokens": 3, "output_tokens": 1, "total_tokens": 4},
        }
    else:
        ok = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1767225600,
            "model": "glm-4.6",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": "fine"},
                }
            ],
        }
    busy = Reply(
        {"error": {"message": "busy", "type": "server_error"}}, 503, {"retry-after-ms": "1"}
    )
    fake_provider.queue(busy, Reply(ok))
    message = ask(build(kind, fake_provider.url, max_retries=1))
    assert message.text == "fine"
    assert [r.headers.get("x-stainless-retry-count") for r in fake_provider.requests] == ["0", "1"]
    assert fake_provider.bodies()[0] == fake_provider.bodies()[1]


CONTEXT = {
    "openai": openai_error(
        "Your input exceeds the context window of this model. Please adjust your input and "
        "try again.",
        "invalid_request_error",
        "context_length_exceeded",
        "input",
    ),
    "openai-chat": openai_error(
        "This model's maximum context length is 128000 tokens. However, your messages "
        "resulted in 130123 tokens. Please reduce the length of the messages.",
        "invalid_request_error",
        "context_length_exceeded",
        "messages",
    ),
    "openrouter": {
        "error": {
            "message": "This endpoint's maximum context length is 200000 tokens. However, "
            "you requested about 250000 tokens (250000 of text input). Please reduce the "
            'length of either one, or use the "middle-out" transform to compress your '
            "prompt automatically.",
            "code": 400,
            "metadata": {"provider_name": None},
        }
    },
    "glm": {"error": {"code": "1261", "message": "Prompt exceeds max length"}},
    "anthropic": anthropic_error(
        "invalid_request_error", "prompt is too long: 215000 tokens > 200000 maximum"
    ),
}


@pytest.mark.parametrize("kind", list(SPECS))
def test_context_too_long(kind: str, fake_provider: FakeProvider) -> None:
    error = fails(kind, fake_provider, Reply(CONTEXT[kind], 400))
    assert isinstance(error, ContextTooLong)
    assert ": the request is longer than the model's context window (400" in str(error)
    assert str(error).endswith(
        "; start a new session or shorten the prompt and tool results (offload large "
        "results), or use a model with a larger context window"
    )


def test_compatible_server_context_error(fake_provider: FakeProvider) -> None:
    # vLLM's shape: the status in error.code, its own type name
    body = {
        "object": "error",
        "message": "This model's maximum context length is 4096 tokens. However, you "
        "requested 5000 tokens in the messages.",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    }
    fake_provider.queue(Reply(body, 400))
    model = model_from_string("compatible:qwen3", base_url=fake_provider.url + "/v1", max_retries=0)
    with pytest.raises(ContextTooLong, match=r"^compatible server model 'qwen3': the request"):
        ask(model)


def test_other_4xx_is_rejected_not_retried(fake_provider: FakeProvider) -> None:
    body = openai_error(
        "Unsupported parameter: 'temperature' is not supported with this model.",
        "invalid_request_error",
        "unsupported_parameter",
        "temperature",
    )
    error = fails("openai", fake_provider, Reply(body, 400))
    assert isinstance(error, RequestRejected)
    assert "(400 unsupported_parameter: Unsupported parameter:" in str(error)


# -- errors inside a stream ----------------------------------------------------------------


def test_errors_inside_streams(fake_provider: FakeProvider) -> None:
    # Anthropic sends an error event in a 200 stream when it is overloaded mid-answer.
    fake_provider.queue(
        SSE([("error", anthropic_error("overloaded_error", "Overloaded"))]),
        SSE([(None, {"error": {"message": "Provider returned error", "code": 502}})]),
        SSE(
            [
                (
                    "error",
                    {
                        "type": "error",
                        "code": "context_length_exceeded",
                        "message": "Your input exceeds the context window of this model.",
                        "param": None,
                        "sequence_number": 1,
                    },
                )
            ]
        ),
    )
    with pytest.raises(ProviderUnavailable, match=r"\(529 overloaded_error: Overloaded\)"):
        ask(build("anthropic", fake_provider.url), stream=True)
    with pytest.raises(ProviderUnavailable, match=r"\(502: Provider returned error\)"):
        ask(build("openrouter", fake_provider.url), stream=True)
    with pytest.raises(ContextTooLong):
        ask(build("openai", fake_provider.url), stream=True)


def test_errors_at_the_start_of_a_stream(fake_provider: FakeProvider) -> None:
    for kind in SPECS:
        error = fails(kind, fake_provider, Reply(CONTEXT[kind], 400), stream=True)
        assert isinstance(error, ContextTooLong)


def test_other_exceptions_pass_through_untouched() -> None:
    target = Target("openai", "gpt-5.4")
    assert provider_error(ValueError("bad"), target) is None
    assert provider_error(KeyError("x"), target) is None
    already = RateLimited("x")
    assert provider_error(already, target) is None


@pytest.fixture
def cut_short() -> Iterator[str]:
    """A server that promises 500 bytes of answer, sends 11 and closes the connection."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, _, body = data.partition(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                while len(body) < length:  # read the whole request: no reset on close
                    body += conn.recv(65536)
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    b'content-length: 500\r\n\r\n{"id": "x"'
                )

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        listener.close()


@pytest.mark.parametrize("kind", list(SPECS))
@pytest.mark.parametrize("stream", [False, True])
def test_a_connection_dropped_during_the_answer(kind: str, stream: bool, cut_short: str) -> None:
    with pytest.raises(ProviderUnreachable) as info:
        ask(build(kind, cut_short), stream=stream)
    assert str(info.value).startswith(f"{LABEL[kind]}: the connection to {cut_short}")
    assert " dropped during the answer (" in str(info.value)
    assert not isinstance(info.value, (TLSFailure, ProviderTimeout))


# -- any answer at all: one line, the right family -----------------------------------------

_text = st.text(max_size=400)
_code = st.one_of(st.none(), st.integers(-5, 2000), _text)
_inner = st.fixed_dictionaries(
    {},
    optional={"message": st.one_of(_text, st.integers()), "code": _code, "type": _code},
)
_bodies = st.one_of(
    st.none(),
    _text,
    _inner,
    st.builds(lambda e: {"error": e}, st.one_of(_inner, _text)),
    st.builds(lambda e: {"type": "error", "error": e}, _inner),
)


@given(
    status=st.integers(400, 599),
    body=_bodies,
    retry_after=st.one_of(
        st.none(),
        st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=40),
        st.floats(allow_nan=True).map(str),
    ),
    sdk=st.sampled_from(["openai", "anthropic"]),
    provider=st.sampled_from(["openai", "anthropic", "openrouter", "glm", "compatible"]),
)
@settings(max_examples=300, deadline=None)
def test_any_error_answer_becomes_one_line(
    status: int, body: Any, retry_after: str | None, sdk: str, provider: str
) -> None:
    import httpx2

    request = httpx2.Request("POST", "http://127.0.0.1:9/v1/x")
    headers = {"retry-after": retry_after} if retry_after is not None else {}
    response = httpx2.Response(status, request=request, headers=headers)
    module = openai if sdk == "openai" else anthropic
    exc = module.APIStatusError(f"Error code: {status}", response=response, body=body)
    target = Target(provider, "m\nx", "http://127.0.0.1:9/v1")  # a hostile model name
    error = provider_error(exc, target)
    assert isinstance(error, ProviderError)
    text = str(error)
    assert "\n" not in text and "\r" not in text
    assert text.startswith(target.label + ": ")
    assert len(text) < 700
    assert error.status is not None and 400 <= error.status < 600
    if isinstance(error, RateLimited):
        assert error.retry_after is None or error.retry_after >= 0
    family = {401: AuthenticationFailed, 403: AuthenticationFailed, 404: ModelNotFound}
    if status in family and not isinstance(error, (ContextTooLong, QuotaExceeded)):
        assert isinstance(error, family[status]) or provider == "glm"
    if status >= 500 and not isinstance(error, (ContextTooLong, QuotaExceeded)):
        assert isinstance(error, ProviderUnavailable) or provider == "glm"
