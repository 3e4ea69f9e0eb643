"""The token estimator: accuracy on known samples, linearity, memory, speed, plugging."""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tooldeck import tokens
from tooldeck.tokens import (
    default_estimate_tokens,
    estimate_tokens,
    get_token_estimator,
    prefix_within,
    set_token_estimator,
    suffix_within,
)

# Token counts of these exact strings by the real o200k_base tokenizer (counted offline
# with the bpe-openai package, see bench/bench_offload.py tokens).
PROSE = (
    "The dispatcher is the only code path that runs a tool. For one model step it resolves "
    "each name in the turn's toolset, validates and repairs the arguments, asks the policy "
    "hook about every valid call, and then runs the calls in the order the model gave them. "
    "Exceptions are logged with their traceback and kept in the output's details; the model "
    "gets a short message instead."
)
CODE = """def _groups(slots: list[_Slot]) -> list[list[_Slot]]:
    groups: list[list[_Slot]] = []
    for slot in slots:
        parallel = slot.tool is not None and slot.tool.execution_mode == "parallel"
        if parallel and groups and groups[-1][-1].tool is not None:
            groups[-1].append(slot)
        else:
            groups.append([slot])
    return groups
"""
JSON = (
    '{"id":1234,"name":"tooldeck","tags":["agents","tools","llm"],"owner":{"login":"octo",'
    '"id":583231,"type":"User"},"stars":1520,"open_issues":17,"created_at":'
    '"2025-11-30T11:17:00Z","license":null}'
)
O200K = {"prose": (PROSE, 77), "code": (CODE, 87), "json": (JSON, 70)}


@pytest.fixture(autouse=True)
def _default_estimator() -> Iterator[None]:
    previous = set_token_estimator(None)
    yield
    set_token_estimator(previous)


@pytest.mark.parametrize("kind", sorted(O200K))
def test_close_to_a_real_tokenizer(kind: str) -> None:
    text, real = O200K[kind]
    assert len(text) > 150
    assert abs(estimate_tokens(text) - real) <= 0.25 * real


def test_much_closer_than_chars_over_four_on_json() -> None:
    text, real = O200K["json"]
    assert abs(estimate_tokens(text) - real) < abs(len(text) / 4 - real)


def test_empty_and_tiny() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("a") == 0  # 0.2 of a token rounds down
    assert estimate_tokens("hello world") >= 1
    assert estimate_tokens("7") == 1


def test_non_ascii_and_lone_surrogates() -> None:
    cjk = "工具调用的结果太大时保存到磁盘" * 10
    assert 0.6 * len(cjk) <= estimate_tokens(cjk) <= 1.2 * len(cjk)
    assert estimate_tokens("🎉" * 10) == 20
    cyrillic = "Привет, как дела? " * 20
    assert estimate_tokens(cyrillic) > len(cyrillic) / 4
    assert estimate_tokens("bad \udc80 surrogate") > 0


def test_grows_with_the_text() -> None:
    text = PROSE + CODE + JSON
    counts = [estimate_tokens(text[:n]) for n in range(0, len(text), 37)]
    assert counts == sorted(counts)


def test_linear_across_slices() -> None:
    part = (PROSE + "\n" + CODE + "\n" + JSON + "\n") * 1_200
    part = part[: 1 << 20]
    whole = default_estimate_tokens(part * 3)
    assert abs(whole - 3 * default_estimate_tokens(part)) <= 2


def test_no_big_allocations_on_20_mb() -> None:
    text = ("x = compute(a, b)  # result\n" * 800_000)[:20_000_000]
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        estimate_tokens(text)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 6_000_000  # scratch for one 1 Mi-character slice, not the 20 MB


def test_fast_on_typical_results() -> None:
    text = (PROSE + CODE + JSON)[:4_000] * 1
    estimate_tokens(text)
    started = time.perf_counter()
    for _ in range(200):
        estimate_tokens(text)
    per_call = (time.perf_counter() - started) / 200
    assert per_call < 0.002  # a few tens of microseconds normally; generous for busy CI


def test_pluggable_estimator() -> None:
    assert get_token_estimator() is default_estimate_tokens
    previous = set_token_estimator(len)
    assert previous is default_estimate_tokens
    assert estimate_tokens("abcdef") == 6
    assert tokens.estimate_tokens("abc") == 3
    assert set_token_estimator(None) is len
    assert get_token_estimator() is default_estimate_tokens


@pytest.mark.parametrize("budget", [0, 1, 10, 50, 200])
def test_prefix_and_suffix_fit_the_budget(budget: int) -> None:
    text = (PROSE + "\n") * 20
    n = prefix_within(text, budget)
    assert estimate_tokens(text[:n]) <= budget
    if 0 < n < len(text):  # close to the most that fits
        assert estimate_tokens(text[: int(n * 1.05) + 2]) > budget * 0.97
    m = suffix_within(text, budget)
    assert estimate_tokens(text[len(text) - m :]) <= budget


def test_prefix_with_exact_estimator_and_whole_text() -> None:
    text = "abcdefghij" * 10
    assert prefix_within(text, 37, len) == 37
    assert suffix_within(text, 37, len) == 37
    assert prefix_within(text, 1_000, len) == len(text)
    assert prefix_within("", 10) == 0


def _naive(text: str) -> int:
    units = sum(tokens._WEIGHTS[b] for b in text.encode("utf-8", "surrogatepass"))
    return (units + 32) // 64


@given(st.text(max_size=3_000))
def test_the_fast_sum_is_exactly_the_weight_sum(text: str) -> None:
    assert default_estimate_tokens(text) == _naive(text)


def test_the_fast_sum_is_exact_across_slice_boundaries() -> None:
    heavy = "9" * 5_000 + "🎉" * 3_000 + "\n\t" * 2_000 + "€" * 1_000
    assert default_estimate_tokens(heavy) == _naive(heavy)
    long = ("ab9\n" * 300_000) + "🎉"  # over one 1 Mi-character slice
    assert default_estimate_tokens(long) == _naive(long)
