"""canonical_json (policy/audit.py) keeps the C encoder json's encode makes on every
call: the same text as the encoder's encode, errors as its, and usable after one."""

from __future__ import annotations

import json
import math
import threading
from datetime import date
from typing import Any

import pytest

from tooldeck.policy.audit import _CANONICAL, canonical_json

VALUES: list[Any] = [
    "plain",
    'q"\\\n\u2028é✓',
    0,
    -1.5,
    math.inf,
    -math.inf,
    None,
    True,
    [],
    {},
    {"b": 1, "a": [1, {"z": None, "y": "ü"}], "c": {"nested": [True, 2.0]}},
    {"when": date(2026, 1, 2), "set": {1}},  # default=str
    [[[[["deep"]]]]],
    {"k" * 100: "v" * 1000},
]


@pytest.mark.parametrize("value", VALUES)
def test_the_text_of_the_encoders_encode(value: Any) -> None:
    assert canonical_json(value) == _CANONICAL.encode(value)


def test_nan_is_spelled_as_json_spells_it() -> None:
    assert canonical_json([math.nan]) == _CANONICAL.encode([math.nan]) == "[NaN]"


def test_a_cycle_fails_as_before_and_the_next_value_encodes() -> None:
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    with pytest.raises(ValueError) as before:
        _CANONICAL.encode(cyclic)
    with pytest.raises(ValueError) as now:
        canonical_json(cyclic)
    assert str(now.value) == str(before.value)
    assert canonical_json({"b": 2, "a": 1}) == '{"a":1,"b":2}'


def test_threads_each_encode_their_own() -> None:
    value = {"x": [{"y": list(range(50))}] * 20}
    expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(300):
                assert canonical_json(value) == expected
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
