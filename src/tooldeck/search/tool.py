"""The ``tool_search`` tool: a model searches the deferred tools, one query per need.

One ranked list cannot hold the tools of every sub-task of a request near its top (on
the benchmark, requests that need several tools lose most of their recall that way), so
the tool takes one query or a list of them, one short query per capability, searches
each, and returns the union: the hits grouped under the query that found them, a tool
found twice listed once. Near-duplicates from different services share one line
(``SearchConfig.alternatives``). The names it returns, alternatives included, are
reported to ``on_select(names)`` so the caller can load those tools for the next step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from ..tools import Tool
from .index import SearchHit, ToolIndex

__all__ = ["MAX_QUERIES", "MAX_SEARCH_RESULTS"]

MAX_SEARCH_RESULTS = 20
MAX_QUERIES = 10

Query = Annotated[str, StringConstraints(min_length=1, max_length=500)]


class ToolSearchParams(BaseModel):
    """Arguments of the ``tool_search`` tool."""

    model_config = ConfigDict(extra="forbid")

    query: Query | Annotated[list[Query], Field(min_length=1, max_length=MAX_QUERIES)] = Field(
        description=(
            "What you need to do, in a few words: the action and the thing it acts on "
            "(e.g. 'create a calendar event'), or a tool's exact name. When the task needs "
            "several tools, a list with one short query per tool "
            "(e.g. ['list workflow runs', 'read job logs', 'create issue'])."
        ),
    )
    limit: int = Field(
        default=5,
        ge=1,
        le=MAX_SEARCH_RESULTS,
        description="How many tools to return for each query, best first.",
    )

    @property
    def queries(self) -> list[str]:
        """The queries, in order, each once."""
        items = [self.query] if isinstance(self.query, str) else self.query
        return list(dict.fromkeys(items))


Groups = list[list[SearchHit]]


def run_queries(
    index: ToolIndex, queries: Sequence[str], limit: int, *, floor: bool = False
) -> list[tuple[str, Groups]]:
    """Each query with its hits, as groups of alternatives (one hit per group when the
    index does not group them); ``floor``: only hits above the relevance floor."""
    out: list[tuple[str, Groups]] = []
    for q in queries:
        if index.config.alternatives:
            out.append((q, index.search_groups(q, limit, floor=floor)))
        else:
            out.append((q, [[h] for h in index.search(q, limit, floor=floor)]))
    return out


def selected_names(results: Sequence[tuple[str, Groups]]) -> list[str]:
    """Every tool the results name, alternatives included, in order, each once."""
    return list(dict.fromkeys(h.name for _, groups in results for g in groups for h in g))


def format_results(results: Sequence[tuple[str, Groups]], index: ToolIndex) -> str:
    lines: list[str] = []
    shown: set[str] = set()
    many = len(results) > 1
    for query, groups in results:
        if not groups:
            lines.append(
                f"No tools match {query!r}. Try other words: the action and the thing it "
                "acts on (e.g. 'send email', 'delete branch'), or the service's name."
            )
            continue
        if many:
            lines.append(f"For {query!r}:")
        else:
            lines.append(f"{len(groups)} tool(s) for {query!r}, now available to call:")
        for group in groups:
            head, others = group[0].name, [h.name for h in group[1:]]
            if head in shown:
                lines.append(f"- {head} (listed above)")
                continue
            shown.add(head)
            shown.update(others)
            summary = index.summary(head)
            line = f"- {head}: {summary}" if summary else f"- {head}"
            if others:
                line += f" (the same in other services: {', '.join(others)})"
            lines.append(line)
    if many and any(groups for _, groups in results):
        lines.insert(0, "Tools now available to call, by query:")
    return "\n".join(lines)


def tool_search_tool(
    index: ToolIndex,
    on_select: Callable[[list[str]], None] | None = None,
    *,
    name: str = "tool_search",
    description: str | None = None,
    floor: bool = False,
) -> Tool:
    """A ``tool_search`` :class:`Tool` over ``index``.

    Its arguments are ``query`` (a non-empty string, or a list of 1 to 10 of them, one
    per capability) and ``limit`` (1 to 20 per query, default 5). Its result lists the
    matching tools' names and one-line descriptions, best first, under the query that
    found them. When at least one tool matches, ``on_select(names)`` is called with all
    their names (alternatives included), in order, before the result is returned; the
    callback decides what loading them means (it is never called with an empty list).
    The tool is read-only and runs on the caller's thread, so the callback needs no
    locking. ``floor``: a query answers only the tools above the index's relevance floor
    (:meth:`ToolIndex.floor`: at least half the best hit's score), so ``limit`` is the
    most it answers, not the number.
    """
    text = description or (
        f"Search {len(index)} additional tools that are not loaded yet, by what you need "
        "to do. Search per capability: when the task needs several tools (e.g. find a "
        "file, then email it), pass a list with one short query per tool, like "
        "['search drive files', 'send email']. Returns the best matches' names and "
        "one-line descriptions; those tools become available to call on your next step. "
        "Search again with other words if none fits."
    )

    def execute(params: ToolSearchParams, ctx: Any) -> str:
        results = run_queries(index, params.queries, params.limit, floor=floor)
        names = selected_names(results)
        if names and on_select is not None:
            on_select(list(names))
        return format_results(results, index)

    def activity(p: ToolSearchParams) -> str:
        queries = p.queries
        if len(queries) == 1:
            return f"Searching tools for {queries[0]!r}"
        return f"Searching tools for {len(queries)} queries"

    return Tool.from_model(
        ToolSearchParams,
        name=name,
        description=text,
        execute=execute,
        read_only=True,
        run_sync_in_thread=False,
        describe_activity=activity,
    )
