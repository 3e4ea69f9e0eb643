"""``arguments_json`` copies plain JSON arguments without the JSON round trip: the copy
equals that round trip's value (types included) and shares nothing with the input."""

from __future__ import annotations

import json
import math
import pickle
from typing import Any

import pytest

from tooldeck.approvals import arguments_json
from tooldeck.policy.rules import Selector, ToolFacts


def _nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


CASES: list[Any] = [
    {},
    {"text": "héllo ✓", "n": 3, "x": -0.0, "big": 10**30, "ok": True, "none": None},
    {"nested": {"list": [1, 2.5, [True, {"k": "v"}]], "empty": []}},
    {"tuple": (1, 2)},  # not plain JSON: the round trip makes a list
    {"key": {1: "int key"}},  # the round trip makes the key a string
    {"deep": _nested(40)},  # deeper than the copy goes: the round trip
    {"other": object},  # default=str
]


def _typed(value: Any) -> Any:
    """``value`` with every scalar's type beside it (True == 1, 1 == 1.0 otherwise)."""
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return (type(value), value)


@pytest.mark.parametrize("args", CASES)
def test_the_copy_is_the_round_trip(args: dict[str, Any]) -> None:
    expected = json.loads(json.dumps(dict(args), default=str))
    copied = arguments_json(args)
    assert _typed(copied) == _typed(expected)
    assert json.dumps(copied) == json.dumps(expected)
    if args.get("nested"):
        assert copied["nested"] is not args["nested"]
        assert copied["nested"]["list"] is not args["nested"]["list"]


def test_nan_stays_nan() -> None:
    assert math.isnan(arguments_json({"x": math.nan})["x"])


def test_a_selector_matches_as_fnmatch_and_pickles() -> None:
    facts = ToolFacts("echo__echo", "WRITE", "files", "echo")
    for text, hit in [
        ("echo__echo", True), ("echo__*", True), ("echo_[!_]*", False), ("tier:WRITE", True),
        ("tier:STANDARD", False), ("ns:fil*", True), ("ns:ech?", True), ("ns:other", False),
    ]:  # fmt: skip
        selector = Selector(text)
        assert selector.matches(facts) is hit, text
        again = pickle.loads(pickle.dumps(selector))
        assert again == selector and again.matches(facts) is hit
