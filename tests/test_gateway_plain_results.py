"""Through a real ``tooldeck serve``: an upstream's answers, plain (text blocks, taken from
the wire by mcp/plain_results.py) or not (checked by the SDK's models), reach the client
and the evidence record as the general path makes them: the SDK's check for the
negotiated version, its model, call_tool_result_to_tool_result, the result hooks, the
answer's JSON. Hostile answers (not JSON-RPC, an error, wrong types, a huge result) end
as they did. The upstream is tests/mcp_servers/verbatim.py, which answers what it is
told to."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from mcp.client.session import _CallToolResultAdapter
from pydantic import ValidationError

from gateway_client import PY
from test_gateway_stdio_calls import _text, served
from tooldeck.gateway.wire import call_result_json
from tooldeck.mcp.direct_calls import checked
from tooldeck.mcp.results import call_tool_result_to_tool_result
from tooldeck.result import ToolResult

SERVER = Path(__file__).parent / "mcp_servers" / "verbatim.py"
CLIENT_VERSION = "2025-06-18"
META = {"io.modelcontextprotocol/serverInfo": {"name": "verbatim", "version": "1"}}


def text(*texts: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": t} for t in texts]


PLAIN = [
    {"content": text("hello"), "isError": False, "resultType": "complete", "_meta": META},
    {"content": text("hello"), "isError": False},
    {"content": text("a", "b ✓"), "resultType": "complete"},
    {"content": text("it failed"), "isError": True, "resultType": "complete"},
    {"content": [], "resultType": "complete"},
]
OTHER = [  # the SDK's models check them, as before
    {"content": text("x"), "resultType": "complete", "structuredContent": {"n": 1}},
    {"content": [{"type": "text", "text": "x", "annotations": {"priority": 0.5}}]},
    {"content": text("x"), "resultType": "complete", "_meta": {"f": 1e400}},
]
WRONG = [  # wrong types: the SDK's check refuses them
    {"content": [{"type": "text", "text": 5}], "resultType": "complete"},
    {"content": "text", "resultType": "complete"},
    {"content": text("x"), "isError": "no", "resultType": "complete"},
]


def _upstream(log: Path) -> dict[str, Any]:
    return {"command": PY, "args": [str(SERVER), "stdio"], "env": {"VERBATIM_LOG": str(log)}}


def _version(log: Path) -> str:
    lines = log.read_text().splitlines()
    return str(json.loads(lines[-1])["params"]["protocolVersion"])


def _general(raw: dict[str, Any], version: str) -> ToolResult | None:
    try:
        model = checked(_CallToolResultAdapter, version, copy.deepcopy(raw))
    except ValidationError:
        return None
    return call_tool_result_to_tool_result(model, server="v", tool="reply")


def _evidence(tmp_path: Path) -> list[dict[str, Any]]:
    (path,) = (tmp_path / "state").glob("*.calls.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_answers_and_evidence_as_the_general_path_makes_them(tmp_path: Path) -> None:
    log = tmp_path / "initialize.log"
    cases = PLAIN + OTHER + WRONG
    with served(tmp_path, servers={"v": _upstream(log)}) as c:
        c.initialize(version=CLIENT_VERSION)
        c.settle()
        answers = []
        for n, raw in enumerate(cases):
            c.call(n, "v__reply", {"result": raw})
            answers.append(c.answer(n))
        version = _version(log)
        evidence = _evidence(tmp_path)
    assert len(evidence) == len(cases)
    for raw, answer, record in zip(cases, answers, evidence, strict=True):
        expected = _general(raw, version)
        if expected is None:  # refused by the SDK's check: an error, as before
            assert raw in WRONG
            assert answer["result"]["isError"] and "failed" in _text(answer), answer
            assert record["result"] is None and record["is_error"]
            continue
        assert answer["result"] == call_result_json(expected, CLIENT_VERSION), raw
        assert record["result"] == expected.details["mcp"], raw
        assert record["is_error"] == expected.is_error


def test_hostile_answers_end_as_before(tmp_path: Path) -> None:
    log = tmp_path / "initialize.log"
    with served(tmp_path, servers={"v": _upstream(log)}) as c:
        c.initialize(version=CLIENT_VERSION)
        c.settle()
        c.call(1, "v__reply", {"line": '{"jsonrpc": "1.0", "id": ID, "result": {}}'})
        assert "not JSON-RPC" in _text(c.answer(1))
        c.call(2, "v__reply", {"error": {"code": -32001, "message": "nope"}})
        assert "rejected reply: nope (code -32001)" in _text(c.answer(2))
        c.call(3, "v__reply", {"line": '{"jsonrpc": "2.0", "id": ID, "result": "a string"}'})
        assert c.answer(3)["result"]["isError"]
        huge = "word " * 60_000  # well over the offload threshold
        raw = {"content": text(huge), "isError": False, "resultType": "complete"}
        c.call(4, "v__reply", {"result": raw})
        answer = c.answer(4)
        assert "recall_tool_result" in _text(answer) and len(_text(answer)) < len(huge)
        c.call(5, "v__reply", {"result": {"content": text("after"), "resultType": "complete"}})
        assert _text(c.answer(5)) == "after"
        version = _version(log)
        evidence = _evidence(tmp_path)
    expected = _general(raw, version)
    assert expected is not None
    assert evidence[3]["result"] == expected.details["mcp"]  # the whole result, as sent
    for n in (1, 2, 3, 4, 5):
        assert len(c.answers(n)) == 1
