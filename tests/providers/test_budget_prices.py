"""A cost budget priced from genai-prices' table (the ``prices`` extra), with the official
SDKs over real HTTP against the local fake provider: the cost is the table's price of
the usage each provider reports (Anthropic's cache tokens counted as input)."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from typing import Any

from tooldeck import Session, StopReason, Toolset, tool
from tooldeck.budget import Budget, genai_price
from tooldeck.providers.anthropic import AnthropicModel
from tooldeck.providers.chat_completions import ChatCompletionsModel
from tooldeck.transcript import AssistantMessage, ToolOutput

from .fake_server import FakeProvider, Reply

RAN: list[int] = []


@tool(read_only=True)
def double(n: int) -> int:
    """Double a number."""
    RAN.append(n)
    return 2 * n


def completion(n: int | None, reply_id: int) -> Reply:
    message: dict[str, Any] = {"role": "assistant", "content": None if n is not None else "ok"}
    if n is not None:
        message["tool_calls"] = [
            {
                "id": f"call_{reply_id}",
                "type": "function",
                "function": {"name": "double", "arguments": f'{{"n":{n}}}'},
            }
        ]
    return Reply(
        {
            "id": f"chatcmpl-{reply_id}",
            "object": "chat.completion",
            "created": 1767225600,
            "model": "gpt-4.1",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls" if n is not None else "stop",
                    "message": message,
                }
            ],
            # gpt-4.1: $2 in, $8 out per million: 80 in + 20 out = $0.00032
            "usage": {"prompt_tokens": 80, "completion_tokens": 20, "total_tokens": 100},
        }
    )


def test_openai_cost_from_the_price_table_ends_the_turn(fake_provider: FakeProvider) -> None:
    RAN.clear()
    fake_provider.queue(completion(1, 1), completion(2, 2), completion(3, 3), completion(None, 4))

    async def main() -> Any:
        model = ChatCompletionsModel(
            "gpt-4.1", "openai", api_key="test", base_url=fake_provider.url + "/v1", max_retries=0
        )
        async with Session(model, Toolset([double]), owns_model=True) as session:
            return await session.run("go", budget=Budget(cost=Decimal("0.0007")))

    result = asyncio.run(main())
    assert result.stop_reason is StopReason.BUDGET
    assert result.cost == Decimal("0.00096")
    assert result.reason == "budget: the run's cost in dollars limit (0.0007) exceeded: 0.00096"
    assert RAN == [1, 2]  # the third response went past the limit: its call was not run
    last = result.tool_outputs[-1]
    assert isinstance(last, ToolOutput) and last.text.startswith("Not executed: budget")
    assert len(fake_provider.bodies()) == 3


def test_anthropic_cache_tokens_are_priced_as_input(fake_provider: FakeProvider) -> None:
    usage = {
        "input_tokens": 100,
        "output_tokens": 50,
        "cache_creation_input_tokens": 1000,
        "cache_read_input_tokens": 10000,
    }
    fake_provider.queue(
        Reply(
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-6",
                "content": [{"type": "text", "text": "hello"}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": usage,
            }
        )
    )

    async def main() -> Any:
        model = AnthropicModel(
            "claude-sonnet-4-6", api_key="test", base_url=fake_provider.url, max_retries=0
        )
        async with Session(model, owns_model=True) as session:
            return await session.run("hi", budget=Budget(cost=1))

    result = asyncio.run(main())
    assert result.stop_reason is StopReason.END_TURN
    message = result.last_message
    assert isinstance(message, AssistantMessage)
    # claude-sonnet-4-6: $3 in, $15 out, $0.30 cache read, $3.75 cache write per million
    expected = (
        Decimal(100 * 3) + 50 * 15 + Decimal("0.30") * 10000 + Decimal("3.75") * 1000
    ) / 1_000_000
    assert genai_price(message) == expected == result.cost
