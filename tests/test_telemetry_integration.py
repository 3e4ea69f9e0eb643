"""Telemetry across real boundaries: an MCP server over streamable HTTP (the traceparent
header arrives), a workflow run in-process and on DBOS worker processes (one trace across
processes), offloaded and guarded results, and a turn exported over OTLP/HTTP to a real
receiver (tests/otlp_receiver.py: protobuf decoded with the official messages) and read
back."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

import tooldeck
from otlp_receiver import OtlpReceiver
from test_telemetry_support import Recorded, attrs, events
from tooldeck import Session, TurnContext, telemetry
from tooldeck.mcp import McpSource
from tooldeck.offload import OffloadStore
from tooldeck.testing import ScriptedModel, call, reply
from tooldeck.workflows import Task, TaskRun, Workflow, WorkflowEngine
from tooldeck.workflows.scripted import submitting
from tooldeck.workflows.store import SQLiteStore

pytest_plugins = ["test_telemetry_support", "test_workflows_support"]

SERVERS = Path(__file__).parent / "mcp_servers"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def traced_server() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(SERVERS / "traced.py"), "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the traced MCP server did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait()


# -- MCP -----------------------------------------------------------------------------------------
def test_an_mcp_call_over_http_carries_the_calls_trace_context(
    otel: Recorded, traced_server: str
) -> None:
    async def go() -> Any:
        async with McpSource({"traced": {"url": traced_server, "startup_timeout": 10}}) as source:
            model = ScriptedModel(
                [reply(call("mcp__traced__trace_headers", {}, call_id="m1")), reply("done")]
            )
            session = Session(
                model,
                tools=[source],
                turn=TurnContext(session_id="s-mcp", home=Path("/tmp")),
                session_id="s-mcp",
            )
            return await session.run("what arrived?")

    result = asyncio.run(go())
    assert otel.tree() == (
        (
            "invoke_agent",
            (
                ("chat scripted", ()),
                ("execute_tool mcp__traced__trace_headers", ()),
                ("chat scripted", ()),
            ),
        ),
    )
    span = otel.one("execute_tool mcp__traced__trace_headers")
    assert attrs(span)["gen_ai.tool.type"] == "extension"
    assert attrs(span)["tooldeck.mcp.server"] == "traced"
    seen = json.loads(result.tool_outputs[0].text)
    trace_id = f"{span.context.trace_id:032x}"
    # W3C: 00-<trace id>-<parent span id>-<flags>; the parent is the call's span (the
    # SDK's own client span is not recording here: only tooldeck's provider is set)
    flags = int(span.context.trace_flags)
    assert seen["traceparent"] == f"00-{trace_id}-{span.context.span_id:016x}-{flags:02x}"
    assert seen["meta_traceparent"] == seen["traceparent"]
    assert seen["baggage"] is None


def test_an_mcp_request_outside_a_traced_call_carries_no_traceparent(
    traced_server: str,
) -> None:
    telemetry.reset()

    async def go() -> Any:
        async with McpSource({"traced": {"url": traced_server, "startup_timeout": 10}}) as source:
            return await source.call("traced", "trace_headers", {})

    seen = json.loads(asyncio.run(go()).text())
    assert seen["traceparent"] is None and seen["meta_traceparent"] is None


# -- offload and guard -----------------------------------------------------------------------------
def test_offloaded_and_guarded_results_are_events_of_their_call(
    otel: Recorded, tmp_path: Path
) -> None:
    @tooldeck.tool(read_only=True)
    async def dump(size: int) -> str:
        """A large result."""
        return "line of output\n" * size

    store = OffloadStore(tmp_path, "s-off", threshold_tokens=200, guard_tokens=1000)
    model = ScriptedModel([reply(call("dump", {"size": 400}, call_id="d1")), reply("done")])
    asyncio.run(tooldeck.run(model, [dump], "go", session_id="s-off", result_hooks=[store.hook]))
    offloaded = events(otel.one("execute_tool dump"))
    names = [name for name, _ in offloaded]
    assert names == ["tooldeck.result.offloaded"]
    ref = store.refs()[0]
    assert offloaded[0][1] == {
        "tooldeck.offload.ref_id": ref.ref_id,
        "tooldeck.result.original_tokens": ref.original_tokens,
        "tooldeck.offload.summary_tokens": ref.summary_tokens,
        "tooldeck.result.total_chars": ref.total_chars,
        "tooldeck.offload.size_bytes": ref.size_bytes,
    }
    otel.exporter.clear()
    guard_only = OffloadStore(os.devnull, "s-g", threshold_tokens=0, guard_tokens=1000)
    model = ScriptedModel([reply(call("dump", {"size": 4000}, call_id="d2")), reply("done")])
    asyncio.run(tooldeck.run(model, [dump], "go", session_id="s-g", result_hooks=[guard_only.hook]))
    ((name, cut),) = events(otel.one("execute_tool dump"))
    assert name == "tooldeck.result.guarded"
    assert cut["tooldeck.result.total_chars"] == len("line of output\n" * 4000)
    assert cut["tooldeck.result.shown_tokens"] <= 1000 < cut["tooldeck.result.original_tokens"]


# -- workflows -----------------------------------------------------------------------------------
OBJ = {
    "type": "object",
    "properties": {"n": {"type": "integer"}},
    "required": ["n"],
    "additionalProperties": False,
}
PAIR = Workflow(
    "pair",
    [
        Task("first", "Give n=1.", result=OBJ),
        Task("second", "Give n=2.", result=OBJ, depends_on=["first"]),
    ],
)


def test_a_workflow_run_in_process_is_one_trace_of_task_spans(
    otel: Recorded, tmp_path: Path
) -> None:
    def factory(run: TaskRun) -> ScriptedModel:
        return submitting(run, {"n": 1 if run.name == "first" else 2})

    async def go() -> Any:
        async with SQLiteStore(tmp_path / "wf.sqlite3") as store:
            engine = WorkflowEngine(
                store, factory, home=tmp_path, memory_enabled=False, poll_interval=0.05
            )
            async with engine, asyncio.timeout(30):
                return await engine.run(PAIR)

    record = asyncio.run(go())
    assert record.state == "succeeded"

    def turn(task: str) -> Any:  # the task's scripted model is "scripted:<task>"
        return (f"invoke_agent {task}", ((f"chat {task}", ()), ("execute_tool submit_result", ())))

    assert otel.tree() == (
        (
            "invoke_workflow pair",
            (
                ("tooldeck.workflow.task first", (turn("first"),)),
                ("tooldeck.workflow.task second", (turn("second"),)),
            ),
        ),
    )
    run_span = otel.one("invoke_workflow pair")
    assert attrs(run_span) == {
        "gen_ai.operation.name": "invoke_workflow",
        "gen_ai.workflow.name": "pair",
        "tooldeck.workflow.id": record.id,
    }
    first = attrs(otel.one("tooldeck.workflow.task first"))
    assert first["tooldeck.workflow.id"] == record.id
    assert first["tooldeck.workflow.task.state"] == "submitted"
    assert first["tooldeck.workflow.task.attempts"] == 1
    assert attrs(otel.one("invoke_agent first"))["gen_ai.agent.name"] == "first"


def test_a_failed_task_span_is_an_error(otel: Recorded, tmp_path: Path) -> None:
    def factory(run: TaskRun) -> ScriptedModel:
        return submitting(run, final_text="I give up.")

    async def go() -> Any:
        async with SQLiteStore(tmp_path / "wf.sqlite3") as store:
            engine = WorkflowEngine(
                store, factory, home=tmp_path, memory_enabled=False, reminders=0
            )
            async with engine, asyncio.timeout(30):
                return await engine.run(PAIR)

    assert asyncio.run(go()).state == "failed"
    span = otel.one("tooldeck.workflow.task first")
    assert attrs(span)["tooldeck.workflow.task.state"] == "failed"
    assert attrs(span)["error.type"] == "failed"
    assert otel.named("tooldeck.workflow.task second") == []  # cancelled, never ran


# -- OTLP over HTTP ------------------------------------------------------------------------------
def test_a_turn_exported_over_otlp_http_arrives_whole_at_a_real_receiver() -> None:
    with OtlpReceiver() as receiver:
        provider = TracerProvider()
        provider.add_span_processor(
            BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{receiver.endpoint}/v1/traces"))
        )
        telemetry.configure(tracer_provider=provider)
        try:
            model = ScriptedModel([reply(call("shout", {"text": "hi"}, call_id="c1")), reply("HI")])

            @tooldeck.tool(read_only=True)
            def shout(text: str) -> str:
                """Upper-case."""
                return text.upper()

            asyncio.run(tooldeck.run(model, [shout], "go", session_id="s-otlp"))
            provider.force_flush()
        finally:
            telemetry.reset()
            provider.shutdown()
        spans = receiver.wait_for(lambda s: len(s) >= 4, "the turn's four spans")
    assert {(p, k) for p, k in receiver.requests} == {("/v1/traces", "application/x-protobuf")}
    by_name = {s["name"]: s for s in spans}
    assert sorted(by_name) == ["chat scripted", "execute_tool shout", "invoke_agent"]
    root = by_name["invoke_agent"]
    assert root["parent_span_id"] is None
    assert {s["trace_id"] for s in spans} == {root["trace_id"]}
    tool = by_name["execute_tool shout"]
    assert tool["parent_span_id"] == root["span_id"]
    assert tool["attributes"]["gen_ai.tool.call.id"] == "c1"
    assert tool["attributes"]["tooldeck.tool.outcome"] == "ok"
    assert tool["scope"] == "tooldeck"
    assert root["attributes"]["gen_ai.conversation.id"] == "s-otlp"
    assert root["attributes"]["gen_ai.usage.input_tokens"] == 20


# -- DBOS workers: one trace across processes ---------------------------------------------------
def test_task_turns_on_a_dbos_worker_join_the_runs_trace(
    otel: Recorded, pg_schema: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client traces the run's start in this process; the worker (a real ``tooldeck
    worker`` process) exports its task spans over OTLP to a receiver in this process; all
    of them are one trace, each task span a child of the client's ``invoke_workflow``."""
    from test_workflows_workers import Client, Workers

    with OtlpReceiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
        monkeypatch.setenv("OTEL_METRIC_EXPORT_INTERVAL", "200")
        workers = Workers(pg_schema, tmp_path)
        client = None
        try:
            workers.start("traced-w1", items=2, delay=0)
            client = Client(workers, items=2)
            run_id = client.start()
            record = client.wait(run_id)
            assert record.state == "succeeded", record
            spans = receiver.wait_for(
                lambda s: (
                    {x["name"] for x in s} >= {"tooldeck.workflow.task total"}
                    and sum(x["name"] == "invoke_agent total" for x in s) == 1
                ),
                "the worker's task spans",
            )
        finally:
            if client is not None:
                client.close()
            workers.stop_all()
    start = otel.one("invoke_workflow fan_out")
    trace_id, run_span = f"{start.context.trace_id:032x}", f"{start.context.span_id:016x}"
    tasks = {s["name"]: s for s in spans if s["name"].startswith("tooldeck.workflow.task")}
    assert sorted(tasks) == [
        "tooldeck.workflow.task item_00",
        "tooldeck.workflow.task item_01",
        "tooldeck.workflow.task total",
    ]
    for span in tasks.values():
        assert span["trace_id"] == trace_id  # one trace, across processes
        assert span["parent_span_id"] == run_span  # total too: enqueued by the worker
        assert span["attributes"]["tooldeck.workflow.worker"] == "traced-w1"
        assert span["attributes"]["tooldeck.workflow.id"] == run_id
        assert span["resource"]["service.name"] == "tooldeck-worker"
    turns = {s["name"]: s for s in spans if s["name"].startswith("invoke_agent")}
    assert (
        turns["invoke_agent total"]["parent_span_id"]
        == tasks["tooldeck.workflow.task total"]["span_id"]
    )
    assert {s["trace_id"] for s in spans} == {trace_id}
