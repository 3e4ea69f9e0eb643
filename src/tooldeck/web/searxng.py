"""A SearXNG instance's JSON API: ``GET {base}/search?q=...&format=json``; no key.

Wire format (SearXNG's "Search API" documentation): ``q``, ``format=json``, ``pageno``,
``time_range`` (``day`` / ``week`` / ``month`` / ``year``), ``language``,
``safesearch`` (0 / 1 / 2); the answer is ``{"query", "number_of_results", "results":
[{"url", "title", "content", "engine", "engines", "publishedDate"?, "score"}],
"answers", "suggestions", "unresponsive_engines": [[engine, reason], ...]}``. An
instance answers 403 unless its ``settings.yml`` lists ``json`` under
``search.formats``, and 429 when its limiter blocks the client.

The instance is usually the user's own, often on a private address: its host is
allowed through the network guard because the user configured it (see
:mod:`tooldeck.web._http`). Credentials in the URL (``https://user:pass@host``) are sent
as HTTP basic auth and never shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx

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
from ._http import api_request, shown_url, status_error
from .netguard import NetPolicy


class SearxngSearch:
    """A SearXNG instance (``SEARXNG_URL``, e.g. ``http://localhost:8888``)."""

    name = "searxng"

    def __init__(
        self,
        url: str,
        *,
        language: str | None = None,
        safesearch: int | None = None,
        categories: str | None = None,
        timeout: float = 15.0,
        net: NetPolicy | None = None,
    ) -> None:
        try:
            parsed = httpx.URL(url.strip())
        except httpx.InvalidURL:
            parsed = None
        if parsed is None or parsed.scheme not in ("http", "https") or not parsed.host:
            raise WebSearchError(
                "searxng", "config", "SEARXNG_URL must be an http:// or https:// URL"
            )
        self._secrets = tuple(s for s in (parsed.password,) if s)
        self.base = str(parsed).rstrip("/")
        self.language = language
        self.safesearch = safesearch
        self.categories = categories
        self.timeout = timeout
        self.net = net

    def __repr__(self) -> str:
        return f"SearxngSearch(url={shown_url(self.base)!r})"

    @property
    def search_url(self) -> str:
        return self.base if self.base.endswith("/search") else f"{self.base}/search"

    def request(
        self, query: str, *, limit: int, recency: Recency | None, domains: Sequence[str]
    ) -> dict[str, Any]:
        """The query parameters of one search (exposed for tests and debugging)."""
        params: dict[str, Any] = {"q": site_query(query, domains), "format": "json", "pageno": 1}
        if recency is not None:
            params["time_range"] = recency
        if self.language:
            params["language"] = self.language
        if self.safesearch is not None:
            params["safesearch"] = self.safesearch
        if self.categories:
            params["categories"] = self.categories
        return params

    async def search(
        self,
        query: str,
        *,
        limit: int = 10,
        recency: Recency | None = None,
        domains: Sequence[str] = (),
    ) -> SearchResults:
        status, headers, data = await api_request(
            self.name,
            "GET",
            self.search_url,
            timeout=self.timeout,
            net=self.net,
            params=self.request(query, limit=limit, recency=recency, domains=domains),
            secrets=self._secrets,
        )
        if status == 403:
            raise WebSearchError(
                self.name,
                "config",
                f"{shown_url(self.base)} refused the JSON format (HTTP 403); add json to "
                "search.formats in the instance's settings.yml",
                status=status,
            )
        if status != 200:
            message = clean_text(data if isinstance(data, str) else f"HTTP {status}", 300)
            raise status_error(
                self.name, status, headers, message or f"HTTP {status}", secrets=self._secrets
            )
        raw = mapping(data).get("results", [])
        if not isinstance(raw, list):
            raise WebSearchError(self.name, "bad_response", "'results' is not a list")
        hits = []
        for item in raw:
            item = mapping(item)
            url = item.get("url")
            if not isinstance(url, str):
                continue
            date = item.get("publishedDate")
            engine = item.get("engine")
            hits.append(
                SearchResult(
                    title=clean_text(item.get("title"), 200) or url,
                    url=url,
                    snippet=clean_text(item.get("content")),
                    published=date[:10] if isinstance(date, str) and date else None,
                    source=engine if isinstance(engine, str) and engine else None,
                )
            )
        notes = []
        down = mapping(data).get("unresponsive_engines")
        if isinstance(down, list) and down:
            names = sorted({str(e[0]) for e in down if isinstance(e, list) and e})
            if names:
                notes.append(f"engines that did not answer: {', '.join(names)}")
        answers = mapping(data).get("answers")
        answer = None
        if isinstance(answers, list) and answers:
            first = answers[0]
            text = first.get("answer") if isinstance(first, dict) else first
            answer = clean_text(text, 1000) or None
        return SearchResults(
            query,
            self.name,
            tidy_results(hits, limit=limit, domains=domains),
            answer=answer,
            notes=tuple(notes),
        )
