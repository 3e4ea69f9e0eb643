"""The gateway serves its upstream servers' resources, templates and prompts, under its
names and its policy: a real ``tooldeck serve`` reached by the official SDK client, over
stdio and over streamable HTTP, in front of npm's ``@modelcontextprotocol/server-everything``
and tests/mcp_servers/pictures.py.
"""

from __future__ import annotations

import base64
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, MCPError

from gateway_client import (
    ALLOW_ALL,
    audit_lines,
    gateway,
    http_client,
    node_server,
    npm_server,
    served_gateway,
    write_config,
    write_policy,
)

SERVERS = Path(__file__).parent / "mcp_servers"
EVERYTHING = ("@modelcontextprotocol/server-everything", "2026.8.31", "mcp-server-everything")
DENY_STATIC = (
    ALLOW_ALL
    + '[[profile.rules]]\ntools = "everything__resources_read"\naction = "deny"\n'
    + 'args = { uri = { uri = "demo://resource/static/*" } }\nreason = "no static documents"\n'
)


def servers() -> dict[str, Any]:
    entry = npm_server(*EVERYTHING)
    return {
        "everything": node_server(entry, "stdio"),
        "pictures": {"command": sys.executable, "args": [str(SERVERS / "pictures.py")]},
    }


async def check(client: ClientSession, state: Path) -> None:
    listed = {str(r.uri): r for r in (await client.list_resources()).resources}
    features = "tooldeck://everything/demo://resource/static/document/features.md"
    assert features in listed and "tooldeck://pictures/pictures://dot.png" in listed
    assert listed[features].name == "everything__features.md"
    shapes = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
    assert "tooldeck://everything/demo://resource/dynamic/text/{resourceId}" in shapes

    text = await client.read_resource("tooldeck://everything/demo://resource/dynamic/text/3")
    (content,) = text.contents
    assert str(content.uri) == "tooldeck://everything/demo://resource/dynamic/text/3"
    assert getattr(content, "text", "").startswith("Resource 3: This is a plaintext resource")
    image = await client.read_resource("tooldeck://pictures/pictures://dot.png")
    (blob,) = image.contents
    assert base64.b64decode(getattr(blob, "blob", "")).startswith(b"\x89PNG")

    with pytest.raises(MCPError, match="denied by policy: no static documents"):
        await client.read_resource(features)
    with pytest.raises(MCPError, match="names no server"):
        await client.read_resource("tooldeck://nowhere/demo://x")
    with pytest.raises(MCPError, match="is not a gateway URI"):
        await client.read_resource("demo://resource/dynamic/text/3")

    prompts = {p.name: p for p in (await client.list_prompts()).prompts}
    assert "everything__args-prompt" in prompts
    assert [a.name for a in prompts["everything__args-prompt"].arguments or []] == [
        "city",
        "state",
    ]
    got = await client.get_prompt("everything__args-prompt", {"city": "Paris"})
    assert [m.content.text for m in got.messages] == ["What's weather in Paris?"]  # type: ignore[union-attr]
    with pytest.raises(MCPError, match="needs the argument 'city'"):
        await client.get_prompt("everything__args-prompt", {})

    lines = [line for line in audit_lines(state) if line["tool"] == "everything__resources_read"]
    assert {line["decision"] for line in lines} == {"allow", "deny"}


def test_over_stdio_with_the_sdk_client(tmp_path: Path) -> None:
    config = write_config(tmp_path, servers())
    policy = write_policy(tmp_path, DENY_STATIC)
    state = tmp_path / "state"

    async def main() -> None:
        async with gateway(config, state, "--policy", str(policy)) as client:
            await check(client, state)

    anyio.run(main)


def test_over_http_with_the_sdk_client(tmp_path: Path) -> None:
    config = write_config(tmp_path, servers())
    policy = write_policy(tmp_path, DENY_STATIC)
    state = tmp_path / "state"

    async def main(url: str) -> None:
        async with http_client(url) as client:
            await check(client, state)

    with served_gateway(config, state, "--policy", str(policy)) as url:
        anyio.run(main, url)
