"""What the command line prints for each provider error: one line, the traceback with -v.

``tooldeck demo --model``, ``workflows run --model`` and ``worker --model`` against the
local fake provider (real HTTP), a closed port and a TLS server with an untrusted
certificate. The SDK's retries are 0 (``TOOLDECK_MAX_RETRIES``) except where counted.
"""

from __future__ import annotations

import gc
import os
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
from typer.testing import CliRunner

from tooldeck.cli import app

from .fake_server import FakeProvider, Reply

SCRIPTS = Path(__file__).parent.parent / "workflow_scripts"
CLEAR: dict[str, str | None] = {
    var: None
    for var in (
        "OPENAI_API_KEY",
        "OPENROUTER_API_KEY",
        "ZAI_API_KEY",
        "ZHIPUAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_PROFILE",
        "OPENAI_BASE_URL",
        "ANTHROPIC_BASE_URL",
        "TOOLDECK_TIMEOUT",
        "TOOLDECK_VERBOSE",
        "SSL_CERT_FILE",
    )
}


def cli(*args: str, **env: str) -> Any:
    full = {**CLEAR, "COLUMNS": "200", "TOOLDECK_MAX_RETRIES": "0", **env}
    # The command runs in this test process: an SDK client that an earlier test left
    # unclosed, collected while the command's event loop runs, would log its own
    # "Task exception was never retrieved" into this command's stderr. Collect it first.
    gc.collect()
    return CliRunner().invoke(app, list(args), env=full)


def demo(spec: str, url: str | None = None, *, verbose: bool = False, **env: str) -> Any:
    if url is not None:
        env["TOOLDECK_BASE_URL"] = url
    return cli(*(["-v"] if verbose else []), "demo", "--model", spec, **env)


def assert_one_line(result: Any, line: str, code: int) -> None:
    assert result.exit_code == code, result.output
    assert result.stderr == f"error: {line}\n"
    assert "Traceback" not in result.output


# -- the model cannot be built: nothing runs ---------------------------------------------


@pytest.mark.parametrize(
    ("spec", "line"),
    [
        (
            "openai:gpt-5.4",
            "OpenAI model 'gpt-5.4': no API key; set OPENAI_API_KEY (or pass api_key=)",
        ),
        (
            "anthropic:claude-sonnet-4-6",
            "Anthropic model 'claude-sonnet-4-6': no API key; set ANTHROPIC_API_KEY "
            "(or pass api_key=)",
        ),
        (
            "glm:glm-4.6",
            "GLM (Z.ai) model 'glm-4.6': no API key; set ZAI_API_KEY or ZHIPUAI_API_KEY "
            "(or pass api_key=)",
        ),
        (
            "foo",
            "unknown model string 'foo': use KIND:MODEL with KIND one of openai, openai-chat, "
            "openrouter, glm, compatible, anthropic, bedrock, vertex, azure, azure-chat, gemini "
            "(e.g. openai:gpt-5.4, anthropic:claude-sonnet-4-6)",
        ),
        (
            "compatible:qwen3",
            "compatible server model 'qwen3': no address; pass base_url= or set "
            "TOOLDECK_BASE_URL (e.g. http://localhost:8000/v1)",
        ),
    ],
)
def test_demo_without_a_usable_model_fails_before_running_anything(spec: str, line: str) -> None:
    result = demo(spec, TOOLDECK_BASE_URL="")
    assert_one_line(result, line, 2)
    assert result.stdout == ""  # not even the live turn's heading


def test_verbose_shows_the_traceback() -> None:
    result = demo("openai:gpt-5.4", verbose=True)
    assert result.exit_code == 2
    assert result.stderr.startswith("Traceback (most recent call last):\n")
    assert "tooldeck.errors.MissingCredentials: OpenAI model 'gpt-5.4'" in result.stderr
    assert result.stderr.endswith(
        "\nerror: OpenAI model 'gpt-5.4': no API key; set OPENAI_API_KEY (or pass api_key=)\n"
    )
    assert cli("-v", "version").exit_code == 0  # -v changes nothing else


def test_a_real_process_prints_one_line_and_exits_2(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in CLEAR}
    env.update({"COLUMNS": "200", "HOME": str(tmp_path)})
    done = subprocess.run(
        [sys.executable, "-c", "from tooldeck.cli import main; main()", "demo", "-m", "openai:x"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "error: OpenAI model 'x': no API key; set OPENAI_API_KEY (or pass api_key=)\n"
    )


# -- the provider cannot be reached --------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_connection_refused() -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    result = demo("openai:gpt-5.4", url, OPENAI_API_KEY="test")
    line = (
        f"OpenAI model 'gpt-5.4': cannot connect to {url}/responses (connection refused); "
        "check that the server is up and the address (base_url or TOOLDECK_BASE_URL), or "
        "try again"
    )
    assert_one_line(result, line, 1)
    # the live turn's progress ends with the same reason, on stdout (wrapped by rich)
    assert " ".join(result.stdout.split()).endswith(
        f"turn finished after 1 step(s): ProviderUnreachable: {line}; 0 tokens"
    )


@pytest.fixture
def tls_url() -> Iterator[str]:
    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    server = FakeProvider()
    server.server.socket = context.wrap_socket(server.server.socket, server_side=True)
    try:
        yield server.url.replace("http://", "https://")
    finally:
        server.close()


def test_tls_failure(tls_url: str) -> None:
    result = demo("anthropic:claude-sonnet-4-6", tls_url, ANTHROPIC_API_KEY="test")
    assert_one_line(
        result,
        f"Anthropic model 'claude-sonnet-4-6': the TLS handshake with {tls_url}/v1/messages "
        "failed (unable to get local issuer certificate); check the address, and for a "
        "private certificate authority set SSL_CERT_FILE to its bundle",
        1,
    )


# -- the provider answers with an error ----------------------------------------------------


def _openai(message: str, type_: str, code: str | None) -> Any:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


def _anthropic(type_: str, message: str) -> Any:
    return {"type": "error", "error": {"type": type_, "message": message}}


CASES = [
    pytest.param(
        "openai:gpt-5.4",
        [
            Reply(
                _openai(
                    "Incorrect API key provided: test.", "invalid_request_error", "invalid_api_key"
                ),
                401,
            )
        ],
        "OpenAI model 'gpt-5.4': the API key was rejected (401 invalid_api_key: Incorrect API "
        "key provided: test.); check OPENAI_API_KEY",
        id="401",
    ),
    pytest.param(
        "anthropic:claude-sonnet-4-6",
        [
            Reply(
                _anthropic(
                    "permission_error",
                    "Your API key does not have permission to use the specified resource.",
                ),
                403,
            )
        ],
        "Anthropic model 'claude-sonnet-4-6': the key may not use this model or endpoint "
        "(403 permission_error: Your API key does not have permission to use the specified "
        "resource.); check the key's project, organisation and permissions (ANTHROPIC_API_KEY)",
        id="403",
    ),
    pytest.param(
        "openai-chat:gpt-9",
        [
            Reply(
                _openai(
                    "The model `gpt-9` does not exist or you do not have access to it.",
                    "invalid_request_error",
                    "model_not_found",
                ),
                404,
            )
        ],
        "OpenAI model 'gpt-9': the provider has no such model (404 model_not_found: The model "
        "`gpt-9` does not exist or you do not have access to it.); check the model name, and "
        "that {url} is the provider's API address",
        id="404",
    ),
    pytest.param(
        "anthropic:claude-sonnet-4-6",
        [
            Reply(
                _anthropic("rate_limit_error", "Number of requests has exceeded your rate limit."),
                429,
                {"retry-after": "30"},
            )
        ],
        "Anthropic model 'claude-sonnet-4-6': rate limited (429 rate_limit_error: Number of "
        "requests has exceeded your rate limit.); wait 30s and try again, lower the request "
        "rate, or raise max_retries",
        id="429",
    ),
    pytest.param(
        "openrouter:anthropic/claude-sonnet-4.5",
        [
            Reply(
                {"error": {"message": "Provider returned error", "code": 503}},
                503,
                {"retry-after-ms": "1"},
            ),
            Reply(
                {"error": {"message": "Provider returned error", "code": 503}},
                503,
                {"retry-after-ms": "1"},
            ),
        ],
        "OpenRouter model 'anthropic/claude-sonnet-4.5': the provider failed after 1 retry "
        "(503: Provider returned error); try again later, or raise max_retries",
        id="503-after-retries",
    ),
    pytest.param(
        "glm:glm-4.6",
        [Reply({"error": {"code": "1261", "message": "Prompt exceeds max length"}}, 400)],
        "GLM (Z.ai) model 'glm-4.6': the request is longer than the model's context window "
        "(400 1261: Prompt exceeds max length); start a new session or shorten the prompt and "
        "tool results (offload large results), or use a model with a larger context window",
        id="context-length",
    ),
]


@pytest.mark.parametrize(("spec", "replies", "line"), CASES)
def test_provider_answers(
    spec: str, replies: list[Reply], line: str, fake_provider: FakeProvider
) -> None:
    fake_provider.queue(*replies)
    url = fake_provider.url + "/v1"
    retries = str(len(replies) - 1)
    result = demo(
        spec,
        url,
        OPENAI_API_KEY="test",
        ANTHROPIC_API_KEY="test",
        OPENROUTER_API_KEY="test",
        ZAI_API_KEY="test",
        TOOLDECK_MAX_RETRIES=retries,
    )
    assert_one_line(result, line.format(url=url), 1)
    assert len(fake_provider.requests) == len(replies)  # the SDK's retries, none of ours

    fake_provider.queue(*replies)
    verbose = demo(
        spec,
        url,
        verbose=True,
        OPENAI_API_KEY="t",
        ANTHROPIC_API_KEY="t",
        OPENROUTER_API_KEY="t",
        ZAI_API_KEY="t",
        TOOLDECK_MAX_RETRIES=retries,
    )
    assert verbose.exit_code == 1
    assert "Traceback (most recent call last):" in verbose.stderr
    assert "The above exception was the direct cause" in verbose.stderr  # the SDK's error
    assert verbose.stderr.endswith(f"error: {line.format(url=url)}\n")


# -- workflows and workers -----------------------------------------------------------------


def test_workflows_run_without_a_key(tmp_path: Path) -> None:
    result = cli(
        "workflows",
        "run",
        str(SCRIPTS / "trip_brief.py"),
        "-i",
        '{"city": "Lisbon", "days": 2}',
        "--db",
        str(tmp_path / "runs.sqlite3"),
        "--model",
        "anthropic:claude-sonnet-4-6",
    )
    assert result.exit_code == 2
    assert result.output == (
        "error: Anthropic model 'claude-sonnet-4-6': no API key; set ANTHROPIC_API_KEY "
        "(or pass api_key=)\n"
    )
    assert not (tmp_path / "runs.sqlite3").exists()  # nothing ran


def test_workflows_run_with_an_unreachable_provider(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    result = cli(
        "workflows",
        "run",
        str(SCRIPTS / "trip_brief.py"),
        "-i",
        '{"city": "Lisbon", "days": 2}',
        "--db",
        str(tmp_path / "runs.sqlite3"),
        "--model",
        "openai-chat:gpt-4.1",
        OPENAI_API_KEY="test",
        TOOLDECK_BASE_URL=url,
    )
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert "ProviderUnreachable: OpenAI model 'gpt-4.1': cannot connect to" in result.output
    # the engine's "task crashed" log carries the provider error: left out without -v
    assert "crashed" not in result.stderr


def test_worker_without_a_key() -> None:
    result = cli("worker", "--dsn", "postgresql://127.0.0.1:1/none", "--model", "openai:gpt-5.4")
    assert result.exit_code == 2
    assert result.output == (
        "error: OpenAI model 'gpt-5.4': no API key; set OPENAI_API_KEY (or pass api_key=)\n"
    )
