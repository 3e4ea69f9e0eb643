"""``tooldeck serve --check``: what a client would be listed, and what it costs.

Connects the upstream servers, makes one client session and reports its ``tools/list``
(each tool with its estimated tokens), the catalog behind ``tool_search``, what listing
every tool would cost, and every server's state. Nothing is served.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .server import Gateway
from .wire import listed_tool, listing_tokens, tool_tokens

__all__ = ["CheckReport", "check"]


@dataclass(frozen=True, slots=True)
class CheckReport:
    listed: tuple[tuple[str, int], ...]  # (name, tokens)
    listed_tokens: int
    catalog_tools: int
    all_tokens: int  # every upstream tool listed, as the gateway would list it
    servers: tuple[dict[str, Any], ...]

    @property
    def saving(self) -> float:
        return 1 - self.listed_tokens / self.all_tokens if self.all_tokens else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "listed": [{"name": n, "tokens": t} for n, t in self.listed],
            "listed_tokens": self.listed_tokens,
            "catalog_tools": self.catalog_tools,
            "all_tokens": self.all_tokens,
            "saving": round(self.saving, 4),
            "servers": list(self.servers),
        }


def check(gateway: Gateway) -> CheckReport:
    """The report for a fresh session of ``gateway`` (its source already started)."""
    session = gateway.new_session()
    view = gateway.catalog.view()
    listed = session.listed(view)
    everything = [listed_tool(t.name, t) for t in view.tools.values()]
    servers = tuple(
        {
            "name": s.name,
            "state": s.state,
            "error": s.error,
            "tools": len(s.tools),
            "skipped": list(s.skipped),
            "collisions": list(s.collisions),
        }
        for s in gateway.catalog.source.status()
    )
    return CheckReport(
        listed=tuple((t.name, tool_tokens(t)) for t in listed),
        listed_tokens=listing_tokens(listed),
        catalog_tools=len(view.tools),
        all_tokens=listing_tokens(everything),
        servers=servers,
    )
