"""Clients of the stateless protocol (MCP 2026-07-28) at the gateway, end to end.

The clients are the official SDK's ``Client`` in its default mode, which negotiates
2026-07-28 (no ``initialize``, no ``Mcp-Session-Id``, one self-contained request each);
the gateway is a real ``tooldeck serve`` process in front of tests/mcp_servers/basic.py,
over stdio, or over HTTP as an OAuth resource server of tests/oauth_server.py (tokens
minted there for several users, or got by the SDK's own ``OAuthClientProvider``).
What is checked: a session that lasts across requests (found tools stay listed, stored
results can be recalled a request later), ``subscriptions/listen`` announcing listing
changes to that session's client only, approvals by ``input_required`` rounds whose
sealed ``requestState`` cannot be forged, replayed or used by another user, and the
refusal of 2026-07-28 requests over HTTP without OAuth (the SDK falls back by itself).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError
from typer.testing import CliRunner

from gateway_client import (
    ALLOW_ALL,
    ALWAYS,
    APPROVE,
    DECLINE,
    INTROSPECTOR,
    Answers,
    Events,
    answered_out_of_band,
    audit_lines,
    bearer_client,
    gateway_process,
    oauth_args,
    oauth_client,
    result_of,
    served_gateway,
    settled,
    stdio,
    stdio_2026,
    text_of,
    write_config,
    write_policy,
)
from oauth_server import OAuthServers, serving
from tooldeck.approvals import ApprovalRequest, PendingApproval
from tooldeck.cli import app
from tooldeck.gateway import Catalog
from tooldeck.gateway.input_required import FORM_KEY, InputAsks
from tooldeck.gateway.out_of_band import WHO
from tooldeck.gateway.session import GatewaySession
from tooldeck.gateway.stateless import PrincipalSessions
from tooldeck.mcp import McpSource
from tooldeck.policy import Policy, arguments_digest
from tooldeck.result import ToolResult
from tooldeck.tools import Tool
from tooldeck.transcript import ToolCall

MODERN = "2026-07-28"
REF = re.compile(r"ref_[0-9a-f]{16}")
# echo and pid run; add is WRITE (no rule): asked
POLICY = '[profile]\n[[profile.rules]]\ntools = ["alpha__echo", "alpha__pid"]\naction = "allow"\n'
INVALID_STATE = "Invalid or expired requestState"


async def names(client: Any) -> list[str]:
    return [t.name for t in (await client.list_tools()).tools]


def evidence(state: Path, tool: str) -> list[dict[str, Any]]:
    """The executed calls of ``tool`` in the evidence records under ``state``."""
    lines = [json.loads(line) for p in state.glob("*.calls.jsonl") for line in p.open()]
    return [e for e in lines if e["tool"] == tool]


# -- over stdio: one process, one client, one session ------------------------------------
def test_stdio_search_is_announced_by_listen_and_the_session_lasts(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    policy = write_policy(tmp_path, ALLOW_ALL)
    state = tmp_path / "s"
    events = Events()

    async def main() -> None:
        async with stdio_2026(config, state, "--policy", str(policy)) as c:
            assert c.protocol_version == MODERN
            assert c.server_capabilities.tools and c.server_capabilities.tools.list_changed
            async with anyio.create_task_group() as tg:
                await tg.start(events.listen, c)
                found = await c.call_tool("tool_search", {"query": "echo the text back"})
                assert "alpha__echo" in text_of(found)
                await events.next()
                listed = await names(c)
                assert listed[:3] == ["tool_search", "call_tool", "recall_tool_result"]
                assert "alpha__echo" in listed
                # the found tool, by its name; a huge result is stored, recalled later
                stored = await c.call_tool("alpha__echo", {"text": "kept " * 40_000})
                ref = REF.search(text_of(stored))
                assert ref is not None, text_of(stored)[:300]
                page = await c.call_tool("recall_tool_result", {"ref_id": ref.group()})
                assert not page.is_error and "kept kept" in text_of(page)
                assert "alpha__echo" in await names(c)  # still listed, requests later
                # an upstream server that dies and comes back is announced too
                pid = result_of(await c.call_tool("alpha__pid", {}))
                os.kill(pid, signal.SIGKILL)
                with anyio.fail_after(45):
                    while True:
                        again = await c.call_tool("alpha__pid", {})
                        if not again.is_error:
                            break
                        await anyio.sleep(0.2)
                assert result_of(again) != pid
                await events.next()
                assert "alpha__echo" in await names(c)
                tg.cancel_scope.cancel()

    anyio.run(main)
    assert len(list(state.glob("*.audit.jsonl"))) == 1  # every request: one session


def test_stdio_approvals_are_asked_with_input_required(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    state = tmp_path / "s"
    answers = Answers(APPROVE, DECLINE, ALWAYS)

    async def main() -> None:
        # no policy file: upstream tools are WRITE, and WRITE asks
        async with stdio_2026(config, state, "--core", "*", elicitation_callback=answers) as c:
            assert c.protocol_version == MODERN
            ran = await c.call_tool("alpha__echo", {"text": "approved"})
            assert not ran.is_error and text_of(ran) == "approved"
            declined = await c.call_tool("alpha__echo", {"text": "declined"})
            assert declined.is_error and "Denied by the user" in text_of(declined)
            assert result_of(await c.call_tool("alpha__add", {"a": 1, "b": 2})) == 3
            # approve-always: the grant lasts for the session, across requests
            assert result_of(await c.call_tool("alpha__add", {"a": 2, "b": 3})) == 5

    anyio.run(main)
    assert len(answers.asked) == 3
    first = answers.asked[0]
    assert isinstance(first, types.ElicitRequestFormParams)
    assert "alpha__echo" in first.message and '"text":"approved"' in first.message
    lines = audit_lines(state)
    answered = [(e["decision"], e.get("approved_by")) for e in lines if e["level"] == "approval"]
    assert answered == [
        ("approve", "mcp-client-user"),
        ("deny", None),
        ("approve-always", "mcp-client-user"),
    ]
    # the two rounds of an ask are one call: asked, judged again on the retry, answered once
    call = next(e["call_id"] for e in lines if e["level"] == "approval")
    assert [e["decision"] for e in lines if e["call_id"] == call] == ["ask", "ask", "approve"]
    assert [e["args_sha256"] for e in evidence(state, "alpha__echo")] == [
        arguments_digest({"text": "approved"})
    ]
    assert len(evidence(state, "alpha__add")) == 2


# -- over HTTP with OAuth: a session per principal ----------------------------------------
class OAuthGateway:
    def __init__(self, url: str, servers: OAuthServers, state: Path) -> None:
        self.url = url
        self.servers = servers
        self.state = state

    def token(self, subject: str | None, client_id: str = "agent") -> str:
        body = {"resource": self.url, "subject": subject, "client_id": client_id}
        return str(self.servers.control("mint", body)["access_token"])


@pytest.fixture(scope="module")
def oauth_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OAuthGateway]:
    tmp = tmp_path_factory.mktemp("stateless")
    config = write_config(tmp, {"alpha": stdio("basic.py")})
    policy = write_policy(tmp, POLICY)
    with (
        serving(introspector=INTROSPECTOR) as servers,
        served_gateway(
            config, tmp / "s", "--policy", str(policy), *oauth_args(servers, tmp)
        ) as url,
    ):
        g = OAuthGateway(url, servers, tmp / "s")
        anyio.run(_settle, g)  # its upstream server is up before the tests' clients come
        yield g


async def _settle(g: OAuthGateway) -> None:
    async with bearer_client(g.url, g.token("settle")) as c:
        await settled(c)


def test_one_principal_is_one_session_and_principals_are_kept_apart(
    oauth_gateway: OAuthGateway,
) -> None:
    g = oauth_gateway
    alice, bob = g.token("alice"), g.token("bob")
    alice_elsewhere = g.token("alice", client_id="another-app")  # another principal
    alice_events, bob_events = Events(), Events()

    async def main() -> None:
        async with (
            bearer_client(g.url, alice) as a,
            bearer_client(g.url, bob) as b,
            anyio.create_task_group() as tg,
        ):
            assert a.protocol_version == b.protocol_version == MODERN
            await tg.start(alice_events.listen, a)
            await tg.start(bob_events.listen, b)
            await a.call_tool("tool_search", {"query": "echo the text back"})
            await alice_events.next()
            assert "alpha__echo" in await names(a)
            stored = await a.call_tool("alpha__echo", {"text": "alice only " * 20_000})
            ref = REF.search(text_of(stored))
            assert ref is not None
            # bob was not told, does not see alice's tools and cannot read her results
            await anyio.sleep(1)
            assert bob_events.count == 0
            assert "alpha__echo" not in await names(b)
            theirs = await b.call_tool("recall_tool_result", {"ref_id": ref.group()})
            assert theirs.is_error and "alice only" not in text_of(theirs)
            await b.call_tool("tool_search", {"query": "the server's process id"})
            await bob_events.next()
            assert "alpha__pid" in await names(b) and "alpha__pid" not in await names(a)
            assert alice_events.count == 1
            tg.cancel_scope.cancel()
        # alice again, on new connections: the same session
        async with bearer_client(g.url, alice) as a2:
            assert "alpha__echo" in await names(a2)
            mine = await a2.call_tool("recall_tool_result", {"ref_id": ref.group()})
            assert "alice only" in text_of(mine)
        async with bearer_client(g.url, alice_elsewhere) as other:
            assert "alpha__echo" not in await names(other)
            refused = await other.call_tool("recall_tool_result", {"ref_id": ref.group()})
            assert refused.is_error and "alice only" not in text_of(refused)

    anyio.run(main)


def test_an_sdk_client_logs_in_and_speaks_2026(oauth_gateway: OAuthGateway) -> None:
    async def main() -> None:
        async with oauth_client(oauth_gateway.url, "dana") as (client, storage, sessions):
            assert client.protocol_version == MODERN
            await client.call_tool("tool_search", {"query": "echo the text back"})
            assert "alpha__echo" in await names(client)
            echoed = await client.call_tool("alpha__echo", {"text": "hello"})
            assert text_of(echoed) == "hello"
            assert storage.tokens is not None
            assert sessions == []  # no Mcp-Session-Id: the session is the principal's

    anyio.run(main)


def test_input_required_approvals_cannot_be_forged_replayed_or_borrowed(
    oauth_gateway: OAuthGateway,
) -> None:
    g = oauth_gateway
    alice, bob = g.token("alice-2"), g.token("bob-2")
    answers = Answers(APPROVE, DECLINE, ALWAYS)
    args = {"a": 20, "b": 22}
    yes = {"approval": APPROVE}

    async def main() -> None:
        async with (
            bearer_client(g.url, alice, elicitation_callback=answers) as a,
            bearer_client(g.url, bob, elicitation_callback=answers) as b,
        ):
            # the SDK's client drives the rounds by itself
            assert result_of(await a.call_tool("alpha__add", {"a": 1, "b": 1})) == 2
            declined = await a.call_tool("alpha__add", {"a": 1, "b": 2})
            assert declined.is_error and "Denied by the user" in text_of(declined)
            # by hand: the first round asks, and nothing has run
            first = await a.session.call_tool("alpha__add", args, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult) and first.request_state
            form = first.input_requests and first.input_requests["approval"]
            assert isinstance(form, types.ElicitRequest)
            assert "alpha__add" in form.params.message
            state = first.request_state
            assert state.startswith("v1.") and "tooldeck.ask" not in state  # sealed
            tampered = state[:-3] + ("AAA" if not state.endswith("AAA") else "BBB")
            for who, name, arguments, sent in (
                (a, "alpha__add", args, tampered),  # forged
                (a, "alpha__add", {"a": 20, "b": 23}, state),  # for another call
                (a, "alpha__echo", {"text": "x"}, state),  # for another tool
                (b, "alpha__add", args, state),  # another user's
            ):
                with pytest.raises(MCPError, match=INVALID_STATE):
                    await who.session.call_tool(
                        name, arguments, input_responses=yes, request_state=sent
                    )
            ran_yet = [e["args_sha256"] for e in evidence(g.state, "alpha__add")]
            assert arguments_digest(args) not in ran_yet
            # answers without the state approve nothing: the call is asked anew
            again = await a.session.call_tool(
                "alpha__add", args, input_responses=yes, allow_input_required=True
            )
            assert isinstance(again, types.InputRequiredResult)
            # the answer with its state: run, once
            ran = await a.session.call_tool(
                "alpha__add", args, input_responses=yes, request_state=state
            )
            assert result_of(ran) == 42
            with pytest.raises(MCPError, match=INVALID_STATE):  # replayed
                await a.session.call_tool(
                    "alpha__add", args, input_responses=yes, request_state=state
                )
            # approve-always: alice's grant holds across her requests, and is hers only
            assert result_of(await a.call_tool("alpha__add", {"a": 2, "b": 2})) == 4
            assert result_of(await a.call_tool("alpha__add", {"a": 3, "b": 3})) == 6
            theirs = await b.session.call_tool("alpha__add", args, allow_input_required=True)
            assert isinstance(theirs, types.InputRequiredResult)

    anyio.run(main)
    runs = [e["args_sha256"] for e in evidence(g.state, "alpha__add")]
    assert runs.count(arguments_digest(args)) == 1
    assert len(answers.asked) == 3


def test_a_token_without_a_subject_is_refused_for_2026(oauth_gateway: OAuthGateway) -> None:
    token = oauth_gateway.token(None, client_id="service")

    async def main() -> None:
        async with bearer_client(oauth_gateway.url, token, mode=MODERN) as c:
            with pytest.raises(MCPError, match="names no user") as refused:
                await c.list_tools()
        assert refused.value.error.code == types.UNSUPPORTED_PROTOCOL_VERSION
        async with bearer_client(oauth_gateway.url, token) as c:  # falls back by itself
            assert c.protocol_version != MODERN
            assert "tool_search" in await names(c)

    anyio.run(main)


# -- over HTTP without OAuth: refused, and the SDK falls back to the handshake ----------
@pytest.mark.parametrize("token", [None, "t0k3n-" + "x" * 40])
def test_without_oauth_2026_requests_are_refused_and_clients_fall_back(
    tmp_path: Path, token: str | None
) -> None:
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    args: list[str] = []
    if token:
        (tmp_path / "token").write_text(token)
        args = ["--token-file", str(tmp_path / "token")]

    async def main(url: str) -> None:
        async with bearer_client(url, token, mode=MODERN) as c:
            with pytest.raises(MCPError, match="--oauth-issuer") as refused:
                await c.list_tools()
        data = refused.value.error.data
        assert refused.value.error.code == types.UNSUPPORTED_PROTOCOL_VERSION
        assert isinstance(data, dict) and MODERN not in data["supported"]
        async with bearer_client(url, token) as a, bearer_client(url, token) as b:
            assert a.protocol_version == b.protocol_version == "2025-11-25"
            await a.call_tool("tool_search", {"query": "echo the text back"})
            assert "alpha__echo" in await names(a)
            assert "alpha__echo" not in await names(b)  # a session per connection

    with served_gateway(config, tmp_path / "s", *args) as url:
        anyio.run(main, url)
        headers = {
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": MODERN,
            "Mcp-Method": "server/discover",
            **({"Authorization": f"Bearer {token}"} if token else {}),
        }
        meta = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        discover = {"jsonrpc": "2.0", "id": 1, "method": "server/discover"}
        raw = httpx.post(url, json={**discover, "params": {"_meta": meta}}, headers=headers)
        assert raw.status_code == 400, raw.text
        assert raw.json()["error"]["code"] == types.UNSUPPORTED_PROTOCOL_VERSION


# -- idle sessions end; a stop ends the listen streams -----------------------------------
def test_an_idle_session_ends_a_listening_one_does_not_and_a_stop_ends_streams(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    policy = write_policy(tmp_path, POLICY)
    state = tmp_path / "s"
    with serving(introspector=INTROSPECTOR) as servers:
        args = ["--policy", str(policy), "--session-idle", "2", *oauth_args(servers, tmp_path)]
        with gateway_process(config, state, *args) as (url, proc):
            anyio.run(_idle_then_stop, OAuthGateway(url, servers, state), proc)
            assert proc.wait(15) == 0
    offload = state / ".tooldeck" / "tool-offload"
    assert [p for p in offload.iterdir() if any(p.iterdir())] == []  # stored results removed
    lines = audit_lines(state)
    gone = [e for e in lines if "session ended" in e.get("reason", "")]
    assert [(e["tool"], e["decision"]) for e in gone] == [("alpha__add", "deny")]


async def _idle_then_stop(g: OAuthGateway, proc: subprocess.Popen[Any]) -> None:
    offload = g.state / ".tooldeck" / "tool-offload"
    idle, listening = g.token("idle"), g.token("listening")
    async with bearer_client(g.url, idle) as c:
        await c.call_tool("tool_search", {"query": "echo the text back"})
        stored = await c.call_tool("alpha__echo", {"text": "soon gone " * 20_000})
        ref = REF.search(text_of(stored))
        assert ref is not None and len(list(offload.iterdir())) == 1
    events = Events()
    async with (
        bearer_client(g.url, listening, elicitation_callback=Answers()) as held,
        anyio.create_task_group() as tg,
    ):
        await tg.start(events.listen, held)
        await held.call_tool("tool_search", {"query": "echo the text back"})
        await events.next()
        await anyio.sleep(4)  # over --session-idle 2
        assert [p for p in offload.iterdir() if any(p.iterdir())] == []  # the idle one ended
        async with bearer_client(g.url, idle) as c:  # a new session: nothing found, nothing kept
            assert "alpha__echo" not in await names(c)
            gone = await c.call_tool("recall_tool_result", {"ref_id": ref.group()})
            assert gone.is_error and "soon gone" not in text_of(gone)
        assert "alpha__echo" in await names(held)  # its open stream kept it
        # an ask waits for its answer; then the gateway stops: the stream ends gracefully
        asked = await held.session.call_tool(
            "alpha__add", {"a": 1, "b": 1}, allow_input_required=True
        )
        assert isinstance(asked, types.InputRequiredResult)
        proc.send_signal(signal.SIGTERM)
        with anyio.fail_after(30):  # a tools change may come first (the upstream stopping)
            while not events.ended:
                await events.next()


# -- a 2026 client without elicitation: asks wait out of band (--approvals out-of-band) ---
def test_a_2026_client_without_elicitation_waits_for_tooldeck_approve(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    state = tmp_path / "s"

    async def main() -> None:
        oob = ("--core", "*", "--approvals", "out-of-band")
        async with stdio_2026(config, state, *oob) as c:  # no elicitation callback
            assert c.protocol_version == MODERN
            result, _ = await answered_out_of_band(
                c, state, "alpha__echo", {"text": "by tooldeck approve"}, "y\n"
            )
            assert text_of(result) == "by tooldeck approve"

    anyio.run(main)
    approvals = [e for e in audit_lines(state) if e["level"] == "approval"]
    assert [(e["decision"], e["approved_by"]) for e in approvals] == [("approve", WHO)]


def test_session_idle_is_checked(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    out = CliRunner().invoke(app, ["serve", "--mcp", str(config), "--session-idle", "0"])
    assert out.exit_code == 2
    assert out.output.strip() == (
        "error: --session-idle 0 is out of range; give seconds between 1 and 604800 (a week)"
    )


# -- the two tables on their own: real sessions, real audit logs ------------------------
def _session(state: Path) -> GatewaySession:
    catalog = Catalog(McpSource({"mcpServers": {}}, prefixed=False), semantic=False)
    return GatewaySession(catalog, Policy(), state)


def _pending(session: GatewaySession, name: str) -> PendingApproval:
    tool = Tool.from_function(lambda: ToolResult.text("ran"), name=name, description="a tool")
    call = ToolCall(f"{session.id}-1", name, {})
    return PendingApproval([ApprovalRequest(call, tool, {}, "it is WRITE")])


def _call(name: str, **more: Any) -> types.CallToolRequestParams:
    return types.CallToolRequestParams(name=name, arguments={}, **more)


def test_an_ask_is_taken_once_by_its_own_session_and_expires_audited(tmp_path: Path) -> None:
    mine, other = _session(tmp_path), _session(tmp_path)
    asks = InputAsks(ttl=60, limit=2)
    first = asks.ask(mine, _call("t"), _pending(mine, "t"), lambda tool: tool.name)
    assert first.input_requests and isinstance(first.input_requests[FORM_KEY], types.ElicitRequest)
    yes = {FORM_KEY: APPROVE}
    retry = _call("t", request_state=first.request_state, input_responses=yes)
    for who, params in (
        (other, retry),  # another session's: refused, and the ask is not burned
        (mine, _call("u", request_state=first.request_state, input_responses=yes)),
        (mine, _call("t", request_state='{"format": "tooldeck.ask/1", "ask": "guess"}')),
        (mine, _call("t", request_state="not json")),
    ):
        with pytest.raises(MCPError, match=INVALID_STATE):
            asks.answer(who, params)
    assert asks.waiting(mine) and not asks.waiting(other)
    call_id, answer = asks.answer(mine, retry)
    assert call_id == f"{mine.id}-1" and answer.approved
    with pytest.raises(MCPError, match=INVALID_STATE):  # once only
        asks.answer(mine, retry)
    # an empty answer never approves
    second = asks.ask(mine, _call("t"), _pending(mine, "t"), str)
    _, empty = asks.answer(mine, _call("t", request_state=second.request_state))
    assert not empty.approved
    # asks nobody answers: the oldest goes when too many wait, the rest when time is up
    for _ in range(3):
        asks.ask(other, _call("t"), _pending(other, "t"), str)
    assert len(asks) == 2
    asks.expire(now=time.monotonic() + 61)
    assert len(asks) == 0 and not asks.waiting(other)
    reasons = [e["reason"] for e in audit_lines(tmp_path) if e["session_id"] == other.id]
    assert len(reasons) == 3 and all(r.endswith("the call was not run") for r in reasons)
    assert sum("too many" in r for r in reasons) == 1
    assert sum("did not answer within 60 s" in r for r in reasons) == 2


def test_principal_sessions_end_when_idle_unless_held_or_kept(tmp_path: Path) -> None:
    ended: list[GatewaySession] = []
    kept: set[str] = set()
    table = PrincipalSessions(
        lambda: _session(tmp_path),
        idle=10,
        ended=ended.append,
        keep=lambda s: s.id in kept,
        limit=3,
    )
    with table.hold("alice") as alice, table.hold("alice") as again:
        assert alice is again
        assert table.expire(now=time.monotonic() + 60) == []  # held
    with table.hold("bob") as bob, table.hold("carol") as carol:
        kept.add(carol.id)
    with pytest.raises(MCPError, match="sessions already"), table.hold("dave"):
        pass
    assert table.expire(now=time.monotonic() + 60) == [alice, bob]
    assert ended == [alice, bob] and len(table) == 1
    table.close()
    assert ended == [alice, bob, carol] and len(table) == 0
