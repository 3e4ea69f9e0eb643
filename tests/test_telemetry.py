"""Traces and metrics of turns on the OpenTelemetry GenAI conventions, asserted with the
SDK's in-memory exporter: the exact span tree, names, kinds and attributes of a plain
turn, parallel and sequential calls, an error, a denial, an approval, a timeout, an
abort, a sub-agent, and that no content is recorded unless capture is on."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from opentelemetry.trace import SpanKind, StatusCode

import tooldeck
from test_telemetry_support import Recorded, attrs, events
from tooldeck import Protection, Session, Toolset, telemetry
from tooldeck.agents.delegation import delegate_task_tool
from tooldeck.agents.toolkits import AgentDefinition, ToolkitManifest
from tooldeck.approvals import ApprovalAnswer, ApprovalRequest, PolicyDecision
from tooldeck.context import AbortSignal, ToolContext
from tooldeck.dispatch import Dispatcher
from tooldeck.errors import MissingExtra
from tooldeck.telemetry.tracing import UNTRACED
from tooldeck.testing import ScriptedModel, call, reply
from tooldeck.transcript import StopReason, ToolCall, Usage

pytest_plugins = ["test_telemetry_support"]

OK, ERROR = StatusCode.UNSET, StatusCode.ERROR
SECRET = "s3cr3t-pineapple"


@tooldeck.tool(read_only=True)
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tooldeck.tool()
async def write_note(text: str) -> str:
    """Write a note (a sequential tool)."""
    await asyncio.sleep(0)
    return f"wrote {text}"


@tooldeck.tool(read_only=True)
async def explode(reason: str) -> str:
    """Always fails."""
    raise ValueError(f"boom: {reason}")


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def model_of(*turns: Any) -> ScriptedModel:
    return ScriptedModel(list(turns))


def turn_attrs(session_id: str, **extra: Any) -> dict[str, Any]:
    base = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": "scripted",
        "gen_ai.request.model": "scripted",
        "gen_ai.conversation.id": session_id,
        "tooldeck.session.id": session_id,
        "tooldeck.turn.streamed": False,
    }
    return {**base, **extra}


def chat_attrs(step: int, finish: str, calls: int, **extra: Any) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "scripted",
        "gen_ai.request.model": "scripted",
        "tooldeck.step": step,
        "gen_ai.response.model": "scripted",
        "gen_ai.response.finish_reasons": (finish,),
        "tooldeck.response.tool_calls": calls,
        "gen_ai.usage.input_tokens": 10,
        "gen_ai.usage.output_tokens": 5,
        **extra,
    }


def tool_attrs(name: str, call_id: str, outcome: str, **extra: Any) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": "function",
        "tooldeck.tool.outcome": outcome,
        **extra,
    }


# -- a plain turn --------------------------------------------------------------------------------
def test_a_plain_turn_is_one_invoke_agent_span_with_one_chat_span(otel: Recorded) -> None:
    model = model_of(reply("hello", usage=Usage(7, 3, cache_read_tokens=2, requests=1)))
    result = run(tooldeck.run(model, [add], "hi", session_id="s-plain"))
    assert result.output == "hello"
    assert otel.tree() == (("invoke_agent", (("chat scripted", ()),)),)
    turn, chat = otel.one("invoke_agent"), otel.one("chat scripted")
    assert turn.kind is SpanKind.INTERNAL and chat.kind is SpanKind.CLIENT
    assert attrs(turn) == turn_attrs(
        "s-plain",
        **{
            "tooldeck.turn.stop_reason": "end_turn",
            "tooldeck.turn.steps": 1,
            "gen_ai.usage.input_tokens": 7,
            "gen_ai.usage.output_tokens": 3,
            "gen_ai.usage.cache_read.input_tokens": 2,
        },
    )
    assert attrs(chat) == chat_attrs(
        1,
        "stop",
        0,
        **{
            "gen_ai.usage.input_tokens": 7,
            "gen_ai.usage.output_tokens": 3,
            "gen_ai.usage.cache_read.input_tokens": 2,
        },
    )
    assert turn.status.status_code is OK and chat.status.status_code is OK
    assert chat.context.trace_id == turn.context.trace_id


def test_request_settings_and_the_response_id_are_on_the_chat_span(otel: Recorded) -> None:
    from dataclasses import replace

    from tooldeck.model import ModelSettings

    message = replace(reply("ok"), response_id="resp_42", model="scripted-2024")
    session = Session(
        model_of(message),
        [add],
        session_id="s-settings",
        settings=ModelSettings(max_output_tokens=300, temperature=0.5),
    )
    run(session.run("hi"))
    chat = attrs(otel.one("chat scripted"))
    assert chat["gen_ai.request.max_tokens"] == 300
    assert chat["gen_ai.request.temperature"] == 0.5
    assert chat["gen_ai.response.id"] == "resp_42"
    assert chat["gen_ai.response.model"] == "scripted-2024"


# -- calls ---------------------------------------------------------------------------------------
def test_parallel_calls_are_siblings_under_the_turn_and_overlap(otel: Recorded) -> None:
    both = asyncio.Event()
    arrived: list[str] = []

    @tooldeck.tool(read_only=True)
    async def meet(name: str) -> str:
        """Wait until both calls are running."""
        arrived.append(name)
        if len(arrived) == 2:
            both.set()
        await both.wait()
        return name

    model = model_of(
        reply(call("meet", {"name": "a"}, call_id="c1"), call("meet", {"name": "b"}, call_id="c2")),
        reply("done"),
    )
    run(tooldeck.run(model, [meet], "go", session_id="s-par"))
    assert otel.tree() == (
        (
            "invoke_agent",
            (
                ("chat scripted", ()),
                ("execute_tool meet", ()),
                ("execute_tool meet", ()),
                ("chat scripted", ()),
            ),
        ),
    )
    a, b = sorted(otel.named("execute_tool meet"), key=lambda s: s.start_time or 0)
    turn = otel.one("invoke_agent")
    for span, cid in ((a, "c1"), (b, "c2")):
        assert span.parent is not None and span.parent.span_id == turn.context.span_id
        assert attrs(span) == tool_attrs(
            "meet",
            cid,
            "ok",
            **{"tooldeck.tool.tier": "STANDARD", "tooldeck.tool.execution_mode": "parallel"},
        )
    assert a.end_time is not None and b.end_time is not None
    assert (b.start_time or 0) < a.end_time and (a.start_time or 0) < b.end_time  # overlap


def test_sequential_calls_do_not_overlap_and_each_is_a_child_of_the_turn(otel: Recorded) -> None:
    model = model_of(
        reply(
            call("write_note", {"text": "one"}, call_id="w1"),
            call("write_note", {"text": "two"}, call_id="w2"),
        ),
        reply("done"),
    )
    run(tooldeck.run(model, [write_note], "go", session_id="s-seq"))
    first, second = sorted(otel.named("execute_tool write_note"), key=lambda s: s.start_time or 0)
    turn = otel.one("invoke_agent")
    assert {first.parent.span_id, second.parent.span_id} == {turn.context.span_id}  # type: ignore[union-attr]
    assert first.end_time is not None and first.end_time <= (second.start_time or 0)
    assert attrs(first)["gen_ai.tool.call.id"] == "w1"
    assert attrs(second)["tooldeck.tool.execution_mode"] == "sequential"
    assert attrs(second)["tooldeck.tool.tier"] == "WRITE"


def test_a_failing_tool_has_an_error_span_with_its_type_but_not_its_message(
    otel: Recorded,
) -> None:
    model = model_of(reply(call("explode", {"reason": SECRET}, call_id="x1")), reply("sorry"))
    run(tooldeck.run(model, [explode], "go", session_id="s-err"))
    span = otel.one("execute_tool explode")
    assert span.status.status_code is ERROR
    assert attrs(span) == tool_attrs(
        "explode",
        "x1",
        "error",
        **{
            "tooldeck.tool.tier": "STANDARD",
            "tooldeck.tool.execution_mode": "parallel",
            "error.type": "ValueError",
        },
    )
    assert span.events == ()  # no exception event: its message would be content
    assert otel.one("invoke_agent").status.status_code is OK  # the turn itself went on


def test_unknown_and_invalid_calls_get_a_span_saying_why(otel: Recorded) -> None:
    model = model_of(
        reply(
            call("nope", {}, call_id="u1"),
            call("add", {"a": "x"}, call_id="v1"),
            call("add", {"a": 1, "b": 2}, call_id="ok1"),
        ),
        reply("done"),
    )
    run(tooldeck.run(model, [add], "go", session_id="s-bad"))
    by_id = {attrs(s)["gen_ai.tool.call.id"]: s for s in otel.spans if s.name.startswith("exec")}
    assert attrs(by_id["u1"])["error.type"] == "unknown_tool"
    assert attrs(by_id["u1"])["tooldeck.tool.outcome"] == "error"
    assert attrs(by_id["v1"])["error.type"] == "invalid_arguments"
    assert attrs(by_id["ok1"])["tooldeck.tool.outcome"] == "ok"
    assert by_id["u1"].name == "execute_tool nope"


def test_repairs_are_listed_on_the_call_span(otel: Recorded) -> None:
    model = model_of(reply(call("add", '{"a": 1, "b": 2,}', call_id="r1")), reply("done"))
    run(tooldeck.run(model, [add], "go", session_id="s-rep"))
    span = attrs(otel.one("execute_tool add"))
    assert span["tooldeck.tool.repairs"] == ("trailing_commas",)
    assert span["tooldeck.tool.outcome"] == "ok"


# -- policy and approvals --------------------------------------------------------------------------
def deny_writes(tool: Any, params: Any, call: ToolCall) -> PolicyDecision:
    if tool.name == "write_note":
        return PolicyDecision("deny", "deny write_note", "session")
    return PolicyDecision("allow", "reads are fine", "mode")


def test_a_denied_call_has_a_span_with_the_policy_decision_event(otel: Recorded) -> None:
    model = model_of(
        reply(
            call("write_note", {"text": SECRET}, call_id="d1"),
            call("add", {"a": 1, "b": 2}, call_id="a1"),
        ),
        reply("done"),
    )
    run(
        tooldeck.run(
            model,
            [write_note, add],
            "go",
            session_id="s-deny",
            protect=Protection.policy(deny_writes),
        )
    )
    assert otel.tree() == (  # the denial is recorded when it was decided: before add ran
        (
            "invoke_agent",
            (
                ("chat scripted", ()),
                ("execute_tool write_note", ()),
                ("execute_tool add", ()),
                ("chat scripted", ()),
            ),
        ),
    )
    denied = otel.one("execute_tool write_note")
    assert denied.status.status_code is ERROR
    assert attrs(denied) == tool_attrs(
        "write_note",
        "d1",
        "denied",
        **{
            "tooldeck.tool.tier": "WRITE",
            "tooldeck.tool.execution_mode": "sequential",
            "error.type": "denied",
        },
    )
    assert events(denied) == [
        (
            "tooldeck.policy.decision",
            {
                "tooldeck.policy.action": "deny",
                "tooldeck.policy.level": "session",
                "tooldeck.policy.rule": "deny write_note",
            },
        )
    ]
    assert denied.start_time == denied.end_time  # it never ran
    allowed = otel.one("execute_tool add")
    assert events(allowed)[0][1]["tooldeck.policy.action"] == "allow"
    assert attrs(allowed)["tooldeck.tool.outcome"] == "ok"


def ask_for_writes(tool: Any, params: Any, call: ToolCall) -> PolicyDecision:
    if tool.name == "write_note":
        return PolicyDecision("ask", "write_note is WRITE: ask", "tier")
    return PolicyDecision("allow", "fine", "mode")


def test_an_approved_call_has_an_approval_span_and_answer_events(otel: Recorded) -> None:
    async def approver(requests: Any) -> list[ApprovalAnswer]:
        await asyncio.sleep(0)
        return [ApprovalAnswer(True) for _ in requests]

    model = model_of(reply(call("write_note", {"text": "hi"}, call_id="w1")), reply("done"))
    run(
        tooldeck.run(
            model,
            [write_note],
            "go",
            session_id="s-ask",
            protect=Protection.policy(ask_for_writes, approver=approver),
        )
    )
    assert otel.tree() == (
        (
            "invoke_agent",
            (
                ("chat scripted", ()),
                ("tooldeck.approval", ()),
                ("execute_tool write_note", ()),
                ("chat scripted", ()),
            ),
        ),
    )
    approval = otel.one("tooldeck.approval")
    assert attrs(approval) == {
        "tooldeck.approval.calls": 1,
        "tooldeck.approval.tools": ("write_note",),
        "tooldeck.approval.outcome": "approved",
    }
    answered = {
        "gen_ai.tool.call.id": "w1",
        "tooldeck.approval.approved": True,
        "tooldeck.approval.edited": False,
    }
    assert events(approval) == [("tooldeck.approval.answered", answered)]
    span = otel.one("execute_tool write_note")
    assert [e[0] for e in events(span)] == [
        "tooldeck.policy.decision",
        "tooldeck.approval.requested",
        "tooldeck.approval.answered",
    ]
    assert events(span)[1][1] == {"tooldeck.policy.rule": "write_note is WRITE: ask"}
    assert events(span)[2][1] == answered
    assert attrs(span)["tooldeck.tool.outcome"] == "ok"
    assert approval.end_time is not None and approval.end_time <= (span.start_time or 0)


def test_a_call_denied_at_approval_is_counted_denied(otel: Recorded) -> None:
    async def approver(requests: Any) -> list[ApprovalAnswer]:
        return [ApprovalAnswer(False, "no") for _ in requests]

    model = model_of(reply(call("write_note", {"text": "hi"}, call_id="w1")), reply("done"))
    run(
        tooldeck.run(
            model,
            [write_note],
            "go",
            session_id="s-no",
            protect=Protection.policy(ask_for_writes, approver=approver),
        )
    )
    assert attrs(otel.one("tooldeck.approval"))["tooldeck.approval.outcome"] == "denied"
    span = otel.one("execute_tool write_note")
    assert attrs(span)["tooldeck.tool.outcome"] == "denied"
    assert events(span)[-1][1]["tooldeck.approval.approved"] is False
    calls = otel.points("tooldeck.tool.calls")
    assert [(a["tooldeck.tool.outcome"], p.value) for a, p in calls] == [("denied", 1)]


def test_the_approvers_identity_is_recorded_only_when_configured(
    otel: Recorded, tmp_path: Any
) -> None:
    from tooldeck.policy import SessionPolicy

    def turn(session_id: str) -> None:
        policy = SessionPolicy(session_id=session_id, directory=tmp_path)  # WRITE tools ask

        async def ask(requests: Any) -> list[ApprovalAnswer]:
            return [ApprovalAnswer(True) for _ in requests]

        model = model_of(reply(call("write_note", {"text": "hi"}, call_id="w1")), reply("done"))
        run(
            tooldeck.run(
                model,
                [write_note],
                "go",
                session_id=session_id,
                protect=Protection.policy(policy, approver=policy.approver(ask, who="alice")),
            )
        )

    turn("s-anon")
    answered = [e for e in events(otel.one("tooldeck.approval"))]
    assert answered and all("tooldeck.approval.by" not in a for _, a in answered)
    assert "alice" not in json.dumps(
        [attrs(s) for s in otel.spans] + [events(s) for s in otel.spans]
    )
    otel.exporter.clear()
    telemetry.configure(record_approver=True)
    turn("s-named")
    answered = events(otel.one("tooldeck.approval"))
    assert answered[0][1]["tooldeck.approval.by"] == "alice"
    assert events(otel.one("execute_tool write_note"))[-1][1]["tooldeck.approval.by"] == "alice"


def test_a_step_waiting_for_approval_ends_its_approval_span_pending(otel: Recorded) -> None:
    from tooldeck.approvals import PendingApproval

    async def later(requests: Any) -> list[ApprovalAnswer]:
        raise PendingApproval()

    session = Session(
        model_of(reply(call("write_note", {"text": "hi"}, call_id="w1")), reply("done")),
        [write_note],
        session_id="s-wait",
        protect=Protection.policy(ask_for_writes, approver=later),
    )
    result = run(session.run("go"))
    assert result.waiting
    approval = otel.one("tooldeck.approval")
    assert attrs(approval)["tooldeck.approval.outcome"] == "pending"
    assert [e[0] for e in events(approval)] == ["tooldeck.approval.pending"]
    assert otel.named("execute_tool write_note") == []  # it has not run, nor been refused
    otel.exporter.clear()
    session.protect = Protection.policy(ask_for_writes)  # nobody to ask now: the answers
    resumed = run(session.resume({"w1": ApprovalAnswer(True)}))
    assert resumed.output == "done"
    assert otel.tree() == (
        (
            "invoke_agent",
            (("tooldeck.approval", ()), ("execute_tool write_note", ()), ("chat scripted", ())),
        ),
    )


# -- timeouts, aborts, cancellation ---------------------------------------------------------------
@tooldeck.tool(read_only=True)
async def nap(seconds: float) -> str:
    """Sleep."""
    await asyncio.sleep(seconds)
    return "rested"


def test_a_timed_out_call_is_counted_timed_out(otel: Recorded) -> None:
    model = model_of(reply(call("nap", {"seconds": 30}, call_id="n1")), reply("done"))
    session = Session(model, [nap], session_id="s-timeout", timeout=0.05)
    run(session.run("go"))
    span = otel.one("execute_tool nap")
    assert span.status.status_code is ERROR
    assert attrs(span)["tooldeck.tool.outcome"] == "timed_out"
    assert attrs(span)["error.type"] == "timeout"
    calls = otel.points("tooldeck.tool.calls")
    assert [(a["tooldeck.tool.outcome"], a["error.type"], p.value) for a, p in calls] == [
        ("timed_out", "timeout", 1)
    ]


def test_an_aborted_turn_marks_the_running_call_and_the_turn(otel: Recorded) -> None:
    signal = AbortSignal()

    @tooldeck.tool(read_only=True)
    async def stop_everything(ctx: ToolContext) -> str:
        """Abort the turn, then wait to be stopped."""
        signal.abort("the user pressed stop")
        await asyncio.sleep(30)
        return "never"

    model = model_of(
        reply(
            call("stop_everything", {}, call_id="s1"), call("add", {"a": 1, "b": 1}, call_id="a1")
        )
    )
    result = run(
        tooldeck.run(model, [stop_everything, add], "go", signal=signal, session_id="s-ab")
    )
    assert result.stop_reason is StopReason.ERROR
    stopped = otel.one("execute_tool stop_everything")
    assert attrs(stopped)["tooldeck.tool.outcome"] == "cancelled"
    assert attrs(stopped)["error.type"] == "aborted"
    turn = otel.one("invoke_agent")
    assert turn.status.status_code is ERROR
    assert attrs(turn)["error.type"] == "aborted"
    assert attrs(turn)["tooldeck.turn.stop_reason"] == "error"


def test_a_turn_cancelled_from_outside_still_ends_every_span(otel: Recorded) -> None:
    running = asyncio.Event()

    @tooldeck.tool(read_only=True)
    async def hang() -> str:
        """Wait for ever."""
        running.set()
        await asyncio.Event().wait()
        return "never"

    async def go() -> None:
        session = Session(model_of(reply(call("hang", {}, call_id="h1"))), [hang], session_id="s-c")
        task = asyncio.create_task(session.run("go"))
        await running.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(go())
    assert otel.tree() == (("invoke_agent", (("chat scripted", ()), ("execute_tool hang", ()))),)
    assert attrs(otel.one("execute_tool hang"))["tooldeck.tool.outcome"] == "cancelled"
    turn = otel.one("invoke_agent")
    assert attrs(turn)["error.type"] == "CancelledError"
    assert turn.status.status_code is ERROR


def test_a_failing_model_marks_its_chat_span_and_the_turn(otel: Recorded) -> None:
    def broken(request: Any) -> Any:
        raise ConnectionError(f"provider down {SECRET}")

    with pytest.raises(ConnectionError):
        run(tooldeck.run(ScriptedModel(broken), [add], "go", session_id="s-down"))
    chat, turn = otel.one("chat scripted"), otel.one("invoke_agent")
    for span in (chat, turn):
        assert span.status.status_code is ERROR
        assert attrs(span)["error.type"] == "ConnectionError"
        assert span.events == ()
    assert SECRET not in json.dumps([str(s.status.description) for s in (chat, turn)])


# -- sub-agents ------------------------------------------------------------------------------------
def test_a_sub_agent_turn_nests_under_its_delegate_task_call(otel: Recorded) -> None:
    agent = AgentDefinition.parse(
        "---\nname: researcher\ndescription: Reads.\ntoolkit: _default\n---\nBe brief."
    )

    @tooldeck.tool(name="read_document", read_only=True)
    def read_document(path: str) -> str:
        """Read."""
        return f"text of {path}"

    child = model_of(reply(call("read_document", {"path": "a.md"}, call_id="k1")), reply("read"))
    delegate = delegate_task_tool(
        {"researcher": agent}, ToolkitManifest.load(), model_for=lambda a: child
    )
    parent = model_of(
        reply(call("delegate_task", {"agent": "researcher", "task": "read"}, call_id="d1")),
        reply("done"),
    )
    run(tooldeck.run(parent, Toolset([read_document, delegate]), "go", session_id="parent"))
    assert otel.tree() == (
        (
            "invoke_agent",
            (
                ("chat scripted", ()),
                (
                    "execute_tool delegate_task",
                    (
                        (
                            "invoke_agent researcher",
                            (
                                ("chat scripted", ()),
                                ("execute_tool read_document", ()),
                                ("chat scripted", ()),
                            ),
                        ),
                    ),
                ),
                ("chat scripted", ()),
            ),
        ),
    )
    sub = attrs(otel.one("invoke_agent researcher"))
    assert sub["gen_ai.agent.name"] == "researcher"
    assert sub["gen_ai.conversation.id"].startswith("parent.researcher.")
    trace_ids = {s.context.trace_id for s in otel.spans}
    assert len(trace_ids) == 1


# -- streamed turns ------------------------------------------------------------------------------
def test_a_streamed_turn_has_the_same_tree(otel: Recorded) -> None:
    model = ScriptedModel(
        [reply(call("add", {"a": 1, "b": 2}, call_id="c1")), reply("three")], stream_chunk=3
    )

    async def go() -> None:
        async for _ in tooldeck.stream(model, [add], "go", session_id="s-stream"):
            pass

    run(go())
    assert otel.tree() == (
        (
            "invoke_agent",
            (("chat scripted", ()), ("execute_tool add", ()), ("chat scripted", ())),
        ),
    )
    assert attrs(otel.one("invoke_agent"))["tooldeck.turn.streamed"] is True


# -- content -------------------------------------------------------------------------------------
def secret_turn() -> Any:
    @tooldeck.tool(read_only=True)
    async def lookup(query: str) -> str:
        """Look something up."""
        return f"found {query} ({SECRET})"

    model = model_of(
        reply(call("lookup", {"query": SECRET}, call_id="l1")), reply(f"the answer is {SECRET}")
    )
    return tooldeck.run(
        model, [lookup], f"find {SECRET}", instructions=f"Never say {SECRET}", session_id="s-sec"
    )


def everything(otel: Recorded) -> str:
    return json.dumps(
        [
            [s.name, attrs(s), events(s), s.status.description, str(s.resource.attributes)]
            for s in otel.spans
        ],
        default=str,
    )


def test_no_content_is_recorded_by_default(otel: Recorded, monkeypatch: Any) -> None:
    monkeypatch.delenv(telemetry.CAPTURE_ENV, raising=False)
    run(secret_turn())
    assert len(otel.spans) == 4
    assert SECRET not in everything(otel)


@pytest.mark.parametrize("how", ["configure", "env"])
def test_content_is_recorded_when_capture_is_on(otel: Recorded, monkeypatch: Any, how: str) -> None:
    if how == "configure":
        telemetry.configure(capture_content=True)
    else:
        monkeypatch.setenv(telemetry.CAPTURE_ENV, "true")
    run(secret_turn())
    turn = attrs(otel.one("invoke_agent"))
    assert json.loads(turn["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": f"find {SECRET}"}]}
    ]
    assert json.loads(turn["gen_ai.system_instructions"]) == [
        {"type": "text", "content": f"Never say {SECRET}"}
    ]
    assert SECRET in turn["gen_ai.output.messages"]
    tool = attrs(otel.one("execute_tool lookup"))
    assert json.loads(tool["gen_ai.tool.call.arguments"]) == {"query": SECRET}
    assert tool["gen_ai.tool.call.result"] == f"found {SECRET} ({SECRET})"
    first, second = otel.named("chat scripted")
    out = json.loads(attrs(first)["gen_ai.output.messages"])
    assert out == [
        {
            "role": "assistant",
            "parts": [
                {"type": "tool_call", "id": "l1", "name": "lookup", "arguments": {"query": SECRET}}
            ],
            "finish_reason": "tool_call",
        }
    ]
    sent = json.loads(attrs(second)["gen_ai.input.messages"])
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert sent[2]["parts"][0]["response"] == f"found {SECRET} ({SECRET})"


def test_the_env_switch_off_values_record_nothing(otel: Recorded, monkeypatch: Any) -> None:
    for value in ("false", "NO_CONTENT", "event_only", ""):
        monkeypatch.setenv(telemetry.CAPTURE_ENV, value)
        otel.exporter.clear()
        run(secret_turn())
        assert SECRET not in everything(otel), value
    telemetry.configure(capture_content=False)
    monkeypatch.setenv(telemetry.CAPTURE_ENV, "true")  # the tooldeck setting wins
    otel.exporter.clear()
    run(secret_turn())
    assert SECRET not in everything(otel)


def test_recorded_content_is_cut_to_the_limit(otel: Recorded) -> None:
    telemetry.configure(capture_content=True, content_limit_tokens=50)

    @tooldeck.tool(read_only=True)
    async def big() -> str:
        """A big result."""
        return "word " * 5000

    run(tooldeck.run(model_of(reply(call("big", {}, call_id="b1")), reply("ok")), [big], "go"))
    result = attrs(otel.one("execute_tool big"))["gen_ai.tool.call.result"]
    assert result.startswith("word word") and "characters not recorded]" in result
    assert len(result) < 400
    second = attrs(otel.named("chat scripted")[1])["gen_ai.input.messages"]
    assert len(second) < 2000
    with pytest.raises(ValueError, match="positive whole number"):
        telemetry.configure(content_limit_tokens=0)


# -- metrics -------------------------------------------------------------------------------------
def test_metrics_follow_the_genai_conventions(otel: Recorded) -> None:
    model = model_of(
        reply(
            call("add", {"a": 1, "b": 2}, call_id="c1"),
            call("explode", {"reason": "x"}, call_id="c2"),
            usage=Usage(100, 20, requests=1),
        ),
        reply("done", usage=Usage(150, 5, requests=1)),
    )
    run(tooldeck.run(model, [add, explode], "go"))
    tokens = otel.points("gen_ai.client.token.usage")
    by_type = {a["gen_ai.token.type"]: p for a, p in tokens}
    assert by_type["input"].sum == 250 and by_type["input"].count == 2
    assert by_type["output"].sum == 25
    assert tokens[0][0] == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "scripted",
        "gen_ai.request.model": "scripted",
        "gen_ai.response.model": "scripted",
        "gen_ai.token.type": "input",
    }
    assert list(by_type["input"].explicit_bounds)[:3] == [1, 4, 16]
    durations = otel.points("gen_ai.client.operation.duration")
    kinds = sorted((a["gen_ai.operation.name"], p.count) for a, p in durations)
    assert kinds == [("chat", 2), ("execute_tool", 1), ("execute_tool", 1), ("invoke_agent", 1)]
    calls = {
        (a["gen_ai.tool.name"], a["tooldeck.tool.outcome"]): p.value
        for a, p in otel.points("tooldeck.tool.calls")
    }
    assert calls == {("add", "ok"): 1, ("explode", "error"): 1}


# -- off -----------------------------------------------------------------------------------------
def test_without_a_provider_nothing_is_traced_and_the_dispatcher_is_untouched(
    monkeypatch: Any,
) -> None:
    telemetry.reset()
    assert telemetry.active() is None
    dispatcher = Dispatcher(Toolset([add]))
    assert dispatcher._tracing is UNTRACED  # the strategy whose hooks do nothing
    out = run(dispatcher.dispatch([ToolCall("c1", "add", '{"a": 1, "b": 2}')]))
    assert out.outputs[0].text == "3"
    assert out.outputs[0] is not None


def test_the_dispatcher_alone_traces_its_calls_under_the_callers_span(otel: Recorded) -> None:
    tracer = otel.provider.get_tracer("test")

    async def go() -> None:
        dispatcher = Dispatcher(Toolset([add]))
        with tracer.start_as_current_span("mine"):
            await dispatcher.dispatch([ToolCall("c1", "add", '{"a": 1, "b": 2}')])

    run(go())
    assert otel.tree() == (("mine", (("execute_tool add", ()),)),)


def test_approval_request_events_reach_the_approver_span_context(otel: Recorded) -> None:
    """An approver that does its own tracing nests under the approval span."""
    tracer = otel.provider.get_tracer("test")

    async def approver(requests: list[ApprovalRequest]) -> list[ApprovalAnswer]:
        with tracer.start_as_current_span("ask the human"):
            return [ApprovalAnswer(True) for _ in requests]

    model = model_of(reply(call("write_note", {"text": "hi"}, call_id="w1")), reply("done"))
    run(
        tooldeck.run(
            model, [write_note], "go", protect=Protection.policy(ask_for_writes, approver=approver)
        )
    )
    (root,) = otel.tree()
    assert ("tooldeck.approval", (("ask the human", ()),)) in root[1]


# -- races and hostile input -----------------------------------------------------------------------
def test_concurrent_sessions_with_parallel_calls_never_cross_their_spans(otel: Recorded) -> None:
    """Eight turns at once, each with three parallel calls that yield to each other: every
    call's span is a child of its own turn, in its own trace."""

    @tooldeck.tool(read_only=True)
    async def hop(n: int) -> int:
        """Yield a few times."""
        for _ in range(n):
            await asyncio.sleep(0)
        return n

    async def one(i: int) -> None:
        model = model_of(
            reply(*(call("hop", {"n": k + i % 3}, call_id=f"t{i}c{k}") for k in range(3))),
            reply("done"),
        )
        await tooldeck.run(model, [hop], "go", session_id=f"race-{i}")

    async def go() -> None:
        await asyncio.gather(*(one(i) for i in range(8)))

    run(go())
    turns = {attrs(s)["tooldeck.session.id"]: s for s in otel.named("invoke_agent")}
    assert len(turns) == 8
    for span in otel.named("execute_tool hop"):
        session = "race-" + attrs(span)["gen_ai.tool.call.id"][1:].split("c")[0]
        turn = turns[session]
        assert span.parent is not None and span.parent.span_id == turn.context.span_id
        assert span.context.trace_id == turn.context.trace_id
    assert len({s.context.trace_id for s in turns.values()}) == 8


def test_a_sync_tool_in_its_worker_thread_sees_its_calls_span(otel: Recorded) -> None:
    tracer = otel.provider.get_tracer("test")

    @tooldeck.tool(read_only=True)
    def threaded() -> str:
        """Runs in a worker thread and traces its own work."""
        with tracer.start_as_current_span("inside the tool"):
            return "ok"

    model = model_of(reply(call("threaded", {}, call_id="t1")), reply("done"))
    run(tooldeck.run(model, [threaded], "go"))
    (root,) = otel.tree()
    assert ("execute_tool threaded", (("inside the tool", ()),)) in root[1]


def test_a_tool_that_leaks_an_attached_context_does_not_reparent_the_next_call(
    otel: Recorded,
) -> None:
    from opentelemetry import context as otel_context
    from opentelemetry import trace

    tracer = otel.provider.get_tracer("test")

    @tooldeck.tool()
    async def leaky() -> str:
        """Attaches a span's context and never detaches it."""
        otel_context.attach(trace.set_span_in_context(tracer.start_span("leaked")))
        return "oops"

    model = model_of(
        reply(call("leaky", {}, call_id="l1"), call("write_note", {"text": "x"}, call_id="w1")),
        reply("done"),
    )
    run(tooldeck.run(model, [leaky, write_note], "go"))
    turn = otel.one("invoke_agent")
    for name in ("execute_tool leaky", "execute_tool write_note"):
        span = otel.one(name)
        assert span.parent is not None and span.parent.span_id == turn.context.span_id, name
    assert otel.named("chat scripted")[1].parent.span_id == turn.context.span_id  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "carrier",
    [
        None,
        {},
        {"traceparent": "garbage"},
        {"traceparent": "00-" + "0" * 32 + "-" + "0" * 16 + "-01"},  # the invalid all-zero ids
        {"traceparent": 7, "tracestate": ["x"]},
        {1: 2},
        "not a mapping",
    ],
)
def test_a_hostile_trace_carrier_from_a_queue_changes_nothing(otel: Recorded, carrier: Any) -> None:
    from opentelemetry import trace

    with telemetry.joined(carrier):
        assert not trace.get_current_span().get_span_context().is_valid


def test_a_carrier_joins_its_trace(otel: Recorded) -> None:
    from opentelemetry import trace

    tracer = otel.provider.get_tracer("test")
    with tracer.start_as_current_span("origin") as origin:
        carried = telemetry.carrier()
    assert set(carried) == {"traceparent"}
    assert telemetry.carrier() == {}  # no span, nothing to carry
    with telemetry.joined(carried):
        current = trace.get_current_span().get_span_context()
        assert current.trace_id == origin.get_span_context().trace_id
        assert current.span_id == origin.get_span_context().span_id


# -- setting up an export ------------------------------------------------------------------------
def test_setup_from_env_does_nothing_without_an_endpoint_or_when_disabled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    assert telemetry.setup_from_env() is False
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert telemetry.setup_from_env() is False
    assert telemetry.active() is None


def test_without_the_sdk_setting_up_an_export_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import sys

    from tooldeck.cli.worker import _export_telemetry

    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)  # import fails
    with pytest.raises(MissingExtra, match=r"otel extra .* pip install 'tooldeck\[otel\]'$"):
        telemetry.setup_otlp("http://127.0.0.1:9")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.delenv("OTEL_SDK_DISABLED", raising=False)
    with caplog.at_level("WARNING"):
        _export_telemetry()  # the worker goes on without an export, saying why
    said = [r for r in caplog.records if getattr(r, "event", None) == "telemetry"]
    assert len(said) == 1 and said[0].levelname == "WARNING"
    expected = "no telemetry export: exporting over OTLP needs the otel extra"
    assert said[0].getMessage().startswith(expected)
    assert telemetry.active() is None


def test_setup_otlp_without_set_global_configures_only_tooldeck() -> None:
    from opentelemetry import trace

    tracer_provider, meter_provider = telemetry.setup_otlp(
        "http://127.0.0.1:9", set_global=False, metrics_too=False
    )
    try:
        assert meter_provider is None
        assert telemetry.settings().tracer_provider is tracer_provider
        assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
        tel = telemetry.active()
        assert tel is not None and tel.tracing and not tel.metering
    finally:
        telemetry.reset()
        tracer_provider.shutdown()
