"""Local tool search: rank a catalog of tools by what a model says it needs.

Local tool search is what makes deferred loading safe: a tool the model cannot find is a
tool it does not have. :class:`ToolIndex` indexes tools (:class:`~tooldeck.tools.Tool`
objects, or plain definitions) and ranks them for a free-text query with BM25F over their
fields (:mod:`.bm25f`, text analysis in :mod:`.text`, synonyms in :mod:`.synonyms`),
fused with the cosine of whole-text embeddings when an :class:`Embedder` is available
(:mod:`.fusion`; WordLlama's static table by default, :mod:`.embedding` for the protocol
and the on-disk vector cache). :func:`tool_search_tool` wraps an index in the
``tool_search`` tool the model calls, one query or one per sub-task (:mod:`.tool`).

The package's parts, each one concept:

- :mod:`.text`: words, stopwords, stemming, identifier splitting;
- :mod:`.synonyms`: the synonym table;
- :mod:`.docs`: :class:`ToolDoc`, the searchable text of a tool;
- :mod:`.config`: :class:`SearchConfig`, the ranking knobs;
- :mod:`.bm25f`: the lexical ranker;
- :mod:`.postings`: posting lists in flat arrays, terms and names in hashed arrays;
- :mod:`.topk`: the best ``k`` tools of a query, reading as little of the lists as it can;
- :mod:`.embedding`: the :class:`Embedder` protocol, the default one, the vector cache;
- :mod:`.wordllama`, :mod:`.onnx`, :mod:`.fastembed`: the three embedders (each behind
  an extra: ``semantic``, ``onnx``, ``fastembed``), imported only when used;
- :mod:`.fusion`: lexical + semantic scores into one ranking;
- :mod:`.alternatives`: near-duplicates from different services on one line;
- :mod:`.index`: :class:`ToolIndex`;
- :mod:`.tool`: the ``tool_search`` tool.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .config import SearchConfig
from .docs import ToolDoc, load_definitions
from .embedding import Embedder, VectorCache
from .index import SearchHit, ToolIndex
from .text import one_line, stem, tokenize
from .tool import ToolSearchParams, tool_search_tool

if TYPE_CHECKING:
    from .fastembed import FastEmbedEmbedder
    from .onnx import OnnxEmbedder
    from .wordllama import WordLlamaEmbedder

__all__ = [
    "Embedder",
    "FastEmbedEmbedder",
    "OnnxEmbedder",
    "SearchConfig",
    "SearchHit",
    "ToolDoc",
    "ToolIndex",
    "ToolSearchParams",
    "VectorCache",
    "WordLlamaEmbedder",
    "load_definitions",
    "one_line",
    "stem",
    "tokenize",
    "tool_search_tool",
]

_LAZY = {
    "FastEmbedEmbedder": ".fastembed",
    "OnnxEmbedder": ".onnx",
    "WordLlamaEmbedder": ".wordllama",
}


def __getattr__(name: str) -> Any:
    """The embedders are imported on first use: their modules need optional packages."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module, __name__), name)
