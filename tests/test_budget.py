"""Budgets (issue 34, item 4): requests, tokens, tool calls and cost, per run and per
session, checked before each model request and before a step's calls are dispatched; a
turn past its budget ends with stop reason ``budget``, the usage so far, and one output
per call."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import tooldeck
from tooldeck import ApprovalAnswer, Protection, Session, StopReason, Toolset, tool
from tooldeck.approvals import PendingApproval
from tooldeck.budget import Budget, calls_made, per_million
from tooldeck.testing import ScriptedModel, call, reply
from tooldeck.transcript import AssistantMessage, ToolOutput, Usage

RAN: list[str] = []


@tool(read_only=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    RAN.append(f"add {a} {b}")
    return a + b


TOOLS = Toolset([add])


def adding(n: int = 1, *, usage: Usage | None = None) -> AssistantMessage:
    return reply(*(call("add", {"a": i, "b": 1}) for i in range(n)), usage=usage)


def one_output_per_call(items: list[Any]) -> None:
    asked = [c.call_id for m in items if isinstance(m, AssistantMessage) for c in m.tool_calls]
    answered = [o.call_id for o in items if isinstance(o, ToolOutput)]
    assert sorted(asked) == sorted(answered)


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


def test_requests_limit_ends_the_turn_before_the_next_request() -> None:
    model = ScriptedModel([adding(), adding(), adding(), reply("done")])
    session = Session(model, TOOLS, budget=Budget(requests=2))
    result = session.run_sync("go")
    assert result.stop_reason is StopReason.BUDGET
    assert result.reason == "budget: the session's requests limit (2) reached: 2"
    assert len(model.requests) == 2 and result.usage.requests == 2
    assert result.tool_calls == 2 and RAN == ["add 0 1", "add 0 1"]
    one_output_per_call(result.items)


def test_tool_call_limit_runs_none_of_a_step_that_would_pass_it() -> None:
    model = ScriptedModel([adding(1), adding(3), reply("done")])
    result = Session(model, TOOLS).run_sync("go", budget=Budget(tool_calls=3))
    assert result.stop_reason is StopReason.BUDGET
    assert "tool-call limit (3) would be exceeded: 1 made, 3 more asked for" in result.reason
    assert RAN == ["add 0 1"]  # the second step's three calls never ran
    outputs = result.tool_outputs
    assert len(outputs) == 4 and all(o.is_error for o in outputs[1:])
    assert outputs[1].text.startswith("Not executed: budget: the run's tool-call limit")
    one_output_per_call(result.items)
    assert result.tool_calls == 1


def test_a_response_past_a_token_limit_has_its_calls_not_run() -> None:
    big = Usage(input_tokens=900, output_tokens=200, requests=1)
    model = ScriptedModel([adding(2, usage=big), reply("done")])
    result = tooldeck.run_sync(model, TOOLS, "go", budget=Budget(total_tokens=1000))
    assert result.stop_reason is StopReason.BUDGET
    assert result.reason == "budget: the session's total tokens limit (1000) exceeded: 1100"
    assert RAN == [] and result.usage == big
    one_output_per_call(result.items)


@pytest.mark.parametrize(
    ("limit", "field"),
    [
        (Budget(input_tokens=20), "input tokens"),
        (Budget(output_tokens=10), "output tokens"),
        (Budget(total_tokens=30), "total tokens"),
    ],
)
def test_each_token_limit_is_checked_before_a_request(limit: Budget, field: str) -> None:
    # every scripted response uses 10 input and 5 output tokens
    model = ScriptedModel([adding(), adding(), adding(), reply("done")])
    result = Session(model, TOOLS).run_sync("go", budget=limit)
    assert result.stop_reason is StopReason.BUDGET
    assert f"the run's {field} limit" in result.reason and "reached" in result.reason
    assert len(model.requests) == 2
    one_output_per_call(result.items)


def test_the_session_budget_counts_every_turn_and_a_run_budget_only_its_own() -> None:
    model = ScriptedModel([adding(), reply("one"), reply("two"), adding(), reply("three")])
    session = Session(model, TOOLS, budget=Budget(requests=4, tool_calls=5))
    first = session.run_sync("first", budget=Budget(requests=2))
    assert first.stop_reason is StopReason.END_TURN and first.usage.requests == 2
    second = session.run_sync("second", budget=Budget(requests=1))
    assert second.stop_reason is StopReason.END_TURN and second.output == "two"
    third = session.run_sync("third", budget=Budget(requests=5))
    assert third.stop_reason is StopReason.BUDGET
    assert third.reason == "budget: the session's requests limit (4) reached: 4"
    assert session.usage.requests == 4
    one_output_per_call(session.transcript)


def test_a_streamed_turn_stops_at_its_budget_too() -> None:
    model = ScriptedModel([adding(), adding(), reply("done")])

    async def main() -> tooldeck.RunResult:
        stream = Session(model, TOOLS).stream("go", budget=Budget(requests=1))
        async for _ in stream:
            pass
        assert stream.result is not None
        return stream.result

    result = asyncio.run(main())
    assert result.stop_reason is StopReason.BUDGET and result.usage.requests == 1


def test_cost_from_a_price_table() -> None:
    prices = per_million({"scripted": (1000.0, 2000.0)})  # 10 in + 5 out = $0.02 a step
    model = ScriptedModel([adding(), adding(), adding(), reply("done")])
    result = Session(model, TOOLS).run_sync("go", budget=Budget(cost=0.05, prices=prices))
    assert result.stop_reason is StopReason.BUDGET
    assert result.cost == Decimal("0.06")  # the third response went past: its call not run
    assert result.reason == "budget: the run's cost in dollars limit (0.05) exceeded: 0.06"
    assert RAN == ["add 0 1", "add 0 1"]
    one_output_per_call(result.items)


def test_a_cost_limit_that_cannot_be_checked_stops_the_turn() -> None:
    # the scripted model has no price in genai-prices' table
    model = ScriptedModel([adding(), reply("done")])
    result = Session(model, TOOLS).run_sync("go", budget=Budget(cost=1))
    assert result.stop_reason is StopReason.BUDGET
    assert "no price is known for model 'scripted'" in result.reason
    assert "Budget(prices=...)" in result.reason and RAN == []
    one_output_per_call(result.items)


def test_without_a_budget_nothing_is_priced_and_calls_are_counted() -> None:
    result = Session(ScriptedModel([adding(2), reply("3")]), TOOLS).run_sync("go")
    assert result.cost is None and result.tool_calls == 2
    assert calls_made(result.items) == 2


def test_a_resumed_turn_counts_the_calls_it_made_before_it_waited() -> None:
    def ask_launch(t: Any, params: Any, c: Any) -> tooldeck.PolicyDecision:
        action = "ask" if t.name == "launch" else "allow"
        return tooldeck.PolicyDecision(action, "check")  # type: ignore[arg-type]

    async def later(requests: Any) -> Any:
        raise PendingApproval()

    @tool
    def launch() -> str:
        """Launch."""
        RAN.append("launch")
        return "launched"

    model = ScriptedModel([adding(), reply(call("launch", {})), adding(), adding(), reply("ok")])
    session = Session(
        model, Toolset([add, launch]), protect=Protection.policy(ask_launch, approver=later)
    )
    waiting = session.run_sync("go", budget=Budget(tool_calls=3))
    assert waiting.waiting and waiting.tool_calls == 2
    done = asyncio.run(session.resume([ApprovalAnswer(True)], budget=Budget(tool_calls=3)))
    assert done.stop_reason is StopReason.BUDGET
    assert "3 made, 1 more asked for" in done.reason and done.tool_calls == 3
    assert RAN == ["add 0 1", "launch", "add 0 1"]
    one_output_per_call(session.transcript)


@pytest.mark.parametrize(
    "bad",
    [
        {"requests": -1},
        {"tool_calls": True},
        {"total_tokens": 1.5},
        {"cost": -0.01},
        {"cost": float("nan")},
        {"cost": "1"},
    ],
)
def test_a_bad_limit_is_one_line(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"^Budget\(") as raised:
        Budget(**bad)
    assert "\n" not in str(raised.value)


@given(
    value=st.one_of(
        st.integers(-(10**20), 10**20),
        st.floats(allow_nan=True, allow_infinity=True),
        st.booleans(),
        st.none(),
        st.text(max_size=5),
    ),
    name=st.sampled_from(
        ["requests", "input_tokens", "output_tokens", "total_tokens", "tool_calls", "cost"]
    ),
)
def test_any_limit_is_taken_as_given_or_refused_in_one_line(value: Any, name: str) -> None:
    """A whole number >= 0 (or, for cost, any finite number >= 0) or None is a limit; any
    other value is one ValueError line naming the limit."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    ok = value is None or (
        number
        and value >= 0
        and (
            isinstance(value, int)
            or (name == "cost" and value == value and abs(value) != float("inf"))
        )
    )
    if ok:
        made = Budget(**{name: value})
        got = getattr(made, name)
        assert got == (
            None if value is None else (Decimal(str(value)) if name == "cost" else value)
        )
    else:
        with pytest.raises(ValueError, match=rf"^Budget\({name}=") as raised:
            Budget(**{name: value})
        assert "\n" not in str(raised.value)
