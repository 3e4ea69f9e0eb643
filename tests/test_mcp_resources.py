"""MCP resources: listed, searched, read, followed and subscribed, from Python, in a turn
and from the CLI.

Real servers only: npm's ``@modelcontextprotocol/server-everything`` (static documents,
the dynamic text and blob templates, session resources that ``gzip-file-as-resource``
registers with ``notifications/resources/list_changed``, subscriptions with
``toggle-subscriber-updates``), tests/mcp_servers/paged.py (a low-level server without
resources) and tests/mcp_servers/pictures.py (an image resource).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gateway_client import node_server, npm_server
from tooldeck import Protection, Session, TurnContext
from tooldeck.cli import app
from tooldeck.events import EventBus
from tooldeck.mcp import McpResourceListChanged, McpResourceUpdated, McpSource, ResourceError
from tooldeck.offload import OffloadStore
from tooldeck.plan import ToolPlanner
from tooldeck.policy import Policy, SessionPolicy
from tooldeck.providers.scripted import ScriptedModel, call, reply
from tooldeck.result import ImagePart, JsonPart, TextPart

SERVERS = Path(__file__).parent / "mcp_servers"
EVERYTHING = ("@modelcontextprotocol/server-everything", "2026.8.31", "mcp-server-everything")
FEATURES = "demo://resource/static/document/features.md"
LIST = "mcp__everything__resources_list"
READ = "mcp__everything__resources_read"


def config() -> dict[str, Any]:
    entry = npm_server(*EVERYTHING)
    return {
        "mcpServers": {
            "everything": node_server(entry, "stdio"),
            "paged": {"command": sys.executable, "args": [str(SERVERS / "paged.py"), "stdio"]},
        }
    }


def test_resources_and_templates_are_listed_and_read() -> None:
    async def main() -> None:
        async with McpSource(config()) as source:
            listed = {r.uri: r for r in await source.list_resources()}
            assert FEATURES in listed and {r.server for r in listed.values()} == {"everything"}
            assert listed[FEATURES].mime_type == "text/markdown"
            templates = {t.uri_template: t for t in await source.list_resource_templates()}
            assert "demo://resource/dynamic/text/{resourceId}" in templates
            assert await source.list_resources("paged") == []  # no resources capability

            doc = await source.read_resource("everything", FEATURES)
            assert doc.contents[0].mime_type == "text/markdown"
            assert "# Everything Server - Features" in doc.text()
            text = await source.read_resource("everything", "demo://resource/dynamic/text/7")
            assert text.parts() == [TextPart(text.contents[0].text or "")]
            assert text.text().startswith("Resource 7: This is a plaintext resource")
            blob = await source.read_resource("everything", "demo://resource/dynamic/blob/3")
            assert blob.contents[0].blob is not None and blob.contents[0].text is None
            assert blob.text().startswith("Resource 3: This is a base64 blob")  # text/plain blob

            with pytest.raises(ResourceError, match="refused reading 'demo://nowhere'"):
                await source.read_resource("everything", "demo://nowhere")
            with pytest.raises(ResourceError, match="'paged' offers no resources"):
                await source.read_resource("paged", "file:///etc/hostname")
            with pytest.raises(KeyError, match="no MCP server 'ghost'"):
                await source.read_resource("ghost", FEATURES)

    asyncio.run(main())


def test_an_image_resource_is_an_image_part() -> None:
    server = {
        "pictures": {"command": sys.executable, "args": [str(SERVERS / "pictures.py")]},
        "basic": {"command": sys.executable, "args": [str(SERVERS / "basic.py"), "stdio"]},
    }

    async def main() -> None:
        async with McpSource(server) as source:
            names = {t.name for t in source.tools()}
            assert "mcp__pictures__resources_read" in names
            assert "mcp__basic__resources_read" not in names  # declares resources, lists none
            read = await source.read_resource("pictures", "pictures://dot.png")
            (part,) = read.parts()
            assert isinstance(part, ImagePart) and part.mime_type == "image/png"
            assert base64.b64decode(part.data or "").startswith(b"\x89PNG")
            other = await source.read_resource("pictures", "pictures://noise.bin")
            assert other.text() == (
                "[binary resource, not shown — pictures://noise.bin, "
                "application/octet-stream, 3 bytes]"
            )

    asyncio.run(main())


def test_a_slow_read_times_out_and_a_killed_server_is_one_line_then_back() -> None:
    server = {
        "pictures": {
            "command": sys.executable,
            "args": [str(SERVERS / "pictures.py")],
            "timeout": 2,
        }
    }

    async def main() -> None:
        async with McpSource(server) as source:
            slow = "reading 'pictures://slow' of 'pictures' timed out"  # not after its 60 s
            with pytest.raises(ResourceError, match=slow):
                await source.read_resource("pictures", "pictures://slow")
            pid = (await source.call("pictures", "pid")).parts[0]
            assert isinstance(pid, JsonPart)
            pending = asyncio.ensure_future(source.read_resource("pictures", "pictures://slow"))
            await asyncio.sleep(0.5)
            os.kill(pid.value["result"], signal.SIGKILL)
            with pytest.raises(ResourceError) as caught:
                await pending
            assert "\n" not in str(caught.value) and "'pictures'" in str(caught.value)
            await source.refresh()  # reconnected: reading works again
            again = await source.read_resource("pictures", "pictures://dot.png")
            assert isinstance(again.parts()[0], ImagePart)

    asyncio.run(main())


def test_list_changed_is_followed_and_subscriptions_deliver_updates() -> None:
    async def main() -> None:
        bus = EventBus()
        seen: list[Any] = []
        bus.subscribe(seen.append)
        async with McpSource(config(), events=bus) as source:
            before = {r.uri for r in await source.list_resources("everything")}
            data = "data:text/plain;base64," + base64.b64encode(b"hello " * 50).decode()
            made = await source.call(
                "everything", "gzip-file-as-resource", {"name": "greeting.gz", "data": data}
            )
            assert not made.is_error, made.text()
            for _ in range(100):  # the notification arrives on its own
                if any(isinstance(e, McpResourceListChanged) for e in seen):
                    break
                await asyncio.sleep(0.05)
            after = {r.uri for r in await source.list_resources("everything")}
            assert after - before == {"demo://resource/session/greeting.gz"}

            await source.subscribe_resource("everything", FEATURES)
            toggled = await source.call("everything", "toggle-subscriber-updates", {})
            assert not toggled.is_error, toggled.text()
            for _ in range(200):
                if any(isinstance(e, McpResourceUpdated) for e in seen):
                    break
                await asyncio.sleep(0.05)
            updates = {(e.server, e.uri) for e in seen if isinstance(e, McpResourceUpdated)}
            assert updates == {("everything", FEATURES)}
            await source.unsubscribe_resource("everything", FEATURES)
            with pytest.raises(ResourceError, match="does not support resource subscriptions"):
                await source.subscribe_resource("paged", "x://y")

    asyncio.run(main())


def test_in_a_turn_the_tools_are_deferred_found_and_read() -> None:
    async def main() -> None:
        async with McpSource(config()) as source:
            tools = {t.name: t for t in source.tools()}
            assert {LIST, READ} <= set(tools)
            assert "mcp__paged__resources_list" not in tools  # no resources, no tools
            assert tools[READ].defer_loading and tools[READ].read_only
            assert tools[READ].tier == "STANDARD" and source.lookup(READ) is None
            model = ScriptedModel(
                [
                    reply(call("tool_search", {"query": "read a resource of everything"})),
                    reply(call(LIST, {"query": "features"})),
                    reply(call(READ, {"uri": FEATURES})),
                    reply("done"),
                ]
            )
            planner = ToolPlanner([source], model=model, semantic=False, threshold=0)
            session = Session(model, planner, turn=TurnContext("s1"))
            result = await session.run("what does the server do?")
            first = [t.name for t in model.requests[0].tools]
            assert READ not in first and "tool_search" in first
            assert READ in [t.name for t in model.requests[2].tools]  # found by the search
            listed = result.tool_outputs[1].result
            (part,) = listed.content
            assert isinstance(part, JsonPart)
            assert [r["uri"] for r in part.value["resources"]] == [FEATURES]
            read = result.tool_outputs[2].result
            assert not read.is_error and "# Everything Server - Features" in read.text()
            assert read.details["uri"] == FEATURES

    asyncio.run(main())


def _deny(pattern: str) -> Protection:
    policy = Policy.from_dict(
        {
            "profile": {
                "rules": [
                    {"tools": "mcp__*", "action": "allow"},
                    {
                        "tools": "mcp__*__resources_read",
                        "action": "deny",
                        "args": {"uri": {"uri": pattern}},
                        "reason": "static documents are off limits",
                    },
                ]
            }
        }
    )
    return Protection.policy(SessionPolicy(policy))


def test_a_rule_denies_a_uri_pattern_even_spelt_otherwise() -> None:
    async def main() -> None:
        async with McpSource(config()) as source:
            sneaky = [
                FEATURES,
                "DEMO://RESOURCE/static/document/features.md",
                "demo://resource/static/document/%66eatures.md",
                "demo://resource/dynamic/../static/document/features.md",
                "demo://resource/static//document/features.md",
            ]
            model = ScriptedModel(
                [
                    reply(*(call(READ, {"uri": u}) for u in sneaky)),
                    reply("ok"),
                    reply(call(READ, {"uri": "demo://resource/dynamic/text/1"})),
                    reply("ok"),
                ]
            )
            session = Session(
                model, [source], turn=TurnContext("s1"), protect=_deny("demo://resource/static/*")
            )
            result = await session.run("read it")
            assert len(result.tool_outputs) == len(sneaky)
            for output in result.tool_outputs:
                assert output.result.is_error
                assert "static documents are off limits" in output.result.text()
            allowed = await session.run("read another")
            assert allowed.tool_outputs[0].result.text().startswith("Resource 1:")

    asyncio.run(main())


def test_a_large_resource_goes_through_the_offload_store(tmp_path: Path) -> None:
    async def main() -> None:
        async with McpSource(config()) as source:
            store = OffloadStore(tmp_path, "s1", threshold_tokens=200)
            model = ScriptedModel([reply(call(READ, {"uri": FEATURES})), reply("ok")])
            session = Session(
                model,
                [source],
                session_id="s1",
                turn=TurnContext("s1", home=tmp_path),
                result_hooks=[store.hook],
            )
            result = await session.run("read it")
            read = result.tool_outputs[0].result
            doc = await source.read_resource("everything", FEATURES)
            assert len(read.text()) < len(doc.text()) / 2  # the model got a preview
            (ref,) = store.refs()
            assert ref.tool_name == READ and ref.ref_id in read.text()
            assert store.load(ref.ref_id).text() == doc.text()  # the whole content was stored

    asyncio.run(main())


runner = CliRunner()


def write(tmp_path: Path) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(config()))
    return path


def test_cli_lists_and_reads_resources(tmp_path: Path) -> None:
    path = write(tmp_path)
    listed = runner.invoke(app, ["mcp", "resources", str(path), "--json"])
    assert listed.exit_code == 0, listed.output
    data = json.loads(listed.output)
    assert FEATURES in [r["uri"] for r in data["resources"]]
    assert "demo://resource/dynamic/blob/{resourceId}" in [
        t["uri_template"] for t in data["templates"]
    ]
    table = runner.invoke(app, ["mcp", "resources", str(path), "--server", "everything"])
    assert table.exit_code == 0 and "features.md" in table.output
    read = runner.invoke(app, ["mcp", "resource", str(path), "everything", FEATURES])
    assert read.exit_code == 0 and "# Everything Server - Features" in read.output
    raw = runner.invoke(
        app,
        ["mcp", "resource", str(path), "everything", "demo://resource/dynamic/blob/2", "--json"],
    )
    assert raw.exit_code == 0, raw.output
    (content,) = json.loads(raw.output)["contents"]
    assert base64.b64decode(content["blob"]).startswith(b"Resource 2:")
    refused = runner.invoke(app, ["mcp", "resource", str(path), "everything", "demo://nowhere"])
    assert refused.exit_code == 1 and "refused reading 'demo://nowhere'" in refused.output
    assert "Traceback" not in refused.output
    unknown = runner.invoke(app, ["mcp", "resource", str(path), "ghost", FEATURES])
    assert unknown.exit_code == 2 and "ghost" in unknown.output


def test_server_filesystem_has_no_resources_and_keeps_working(tmp_path: Path) -> None:
    """npm's server-filesystem offers tools only: with every client capability declared
    (elicitation, sampling, roots) it connects, has no resource tools, and works."""
    entry = npm_server(
        "@modelcontextprotocol/server-filesystem", "2026.8.31", "mcp-server-filesystem"
    )
    (tmp_path / "data.txt").write_text("configured")
    config = {"mcpServers": {"fs": node_server(entry)}}
    sampler = ScriptedModel([])

    async def main() -> None:
        async with McpSource(config, roots=[tmp_path], sampling=sampler) as source:
            names = {t.name for t in source.tools()}
            assert "mcp__fs__read_text_file" in names
            assert not any("resources_" in n for n in names)
            assert await source.list_resources("fs") == []
            with pytest.raises(ResourceError) as caught:
                await source.read_resource("fs", (tmp_path / "data.txt").as_uri())
            assert "'fs'" in str(caught.value) and "\n" not in str(caught.value)
            for _ in range(100):  # the server asks for the roots, then applies them
                read = await source.call(
                    "fs", "read_text_file", {"path": str(tmp_path / "data.txt")}
                )
                if not read.is_error:
                    break
                await asyncio.sleep(0.1)
            assert "configured" in read.text()

    asyncio.run(main())
