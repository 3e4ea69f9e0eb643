"""The terminal timeline of a finished turn: from its events or its trace (in-memory spans,
an OTLP/JSON file), saved and loaded, rendered with rich, and ``tooldeck timeline FILE``."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from rich.console import Console
from typer.testing import CliRunner

import tooldeck
from test_telemetry_support import Recorded
from tooldeck import Protection
from tooldeck.approvals import ApprovalAnswer, PolicyDecision
from tooldeck.cli import app
from tooldeck.telemetry.timeline import Bar, Timeline, TimelineError, TimelineRecorder, render
from tooldeck.testing import ScriptedModel, call, reply
from tooldeck.transcript import ToolCall

pytest_plugins = ["test_telemetry_support"]


def policy(tool: Any, params: Any, call: ToolCall) -> PolicyDecision:
    if tool.name == "fail":
        return PolicyDecision("allow")
    if getattr(params, "text", "") == "forbidden":
        return PolicyDecision("deny", "not that", "mode")
    if tool.name == "write":
        return PolicyDecision("ask", "write is WRITE", "tier")
    return PolicyDecision("allow")


def turn() -> tuple[tooldeck.Session, Any]:
    """Two parallel reads that wait for each other, an approved write, a denied write and
    a failing call."""
    both = asyncio.Event()
    arrived: list[str] = []

    @tooldeck.tool(read_only=True)
    async def read(name: str) -> str:
        """Read (waits until both reads run)."""
        arrived.append(name)
        if len(arrived) == 2:
            both.set()
        await both.wait()
        return name

    @tooldeck.tool()
    async def write(text: str) -> str:
        """Write."""
        return text

    @tooldeck.tool()
    async def fail() -> str:
        """Fail."""
        raise RuntimeError("disk full")

    async def approve(requests: Any) -> list[ApprovalAnswer]:
        return [ApprovalAnswer(True) for _ in requests]

    model = ScriptedModel(
        [
            reply(
                call("read", {"name": "a"}, call_id="r1"),
                call("read", {"name": "b"}, call_id="r2"),
                call("write", {"text": "hello"}, call_id="w1"),
                call("write", {"text": "forbidden"}, call_id="w2"),
                call("fail", {}, call_id="f1"),
            ),
            reply("done"),
        ]
    )
    session = tooldeck.Session(
        model,
        [read, write, fail],
        session_id="tl",
        protect=Protection.policy(policy, approver=approve),
    )
    return session, model


def recorded_timeline() -> Timeline:
    session, _ = turn()
    recorder = TimelineRecorder().attach(session.events)
    asyncio.run(session.run("do things"))
    return recorder.timeline()


def by_label(timeline: Timeline) -> dict[str, list[Bar]]:
    out: dict[str, list[Bar]] = {}
    for bar in timeline.bars:
        out.setdefault(bar.label.strip(), []).append(bar)
    return out


def test_a_turn_from_its_events() -> None:
    timeline = recorded_timeline()
    bars = by_label(timeline)
    assert [b.kind for b in timeline.bars][:2] == ["turn", "model"]
    assert list(bars) == [
        "turn tl",
        "step 1: model",
        "write",
        "approval: write",
        "read",
        "fail",
        "step 2: model",
    ]
    (whole,) = bars["turn tl"]
    assert whole.depth == 0 and whole.detail == "end_turn, 2 step(s), 20 in / 10 out tokens"
    assert bars["step 1: model"][0].detail == "10 in / 5 out tokens, 5 call(s)"
    a, b = bars["read"]
    assert a.start < b.end and b.start < a.end  # parallel: visibly side by side
    approved, denied = sorted(bars["write"], key=lambda x: x.detail.startswith("Denied"))
    assert denied.error and denied.seconds == 0 and denied.detail == "Denied by policy: not that"
    (approval,) = bars["approval: write"]
    assert approval.end <= approved.start
    (failed,) = bars["fail"]
    assert failed.error and failed.detail == "fail failed: RuntimeError: disk full"
    assert not a.error and not approved.error
    assert all(0 <= bar.start <= bar.end <= timeline.seconds for bar in timeline.bars)


def test_the_rendering_puts_parallel_bars_over_the_same_columns_and_errors_in_red() -> None:
    timeline = recorded_timeline()
    console = Console(width=160, record=True, color_system="truecolor")
    console.print(render(timeline, width=40))
    plain = console.export_text(clear=False)
    rows = {line.split("│")[0].strip(): line for line in plain.splitlines() if "│" in line}
    assert {"turn tl", "step 1: model", "read", "approval: write", "fail"} <= set(rows)
    read_rows = [line for line in plain.splitlines() if line.split("│")[0].strip() == "read"]
    columns = [{i for i, ch in enumerate(line.split("│")[1]) if ch in "█▏"} for line in read_rows]
    assert columns[0] & columns[1]  # the two reads share columns of the time axis
    styled = console.export_text(styles=True)
    fail_line = next(line for line in styled.splitlines() if "disk full" in line)
    assert "\x1b[1;31m" in fail_line or "\x1b[31m" in fail_line  # red
    ok_line = next(line for line in styled.splitlines() if "Running read" in line)
    assert "\x1b[1;31m" not in ok_line


def test_a_saved_timeline_loads_back_and_the_cli_shows_it(tmp_path: Path) -> None:
    timeline = recorded_timeline()
    path = tmp_path / "turn.json"
    timeline.save(path)
    assert Timeline.load(path) == timeline
    result = CliRunner().invoke(app, ["timeline", str(path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for text in ("turn tl", "step 1: model", "approval: write", "disk full", "█ error"):
        assert text in result.output


@pytest.mark.parametrize(
    "content",
    [
        "not json {",
        json.dumps({"format": "other"}),
        json.dumps({"resourceSpans": []}),
        "[1, 2]",
        '{"format": "tooldeck.timeline/1", "bars": [{"kind": "tool", "label": "x", '
        '"start": 0, "end": Infinity}]}',
        '{"format": "tooldeck.timeline/1", "bars": [{"kind": "tool", "label": "x", '
        '"start": 0, "end": 1, "depth": Infinity}]}',
        '{"resourceSpans": [{"scopeSpans": [{"spans": [{"spanId": "00000000000000aa", '
        '"startTimeUnixNano": Infinity}]}]}]}',
    ],
)
def test_a_file_that_is_not_a_timeline_is_one_line_of_error(tmp_path: Path, content: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(TimelineError):
        Timeline.load(path)
    result = CliRunner().invoke(app, ["timeline", str(path)])
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1  # one line saying what is wrong
    missing = CliRunner().invoke(app, ["timeline", str(tmp_path / "nope.json")])
    assert (missing.exit_code, missing.output) == (
        2,
        f"error: {tmp_path / 'nope.json'} does not exist; give a saved timeline or an "
        "OTLP/JSON trace file\n",
    )


def test_a_trace_gives_the_same_picture(otel: Recorded) -> None:
    session, _ = turn()
    asyncio.run(session.run("do things"))
    timeline = Timeline.from_spans(otel.spans)
    kinds = [(b.depth, b.kind, b.label) for b in timeline.bars]
    assert kinds[0] == (0, "turn", "invoke_agent")
    assert (1, "approval", "tooldeck.approval") in kinds
    assert sum(1 for k in kinds if k == (1, "tool", "execute_tool read")) == 2
    bars = by_label(timeline)
    a, b = bars["execute_tool read"]
    assert a.start < b.end and b.start < a.end
    (failed,) = bars["execute_tool fail"]
    assert failed.error and failed.detail == "error (RuntimeError)"
    denied = [x for x in bars["execute_tool write"] if x.error]
    assert [x.detail for x in denied] == ["denied"]
    assert bars["chat scripted"][0].detail == "10 in / 5 out tokens"


@pytest.mark.parametrize("ids", ["base64", "hex"])
def test_an_otlp_json_trace_file_renders(otel: Recorded, tmp_path: Path, ids: str) -> None:
    """OTLP/JSON as the proto3 JSON mapping writes it (base64 ids) or as the OTLP spec and
    the Collector's file exporter do (hex ids); one document, or one per line."""
    session, _ = turn()
    asyncio.run(session.run("do things"))
    document = MessageToDict(encode_spans(otel.spans))
    if ids == "hex":
        import base64

        for rs in document["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if key in span:
                            span[key] = base64.b64decode(span[key]).hex()
    path = tmp_path / "trace.json"
    path.write_text(
        json.dumps(document) + "\n" + json.dumps(document) if ids == "hex" else json.dumps(document)
    )
    loaded = Timeline.load(path)
    direct = Timeline.from_spans(otel.spans)
    if ids == "base64":
        assert [(b.kind, b.label, b.depth, b.error, b.detail) for b in loaded.bars] == [
            (b.kind, b.label, b.depth, b.error, b.detail) for b in direct.bars
        ]
    result = CliRunner().invoke(app, ["timeline", str(path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "execute_tool fail" in result.output and "tooldeck.approval" in result.output


def test_the_demo_ends_with_the_turns_timeline() -> None:
    result = CliRunner().invoke(app, ["demo"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    tail = result.output.rsplit("The agent turn as a timeline", 1)
    assert len(tail) == 2
    for text in ("turn demo", "step 1: model", "read_document", "summarize_repo", "█ tool"):
        assert text in tail[1]


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "resourceSpans",
                    "scopeSpans",
                    "spans",
                    "spanId",
                    "parentSpanId",
                    "name",
                    "startTimeUnixNano",
                    "endTimeUnixNano",
                    "attributes",
                    "key",
                    "value",
                    "status",
                    "code",
                    "format",
                    "bars",
                    "kind",
                    "label",
                    "start",
                    "end",
                    "stringValue",
                    "intValue",
                    "arrayValue",
                    "values",
                ]
            )
            | st.text(max_size=8),
            inner,
            max_size=5,
        )
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(document=_json, tooldeck_format=st.booleans())
def test_any_json_file_is_a_timeline_or_one_timeline_error(
    tmp_path_factory: pytest.TempPathFactory, document: Any, tooldeck_format: bool
) -> None:
    """Hostile trace files: a timeline, or a TimelineError, never another exception."""
    if tooldeck_format and isinstance(document, dict):
        document["format"] = "tooldeck.timeline/1"
    path = tmp_path_factory.mktemp("tl") / "f.json"
    path.write_text(json.dumps(document))
    try:
        timeline = Timeline.load(path)
    except TimelineError:
        return
    Console(width=100, file=open(os.devnull, "w")).print(render(timeline))  # noqa: SIM115
