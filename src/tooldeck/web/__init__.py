"""Web search providers: one small interface, real services behind it, configured once.

- :mod:`._base`: :class:`WebProvider` (``search(query, limit=, recency=, domains=)``),
  :class:`SearchResult` / :class:`SearchResults`, :class:`WebSearchError`;
- :mod:`.brave` (Brave Search API), :mod:`.tavily` (Tavily), :mod:`.searxng` (a
  SearXNG instance's JSON API), :mod:`.ddgs_search` (keyless, the ``ddgs`` library,
  behind the ``ddgs`` extra);
- :mod:`._http`: the one JSON request every HTTP provider makes, through the network
  guard, errors typed, secrets kept out of messages;
- :mod:`.config`: environment variables and the config file's ``[web]`` section, and
  :func:`search_provider`, which turns ``TurnContext.web_provider`` into a provider.

The ``web_search`` and ``web_fetch`` tools themselves are in :mod:`tooldeck.builtin.web`.
"""

from ._base import (
    RECENCIES,
    Recency,
    SearchResult,
    SearchResults,
    WebProvider,
    WebSearchError,
)
from .brave import BraveSearch
from .config import (
    HostedSearch,
    WebConfig,
    WebConfigError,
    WebSearchMode,
    search_provider,
)
from .ddgs_search import DdgsSearch
from .searxng import SearxngSearch
from .tavily import TavilySearch

__all__ = [
    "RECENCIES",
    "BraveSearch",
    "DdgsSearch",
    "HostedSearch",
    "Recency",
    "SearchResult",
    "SearchResults",
    "SearxngSearch",
    "TavilySearch",
    "WebConfig",
    "WebConfigError",
    "WebProvider",
    "WebSearchError",
    "WebSearchMode",
    "search_provider",
]
