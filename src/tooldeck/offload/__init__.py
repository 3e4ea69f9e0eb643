"""Large tool results: offload to disk, recall by reference, and a hard guard.

One :class:`OffloadStore` per session:

    store = OffloadStore(home, session_id, events=bus)
    turn = TurnContext(session_id, home, status_sources={"offload": store.status_source})
    session = Session(
        model,
        tools=[my_tools, store],  # the store gives the recall tool, once needed
        session_id=session_id, turn=turn, events=bus, result_hooks=[store.hook],
    )

What :meth:`OffloadStore.hook` does to every executed call's result:

1. Its model-facing text (exactly :meth:`ToolResult.text`, frozen when the tool
   returned) is measured with
   :func:`tooldeck.tokens.estimate_tokens` (or the store's ``estimator``). Over
   ``threshold_tokens`` (default 15,000; ``0`` turns offloading off) the complete original
   is written to ``<home>/.tooldeck/tool-offload/<session>/<ref_id>.json`` and the model
   gets, instead of the text, a summary of at most ``summary_tokens`` (default 1,500):
   for JSON (a JSON part, or text holding JSON up to 2 M characters) its shape, keys,
   lengths and first items; for text its head and tail and how many lines and characters
   were left out; then the ref id and an example ``recall_tool_result`` call. Image parts
   stay. ``details`` keep the original details plus ``{"offloaded": {ref_id,
   original_tokens, summary_tokens}}`` (non-dict details move under ``"details"``), and a
   :class:`ToolResultOffloaded` event is emitted on ``events``.
2. Whatever comes out of step 1 goes through the guard: nothing the model receives from
   one call exceeds ``guard_tokens`` (default 25,000), also when offloading is off, failed,
   or the result belongs to another session (then it is not stored). The guard cuts only
   the model's view: it keeps the head and the tail, says in the text what was cut and
   whether the rest can be recalled, and records ``{"guarded": ...}`` in ``details``. The
   stored copy is never cut. Each image counts :data:`IMAGE_TOKENS`; images are kept while
   they fit in half the guard.

Large results are measured and written in a worker thread. What is stored is the frozen
text, so a recall gives back exactly what the model would have been sent.

The stored file is never partial: it is written to a hidden temporary file in the same
directory, flushed, fsynced and moved into place with ``os.replace``; a failed or killed
write leaves no ``ref_*.json`` (a stray hidden ``.ref_*.tmp`` from a killed process is
not a ref and is removed by :meth:`~OffloadStore.expire` after an hour). The file is one
JSON document: metadata (tool, call id, SHA-256 of the canonical JSON arguments, time,
is_error, sizes) on the first line, the parts (their spans, image data) on the second,
then the text as an array of 65,536-character strings, one per line, so that a page is
read without loading the rest (:mod:`tooldeck.offload.format`). :meth:`~OffloadStore.load`
rebuilds the whole result. Each session has its own directory, and no two session ids
share one.

Ref ids are made here (``ref_`` + 16 random hex digits), checked against
:data:`REF_PATTERN` before they come near a path, and looked up only in this session's
directory with symlinks refused, so a session reads only its own results; another
session's ref is "not found". :meth:`~OffloadStore.expire` removes this session's refs
older than ``ttl_seconds`` (default 4 h, by file time on the store's clock; a recall of an
expired ref removes it too); :meth:`~OffloadStore.cleanup` removes this session's
directory. Neither touches another session.

``recall_tool_result(ref_id, offset=0, limit=None)`` pages through the stored text by
**character offsets** into exactly the text the model would have seen. A page holds at
most ``limit`` characters (default ``page_tokens * 4``) and at most ``page_tokens`` tokens
(default 8,000, always under the guard together with its header line), ends at a line
break when it was cut for size, and its header gives the offset of the next page;
concatenating the pages gives the original text exactly, and every page advances, so
following ``next_offset`` always ends. Recall results carry
``details["no_offload"] = True`` and are never offloaded again. The store is a tool
source: it offers the recall tool whenever this session has stored results, so among a
session's tools it is callable from the step after the first offload.

The package, one concern per module: :mod:`~tooldeck.offload.view` (the measured view of
a frozen result), :mod:`~tooldeck.offload.summary` (what the model is shown instead),
:mod:`~tooldeck.offload.guard` (the hard guard), :mod:`~tooldeck.offload.format` (the
files), :mod:`~tooldeck.offload.recall` (the recall tool) and
:mod:`~tooldeck.offload.store` (:class:`OffloadStore`).
"""

from __future__ import annotations

from .format import REF_PATTERN
from .recall import NO_OFFLOAD, RECALL_TOOL_NAME, Page, RecallError
from .store import OffloadedRef, OffloadStore, ToolResultOffloaded
from .view import IMAGE_TOKENS

__all__ = [
    "IMAGE_TOKENS",
    "NO_OFFLOAD",
    "RECALL_TOOL_NAME",
    "REF_PATTERN",
    "OffloadStore",
    "OffloadedRef",
    "Page",
    "RecallError",
    "ToolResultOffloaded",
]
