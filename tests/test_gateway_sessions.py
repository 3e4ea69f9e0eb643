"""Several ``tooldeck serve --http`` processes sharing one session store (``--sessions``).

Real processes, real stores (a SQLite file; the PostgreSQL server of
tests/test_workflows_support.py, in a fresh schema), the official SDK's client over
streamable HTTP. "One address" in front of two processes is an httpx transport that
sends each HTTP request to the next process in turn (:class:`Alternating`), so a
session initialized on one is served by the other a request later. Checked: found tools,
approve-always grants and stored results made on one process hold on the other; a
process killed (``kill -9``) and started again mid-session carries on with it; an id
the store does not have is 404, as is another principal's; a store that goes away is
one line to the client, not a hang.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from gateway_client import (
    ALWAYS,
    APPROVE,
    DECLINE,
    INTROSPECTOR,
    PY,
    Answers,
    _listening,
    answered_out_of_band,
    audit_lines,
    free_port,
    oauth_args,
    result_of,
    stdio,
    text_of,
    write_config,
    write_policy,
)
from oauth_server import serving
from test_workflows_support import PG_DSN
from test_workflows_workers import Outage
from tooldeck.policy import arguments_digest

pytest_plugins = ["test_workflows_support"]

REF = re.compile(r"ref_[0-9a-f]{16}")
# echo and pid run; add is WRITE (no rule): asked, out of band (tooldeck approve)
POLICY = '[profile]\n[[profile.rules]]\ntools = ["alpha__echo", "alpha__pid"]\naction = "allow"\n'
OOB = ("--approvals", "out-of-band", "--approval-timeout", "20")
MODERN = "2026-07-28"
INVALID_STATE = "Invalid or expired requestState"
ONE_ADDRESS = "http://127.0.0.1:9/mcp"  # what the clients are given; each request is rerouted


class Alternating(httpx2.AsyncBaseTransport):
    """One address, several gateway processes: each request goes to the next port."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = ports
        self.sent: list[tuple[str, int]] = []
        self.inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        port = self.ports[len(self.sent) % len(self.ports)]
        self.sent.append((request.method, port))
        request.url = request.url.copy_with(port=port)
        request.headers["host"] = f"127.0.0.1:{port}"
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


class Gateways:
    """``tooldeck serve --http`` processes on fixed ports, one store, one state folder."""

    def __init__(self, tmp_path: Path, where: str, env: dict[str, str], *args: str) -> None:
        self.config = write_config(tmp_path, {"alpha": stdio("basic.py")})
        self.policy = write_policy(tmp_path, POLICY)
        self.state = tmp_path / "s"
        self.where = where
        self.env = {**os.environ, **env}
        self.args = args
        self.procs: dict[int, subprocess.Popen[Any]] = {}

    def command(self, port: int) -> list[str]:
        return [
            PY,
            "-m",
            "tooldeck.cli",
            "serve",
            "--mcp",
            str(self.config),
            "--state",
            str(self.state),
            "--policy",
            str(self.policy),
            "--lexical",
            "--sessions",
            self.where,
            "--http",
            str(port),
            *self.args,
        ]

    def start(self, port: int | None = None) -> int:
        port = port or free_port()
        proc = subprocess.Popen(self.command(port), env=self.env)
        self.procs[port] = proc
        _listening(proc, port, "the gateway")
        return port

    def kill(self, port: int) -> None:
        proc = self.procs.pop(port)
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    def stop(self) -> None:
        for proc in self.procs.values():
            proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture
def sessions(
    store_kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> tuple[str, dict[str, str]]:
    """``--sessions WHERE`` and the environment that goes with it, for each store."""
    if store_kind == "sqlite":
        return str(tmp_path / "sessions.sqlite3"), {}
    schema: str = request.getfixturevalue("pg_schema")
    return PG_DSN, {"TOOLDECK_WORKFLOWS_SCHEMA": schema}


@contextmanager
def gateways(tmp_path: Path, where: str, env: dict[str, str], *args: str) -> Iterator[Gateways]:
    running = Gateways(tmp_path, where, env, *args)
    try:
        yield running
    finally:
        running.stop()


@asynccontextmanager
async def client(front: Alternating, elicit: Any = None) -> AsyncIterator[ClientSession]:
    async with (
        httpx2.AsyncClient(transport=front, timeout=httpx2.Timeout(30, read=300)) as http,
        streamable_http_client(ONE_ADDRESS, http_client=http) as (read, write),
        ClientSession(read, write, elicitation_callback=elicit) as c,
    ):
        with anyio.fail_after(30):
            await c.initialize()
        yield c


def evidence(state: Path, tool: str) -> list[dict[str, Any]]:
    """The executed calls of ``tool`` in the evidence records under ``state``."""
    lines = [json.loads(line) for p in state.glob("*.calls.jsonl") for line in p.open()]
    return [e for e in lines if e["tool"] == tool]


async def names(c: ClientSession) -> list[str]:
    return [t.name for t in (await c.list_tools()).tools]


def test_a_session_is_one_session_on_two_processes(
    tmp_path: Path, sessions: tuple[str, dict[str, str]]
) -> None:
    where, env = sessions
    with gateways(tmp_path, where, env, *OOB) as running:
        ports = [running.start(), running.start()]
        front = Alternating(ports)

        async def main() -> None:
            async with client(front) as c:
                found = await c.call_tool("tool_search", {"query": "add two numbers"})
                assert "alpha__add" in text_of(found)
                for _ in range(4):  # listed by each process
                    assert "alpha__add" in await names(c)
                # approve-always, answered out of band while the call waits on one process
                result, _ = await answered_out_of_band(
                    c, running.state, "alpha__add", {"a": 1, "b": 2}, "a\n\n"
                )
                assert result_of(result) == 3, text_of(result)
                for i in range(4):  # the grant holds on both: nothing asked again
                    again = await c.call_tool("alpha__add", {"a": i, "b": 1})
                    assert not again.is_error and result_of(again) == i + 1, text_of(again)
                # a result stored by one process is recalled from the other
                stored = await c.call_tool("alpha__echo", {"text": "kept " * 40_000})
                ref = REF.search(text_of(stored))
                assert ref is not None, text_of(stored)[:300]
                for _ in range(2):
                    page = await c.call_tool("recall_tool_result", {"ref_id": ref.group()})
                    assert not page.is_error and "kept kept" in text_of(page), text_of(page)

        anyio.run(main)
        posts = {port for method, port in front.sent if method == "POST"}
        assert posts == set(ports)  # both processes served the session's requests
        assert list((running.state / "approvals").glob("*.pending.json")) == []
    adds = [e for e in audit_lines(running.state) if e["tool"] == "alpha__add"]
    assert len({e["session_id"] for e in adds}) == 1  # one session, whichever process
    by_grant = [e for e in adds if str(e.get("approved_by")).startswith("grant g_")]
    assert len(by_grant) == 4, adds  # the four calls after approve-always, on both processes
    assert len({e["call_id"].rsplit("-", 1)[0] for e in adds}) == 2  # by two processes


def test_an_approval_asked_by_elicitation_may_be_answered_by_way_of_either_process(
    tmp_path: Path, sessions: tuple[str, dict[str, str]]
) -> None:
    """The client's answer to an elicitation lands on the other process, which passes it
    on to the one whose call waits for it."""
    where, env = sessions
    with gateways(tmp_path, where, env) as running:
        ports = [running.start(), running.start()]
        front = Alternating(ports)
        answers = Answers(APPROVE, DECLINE, ALWAYS)

        async def main() -> None:
            async with client(front, answers) as c:
                await c.call_tool("tool_search", {"query": "add two numbers"})
                with anyio.fail_after(60):
                    once = await c.call_tool("alpha__add", {"a": 1, "b": 2})
                    assert result_of(once) == 3, text_of(once)
                    declined = await c.call_tool("alpha__add", {"a": 1, "b": 3})
                    assert declined.is_error and "Denied by the user" in text_of(declined)
                    always = await c.call_tool("alpha__add", {"a": 2, "b": 2})
                    assert result_of(always) == 4, text_of(always)
                for i in range(4):  # approve-always: asked no more, on either process
                    again = await c.call_tool("alpha__add", {"a": i, "b": 10})
                    assert result_of(again) == i + 10, text_of(again)
                assert len(answers.asked) == 3

        anyio.run(main)
        answered = [p for m, p in front.sent if m == "POST"]
        assert set(answered) == set(ports)


@pytest.mark.no_zygote  # killed, then started again on its port at once
def test_a_killed_process_started_again_carries_on_with_the_session(
    tmp_path: Path, sessions: tuple[str, dict[str, str]]
) -> None:
    where, env = sessions
    with gateways(tmp_path, where, env) as running:
        ports = [running.start(), running.start()]
        front = Alternating(ports)

        async def main() -> None:
            async with client(front) as c:
                found = await c.call_tool("tool_search", {"query": "add two numbers"})
                assert "alpha__add" in text_of(found)
                stored = await c.call_tool("alpha__echo", {"text": "kept " * 40_000})
                ref = REF.search(text_of(stored))
                assert ref is not None
                running.kill(ports[0])  # kill -9, mid-session
                running.start(ports[0])  # the same address again
                for _ in range(4):
                    assert "alpha__add" in await names(c)
                    page = await c.call_tool("recall_tool_result", {"ref_id": ref.group()})
                    assert not page.is_error and "kept kept" in text_of(page), text_of(page)
                echoed = await c.call_tool("alpha__echo", {"text": "still here"})
                assert text_of(echoed) == "still here"

        anyio.run(main)


def test_an_unknown_session_id_is_404_on_every_process(
    tmp_path: Path, sessions: tuple[str, dict[str, str]]
) -> None:
    where, env = sessions
    with gateways(tmp_path, where, env) as running:
        port = running.start()
        ping = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        headers = {
            "Mcp-Session-Id": "0123456789abcdef0123456789abcdef",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-11-25",
        }
        answer = httpx2.post(f"http://127.0.0.1:{port}/mcp", json=ping, headers=headers)
        assert answer.status_code == 404


def test_a_session_store_that_cannot_be_opened_is_one_line(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    closed = free_port()  # nothing listens there
    dsn = f"postgresql://postgres@127.0.0.1:{closed}/test"
    serve = [PY, "-m", "tooldeck.cli", "serve", "--mcp", str(config), "--lexical"]
    run = subprocess.run(
        [*serve, "--sessions", dsn, "--http", str(free_port())],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode != 0
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --sessions: cannot connect"), run.stderr
    assert "Traceback" not in run.stderr
    stdio_run = subprocess.run(
        [*serve, "--sessions", str(tmp_path / "x.sqlite3")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert stdio_run.returncode != 0
    assert stdio_run.stderr.startswith("error: --sessions keeps the sessions of HTTP clients")


def test_a_store_that_goes_away_is_one_line_to_the_client_not_a_hang(
    tmp_path: Path, pg_schema: str
) -> None:
    outage = Outage()
    try:
        env = {"TOOLDECK_WORKFLOWS_SCHEMA": pg_schema}
        with gateways(tmp_path, outage.dsn, env) as running:
            front = Alternating([running.start()])

            async def main() -> None:
                async with client(front) as c:
                    assert "tool_search" in await names(c)
                    outage.cut()
                    # the store's retry window (5 s), then one line: no hang
                    with anyio.fail_after(60), pytest.raises(MCPError) as failed:
                        await c.call_tool("alpha__echo", {"text": "x"})
                    message = str(failed.value)
                    assert "the gateway's session store failed" in message, message
                    assert "\n" not in message
                    outage.restore()
                    with anyio.fail_after(60):
                        back = await c.call_tool("alpha__echo", {"text": "back"})
                    assert text_of(back) == "back"

            anyio.run(main)
    finally:
        outage.cut()


# -- with OAuth: a session is its principal's, on every process ----------------------------
@asynccontextmanager
async def client_2026(front: Alternating, token: str, **options: Any) -> AsyncIterator[Client]:
    """The SDK's ``Client`` in its default mode (MCP 2026-07-28 with this gateway's OAuth)."""
    headers = {"Authorization": f"Bearer {token}"}
    timeout = httpx2.Timeout(30, read=300)
    async with (
        httpx2.AsyncClient(transport=front, headers=headers, timeout=timeout) as http,
        Client(streamable_http_client(ONE_ADDRESS, http_client=http), **options) as c,
    ):
        yield c


@asynccontextmanager
async def handshake_client(front: Alternating, token: str) -> AsyncIterator[ClientSession]:
    """The SDK's ``ClientSession`` (the initialize handshake: an HTTP session)."""
    headers = {"Authorization": f"Bearer {token}"}
    timeout = httpx2.Timeout(30, read=300)
    async with (
        httpx2.AsyncClient(transport=front, headers=headers, timeout=timeout) as http,
        streamable_http_client(ONE_ADDRESS, http_client=http) as (read, write),
        ClientSession(read, write) as c,
    ):
        with anyio.fail_after(30):
            await c.initialize()
        yield c


def test_with_oauth_a_session_is_its_principals_on_every_process(tmp_path: Path) -> None:
    where = str(tmp_path / "sessions.sqlite3")
    with serving(introspector=INTROSPECTOR) as servers:
        args = [*oauth_args(servers, tmp_path), "--oauth-resource", ONE_ADDRESS]
        with gateways(tmp_path, where, {}, *args) as running:
            ports = [running.start(), running.start()]

            def token(subject: str, client_id: str = "agent") -> str:
                body = {"resource": ONE_ADDRESS, "subject": subject, "client_id": client_id}
                return str(servers.control("mint", body)["access_token"])

            alice, bob, carol = token("alice"), token("bob"), token("carol")

            async def main() -> None:
                # the stateless protocol: alice's requests, on either process, are one session
                async with client_2026(Alternating(ports), alice) as a:
                    assert a.protocol_version == MODERN
                    await a.call_tool("tool_search", {"query": "add two numbers"})
                    stored = await a.call_tool("alpha__echo", {"text": "alice only " * 20_000})
                    ref = REF.search(text_of(stored))
                    assert ref is not None
                    for _ in range(2):
                        assert "alpha__add" in [t.name for t in (await a.list_tools()).tools]
                        page = await a.call_tool("recall_tool_result", {"ref_id": ref.group()})
                        assert "alice only" in text_of(page)
                async with client_2026(Alternating(ports[::-1]), bob) as b:
                    assert "alpha__add" not in [t.name for t in (await b.list_tools()).tools]
                    theirs = await b.call_tool("recall_tool_result", {"ref_id": ref.group()})
                    assert theirs.is_error and "alice only" not in text_of(theirs)
                # approvals by input_required rounds: asked on one process, answered on
                # the other (the seal's key and the ask are shared), once over both
                front = Alternating(ports)
                answers = Answers(ALWAYS)
                async with client_2026(front, carol, elicitation_callback=answers) as c:
                    args, yes = {"a": 20, "b": 22}, {"approval": APPROVE}
                    first = await c.session.call_tool("alpha__add", args, allow_input_required=True)
                    assert isinstance(first, types.InputRequiredResult) and first.request_state
                    state = first.request_state
                    ran = await c.session.call_tool(
                        "alpha__add", args, input_responses=yes, request_state=state
                    )
                    assert result_of(ran) == 42
                    assert front.sent[-1][1] != front.sent[-2][1]  # asked on one, run on the other
                    for _ in ports:  # a replay, to either process: refused
                        with pytest.raises(MCPError, match=INVALID_STATE):
                            await c.session.call_tool(
                                "alpha__add", args, input_responses=yes, request_state=state
                            )
                    # the SDK drives the rounds; approve-always holds on both processes
                    assert result_of(await c.call_tool("alpha__add", {"a": 1, "b": 1})) == 2
                    for i in range(3):
                        plain = await c.session.call_tool(
                            "alpha__add", {"a": i, "b": 0}, allow_input_required=True
                        )
                        assert not isinstance(plain, types.InputRequiredResult)
                        assert result_of(plain) == i
                runs = [e for e in evidence(running.state, "alpha__add")]
                assert len([e for e in runs if e["args_sha256"] == arguments_digest(args)]) == 1
                # the handshake: alice's HTTP session is hers, on every process
                front = Alternating(ports)
                async with handshake_client(front, alice) as h:
                    await h.call_tool("tool_search", {"query": "the server's process id"})
                    assert "alpha__pid" in await names(h)
                    assert "alpha__pid" in await names(h)
                    [session_id] = _session_ids(running.state)
                    # bob, or alice through another app, with alice's HTTP session id: 404
                    # from a process that holds it, and from one that never served it
                    for port in [*ports, third]:
                        for who in (bob, token("alice", "another-app")):
                            answer = await _list_with(port, session_id, who)
                            assert answer.status_code == 404, (port, answer.text)
                    mine = await _list_with(third, session_id, alice)
                    assert mine.status_code == 200 and "alpha__pid" in mine.text, mine.text
                # closed by the client (DELETE): gone on every process
                assert _session_ids(running.state) == []
                for port in [*ports, third]:
                    assert (await _list_with(port, session_id, alice)).status_code == 404

            third = running.start()
            anyio.run(main)


def _session_ids(state: Path) -> list[str]:
    """The HTTP session ids in the store (the SQLite file beside the state folder)."""
    import sqlite3

    conn = sqlite3.connect(state.parent / "sessions.sqlite3")
    try:
        rows = conn.execute(
            "SELECT key FROM gateway_sessions WHERE key LIKE 'http:%' ORDER BY created_at"
        ).fetchall()
    finally:
        conn.close()
    return [str(r[0]).removeprefix("http:") for r in rows]


async def _list_with(port: int, session_id: str, token: str) -> httpx2.Response:
    headers = {
        "Mcp-Session-Id": session_id,
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/list"}
    async with httpx2.AsyncClient(timeout=30) as http:
        return await http.post(f"http://127.0.0.1:{port}/mcp", json=body, headers=headers)


# -- the store itself: two processes' updates of one session, at the same time -----------
def test_concurrent_updates_of_one_session_lose_nothing(make_store: Any) -> None:
    """Two stores (two connections: two processes) merge uses and grants into one
    session at the same time: every grant is kept, every tool used is listed."""
    from tooldeck.gateway.session_store import SessionRecord, SessionTable

    async def main() -> None:
        async with make_store() as one, make_store() as two:
            tables = [SessionTable(one), SessionTable(two)]
            await tables[0].create(SessionRecord("http:s1", "gw-0000000000000001"))

            async def writer(table: SessionTable, side: str) -> None:
                for i in range(15):
                    grant = {"id": f"g_{side}{i}", "tool": f"t{side}{i}", "args": None}
                    await table.merge("http:s1", [[f"{side}{i}"]], [grant], limit=100)

            async with anyio.create_task_group() as tg:
                tg.start_soon(writer, tables[0], "a")
                tg.start_soon(writer, tables[1], "b")
            record = await tables[1].get("http:s1")
            assert record is not None
            assert sorted(g["id"] for g in record.grants) == sorted(
                [f"g_a{i}" for i in range(15)] + [f"g_b{i}" for i in range(15)]
            )
            assert sorted(record.loaded) == sorted(
                [f"a{i}" for i in range(15)] + [f"b{i}" for i in range(15)]
            )
            assert record.revision == 30
            # the least recently used go past the limit, on both lists alike
            capped = await tables[0].merge("http:s1", [["z"]], [], limit=4)
            assert capped is not None and capped.used[-1] == "z" and len(capped.used) == 4
            assert capped.loaded == [n for n in record.loaded if n in capped.used] + ["z"]

    anyio.run(main)


def test_a_sessions_file_that_is_not_a_database_is_one_line(tmp_path: Path) -> None:
    """A --sessions file that is not a database is one line, not a traceback."""
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    bogus = tmp_path / "not-a-db.sqlite3"
    bogus.write_text("this is not SQLite\n" * 100)
    serve = [PY, "-m", "tooldeck.cli", "serve", "--mcp", str(config), "--lexical"]
    run = subprocess.run(
        [*serve, "--sessions", str(bogus), "--http", str(free_port())],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode != 0
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --sessions: "), run.stderr
    assert str(bogus) in lines[0]
