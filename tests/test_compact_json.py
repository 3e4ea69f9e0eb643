"""compact_json (tooldeck/_compact.py): json.dumps's compact text, and its errors."""

from __future__ import annotations

import json
import math
from datetime import date
from typing import Any

import pytest

from tooldeck._compact import compact_json


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


VALUES: list[Any] = [
    "plain",
    'q"\\\n\u2028é✓\ud800',
    12,
    -1.5,
    math.inf,
    None,
    False,
    [],
    {},
    {"b": 1, "a": [1, {"z": None, "y": "ü"}], 3: "int key", None: 1, 2.5: 0},
    (1, 2),
    {"k" * 100: ["v" * 1000] * 3},
]


@pytest.mark.parametrize("value", VALUES)
def test_the_text_of_json_dumps(value: Any) -> None:
    assert compact_json(value) == dumps(value)


@pytest.mark.parametrize("bad", [{"when": date(2026, 1, 2)}, [object()], {(1, 2): 3}])
def test_what_json_cannot_spell_fails_as_json_dumps_does(bad: Any) -> None:
    with pytest.raises(TypeError) as before:
        dumps(bad)
    with pytest.raises(TypeError) as now:
        compact_json(bad)
    assert str(now.value) == str(before.value)
    assert compact_json({"after": [1]}) == '{"after":[1]}'


def test_a_cycle_fails_as_json_dumps_does() -> None:
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    with pytest.raises(ValueError, match="Circular reference"):
        compact_json(cyclic)
    assert compact_json([cyclic[:0]]) == "[[]]"
