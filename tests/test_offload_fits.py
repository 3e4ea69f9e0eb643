"""The offload hook gives back, unmeasured, a text result of at most half as many
characters as its smaller limit (offload/store.py ``_fits``): what ``process`` gives it,
since the built-in estimator counts at most 2 tokens a character."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tooldeck import ImagePart, JsonPart, TextPart, ToolContext, ToolResult, tool
from tooldeck.offload import OffloadStore
from tooldeck.tokens import default_estimate_tokens, set_token_estimator
from tooldeck.transcript import ToolCall

SID = "s-fits"


@tool(read_only=True)
def produce() -> str:
    """Produce something (the tests give the result directly)."""
    return ""


def both(store: OffloadStore, result: ToolResult) -> tuple[ToolResult, ToolResult]:
    """(what the hook gives, what process gives)."""
    call = ToolCall("c1", produce.name, {})
    ctx = ToolContext("c1", produce.name, SID)
    hooked = asyncio.run(store.hook(call, produce, result, ctx))
    processed, _ = store.process(call, produce, result, ctx)
    return hooked, processed


@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=300))
def test_the_builtin_estimate_is_at_most_two_tokens_a_character(text: str) -> None:
    assert default_estimate_tokens(text) <= 2 * len(text)


@pytest.mark.parametrize("unit", ["\n", "😀", "a", "7", " ", "\t", "é", "中", "\n😀"])
def test_the_heaviest_characters_at_the_bound(unit: str) -> None:
    for n in range(0, 60):
        assert default_estimate_tokens(unit * n) <= 2 * len(unit * n)


CONTENTS = [
    lambda n: "\n" * n,
    lambda n: "😀" * n,
    lambda n: "word " * (n // 5),
    lambda n: [TextPart("\n" * (n // 2)), TextPart("😀" * (n // 2))],
    lambda n: [JsonPart({"k": "\n" * max(0, n - 10)})],
    lambda n: [TextPart("x" * n), ImagePart(data="aGk=")],
]


@pytest.mark.parametrize("threshold", [0, 420, 500])
@pytest.mark.parametrize("make", CONTENTS)
def test_the_hook_gives_what_process_gives(tmp_path: Path, threshold: int, make: object) -> None:
    store = OffloadStore(tmp_path, SID, threshold_tokens=threshold, guard_tokens=600)
    fitted = 0
    for n in range(0, 700, 7):
        result = ToolResult(make(n))  # type: ignore[operator]
        hooked, processed = both(store, result)
        if store._fits(result):  # given back unmeasured: process gives it back too
            fitted += 1
            assert hooked is result and processed is result
        elif processed is result:  # measured, and it fits
            assert hooked is result
        else:  # offloaded (a new ref each time) or cut: both changed it
            assert hooked.text() != result.text() and processed.text() != result.text()
    images = any(isinstance(p, ImagePart) for p in ToolResult(make(7)).parts)  # type: ignore[operator]
    assert (fitted == 0) == images


def test_a_store_or_process_estimator_is_always_counted(tmp_path: Path) -> None:
    heavy = lambda text: 10 * len(text)  # noqa: E731 - over the built-in bound
    text = "x" * 200  # fits the bound of the built-in estimator, not this one's count
    store = OffloadStore(tmp_path, SID, threshold_tokens=0, guard_tokens=1000, estimator=heavy)
    hooked, processed = both(store, ToolResult(text))
    assert hooked == processed and hooked.text() != text  # cut by the guard
    store = OffloadStore(tmp_path, SID, threshold_tokens=0, guard_tokens=1000)
    assert store._fits(ToolResult(text))
    previous = set_token_estimator(heavy)
    try:
        assert not store._fits(ToolResult(text))
        hooked, processed = both(store, ToolResult(text))
    finally:
        set_token_estimator(previous)
    assert hooked == processed and hooked.text() != text
