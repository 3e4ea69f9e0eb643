"""The catalog's view is looked up again only when the source's listing_epoch moved
(gateway/catalog.py, mcp/source.py): the same view while nothing changed; a new one as
soon as a server connects, lists again, goes away or is activated. A real McpSource in
front of tests/mcp_servers/verbatim.py (a hand-written server: starts in milliseconds)."""

from __future__ import annotations

from pathlib import Path

import anyio

from gateway_client import PY
from tooldeck.gateway import Catalog
from tooldeck.mcp import McpSource

SERVER = Path(__file__).parent / "mcp_servers" / "verbatim.py"


def _config(autostart: bool) -> dict[str, object]:
    server = {"command": PY, "args": [str(SERVER), "stdio"], "autostart": autostart}
    return {"mcpServers": {"v": server}}


def test_the_view_follows_the_listing() -> None:
    async def main() -> None:
        async with McpSource(_config(True), prefixed=False) as source:
            catalog = Catalog(source, semantic=False, core=["*"])
            await source.refresh()
            first = catalog.view()
            assert set(first.tools) == {"v__reply"}
            assert catalog.view() is first  # nothing changed: the same view
            epoch = source.listing_epoch
            source._servers["v"].conn.mark_dirty()  # the server lists again: new tools
            await source.refresh()
            assert source.listing_epoch != epoch
            second = catalog.view()
            assert second is not first and set(second.tools) == {"v__reply"}
            assert second.tools["v__reply"] is not first.tools["v__reply"]
            assert catalog.view() is second
        assert catalog.view().tools == {}  # closed: the server went away

    anyio.run(main)


def test_an_activation_moves_the_epoch() -> None:
    async def main() -> None:
        async with McpSource(_config(False), prefixed=False) as source:
            catalog = Catalog(source, semantic=False, core=["*"])
            assert catalog.view().tools == {}
            await source.activate("v", session_id="s1", wait=True)  # connected, for s1
            assert catalog.view().tools == {}  # the catalog lists what is active for all
            await source.activate("v", wait=True)  # already connected: no state change
            assert set(catalog.view().tools) == {"v__reply"}
            await source.deactivate("v")
            assert catalog.view().tools == {}

    anyio.run(main)
