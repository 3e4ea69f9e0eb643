"""Keyless search through the ``ddgs`` library (``pip install 'tooldeck[ddgs]'``).

``ddgs`` (9.x) reads the result pages of public search engines (DuckDuckGo, Bing,
Brave, Mojeek...), so it needs no key, but it scrapes: results can change when a site
changes, and engines rate-limit it. It is behind an extra, and chosen only when asked
for (``TOOLDECK_WEB_SEARCH=ddgs``) or when it is installed and nothing else is set up.

It uses its own HTTP client (``primp``), not the network guard: the hosts it connects to
are the engines' own, fixed in the library, never chosen by a model. Only
``TOOLDECK_WEB_PROXY`` is passed on. Its calls are blocking; they run in a worker
thread. Its own exceptions map to :class:`~tooldeck.web._base.WebSearchError`; "No
results found." is an empty answer, not an error.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Callable, Sequence
from typing import Any

import anyio

from .._extras import needs_extra
from ..errors import MissingExtra
from ._base import (
    Recency,
    SearchResult,
    SearchResults,
    WebSearchError,
    clean_text,
    mapping,
    site_query,
    tidy_results,
)

__all__ = ["ddgs_available"]

_TIMELIMIT = {"day": "d", "week": "w", "month": "m", "year": "y"}
_log = logging.getLogger("tooldeck.web")


def ddgs_available() -> bool:
    """Whether the ``ddgs`` library is installed (found, not imported: that is slow)."""
    try:
        return importlib.util.find_spec("ddgs") is not None
    except (ImportError, ValueError):
        return False


class DdgsSearch:
    """Web search with the ``ddgs`` metasearch library (no key)."""

    name = "ddgs"

    def __init__(
        self,
        *,
        backend: str = "auto",
        region: str = "us-en",
        safesearch: str = "moderate",
        timeout: int = 10,
        proxy: str | None = None,
        client: Callable[..., Any] | None = None,
    ) -> None:
        self.backend = backend
        self.region = region
        self.safesearch = safesearch
        self.timeout = timeout
        self.proxy = proxy
        self._client = client  # builds a DDGS-like object; default: ddgs.DDGS

    def __repr__(self) -> str:
        return f"DdgsSearch(backend={self.backend!r}, region={self.region!r})"

    def request(
        self, query: str, *, limit: int, recency: Recency | None, domains: Sequence[str]
    ) -> dict[str, Any]:
        """The keyword arguments of ``DDGS.text`` for one search."""
        kwargs: dict[str, Any] = {
            "query": site_query(query, domains),
            "region": self.region,
            "safesearch": self.safesearch,
            "max_results": max(1, min(20, limit)),
            "backend": self.backend,
        }
        if recency is not None:
            kwargs["timelimit"] = _TIMELIMIT[recency]
        return kwargs

    def _run(self, kwargs: dict[str, Any]) -> list[Any]:
        try:
            with needs_extra("ddgs"):
                from ddgs import DDGS
                from ddgs.exceptions import DDGSException, RatelimitException, TimeoutException
        except MissingExtra as exc:  # the model is told, as a configuration problem
            raise WebSearchError(self.name, "config", str(exc)) from None
        make = self._client or DDGS
        try:
            found = make(proxy=self.proxy, timeout=self.timeout).text(**kwargs)
        except RatelimitException as exc:
            raise WebSearchError(
                self.name, "quota", f"an engine rate-limited the search ({exc})"
            ) from None
        except TimeoutException:
            raise WebSearchError(
                self.name, "timeout", f"no engine answered in {self.timeout} s"
            ) from None
        except DDGSException as exc:
            if "no results found" in str(exc).lower():
                return []
            raise WebSearchError(self.name, "unavailable", clean_text(str(exc), 300)) from None
        return list(found or [])

    async def search(
        self,
        query: str,
        *,
        limit: int = 10,
        recency: Recency | None = None,
        domains: Sequence[str] = (),
    ) -> SearchResults:
        kwargs = self.request(query, limit=limit, recency=recency, domains=domains)
        found = await anyio.to_thread.run_sync(self._run, kwargs, abandon_on_cancel=True)
        hits = []
        for item in found:
            item = mapping(item)
            url = item.get("href") or item.get("url")
            if not isinstance(url, str):
                continue
            hits.append(
                SearchResult(
                    title=clean_text(item.get("title"), 200) or url,
                    url=url,
                    snippet=clean_text(item.get("body")),
                )
            )
        return SearchResults(query, self.name, tidy_results(hits, limit=limit, domains=domains))
