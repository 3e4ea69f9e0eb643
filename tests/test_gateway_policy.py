"""The gateway's policy: every call through the chain, approvals by elicitation, audit.

A real ``tooldeck serve`` in front of tests/mcp_servers/basic.py, reached with the
official MCP client SDK; approvals are answered by the SDK client's
``elicitation_callback`` (or the client declares no elicitation at all).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types

from gateway_client import (
    ALLOW_ALL,
    ALWAYS,
    APPROVE,
    DECLINE,
    UNCHECKED,
    Answers,
    audit_lines,
    gateway,
    result_of,
    stdio,
    text_of,
    write_config,
    write_policy,
)


def test_a_call_the_policy_denies_never_reaches_the_server(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    policy = write_policy(
        tmp_path,
        ALLOW_ALL
        + '[[profile.rules]]\ntools = "alpha__echo"\naction = "deny"\n'
        + 'reason = "no echoes here"\n',
    )
    state = tmp_path / "s"
    asked = Answers()

    async def main() -> None:
        async with gateway(
            config, state, "--core", "*", "--policy", str(policy), elicit=asked
        ) as c:
            denied = await c.call_tool("alpha__echo", {"text": "hi"})
            assert denied.is_error and "Denied by policy: no echoes here" in text_of(denied)
            # call_tool is unwrapped first: the policy judges the real tool
            wrapped = await c.call_tool(
                "call_tool", {"name": "alpha__echo", "arguments": {"text": "hi"}}
            )
            assert wrapped.is_error and "no echoes here" in text_of(wrapped)
            allowed = await c.call_tool("alpha__add", {"a": 1, "b": 1})
            assert result_of(allowed) == 2

    anyio.run(main)
    assert asked.asked == []  # a deny is never put to the user
    decisions = [(e["tool"], e["decision"]) for e in audit_lines(state)]
    assert decisions.count(("alpha__echo", "deny")) == 2
    assert ("alpha__add", "allow") in decisions
    calls = [json.loads(line) for p in state.glob("*.calls.jsonl") for line in p.open()]
    assert [c["tool"] for c in calls] == ["alpha__add"]  # only what ran


def test_an_approval_is_asked_by_elicitation_approved_and_declined(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    state = tmp_path / "s"
    answers = Answers(APPROVE, DECLINE, UNCHECKED)

    async def main() -> None:
        # no policy file: upstream tools are WRITE, and WRITE asks
        async with gateway(config, state, "--core", "*", elicit=answers) as c:
            ran = await c.call_tool("alpha__echo", {"text": "approved"})
            assert not ran.is_error and text_of(ran) == "approved"
            declined = await c.call_tool("alpha__echo", {"text": "declined"})
            assert declined.is_error and "Denied by the user" in text_of(declined)
            unchecked = await c.call_tool("alpha__echo", {"text": "unchecked"})
            assert unchecked.is_error and "did not approve" in text_of(unchecked)

    anyio.run(main)
    assert len(answers.asked) == 3
    first = answers.asked[0]
    assert isinstance(first, types.ElicitRequestFormParams)
    assert "alpha__echo" in first.message and '"text":"approved"' in first.message
    lines = audit_lines(state)
    approvals = [(e["decision"], e.get("approved_by")) for e in lines if e["level"] == "approval"]
    assert approvals == [("approve", "mcp-client-user"), ("deny", None), ("deny", None)]


def test_without_elicitation_an_ask_is_denied_and_says_how_to_allow_it(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})

    async def main() -> None:
        elicit_only = ("--core", "*", "--approvals", "elicit")
        async with gateway(config, tmp_path / "s", *elicit_only) as c:  # no callback
            denied = await c.call_tool("alpha__echo", {"text": "x"})
            assert denied.is_error
            assert "elicitation" in text_of(denied) and "--policy" in text_of(denied)

    anyio.run(main)


def test_dangerous_asks_even_when_a_rule_allows_and_annotations_never_lower_it(
    tmp_path: Path,
) -> None:
    """``wipe`` is DANGEROUS by the policy file; ``read_note`` claims readOnlyHint."""
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    policy = write_policy(tmp_path, 'dangerous = ["alpha__wipe"]\n' + ALLOW_ALL)
    state = tmp_path / "s"
    answers = Answers(DECLINE, APPROVE)
    strict = write_policy(tmp_path, "", "empty.toml")

    async def main() -> None:
        async with gateway(
            config, state, "--core", "*", "--policy", str(policy), elicit=answers
        ) as c:
            declined = await c.call_tool("alpha__wipe", {})
            assert declined.is_error
            wiped = await c.call_tool("alpha__wipe", {})
            assert result_of(wiped) == "wiped"
        elicit_only = ("--core", "*", "--approvals", "elicit")
        async with gateway(config, tmp_path / "s2", *elicit_only, "--policy", str(policy)) as c:
            no_human = await c.call_tool("alpha__wipe", {})
            assert no_human.is_error and "elicitation" in text_of(no_human)
        async with gateway(config, tmp_path / "s3", *elicit_only, "--policy", str(strict)) as c:
            # readOnlyHint: true from the server does not make it STANDARD: still asks
            hinted = await c.call_tool("alpha__read_note", {})
            assert hinted.is_error and "elicitation" in text_of(hinted)

    anyio.run(main)
    assert len(answers.asked) == 2
    lines = audit_lines(state)
    tiers = {e["tier"] for e in lines if e["tool"] == "alpha__wipe" and "tier" in e}
    assert tiers == {"DANGEROUS"}


def test_approve_always_holds_for_the_session_but_never_for_dangerous(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    policy = write_policy(tmp_path, 'dangerous = ["alpha__wipe"]\n')
    answers = Answers(ALWAYS, ALWAYS, ALWAYS)
    state = tmp_path / "s"

    async def main() -> None:
        args = ("--core", "*", "--policy", str(policy))
        async with gateway(config, state, *args, elicit=answers) as c:
            for text in ("one", "two", "three"):
                ran = await c.call_tool("alpha__echo", {"text": text})
                assert text_of(ran) == text
            assert len(answers.asked) == 1  # the grant answered the later calls
            for _ in range(2):
                assert result_of(await c.call_tool("alpha__wipe", {})) == "wiped"
            assert len(answers.asked) == 3  # DANGEROUS: asked every time
        async with gateway(config, tmp_path / "s2", *args, "--approvals", "elicit") as c:
            fresh = await c.call_tool("alpha__echo", {"text": "x"})
            assert fresh.is_error

    anyio.run(main)
    grants = [e for e in audit_lines(state) if e["decision"] == "approve-always"]
    assert [e["tool"] for e in grants] == ["alpha__echo"]


def test_every_call_leaves_an_audit_line_even_if_the_policy_never_sees_it(
    tmp_path: Path,
) -> None:
    """Unknown names and invalid arguments are answered before the policy runs; each
    still leaves exactly one line (decision ``unknown`` / ``invalid``, level ``gateway``)."""
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    policy = write_policy(tmp_path, ALLOW_ALL)
    state = tmp_path / "s"
    calls: list[tuple[str, dict[str, Any]]] = [
        ("alpha__nope", {}),
        ("alpha__add", {"a": "x", "b": 1}),
        ("call_tool", {"nam": "alpha__add"}),
        ("call_tool", {"name": "alpha__gone", "arguments": {}}),
        ("call_tool", {"name": "alpha__add", "arguments": {"a": []}}),
        ("mcp__alpha__add", {"a": 1, "b": 2}),  # the library's name is not the gateway's
        ("x" * 5000, {}),
        ("alpha__add", {"a": 1, "b": 2}),
    ]

    async def main() -> None:
        async with gateway(config, state, "--core", "*", "--policy", str(policy)) as c:
            for name, args in calls:
                result = await c.call_tool(name, args)
                assert result.is_error == (args != {"a": 1, "b": 2} or name != "alpha__add")

    anyio.run(main)
    lines = audit_lines(state)
    by_call: dict[str, list[tuple[str, str, str]]] = {}
    for e in lines:
        by_call.setdefault(e["call_id"], []).append((e["tool"], e["decision"], e["level"]))
    assert len(by_call) == len(calls)  # every call, each under its own id
    fates = [by_call[k] for k in sorted(by_call, key=lambda k: int(k.rsplit("-", 1)[1]))]
    assert fates[0] == [("alpha__nope", "unknown", "gateway")]
    assert fates[1] == [("alpha__add", "invalid", "gateway")]
    assert fates[2] == [("call_tool", "invalid", "gateway")]
    assert fates[3] == [("alpha__gone", "unknown", "gateway")]
    assert fates[4] == [("alpha__add", "invalid", "gateway")]
    assert fates[5] == [("mcp__alpha__add", "unknown", "gateway")]
    assert fates[6][0][1:] == ("unknown", "gateway") and len(fates[6][0][0]) < 200
    assert fates[7] == [("alpha__add", "allow", "profile")]
    calls_run = [json.loads(line) for p in state.glob("*.calls.jsonl") for line in p.open()]
    assert len(calls_run) == 1  # only the valid call reached the server
