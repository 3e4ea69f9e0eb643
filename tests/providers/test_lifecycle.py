"""Closing adapters and sessions, event-loop switches, and run_sync, over real HTTP."""

from __future__ import annotations

import asyncio
import gc
import logging
import re
import socket
import threading
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

import tooldeck
from tooldeck import ModelRequest, Session, UserMessage
from tooldeck.model import Model
from tooldeck.providers import AnthropicModel, ChatCompletionsModel, OpenAIResponsesModel
from tooldeck.testing import ScriptedModel, reply

from .fake_server import FakeProvider, Reply


def answer(kind: str, text: str) -> Reply:
    if kind == "anthropic":
        return Reply(
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-6",
                "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 3, "output_tokens": 1},
            }
        )
    if kind == "responses":
        return Reply(
            {
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
                        "content": [{"type": "output_text", "text": text, "annotations": []}],
                    }
                ],
                "usage": {"input_tokens": 3, "output_tokens": 1, "total_tokens": 4},
            }
        )
    return Reply(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1767225600,
            "model": "gpt-4.1",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": text},
                }
            ],
        }
    )


KINDS = ("responses", "chat", "anthropic")


def make(kind: str, fake: FakeProvider, **options: Any) -> Any:
    options.setdefault("max_retries", 0)
    if kind == "responses":
        return OpenAIResponsesModel("gpt-5.4", api_key="k", base_url=fake.url + "/v1", **options)
    if kind == "chat":
        return ChatCompletionsModel("gpt-4.1", api_key="k", base_url=fake.url + "/v1", **options)
    return AnthropicModel("claude-sonnet-4-6", api_key="k", base_url=fake.url, **options)


def request() -> ModelRequest:
    return ModelRequest([UserMessage("hi")], [])


@pytest.fixture(autouse=True)
def _no_garbage_of_other_tests() -> None:
    # Unclosed SDK clients that earlier tests dropped close themselves from whatever loop
    # runs when they are collected; collect them now, outside any loop, where they are
    # silent, so that the noise checks below see only this test's clients.
    gc.collect()


def loop_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    """What a user would see: warnings and errors mentioning the closed loop."""
    return [
        r.getMessage() + repr(r.exc_info)
        for r in caplog.records
        if r.levelno >= logging.WARNING
        and "Event loop is closed" in (r.getMessage() + repr(r.exc_info))
    ]


@pytest.mark.parametrize("kind", KINDS)
def test_one_model_on_two_event_loops_without_noise(
    kind: str, fake_provider: FakeProvider, caplog: pytest.LogCaptureFixture
) -> None:
    """A second asyncio.run: a fresh client, the old one closed without "Event loop is
    closed" (it used to be logged as an unretrieved task, or to fail the second turn)."""
    caplog.set_level(logging.DEBUG)
    fake_provider.queue(answer(kind, "one"), answer(kind, "two"))
    model = make(kind, fake_provider)
    first = asyncio.run(tooldeck.run(model, [], "hi"))

    async def second_loop() -> tooldeck.RunResult:
        result = await tooldeck.run(model, [], "again")
        gc.collect()  # a dropped client's __del__ would schedule its close on this loop
        for _ in range(5):
            await asyncio.sleep(0)
        return result

    second = asyncio.run(second_loop())
    gc.collect()
    assert (first.output, second.output) == ("one", "two")
    assert loop_errors(caplog) == []
    asyncio.run(model.aclose())  # from a third loop: quiet too
    gc.collect()
    assert model.client.is_closed() and loop_errors(caplog) == []


@pytest.mark.parametrize("kind", KINDS)
def test_aclose_and_async_with_close_the_connections(
    kind: str, fake_provider: FakeProvider
) -> None:
    fake_provider.queue(answer(kind, "one"), answer(kind, "two"))

    async def main() -> list[str]:
        texts = []
        async with make(kind, fake_provider) as model:
            texts.append((await model.respond(request())).text)
            used = model.client
        assert used.is_closed()
        # still usable after aclose: the next request opens a new client
        texts.append((await model.respond(request())).text)
        assert model.client is not used
        await model.aclose()
        assert model.client.is_closed()
        await model.aclose()  # twice is fine
        return texts

    assert asyncio.run(main()) == ["one", "two"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_client_passed_in_is_never_closed(kind: str, fake_provider: FakeProvider) -> None:
    client: Any
    if kind == "anthropic":
        client = anthropic.AsyncAnthropic(api_key="k", base_url=fake_provider.url, max_retries=0)
        model: Any = AnthropicModel("claude-sonnet-4-6", client=client)
    else:
        client = openai.AsyncOpenAI(api_key="k", base_url=fake_provider.url + "/v1", max_retries=0)
        model = (
            OpenAIResponsesModel("gpt-5.4", client=client)
            if kind == "responses"
            else ChatCompletionsModel("gpt-4.1", client=client)
        )
    fake_provider.queue(answer(kind, "one"))

    async def main() -> str:
        async with model:
            text: str = (await model.respond(request())).text
        assert model.client is client and not client.is_closed()
        await client.close()
        return text

    assert asyncio.run(main()) == "one"


def test_aclose_on_another_loop_is_quiet(
    fake_provider: FakeProvider, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    fake_provider.queue(answer("chat", "one"))
    model = make("chat", fake_provider)
    asyncio.run(model.respond(request()))
    asyncio.run(model.aclose())  # its connections belong to a loop that is gone
    gc.collect()
    assert model.client.is_closed() and loop_errors(caplog) == []


# -- Session ownership -----------------------------------------------------------------------


class Closable(ScriptedModel):
    closed = 0

    async def aclose(self) -> None:
        self.closed += 1


def test_session_closes_only_what_it_was_told_to_own() -> None:
    async def main() -> tuple[int, int]:
        shared = Closable([reply("a")])
        async with Session(shared, []) as session:
            await session.run("x")
        owned = Closable([reply("b")])
        async with Session(owned, [], owns_model=True) as session:
            await session.run("y")
        return shared.closed, owned.closed

    assert asyncio.run(main()) == (0, 1)


def test_session_owning_a_model_without_aclose() -> None:
    async def main() -> str:
        async with Session(ScriptedModel([reply("done")]), [], owns_model=True) as session:
            return (await session.run("x")).output

    assert asyncio.run(main()) == "done"


# -- run_sync --------------------------------------------------------------------------------


def test_run_sync_reuses_one_loop_and_the_models_connections(
    fake_provider: FakeProvider, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    fake_provider.queue(answer("chat", "one"), answer("chat", "two"), answer("chat", "three"))
    model = make("chat", fake_provider)
    session = Session(model, [])
    assert session.run_sync("first").output == "one"
    client = model.client
    assert session.run_sync("second").output == "two"
    assert tooldeck.run_sync(model, [], "third").output == "three"
    assert model.client is client  # the same client on the same loop: no reconnect churn
    assert [type(i).__name__ for i in session.transcript] == [
        "UserMessage",
        "AssistantMessage",
        "UserMessage",
        "AssistantMessage",
    ]
    gc.collect()
    assert loop_errors(caplog) == []


def test_run_sync_refuses_inside_a_running_loop() -> None:
    session = Session(ScriptedModel([reply("never")]), [])

    async def main() -> None:
        with pytest.raises(RuntimeError) as info:
            session.run_sync("x")
        assert str(info.value) == (
            "run_sync() cannot be used inside a running event loop (Jupyter, async code): "
            "use `await session.run(...)` instead"
        )
        with pytest.raises(RuntimeError, match=r"use `await tooldeck.run\(...\)` instead"):
            tooldeck.run_sync(session.model, [], "x")

    asyncio.run(main())
    assert session.transcript == []  # nothing ran


def test_run_sync_from_threads() -> None:
    results: dict[int, str] = {}
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            model: Model = ScriptedModel([reply(f"answer {i}")])
            results[i] = tooldeck.run_sync(model, [], "x").output
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and results == {i: f"answer {i}" for i in range(8)}


# -- the examples of docs/providers.md -------------------------------------------------------

DOCS = Path(__file__).resolve().parents[2] / "docs" / "providers.md"


def test_the_providers_doc_examples_run(
    fake_provider: FakeProvider, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text = DOCS.read_text().split("\n## Errors", 1)[1]  # the stateful example runs elsewhere
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 2
    monkeypatch.delenv("TOOLDECK_MAX_RETRIES", raising=False)
    monkeypatch.setenv("TOOLDECK_BASE_URL", fake_provider.url + "/v1")
    fake_provider.queue(answer("chat", "hello from run_sync"), answer("chat", "hello, session"))
    for block in blocks:
        exec(compile(block, str(DOCS), "exec"), {"__name__": "docs_example"})
    assert capsys.readouterr().out == "hello from run_sync\nhello, session\n"
    # the except branch: nothing listens there, the SDK retries once, then one line
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("TOOLDECK_BASE_URL", f"http://127.0.0.1:{port}/v1")
    exec(compile(blocks[0], str(DOCS), "exec"), {"__name__": "docs_example"})
    assert capsys.readouterr().out == (
        f"compatible server model 'qwen3': cannot connect to http://127.0.0.1:{port}/v1/chat/"
        "completions (connection refused) after 1 retry; check that the server is up and the "
        "address (base_url or TOOLDECK_BASE_URL), or try again\n"
    )
