"""The ``recall_tool_result`` tool: page through a stored result by character offsets.

A page holds at most ``limit`` characters (default ``page_tokens * 4``) and at most
``page_tokens`` tokens (always under the guard together with its header line), ends at
a line break when it was cut for size, and its header gives the offset of the next page;
concatenating the pages gives the stored text exactly. Every page of a stored result
that is not empty advances by at least one character, so following ``next_offset``
always reaches the end. Recall results carry ``details["no_offload"] = True`` and are
never offloaded again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from ..context import ToolContext
from ..errors import TooldeckError
from ..result import TextPart, ToolResult
from ..tools import Tool
from .summary import clip, example

if TYPE_CHECKING:
    from .store import OffloadStore

__all__ = ["RECALL_HEADER_TOKENS"]

RECALL_TOOL_NAME = "recall_tool_result"
NO_OFFLOAD = "no_offload"
"""A ``details`` key: a result whose details map it to ``True`` is never offloaded."""
RECALL_HEADER_TOKENS = 120  # reserved for a recall page's header line


class RecallError(TooldeckError):
    """A recall that cannot be served; the message is written for the model."""


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a stored result: ``text`` is characters ``offset`` to ``end``."""

    ref_id: str
    offset: int
    end: int
    total_chars: int
    text: str
    tokens: int

    @property
    def eof(self) -> bool:
        return self.end >= self.total_chars

    @property
    def next_offset(self) -> int | None:
        return None if self.eof else self.end


class RecallParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ref_id: str = Field(
        description="The ref id named in the notice of the stored result, "
        "e.g. ref_0123456789abcdef."
    )
    offset: int = Field(
        0,
        ge=0,
        description="Character offset to start reading at: 0 for the beginning, then the "
        "next_offset given at the top of the previous page.",
    )
    limit: int | None = Field(
        None,
        ge=1,
        description="At most this many characters (default: one page). A page is also "
        "cut to stay within the per-result token limit.",
    )


def recall_tool(store: OffloadStore) -> Tool:
    """The recall tool of ``store`` (reads only that store's session)."""
    description = (
        "Read a large tool result that was stored instead of being shown to you. Its "
        "notice names a ref id (like ref_0123456789abcdef). Returns one page of the "
        "stored text, starting at `offset` (a character offset; 0 is the beginning); "
        "the first line of every page gives the offset of the next page. Pages are at "
        f"most about {store.page_tokens:,} tokens. Only results of this session can be read."
    )

    def recall(params: RecallParams, ctx: ToolContext) -> ToolResult:
        return _recall(store, params, ctx)

    return Tool.from_model(
        RecallParams,
        name=RECALL_TOOL_NAME,
        description=description,
        execute=recall,
        read_only=True,
        describe_activity=lambda p: f"Reading stored result {getattr(p, 'ref_id', '')}",
    )


def _recall(store: OffloadStore, params: RecallParams, ctx: ToolContext) -> ToolResult:
    details: dict[str, Any] = {NO_OFFLOAD: True}
    try:
        if ctx.session_id and ctx.session_id != store.session_id:
            raise RecallError(
                f"There is no stored result {clip(params.ref_id, 40)} in this session."
            )
        page = store.read_page(params.ref_id, params.offset, params.limit)
        result = page_result(page, details)
        excess = store.tokens_of(result) - store.guard_tokens
        if excess > 0:  # a long header with a tight guard: take a shorter page
            budget = page.tokens - excess - 4
            page = store.read_page(params.ref_id, params.offset, params.limit, max_tokens=budget)
            result = page_result(page, details)
    except RecallError as exc:
        return ToolResult.error(str(exc), details=details)
    except OSError as exc:
        message = f"The stored result {clip(params.ref_id, 40)} cannot be read: {exc}."
        return ToolResult.error(message, details=details)
    return result


def page_result(page: Page, details: dict[str, Any]) -> ToolResult:
    if page.eof:
        where = "this is the end of it."
    else:
        where = f"next page: {example(page.ref_id, page.end)}."
    header = (
        f"[{page.ref_id}: characters {page.offset:,} to {page.end:,} of "
        f"{page.total_chars:,}; {where}]"
    )
    recall = {
        "ref_id": page.ref_id,
        "offset": page.offset,
        "end": page.end,
        "next_offset": page.next_offset,
        "total_chars": page.total_chars,
        "tokens": page.tokens,
    }
    return ToolResult(
        content=[TextPart(header), TextPart(page.text)], details={**details, "recall": recall}
    )
