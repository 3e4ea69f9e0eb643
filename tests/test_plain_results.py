"""A plain tools/call answer (text blocks only) made into a ToolResult without the SDK's
models gives exactly what the general path gives: the SDK's check of the answer for the
negotiated version, its model, then call_tool_result_to_tool_result. Anything the plain
path does not recognise (hostile or unusual answers) is left to the general path."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp.client.session import _CallToolResultAdapter, _later_revision_fields
from mcp_types.version import KNOWN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from tooldeck.mcp.direct_calls import checked
from tooldeck.mcp.plain_results import plain_texts, plain_tool_result
from tooldeck.mcp.results import call_tool_result_to_tool_result
from tooldeck.result import ToolResult

NEWEST = KNOWN_PROTOCOL_VERSIONS[-1]
META = {"io.modelcontextprotocol/serverInfo": {"name": "basic", "version": ""}}


def general(raw: dict[str, Any], version: str) -> ToolResult:
    """The general path (what direct_calls.call_tool and connection do without plain)."""
    model = checked(_CallToolResultAdapter, version, copy.deepcopy(raw))
    return call_tool_result_to_tool_result(model, server="echo", tool="echo")


def plain(raw: dict[str, Any], version: str) -> ToolResult | None:
    mine = copy.deepcopy(raw)  # the plain path keeps what it is handed
    checked_type = "resultType" not in _later_revision_fields("tools/call", version)
    texts = plain_texts(mine, checked_type)
    if texts is None:
        return None
    return plain_tool_result(texts, mine.get("isError", False), mine.get("_meta"), "echo", "echo")


def same(a: ToolResult, b: ToolResult) -> None:
    assert a == b
    assert a.text() == b.text()
    assert type(a.content) is type(b.content)
    # details in the same key order: the evidence record and anything dumping them agree
    assert json.dumps(a.details) == json.dumps(b.details)
    assert [f.name for f in dataclasses.fields(a)] == [f.name for f in dataclasses.fields(b)]
    for field in dataclasses.fields(a):
        assert getattr(a, field.name) == getattr(b, field.name)


def blocks(*texts: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": t} for t in texts]


COMMON = [  # answers the plain path takes, for the newest version
    {"content": blocks("hi"), "isError": False, "resultType": "complete", "_meta": META},
    {"content": blocks("hi"), "resultType": "complete"},
    {"content": blocks("boom"), "isError": True, "resultType": "complete"},
    {"content": [], "isError": False, "resultType": "complete"},
    {"content": blocks("a", "", "ünïcødé ✓"), "resultType": "complete", "_meta": {}},
    {"content": blocks("x" * 200_000), "resultType": "complete"},  # huge: still plain
    {"content": blocks(*["line"] * 500), "resultType": "complete"},
    {"content": blocks("t"), "resultType": "complete", "_meta": {"n": None, "l": [1, 2.5]}},
]

HOSTILE = [  # answers it leaves to the general path (which may accept or refuse them)
    {},
    {"content": "not a list", "resultType": "complete"},
    {"content": [{"type": "text"}], "resultType": "complete"},
    {"content": [{"type": "text", "text": 5}], "resultType": "complete"},
    {"content": [{"type": "text", "text": None}], "resultType": "complete"},
    {"content": [{"type": "image", "text": "x"}], "resultType": "complete"},
    {"content": [["text", "x"]], "resultType": "complete"},
    {"content": [{"type": "text", "text": "x", "annotations": None}], "resultType": "complete"},
    {"content": blocks("x"), "isError": "yes", "resultType": "complete"},
    {"content": blocks("x"), "isError": None, "resultType": "complete"},
    {"content": blocks("x"), "isError": 1, "resultType": "complete"},
    {"content": blocks("x"), "resultType": "incomplete"},
    {"content": blocks("x"), "resultType": 1},
    {"content": blocks("x")},  # the newest version wants resultType
    {"content": blocks("x"), "resultType": "complete", "structuredContent": {"a": 1}},
    {"content": blocks("x"), "resultType": "complete", "ttlMs": -5},
    {"content": blocks("x"), "resultType": "complete", "extra": 1},
    {"content": blocks("x"), "resultType": "complete", "_meta": "no"},
    {"content": blocks("x"), "resultType": "complete", "_meta": {"f": math.inf}},
    {"content": blocks("x"), "resultType": "complete", "_meta": {"f": math.nan}},
    {"content": blocks("\ud800 lone"), "resultType": "complete"},
    {"content": blocks("x"), "resultType": "complete", "_meta": {"k": "\udfff"}},
    {"content": blocks("x"), "resultType": "complete", "_meta": {"\ud800": 1}},
    {"resultType": "input_required", "inputRequests": {}},
]


@pytest.mark.parametrize("raw", COMMON)
def test_a_plain_answer_gives_the_general_paths_result(raw: dict[str, Any]) -> None:
    made = plain(raw, NEWEST)
    assert made is not None  # the plain path was taken
    same(made, general(raw, NEWEST))


@pytest.mark.parametrize("version", KNOWN_PROTOCOL_VERSIONS)
@pytest.mark.parametrize("raw", COMMON + HOSTILE)
def test_every_version_plain_or_left_alone(raw: dict[str, Any], version: str) -> None:
    """Either the plain path declines, or the general path accepts and agrees."""
    made = plain(raw, version)
    if made is None:
        return
    same(made, general(raw, version))


@pytest.mark.parametrize("raw", HOSTILE)
def test_hostile_answers_are_left_to_the_general_path(raw: dict[str, Any]) -> None:
    assert plain(raw, NEWEST) is None


def test_an_older_version_drops_result_type_unread() -> None:
    raw = {"content": blocks("hi"), "isError": False, "resultType": "whatever"}
    old = KNOWN_PROTOCOL_VERSIONS[0]
    made = plain(raw, old)
    assert made is not None
    same(made, general(raw, old))
    assert plain(raw, NEWEST) is None  # the newest reads it: left to the general path
    assert general(raw, NEWEST).details["mcp"]["resultType"] == "whatever"


def test_the_general_path_refuses_what_is_left_to_it() -> None:
    """Some hostile answers: the general path's check refuses them (an error result)."""
    for raw in HOSTILE[:6]:
        assert plain(raw, NEWEST) is None
        with pytest.raises(ValidationError):
            general(raw, NEWEST)


def test_the_result_is_frozen_and_owns_its_details() -> None:
    raw = {"content": blocks("a", "b"), "resultType": "complete", "_meta": {"k": [1]}}
    made = plain(raw, NEWEST)
    assert made is not None
    assert made.content == general(raw, NEWEST).content and isinstance(made.content, tuple)
    assert made.text() == "a\nb" and not made.is_error
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.is_error = True  # type: ignore[misc]
    changed = dataclasses.replace(made, is_error=True)  # replace makes (and freezes) one
    assert changed.is_error and changed.details == made.details


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=8,
)
_block = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=8)}),
    st.dictionaries(st.sampled_from(["type", "text", "annotations", "_meta"]), _json),
)
_answer = st.fixed_dictionaries(
    {"content": st.lists(_block, max_size=3)},
    optional={
        "isError": st.one_of(st.booleans(), _json),
        "resultType": st.one_of(st.just("complete"), _json),
        "_meta": st.one_of(st.dictionaries(st.text(max_size=3), _json), _json),
        "structuredContent": _json,
    },
)


@given(_answer, st.sampled_from(KNOWN_PROTOCOL_VERSIONS))
def test_any_answer_plain_or_left_alone(raw: dict[str, Any], version: str) -> None:
    made = plain(raw, version)
    if made is not None:
        same(made, general(raw, version))
