"""An upstream server's ``sampling/createMessage`` through ``tooldeck serve``.

A real gateway (stdio, and HTTP with two clients), reached by the official MCP SDK
client; upstream, npm's ``@modelcontextprotocol/server-everything``, whose
``trigger-sampling-request`` tool (registered only for a client that declares sampling:
the gateway does) asks its client's model and reports the answer. The request reaches
the gateway's client when it declared sampling (as the server sent it, its answer
checked), is otherwise served by the model configured with ``--sampling-model`` (here a
``compatible:`` model whose provider is the local HTTP server of the provider tests) or
refused; the policy judges it first (``WRITE``: asks by default); everything is audited.
A client that cancels its call ends a forwarded question at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from gateway_client import (
    ALLOW_ALL,
    APPROVE,
    audit_lines,
    gateway,
    http_client,
    node_server,
    npm_server,
    served_gateway,
    text_of,
    write_config,
    write_policy,
)
from providers.fake_server import FakeProvider, Reply
from tooldeck.mcp.asking import AMBIGUOUS, ENDED

EVERYTHING = ("@modelcontextprotocol/server-everything", "2026.8.31", "mcp-server-everything")
TRIGGER = "everything__trigger-sampling-request"
ASKED = "everything__trigger-elicitation-request"
SAMPLE = "everything__sampling_createMessage"
QUESTION = "everything__elicitation_create"
ALLOW_SAMPLING = ALLOW_ALL  # "*__*" allows every tool, the servers' sampling included
ONLY_TOOLS = (  # the tools allowed, sampling left to the tiers: WRITE asks
    '[profile]\n[[profile.rules]]\ntools = "everything__trigger-*"\naction = "allow"\n'
)
ECHO = {"message": "still here"}
PARIS = types.CreateMessageResult(
    role="assistant",
    content=types.TextContent(type="text", text="Paris, of course."),
    model="client-model-1",
    stop_reason="endTurn",
)


def upstream(tmp_path: Path, timeout: float = 60) -> Path:
    entry = npm_server(*EVERYTHING)
    server = node_server(entry, "stdio", timeout=timeout)
    return write_config(tmp_path, {"everything": server})


def serving(tmp_path: Path, policy: str = ALLOW_SAMPLING, *extra: str) -> list[Any]:
    policy_file = write_policy(tmp_path, policy)
    return [upstream(tmp_path), "--core", "*", "--policy", str(policy_file), *extra]


async def trigger(client: Any, prompt: str = "capital of France?") -> str:
    with anyio.fail_after(60):
        return text_of(await client.call_tool(TRIGGER, {"prompt": prompt, "maxTokens": 50}))


def sample_lines(state: Path) -> list[tuple[str, str]]:
    lines = [line for line in audit_lines(state) if line["tool"] == SAMPLE]
    return [(line["decision"], line["reason"]) for line in lines]


async def cancelled(tool: str, state: Path) -> str:
    """The reason of the audit line saying ``tool``'s request ended as its call was
    cancelled, waited for (well before the server's own timeout, 60 s or more)."""
    with anyio.fail_after(20):
        while True:
            found = [
                line["reason"]
                for line in audit_lines(state)
                if line["tool"] == tool and line["reason"] == ENDED
            ]
            if found:
                return str(found[0])
            await anyio.sleep(0.1)


class Sampler:
    """A client's sampling callback: answers ``answer`` (with ``WAIT``: waits until
    cancelled, ``entered`` set), keeps the requests."""

    def __init__(self, answer: Any = PARIS) -> None:
        self.answer = answer
        self.asked: list[types.CreateMessageRequestParams] = []
        self.entered = anyio.Event()

    async def __call__(self, context: Any, params: types.CreateMessageRequestParams) -> Any:
        self.asked.append(params)
        self.entered.set()
        if self.answer is WAIT:
            await anyio.sleep_forever()
        return self.answer


WAIT = object()


def test_a_request_reaches_the_client_and_its_answer_the_server(tmp_path: Path) -> None:
    sampler = Sampler()

    async def main() -> None:
        config, *args = serving(tmp_path)
        async with gateway(config, tmp_path / "state", *args, sample=sampler) as client:
            text = await trigger(client)
            assert "LLM sampling result" in text and "Paris, of course." in text, text
            assert '"model": "client-model-1"' in text, text
            (params,) = sampler.asked  # the server's request, as it sent it
            assert params.system_prompt == "You are a helpful test server."
            assert params.max_tokens == 50 and params.temperature == 0.7
            assert params.messages[0].content.text.endswith("context: capital of France?")

            # an answer that is not an assistant's message never reaches the server
            sampler.answer = PARIS.model_copy(update={"role": "user"})
            text = await trigger(client)
            assert "sampling refused" in text and "Paris" not in text, text
            assert "not an assistant's message" in text, text

            # the client's own refusal is the server's error
            sampler.answer = types.ErrorData(code=-1, message="the user said no")
            text = await trigger(client)
            assert "sampling refused: the client refused: the user said no" in text, text
        decisions = [d for d, _ in sample_lines(tmp_path / "state")]
        assert decisions == ["allow", "sampled", "allow", "deny", "allow", "deny"], decisions
        reasons = [r for _, r in sample_lines(tmp_path / "state")]
        assert "client-model-1" in reasons[1], reasons

    anyio.run(main)


def test_refused_by_policy_and_asked_by_default(tmp_path: Path) -> None:
    sampler = Sampler()
    deny = ALLOW_ALL + f'[[profile.rules]]\ntools = "{SAMPLE}"\naction = "deny"\nreason = "no"\n'

    async def main() -> None:
        config, *args = serving(tmp_path, deny)
        async with gateway(config, tmp_path / "state", *args, sample=sampler) as client:
            text = await trigger(client)
            assert "sampling refused: denied by policy: no" in text, text
            assert not sampler.asked

        # no rule about sampling: WRITE asks; a client without elicitation cannot be
        # asked, so it is refused, saying how to allow it
        args = serving(tmp_path, ONLY_TOOLS)[1:]
        async with gateway(config, tmp_path / "state2", *args, sample=sampler) as client:
            text = await trigger(client)
            assert "sampling refused" in text and "nobody" in text, text
            assert SAMPLE in text, text  # the rule that allows it
            assert not sampler.asked

        # a client that can be asked approves it, then its model answers
        asked: list[types.ElicitRequestParams] = []

        async def approve(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            asked.append(params)
            return APPROVE

        state = tmp_path / "state3"
        async with gateway(config, state, *args, sample=sampler, elicit=approve) as client:
            text = await trigger(client)
            assert "Paris, of course." in text, text
            assert len(asked) == 1 and SAMPLE in asked[0].message, asked
            assert len(sampler.asked) == 1

    anyio.run(main)


def test_a_client_without_sampling_gets_a_refusal_at_once(tmp_path: Path) -> None:
    async def main() -> None:
        config, *args = serving(tmp_path)
        async with gateway(config, tmp_path / "state", *args) as client:
            text = await trigger(client)
            assert "sampling refused" in text and "declared no sampling" in text, text
            assert "--sampling-model" in text, text
        reasons = [r for d, r in sample_lines(tmp_path / "state") if d == "deny"]
        assert any("declared no sampling" in r for r in reasons), reasons

    anyio.run(main)


def completion(text: str) -> dict[str, Any]:
    """A Chat Completions response body."""
    message = {"role": "assistant", "content": text, "refusal": None, "annotations": []}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1767225600,
        "model": "local-model",
        "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None, "message": message}],
        "usage": {"prompt_tokens": 30, "completion_tokens": 4, "total_tokens": 34},
    }


@pytest.fixture
def provider() -> Any:
    server = FakeProvider()
    try:
        yield server
    finally:
        server.close()


def test_served_by_the_configured_model(tmp_path: Path, provider: FakeProvider) -> None:
    provider.queue(Reply(completion("Lyon? No: Paris.")))
    env = {"TOOLDECK_BASE_URL": provider.url + "/v1", "TOOLDECK_MAX_RETRIES": "0"}
    model = ["--sampling-model", "compatible:local-model", "--sampling-budget", "40"]

    async def main() -> None:
        config, *args = serving(tmp_path, ALLOW_SAMPLING, *model)
        async with gateway(config, tmp_path / "state", *args, env=env) as client:
            text = await trigger(client)  # a client without sampling: the gateway's model
            assert "Lyon? No: Paris." in text and '"model": "local-model"' in text, text
            (request,) = provider.requests
            body = request.body
            assert body["model"] == "local-model" and body["max_tokens"] == 40, body
            assert body["messages"][0] == {
                "role": "system",
                "content": "You are a helpful test server.",
            }
            assert "capital of France?" in str(body["messages"][1])
            # the budget (40 tokens) is spent (34): the next request is cut, then refused
            provider.queue(Reply(completion("again")))
            assert "again" in await trigger(client)
            text = await trigger(client)
            assert "sampling budget of 40 tokens is spent" in text, text
            assert len(provider.requests) == 2
        decisions = [d for d, _ in sample_lines(tmp_path / "state")]
        assert decisions[:2] == ["allow", "sampled"], decisions

    anyio.run(main)


def test_a_bad_sampling_model_is_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    config = tmp_path / "mcp.json"
    config.write_text('{"mcpServers": {}}')
    done = subprocess.run(
        [
            *(sys.executable, "-m", "tooldeck.cli", "serve", "--mcp", str(config)),
            *("--sampling-model", "nonsense", "--state", str(tmp_path / "s")),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.PIPE,
    )
    assert done.returncode == 2, done
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: --sampling-model: unknown model string 'nonsense'"), line


def test_over_http_only_its_own_client_and_never_a_guess(tmp_path: Path) -> None:
    """Two clients over HTTP: a request reaches the client whose call asked; while the
    other's call runs on the same server, which call asked cannot be told apart, so it is
    refused (never sent to a client that may not be the one asked)."""
    a, b = Sampler(), Sampler()

    async def main() -> None:
        config, *args = serving(tmp_path)
        with served_gateway(config, tmp_path / "state", *args) as url:
            async with http_client(url, sample=a) as ca, http_client(url, sample=b) as cb:
                assert "Paris, of course." in await trigger(cb)
                assert len(b.asked) == 1 and not a.asked
                long = {"duration": 4, "steps": 2}
                async with anyio.create_task_group() as tg:
                    tg.start_soon(ca.call_tool, "everything__trigger-long-running-operation", long)
                    await anyio.sleep(1.5)  # a's call is running on the same server
                    text = await trigger(cb)
                assert "sampling refused" in text and "Paris" not in text, text
                assert AMBIGUOUS in text, text
                assert len(b.asked) == 1 and not a.asked

                # b cancels its call while its model is asked: the request ends at once
                b.answer, b.entered = WAIT, anyio.Event()
                with anyio.fail_after(60):
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(trigger, cb)
                        await b.entered.wait()
                        tg.cancel_scope.cancel()
                why = await cancelled(SAMPLE, tmp_path / "state")
                assert why == ENDED, why
                assert "still here" in text_of(await cb.call_tool("everything__echo", ECHO))
        reasons = [r for d, r in sample_lines(tmp_path / "state") if d == "deny"]
        assert AMBIGUOUS in reasons, reasons

    anyio.run(main)


def test_a_client_cancelling_ends_a_waiting_question_at_once(tmp_path: Path) -> None:
    """The server waits 300 s for an answer (its timeout); the client cancels its call
    while its sampling callback (then its form) waits: the question ends at once, audited,
    and the gateway goes on serving."""
    entered = anyio.Event()
    ended: list[str] = []

    async def waits(context: Any, params: Any) -> Any:
        entered.set()
        try:
            await anyio.sleep_forever()
        finally:
            ended.append(type(params).__name__)

    async def cancelled_while_asked(client: Any, name: str, arguments: dict[str, Any]) -> None:
        nonlocal entered
        entered = anyio.Event()
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.call_tool, name, arguments)
                await entered.wait()
                tg.cancel_scope.cancel()  # the SDK client sends notifications/cancelled

    async def main() -> None:
        config = upstream(tmp_path, timeout=300)
        args = ["--core", "*", "--policy", str(write_policy(tmp_path, ALLOW_ALL))]
        state = tmp_path / "state"
        async with gateway(config, state, *args, sample=waits, elicit=waits) as client:
            await cancelled_while_asked(client, TRIGGER, {"prompt": "hi", "maxTokens": 5})
            assert await cancelled(SAMPLE, state) == ENDED
            await cancelled_while_asked(client, ASKED, {})
            assert await cancelled(QUESTION, state) == ENDED
            again = await client.call_tool("everything__echo", {"message": "still here"})
            assert "still here" in text_of(again)

    anyio.run(main)
