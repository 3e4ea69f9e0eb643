"""Resource subscriptions and upstream list changes through ``tooldeck serve``.

A real gateway reached by the official MCP SDK client over stdio and HTTP; upstream, npm's
``@modelcontextprotocol/server-everything`` (subscribable resources, updated every 5 s
once ``toggle-subscriber-updates`` runs, and at once each time it turns them on; and
``gzip-file-as-resource``, which adds a resource and says its list changed) and
tests/mcp_servers/listing.py (adds a prompt or a tool and says so). A subscription belongs
to the client session that made it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import MCPError

from gateway_client import (
    ALLOW_ALL,
    gateway,
    http_client,
    node_server,
    npm_server,
    served_gateway,
    text_of,
    write_config,
    write_policy,
)

SERVERS = Path(__file__).parent / "mcp_servers"
EVERYTHING = ("@modelcontextprotocol/server-everything", "2026.8.31", "mcp-server-everything")
DYNAMIC = "tooldeck://everything/demo://resource/dynamic/text/1"
OTHER = "tooldeck://everything/demo://resource/dynamic/text/2"
STATIC = "tooldeck://everything/demo://resource/static/document/features.md"
TOGGLE = "everything__toggle-subscriber-updates"
POLICY = (
    ALLOW_ALL
    + '[[profile.rules]]\ntools = "everything__resources_read"\naction = "deny"\n'
    + 'args = { uri = { uri = "demo://resource/static/*" } }\nreason = "no static documents"\n'
)
PACE = 5.0  # server-everything's update interval
# handshake-era features, which the SDK client warns of
pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


class Heard:
    """The notifications a client received."""

    def __init__(self) -> None:
        self.messages: list[Any] = []
        self.arrived = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if not isinstance(message, Exception):
            self.messages.append(message)
            self.arrived.set()
            self.arrived = anyio.Event()

    def updated(self) -> list[str]:
        return [
            str(m.params.uri)
            for m in self.messages
            if isinstance(m, types.ResourceUpdatedNotification)
        ]

    def count(self, kind: type) -> int:
        return sum(isinstance(m, kind) for m in self.messages)

    async def until(self, kind: type, at_least: int = 1, seconds: float = 30) -> None:
        with anyio.fail_after(seconds):
            while self.count(kind) < at_least:
                await self.arrived.wait()

    async def until_updated(self, uri: str, at_least: int, seconds: float = 30) -> None:
        with anyio.fail_after(seconds):
            while self.updated().count(uri) < at_least:
                await self.arrived.wait()


def config(tmp_path: Path) -> tuple[Path, str, str, str, str]:
    entry = npm_server(*EVERYTHING)
    listing = {
        "command": sys.executable,
        "args": [str(SERVERS / "listing.py"), "stdio"],
        "protocol": "legacy",
    }
    servers = {"everything": node_server(entry, "stdio"), "lists": listing}
    policy = write_policy(tmp_path, POLICY)
    return write_config(tmp_path, servers), "--core", "*", "--policy", str(policy)


async def restarted(client: Any) -> None:
    """The server's updates toggled off and on again: it sends a round at once."""
    for _ in range(2):
        result = await client.call_tool(TOGGLE, {})
        assert not result.is_error, text_of(result)


async def refused(client: Any, uri: str, match: str) -> None:
    with pytest.raises(MCPError, match=match):
        await client.subscribe_resource(uri)


def test_over_stdio_a_subscription_forwards_updates_until_unsubscribed(tmp_path: Path) -> None:
    heard = Heard()

    async def main() -> None:
        path, *args = config(tmp_path)
        async with gateway(path, tmp_path / "state", *args, notes=heard) as client:  # type: ignore[arg-type]
            caps = client.server_capabilities
            assert caps is not None and caps.resources is not None
            assert caps.resources.subscribe and caps.resources.list_changed
            await client.subscribe_resource(DYNAMIC)
            await refused(client, STATIC, "denied by policy: no static documents")
            await refused(client, "tooldeck://nowhere/demo://x", "names no server")
            await refused(client, "tooldeck://lists/note://first", "does not support")
            await client.call_tool(TOGGLE, {})  # updates start: one at once, then every 5 s
            await heard.until(types.ResourceUpdatedNotification)
            assert set(heard.updated()) == {DYNAMIC}  # the gateway's URI, nothing else
            await client.subscribe_resource(OTHER)  # the witness that a round was sent
            await client.unsubscribe_resource(DYNAMIC)
            await anyio.sleep(0.5)  # an update already on its way
            before = heard.updated()
            await restarted(client)  # a round at once, not in 5 s
            await heard.until_updated(OTHER, before.count(OTHER) + 1)
            assert heard.updated().count(DYNAMIC) == before.count(DYNAMIC)
            await client.call_tool(TOGGLE, {})

    anyio.run(main)


def test_upstream_list_changes_reach_the_client(tmp_path: Path) -> None:
    heard = Heard()

    async def main() -> None:
        path, *args = config(tmp_path)
        async with gateway(path, tmp_path / "state", *args, notes=heard) as client:  # type: ignore[arg-type]
            caps = client.server_capabilities
            assert caps is not None and caps.prompts is not None and caps.prompts.list_changed
            zipped = {"name": "hello.gz", "data": "data:text/plain,hello"}
            made = await client.call_tool("everything__gzip-file-as-resource", zipped)
            assert not made.is_error, text_of(made)
            await heard.until(types.ResourceListChangedNotification)
            uris = [str(r.uri) for r in (await client.list_resources()).resources]
            assert "tooldeck://everything/demo://resource/session/hello.gz" in uris

            await client.call_tool("lists__add_prompt", {"name": "later"})
            await heard.until(types.PromptListChangedNotification)
            prompts = [p.name for p in (await client.list_prompts()).prompts]
            assert "lists__later" in prompts

            before = heard.count(types.ToolListChangedNotification)
            await client.call_tool("lists__add_tool", {"name": "doubled"})
            await heard.until(types.ToolListChangedNotification, before + 1)
            # told once the gateway's catalog has the new tool: listing it now finds it
            assert "lists__doubled" in [t.name for t in (await client.list_tools()).tools]

    anyio.run(main)


def test_over_http_a_subscription_is_its_client_sessions_only(tmp_path: Path) -> None:
    heard_a, heard_b = Heard(), Heard()

    async def main(url: str) -> None:
        async with (
            http_client(url, notes=heard_a) as a,  # type: ignore[arg-type]
            http_client(url, notes=heard_b) as b,  # type: ignore[arg-type]
        ):
            await a.subscribe_resource(DYNAMIC)
            await b.subscribe_resource(OTHER)
            await b.unsubscribe_resource(OTHER)  # b keeps none
            await a.call_tool(TOGGLE, {})
            await heard_a.until(types.ResourceUpdatedNotification, 2, seconds=PACE * 6)
            assert set(heard_a.updated()) == {DYNAMIC}
            assert heard_b.updated() == []  # the other session hears nothing of it
            # a list change is everyone's
            zipped = {"name": "shared.gz", "data": "data:text/plain,x"}
            await b.call_tool("everything__gzip-file-as-resource", zipped)
            await heard_a.until(types.ResourceListChangedNotification)
            await heard_b.until(types.ResourceListChangedNotification)
            await b.subscribe_resource(OTHER)  # the witness that a round was sent
            await a.unsubscribe_resource(DYNAMIC)
            await anyio.sleep(0.5)  # an update already on its way
            before = len(heard_a.updated())
            await restarted(a)  # a round at once, not in 5 s
            await heard_b.until_updated(OTHER, 1)
            await anyio.sleep(0.5)  # on a's own stream, what that round would have sent it
            assert len(heard_a.updated()) == before and set(heard_b.updated()) == {OTHER}
            await a.call_tool(TOGGLE, {})

    path, *args = config(tmp_path)
    with served_gateway(path, tmp_path / "state", *args) as url:
        anyio.run(main, url)


def test_over_http_a_client_gone_while_subscribed_leaves_the_others_served(
    tmp_path: Path,
) -> None:
    """A session that ends without unsubscribing takes its subscription along (the
    upstream one ends with it); another session subscribing afterwards is subscribed
    upstream again and gets the updates."""
    heard = Heard()

    async def main(url: str) -> None:
        async with http_client(url, notes=heard) as a:  # type: ignore[arg-type]
            async with http_client(url) as gone:
                await gone.subscribe_resource(DYNAMIC)
                await gone.call_tool(TOGGLE, {})  # updates go on after it leaves
            await anyio.sleep(1)  # its connection's end reaches the gateway
            await a.subscribe_resource(DYNAMIC)
            await restarted(a)  # a round at once, not in up to 5 s
            await heard.until(types.ResourceUpdatedNotification)
            assert set(heard.updated()) == {DYNAMIC}
            await a.call_tool(TOGGLE, {})

    path, *args = config(tmp_path)
    with served_gateway(path, tmp_path / "state", *args) as url:
        anyio.run(main, url)
