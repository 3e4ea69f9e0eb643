"""One name per tool at the gateway: every name any gateway answer gives can be called.

A real ``tooldeck serve`` over stdio in front of three real MCP servers (PyPI
``mcp-server-time`` and ``mcp-server-git`` on a temporary repository, and
tests/mcp_servers/basic.py), reached with the official MCP SDK client. The test gathers
every tool name (a word with ``__``) in every answer a client and its user get: the
listing, ``tool_search`` answers, unknown-tool errors and their suggestions, argument
errors, offload notices, policy denials, elicitation prompts, out-of-band pending files,
what ``tooldeck approve`` shows, the gateway's stderr, and the audit log and evidence
record. Then it calls each of them by exactly that name, directly and through
``call_tool``: the gateway knows every one (never "Unknown tool"). Policy rules, ``--core``
and ``tooldeck policy explain`` take those names too; the library's spelling
(``mcp__time__*``) is refused with the gateway's.
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from typer.testing import CliRunner

from gateway_client import (
    Answers,
    Call,
    approve,
    audit_lines,
    gateway,
    names,
    pending_file,
    stdio,
    text_of,
    time_server,
    write_config,
    write_policy,
)
from test_gateway_upstreams import git_server
from test_mcp_names import one_line_error
from tooldeck.cli import app
from tooldeck.mcp.naming import exposed_name
from tooldeck.policy.rules import Selector, ToolFacts

# a tool name in a text: a word with "__" in it (tooldeck's own tools have none)
NAME = re.compile(r"(?<![\w-])[A-Za-z0-9][\w-]*__[\w-]*[A-Za-z0-9](?![\w-])")
POLICY = """\
[[profile.rules]]
tools = ["time__*", "alpha__add", "alpha__echo", "git__git_status", "git__git_log"]
action = "allow"

[[profile.rules]]
tools = "alpha__wipe"
action = "deny"
reason = "wiping is for people"

[[profile.rules]]
tools = "ns:git"
args = { repo_path = { equals = "/nowhere" } }
action = "deny"
reason = "not that repository"
"""
# the same decisions without naming a tool: what the test collects does not depend on
# how rules spell names (tested below), only on what the gateway's answers say
BY_SERVER = """\
[[profile.rules]]
tools = ["ns:time", "ns:alpha"]
action = "allow"

[[profile.rules]]
tools = "tier:DANGEROUS"
action = "deny"
reason = "wiping is for people"
"""
OLD_POLICY = """\
[[profile.rules]]
tools = ["mcp__time__*", "mcp__alpha__add"]
action = "allow"

[[profile.rules]]
tools = "mcp__*"
action = "ask"
"""
DECLINE = types.ElicitResult(action="decline")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    for args in (
        ["init", "-q", "-b", "main"],
        ["config", "user.email", "test@example.invalid"],
        ["config", "user.name", "Test"],
    ):
        subprocess.run(["git", "-C", str(path), *args], check=True)
    (path / "README.md").write_text("first\n")
    subprocess.run(["git", "-C", str(path), "add", "README.md"], check=True)
    subprocess.run(["git", "-C", str(path), "commit", "-q", "-m", "first"], check=True)
    return path


def servers(repo: Path) -> dict[str, Any]:
    alpha = {**stdio("basic.py"), "destructive_is_dangerous": True}  # its wipe
    return {"time": time_server(), "git": git_server(repo), "alpha": alpha}


class Said:
    """Every text a gateway answer (or what its user is shown) held."""

    def __init__(self) -> None:
        self.texts: list[tuple[str, str]] = []  # (where, text)

    def add(self, where: str, text: str) -> str:
        self.texts.append((where, text))
        return text

    def result(self, where: str, result: types.CallToolResult) -> str:
        return self.add(where, text_of(result))

    def names(self) -> dict[str, str]:
        """Each tool name found, with the first place it was found."""
        found: dict[str, str] = {}
        for where, text in self.texts:
            for name in NAME.findall(text):
                found.setdefault(name, where)
        return found


async def first_session(repo: Path, config: Path, policy: Path, state: Path, said: Said) -> None:
    """A client with elicitation (its user declines), through the documented flow and
    every kind of answer with a tool name in it."""
    answers = Answers(*[DECLINE] * 10)
    args = ("--policy", str(policy), "--offload-tokens", "400")
    with (state.parent / "first.err").open("w") as errlog:
        async with gateway(config, state, *args, elicit=answers, errlog=errlog) as c:
            for name in await names(c):
                said.add("listing", name)
            for query in (["current time in a timezone", "convert time"], ["commit changes"]):
                found = await c.call_tool("tool_search", {"query": query})
                assert not found.is_error, text_of(found)
                said.result("tool_search", found)
            for name in await names(c):  # the found tools are listed now
                said.add("listing after search", name)
            for unknown in ("time__get_curent_time", "mcp__time__get_current_time"):
                missed = await c.call_tool("call_tool", {"name": unknown, "arguments": {}})
                text = said.result("unknown tool", missed)
                assert missed.is_error and text.startswith(f"Unknown tool '{unknown}'"), text
                said.texts[-1] = ("did you mean", text.removeprefix(f"Unknown tool '{unknown}'"))
            bad = await c.call_tool("alpha__add", {"a": "one", "b": 2})
            assert bad.is_error and "Invalid arguments" in said.result("argument error", bad)
            big = await c.call_tool("alpha__echo", {"text": "many words " * 600})
            assert "recall_tool_result" in said.result("offload notice", big)
            denied = await c.call_tool("alpha__wipe", {})
            assert "wiping is for people" in said.result("policy deny", denied)
            add = {"repo_path": str(repo), "files": ["README.md"]}
            asked = await c.call_tool("call_tool", {"name": "git__git_add", "arguments": add})
            assert asked.is_error, said.result("declined approval", asked)
            when = await c.call_tool("time__get_current_time", {"timezone": "UTC"})
            assert not when.is_error, said.result("time", when)
    for params in answers.asked:
        said.add("elicitation", params.message)
    said.add("gateway stderr", (state.parent / "first.err").read_text())


async def out_of_band_session(
    repo: Path, config: Path, policy: Path, state: Path, said: Said
) -> None:
    """A client without elicitation: the ask becomes a pending file, shown by ``tooldeck
    approve``, which denies it."""
    args = ("--policy", str(policy), "--approvals", "out-of-band")
    commit = {"repo_path": str(repo), "message": "nothing"}
    with (state.parent / "second.err").open("w") as errlog:
        async with gateway(config, state, *args, errlog=errlog) as c:
            call = Call()
            async with anyio.create_task_group() as tg:
                tg.start_soon(call.run, c, "git__git_commit", commit)
                path = await pending_file(state)
                said.add("pending file", path.read_text())
                answered = await anyio.to_thread.run_sync(approve, path, "n\nnot now\n")
                assert answered.returncode == 0, answered.stderr
                said.add("tooldeck approve", answered.stdout)
                result = await call.get()
            assert result.is_error and "not now" in said.result("out-of-band deny", result)
    said.add("gateway stderr", (state.parent / "second.err").read_text())


def test_every_name_a_gateway_answer_gives_can_be_called_by_exactly_that_name(
    tmp_path: Path, repo: Path
) -> None:
    config = write_config(tmp_path, servers(repo))
    policy = write_policy(tmp_path, BY_SERVER)
    state = tmp_path / "s"
    said = Said()
    anyio.run(first_session, repo, config, policy, state, said)
    anyio.run(out_of_band_session, repo, config, policy, state, said)
    for line in audit_lines(state):
        if line["decision"] != "unknown":  # those are the names the client sent
            said.add("audit log", str(line["tool"]))
    for path in state.glob("*.calls.jsonl"):
        for record in path.read_text().splitlines():
            said.add("evidence record", json.loads(record)["tool"])
    found = said.names()
    # each kind of answer named a tool (so each was looked at)
    for kind in (
        "listing after search",
        "tool_search",
        "did you mean",
        "argument error",
        "offload notice",
        "elicitation",
        "pending file",
        "tooldeck approve",
        "gateway stderr",
        "audit log",
        "evidence record",
    ):
        assert kind in {w for w, t in said.texts if NAME.search(t)}, (kind, said.texts)
    assert {"time__get_current_time", "git__git_add", "alpha__echo"} <= set(found)
    calls = tmp_path / "calls"

    async def call_each() -> list[tuple[str, str, types.CallToolResult]]:
        out = []
        answers = Answers(*[DECLINE] * (2 * len(found)))
        async with gateway(config, calls, "--policy", str(policy), elicit=answers) as c:
            for name in sorted(found):
                out.append((name, "direct", await c.call_tool(name, {})))
                wrapped = {"name": name, "arguments": {}}
                out.append((name, "call_tool", await c.call_tool("call_tool", wrapped)))
        return out

    results = anyio.run(call_each)
    unknown = [(n, how, found[n]) for n, how, r in results if "Unknown tool" in text_of(r)]
    assert unknown == [], f"names an answer gave that the gateway does not know: {unknown}"
    # the gateway knew each: the audit says so, under that very name
    fates = [(line["tool"], line["decision"]) for line in audit_lines(calls)]
    assert {n for n, _ in fates} == set(found)
    assert not [f for f in fates if f[1] == "unknown"], fates


def test_the_search_answer_is_called_as_it_reads(tmp_path: Path, repo: Path) -> None:
    """The documented flow, as a model follows it: search, then call the name the answer
    gives, directly and with call_tool."""
    config = write_config(tmp_path, servers(repo))
    policy = write_policy(tmp_path, POLICY)

    async def main() -> None:
        async with gateway(config, tmp_path / "s", "--policy", str(policy)) as c:
            found = await c.call_tool("tool_search", {"query": "current time in a timezone"})
            lines = [line for line in text_of(found).splitlines() if line.startswith("- ")]
            first = NAME.findall(lines[0])[0]
            assert first == "time__get_current_time", text_of(found)
            now = await c.call_tool(first, {"timezone": "UTC"})
            assert not now.is_error and "UTC" in text_of(now), text_of(now)
            again = await c.call_tool(
                "call_tool", {"name": first, "arguments": {"timezone": "UTC"}}
            )
            assert not again.is_error, text_of(again)

    anyio.run(main)


# -- what the user writes: policy rules, --core, policy explain ---------------------------------
def test_rules_and_core_in_the_library_spelling_are_refused_with_the_gateway_spelling(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, {"time": time_server()})
    old = write_policy(tmp_path, OLD_POLICY, "old.toml")
    state = tmp_path / "s"
    runner = CliRunner()
    serve = ["serve", "--mcp", str(config), "--state", str(state), "--check"]
    refused = one_line_error(runner.invoke(app, [*serve, "--policy", str(old)]))
    for wrote, fixed in (
        ("'mcp__time__*'", "write 'time__*'"),
        ("'mcp__alpha__add'", "write 'alpha__add'"),
        ("'mcp__*'", "write '*__*'"),  # every upstream tool, not the gateway's own too
    ):
        assert wrote in refused and fixed in refused, refused
    assert "profile.rules[1]" in refused and str(old) in refused
    core = one_line_error(runner.invoke(app, [*serve, "--core", "mcp__time__*"]))
    assert "give --core 'time__*'" in core, core
    assert not state.exists()  # refused before anything started or was made
    # a server named mcp would list mcp__<tool>: the library's spelling, refused too
    (tmp_path / "m").mkdir()
    clash = write_config(tmp_path / "m", {"mcp": time_server()})
    named = one_line_error(runner.invoke(app, ["serve", "--mcp", str(clash), "--check"]))
    assert "server 'mcp'" in named and "rename it" in named, named


def test_a_core_glob_for_no_server_is_refused_and_one_for_no_tool_is_said_once_up(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = write_config(tmp_path, {"time": time_server()})
    state = tmp_path / "s"
    serve = ["serve", "--mcp", str(config), "--state", str(state), "--check"]
    typo = one_line_error(CliRunner().invoke(app, [*serve, "--core", "tiem__*"]))
    assert "--core 'tiem__*' names no server of the config (servers: time)" in typo, typo
    assert not state.exists()
    # the server part is right, the tool part names nothing: said when the server is up
    with caplog.at_level(logging.WARNING, logger="tooldeck.gateway"):
        out = CliRunner().invoke(app, [*serve, "--core", "time__get_curent_time"])
    assert out.exit_code == 0, out.output
    said = [r.getMessage() for r in caplog.records if "--core" in r.getMessage()]
    assert len(said) == 1 and "'time__get_curent_time' matches none of the 2 tools" in said[0]


def test_an_offload_threshold_above_the_guard_is_one_line_before_anything_starts(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, {"time": time_server()})
    state = tmp_path / "s"
    serve = ["serve", "--mcp", str(config), "--state", str(state), "--check"]
    line = one_line_error(CliRunner().invoke(app, [*serve, "--guard-tokens", "1000"]))
    assert "--offload-tokens 15000 is above --guard-tokens 1000" in line, line
    assert "give --offload-tokens at most 1000" in line
    assert not state.exists()
    # what the line says to do works
    args = [*serve, "--guard-tokens", "1000", "--offload-tokens", "1000"]
    assert CliRunner().invoke(app, args).exit_code == 0


def test_the_documented_refusal_is_the_one_serve_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = (Path(__file__).parents[1] / "docs" / "gateway.md").read_text()
    shown = re.search(r"```text\n(error: policy\.toml: .*)\n```", docs)
    assert shown is not None
    monkeypatch.chdir(tmp_path)
    write_config(tmp_path, {"time": time_server()})
    write_policy(tmp_path, '[[profile.rules]]\ntools = "mcp__time__*"\naction = "allow"\n')
    args = ["serve", "--mcp", "mcp.json", "--policy", "policy.toml", "--check"]
    assert one_line_error(CliRunner().invoke(app, args)) == shown[1]


# a library pattern's pieces: the separator, wildcards, literals, an underscore
PIECES = ["*", "?", "__", "_", "a", "b", "[ab]", "time", "git"]
NAMES = st.lists(st.sampled_from(["a", "b", "_", "__", "time", "git", "x"]), min_size=1, max_size=3)


@given(
    pattern=st.lists(st.sampled_from(PIECES), max_size=4).map(lambda p: "mcp__" + "".join(p)),
    servers=st.lists(NAMES.map("".join), min_size=1, max_size=3),
    tools=st.lists(NAMES.map("".join), min_size=1, max_size=3),
    own=st.lists(st.sampled_from(["tool_search", "call_tool", "read_document", "ab", "git"])),
)
@example(pattern="mcp__*", servers=["a"], tools=["b"], own=["call_tool"])
@example(pattern="mcp__a_?b*", servers=["a"], tools=["b"], own=["ab"])
def test_the_gateway_spelling_selects_the_tools_the_library_spelling_did(
    pattern: str, servers: list[str], tools: list[str], own: list[str]
) -> None:
    """The spelling a refusal gives selects at the gateway exactly the upstream tools the
    library's pattern selected in a session; with ``__`` in it, none of the tools without
    (the gateway's own, tooldeck's)."""
    from tooldeck.mcp.naming import gateway_pattern  # here: the other tests run without it

    fixed = gateway_pattern(pattern)
    assert fixed is not None
    old, new = Selector(pattern), Selector(fixed)
    for server in servers:
        for tool in tools:
            library = exposed_name(server, tool)
            gateway = library.removeprefix("mcp__")
            assert old.matches(ToolFacts(library, "WRITE")) == new.matches(
                ToolFacts(gateway, "WRITE")
            ), (library, gateway, fixed)
    if "__" in fixed:  # mcp__* is *__*, never *: none of the gateway's own tools
        assert not any(new.matches(ToolFacts(name, "WRITE")) for name in own), fixed
    if pattern in ("mcp__*", "mcp__git*"):
        assert "__" in fixed


def test_core_takes_the_client_names(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"time": time_server(), "alpha": stdio("basic.py")})
    args = ["serve", "--mcp", str(config), "--state", str(tmp_path / "s"), "--check", "--json"]
    out = CliRunner().invoke(app, [*args, "--lexical", "--core", "time__*"])
    assert out.exit_code == 0, out.output
    listed = [t["name"] for t in json.loads(out.stdout)["listed"]]
    assert listed[3:] == ["time__get_current_time", "time__convert_time"], listed


def test_policy_explain_matches_the_client_name(tmp_path: Path) -> None:
    policy = write_policy(tmp_path, POLICY)
    runner = CliRunner()

    def explain(name: str, *args: str) -> dict[str, Any]:
        out = runner.invoke(app, ["policy", "explain", name, "-p", str(policy), "--json", *args])
        assert out.exit_code == 0, out.output
        decided: dict[str, Any] = json.loads(out.stdout)
        return decided

    allowed = explain("time__get_current_time")
    assert allowed["action"] == "allow" and allowed["level"] == "profile", allowed
    assert "time__*" in allowed["reason"]
    wiped = explain("alpha__wipe")
    assert (wiped["action"], wiped["reason"]) == ("deny", "wiping is for people")
    # an ns: rule matches the server the name says, as at the gateway
    elsewhere = explain("git__git_add", "--args", '{"repo_path": "/nowhere"}')
    assert (elsewhere["action"], elsewhere["reason"]) == ("deny", "not that repository")
    asked = explain("git__git_add", "--args", '{"repo_path": "/tmp"}')
    assert asked["action"] == "ask", asked
    # a rule in the library's spelling: said, with the gateway's spelling
    old = write_policy(tmp_path, OLD_POLICY, "old.toml")
    out = runner.invoke(app, ["policy", "explain", "time__get_current_time", "-p", str(old)])
    assert out.exit_code == 0, out.output
    assert "'mcp__time__*' is the library's spelling" in out.stderr, out.stderr
    assert "write 'time__*'" in out.stderr and "write '*__*'" in out.stderr, out.stderr
