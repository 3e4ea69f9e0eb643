"""``ToolIndex``: rank a catalog of tools for what a model says it needs.

The index holds the lexical ranker (:mod:`.bm25f`) and, when an embedder is available,
each tool's vector (:mod:`.embedding`, cached on disk); a query is scored by BM25F alone
or by the fusion of both (:mod:`.fusion`), and near-duplicate hits from different services
can be grouped (:mod:`.alternatives`).
"""

from __future__ import annotations

import heapq
from array import array
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

from ..tools import Tool
from .alternatives import group_alternatives, name_key
from .bm25f import Bm25fIndex
from .config import SearchConfig
from .docs import EMBEDDING_FIELDS, ToolDoc, embedding_fields, embedding_text, load_definitions
from .embedding import (
    Embedder,
    SemanticSetting,
    VectorCache,
    embed_query,
    resolve_embedder,
    similarities,
    unit_rows,
)
from .fusion import fuse
from .text import one_line, words
from .topk import top

__all__ = []

_MAX_QUERY_CHARS = 2000  # a longer query is cut: no need, and it bounds the time of a search

CacheSetting = VectorCache | str | Path | bool


class SearchHit(NamedTuple):
    """One ranked result: the tool's name and its score (higher is better)."""

    name: str
    score: float


class ToolIndex:
    """An index over tools; :meth:`search` ranks them for a free-text query.

    ``tools`` may mix :class:`Tool` objects, :class:`ToolDoc` and plain definition
    mappings. Names must be unique. The index is immutable once built.

    ``semantic``: also rank by meaning. ``"auto"`` (the default): with the default
    embedder (WordLlama, ``pip install 'tooldeck[semantic]'``) when it is installed, BM25F
    alone otherwise (logged at debug level); ``True``: the same, with a warning when it is
    missing; ``False``: BM25F alone; or any :class:`~tooldeck.search.Embedder`
    (:class:`~tooldeck.search.OnnxEmbedder`, :class:`~tooldeck.search.FastEmbedEmbedder`,
    your own). :attr:`semantic` tells whether the index got one. With an embedder a
    hit's score is the fused one (see :mod:`tooldeck.search.fusion`).

    ``cache``: where tool vectors are kept between runs: ``True`` (the default) the user
    cache folder (``$TOOLDECK_CACHE_DIR`` or ``~/.cache/tooldeck``), a folder, a
    :class:`~tooldeck.search.VectorCache`, or ``False`` to embed every time.
    """

    def __init__(
        self,
        tools: Iterable[Tool | ToolDoc | Mapping[str, Any]],
        *,
        config: SearchConfig | None = None,
        semantic: SemanticSetting = "auto",
        cache: CacheSetting = True,
    ) -> None:
        self.config = config or SearchConfig.for_semantic(semantic)
        docs: list[ToolDoc] = []
        seen: set[str] = set()
        for item in tools:
            if isinstance(item, ToolDoc):
                doc = item
            elif isinstance(item, Tool):
                doc = ToolDoc.from_tool(item)
            elif isinstance(item, Mapping):
                doc = ToolDoc.from_definition(item)
            else:
                raise TypeError(f"cannot index {item!r}: expected a Tool, ToolDoc or mapping")
            if doc.name in seen:
                raise ValueError(f"two tools named {doc.name!r} in one index")
            seen.add(doc.name)
            docs.append(doc)
        del seen
        self._docs = tuple(docs)
        del docs
        summaries = [one_line(d.description) for d in self._docs]
        self._lexical = Bm25fIndex(self._docs, summaries, self.config)
        del summaries
        self._alternative_keys = _alternative_keys(self._docs)
        self._embedder: Embedder | None = resolve_embedder(semantic)
        self._vectors: Any = None
        #: (distinct texts whose vectors came from the cache, distinct texts embedded)
        self.cache_stats: tuple[int, int] = (0, 0)
        if self._embedder is not None:
            self._vectors = self._embed_tools(self._embedder, cache)

    def _embed_tools(self, embedder: Embedder, cache: CacheSetting) -> Any:
        cfg = self.config
        if not self._docs:
            return None
        if cfg.semantic_text == "fields":
            per_doc = [embedding_fields(d, cfg.semantic_text_chars) for d in self._docs]
            texts = [t for fields in per_doc for t in fields]
        else:
            texts = [
                embedding_text(d, cfg.semantic_text, cfg.semantic_text_chars) for d in self._docs
            ]
        if cache is False:
            self.cache_stats = (0, len(set(texts)))
            vectors = unit_rows(embedder.embed(texts))
        else:
            store = (
                cache
                if isinstance(cache, VectorCache)
                else VectorCache(None if cache is True else cache)
            )
            vectors = store.vectors(embedder, texts)
            self.cache_stats = store.last
        if cfg.semantic_text != "fields":
            return vectors
        weights = cfg.semantic_field_weights
        if len(weights) != len(EMBEDDING_FIELDS):
            raise ValueError(f"semantic_field_weights needs {len(EMBEDDING_FIELDS)} weights")
        fields = vectors.reshape(len(self._docs), len(EMBEDDING_FIELDS), -1)
        mixed = sum(w * fields[:, k, :] for k, w in enumerate(weights) if w)
        return unit_rows(mixed)

    @classmethod
    def from_definitions(
        cls, definitions: Iterable[Mapping[str, Any]], **options: Any
    ) -> ToolIndex:
        return cls((ToolDoc.from_definition(d) for d in definitions), **options)

    @classmethod
    def from_file(cls, path: str | Path, **options: Any) -> ToolIndex:
        return cls(load_definitions(path), **options)

    # -- querying -----------------------------------------------------------------------
    def _cosines(self, query: str) -> Any:
        assert self._embedder is not None
        return similarities(self._vectors, embed_query(self._embedder, query))

    def _position(self, name: str) -> int:
        i = self._lexical.named(name)
        if i is None:
            raise KeyError(name)
        return i

    def _best(self, query: str, limit: int) -> list[tuple[int, float]]:
        """The ``limit`` best (tool, final score) pairs, best first (the exact-name bonus
        included); equal scores in catalog order."""
        lexical = self._lexical
        if self._vectors is None:
            return lexical.top(query, limit, exact_bonus=True)
        addends = lexical.addends(query)
        ranked = top(addends, self.config.semantic_pool)
        fused = fuse(ranked, partial(lexical.score, addends), self._cosines(query), self.config)
        bonus = self.config.exact_name_bonus
        for i in lexical.exact_matches(query) if bonus else ():
            fused[i] = fused.get(i, 0.0) + bonus
        best = heapq.nsmallest(limit, fused.items(), key=lambda item: (-item[1], item[0]))
        return [(i, s) for i, s in best if s > 0]

    def floor(self, best: float) -> float:
        """The least score a hit needs when the best hit scores ``best`` (see
        :attr:`SearchConfig.relative_floor`)."""
        cfg = self.config
        floor = cfg.relative_floor * best
        if self._vectors is not None and cfg.semantic_fusion == "sum":
            floor = max(floor, cfg.semantic_weight * cfg.semantic_min_similarity)
        return floor

    def _ranked(self, query: str, limit: int, floor: bool = False) -> list[tuple[int, float]]:
        if not isinstance(query, str):
            raise TypeError(f"query must be a string, not {type(query).__name__}")
        if limit <= 0 or not query.strip() or not self._docs:
            return []
        best = self._best(query[:_MAX_QUERY_CHARS], limit)
        least = self.floor(best[0][1]) if floor and best else 0.0
        return [(i, s) for i, s in best if s > 0 and s >= least]

    def search(self, query: str, limit: int = 5, *, floor: bool = False) -> list[SearchHit]:
        """The ``limit`` best tools for ``query``, best first. No match: an empty list.

        ``floor``: only the hits above the relevance floor (:meth:`floor`). Only the
        first 2,000 characters of ``query`` are read.
        """
        docs = self._docs
        ranked = self._ranked(query, limit, floor)
        return [SearchHit(docs[i].name, round(s, 4)) for i, s in ranked]

    def search_groups(
        self, query: str, limit: int = 5, *, floor: bool = False
    ) -> list[list[SearchHit]]:
        """Like :meth:`search`, but ``limit`` counts groups of near-duplicate tools from
        different namespaces (see :mod:`tooldeck.search.alternatives`): each group's first
        hit is the best, the rest are its alternatives."""
        if limit <= 0:
            return []
        ranked = self._ranked(query, max(limit * 3, limit + 10), floor)
        docs, keys = self._docs, self._alternative_keys
        tools = [i for i, _ in ranked]
        groups = group_alternatives(
            tools,
            [docs[i].namespace for i in tools],
            [keys[i] for i in tools],
            self._vectors,
            self.config.alternative_similarity,
            limit,
        )
        return [
            [SearchHit(docs[ranked[p][0]].name, round(ranked[p][1], 4)) for p in g] for g in groups
        ]

    def explain(self, query: str, name: str) -> list[tuple[str, float]]:
        """How ``name`` scores for ``query``: (term, contribution) pairs, largest first.

        These are the BM25F side's contributions; with an embedder the last pair is
        ``("~cosine", c)``, the cosine of the query's and the tool's embeddings.

        A term whose synonyms are folded in is shown as ``term~``; a phrase bonus as
        ``"a b"``; an unstemmed name word as ``'word'``; the exact-name bonus as
        ``=name``.
        """
        i = self._position(name)
        query = query[:_MAX_QUERY_CHARS]
        out = self._lexical.explain(query, i)
        if self._embedder is not None:
            vector = embed_query(self._embedder, query)
            out.append(("~cosine", round(float(self._vectors[i] @ vector), 4)))
        return out

    def _name_key(self, i: int) -> frozenset[str]:
        d = self._docs[i]
        return name_key(d.name, d.namespace, list(words(d.name.split("__", 1)[-1], joined=False)))

    # -- introspection ------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._docs)

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        try:
            self._position(name)
        except KeyError:
            return False
        return True

    def __repr__(self) -> str:
        mode = f", {self._embedder.name}" if self._embedder is not None else ""
        return f"ToolIndex({len(self._docs)} tools, {self.term_count} terms{mode})"

    @property
    def semantic(self) -> bool:
        """Whether this index also ranks by meaning (it has an embedder)."""
        return self._embedder is not None

    @property
    def embedder(self) -> Embedder | None:
        return self._embedder

    @property
    def term_count(self) -> int:
        """How many distinct terms the index holds."""
        return self._lexical.term_count

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self._docs)

    def doc(self, name: str) -> ToolDoc:
        """The indexed text of ``name`` (KeyError if unknown)."""
        return self._docs[self._position(name)]

    def summary(self, name: str) -> str:
        """The one-line description of ``name``."""
        return one_line(self._docs[self._position(name)].description)

    def vector_of(self, names: Sequence[str]) -> Any:
        """The tool vectors of ``names`` (None without an embedder)."""
        if self._vectors is None:
            return None
        return self._vectors[[self._position(n) for n in names]]


def _alternative_keys(docs: Sequence[ToolDoc]) -> array[int]:
    """Each tool's name key (:func:`~.alternatives.name_key`) as a number: two tools'
    numbers are equal when their keys are (2 bytes a tool, 4 past 65,536 tools)."""
    numbers: dict[frozenset[str], int] = {}
    out = array("H" if len(docs) <= 1 << 16 else "I")
    for d in docs:
        key = name_key(d.name, d.namespace, list(words(d.name.split("__", 1)[-1], joined=False)))
        out.append(numbers.setdefault(key, len(numbers)))
    return out
