"""Which session answers a server's question or sampling request, with one shared source.

Real server: npm's ``@modelcontextprotocol/server-everything`` (``trigger-elicitation-request``,
``trigger-sampling-request``, ``trigger-long-running-operation``), over stdio and over
streamable HTTP, behind ONE ``McpSource`` that two sessions ("a" and "b") use with their
own approvers, policies and audit logs.

- over stdio the server's request does not say which call it belongs to: with calls of
  both sessions running there it is declined (audited in both), never guessed; with
  one session's calls it goes to that session;
- over streamable HTTP the request rides the response stream of the call it belongs to:
  it goes to exactly that call's session, even while the other session's calls run;
- a question still waiting when its call ends (the session cancelled) ends with it.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from gateway_client import _listening, _stop, audit_lines, free_port, node_server, npm_server
from tooldeck import ApprovalAnswer, ApprovalRequest, Protection, Session, TurnContext
from tooldeck.mcp import ElicitationRequest, McpSource, Sampling
from tooldeck.mcp.asking import current_route
from tooldeck.policy import Policy, SessionPolicy
from tooldeck.providers.scripted import ScriptedModel, call, reply

EVERYTHING = ("@modelcontextprotocol/server-everything", "2026.8.31", "mcp-server-everything")
ELICIT = "mcp__everything__trigger-elicitation-request"
SAMPLE = "mcp__everything__trigger-sampling-request"
LONG = "mcp__everything__trigger-long-running-operation"
QUESTION = "mcp__everything__elicitation_create"
SAMPLING = "mcp__everything__sampling_createMessage"


def stdio() -> dict[str, Any]:
    entry = npm_server(*EVERYTHING)
    return {"mcpServers": {"everything": node_server(entry, "stdio")}}


@contextmanager
def over_http() -> Iterator[dict[str, Any]]:
    """server-everything in streamable HTTP mode, on a free port; the config to reach it."""
    entry = npm_server(*EVERYTHING)
    port = free_port()
    env = {**os.environ, "PORT": str(port)}
    proc = subprocess.Popen(
        ["node", str(entry), "streamableHttp"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _listening(proc, port, "server-everything")
        yield {"mcpServers": {"everything": {"url": f"http://127.0.0.1:{port}/mcp"}}}
    finally:
        _stop(proc)


@contextmanager
def transport(kind: str) -> Iterator[dict[str, Any]]:
    if kind == "stdio":
        yield stdio()
    else:
        with over_http() as config:
            yield config


def session_policy(tmp_path: Path, name: str, sampling: str = "allow") -> SessionPolicy:
    rules = [
        {"tools": "mcp__everything__trigger-*", "action": "allow"},
        {"tools": SAMPLING, "action": sampling, "reason": f"{name} says {sampling}"},
    ]
    loaded = Policy.from_dict({"profile": {"rules": rules}})
    return SessionPolicy(loaded, session_id=name, directory=tmp_path / name)


class Person:
    """A session's approver: answers every question with its own name, and records."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.asked: list[ApprovalRequest] = []
        self.routes: list[str] = []  # how each request reached this approver

    def __call__(self, request: ApprovalRequest) -> ApprovalAnswer:
        self.asked.append(request)
        route = current_route()
        self.routes.append(route.how if route is not None else "none")
        return ApprovalAnswer(True, arguments={"name": self.name})


async def run(source: McpSource, name: str, protect: Protection, *calls: Any) -> list[str]:
    """One turn of session ``name`` making ``calls`` one after the other; their outputs."""
    model = ScriptedModel([*(reply(c) for c in calls), reply("done")])
    session = Session(model, [source], session_id=name, turn=TurnContext(name), protect=protect)
    result = await session.run("go")
    return [output.result.text() for output in result.tool_outputs]


def long_call(seconds: int = 4) -> Any:
    return call(LONG, {"duration": seconds, "steps": seconds})


async def running(source: McpSource, server: str = "everything") -> None:
    """Until a call is running on ``server``."""
    for _ in range(200):
        if source._servers[server].inflight.calls:
            return
        await asyncio.sleep(0.02)
    raise AssertionError("no call started")


def reasons(state: Path, tool: str) -> list[tuple[str, str]]:
    lines = audit_lines(state)
    return [(line["decision"], line["reason"]) for line in lines if line["tool"] == tool]


def test_over_stdio_two_sessions_calling_at_once_get_a_decline_not_each_others_question(
    tmp_path: Path,
) -> None:
    a, b = Person("Ada"), Person("Bob")
    sampler = ScriptedModel([reply("served")])

    async def main() -> None:
        async with McpSource(stdio(), sampling=Sampling(sampler)) as source:
            protect_a = Protection.policy(session_policy(tmp_path, "a"), approver=a)
            protect_b = Protection.policy(session_policy(tmp_path, "b"), approver=b)
            busy = asyncio.create_task(run(source, "b", protect_b, long_call()))
            await running(source)
            (question,) = await run(source, "a", protect_a, call(ELICIT, {}))
            (sampled,) = await run(source, "a", protect_a, call(SAMPLE, {"prompt": "hi"}))
            await busy
        assert "User declined" in question and "another session" in question, question
        assert "sampling refused" in sampled and "another session" in sampled, sampled
        assert a.asked == [] and b.asked == [] and sampler.requests == []  # nobody guessed
        for name in ("a", "b"):  # both sessions' audits say a request was declined
            lines = reasons(tmp_path / name, QUESTION) + reasons(tmp_path / name, SAMPLING)
            assert [d for d, _ in lines] == ["deny", "deny"], lines
            assert all("another session" in r for _, r in lines)
        assert "Bob" not in str(audit_lines(tmp_path / "a"))  # nothing of b's in a's log

    asyncio.run(main())


def test_over_stdio_one_sessions_calls_are_routed_to_it(tmp_path: Path) -> None:
    a, b = Person("Ada"), Person("Bob")

    async def main() -> None:
        fallback = Person("nobody")
        async with McpSource(stdio(), approver=fallback) as source:
            protect_a = Protection.policy(session_policy(tmp_path, "a"), approver=a)
            protect_b = Protection.policy(session_policy(tmp_path, "b"), approver=b)
            await run(source, "b", protect_b, long_call(1))  # b has used the source, is idle
            (question,) = await run(source, "a", protect_a, call(ELICIT, {}))
            assert "- Name: Ada" in question, question
            assert len(a.asked) == 1 and b.asked == [] and a.routes == ["session"]
            # two direct calls outside any session: one "session", the source's approver
            slow = asyncio.create_task(
                source.call(
                    "everything", "trigger-long-running-operation", {"duration": 2, "steps": 2}
                )
            )
            await running(source)
            direct = await source.call("everything", "trigger-elicitation-request", {})
            await slow
            assert "- Name: nobody" in direct.text(), direct.text()
            assert fallback.routes == ["session"]  # two calls of one "session": no guess

    asyncio.run(main())


def test_over_http_each_request_reaches_exactly_the_session_whose_call_asked(
    tmp_path: Path,
) -> None:
    a, b = Person("Ada"), Person("Bob")
    sampler = ScriptedModel([reply("for a")])
    sampling = Sampling(sampler, budget=1_000)

    async def main() -> None:
        with over_http() as config:
            async with McpSource(config, sampling=sampling) as source:
                protect_a = Protection.policy(session_policy(tmp_path, "a"), approver=a)
                protect_b = Protection.policy(
                    session_policy(tmp_path, "b", sampling="deny"), approver=b
                )
                busy = asyncio.create_task(run(source, "b", protect_b, long_call()))
                await running(source)
                (question,) = await run(source, "a", protect_a, call(ELICIT, {}))
                assert "- Name: Ada" in question, question
                # both at once, several times: never crossed
                for _ in range(3):
                    qa, qb = await asyncio.gather(
                        run(source, "a", protect_a, call(ELICIT, {})),
                        run(source, "b", protect_b, call(ELICIT, {})),
                    )
                    assert "- Name: Ada" in qa[0] and "- Name: Bob" in qb[0], (qa, qb)
                sa, sb = await asyncio.gather(
                    run(source, "a", protect_a, call(SAMPLE, {"prompt": "hi", "maxTokens": 20})),
                    run(source, "b", protect_b, call(SAMPLE, {"prompt": "hi", "maxTokens": 20})),
                )
                await busy
        assert "for a" in sa[0], sa  # a's policy allows it
        assert "sampling refused: denied by policy: b says deny" in sb[0], sb
        assert len(sampler.requests) == 1
        assert len(a.asked) == 4 and len(b.asked) == 3
        assert set(a.routes) == set(b.routes) == {"exact"}
        assert all(isinstance(r.params, ElicitationRequest) for r in a.asked + b.asked)
        assert sampling.left("everything", "b") == 1_000  # a's sampling spent a's budget
        assert sampling.left("everything", "a") < 1_000

    asyncio.run(main())


class Never:
    """An approver that never answers; says when it was entered and when it ended."""

    def __init__(self) -> None:
        self.entered, self.ended = asyncio.Event(), asyncio.Event()

    async def __call__(self, requests: Any) -> list[ApprovalAnswer]:
        self.entered.set()
        try:
            await asyncio.Event().wait()
        finally:
            self.ended.set()
        raise AssertionError("unreachable")


@pytest.mark.parametrize("kind", ["stdio", "http"])
def test_a_request_waiting_ends_when_its_session_is_cancelled(tmp_path: Path, kind: str) -> None:
    """A question, then a sampling request (the policy asks), waiting on an approver that
    never answers: cancelling the session's turn ends each at once, approver included."""
    sampler = ScriptedModel([reply("never used")])

    async def main() -> None:
        with transport(kind) as config:
            async with McpSource(config, sampling=sampler) as source:
                for trigger in (call(ELICIT, {}), call(SAMPLE, {"prompt": "hi"})):
                    never = Never()

                    policy = session_policy(tmp_path, "a", sampling="ask")
                    protect = Protection.policy(policy, approver=never)
                    turn = asyncio.create_task(run(source, "a", protect, trigger))
                    await asyncio.wait_for(never.entered.wait(), 30)
                    turn.cancel()
                    await asyncio.wait_for(never.ended.wait(), 5)  # not the server's 60 s timeout
                    assert not source._servers["everything"].inflight.calls
                after = await source.call("everything", "echo", {"message": "still here"})
                assert "still here" in after.text()
        assert sampler.requests == []
        for tool in (QUESTION, SAMPLING):
            lines = reasons(tmp_path / "a", tool)
            assert any("ended" in r for d, r in lines if d == "deny"), lines

    asyncio.run(main())


ASKING = Path(__file__).parent / "mcp_servers" / "asking.py"


def asking(protocol: str) -> dict[str, Any]:
    server = {"command": sys.executable, "args": [str(ASKING)], "protocol": protocol}
    return {"mcpServers": {"asking": server}}


def asking_policy(tmp_path: Path, name: str, sampling: str) -> SessionPolicy:
    rules = [
        {"tools": "mcp__asking__*", "action": "allow"},
        {"tools": "mcp__asking__sampling_createMessage", "action": sampling},
    ]
    loaded = Policy.from_dict({"profile": {"rules": rules}})
    return SessionPolicy(loaded, session_id=name, directory=tmp_path / name)


def test_in_the_2026_era_the_calls_own_rounds_say_which_session_asked(tmp_path: Path) -> None:
    """The 2026-07-28 era asks inside the call's result (``input_required``): exact over
    stdio too. The same server in the handshake era over stdio: no link, declined."""
    a, b = Person("Ada"), Person("Bob")
    sampler = ScriptedModel([reply("short")])
    # b's call runs while the others are made: until the test lets it end
    done = tmp_path / "done"
    pause = call("mcp__asking__pause", {"seconds": 60, "until": str(done)})
    order = call("mcp__asking__order", {})

    async def main() -> None:
        protect_a = Protection.policy(asking_policy(tmp_path, "a", "allow"), approver=a)
        protect_b = Protection.policy(asking_policy(tmp_path, "b", "deny"), approver=b)
        async with McpSource(asking("auto"), sampling=sampler) as source:
            assert source.server_status("asking").protocol_version == "2026-07-28"
            busy = asyncio.create_task(run(source, "b", protect_b, pause))
            await running(source, "asking")
            (qa,), (qb,) = await asyncio.gather(
                run(source, "a", protect_a, order), run(source, "b", protect_b, order)
            )
            summarise = call("mcp__asking__summarise", {"text": "a long text"})
            (sa,), (sb,) = await asyncio.gather(
                run(source, "a", protect_a, summarise), run(source, "b", protect_b, summarise)
            )
            done.touch()
            await busy
        assert "accept: Ada" in qa and "accept: Bob" in qb, (qa, qb)
        assert "short" in sa and "short" not in sb, (sa, sb)
        assert len(a.asked) == 1 and len(b.asked) == 1 and a.routes == b.routes == ["exact"]
        done.unlink()
        async with McpSource(asking("legacy")) as legacy:
            busy = asyncio.create_task(run(legacy, "b", protect_b, pause))
            await running(legacy, "asking")
            (declined,) = await run(legacy, "a", protect_a, order)
            done.touch()
            await busy
        assert "decline: -" in declined and len(a.asked) == 1, declined

    asyncio.run(main())
