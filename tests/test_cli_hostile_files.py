"""Files someone else can write, given to the commands that read them: ``tooldeck timeline``
(saved timelines, OTLP/JSON traces) and ``tooldeck approve`` (pending-approval files).

Each crafted file of the issue (a 132-byte timeline with ``depth: 1e9``, 1,500 chained
spans, ``input_tokens: "lots"``, a 400-digit timestamp, deep nesting; pending files with
a session id holding ``../`` or an absolute path, ``calls: 5``, a display nested 5,000
deep, an unknown usage field, a list as a call id) and Hypothesis's mutations of real
files are run through the real command line: a good file works, a bad one is one line
``error: <file>: <what is wrong>``, exit status 2, no traceback; ``approve`` writes
nothing anywhere for a bad file and, for a good one, only its answers beside it.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from rich.console import Console
from typer.testing import CliRunner, Result

from test_telemetry_support import Recorded
from test_timeline import recorded_timeline, turn
from tooldeck import Protection, Session, Tool, ToolResult
from tooldeck.cli import app
from tooldeck.policy import PendingFiles, SessionPolicy, load_answers, wait_for_human
from tooldeck.telemetry.timeline import Bar, Timeline, render
from tooldeck.testing import ScriptedModel, call, reply
from tooldeck.transcript import ToolOutput

pytest_plugins = ["test_telemetry_support"]

ENV = {"COLUMNS": "200"}


def cli(*args: str, stdin: str = "") -> Result:
    return CliRunner().invoke(app, list(args), input=stdin, env=ENV)


def tree(root: Path) -> list[tuple[str, bytes]]:
    """Every file under ``root`` with its bytes (what a command wrote, and where)."""
    return sorted((str(p), p.read_bytes()) for p in root.rglob("*") if p.is_file())


def assert_one_error_line(result: Result, path: Path) -> str:
    """Exit 2, one line ``error: <path>: ...`` (on stderr), no traceback."""
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = result.output.splitlines()
    assert len(lines) == 1, result.output
    assert lines[0].startswith(f"error: {path}: "), lines[0]
    return lines[0]


# -- the crafted files of the issue ---------------------------------------------------------


def otlp(*spans: dict[str, Any]) -> dict[str, Any]:
    return {"resourceSpans": [{"scopeSpans": [{"spans": list(spans)}]}]}


def span(n: int, **fields: Any) -> dict[str, Any]:
    return {
        "spanId": f"{n:016x}",
        "name": f"s{n}",
        "startTimeUnixNano": str(1_000 + n),
        "endTimeUnixNano": "5000",
        **fields,
    }


TIMELINES: dict[str, tuple[str, str]] = {
    # name: (the file's text, what the error says)
    "depth 1e9": (
        '{"format": "tooldeck.timeline/1", "title": "t", "bars": [{"kind": "tool", '
        '"label": "x", "start": 0, "end": 1, "depth": 1e9}]}',
        "bars[0].depth: input should be a valid integer",
    ),
    "1,500 chained spans": (
        json.dumps(
            otlp(*(span(n, parentSpanId=f"{n - 1:016x}" if n > 1 else "") for n in range(1, 1501)))
        ),
        "its spans nest more than 100 levels deep (span 's1500' is 1499 below its root)",
    ),
    "input_tokens lots": (
        json.dumps(
            otlp(
                span(
                    1,
                    attributes=[
                        {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
                        {"key": "gen_ai.usage.input_tokens", "value": {"stringValue": "lots"}},
                    ],
                )
            )
        ),
        "resourceSpans[0].scopeSpans[0].spans[0]: gen_ai.usage.input_tokens of span 's1' "
        'should be a number of tokens (a whole number, 0 or more), got "lots"',
    ),
    "a 400-digit timestamp": (
        json.dumps(otlp(span(1, endTimeUnixNano="9" * 400))),
        "resourceSpans[0].scopeSpans[0].spans[0].endTimeUnixNano: should be nanoseconds "
        "since 1970 (a whole number of 64 bits)",
    ),
    "deep nesting": (
        '{"resourceSpans": ' + "[" * 5000 + "]" * 5000 + "}",
        "nested more than 100 levels deep",
    ),
}


@pytest.mark.parametrize("name", TIMELINES)
def test_a_crafted_trace_file_is_one_error_line(tmp_path: Path, name: str) -> None:
    text, problem = TIMELINES[name]
    path = tmp_path / "trace.json"
    path.write_text(text)
    assert len(text) < 300 or name != "depth 1e9"  # a small file, a big number
    before = tree(tmp_path)
    line = assert_one_error_line(cli("timeline", str(path)), path)
    assert problem in line
    assert tree(tmp_path) == before


def pending_session(state: Path) -> Session:
    """A session whose step waits for two approvals, kept in ``state`` (the real
    ``PendingFiles`` store, as a program resuming later uses it)."""

    def write(params: Any, ctx: Any) -> str:
        return "written"

    tool = Tool.from_schema(
        name="write_it",
        description="Write it.",
        json_schema={"type": "object", "properties": {"x": {"type": "integer"}}},
        execute=write,
    )
    policy = SessionPolicy(session_id="s1", directory=state)
    model = ScriptedModel(
        [
            reply(
                "two writes",
                call("write_it", {"x": 1}, call_id="c1"),
                call("write_it", {"x": 2}, call_id="c2"),
            )
        ]
    )
    return Session(
        model,
        [tool],
        session_id="s1",
        protect=Protection.policy(policy, approver=policy.approver(wait_for_human)),
        pending_store=PendingFiles(state),
    )


_PENDING: dict[str, Any] = {}


def real_pending() -> dict[str, Any]:
    """The JSON of a real pending file (made once per process)."""
    if not _PENDING:
        import tempfile

        with tempfile.TemporaryDirectory() as folder:
            state = Path(folder)
            assert asyncio.run(pending_session(state).run("go")).waiting
            _PENDING.update(json.loads((state / "s1.pending.json").read_text()))
    return copy.deepcopy(_PENDING)


def crafted_pending(name: str, outside: Path) -> str:
    data = real_pending()
    if name == "session id with ../":
        data["session_id"] = "../../escaped"
    elif name == "absolute session id":
        data["session_id"] = str(outside / "absolute")
    elif name == "calls: 5":
        data["step"]["calls"] = 5
    elif name == "display nested 5,000 deep":
        data["step"]["calls"][0]["display"] = "DEEP"
        return json.dumps(data).replace('"DEEP"', "[" * 5000 + "]" * 5000)
    elif name == "an unknown usage field":
        data["step"]["usage"]["surprise_tokens"] = 1
    elif name == "a list as call id":
        data["step"]["calls"][0]["call_id"] = ["c1"]
    return json.dumps(data)


PENDING_PROBLEMS = {
    "session id with ../": "session_id: session id '../../escaped' cannot name a file",
    "absolute session id": "session_id: session id '{outside}/absolute' cannot name a file",
    "calls: 5": "step.calls: input should be a valid list",
    "display nested 5,000 deep": "nested more than 250 levels deep",
    "an unknown usage field": "step.usage.surprise_tokens: not a field of this format",
    "a list as call id": "step.calls[0].call_id: input should be a valid string",
}


@pytest.mark.parametrize("name", PENDING_PROBLEMS)
def test_a_crafted_pending_file_is_one_error_line_and_nothing_is_written(
    tmp_path: Path, name: str
) -> None:
    folder, outside = tmp_path / "approvals", tmp_path / "outside"
    folder.mkdir()
    outside.mkdir()
    path = folder / "s1.pending.json"
    path.write_text(crafted_pending(name, outside))
    before = tree(tmp_path)
    result = cli("approve", str(path), stdin="y\ny\n")
    line = assert_one_error_line(result, path)
    assert PENDING_PROBLEMS[name].format(outside=outside) in line
    assert line.endswith("; give a waiting run's <session>.pending.json")
    assert tree(tmp_path) == before  # nothing written, in the folder or outside it
    assert not (tmp_path.parent / "escaped.answers.json").exists()


def test_the_real_process_prints_one_line_and_exits_2(tmp_path: Path) -> None:
    """Not only through typer's runner: the installed entry point, a real process."""
    trace_file, pending = tmp_path / "chain.json", tmp_path / "s1.pending.json"
    trace_file.write_text(TIMELINES["1,500 chained spans"][0])
    pending.write_text(crafted_pending("display nested 5,000 deep", tmp_path))
    for args in (["timeline", str(trace_file)], ["approve", str(pending)]):
        done = subprocess.run(
            [sys.executable, "-c", "from tooldeck.cli import main; main()", *args],
            capture_output=True,
            text=True,
            input="y\n",
            env={**os.environ, **ENV},
            timeout=60,
        )
        assert (done.returncode, done.stdout) == (2, ""), done.stderr
        assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: "), done.stderr


# -- building and rendering are bounded ----------------------------------------------------


def test_spans_are_laid_out_without_recursion_whatever_their_parents_say() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("chain")
    opened: list[trace.Span] = []
    for n in range(3_000):  # each span the child of the one before
        context = trace.set_span_in_context(opened[-1]) if opened else None
        opened.append(tracer.start_span(f"step {n}", context=context))
    for s in reversed(opened):
        s.end()
    timeline = Timeline.from_spans(exporter.get_finished_spans())
    assert [b.depth for b in timeline.bars] == list(range(3_000))
    assert [b.label for b in timeline.bars][:2] == ["step 0", "step 1"]
    out = rendered(timeline)
    assert "2999› step 2999" in out  # the depth shown, not 5,998 spaces of indentation
    assert max(len(line) for line in out.splitlines()) <= 200


def rendered(timeline: Timeline) -> str:
    console = Console(width=200, file=open(os.devnull, "w"), record=True)  # noqa: SIM115
    console.print(render(timeline))
    return console.export_text()


def test_rendering_allocates_nothing_by_the_numbers_it_is_given() -> None:
    timeline = Timeline(
        "hostile",
        [
            Bar("tool", "deep", 0.0, 1.0, depth=10**9),
            Bar("tool", "backwards", 1e308, 1e-300),
            Bar("tool", "far", -1e308, 1e308),
        ],
    )
    out = rendered(timeline)
    assert "1000000000› deep" in out and "backwards" in out and "far" in out
    assert len(out) < 5_000


# -- Hypothesis: real files, mutated ------------------------------------------------------

HOSTILE_VALUES = st.sampled_from(
    [
        None,
        True,
        -1,
        0,
        2**64,
        10**400,
        1e308,
        float("inf"),
        float("nan"),
        "",
        "lots",
        "../../x",
        "[/bold]",
        [],
        {},
        [[[[["deep"]]]]],
        "x" * 10_000,
    ]
) | st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def places(document: Any) -> list[tuple[Any, ...]]:
    """Every path to a value inside ``document`` (keys and indexes)."""
    found: list[tuple[Any, ...]] = []
    stack: list[tuple[tuple[Any, ...], Any]] = [((), document)]
    while stack:
        path, value = stack.pop()
        found.append(path)
        if isinstance(value, dict):
            stack.extend(((*path, k), v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend(((*path, i), v) for i, v in enumerate(value))
    return sorted(found, key=lambda p: [str(x) for x in p])


@st.composite
def mutated(draw: st.DrawFn, base: Any) -> Any:
    document = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(places(document)))
        if not path:
            continue
        *head, last = path
        node = document
        for part in head:
            node = node[part]
        action = draw(st.sampled_from(["replace", "replace", "delete", "add", "deepen"]))
        if action == "replace":
            node[last] = draw(HOSTILE_VALUES)
        elif action == "deepen":
            node[last] = nested(draw(st.sampled_from([99, 150, 900])))
        elif action == "delete":
            del node[last]
        elif isinstance(node, dict):
            node[draw(st.text(min_size=1, max_size=8))] = draw(HOSTILE_VALUES)
        else:
            node.append(draw(HOSTILE_VALUES))
    return document


def run_on(document: Any, folder: Path, name: str, *args: str, stdin: str = "") -> Result:
    """The command on ``document`` written to ``folder/name``: it works (exit 0) or says
    what is wrong with the file in one line (exit 2); never a traceback."""
    path = folder / name
    path.write_text(json.dumps(document))
    result = cli(*args, str(path), stdin=stdin)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    assert "Traceback" not in result.output
    if result.exit_code != 0:
        assert_one_error_line(result, path)
    return result


@pytest.fixture
def trace_documents(otel: Recorded) -> Iterator[list[Any]]:
    session, _ = turn()
    asyncio.run(session.run("do things"))
    exported = MessageToDict(encode_spans(otel.spans))
    with_hex = copy.deepcopy(exported)
    for rs in with_hex["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for s in ss["spans"]:
                for key in ("spanId", "parentSpanId"):
                    if key in s:
                        s[key] = bytes.fromhex(_hex(s[key])).hex()
    saved = recorded_timeline()
    yield [exported, with_hex, json.loads(_saved_json(saved))]


def _hex(b64: str) -> str:
    import base64

    return base64.b64decode(b64).hex()


def _saved_json(timeline: Timeline) -> str:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "t.json"
        timeline.save(path)
        return path.read_text()


def test_mutated_trace_files_render_or_are_one_error_line(
    tmp_path_factory: pytest.TempPathFactory, trace_documents: list[Any]
) -> None:
    for base in trace_documents:  # the unmutated files render
        folder = tmp_path_factory.mktemp("good")
        assert run_on(base, folder, "trace.json", "timeline").exit_code == 0

    @settings(
        max_examples=100,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(data=st.data(), which=st.sampled_from(range(len(trace_documents))))
    def check(data: st.DataObject, which: int) -> None:
        document = data.draw(mutated(trace_documents[which]))
        folder = tmp_path_factory.mktemp("tl")
        before = tree(folder)
        event(f"exit {run_on(document, folder, 'trace.json', 'timeline').exit_code}")
        assert len(tree(folder)) == len(before) + 1  # only the file given: nothing made

    check()


def test_mutated_pending_files_are_answered_or_one_error_line_with_nothing_written(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    base = real_pending()

    @settings(
        max_examples=100,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(document=mutated(base))
    def check(document: Any) -> None:
        root = tmp_path_factory.mktemp("approve")
        folder = root / "approvals"
        folder.mkdir()
        before = tree(root)
        result = run_on(document, folder, "s1.pending.json", "approve", stdin="n\n\n" * 5)
        event(f"exit {result.exit_code}")
        given = folder / "s1.pending.json"
        after = dict(tree(root))
        assert after.pop(str(given)) == json.dumps(document).encode()  # never rewritten
        if result.exit_code != 0:
            assert sorted(after.items()) == before  # a bad file: nothing written anywhere
            return
        # a good file: its answers beside it (and the lock of that write), nothing else
        answers = folder / f"{document['session_id']}.answers.json"
        assert sorted(after) == sorted([str(answers), f"{given}.lock"])
        assert all(not a.approved for a in load_answers(answers).values())

    check()


def test_a_real_pending_file_is_still_answered_and_resumed(tmp_path: Path) -> None:
    session = pending_session(tmp_path)
    assert asyncio.run(session.run("go")).waiting
    result = cli("approve", str(tmp_path / "s1.pending.json"), stdin="y\nn\nnot now\n")
    assert result.exit_code == 0, result.output
    assert "Wrote" in result.output
    answers = load_answers(tmp_path / "s1.answers.json", session_id="s1")
    assert [a.approved for a in answers.values()] == [True, False]


# -- every other command that reads a file someone else can write -------------------------

DEEP_JSON = "[" * 5000 + "]" * 5000
LONG_NUMBER = '{"tools": [' + "1" * 5000 + "]}"
SCRIPTS = Path(__file__).parent / "workflow_scripts"


def grants(entry: str) -> str:
    return '{"format": "tooldeck.grants/1", "grants": [' + entry + "]}"


OTHER_READERS: list[tuple[str, str, list[str], str]] = [
    # (name, the file's text, the command line ({f}: the file), what the error says)
    (
        "grants, nested deep",
        grants('{"tool": "write_file", "args": ' + '{"a": ' * 5000 + "1" + "}" * 5000 + "}"),
        ["policy", "grants", "{f}"],
        "nested more than 100 levels deep",
    ),
    (
        "grants, a list as id",
        grants('{"id": ["g1"], "tool": "write_file"}'),
        ["policy", "grants", "{f}"],
        "grants[0].id: input should be a valid string",
    ),
    (
        "grants of explain, a number as tool",
        grants('{"id": "g1", "tool": 7}'),
        ["policy", "explain", "read_document", "-a", '{"path": "a"}', "--grants", "{f}"],
        "grants[0].tool: input should be a valid string",
    ),
    (
        "grants, a 5,000-digit number",
        grants('{"tool": "x", "created": ' + "9" * 5000 + "}"),
        ["policy", "revoke", "{f}", "g1"],
        "a number in it has more than 4,300 digits",
    ),
    (
        "workflow inputs file, nested deep",
        DEEP_JSON,
        ["workflows", "run", str(SCRIPTS / "research_brief.py"), "--inputs", "@{f}"],
        "nested more than 100 levels deep",
    ),
    (
        "definitions, a 5,000-digit number",
        LONG_NUMBER,
        ["tools", "check", "{f}"],
        "a number in it has more than 4,300 digits",
    ),
    (
        "catalog, a 5,000-digit number",
        LONG_NUMBER,
        ["search", "x", "--catalog", "{f}"],
        "a number in it has more than 4,300 digits",
    ),
    (
        "MCP config, a 5,000-digit number",
        '{"mcpServers": ' + "1" * 5000 + "}",
        ["mcp", "list", "{f}"],
        "a number in it has more than 4,300 digits",
    ),
]


@pytest.mark.parametrize(
    ("text", "args", "problem"),
    [case[1:] for case in OTHER_READERS],
    ids=[case[0] for case in OTHER_READERS],
)
def test_every_reader_of_such_files_is_one_error_line(
    tmp_path: Path, text: str, args: list[str], problem: str
) -> None:
    path = tmp_path / "given.json"
    path.write_text(text)
    before = tree(tmp_path)
    command = [a.replace("{f}", str(path)) for a in args]
    result = CliRunner().invoke(
        app, [*command, "--db", str(tmp_path / "x.sqlite3")] if "workflows" in args else command
    )
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert result.output.count("\n") == 1 and result.output.startswith("error: ")
    assert str(path) in result.output and problem in result.output, result.output
    assert tree(tmp_path) == before


def test_answers_files_are_read_as_any_file_given(tmp_path: Path) -> None:
    """``load_answers`` (resume, and the gateway waiting for ``tooldeck approve``) says what
    is wrong with a hostile answers file: a ValueError, never a RecursionError."""
    from tooldeck._config_files import ConfigFileError

    path = tmp_path / "s1.answers.json"
    path.write_text(
        '{"format": "tooldeck.answers/1", "session_id": "s1", "answers": ' + DEEP_JSON + "}"
    )
    with pytest.raises(ConfigFileError, match="nested more than 100 levels deep") as caught:
        load_answers(path, session_id="s1")
    assert isinstance(caught.value, ValueError) and str(path) in str(caught.value)


def test_a_waiters_name_is_shown_as_written_never_as_markup(tmp_path: Path) -> None:
    """The gateway's ``waiter`` entry is shown to the human; rich markup in it (which a
    hostile file could use to break the line, or to restyle it) is printed as text."""
    data = real_pending()
    data["waiter"] = {"by": "[/bold][red]a gateway", "gateway_session": "g", "until": "soon"}
    path = tmp_path / "s1.pending.json"
    path.write_text(json.dumps(data))
    result = cli("approve", str(path), stdin="n\n\nn\n\n")
    assert result.exit_code == 0, result.output
    assert "([/bold][red]a gateway waits for them)" in result.output
    assert [a.approved for a in load_answers(tmp_path / "s1.answers.json").values()] == [
        False,
        False,
    ]


def test_a_pending_file_swapped_for_a_huge_one_while_answering_gets_no_answers(
    tmp_path: Path,
) -> None:
    """What is answered is compared again, under the lock, before the answers are written;
    a file replaced meanwhile by one larger than any file tooldeck reads has changed (it
    is not read whole) and gets nothing. A real process, answered once it asks."""
    path = tmp_path / "s1.pending.json"
    path.write_text(json.dumps(real_pending()))
    process = subprocess.Popen(
        [sys.executable, "-c", "from tooldeck.cli import main; main()", "approve", str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **ENV},
    )
    assert process.stdout is not None and process.stdin is not None
    shown = b""
    while b"Approve write_it (c1)?" not in shown:  # the first question is asked
        chunk = process.stdout.read1(4096)
        assert chunk, shown
        shown += chunk
    with path.open("wb") as f:  # meanwhile, the file becomes a huge one
        f.truncate(10 * 1024 * 1024 + 1)
    out, err = process.communicate(b"y\ny\n", timeout=60)
    assert process.returncode == 2, (out, err)
    assert err.decode() == (
        f"error: {path} changed or was resumed while you answered; nothing was written; "
        f"run tooldeck approve {path} again\n"
    )
    assert not (tmp_path / "s1.answers.json").exists()


def test_a_waiting_step_after_deeply_nested_details_is_answered_and_resumed(
    tmp_path: Path,
) -> None:
    """A tool's details nesting 240 levels (a parse tree, a folder tree) earlier in the
    session: the pending file holds the whole transcript, so it nests deeper than the
    100 levels a config file may; it is tooldeck's own file, written by the session, so
    it is still answered and resumed, with the details as they were."""

    def tree_of(params: Any, ctx: Any) -> ToolResult:
        return ToolResult("a tree", details=nested(240))

    def write(params: Any, ctx: Any) -> str:
        return "written"

    tools = [
        Tool.from_schema(
            name=name,
            description=name,
            json_schema={"type": "object", "properties": {}},
            execute=run,
            read_only=name == "tree_of",
        )
        for name, run in (("tree_of", tree_of), ("write_it", write))
    ]
    policy = SessionPolicy(session_id="s1", directory=tmp_path)
    model = ScriptedModel(
        [
            reply(call("tree_of", {}, call_id="t1")),
            reply(call("write_it", {}, call_id="w1")),
            reply("done"),
        ]
    )

    def session() -> Session:
        return Session(
            model,
            tools,
            session_id="s1",
            protect=Protection.policy(policy, approver=policy.approver(wait_for_human)),
            pending_store=PendingFiles(tmp_path),
        )

    assert asyncio.run(session().run("go")).waiting
    result = cli("approve", str(tmp_path / "s1.pending.json"), stdin="y\n")
    assert result.exit_code == 0, result.output
    answers = load_answers(tmp_path / "s1.answers.json", session_id="s1")
    again = session()
    resumed = asyncio.run(again.resume(answers))
    assert resumed.output == "done"
    outputs = {o.call_id: o for o in again.transcript if isinstance(o, ToolOutput)}
    assert outputs["w1"].text == "written"
    assert outputs["t1"].result.details == nested(240)


def test_a_pending_file_nested_past_its_own_bound_is_one_error_line(tmp_path: Path) -> None:
    data = real_pending()
    data["step"]["calls"][0]["display"] = nested(300)
    path = tmp_path / "s1.pending.json"
    path.write_text(json.dumps(data))
    line = assert_one_error_line(cli("approve", str(path), stdin="y\ny\n"), path)
    assert "nested more than 250 levels deep" in line
