"""Brave Search API: ``GET /res/v1/web/search``, key in ``X-Subscription-Token``.

Wire format (Brave's public API documentation): query ``q``, ``count`` 1..20,
``freshness`` ``pd`` / ``pw`` / ``pm`` / ``py``; the answer's ``web.results`` hold
``title``, ``url``, ``description`` (with ``<strong>`` highlights unless
``text_decorations=false``), ``age`` ("3 days ago") and ``page_age`` (an ISO date).
Errors come as ``{"type": "ErrorResponse", "error": {"code", "detail", "status"}}``:
``SUBSCRIPTION_TOKEN_INVALID`` (sent with 401 or 422), ``RATE_LIMITED`` (429, with
``X-RateLimit-Reset`` seconds per window). Brave has no domain parameter, so domains
become ``site:`` words and are filtered again on the answer.
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
    site_query,
    tidy_results,
)
from ._http import api_request, status_error
from .netguard import NetPolicy

__all__ = ["BRAVE_URL"]

BRAVE_URL = "https://api.search.brave.com/res/v1/web/search"
_FRESHNESS = {"day": "pd", "week": "pw", "month": "pm", "year": "py"}
_AUTH_CODES = ("SUBSCRIPTION_TOKEN_INVALID", "SUBSCRIPTION_NOT_FOUND", "OPTION_NOT_IN_PLAN")
_QUOTA_CODES = ("RATE_LIMITED", "QUOTA_LIMITED", "USAGE_LIMIT_EXCEEDED")


class BraveSearch:
    """The Brave Search API (``BRAVE_API_KEY``; https://api-dashboard.search.brave.com)."""

    name = "brave"

    def __init__(
        self,
        api_key: str,
        *,
        url: str = BRAVE_URL,
        country: str | None = None,
        search_lang: str | None = None,
        safesearch: str | None = None,
        timeout: float = 15.0,
        net: NetPolicy | None = None,
    ) -> None:
        if not api_key:
            raise WebSearchError("brave", "config", "no API key (set BRAVE_API_KEY)")
        self._key = api_key
        self.url = url
        self.country = country
        self.search_lang = search_lang
        self.safesearch = safesearch
        self.timeout = timeout
        self.net = net

    def __repr__(self) -> str:
        return f"BraveSearch(url={self.url!r}, api_key='***')"

    def request(
        self, query: str, *, limit: int, recency: Recency | None, domains: Sequence[str]
    ) -> dict[str, Any]:
        """The query parameters of one search (exposed for tests and debugging)."""
        params: dict[str, Any] = {
            "q": site_query(query, domains),
            "count": max(1, min(20, limit)),
            "text_decorations": "false",
            "result_filter": "web",
        }
        if recency is not None:
            params["freshness"] = _FRESHNESS[recency]
        for key, value in (
            ("country", self.country),
            ("search_lang", self.search_lang),
            ("safesearch", self.safesearch),
        ):
            if value:
                params[key] = value
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
            self.url,
            timeout=self.timeout,
            net=self.net,
            headers={"X-Subscription-Token": self._key, "Accept-Encoding": "gzip"},
            params=self.request(query, limit=limit, recency=recency, domains=domains),
            secrets=(self._key,),
        )
        if status != 200:
            error = mapping(mapping(data).get("error"))
            code = error.get("code") if isinstance(error.get("code"), str) else None
            detail = error.get("detail") if isinstance(error.get("detail"), str) else None
            message = clean_text(detail or data or f"HTTP {status}", 300) or f"HTTP {status}"
            raise status_error(
                self.name,
                status,
                headers,
                message,
                code=code,
                auth=code in _AUTH_CODES,
                quota=code in _QUOTA_CODES,
                secrets=(self._key,),
            )
        web = mapping(mapping(data).get("web"))
        raw = web.get("results", [])
        if not isinstance(raw, list):
            raise WebSearchError(self.name, "bad_response", "'web.results' is not a list")
        hits = []
        for item in raw:
            item = mapping(item)
            url = item.get("url")
            if not isinstance(url, str):
                continue
            snippet = clean_text(item.get("description"))
            extra = item.get("extra_snippets")
            if not snippet and isinstance(extra, list) and extra:
                snippet = clean_text(extra[0])
            page_age = item.get("page_age")
            published = page_age[:10] if isinstance(page_age, str) and page_age else None
            age = item.get("age")
            hits.append(
                SearchResult(
                    title=clean_text(item.get("title"), 200) or url,
                    url=url,
                    snippet=snippet,
                    published=published or (age if isinstance(age, str) and age else None),
                    source=clean_text(mapping(item.get("meta_url")).get("hostname"), 100) or None,
                )
            )
        return SearchResults(query, self.name, tidy_results(hits, limit=limit, domains=domains))
