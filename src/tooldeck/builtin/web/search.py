"""``web_search``: the bound provider's results as a short numbered list.

The provider is the turn's binding (:func:`tooldeck.web.search_provider`: an object, or
a name resolved from the environment and the config file). Results come back as a
numbered list (title, URL, snippet, date when known) kept under :data:`BUDGET_CHARS`
(about 1,500 tokens), so a search costs little context; the full results are in the
result's ``details``. A provider failure is one line for the model and a typed detail
(kind, provider, status, retry delay) for logs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, cast

from ...context import ToolContext
from ...result import ToolResult
from ...web import SearchResults, WebConfigError, WebSearchError, search_provider
from ...web._base import Recency
from ._handlers import handlers

__all__ = ["BUDGET_CHARS", "format_results"]

BUDGET_CHARS = 6_000
SNIPPET_SHOWN = 300


def format_results(found: SearchResults, *, budget: int = BUDGET_CHARS) -> str:
    """The model's view of ``found``: numbered, compact, cut to ``budget`` characters."""
    count = len(found.results)
    head = f'Web results for "{found.query}" from {found.provider} ({count}):'
    lines = [head]
    if found.answer:
        lines += ["", f"Answer (written by {found.provider}): {found.answer}"]
    used = sum(len(x) + 1 for x in lines)
    shown = 0
    for number, hit in enumerate(found.results, start=1):
        snippet = hit.snippet
        if len(snippet) > SNIPPET_SHOWN:
            snippet = snippet[: SNIPPET_SHOWN - 1].rstrip() + "…"
        date = f" ({hit.published})" if hit.published else ""
        block = [f"{number}. {hit.title}", f"   {hit.url}"]
        if snippet or date:
            block.append(f"   {snippet}{date}".rstrip())
        size = sum(len(x) + 1 for x in block) + 1
        if shown and used + size > budget:
            break
        lines.append("")
        lines += block
        used += size
        shown += 1
    if shown < count:
        lines += ["", f"[{count - shown} more result(s) not shown, to keep this short.]"]
    for note in found.notes:
        lines += ["", f"[Note: {note}]"]
    return "\n".join(lines)


def _empty(found: SearchResults, recency: str | None, domains: Sequence[str]) -> str:
    filters = []
    if recency:
        filters.append(f"recency: {recency}")
    if domains:
        filters.append(f"domains: {', '.join(domains)}")
    hint = (
        f" with {'; '.join(filters)}; try fewer filters or other words"
        if filters
        else ("; try other words")
    )
    text = f'No web results for "{found.query}" from {found.provider}{hint}.'
    for note in found.notes:
        text += f" [Note: {note}]"
    return text


@handlers("web_search")
async def web_search(
    query: str,
    ctx: ToolContext,
    limit: int = 8,
    recency: str | None = None,
    domains: list[str] | None = None,
) -> ToolResult:
    words = query.strip()
    if not words:
        return ToolResult.error("Give a query: web_search needs some words to search for.")
    turn = ctx.turn
    try:
        provider = search_provider(
            getattr(turn, "web_provider", None), net=getattr(turn, "web_access", None)
        )
    except WebConfigError as exc:
        return ToolResult.error(f"Web search is not set up: {exc}")
    if provider is None:
        return ToolResult.error(
            "Web search is not set up: this turn has no search provider (see docs/web.md)."
        )
    wanted = [d.strip() for d in domains or () if d.strip()]
    if ctx.signal.aborted:
        return ToolResult.error(f"Not searched: the call was aborted ({ctx.signal.reason}).")
    task = asyncio.ensure_future(
        provider.search(words, limit=limit, recency=cast(Recency | None, recency), domains=wanted)
    )
    abort = asyncio.ensure_future(ctx.signal.wait())
    try:
        await asyncio.wait({task, abort}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        abort.cancel()
        if not task.done():
            task.cancel()
            await asyncio.wait({task})
    if task.cancelled():
        return ToolResult.error(f"Searching the web was aborted ({ctx.signal.reason}).")
    failure = task.exception()
    if isinstance(failure, WebSearchError):
        ctx.logger.warning("web_search failed: %s", failure.detail)
        return ToolResult.error(failure.line, details={"error": failure.detail})
    if failure is not None:
        raise failure
    found: SearchResults = task.result()
    details: dict[str, Any] = {
        "provider": found.provider,
        "query": found.query,
        "recency": recency,
        "domains": wanted,
        "results": [hit.as_json() for hit in found.results],
    }
    if found.answer:
        details["answer"] = found.answer
    if found.notes:
        details["notes"] = list(found.notes)
    if not found.results:
        return ToolResult(content=_empty(found, recency, wanted), details=details)
    return ToolResult(content=format_results(found), details=details)
