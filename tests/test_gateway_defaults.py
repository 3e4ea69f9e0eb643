"""Defaults that never hang a client: a call nobody can approve is denied at once with
the exact rule that allows it (which, added, lets the call run), waits for a person send
progress, and ``tooldeck serve --init`` writes starter files that behave as documented.

A real ``tooldeck serve`` (stdio and HTTP) in front of PyPI's mcp-server-time and the
test servers of tests/mcp_servers/, reached with the official MCP SDK client. The client
declares no elicitation unless a test gives it a callback, and waits for each call at
most :data:`CLIENT_WAIT` seconds, as a client with a request timeout does (openai-agents'
is 5 s, the TypeScript SDK's 60 s; the gateway used to hold such a call for 120 s).
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gateway_client import (
    APPROVE,
    audit_lines,
    gateway,
    http_client,
    served_gateway,
    stdio,
    text_of,
    time_server,
    write_config,
    write_policy,
)
from tooldeck.cli import app
from tooldeck.mcp import McpConfig
from tooldeck.policy import Policy
from tooldeck.policy.rules import ToolFacts

CLIENT_WAIT = 15.0
RULE = re.compile(r'^\[\[profile\.rules\]\]\ntools = "[^"\n]+"\naction = "allow"$', re.M)


def init(*args: str) -> Any:
    return CliRunner().invoke(app, ["serve", "--init", *args])


async def call(client: Any, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
    """A call as a client with a request timeout makes it."""
    result: types.CallToolResult = await client.call_tool(
        name, arguments, read_timeout_seconds=CLIENT_WAIT
    )
    return result


def the_rule(result: types.CallToolResult) -> str:
    """The rule a denial names, exactly as it is written in it."""
    found = RULE.search(text_of(result))
    assert found is not None, text_of(result)
    return found.group()


def runnable(starter: Path, tmp_path: Path) -> Path:
    """The starter mcp.json, its time server run by this Python (not uvx, which this
    machine may not have) and a second server added as the starter marks one trusted."""
    data = json.loads(starter.read_text())
    time = data["mcpServers"]["time"]
    trusted = {k: v for k, v in time.items() if k not in ("command", "args")}
    time.update(time_server())
    data["mcpServers"]["workspace"] = {**stdio("workspace.py"), **trusted}
    path = tmp_path / "runnable.json"
    path.write_text(json.dumps(data))
    return path


# -- the starter files ----------------------------------------------------------------------
def test_init_writes_the_starter_files_and_keeps_files_that_exist(tmp_path: Path) -> None:
    mcp, policy = tmp_path / "conf" / "mcp.json", tmp_path / "conf" / "policy.toml"
    first = init("--mcp", str(mcp))
    assert first.exit_code == 0, first.output
    assert f"wrote {mcp}" in first.stdout and f"wrote {policy}" in first.stdout
    assert f"tooldeck serve --mcp {mcp} --policy {policy} --check" in first.stdout
    (server,) = McpConfig.load(mcp).servers  # they load, as they are
    assert (server.name, server.command, server.args) == ("time", "uvx", ("mcp-server-time",))
    assert server.trust_annotations and server.destructive_is_dangerous
    Policy.from_file(policy)
    mcp.write_text('{"mcpServers": {}}')  # the user's own now
    again = init("--mcp", str(mcp))
    assert again.exit_code == 0 and again.stdout.count("kept ") == 2, again.output
    assert mcp.read_text() == '{"mcpServers": {}}'
    policy.unlink()  # only the missing one is written
    third = init("--mcp", str(mcp))
    assert f"kept {mcp}" in third.stdout and f"wrote {policy}" in third.stdout
    forced = init("--mcp", str(mcp), "--force")
    assert forced.exit_code == 0 and "kept" not in forced.stdout
    assert McpConfig.load(mcp).servers[0].name == "time"
    other = tmp_path / "elsewhere.toml"
    named = init("--mcp", str(mcp), "--policy", str(other))
    assert f"wrote {other}" in named.stdout
    # no temporary file left behind
    assert sorted(p.name for p in mcp.parent.iterdir()) == ["mcp.json", "policy.toml"]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--force"], "--force is for --init"),
        (["--init", "--policy", "a.toml", "--policy", "b.toml"], "give --policy once"),
        (["--init", "--policy", "{mcp}"], "one file"),
        (["--init", "--policy", "{dir}"], "is a folder"),
    ],
)
def test_init_mistakes_are_one_line(tmp_path: Path, args: list[str], said: str) -> None:
    mcp = tmp_path / "mcp.json"
    filled = [a.format(mcp=mcp, dir=tmp_path) for a in args]
    out = CliRunner().invoke(app, ["serve", "--mcp", str(mcp), *filled])
    assert out.exit_code == 2 and said in out.stderr, out.output
    assert len(out.stderr.strip().splitlines()) == 1
    assert not mcp.exists()


def test_the_starter_policy_runs_reads_asks_writes_and_denies_deletes_and_shells(
    tmp_path: Path,
) -> None:
    """The starter files with real servers: the trusted server's read-only tools run, a
    write is denied at once (no client can approve it here) with the rule that allows it,
    deletes and shells are denied; the rule added, the write runs."""
    assert init("--mcp", str(tmp_path / "mcp.json")).exit_code == 0
    config, policy = runnable(tmp_path / "mcp.json", tmp_path), tmp_path / "policy.toml"
    state = tmp_path / "s"
    write = ("workspace__write_note", {"name": "plan", "text": "ship it"})

    async def first() -> str:
        async with gateway(config, state, "--core", "*", "--policy", str(policy)) as c:
            now = await call(c, "time__get_current_time", {"timezone": "UTC"})
            assert not now.is_error and "UTC" in text_of(now)
            read = await call(c, "workspace__read_note", {"name": "todo"})
            assert text_of(read) == "buy milk"
            denied = await call(c, *write)
            assert denied.is_error
            said = text_of(denied)
            assert said.startswith("Denied: nobody can approve it here: this MCP client")
            assert f"add this rule to {policy} and restart the gateway" in said
            rule = the_rule(denied)
            assert rule.endswith('tools = "workspace__write_note"\naction = "allow"')
            for name, arguments in (
                ("workspace__delete_note", {"name": "todo"}),
                ("workspace__run_shell", {"command": "ls"}),
                ("workspace__reset", {}),  # destructive by its annotation: DANGEROUS
            ):
                refused = await call(c, name, arguments)
                assert text_of(refused) == (
                    "Denied by policy: deletes and shells are denied by the gateway's "
                    "starter policy"
                ), name
            return rule

    rule = anyio.run(first)
    asked = [e for e in audit_lines(state) if e["decision"] == "ask"]
    assert [(e["tier"], e["reason"]) for e in asked] == [
        ("WRITE", "approval required by default")  # the tier is its own field, said once
    ]
    (denied,) = [e for e in audit_lines(state) if e["level"] == "approval"]
    assert denied["decision"] == "deny" and "denied_by" not in denied  # nobody was asked
    assert denied["reason"].startswith("nobody can approve it here")
    with policy.open("a") as handle:  # the fix, as the denial says it
        handle.write("\n" + rule + "\n")

    async def then() -> None:
        async with gateway(config, state, "--core", "*", "--policy", str(policy)) as c:
            assert text_of(await call(c, *write)) == "wrote plan"

    anyio.run(then)


def test_over_http_without_a_policy_file_the_denial_says_how_to_make_one(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, {"time": time_server()})
    state = tmp_path / "s"
    arguments = {"timezone": "Europe/Paris"}

    async def denied(url: str) -> str:
        async with http_client(url) as c:  # no elicitation
            result = await call(
                c, "call_tool", {"name": "time__get_current_time", "arguments": arguments}
            )
            assert result.is_error
            assert "restart the gateway with --policy FILE, a file holding:" in text_of(result)
            return the_rule(result)

    with served_gateway(config, state) as url:
        rule = anyio.run(denied, url)
    policy = write_policy(tmp_path, rule + "\n")

    async def runs(url: str) -> None:
        async with http_client(url) as c:
            result = await call(c, "time__get_current_time", arguments)
            assert not result.is_error and "Europe/Paris" in text_of(result)

    with served_gateway(config, state, "--policy", str(policy)) as url:
        anyio.run(runs, url)


def test_where_a_rule_would_not_help_the_denial_says_what_would(tmp_path: Path) -> None:
    """A JSON policy file gets its rule as JSON; a tool a rule asks about, and a DANGEROUS
    one, get no allow rule (it would not change the decision), but what would."""
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    policy = tmp_path / "policy.json"
    policy.write_text(
        json.dumps(
            {
                "dangerous": ["alpha__wipe"],
                "profile": {
                    "rules": [{"tools": "alpha__add", "action": "ask", "reason": "sums get a look"}]
                },
            }
        )
    )

    async def main() -> None:
        args = ("--core", "*", "--policy", str(policy))
        async with gateway(config, tmp_path / "s", *args) as c:
            echo = text_of(await call(c, "alpha__echo", {"text": "x"}))
            assert f"add this rule to the profile.rules list of {policy}" in echo
            assert '{"tools": "alpha__echo", "action": "allow"}' in echo
            add = text_of(await call(c, "alpha__add", {"a": 1, "b": 2}))
            assert "policy asks about alpha__add (profile: sums get a look)" in add
            assert "allow" not in add.split("sums get a look")[0] and "[[" not in add
            wipe = text_of(await call(c, "alpha__wipe", {}))
            assert "alpha__wipe is DANGEROUS, so no policy rule runs it" in wipe
            assert f"tooldeck approve --watch {tmp_path / 's'}" in wipe and "[[" not in wipe
        async with gateway(config, tmp_path / "d", *args, "--approvals", "deny") as c:
            said = text_of(await call(c, "alpha__echo", {"text": "x"}))
            assert said.startswith("Denied: nobody can approve it: the gateway asks nobody")
            assert "(or restart the gateway without --approvals deny)" in said

    anyio.run(main)


# -- waits for a person send progress -------------------------------------------------------
def test_a_form_waiting_for_its_answer_sends_progress(tmp_path: Path) -> None:
    """While the user has the approval form open, the call's client is sent progress (a
    client whose timeout progress resets keeps waiting): here the user answers only once
    progress has arrived."""
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    progressed = anyio.Event()
    messages: list[str] = []
    forms: list[str] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")
        progressed.set()

    async def answer_after_progress(context: Any, params: Any) -> types.ElicitResult:
        forms.append(params.message)
        with anyio.fail_after(30):
            await progressed.wait()
        return APPROVE

    async def main() -> None:
        args = ("--core", "*")
        async with gateway(config, tmp_path / "s", *args, elicit=answer_after_progress) as c:
            result = await c.call_tool(
                "alpha__echo", {"text": "approved"}, progress_callback=on_progress
            )
            assert text_of(result) == "approved"

    anyio.run(main)
    assert messages[0] == "waiting for your approval of alpha__echo"
    # why it is asked, the tier said once
    assert "Why this is asked: alpha__echo is WRITE: approval required by default\n" in (forms[0])


def test_no_rule_is_suggested_for_a_tool_of_tooldecks_own_that_is_dangerous(
    tmp_path: Path,
) -> None:
    """tooldeck's own run_bash is DANGEROUS whatever its definition says."""
    config = write_config(tmp_path, {})
    home = tmp_path / "home"
    home.mkdir()

    async def main() -> None:
        args = ("--definitions", "builtin", "--home", str(home), "--core", "*")
        async with gateway(config, tmp_path / "s", *args) as c:
            said = text_of(await call(c, "run_bash", {"command": "ls"}))
            assert "run_bash is DANGEROUS, so no policy rule runs it" in said
            written = text_of(await call(c, "write_file", {"path": "a.txt", "content": "x"}))
            assert 'tools = "write_file"' in written

    anyio.run(main)


@settings(max_examples=200, deadline=None)
@given(st.from_regex(r"[A-Za-z0-9_-]{1,64}", fullmatch=True), st.sampled_from(["", "x", "_"]))
def test_a_suggested_rule_allows_exactly_its_tool(name: str, other: str) -> None:
    """As TOML lines or as a JSON rule, the suggestion parses into a rule that allows the
    tool it names, and no other."""
    from tooldeck.gateway.allow import allow_rule

    for data in (
        tomllib.loads(allow_rule(name)),
        {"profile": {"rules": [json.loads(allow_rule(name, json_file=True))]}},
    ):
        chain = Policy.from_dict(data)
        assert chain.decide(ToolFacts(name, "WRITE"), {}).action == "allow"
        if other:
            assert chain.decide(ToolFacts(name + other, "WRITE"), {}).action == "ask"
