"""``tooldeck serve``: aggregation, names, deferred loading, ``--check``, hostile upstreams.

Real processes only: the gateway is ``python -m tooldeck.cli serve`` reached with the
official MCP client SDK; its upstreams are the test servers and mcp-server-time.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
from typer.testing import CliRunner

from gateway_client import (
    ALLOW_ALL,
    Notes,
    gateway,
    names,
    result_of,
    stdio,
    text_of,
    time_server,
    write_config,
    write_policy,
)
from tooldeck.cli import app
from tooldeck.tokens import estimate_tokens


def test_two_servers_with_the_same_tools_are_listed_apart_and_called_apart(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, {"alpha": stdio("basic.py"), "beta": stdio("basic.py")})
    policy = write_policy(tmp_path, ALLOW_ALL)

    async def main() -> None:
        async with gateway(config, tmp_path / "s", "--core", "*", "--policy", str(policy)) as c:
            listed = await names(c)
            assert {"alpha__add", "beta__add", "alpha__pid", "beta__pid"} <= set(listed)
            assert len(listed) == len(set(listed))
            # one server's own collision (dotted.name vs dotted_name) is kept apart too
            assert len([n for n in listed if n.startswith("alpha__dotted_name")]) == 2
            assert "tool_search" not in listed  # nothing is deferred with --core '*'
            pids = [result_of(await c.call_tool(f"{s}__pid", {})) for s in ("alpha", "beta")]
            assert pids[0] != pids[1] and all(isinstance(p, int) for p in pids)
            added = await c.call_tool("beta__add", {"a": 2, "b": 40})
            assert not added.is_error and result_of(added) == 42

    anyio.run(main)


def test_search_announces_list_changed_and_the_found_tool_is_called(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"alpha": stdio("basic.py"), "time": time_server()})
    policy = write_policy(tmp_path, ALLOW_ALL)
    notes = Notes()

    async def main() -> None:
        async with gateway(config, tmp_path / "s", "--policy", str(policy), notes=notes) as c:
            first = await names(c)
            assert first == ["tool_search", "call_tool", "recall_tool_result"]
            found = await c.call_tool("tool_search", {"query": "current time in a timezone"})
            assert "time__get_current_time" in text_of(found)
            with anyio.fail_after(10):
                await notes.changed.wait()
            listed = await names(c)
            assert "time__get_current_time" in listed and listed[:3] == first
            now = await c.call_tool("time__get_current_time", {"timezone": "UTC"})
            assert not now.is_error and "UTC" in text_of(now)
            # found tools stay listed after later searches
            await c.call_tool("tool_search", {"query": ["add integers", "echo text"]})
            later = await names(c)
            assert {"time__get_current_time", "alpha__add", "alpha__echo"} <= set(later)
            assert notes.list_changed >= 2

    anyio.run(main)


def test_call_tool_reaches_a_tool_that_is_not_listed(tmp_path: Path) -> None:
    """For clients that ignore list_changed: call_tool(name, arguments)."""
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    policy = write_policy(tmp_path, ALLOW_ALL)

    async def main() -> None:
        async with gateway(config, tmp_path / "s", "--policy", str(policy)) as c:
            result = await c.call_tool(
                "call_tool", {"name": "alpha__add", "arguments": {"a": 1, "b": 2}}
            )
            assert not result.is_error and result_of(result) == 3
            bad = await c.call_tool("call_tool", {"name": "alpha__add", "arguments": {"a": "x"}})
            assert bad.is_error
            loop = await c.call_tool("call_tool", {"name": "call_tool", "arguments": {}})
            assert loop.is_error and "cannot call call_tool" in text_of(loop)
            unknown = await c.call_tool("call_tool", {"name": "alpha__ad"})
            assert unknown.is_error and "alpha__add" in text_of(unknown)  # closest first
            hostile = await c.call_tool("x" * 5000, {})
            assert hostile.is_error and len(text_of(hostile)) < 2000

    anyio.run(main)


def test_a_hostile_schema_is_skipped_and_the_rest_is_served(tmp_path: Path) -> None:
    schemas = tmp_path / "schemas.json"
    schemas.write_text(
        json.dumps(
            {
                "fetch_remote": {
                    "type": "object",
                    "properties": {"u": {"$ref": "https://attacker.example/schema.json"}},
                },
                "ok": {"type": "object", "properties": {"q": {"type": "string"}}},
            }
        )
    )
    config = write_config(tmp_path, {"evil": stdio("schemas.py", str(schemas))})
    policy = write_policy(tmp_path, ALLOW_ALL)

    async def main() -> None:
        async with gateway(config, tmp_path / "s", "--core", "*", "--policy", str(policy)) as c:
            assert await names(c) == ["recall_tool_result", "evil__ok"]
            result = await c.call_tool("evil__ok", {"q": "hi"})
            assert text_of(result) == 'ok:{"q": "hi"}'
            # a tool that was never listed cannot be called by its upstream name either
            blocked = await c.call_tool("evil__fetch_remote", {})
            assert blocked.is_error

    anyio.run(main)


def test_check_prints_the_listing_and_its_cost(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"alpha": stdio("basic.py"), "time": time_server()})
    runner = CliRunner()
    args = ["serve", "--mcp", str(config), "--state", str(tmp_path / "s"), "--check"]
    out = runner.invoke(app, [*args, "--json", "--lexical"])
    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)
    assert [t["name"] for t in report["listed"]] == [
        "tool_search",
        "call_tool",
        "recall_tool_result",
    ]
    assert report["catalog_tools"] == 14
    assert 0 < report["listed_tokens"] < report["all_tokens"]
    assert {s["name"]: s["state"] for s in report["servers"]} == {
        "alpha": "connected",
        "time": "connected",
    }
    table = runner.invoke(app, [*args, "--lexical", "--core", "time__*"])
    assert table.exit_code == 0 and "time__get_current_time" in table.stdout
    assert "saved" in table.stdout


def test_check_says_a_failed_server_once_and_no_saving_without_tools(tmp_path: Path) -> None:
    """A server that did not start: said once, plainly, and --check exits 1 (the answer
    is no, as for tooldeck mcp list)."""
    missing = tmp_path / "no-such-server"
    config = write_config(tmp_path, {"gone": {"command": str(missing), "args": []}})
    args = ["serve", "--mcp", str(config), "--state", str(tmp_path / "s"), "--check"]
    out = CliRunner().invoke(app, [*args, "--lexical"], env={"COLUMNS": "200"})
    assert out.exit_code == 1, out.output
    assert out.output.count("gone: failed") == 1, out.output
    assert f"({missing}: no such file)" in out.output
    assert "FileNotFoundError" not in out.output
    assert "failed to start" not in out.output  # the log warning: the report says it
    assert "behind tool_search: no tools (no upstream server listed any)" in out.output
    assert "saved" not in out.output


def test_bad_files_are_one_line_errors(tmp_path: Path) -> None:
    runner = CliRunner()
    bad = tmp_path / "mcp.json"
    bad.write_text('{"mcpServers": {"x": {}}}')
    out = runner.invoke(app, ["serve", "--mcp", str(bad), "--check"])
    assert out.exit_code == 2 and out.stderr.startswith("error: ")
    assert len(out.stderr.strip().splitlines()) == 1
    good = write_config(tmp_path, {"alpha": stdio("basic.py")})
    policy = write_policy(tmp_path, "[profile]\nbogus = 1\n")
    out = runner.invoke(app, ["serve", "--mcp", str(good), "--policy", str(policy), "--check"])
    assert out.exit_code == 2 and len(out.stderr.strip().splitlines()) == 1


def test_a_hostile_server_cannot_flood_the_client_or_lower_a_tier(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"evil": stdio("hostile.py")})

    async def main() -> None:
        async with gateway(config, tmp_path / "s", "--core", "*", "--approvals", "elicit") as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            flood = tools["evil__flood_description"]
            assert len(flood.description or "") < 4_100 and "not shown" in (flood.description or "")
            # its claimed annotations are not passed on, and do not make it STANDARD
            assert tools["evil__harmless_read"].annotations is None
            asked = await c.call_tool("evil__harmless_read", {})
            assert asked.is_error and "elicitation" in text_of(asked)
        policy = write_policy(tmp_path, ALLOW_ALL)
        async with gateway(config, tmp_path / "s2", "--core", "*", "--policy", str(policy)) as c:
            blocks = await c.call_tool("evil__many_blocks", {})
            assert estimate_tokens(text_of(blocks)) <= 25_000
            assert "recall_tool_result" in text_of(blocks)

    anyio.run(main)


def test_every_listed_tool_can_be_called(tmp_path: Path) -> None:
    """What a client is listed is exactly what can run: no name is unknown to the dispatcher."""
    config = write_config(tmp_path, {"alpha": stdio("basic.py"), "time": time_server()})
    policy = write_policy(tmp_path, ALLOW_ALL)

    async def main() -> None:
        async with gateway(config, tmp_path / "s", "--policy", str(policy)) as c:
            await c.call_tool("tool_search", {"query": ["add integers", "current time"]})
            listed = await names(c)
            assert len(listed) > 3
            for name in listed:
                result = await c.call_tool(name, {"__not_an_argument__": 1})
                assert "Unknown tool" not in text_of(result), (name, text_of(result))
                assert "is not a tool" not in text_of(result), (name, text_of(result))

    anyio.run(main)
