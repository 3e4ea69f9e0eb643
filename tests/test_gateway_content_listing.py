"""The gateway's listings of upstream resources, templates and prompts ask the servers at
once, at most ``LIST_AT_ONCE`` at a time, and answer in the servers' order.

Three real SDK servers (tests/mcp_servers/listing.py) whose ``resources/list`` and
``prompts/list`` take 0.8 s and log when each starts and ends (one clock for all
processes: ``time.monotonic``), and one that never starts (left out of the listing).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from tooldeck.gateway import content
from tooldeck.gateway.content import UpstreamContent
from tooldeck.mcp import McpSource

SERVERS = Path(__file__).parent / "mcp_servers"
NAMES = ("one", "two", "three")


def most_at_once(log: Path) -> int:
    events = [json.loads(line) for line in log.read_text().splitlines()]
    events.sort(key=lambda e: (e["at"], e["event"] == "start"))  # an end before a start
    running = most = 0
    for event in events:
        running += 1 if event["event"] == "start" else -1
        most = max(most, running)
    return most


def servers(log: Path) -> dict[str, Any]:
    def listing(name: str) -> dict[str, Any]:
        env = {"LISTING_DELAY": "0.8", "LISTING_LOG": str(log), "LISTING_NAME": name}
        script = [str(SERVERS / "listing.py"), "stdio"]
        return {"command": sys.executable, "args": script, "env": env, "protocol": "legacy"}

    gone = {"command": sys.executable, "args": ["-c", "pass"], "startup_timeout": 5}
    return {"mcpServers": {**{n: listing(n) for n in NAMES}, "gone": gone}}


def test_listings_ask_the_servers_at_once_bounded_in_their_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "listings.jsonl"
    monkeypatch.setattr(content, "LIST_AT_ONCE", 2)

    async def main() -> None:
        async with McpSource(servers(log), prefixed=False, in_loop=True) as source:
            upstream = UpstreamContent(source, session_of=None)  # type: ignore[arg-type]
            listed = await upstream.list_resources(None, None)
            assert [str(r.uri) for r in listed.resources] == [
                f"tooldeck://{n}/note://first" for n in NAMES
            ]
            assert most_at_once(log) == 2
            log.unlink()
            prompts = await upstream.list_prompts(None, None)
            assert [p.name for p in prompts.prompts] == [f"{n}__greet" for n in NAMES]
            assert most_at_once(log) == 2
            templates = await upstream.list_resource_templates(None, None)
            assert templates.resource_templates == []

    anyio.run(main)
