"""What every web search provider speaks: the protocol, its results and its one error type.

A provider turns ``search(query, limit=, recency=, domains=)`` into one request to a
search service and its answer into :class:`SearchResults`, so the ``web_search`` tool
never knows which service it talks to. Whatever goes wrong (a bad key, a used-up quota, a
timeout, a service that is down or answers nonsense) is one :class:`WebSearchError`
whose ``line`` the model reads and whose ``detail`` (kind, provider, HTTP status, retry
delay) goes to logs; neither ever holds a secret.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable
from urllib.parse import urlsplit

from ..errors import TooldeckError

__all__ = ["ErrorKind", "clean_text", "host_in", "normalize_domain", "tidy_results"]

Recency: TypeAlias = Literal["day", "week", "month", "year"]
RECENCIES: tuple[Recency, ...] = ("day", "week", "month", "year")

ErrorKind: TypeAlias = Literal[
    "auth", "quota", "timeout", "unavailable", "bad_request", "bad_response", "refused", "config"
]

SNIPPET_CHARS = 400  # a result's snippet is cut here (results must fit a small budget)


@dataclass(frozen=True, slots=True)
class SearchResult:
    """One hit: ``published`` is the date as the service gives it (ISO date or "3 days ago")."""

    title: str
    url: str
    snippet: str = ""
    published: str | None = None
    source: str | None = None  # the engine or site that found it, when the service says

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"title": self.title, "url": self.url, "snippet": self.snippet}
        if self.published:
            out["published"] = self.published
        if self.source:
            out["source"] = self.source
        return out


@dataclass(frozen=True, slots=True)
class SearchResults:
    """A service's answer: its hits in its order, plus an answer or notes when it has any."""

    query: str
    provider: str
    results: tuple[SearchResult, ...] = ()
    answer: str | None = None  # a short answer the service wrote (Tavily include_answer)
    notes: tuple[str, ...] = ()  # e.g. engines that did not answer (SearXNG)


@runtime_checkable
class WebProvider(Protocol):
    """A web search service, bound to a turn as ``TurnContext.web_provider``.

    ``search`` returns at most ``limit`` results; ``recency`` keeps results from the last
    day / week / month / year where the service can; ``domains`` keeps only results on
    those domains (or their subdomains). Failures raise :class:`WebSearchError`. A
    provider may also offer ``fetch(url, *, timeout)`` returning
    :class:`tooldeck.builtin.web.fetch.Fetched`-shaped page data; ``web_fetch`` then
    reads pages through it (see docs/web.md).
    """

    name: str

    async def search(
        self,
        query: str,
        *,
        limit: int = 10,
        recency: Recency | None = None,
        domains: Sequence[str] = (),
    ) -> SearchResults: ...


class WebSearchError(TooldeckError):
    """A search that failed; ``line`` is for the model, ``detail`` for logs.

    ``kind`` is one of :data:`ErrorKind`: ``auth`` (the key is missing, wrong or not
    allowed), ``quota`` (rate limit or plan limit; ``retry_after`` in seconds when the
    service says), ``timeout``, ``unavailable`` (cannot connect, 5xx), ``bad_request``
    (the service refused the query), ``bad_response`` (an answer that is not what the
    service documents), ``refused`` (the network guard refused the address) and
    ``config`` (tooldeck is not set up for this provider).
    """

    def __init__(
        self,
        provider: str,
        kind: ErrorKind,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.provider = provider
        self.kind: ErrorKind = kind
        self.message = message
        self.status = status
        self.retry_after = retry_after
        self.code = code

    @property
    def line(self) -> str:
        """One line for the model: what failed and what can be done."""
        advice = {
            "auth": "the search key is missing or not accepted; a user has to fix the setup",
            "quota": "the search quota or rate limit is used up",
            "timeout": "the search service did not answer in time; try again",
            "unavailable": "the search service cannot be reached right now; try again later",
            "bad_request": "the service refused this query; change the query or the filters",
            "bad_response": "the search service answered with something unexpected",
            "refused": "the network guard refused the service's address",
            "config": "web search is not set up for this provider",
        }[self.kind]
        if self.kind == "quota" and self.retry_after is not None:
            advice += f" (retry after {self.retry_after:g} s)"
        return f"Web search failed ({self.provider}): {self.message} — {advice}."

    @property
    def detail(self) -> dict[str, Any]:
        """The typed detail for logs and UIs (never a secret)."""
        out: dict[str, Any] = {"provider": self.provider, "kind": self.kind}
        if self.status is not None:
            out["status"] = self.status
        if self.retry_after is not None:
            out["retry_after"] = self.retry_after
        if self.code is not None:
            out["code"] = self.code
        out["message"] = self.message
        return out

    def __str__(self) -> str:
        return f"{self.provider}: {self.kind}: {self.message}"


_TAGS = re.compile(r"<[^>]{0,200}>")
_SPACES = re.compile(r"\s+")


def clean_text(value: Any, limit: int = SNIPPET_CHARS) -> str:
    """A service's title or snippet as plain text: tags and entities gone, one line, cut."""
    if not isinstance(value, str):
        return ""
    text = _SPACES.sub(" ", html.unescape(_TAGS.sub("", value))).strip()
    if len(text) > limit:
        text = text[: limit - 1].rstrip() + "…"
    return text


def normalize_domain(domain: str) -> str:
    """``"https://Docs.Example.com/x"`` or ``"*.example.com"`` -> ``"docs.example.com"``."""
    text = domain.strip().lower()
    if "://" in text:
        text = urlsplit(text).hostname or ""
    text = text.split("/", 1)[0].split(":", 1)[0]
    if text.startswith("*."):
        text = text[2:]
    return text.strip(".")


def host_in(url: str, domains: Iterable[str]) -> bool:
    """Whether ``url``'s host is one of ``domains`` or a subdomain of one."""
    host = (urlsplit(url).hostname or "").lower().rstrip(".")
    return any(host == d or host.endswith("." + d) for d in domains if d)


def tidy_results(
    hits: Iterable[SearchResult], *, limit: int, domains: Sequence[str] = ()
) -> tuple[SearchResult, ...]:
    """At most ``limit`` hits with http(s) URLs, each URL once, on ``domains`` if given.

    Services treat a domain filter as a hint (or a ``site:`` query word), so it is
    applied again here to what they return.
    """
    wanted = [normalize_domain(d) for d in domains]
    wanted = [d for d in wanted if d]
    seen: set[str] = set()
    kept: list[SearchResult] = []
    for hit in hits:
        scheme = urlsplit(hit.url).scheme.lower()
        if scheme not in ("http", "https") or hit.url in seen:
            continue
        if wanted and not host_in(hit.url, wanted):
            continue
        seen.add(hit.url)
        kept.append(hit)
        if len(kept) >= limit:
            break
    return tuple(kept)


def site_query(query: str, domains: Sequence[str]) -> str:
    """``query`` restricted with ``site:`` words (for services without a domain filter)."""
    names = [d for d in (normalize_domain(x) for x in domains) if d]
    if not names:
        return query
    sites = " OR ".join(f"site:{d}" for d in names)
    return f"{query} ({sites})" if len(names) > 1 else f"{query} {sites}"


def mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
