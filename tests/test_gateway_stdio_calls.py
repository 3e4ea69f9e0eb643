"""``tools/call`` over stdio answered by the gateway itself (gateway/stdio_calls.py).

A raw JSON-RPC client over pipes to a real ``tooldeck serve`` in front of
tests/mcp_servers/basic.py (and mcp-server-time), so that every line the gateway writes
is seen: the calls a client without elicitation makes take the gateway's own path, and
keep every guarantee the MCP SDK's server gave them (policy, audit, evidence, offload,
cancellation, one answer per id), and the same answer; a client that declared
elicitation is served by the SDK, and answered the same.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway_client import (
    ALLOW_ALL,
    PY,
    audit_lines,
    stdio,
    time_server,
    write_config,
    write_policy,
)

WAIT = 60.0


class Raw:
    """A raw client: lines written to the gateway's stdin, every line it writes read by
    a thread (so a missing answer fails the test, never hangs it)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))

    def send(self, *messages: dict[str, Any] | bytes) -> None:
        assert self.proc.stdin is not None
        for message in messages:
            raw = message if isinstance(message, bytes) else json.dumps(message).encode() + b"\n"
            self.proc.stdin.write(raw)
        self.proc.stdin.flush()

    def call(self, request_id: int | str, name: str, arguments: dict[str, Any]) -> None:
        params = {"name": name, "arguments": arguments}
        self.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})

    def next(self, timeout: float = WAIT) -> dict[str, Any]:
        try:
            message = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"nothing from the gateway within {timeout} s") from None
        self.seen.append(message)
        return message

    def answer(self, request_id: int | str) -> dict[str, Any]:
        """The answer to ``request_id`` (what comes before it is kept in ``seen``)."""
        deadline = time.monotonic() + WAIT
        while True:
            message = self.next(max(0.1, deadline - time.monotonic()))
            if message.get("id") == request_id and "method" not in message:
                return message

    def answers(self, request_id: int | str) -> list[dict[str, Any]]:
        return [m for m in self.seen if m.get("id") == request_id and "method" not in m]

    def initialize(self, *, elicitation: bool = False, version: str = "2025-06-18") -> None:
        capabilities: dict[str, Any] = {"elicitation": {}} if elicitation else {}
        params = {
            "protocolVersion": version,
            "capabilities": capabilities,
            "clientInfo": {"name": "raw", "version": "1"},
        }
        self.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
        assert "result" in self.answer(0)
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def settle(self) -> None:
        """Wait until the upstream servers are up (no server listed as starting)."""
        for n in range(200):
            request_id = f"list-{n}"
            self.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/list"})
            if not self.answer(request_id)["result"].get("_meta", {}).get("tooldeck/starting"):
                return
            time.sleep(0.05)


@contextmanager
def served(tmp_path: Path, *args: str, servers: dict[str, Any] | None = None) -> Iterator[Raw]:
    config = write_config(tmp_path, servers or {"alpha": stdio("basic.py")})
    policy = write_policy(tmp_path, ALLOW_ALL)
    state = str(tmp_path / "state")
    command = [PY, "-m", "tooldeck.cli", "serve", "--mcp", str(config), "--lexical",
               "--state", state, "--core", "*", "--policy", str(policy), *args]  # fmt: skip
    proc = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    try:
        yield Raw(proc)
    finally:
        if proc.poll() is None:
            assert proc.stdin is not None
            proc.stdin.close()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


def _text(answer: dict[str, Any]) -> str:
    return "\n".join(c.get("text", "") for c in answer["result"]["content"])


def test_concurrent_calls_answered_out_of_order_each_under_its_own_id(tmp_path: Path) -> None:
    with served(tmp_path) as c:
        c.initialize()
        c.settle()
        c.call(1, "alpha__slow", {"seconds": 1.5})
        c.call("two", "alpha__slow", {"seconds": 0.2})
        c.call(3, "alpha__echo", {"text": "three"})
        c.call("4", "alpha__add", {"a": 2, "b": 2})
        got = {}
        while len(got) < 4:
            message = c.next()
            if "id" in message and "method" not in message:
                assert message["id"] not in got, f"a second answer: {message}"
                got[message["id"]] = message
        order = [m["id"] for m in c.seen if m.get("id") in got]
        assert order.index(1) > order.index("two")  # the slow one came back last
        assert "slept 1.5" in _text(got[1]) and "slept 0.2" in _text(got["two"])
        assert _text(got[3]) == "three"
        assert got["4"]["result"]["structuredContent"] == {"result": 4}


def test_a_cancelled_call_is_never_answered_and_the_session_goes_on(tmp_path: Path) -> None:
    with served(tmp_path) as c:
        c.initialize()
        c.settle()
        c.call(7, "alpha__slow", {"seconds": 1.0})
        time.sleep(0.3)  # on its way upstream
        cancel = {"requestId": 7, "reason": "the user pressed stop"}
        c.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel})
        c.call(8, "alpha__echo", {"text": "after"})
        assert _text(c.answer(8)) == "after"
        c.call(9, "alpha__slow", {"seconds": 1.5})  # ends well after 7 would have
        assert "slept 1.5" in _text(c.answer(9))
        assert c.answers(7) == []
        # a cancel for an id never sent, or answered already, changes nothing
        unknown = {"requestId": 8}
        c.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": unknown})
        c.call(10, "alpha__echo", {"text": "still"})
        assert _text(c.answer(10)) == "still" and len(c.answers(8)) == 1


def test_policy_deny_and_ask_audit_and_evidence_on_this_path(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    policy = write_policy(
        tmp_path,
        '[profile]\n[[profile.rules]]\ntools = "alpha__echo"\naction = "deny"\n'
        'reason = "no echoes here"\n'
        '[[profile.rules]]\ntools = "alpha__add"\naction = "allow"\n',
        "strict.toml",
    )
    state = tmp_path / "state"
    command = [PY, "-m", "tooldeck.cli", "serve", "--mcp", str(config), "--lexical",
               "--state", str(state), "--core", "*", "--policy", str(policy)]  # fmt: skip
    proc = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    c = Raw(proc)
    try:
        c.initialize()
        c.settle()
        c.call(1, "alpha__echo", {"text": "hi"})
        denied = c.answer(1)["result"]
        assert denied["isError"] and "no echoes here" in denied["content"][0]["text"]
        c.call(2, "alpha__wipe", {})  # no rule: asked, and nobody can answer
        asked = c.answer(2)["result"]
        assert asked["isError"] and "nobody can approve it" in asked["content"][0]["text"]
        c.call(3, "alpha__add", {"a": 1, "b": 2})
        assert c.answer(3)["result"]["structuredContent"] == {"result": 3}
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(30)
    audited = {(a["tool"], a["decision"]) for a in audit_lines(state)}
    assert {("alpha__echo", "deny"), ("alpha__wipe", "deny"), ("alpha__add", "allow")} <= audited
    evidence = [json.loads(line) for p in state.glob("*.calls.jsonl") for line in p.open()]
    assert [e["tool"] for e in evidence if e.get("tool") == "alpha__add"], evidence


def test_a_large_result_is_offloaded_and_recalled(tmp_path: Path) -> None:
    big = " ".join(f"word{n}" for n in range(6_000))
    with served(tmp_path, "--offload-tokens", "1000", "--guard-tokens", "2000") as c:
        c.initialize()
        c.settle()
        c.call(1, "alpha__echo", {"text": big})
        text = _text(c.answer(1))
        assert len(text) < len(big) and "recall_tool_result" in text, text[:300]
        stored = list((tmp_path / "state").rglob("*"))
        assert any(big[:200] in p.read_text(errors="replace") for p in stored if p.is_file())


def test_malformed_and_oversized_lines_get_json_rpc_errors(tmp_path: Path) -> None:
    with served(tmp_path) as c:
        c.initialize()
        c.send(b"{oops\n")
        assert c.next()["error"]["code"] == -32700
        c.send(b"[1, 2]\n")
        assert c.next() == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32600, "message": "Invalid request: not JSON-RPC 2.0"},
        }
        c.send({"jsonrpc": "2.0", "id": 5})  # neither a request nor an answer
        bad = c.next()
        assert bad["id"] == 5 and bad["error"]["code"] == -32600
        c.send({"jsonrpc": "1.0", "id": 6, "method": "tools/list"})
        assert c.next()["error"]["code"] == -32600
        c.send(b"\n   \n")  # blank lines: nothing
        # a call whose params are not a call's: the SDK's own answer, invalid params
        c.send({"jsonrpc": "2.0", "id": 11, "method": "tools/call", "params": {"name": 5}})
        assert c.answer(11)["error"]["code"] == -32602
        c.send(b'{"jsonrpc": "2.0", "id": 12, "method": "tools/call", "params": {"name": "'
               + b"x" * (33 << 20) + b'"}}\n')  # fmt: skip
        too_long = c.next()
        assert too_long["id"] is None and too_long["error"]["code"] == -32600
        assert "bytes" in too_long["error"]["message"]
        c.call(13, "alpha__echo", {"text": "fine"})  # the rest of that line was dropped
        assert _text(c.answer(13)) == "fine"
        assert c.answers(12) == []


def test_an_upstream_that_dies_mid_call_gives_one_error_result(tmp_path: Path) -> None:
    with served(tmp_path) as c:
        c.initialize()
        c.settle()
        c.call(1, "alpha__pid", {})
        pid = c.answer(1)["result"]["structuredContent"]["result"]
        c.call(2, "alpha__slow", {"seconds": 30})
        time.sleep(0.5)
        os.kill(pid, signal.SIGKILL)
        died = c.answer(2)["result"]
        assert died["isError"] and "went away" in died["content"][0]["text"], died
        c.call(3, "alpha__echo", {"text": "back"})  # reconnected
        assert _text(c.answer(3)) == "back"
        time.sleep(0.3)
        while not c.lines.empty():
            c.next()
        assert len(c.answers(2)) == 1


def _without_ids(answer: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in answer.items() if k != "id"}


@pytest.mark.parametrize("version", ["2024-11-05", "2025-06-18", "2025-11-25"])
def test_answers_are_the_sdks_answers(tmp_path: Path, version: str) -> None:
    """The same calls from a client that declared elicitation (served by the SDK's
    server) and from one that did not (served here): the same answers, byte for byte
    after the id; mcp-server-time's tools too."""
    calls = [
        ("alpha__echo", {"text": "héllo"}),
        ("alpha__add", {"a": 1, "b": 2}),
        ("alpha__weather", {"city": "Oslo"}),
        ("alpha__fail", {"message": "no"}),
        ("alpha__add", {"a": "x"}),
        ("alpha__nope", {}),
        ("time__convert_time", {"source_timezone": "UTC", "time": "12:00",
                                "target_timezone": "Asia/Tokyo"}),
    ]  # fmt: skip
    servers = {"alpha": stdio("basic.py"), "time": time_server()}
    got: dict[bool, list[dict[str, Any]]] = {}
    for elicitation in (True, False):
        (tmp_path / str(elicitation)).mkdir()
        with served(tmp_path / str(elicitation), servers=servers) as c:
            c.initialize(elicitation=elicitation, version=version)
            c.settle()
            answers = []
            for n, (name, arguments) in enumerate(calls):
                c.call(n + 100, name, arguments)
                answers.append(_without_ids(c.answer(n + 100)))
            got[elicitation] = answers
    assert got[False] == got[True]


def test_the_tooldeck_script_answers_initialize_once_then_serves(tmp_path: Path) -> None:
    """``python -m tooldeck serve`` (the ``tooldeck`` script's way in) starts answering
    ``initialize`` before the command line loads (``tooldeck.__main__``): answered once,
    and the session goes on, its calls taken by the gateway itself."""
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    policy = write_policy(tmp_path, ALLOW_ALL)
    state = str(tmp_path / "state")
    command = [PY, "-m", "tooldeck", "serve", "--mcp", str(config), "--lexical",
               "--state", state, "--core", "*", "--policy", str(policy)]  # fmt: skip
    proc = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    c = Raw(proc)
    try:
        c.initialize()
        c.settle()
        c.call(1, "alpha__echo", {"text": "script"})
        assert _text(c.answer(1)) == "script"
        assert len(c.answers(0)) == 1
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(30)


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=12),
    cuts=st.lists(st.integers(min_value=0, max_value=600), max_size=10),
    limit=st.integers(min_value=1, max_value=30),
    last_newline=st.booleans(),
)
def test_stdin_lines_whatever_the_chunks(
    lines: list[bytes], cuts: list[int], limit: int, last_newline: bool
) -> None:
    """WireStdin's splitter: the lines back, however the bytes arrive; a line over the
    limit is TOO_LONG once and the next line is read whole."""
    from tooldeck.gateway._stdin import TOO_LONG, _Lines

    data = b"\n".join(lines) + (b"\n" if last_newline and lines else b"")
    splitter = _Lines(limit)
    got: list[str] = []
    start = 0
    for cut in sorted(min(c, len(data)) for c in cuts):
        got.extend(splitter.feed(data[start:cut]))
        start = max(start, cut)
    got.extend(splitter.feed(data[start:]))
    got.extend(splitter.end())
    expected = [
        TOO_LONG if len(line) > limit else line.decode("utf-8", "replace") for line in lines
    ]
    if lines and not last_newline and lines[-1] == b"":
        expected.pop()  # an empty last line without its newline is no line
    assert got == expected
    assert all(g is TOO_LONG for g, e in zip(got, expected, strict=True) if e is TOO_LONG)
