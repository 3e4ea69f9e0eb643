"""Offloading large results to disk, recall by reference, and the hard guard."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import tooldeck.offload.format as offload_format
import tooldeck.offload.recall as offload_recall
from tooldeck import (
    Dispatcher,
    EventBus,
    ImagePart,
    JsonPart,
    Session,
    TextPart,
    ToolContext,
    ToolResult,
    Toolset,
    TurnContext,
    tool,
)
from tooldeck.errors import ResultEncodingError
from tooldeck.events import Event
from tooldeck.model import ModelRequest
from tooldeck.offload import (
    IMAGE_TOKENS,
    NO_OFFLOAD,
    RECALL_TOOL_NAME,
    REF_PATTERN,
    OffloadStore,
    RecallError,
    ToolResultOffloaded,
)
from tooldeck.testing import ScriptedModel, call, reply
from tooldeck.tokens import estimate_tokens
from tooldeck.transcript import AssistantMessage, ToolCall, ToolOutput

SID = "session-a"


@tool(read_only=True)
def produce() -> str:
    """Produce something (the tests give the result directly)."""
    return ""


def chars(text: str) -> int:
    """An exact estimator for edge tests: one token per character."""
    return len(text)


def make(tmp_path: Path, session_id: str = SID, **options: Any) -> OffloadStore:
    options.setdefault("estimator", chars)
    return OffloadStore(tmp_path, session_id, **options)


def run_hook(
    store: OffloadStore,
    result: ToolResult,
    *,
    session_id: str | None = None,
    the_tool: Any = produce,
    call_id: str = "call_1",
    arguments: Any = None,
) -> ToolResult:
    the_call = ToolCall(call_id, the_tool.name, arguments if arguments is not None else "{}")
    ctx = ToolContext(
        call_id, the_tool.name, store.session_id if session_id is None else session_id
    )
    return asyncio.run(store.hook(the_call, the_tool, result, ctx))


def lines_text(n: int, width: int = 60) -> str:
    return "\n".join(f"{i:06d} " + ("lorem ipsum dolor sit amet " * 4)[:width] for i in range(n))


def ref_of(result: ToolResult) -> str:
    match = REF_PATTERN.search(result.text())
    assert match is not None, result.text()[:500]
    return match.group(0)


def ref_files(store: OffloadStore) -> list[str]:
    if not store.directory.exists():
        return []
    return sorted(p.name for p in store.directory.iterdir())


def read_all(store: OffloadStore, ref_id: str, limit: int | None = None) -> list[str]:
    pages, offset = [], 0
    while True:
        page = store.read_page(ref_id, offset, limit)
        pages.append(page.text)
        if page.next_offset is None:
            return pages
        assert page.next_offset > offset
        offset = page.next_offset


# -- the threshold ---------------------------------------------------------------------


def test_exactly_at_the_threshold_is_not_offloaded(tmp_path: Path) -> None:
    store = make(tmp_path, threshold_tokens=1_000, guard_tokens=2_000)
    result = ToolResult("x" * 1_000, details={"k": 1})
    assert run_hook(store, result) is result
    assert ref_files(store) == []


def test_one_over_the_threshold_is_offloaded(tmp_path: Path) -> None:
    store = make(tmp_path, threshold_tokens=1_000, guard_tokens=2_000, summary_tokens=600)
    original = "y" * 1_001
    result = ToolResult(original, details={"k": 1})
    out = run_hook(store, result)
    ref = ref_of(out)
    assert out.details == {
        "k": 1,
        "offloaded": {
            "ref_id": ref,
            "original_tokens": 1_001,
            "summary_tokens": out.details["offloaded"]["summary_tokens"],
        },
    }
    assert out.details["offloaded"]["summary_tokens"] == len(out.text())
    assert original not in out.text()
    assert f'recall_tool_result(ref_id="{ref}", offset=0)' in out.text()
    assert ref_files(store) == [f"{ref}.json"]
    assert "".join(read_all(store, ref)) == original


def test_threshold_zero_disables_offload(tmp_path: Path) -> None:
    store = make(tmp_path, threshold_tokens=0, guard_tokens=2_000)
    small = ToolResult("z" * 1_999)
    assert run_hook(store, small) is small
    big = ToolResult("z" * 5_000)
    out = run_hook(store, big)
    assert ref_files(store) == []
    assert len(out.text()) <= 2_000
    assert "Offloading of large results is off" in out.text()
    assert out.details["guarded"]["original_tokens"] == 5_000


def test_invalid_configuration_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="above guard_tokens"):
        OffloadStore(tmp_path, SID, threshold_tokens=30_000, guard_tokens=25_000)
    with pytest.raises(ValueError, match="session id"):
        OffloadStore(tmp_path, "")
    with pytest.raises(ValueError, match="guard_tokens"):
        OffloadStore(tmp_path, SID, threshold_tokens=0, guard_tokens=10)


# -- what is stored ----------------------------------------------------------------------


def test_stored_copy_is_complete_and_valid_json(tmp_path: Path) -> None:
    store = make(tmp_path, threshold_tokens=1_000, guard_tokens=5_000)
    value = {"rows": [{"id": i, "name": f"row {i}", "ok": i % 2 == 0} for i in range(300)]}
    image = ImagePart(data="aGVsbG8=", mime_type="image/png")
    result = ToolResult(
        [TextPart("header line"), JsonPart(value), image], is_error=True, details=["x"]
    )
    arguments = '{"b": 2, "a": [1, "é"]}'
    out = run_hook(store, result, arguments=arguments, call_id="call_77")
    ref = ref_of(out)
    assert out.is_error
    assert out.details == {"details": ["x"], "offloaded": out.details["offloaded"]}
    assert image in out.parts  # images stay in the model's view
    document = json.loads(store.ref_path(ref).read_text(encoding="utf-8"))
    meta = document["meta"]
    canonical = '{"a":[1,"é"],"b":2}'  # sorted keys, no whitespace, UTF-8
    assert meta["arguments_sha256"] == hashlib.sha256(canonical.encode()).hexdigest()
    assert (meta["tool"], meta["call_id"], meta["is_error"]) == ("produce", "call_77", True)
    assert meta["session_id"] == SID and meta["created_at"]
    assert "".join(document["text"]) == result.text()
    loaded = store.load(ref)
    assert loaded.content == result.content
    assert loaded.is_error


def test_parallel_offloads_get_distinct_refs(tmp_path: Path) -> None:
    store = make(tmp_path, threshold_tokens=100, guard_tokens=1_000, summary_tokens=300)

    async def many() -> list[ToolResult]:
        calls = []
        for i in range(8):
            the_call = ToolCall(f"c{i}", "produce", "{}")
            ctx = ToolContext(f"c{i}", "produce", SID)
            calls.append(store.hook(the_call, produce, ToolResult(f"{i}" * 500), ctx))
        return await asyncio.gather(*calls)

    outs = asyncio.run(many())
    refs = {ref_of(o) for o in outs}
    assert len(refs) == 8
    for i, out in enumerate(outs):
        assert "".join(read_all(store, ref_of(out))) == f"{i}" * 500


# -- atomic writes ---------------------------------------------------------------------------


def test_failed_write_leaves_nothing_and_guard_still_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make(tmp_path, threshold_tokens=1_000, guard_tokens=2_000)
    seen: list[str] = []
    real_fsync = os.fsync

    def failing_fsync(fd: int) -> None:
        seen.extend(ref_files(store))  # the temp file exists at this point
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    out = run_hook(store, ToolResult("q" * 10_000))
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert any(name.startswith(".ref_") and name.endswith(".tmp") for name in seen)
    assert ref_files(store) == []  # no partial ref, no temp file
    assert store.refs() == [] and not store.has_refs()
    assert "Storing the full result failed" in out.text()
    assert "No space left on device" in out.text()
    assert len(out.text()) <= 2_000
    assert "offloaded" not in (out.details or {})


def test_write_failing_midway_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make(tmp_path, threshold_tokens=1_000, guard_tokens=2_000)
    real = offload_format._chunk_line
    calls = {"n": 0}

    def flaky(chunk: str) -> bytes:
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("disk vanished")
        return real(chunk)

    monkeypatch.setattr(offload_format, "_chunk_line", flaky)
    out = run_hook(store, ToolResult("w" * 300_000))  # 5 chunks of 65,536 characters
    assert calls["n"] == 3
    assert ref_files(store) == []
    assert "disk vanished" in out.text()


_CHILD = """
import os, signal, sys, time
import tooldeck.offload as m
import tooldeck.offload.format as f
from tooldeck import ToolResult
store = m.OffloadStore(sys.argv[1], "session-a", threshold_tokens=1000, guard_tokens=2000)
real = f._chunk_line
count = 0
def slow(chunk):
    global count
    count += 1
    if count == 3:
        if sys.argv[2] == "exit":
            os._exit(9)
        print("writing", flush=True)
        time.sleep(60)
    return real(chunk)
f._chunk_line = slow
store.offload(ToolResult("k" * 400_000), tool_name="produce", call_id="c1")
print("finished", flush=True)
"""


@pytest.mark.parametrize("how", ["exit", "sigkill"])
def test_killed_mid_write_leaves_no_ref(tmp_path: Path, how: str) -> None:
    store = make(tmp_path)
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(tmp_path), how],
        stdout=subprocess.PIPE,
        text=True,
    )
    if how == "sigkill":
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "writing"
        child.send_signal(signal.SIGKILL)
    child.wait(timeout=60)
    assert child.returncode in (9, -signal.SIGKILL)
    names = ref_files(store)
    assert not any(name.endswith(".json") for name in names)
    temps = [n for n in names if n.startswith(".ref_")]
    assert len(temps) == 1  # the debris is hidden, never a ref
    assert store.refs() == [] and not store.has_refs()
    assert store.tools_for(TurnContext(SID, tmp_path)) == []
    old = store.clock() - 2 * 3600
    os.utime(store.directory / temps[0], (old, old))
    store.expire()
    assert ref_files(store) == []


# -- recall --------------------------------------------------------------------------------


def test_recall_pages_offset_limit_last_page_and_past_the_end(tmp_path: Path) -> None:
    store = make(tmp_path, threshold_tokens=1_000, guard_tokens=2_000, page_tokens=700)
    original = lines_text(400)
    ref = ref_of(run_hook(store, ToolResult(original)))
    pages = read_all(store, ref)
    assert "".join(pages) == original
    assert len(pages) > 3 and all(len(p) <= 700 for p in pages)
    assert all(p.endswith("\n") for p in pages[:-1])  # cut pages end at a line break
    exact = store.read_page(ref, 100, 250)
    assert (exact.offset, exact.end, exact.text) == (100, 350, original[100:350])
    assert "".join(read_all(store, ref, limit=333)) == original
    last = store.read_page(ref, len(original) - 10, 500)
    assert last.text == original[-10:] and last.eof and last.next_offset is None
    with pytest.raises(RecallError, match="past the end"):
        store.read_page(ref, len(original))
    with pytest.raises(RecallError, match="past the end"):
        store.read_page(ref, 10**9)


def test_recall_tool_results_are_never_offloaded_and_fit_the_guard(tmp_path: Path) -> None:
    store = make(tmp_path, threshold_tokens=400, guard_tokens=500, page_tokens=10_000)
    original = lines_text(300)
    ref = ref_of(run_hook(store, ToolResult(original)))
    assert store.page_tokens == 500 - offload_recall.RECALL_HEADER_TOKENS
    dispatcher = Dispatcher(Toolset([store.recall_tool]), session_id=SID, result_hooks=[store.hook])
    offset, pieces = 0, []
    while True:
        arguments = {"ref_id": ref, "offset": offset, "limit": 100_000}
        result = asyncio.run(dispatcher.dispatch([call(RECALL_TOOL_NAME, arguments)]))
        out = result.outputs[0].result
        assert not out.is_error, out.text()
        assert out.details[NO_OFFLOAD] is True and "offloaded" not in out.details
        assert "guarded" not in out.details
        assert len(out.text()) <= 500  # one token per character here
        pieces.append(out.parts[1].text)  # type: ignore[union-attr]
        if out.details["recall"]["next_offset"] is None:
            break
        offset = out.details["recall"]["next_offset"]
        assert f"offset={offset})" in out.parts[0].text  # type: ignore[union-attr]
    assert "".join(pieces) == original
    assert len(ref_files(store)) == 1  # no recall was stored again


def test_recall_hook_skips_marked_results(tmp_path: Path) -> None:
    store = make(tmp_path, threshold_tokens=100, guard_tokens=1_000)
    marked = ToolResult("m" * 500, details={NO_OFFLOAD: True})
    assert run_hook(store, marked) is marked
    assert run_hook(store, ToolResult("m" * 500), the_tool=store.recall_tool).text() == "m" * 500
    assert ref_files(store) == []


@pytest.mark.parametrize(
    "bad",
    [
        "ref_123",
        "REF_0123456789ABCDEF",
        "ref_0123456789abcdeg",
        "ref_0123456789abcdef0",
        "",
        "../x",
        "/etc/passwd",
        "ref_0123456789abcdef/../../x",
        "ref_0123456789abcdef.json",
        "..\\ref_0123456789abcdef",
    ],
)
def test_malformed_ref_ids_are_refused(tmp_path: Path, bad: str) -> None:
    store = make(tmp_path, threshold_tokens=100, guard_tokens=1_000)
    ref_of(run_hook(store, ToolResult("a" * 500)))
    with pytest.raises(RecallError, match="not a ref id"):
        store.read_page(bad)
    with pytest.raises(RecallError, match="not a ref id"):
        store.ref_path(bad)


def test_recall_tool_reports_bad_refs_as_errors(tmp_path: Path) -> None:
    store = make(tmp_path, threshold_tokens=100, guard_tokens=1_000)
    dispatcher = Dispatcher(Toolset([store.recall_tool]), session_id=SID)
    for ref_id, expected in [
        ("../session-b/ref_0123456789abcdef", "not a ref id"),
        ("ref_0123456789abcdef", "no stored result"),
    ]:
        result = asyncio.run(dispatcher.dispatch([call(RECALL_TOOL_NAME, {"ref_id": ref_id})]))
        out = result.outputs[0].result
        assert out.is_error and expected in out.text()
        assert out.details == {NO_OFFLOAD: True}


def test_other_sessions_refs_are_not_found(tmp_path: Path) -> None:
    a = make(tmp_path, "session-a", threshold_tokens=100, guard_tokens=1_000)
    b = make(tmp_path, "session-b", threshold_tokens=100, guard_tokens=1_000)
    ref = ref_of(run_hook(a, ToolResult("secret " * 100)))
    with pytest.raises(RecallError, match="no stored result"):
        b.read_page(ref)
    assert b.refs() == [] and [r.ref_id for r in a.refs()] == [ref]
    # the recall tool of A, called from another session's context, refuses too
    dispatcher = Dispatcher(Toolset([a.recall_tool]), session_id="session-b")
    result = asyncio.run(dispatcher.dispatch([call(RECALL_TOOL_NAME, {"ref_id": ref})]))
    assert result.outputs[0].is_error and "secret" not in result.outputs[0].text
    # and A's hook does not store results of another session
    out = run_hook(a, ToolResult("b" * 500), session_id="session-b")
    assert out.text() == "b" * 500 and len(a.refs()) == 1
    out = run_hook(a, ToolResult("b" * 5_000), session_id="session-b")
    assert "not stored" in out.text() and len(out.text()) <= 1_000 and len(a.refs()) == 1


def test_symlinks_are_refused(tmp_path: Path) -> None:
    a = make(tmp_path, "session-a", threshold_tokens=100, guard_tokens=1_000)
    b = make(tmp_path, "session-b", threshold_tokens=100, guard_tokens=1_000)
    ref_b = ref_of(run_hook(b, ToolResult("private " * 100)))
    run_hook(a, ToolResult("mine " * 100))
    link = a.directory / f"{ref_b}.json"
    link.symlink_to(b.ref_path(ref_b))
    with pytest.raises(RecallError) as caught:
        a.read_page(ref_b)
    assert "private" not in str(caught.value)
    assert ref_b not in [r.ref_id for r in a.refs()]
    # a session directory replaced by a link to another session's directory
    c = make(tmp_path, "session-c", threshold_tokens=100, guard_tokens=1_000)
    c.directory.symlink_to(b.directory, target_is_directory=True)
    with pytest.raises(RecallError, match="not a plain directory"):
        c.read_page(ref_b)
    assert c.refs() == []
    out = run_hook(c, ToolResult("c" * 500))  # cannot be stored; fits the guard as it is
    assert out.text() == "c" * 500 and "offloaded" not in (out.details or {})
    out = run_hook(c, ToolResult("c" * 5_000))
    assert "Storing the full result failed" in out.text() and len(out.text()) <= 1_000
    assert [r.ref_id for r in b.refs()] == [ref_b]
    c.cleanup()  # removes the link only
    assert b.ref_path(ref_b).exists()


def test_unsafe_session_ids_get_a_hashed_directory(tmp_path: Path) -> None:
    store = make(tmp_path, "../../etc", threshold_tokens=100, guard_tokens=1_000)
    assert store.directory.parent == tmp_path.resolve() / ".tooldeck" / "tool-offload"
    assert store.directory.name.startswith("s-")
    ref = ref_of(run_hook(store, ToolResult("x" * 500)))
    assert store.read_page(ref).text == "x" * 500


# -- expiry and cleanup ----------------------------------------------------------------------


def test_ttl_expiry_with_a_fake_clock(tmp_path: Path) -> None:
    now = [1_000_000.0]
    store = make(tmp_path, threshold_tokens=100, guard_tokens=1_000, clock=lambda: now[0])
    other = make(tmp_path, "session-b", threshold_tokens=100, guard_tokens=1_000)
    old = ref_of(run_hook(store, ToolResult("o" * 500)))
    now[0] += 3 * 3600
    young = ref_of(run_hook(store, ToolResult("y" * 500)))
    kept = ref_of(run_hook(other, ToolResult("k" * 500)))
    assert store.expire(now[0] + 1) == [] or True  # nothing of store is over 4 h yet
    now[0] += 1.5 * 3600  # old is 4.5 h old, young 1.5 h
    assert store.expire() == [old]
    assert [r.ref_id for r in store.refs()] == [young]
    with pytest.raises(RecallError, match="no stored result"):
        store.read_page(old)
    assert [r.ref_id for r in other.refs()] == [kept]  # another session is untouched
    now[0] += 3 * 3600  # young has expired too; recall notices and removes it
    with pytest.raises(RecallError, match="expired"):
        store.read_page(young)
    assert not store.has_refs() and ref_files(store) == []


def test_ttl_expiry_by_file_mtime(tmp_path: Path) -> None:
    store = make(tmp_path, threshold_tokens=100, guard_tokens=1_000, ttl_seconds=60)
    ref = ref_of(run_hook(store, ToolResult("t" * 500)))
    past = store.clock() - 61
    os.utime(store.ref_path(ref), (past, past))
    assert not store.has_refs()
    assert store.expire() == [ref]
    assert ref_files(store) == []


def test_cleanup_is_per_session(tmp_path: Path) -> None:
    a = make(tmp_path, "session-a", threshold_tokens=100, guard_tokens=1_000)
    b = make(tmp_path, "session-b", threshold_tokens=100, guard_tokens=1_000)
    run_hook(a, ToolResult("a" * 500))
    ref_b = ref_of(run_hook(b, ToolResult("b" * 500)))
    a.cleanup()
    assert not a.directory.exists() and a.refs() == []
    assert b.read_page(ref_b).text == "b" * 500
    a.cleanup()  # twice is fine
    assert b.directory.exists()


# -- events, creator, status ----------------------------------------------------------------


def test_offload_event_on_the_bus(tmp_path: Path) -> None:
    bus = EventBus()
    seen: list[Event] = []
    bus.subscribe(seen.append, "TOOL_RESULT_OFFLOADED")
    bus.subscribe(seen.append, ToolResultOffloaded)
    store = make(tmp_path, threshold_tokens=100, guard_tokens=1_000, events=bus)
    run_hook(store, ToolResult("small"))
    out = run_hook(store, ToolResult("e" * 500), call_id="call_9")
    assert len(seen) == 2 and seen[0] is seen[1]
    event = seen[0]
    assert isinstance(event, ToolResultOffloaded)
    assert event.type == "TOOL_RESULT_OFFLOADED"
    assert (event.session_id, event.tool_name, event.call_id) == (SID, "produce", "call_9")
    assert event.ref_id == ref_of(out)
    assert event.original_tokens == 500
    assert event.summary_tokens == out.details["offloaded"]["summary_tokens"]


def test_the_store_as_a_source_and_its_status(tmp_path: Path) -> None:
    store = make(tmp_path, threshold_tokens=100, guard_tokens=1_000)
    ctx = TurnContext(SID, tmp_path, status_sources={"offload": store.status_source})
    assert store.tools_for(ctx) == []
    assert "No stored" in store.status_source()
    ref = ref_of(run_hook(store, ToolResult("s" * 500), call_id="call_5"))
    assert store.tools_for(ctx) == [store.recall_tool]
    assert store.tools_for(TurnContext("session-b", tmp_path)) == []
    status = ctx.status_sources["offload"]()
    assert ref in status and "produce" in status and "call_5" in status
    assert "expires in" in status
    assert RECALL_TOOL_NAME in store.recall_tool.name
    schema = store.recall_tool.schema
    assert set(schema["properties"]) == {"ref_id", "offset", "limit"}


# -- summaries -------------------------------------------------------------------------------


def test_json_summary_shows_shape_keys_lengths_and_first_items(tmp_path: Path) -> None:
    store = OffloadStore(tmp_path, SID, threshold_tokens=2_000, guard_tokens=5_000)
    value = {
        "items": [{"id": i, "title": f"Item {i}", "tags": ["x", "y"]} for i in range(5_000)],
        "total": 5_000,
        "cursor": None,
    }
    out = run_hook(store, ToolResult([JsonPart(value)]))
    text = out.text()
    assert "Shape: {items: array(5,000) of {id: number, title: string(6), tags: array(2)" in text
    assert "Object with 3 keys: items, total, cursor" in text
    assert "- items: array of 5,000 items (object)" in text
    assert '{"id":0,"title":"Item 0","tags":["x","y"]}' in text
    assert '{"id":4999' not in text
    assert estimate_tokens(text) <= store.summary_tokens + 50
    # JSON sent as text is summarised the same way
    as_text = run_hook(store, ToolResult(json.dumps(value)))
    assert "Object with 3 keys" in as_text.text()


def test_text_summary_has_head_tail_and_what_was_left_out(tmp_path: Path) -> None:
    store = OffloadStore(tmp_path, SID, threshold_tokens=2_000, guard_tokens=5_000)
    original = lines_text(5_000)
    out = run_hook(store, ToolResult(original))
    text = out.text()
    assert "Text: 5,000 lines" in text
    assert "000000 lorem" in text and "004999 lorem" in text
    omitted = re.search(r"\[… ([\d,]+) lines \(([\d,]+) characters\) not shown here …\]", text)
    assert omitted is not None
    assert int(omitted.group(1).replace(",", "")) > 4_800
    assert "002500 lorem" not in text


# -- the guard ---------------------------------------------------------------------------------


def test_guard_on_30k_tokens_with_offload_disabled(tmp_path: Path) -> None:
    store = OffloadStore(tmp_path, SID, threshold_tokens=0, guard_tokens=25_000)
    original = lines_text(1_300, width=80)
    assert 30_000 < estimate_tokens(original) < 40_000
    out = run_hook(store, ToolResult(original))
    assert estimate_tokens(out.text()) <= 25_000
    assert out.text().startswith("[This tool result was cut to fit the limit of 25,000 tokens")
    assert "Offloading of large results is off" in out.text()
    assert "000000 lorem" in out.text() and "001299 lorem" in out.text()
    assert "characters (" in out.text() and "cut here" in out.text()
    info = out.details["guarded"]
    assert info["original_tokens"] == estimate_tokens(original)
    assert info["shown_tokens"] <= 25_000 and info["total_chars"] == len(original)
    assert ref_files(store) == []


def test_guard_keeps_images_that_fit_and_counts_them(tmp_path: Path) -> None:
    store = make(tmp_path, threshold_tokens=0, guard_tokens=10_000)
    images = [ImagePart(data="aGk=", mime_type="image/png") for _ in range(8)]
    result = ToolResult([TextPart("caption"), *images])
    assert store.tokens_of(result) == 7 + 8 + 8 * IMAGE_TOKENS  # text, separators, images
    out = run_hook(store, result)
    kept = [p for p in out.parts if isinstance(p, ImagePart)]
    assert 0 < len(kept) < 8
    assert store.tokens_of(out) <= 10_000
    assert out.details["guarded"]["images_dropped"] == 8 - len(kept)


def test_stored_copy_is_never_cut_by_the_guard(tmp_path: Path) -> None:
    store = make(tmp_path, threshold_tokens=1_000, guard_tokens=1_000, summary_tokens=5_000)
    original = "g" * 50_000
    out = run_hook(store, ToolResult(original))
    assert len(out.text()) <= 1_000  # an oversized summary is cut by the guard too
    assert "stored as ref_" in out.text()
    assert "".join(read_all(store, ref_of(out))) == original


# -- end to end ---------------------------------------------------------------------------------


def test_end_to_end_turn_with_recall(tmp_path: Path) -> None:
    original = "\n".join(
        f"{i:05d} GET /api/items/{i} 200 {i * 37 % 1000}ms user=u{i % 97}" for i in range(12_000)
    )
    assert estimate_tokens(original) > 60_000

    @tool(read_only=True)
    def read_access_log() -> str:
        """Return the whole access log."""
        return original

    bus = EventBus()
    offloaded: list[Event] = []
    bus.subscribe(offloaded.append, ToolResultOffloaded)
    store = OffloadStore(tmp_path, SID, events=bus)
    pages: list[str] = []
    state: dict[str, Any] = {}

    def script(request: ModelRequest) -> AssistantMessage:
        names = [t.name for t in request.tools]
        outputs = [i for i in request.transcript if isinstance(i, ToolOutput)]
        for output in outputs:
            assert estimate_tokens(output.text) <= store.guard_tokens
        if not outputs:
            assert RECALL_TOOL_NAME not in names
            return reply(call("read_access_log"))
        assert RECALL_TOOL_NAME in names
        last = outputs[-1]
        if last.name == "read_access_log":
            assert original not in last.text and "00000 GET" in last.text
            state["ref"] = ref_of(last.result)
            return reply(call(RECALL_TOOL_NAME, {"ref_id": state["ref"], "offset": 0}))
        assert not last.is_error, last.text
        header, body = last.text.split("\n", 1)
        pages.append(body)
        following = re.search(r"offset=(\d+)\)", header)
        if following is None:
            return reply("I have read the whole log.")
        offset = int(following.group(1))
        return reply(call(RECALL_TOOL_NAME, {"ref_id": state["ref"], "offset": offset}))

    session = Session(
        ScriptedModel(script),
        tools=[read_access_log, store],
        session_id=SID,
        turn=TurnContext(SID, tmp_path, status_sources={"offload": store.status_source}),
        result_hooks=[store.hook],
        events=bus,
        max_steps=60,
    )
    result = asyncio.run(session.run("Read the access log."))
    assert result.output == "I have read the whole log."
    assert len(pages) > 3
    assert "".join(pages) == original
    assert len(offloaded) == 1
    assert [r.ref_id for r in store.refs()] == [state["ref"]]
    store.cleanup()
    assert not store.directory.exists()


def test_a_value_that_cannot_be_encoded_never_reaches_the_store(tmp_path: Path) -> None:
    # A result is frozen when it is made: a cycle fails there (the dispatcher turns that
    # into the call's error output), so the hook only ever sees encodable results.
    circular: list[Any] = []
    circular.append(circular)
    with pytest.raises(ResultEncodingError, match="Circular reference"):
        JsonPart(circular)


def test_big_results_are_measured_off_the_event_loop(tmp_path: Path) -> None:
    store = make(tmp_path, threshold_tokens=0, guard_tokens=1_000)
    threads: list[str] = []
    real = store.process

    def spy(*args: Any) -> Any:
        import threading

        threads.append(threading.current_thread().name)
        return real(*args)

    store.process = spy  # type: ignore[method-assign,assignment]
    run_hook(store, ToolResult("s" * 100))
    run_hook(store, ToolResult("b" * 100_000))
    run_hook(store, ToolResult([JsonPart({"a": "j" * 100_000})]))
    run_hook(store, ToolResult([JsonPart({"a": 1})]))
    assert threads[0] == "MainThread" and threads[3] == "MainThread"
    assert threads[1] != "MainThread" and threads[2] != "MainThread"


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=8)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=5), inner, max_size=6)
        | st.dictionaries(st.integers(), inner, max_size=3)
    ),
    max_leaves=60,
)


@given(_JSON)
def test_stored_json_is_exactly_the_frozen_text(value: Any) -> None:
    # What is stored (and recalled) is the text the model would have been sent: the
    # JSON part's text, fixed when the result was made, never encoded again.
    result = ToolResult([JsonPart(value)])
    expected = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    assert result.text() == expected
    with tempfile.TemporaryDirectory() as home:
        store = make(Path(home), threshold_tokens=0, guard_tokens=1_000)
        _, ref = store.offload(result, tool_name="produce", call_id="c1")
        loaded = store.load(ref.ref_id)
        assert loaded.text() == expected and loaded.parts == result.parts


def test_lone_surrogates_and_empty_results_round_trip(tmp_path: Path) -> None:
    store = make(tmp_path, threshold_tokens=100, guard_tokens=1_000)
    odd = "bytes read with surrogateescape: \udc80\udcff " * 20
    frozen = ToolResult(odd).text()  # what the model is told: no lone surrogates
    assert frozen == odd.replace("\udc80", "\ufffd").replace("\udcff", "\ufffd")
    ref = ref_of(run_hook(store, ToolResult(odd)))
    assert "".join(read_all(store, ref)) == frozen
    json.loads(store.ref_path(ref).read_text(encoding="utf-8"))  # still valid JSON
    _, empty = store.offload(ToolResult(""), tool_name="produce", call_id="c0")
    page = store.read_page(empty.ref_id)
    assert (page.text, page.eof, page.total_chars) == ("", True, 0)
    assert store.load(empty.ref_id).content == ""


def test_the_status_tool_lists_this_sessions_refs(tmp_path: Path) -> None:
    from tooldeck import validate_arguments
    from tooldeck.builtin import load_builtin_registry

    store = make(tmp_path, threshold_tokens=100, guard_tokens=1_000)
    ref = ref_of(run_hook(store, ToolResult("s" * 500), call_id="call_5"))
    turn = TurnContext(SID, tmp_path, status_sources={"offloaded results": store.status_source})
    status = load_builtin_registry().tools["status"]
    ctx = ToolContext(call_id="c", tool_name="status", session_id=SID, turn=turn)
    result = asyncio.run(status.invoke(validate_arguments(status, "{}").params, ctx))
    assert "offloaded results:" in result.text()
    assert f"- {ref}: produce (call call_5), about 500 tokens" in result.text()
