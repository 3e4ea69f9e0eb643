"""Offload store: no two sessions share a directory; recall is exact and always advances."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from tooldeck import Tool, ToolContext, ToolResult
from tooldeck.offload import OffloadStore, RecallError
from tooldeck.offload.format import session_dir_name
from tooldeck.transcript import ToolCall

SESSION_IDS = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["alice", "Alice", "s-abc", "tenant:alice/session 1", "a..b", ".", "-x"]),
)


@given(SESSION_IDS, SESSION_IDS)
def test_session_directories_are_injective(a: str, b: str) -> None:
    if a != b:
        assert session_dir_name(a) != session_dir_name(b)
    name = session_dir_name(a)
    assert "/" not in name and name not in (".", "..") and name


def test_a_session_named_like_anothers_hashed_directory_cannot_read_its_refs(
    tmp_path: Path,
) -> None:
    tenant = "tenant:alice/session 1"
    owner = OffloadStore(tmp_path, tenant, threshold_tokens=100, guard_tokens=1_000)
    _, ref = owner.offload(ToolResult("x" * 2_000), tool_name="t", call_id="c")
    old_name = "s-" + hashlib.sha256(tenant.encode()).hexdigest()[:32]  # what it used to be
    for intruder_id in (old_name, owner.directory.name, owner.directory.name.upper()):
        intruder = OffloadStore(tmp_path, intruder_id, threshold_tokens=100, guard_tokens=1_000)
        assert intruder.directory != owner.directory
        assert intruder.refs() == []
        try:
            intruder.read_page(ref.ref_id)
        except RecallError as exc:
            assert "no stored result" in str(exc)
        else:
            raise AssertionError("another session read the ref")


def test_lone_surrogates_come_back_exactly_as_the_model_would_see_them(tmp_path: Path) -> None:
    store = OffloadStore(tmp_path, "s", threshold_tokens=100, guard_tokens=1_000)
    original = "\udc80\ud800x\udfff" * 40_000  # 160,000 characters
    result = ToolResult(original)
    frozen = result.text()
    assert len(frozen) == 160_000 and "\ud800" not in frozen
    _, ref = store.offload(result, tool_name="t", call_id="c")
    pages, offset = [], 0
    while True:
        page = store.read_page(ref.ref_id, offset)
        assert page.end > page.offset  # every page advances
        pages.append(page.text)
        if page.next_offset is None:
            break
        offset = page.next_offset
    assert "".join(pages) == frozen
    assert store.load(ref.ref_id).text() == frozen


@given(st.text(min_size=1, max_size=3_000), st.integers(1, 400))
def test_paging_at_any_offset_and_limit_always_advances(text: str, limit: int) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as home:
        store = OffloadStore(home, "s", threshold_tokens=1, guard_tokens=1_000, page_tokens=50)
        result = ToolResult(text)
        _, ref = store.offload(result, tool_name="t", call_id="c")
        frozen, offset, pieces = result.text(), 0, []
        for _ in range(len(frozen) + 1):
            page = store.read_page(ref.ref_id, offset, limit)
            assert page.end > page.offset
            pieces.append(page.text)
            if page.next_offset is None:
                break
            offset = page.next_offset
        assert "".join(pieces) == frozen


def test_the_hook_stores_the_frozen_text(tmp_path: Path) -> None:
    live = {"rows": list(range(5_000))}
    result = ToolResult.wrap(live)
    live["rows"].clear()  # after the tool returned
    store = OffloadStore(tmp_path, "s", threshold_tokens=100, guard_tokens=1_000)
    big = Tool.from_schema(
        name="big", description="b", json_schema={"type": "object"}, execute=lambda p, c: None
    )
    asyncio.run(store.hook(ToolCall("c", "big", "{}"), big, result, ToolContext(session_id="s")))
    (ref,) = store.refs()
    assert store.load(ref.ref_id).text() == result.text() != ToolResult.wrap(live).text()
