"""The web tools: ``web_search`` (the bound provider's results) and ``web_fetch`` (a page
as Markdown). Both exist only when a web provider is bound to the turn
(``TurnContext.web_provider``); ``web_search`` also needs that binding to name a search
provider (:func:`tooldeck.web.search_provider`).

- :mod:`.search`: the ``web_search`` handler and the compact result list;
- :mod:`.fetch`: the ``web_fetch`` handler: the guarded, capped, deadline-bound fetch and
  the redirect hops judged by the session's policy;
- :mod:`.convert`: a fetched body as the text the model reads;
- :mod:`.worker`: that conversion in a worker process killed at the call's deadline;
- :mod:`.markdown`: HTML to Markdown (trafilatura with the ``web`` extra, else the
  standard library's parser);
- :mod:`.documents`: media types, charsets (codecs that are not text charsets
  refused), PDFs.
"""

from __future__ import annotations

from . import fetch, search
from ._handlers import handlers
from .fetch import MAX_BYTES, Fetched, web_fetch
from .markdown import html_to_markdown, html_to_text
from .search import web_search

__all__ = [
    "MAX_BYTES",
    "Fetched",
    "fetch",
    "handlers",
    "html_to_markdown",
    "html_to_text",
    "search",
    "web_fetch",
    "web_search",
]
