"""Faithful record: what the model is told is fixed when the tool returns.

And every call keeps exactly one output whatever ends the step: cancellation from
outside, a ``BaseException`` from a tool, a result JSON cannot encode.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import random
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tooldeck
from tooldeck import (
    Dispatcher,
    JsonPart,
    Protection,
    Session,
    Tool,
    ToolContext,
    ToolResult,
    Toolset,
    tool,
)
from tooldeck.approvals import PendingApproval
from tooldeck.errors import ResultEncodingError
from tooldeck.model import ModelRequest
from tooldeck.policy import PendingFiles
from tooldeck.policy._pending_json import decode_item, encode_item
from tooldeck.providers.anthropic import AnthropicModel
from tooldeck.providers.chat_completions import ChatCompletionsModel
from tooldeck.providers.openai_responses import OpenAIResponsesModel
from tooldeck.testing import ScriptedModel, call, reply
from tooldeck.transcript import AssistantMessage, Item, ToolCall, ToolOutput, UserMessage

EMPTY = {"type": "object", "properties": {}}


def schema_tool(name: str, fn: Callable[..., Any], **options: Any) -> Tool:
    return Tool.from_schema(name=name, description=name, json_schema=EMPTY, execute=fn, **options)


# -- the reproduction of the issue ------------------------------------------------------------


def test_outputs_are_the_values_at_return_time_and_none_is_null() -> None:
    state = {"n": 0}

    def inc(p: Any, ctx: ToolContext) -> None:
        state["n"] += 1

    model = ScriptedModel(
        [reply(call("get", {}, call_id="a"), call("inc", {}, call_id="b")), reply("done")]
    )
    tools = [schema_tool("get", lambda p, c: state), schema_tool("inc", inc)]
    result = asyncio.run(tooldeck.run(model, tools, "go"))
    assert result.tool_outputs[0].text == '{"n":0}'
    state["n"] = 5
    assert result.tool_outputs[0].text == '{"n":0}'
    assert result.tool_outputs[1].text == "null"
    # the request the model got after the step carries the same frozen texts
    sent = [i for i in model.requests[1].transcript if isinstance(i, ToolOutput)]
    assert [o.text for o in sent] == ['{"n":0}', "null"]


def test_empty_string_stays_empty_and_none_is_a_json_null() -> None:
    assert ToolResult.wrap("").text() == ""
    assert ToolResult.wrap(None).text() == "null"
    assert ToolResult.wrap(None).parts == (JsonPart(None),)


def test_a_frozen_result_cannot_be_changed() -> None:
    live = {"rows": [1, 2]}
    result = ToolResult.wrap(live)
    live["rows"].append(3)
    part = result.parts[0]
    assert isinstance(part, JsonPart)
    assert result.text() == '{"rows":[1,2]}' and part.value == {"rows": [1, 2]}
    part.value["rows"].append(99)  # a fresh copy: the part is untouched
    assert part.text == '{"rows":[1,2]}'
    with pytest.raises(AttributeError):
        result.content = "other"  # type: ignore[misc]
    details = {"seen": [1]}
    with_details = ToolResult("x", details=details)
    details["seen"].append(2)
    assert with_details.details == {"seen": [1]}


# -- random steps of stateful tools ---------------------------------------------------------


class Account:
    """A stateful object that tools read and mutate (like a trading account or a vehicle)."""

    def __init__(self) -> None:
        self.state: dict[str, Any] = {"balance": 0, "orders": [], "log": {"n": 0}}

    def view(self) -> dict[str, Any]:
        return self.state  # the live object, on purpose

    def deposit(self, amount: int) -> dict[str, Any]:
        self.state["balance"] += amount
        self.state["log"]["n"] += 1
        return self.state["log"]  # a live nested object

    def order(self, item: str) -> list[Any]:
        self.state["orders"].append(item)
        return self.state["orders"]  # a live list, changed by later calls


def account_tools(account: Account, sync: bool) -> list[Tool]:
    def view(p: dict[str, Any], ctx: ToolContext) -> Any:
        return account.view()

    def deposit(p: dict[str, Any], ctx: ToolContext) -> Any:
        return account.deposit(p["amount"])

    def order(p: dict[str, Any], ctx: ToolContext) -> Any:
        return account.order(p["item"])

    async def aview(p: dict[str, Any], ctx: ToolContext) -> Any:
        await asyncio.sleep(0)
        return account.view()

    async def adeposit(p: dict[str, Any], ctx: ToolContext) -> Any:
        await asyncio.sleep(0)
        return account.deposit(p["amount"])

    async def aorder(p: dict[str, Any], ctx: ToolContext) -> Any:
        return account.order(p["item"])

    amount = {"type": "object", "properties": {"amount": {"type": "integer"}}}
    item = {"type": "object", "properties": {"item": {"type": "string"}}}
    return [
        Tool.from_schema(
            name="view",
            description="v",
            json_schema=EMPTY,
            execute=view if sync else aview,
            read_only=True,
        ),
        Tool.from_schema(
            name="deposit",
            description="d",
            json_schema=amount,
            execute=deposit if sync else adeposit,
        ),
        Tool.from_schema(
            name="order", description="o", json_schema=item, execute=order if sync else aorder
        ),
    ]


STEP = st.lists(
    st.one_of(
        st.just(("view", {})),
        st.builds(lambda n: ("deposit", {"amount": n}), st.integers(-5, 5)),
        st.builds(lambda s: ("order", {"item": s}), st.text("abc", max_size=3)),
    ),
    min_size=1,
    max_size=6,
)


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(STEP, min_size=1, max_size=4), sync=st.booleans())
def test_random_steps_record_the_values_at_return_time(
    steps: list[list[tuple[str, dict[str, Any]]]], sync: bool
) -> None:
    # what calling the same methods directly gives, in the model's order
    direct = Account()
    expected: list[str] = []
    for step in steps:
        for name, args in step:
            value = getattr(direct, name)(*args.values())
            expected.append(dumps(value))

    account = Account()
    script = [reply(*(call(n, a) for n, a in step)) for step in steps] + [reply("done")]
    model = ScriptedModel(script)
    session = Session(model, account_tools(account, sync))
    asyncio.run(session.run("go"))
    account.state["orders"].append("later")  # after the turn: must change nothing
    account.state["log"]["n"] = -1
    recorded = [i.text for i in session.transcript if isinstance(i, ToolOutput)]
    assert recorded == expected
    # every request saw exactly the outputs as they were when their tools returned
    for request in model.requests:
        sent = [i.text for i in request.transcript if isinstance(i, ToolOutput)]
        assert sent == expected[: len(sent)]
    # persisted and read back: the same texts
    again = [decode_item(json.loads(json.dumps(encode_item(i)))) for i in session.transcript]
    assert [i.text for i in again if isinstance(i, ToolOutput)] == expected


def test_a_parallel_read_is_frozen_before_a_later_write_runs() -> None:
    state = {"n": 0}

    @tool(read_only=True)
    def read() -> dict[str, int]:
        """Read."""
        return state

    @tool
    def write() -> None:
        """Write."""
        state["n"] += 1

    model = ScriptedModel(
        [reply(call("read"), call("read"), call("write"), call("read")), reply("ok")]
    )
    result = asyncio.run(tooldeck.run(model, [read, write], "go"))
    assert [o.text for o in result.tool_outputs] == ['{"n":0}', '{"n":0}', "null", '{"n":1}']


def test_a_tool_that_changes_its_result_after_returning_changes_nothing() -> None:
    shared: dict[str, Any] = {"v": 1}

    async def sneaky(p: Any, ctx: ToolContext) -> Any:
        asyncio.get_running_loop().call_soon(shared.update, {"v": "changed later"})
        return shared

    result = asyncio.run(
        tooldeck.run(
            ScriptedModel([reply(call("sneaky")), reply("ok")]),
            [schema_tool("sneaky", sneaky)],
            "go",
        )
    )
    assert shared == {"v": "changed later"}
    assert result.tool_outputs[0].text == '{"v":1}'


# -- values JSON cannot encode --------------------------------------------------------------


class Opaque:
    pass


@pytest.mark.parametrize(
    ("value", "cause"),
    [
        ({(1, 2): "tuple key"}, "keys must be str"),
        ({"x": Opaque()}, "Opaque value cannot be encoded"),
        ({"raw": b"\xff\xfe"}, "bytes value cannot be encoded"),
        (None, "Circular reference"),  # filled in below: a cycle
    ],
)
def test_an_unencodable_result_is_that_calls_error_and_the_session_goes_on(
    value: Any, cause: str
) -> None:
    if value is None:
        value = []
        value.append(value)

    def bad(p: Any, ctx: ToolContext) -> Any:
        return value

    model = ScriptedModel(
        [reply(call("bad"), call("good")), reply("next"), reply(call("good")), reply("end")]
    )
    session = Session(model, [schema_tool("bad", bad), schema_tool("good", lambda p, c: "fine")])
    asyncio.run(session.run("one"))
    bad_out, good_out = [i for i in session.transcript if isinstance(i, ToolOutput)]
    assert bad_out.is_error and "ran, but its result cannot be recorded" in bad_out.text
    assert cause in bad_out.text and cause in bad_out.result.details["cause"]
    assert good_out.text == "fine"
    asyncio.run(session.run("two"))  # the next turn builds requests as usual
    assert session.transcript[-1].text == "end"  # type: ignore[union-attr]


class Raising(pydantic.BaseModel):
    a: int = 1

    @pydantic.computed_field
    @property
    def b(self) -> int:
        raise RuntimeError("b is not ready")


def test_a_value_whose_own_code_raises_is_unencodable_and_the_next_result_is_not() -> None:
    # a computed field raising RuntimeError: the documented ResultEncodingError, and the
    # thread's encoder is not left with the failed list marked as "being encoded"
    shared: list[Any] = [1, Raising()]
    with pytest.raises(ResultEncodingError, match="RuntimeError: b is not ready"):
        ToolResult.wrap(shared)
    shared.pop()
    assert ToolResult.wrap(shared).text() == "[1]"
    assert ToolResult.wrap({"again": shared}).text() == '{"again":[1]}'


def test_json_mode_values_are_encoded_the_way_pydantic_does() -> None:
    when = datetime.datetime(2026, 12, 1, 8, 30, tzinfo=datetime.UTC)
    ident = uuid.UUID(int=1)
    result = ToolResult.wrap({"when": when, "tags": {"a"}, "id": ident, "raw": b"ok"})
    assert json.loads(result.text()) == {
        "when": "2026-12-01T08:30:00Z",
        "tags": ["a"],
        "id": str(ident),
        "raw": "ok",
    }


def test_details_json_cannot_encode_are_an_error_and_a_waiting_step_can_be_saved(
    tmp_path: Path,
) -> None:
    def odd_details(p: Any, ctx: ToolContext) -> ToolResult:
        return ToolResult("done", details={"when": datetime.date(2026, 1, 2), "s": {1}})

    def broken_details(p: Any, ctx: ToolContext) -> ToolResult:
        return ToolResult("done", details={"obj": Opaque()})

    def ask_for(tool: Tool, params: Any, c: ToolCall) -> tooldeck.PolicyDecision:
        action = "ask" if tool.name == "needs_ok" else "allow"
        return tooldeck.PolicyDecision(action, "check")  # type: ignore[arg-type]

    async def later(requests: Any) -> Any:
        raise PendingApproval()

    store = PendingFiles(tmp_path)
    model = ScriptedModel([reply(call("odd"), call("broken"), call("needs_ok")), reply("after")])
    session = Session(
        model,
        [
            schema_tool("odd", odd_details, read_only=True),
            schema_tool("broken", broken_details, read_only=True),
            schema_tool("needs_ok", lambda p, c: "ok"),
        ],
        protect=Protection.policy(ask_for, approver=later),
        pending_store=store,
        session_id="s1",
    )
    waiting = asyncio.run(session.run("go"))
    assert waiting.waiting  # nothing ran: the step waits, and it was saved
    loaded = store.load("s1")
    assert loaded is not None
    approved = Session(
        model,
        session.tools,
        protect=Protection.policy(ask_for),
        pending_store=store,
        session_id="s1",
    )
    result = asyncio.run(approved.resume([tooldeck.ApprovalAnswer(True)]))
    odd, broken, ok = result.tool_outputs
    assert odd.text == "done" and odd.result.details == {"when": "2026-01-02", "s": [1]}
    assert broken.is_error and "cannot be recorded" in broken.text
    assert ok.text == "ok"


# -- BaseException from a tool ------------------------------------------------------------


@pytest.mark.parametrize("exc", [SystemExit(2), KeyboardInterrupt(), GeneratorExit()])
@pytest.mark.parametrize("sync", [True, False])
def test_a_base_exception_from_a_tool_is_its_error_output(exc: BaseException, sync: bool) -> None:
    def raise_it(p: Any, ctx: ToolContext) -> Any:
        raise exc

    async def araise_it(p: Any, ctx: ToolContext) -> Any:
        await asyncio.sleep(0)
        raise exc

    async def slow_ok(p: Any, ctx: ToolContext) -> str:
        await asyncio.sleep(0.02)
        return "sibling ok"

    tools = [
        schema_tool("bad", raise_it if sync else araise_it, read_only=True),
        schema_tool("ok", slow_ok, read_only=True),
    ]
    model = ScriptedModel([reply(call("bad"), call("ok"), call("bad")), reply("still here")])
    result = asyncio.run(tooldeck.run(model, tools, "go"))
    outputs = result.tool_outputs
    assert [o.is_error for o in outputs] == [True, False, True]
    assert f"bad failed: {type(exc).__name__}" in outputs[0].text
    assert outputs[1].text == "sibling ok"
    assert result.output == "still here"


def test_argparse_in_a_tool_does_not_end_the_process() -> None:
    import argparse

    @tool
    def cli(argv: list[str]) -> str:
        """Run a tiny command line."""
        parser = argparse.ArgumentParser(prog="cli", exit_on_error=True)
        parser.add_argument("--n", type=int, required=True)
        return str(parser.parse_args(argv).n)

    model = ScriptedModel([reply(call("cli", {"argv": ["--n", "x"]})), reply("ok")])
    result = asyncio.run(tooldeck.run(model, [cli], "go"))
    assert result.tool_outputs[0].is_error and "SystemExit" in result.tool_outputs[0].text


def test_a_tools_own_cancelled_error_is_its_output_not_the_runs() -> None:
    async def inner_cancel(p: Any, ctx: ToolContext) -> Any:
        task = asyncio.ensure_future(asyncio.sleep(10))
        await asyncio.sleep(0)
        task.cancel()
        return await task  # raises CancelledError, though nobody cancelled the run

    model = ScriptedModel([reply(call("c")), reply("after")])
    result = asyncio.run(tooldeck.run(model, [schema_tool("c", inner_cancel)], "go"))
    assert result.tool_outputs[0].is_error and "was cancelled" in result.tool_outputs[0].text
    assert result.output == "after"


# -- cancellation from outside ------------------------------------------------------------


def check_valid(transcript: Sequence[Item]) -> None:
    """Every call of every assistant message has exactly one output right after it."""
    for index, item in enumerate(transcript):
        if not isinstance(item, AssistantMessage) or not item.tool_calls:
            continue
        outputs: list[ToolOutput] = []
        for later in transcript[index + 1 :]:
            if not isinstance(later, ToolOutput):
                break
            outputs.append(later)
        assert sorted(o.call_id for o in outputs) == sorted(c.call_id for c in item.tool_calls)


def build_every_provider(transcript: Sequence[Item]) -> None:
    """Build the next request with each adapter (nothing is sent)."""
    request = ModelRequest([*transcript, UserMessage("and now?")], [], tooldeck.ModelSettings())
    chat = ChatCompletionsModel("m", "openai", api_key="x", base_url="http://127.0.0.1:9")
    chat.build_request(request)  # raises if a call has no answer
    body, _ = OpenAIResponsesModel("m", api_key="x", base_url="http://127.0.0.1:9").build_request(
        request
    )
    calls = [i["call_id"] for i in body["input"] if i.get("type") == "function_call"]
    outs = [i["call_id"] for i in body["input"] if i.get("type") == "function_call_output"]
    assert sorted(calls) == sorted(outs)
    body, _ = AnthropicModel("m", api_key="x", base_url="http://127.0.0.1:9").build_request(request)
    uses = [
        b["id"]
        for m in body["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_use"
    ]
    results = [
        b["tool_use_id"]
        for m in body["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]
    assert sorted(uses) == sorted(results)


def sleeper(name: str, seconds: float, **options: Any) -> Tool:
    async def run(p: Any, ctx: ToolContext) -> str:
        await asyncio.sleep(seconds)
        return f"{name} done"

    return schema_tool(name, run, **options)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_cancelling_the_run_at_a_random_point_leaves_a_valid_transcript(seed: int) -> None:
    rng = random.Random(seed)
    tools = [
        sleeper("fast", 0.001, read_only=True),
        sleeper("slow", 0.02, read_only=True),
        sleeper("write", 0.005),
    ]
    names = ["fast", "slow", "write"]
    script = [
        reply(*(call(rng.choice(names)) for _ in range(rng.randint(1, 4)))) for _ in range(3)
    ] + [reply("done")]
    session = Session(ScriptedModel(script), tools)

    async def main() -> None:
        try:
            async with asyncio.timeout(rng.uniform(0, 0.06)):
                await session.run("go")
        except TimeoutError:
            pass

    asyncio.run(main())
    check_valid(session.transcript)
    build_every_provider(session.transcript)


def test_cancel_mid_batch_keeps_finished_outputs_and_stops_the_rest() -> None:
    ran: list[str] = []

    async def quick(p: Any, ctx: ToolContext) -> str:
        ran.append("quick")
        return "quick result"

    async def long(p: Any, ctx: ToolContext) -> str:
        try:
            await asyncio.sleep(10)
        finally:
            ran.append("long stopped")
        return "never"

    tools = [
        schema_tool("quick", quick),
        schema_tool("long", long),
        schema_tool("after", quick),
    ]
    session = Session(ScriptedModel([reply(call("quick"), call("long"), call("after"))]), tools)

    async def main() -> None:
        task = asyncio.create_task(session.run("go"))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    outputs = [i for i in session.transcript if isinstance(i, ToolOutput)]
    assert [o.text for o in outputs] == [
        "quick result",
        "long was stopped: the turn was cancelled while it ran.",
        "Not executed: the turn was cancelled.",
    ]
    assert ran == ["quick", "long stopped"]
    build_every_provider(session.transcript)


def test_timeouts_and_abort_still_stop_a_call_that_runs_in_the_steps_task() -> None:
    async def hang(p: Any, ctx: ToolContext) -> str:
        await asyncio.sleep(3600)
        return "never"

    async def main() -> list[str]:
        dispatcher = Dispatcher(Toolset([schema_tool("hang", hang)]), timeout=0.05)
        result = await dispatcher.dispatch([ToolCall("a", "hang", "{}")])
        # the step's task carries no leftover cancellation
        await asyncio.sleep(0.01)
        return [o.text for o in result.outputs]

    assert asyncio.run(main()) == ["hang was stopped: timed out after 0.05s."]


def test_a_timeout_that_fires_as_the_tool_returns_leaves_no_stray_cancel() -> None:
    # the timer and the tool's own wake-up land on the same loop iteration
    async def just_in_time(p: Any, ctx: ToolContext) -> str:
        await asyncio.sleep(0.05)
        return "made it"

    async def main() -> list[str]:
        dispatcher = Dispatcher(Toolset([schema_tool("t", just_in_time)]), timeout=0.05)
        texts = []
        for _ in range(20):
            result = await dispatcher.dispatch([ToolCall("a", "t", "{}")])
            texts.append(result.outputs[0].text)
            await asyncio.sleep(0.001)  # would raise CancelledError if one were left over
        return texts

    texts = asyncio.run(main())
    assert set(texts) <= {"made it", "t was stopped: timed out after 0.05s."}


def test_events_a_tool_emits_arrive_before_its_call_finishes() -> None:
    seen: list[str] = []

    async def chatty(p: Any, ctx: ToolContext) -> str:
        ctx.emit("progress 1")
        ctx.emit("progress 2")
        return "ok"

    def threaded(p: Any, ctx: ToolContext) -> str:
        ctx.emit("from a thread")
        return "ok"

    bus = tooldeck.EventBus()
    bus.subscribe(lambda e: seen.append(getattr(e, "payload", e.type)))
    model = ScriptedModel([reply(call("chatty")), reply(call("threaded")), reply("done")])
    asyncio.run(
        tooldeck.run(
            model,
            [schema_tool("chatty", chatty), schema_tool("threaded", threaded)],
            "go",
            events=bus,
        )
    )
    first = seen.index("progress 1")
    assert seen[first : first + 3] == ["progress 1", "progress 2", "call_finished"]
    thread = seen.index("from a thread")
    assert seen[thread + 1] == "call_finished"


def test_a_policy_that_answers_nonsense_denies() -> None:
    ran: list[str] = []

    def odd_policy(tool: Tool, params: Any, c: ToolCall) -> Any:
        return "allow"  # not a PolicyDecision

    def work(p: Any, ctx: ToolContext) -> str:
        ran.append("work")
        return "done"

    async def main() -> list[str]:
        dispatcher = Dispatcher(Toolset([schema_tool("work", work)]), policy=odd_policy)
        result = await dispatcher.dispatch([ToolCall("a", "work", "{}")])
        return [o.text for o in result.outputs]

    assert asyncio.run(main()) == ["Denied: the policy gave no decision."]
    assert ran == []
