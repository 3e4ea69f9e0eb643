"""Tavily: ``POST /search`` with a JSON body, key as ``Authorization: Bearer tvly-...``.

Wire format (Tavily's API reference, and the request ``tavily-python`` 0.8 builds):
``{"query", "max_results" (0..20), "search_depth": "basic" | "advanced", "topic":
"general" | "news", "time_range": "day" | "week" | "month" | "year",
"include_domains": [...], "include_answer": bool}``; the answer is ``{"query",
"answer"?, "results": [{"title", "url", "content", "score", "published_date"?}],
"response_time"}``. Errors: 400 bad request, 401 invalid key, 403 / 432 / 433
forbidden or plan / pay-as-you-go limit, 429 rate limit, each with
``{"detail": {"error": "..."}}``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._base import (
    Recency,
    SearchResult,
    SearchResults,
    WebSearchError,
    clean_text,
    mapping,
    normalize_domain,
    tidy_results,
)
from ._http import api_request, status_error
from .netguard import NetPolicy

__all__ = ["TAVILY_URL"]

TAVILY_URL = "https://api.tavily.com/search"


class TavilySearch:
    """The Tavily search API (``TAVILY_API_KEY``; https://app.tavily.com)."""

    name = "tavily"

    def __init__(
        self,
        api_key: str,
        *,
        url: str = TAVILY_URL,
        search_depth: str = "basic",
        topic: str = "general",
        include_answer: bool = False,
        timeout: float = 30.0,
        net: NetPolicy | None = None,
    ) -> None:
        if not api_key:
            raise WebSearchError("tavily", "config", "no API key (set TAVILY_API_KEY)")
        self._key = api_key
        self.url = url
        self.search_depth = search_depth
        self.topic = topic
        self.include_answer = include_answer
        self.timeout = timeout
        self.net = net

    def __repr__(self) -> str:
        return f"TavilySearch(url={self.url!r}, api_key='***')"

    def request(
        self, query: str, *, limit: int, recency: Recency | None, domains: Sequence[str]
    ) -> dict[str, Any]:
        """The JSON body of one search (exposed for tests and debugging)."""
        body: dict[str, Any] = {
            "query": query,
            "max_results": max(1, min(20, limit)),
            "search_depth": self.search_depth,
            "topic": self.topic,
            "include_answer": self.include_answer,
        }
        if recency is not None:
            body["time_range"] = recency
        names = [d for d in (normalize_domain(x) for x in domains) if d]
        if names:
            body["include_domains"] = names
        return body

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
            "POST",
            self.url,
            timeout=self.timeout,
            net=self.net,
            headers={"Authorization": f"Bearer {self._key}"},
            body=self.request(query, limit=limit, recency=recency, domains=domains),
            secrets=(self._key,),
        )
        if status != 200:
            detail = mapping(data).get("detail")
            error = mapping(detail).get("error") if isinstance(detail, dict) else detail
            message = clean_text(error or data or f"HTTP {status}", 300) or f"HTTP {status}"
            raise status_error(
                self.name,
                status,
                headers,
                message,
                quota=status in (432, 433),
                secrets=(self._key,),
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
            date = item.get("published_date")
            hits.append(
                SearchResult(
                    title=clean_text(item.get("title"), 200) or url,
                    url=url,
                    snippet=clean_text(item.get("content")),
                    published=date if isinstance(date, str) and date else None,
                )
            )
        answer = mapping(data).get("answer")
        return SearchResults(
            query,
            self.name,
            tidy_results(hits, limit=limit, domains=domains),
            answer=clean_text(answer, 1000) or None if isinstance(answer, str) else None,
        )
