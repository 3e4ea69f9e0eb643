"""BM25F over a tool's fields, with synonyms and name bonuses: the lexical ranker.

BM25F is hand-written on purpose: no maintained Python library has per-field weights
(rank_bm25, bm25s and Pyserini's Lucene BM25 all score one flat document), and a tool's
name matters far more than its parameters' descriptions. Each tool is a document with
weighted fields: name, first sentence, description, parameter names and descriptions
(nested ones and enum values included), namespace name and description.

On top of BM25F:

- each query term is matched together with its synonyms (:mod:`.synonyms`): a tool
  scores ``max(term, 0.7 x best synonym)``, and a synonym never counts as more specific
  (higher IDF) than the word the query used;
- a tool earns a bonus for each of its name's words the query has, shared out over the
  name, whatever the word's frequency: the query's verb ("list", "delete") picks among a
  resource's sibling tools;
- a smaller bonus for each name word the query has exactly, unstemmed: the word's
  number picks between siblings (``buckets`` for ``ListBuckets``);
- a flat bonus for each two adjacent query terms also adjacent in the tool's name or
  first sentence (``live stream``, ``access control``);
- a query that is, or contains as an identifier-like word, a tool's exact name ranks
  that tool first.

Everything heavy happens once, in the constructor: each (term, tool) weight and each
synonym-merged list is precomputed, so a query is a few list walks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import chain, pairwise
from typing import NamedTuple

from .config import SearchConfig
from .docs import ToolDoc, schema_text
from .synonyms import SYNONYM_GROUPS
from .text import (
    IDENTIFIER,
    STOPWORDS,
    WORD,
    chunk_terms,
    chunk_words,
    norm_name,
    segment,
    stem,
    words,
)

__all__ = ["Bm25fIndex"]

_FIELDS = (
    "name",
    "summary",
    "description",
    "param_names",
    "param_descriptions",
    "namespace",
    "ns_desc",
)
_CHUNK_CACHE = 200_000


class _Expansion(NamedTuple):
    terms: frozenset[str]
    ids: tuple[int, ...]
    values: tuple[float, ...]
    single: bool


class Bm25fIndex:
    """The lexical side of :class:`~tooldeck.search.ToolIndex` (see the module)."""

    def __init__(
        self, docs: Sequence[ToolDoc], summaries: Sequence[str], config: SearchConfig
    ) -> None:
        self.config = config
        self._docs = tuple(docs)
        self._build(summaries)

    @property
    def term_count(self) -> int:
        return len(self._postings)

    def scores(self, query: str) -> dict[int, float]:
        """Each matching tool's BM25F score for ``query`` (tool position -> score), the
        exact-name bonus not included (see :meth:`exact_matches`)."""
        plan = self._plan(query)
        scores: dict[int, float] = {}
        if plan:
            # start from the longest list (built in C), then add the others
            plan.sort(key=lambda p: -len(p[0]))
            scores = dict(zip(*plan[0], strict=True))
            get = scores.get
            for ids, values in plan[1:]:
                for i, v in zip(ids, values, strict=True):
                    scores[i] = get(i, 0.0) + v
        return scores

    def exact_matches(self, query: str) -> set[int]:
        """Tools named by the whole query, or by a word of it written like an
        identifier (snake_case, kebab-case, dotted, camelCase)."""
        keys = {norm_name(query)}
        keys.update(norm_name(w) for w in IDENTIFIER.findall(query))
        return {i for key in keys for i in self._exact.get(key, ())}

    def explain(self, query: str, i: int) -> list[tuple[str, float]]:
        """(term, contribution) pairs of tool ``i`` for ``query``, largest first."""
        labels = {id(p[0]): t for t, p in self._postings.items()}
        labels.update({id(e.ids): f"{k}~" for k, e in self._expansions.items()})
        labels.update({id(p[0]): f'"{a} {b}"' for (a, b), p in self._pairs.items()})
        labels.update({id(p[0]): f"'{w}'" for w, p in self._raw_words.items()})
        out: list[tuple[str, float]] = []
        for ids, values in self._plan(query):
            for j, v in zip(ids, values, strict=True):
                if j == i:
                    out.append((labels.get(id(ids), "?"), v))
                    break
        if self.config.exact_name_bonus and i in self.exact_matches(query):
            out.append((f"={self._docs[i].name}", self.config.exact_name_bonus))
        out.sort(key=lambda item: -item[1])
        return out

    def _stem(self, word: str) -> str:
        return stem(word) if self.config.stemming else word

    def _terms(self, text: str, *, split_compounds: bool = False, joined: bool = True) -> list[str]:
        """Index terms of ``text``; with ``split_compounds``, run-together identifiers
        that are not words of the catalog's prose are also split into such words."""
        cache = self._chunk_cache[split_compounds, joined]
        chunks = WORD.findall(text)
        found = list(map(cache.get, chunks))  # the common case: every chunk seen before
        if None in found:
            for k, chunk in enumerate(chunks):
                if found[k] is None:
                    terms = chunk_terms(chunk, joined, self.config.stemming)
                    if split_compounds:
                        terms += self._compound_terms(chunk)
                    if len(cache) < _CHUNK_CACHE:
                        cache[chunk] = terms
                    found[k] = terms
        return list(chain.from_iterable(found))  # type: ignore[arg-type]

    def _compound_terms(self, chunk: str) -> tuple[str, ...]:
        vocabulary = self._vocabulary
        out: list[str] = []
        for w in chunk_words(chunk, False):
            if len(w) >= 6 and w.isalpha() and w not in vocabulary:
                for part in segment(w, vocabulary.__contains__) or ():
                    out.append(stem(part) if self.config.stemming else part)
        return tuple(out)

    def _fields(self, doc: ToolDoc, summary: str) -> dict[str, list[str]]:
        param_names, param_texts = schema_text(doc.input_schema)
        ident = {"split_compounds": True}
        return {
            "name": self._terms(doc.name, **ident),
            "summary": self._terms(summary),
            "description": self._terms(doc.description),
            "param_names": self._terms(" ".join(param_names), **ident),
            "param_descriptions": self._terms(" ".join(param_texts)),
            "namespace": self._terms(doc.namespace or "", **ident),
            "ns_desc": self._terms(doc.namespace_description or ""),
        }

    def _build(self, summaries: Sequence[str]) -> None:
        cfg = self.config
        weights = {
            "name": cfg.name_weight,
            "summary": cfg.summary_weight,
            "description": cfg.description_weight,
            "param_names": cfg.param_name_weight,
            "param_descriptions": cfg.param_description_weight,
            "namespace": cfg.namespace_weight,
            "ns_desc": cfg.namespace_description_weight,
        }
        # words of the prose (descriptions): run-together identifiers are split into these
        chunks: set[str] = set()
        for d in self._docs:
            chunks.update(WORD.findall(d.description))
            chunks.update(WORD.findall(d.namespace_description or ""))
        vocabulary: set[str] = set()
        for chunk in chunks:
            vocabulary.update(chunk_words(chunk, False))
        self._vocabulary = frozenset(w for w in vocabulary if len(w) >= 3 and w.isalpha())
        self._chunk_cache: dict[tuple[bool, bool], dict[str, tuple[str, ...]]] = {
            (split, joined): {} for split in (False, True) for joined in (False, True)
        }
        per_doc = [self._fields(d, s) for d, s in zip(self._docs, summaries, strict=True)]
        n = max(len(per_doc), 1)
        avg = {f: (sum(len(p[f]) for p in per_doc) / n) or 1.0 for f in _FIELDS}
        # term -> [(doc, pseudo term frequency)]: BM25F's field-weighted, length-normalised
        # frequency, summed over the fields of one tool
        weight_b = [(f, weights[f], cfg.b / avg[f]) for f in _FIELDS if weights[f]]
        tf: dict[str, list[tuple[int, float]]] = {}
        name_terms: list[frozenset[str]] = []
        one_minus_b = 1.0 - cfg.b
        for i, fields in enumerate(per_doc):
            acc: dict[str, float] = {}
            get = acc.get
            for f, w, b_over_avg in weight_b:
                terms = fields[f]
                if terms:
                    norm = w / (one_minus_b + b_over_avg * len(terms))
                    for term in terms:
                        acc[term] = get(term, 0.0) + norm
            for term, x in acc.items():
                row = tf.get(term)
                if row is None:
                    tf[term] = [(i, x)]
                else:
                    row.append((i, x))
            # the words a query has to cover to name this tool (no joined identifiers)
            name_terms.append(
                frozenset(self._terms(self._docs[i].name, split_compounds=True, joined=False))
            )
        postings: dict[str, tuple[tuple[int, ...], tuple[float, ...]]] = {}
        k1 = cfg.k1
        coverage = cfg.name_coverage
        self._idf: dict[str, float] = {}
        self._unseen_idf = math.log(1.0 + (n + 0.5) / 0.5)
        for term, row in tf.items():
            df = len(row)
            idf = self._idf[term] = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            ids = tuple(i for i, _ in row)
            scores = [idf * x / (k1 + x) for _, x in row]
            if coverage:
                # reward covering the tool's name: each name word the query has adds an
                # equal share, however common the word ("list", "delete"), so the
                # query's verb picks among a resource's sibling tools
                for k, i in enumerate(ids):
                    names = name_terms[i]
                    if term in names:
                        scores[k] += coverage / len(names)
            postings[term] = (ids, tuple(scores))
        self._postings = postings
        exact: dict[str, list[int]] = {}
        for i, doc in enumerate(self._docs):
            keys = {norm_name(doc.name)}
            if doc.namespace and "__" in doc.name:
                keys.add(norm_name(doc.name.split("__", 1)[1]))
            for key in keys:
                if key:
                    exact.setdefault(key, []).append(i)
        self._exact = exact
        # adjacent term pairs of each name and first sentence -> tools (phrase bonus)
        pairs: dict[tuple[str, str], list[int]] = {}
        if cfg.phrase_bonus:
            for i, fields in enumerate(per_doc):
                name = self._terms(self._docs[i].name, split_compounds=True, joined=False)
                for seq in (name, fields["summary"]):
                    for pair in pairwise(seq):
                        having = pairs.setdefault(pair, [])
                        if not having or having[-1] != i:
                            having.append(i)
        self._pairs = {k: (tuple(v), (cfg.phrase_bonus,) * len(v)) for k, v in pairs.items()}
        # unstemmed name words -> (tools, each one's share of exact_word_coverage)
        raw: dict[str, dict[int, float]] = {}
        if cfg.exact_word_coverage:
            for i, doc in enumerate(self._docs):
                name_words = {x for x in words(doc.name, joined=False) if x not in STOPWORDS}
                for word in name_words:
                    raw.setdefault(word, {})[i] = cfg.exact_word_coverage / len(name_words)
        self._raw_words = {k: (tuple(d), tuple(d.values())) for k, d in raw.items()}
        self._synonyms = self._synonym_table() if cfg.synonyms else {}
        self._expansions = self._expansion_postings()

    def _synonym_table(self) -> dict[str, tuple[tuple[str, ...], ...]]:
        """term or two-term phrase -> the other members of its groups, as term tuples.

        A member may be a phrase ("pull request"): all its terms are then added. Members
        with a term the index has never seen are dropped.
        """
        table: dict[str, set[tuple[str, ...]]] = {}
        for group in SYNONYM_GROUPS:
            members = {tuple(self._terms(w)) for w in group}
            members.discard(())
            for m in members:
                table.setdefault(" ".join(m), set()).update(members - {m})
        return {
            key: tuple(sorted(m for m in others if all(t in self._postings for t in m)))
            for key, others in table.items()
        }

    # -- querying -----------------------------------------------------------------------
    def _expansion_postings(self) -> dict[str, _Expansion]:
        """Precomputed synonym matching, one list per synonym key.

        For a single term the list is the term's own posting merged with its synonyms':
        a tool scores ``max(term, synonym_weight * best synonym)``, so it is credited
        once for the meaning, however many of its words match. For a two-term phrase
        ("pull request") the list holds only the synonyms ("pr", "merge request"), added
        on top of the phrase's own terms.
        """
        weight = self.config.synonym_weight
        postings = self._postings
        idf = self._idf
        out: dict[str, _Expansion] = {}
        for key, members in self._synonyms.items():
            own = key.split()
            terms = frozenset(t for m in members for t in m if t not in own)
            # a synonym never counts as more specific than the word the query used
            own_idf = max(idf.get(t, self._unseen_idf) for t in own)
            merged: dict[int, float] = {}
            for t in terms:
                ids, values = postings[t]
                scale = weight * min(1.0, own_idf / idf[t])
                for i, v in zip(ids, values, strict=True):
                    v *= scale
                    if v > merged.get(i, 0.0):
                        merged[i] = v
            single = len(own) == 1
            if single and own[0] in postings:
                ids, values = postings[own[0]]
                for i, v in zip(ids, values, strict=True):
                    if v > merged.get(i, 0.0):
                        merged[i] = v
            if merged:
                out[key] = _Expansion(terms, tuple(merged), tuple(merged.values()), single)
        return out

    def _plan(self, query: str) -> list[tuple[tuple[int, ...], tuple[float, ...]]]:
        """The posting lists to add up for ``query``.

        Each query term counts once, with its synonyms folded in (see
        :meth:`_expansion_postings`); each two-term phrase adds its own synonyms. A term
        already counted is never added again through a synonym.
        """
        terms: list[str] = []
        for t in self._terms(query):
            if t not in terms:
                terms.append(t)
                if len(terms) >= self.config.max_query_terms:
                    break
        postings = self._postings
        expansions = self._expansions
        plan: list[tuple[tuple[int, ...], tuple[float, ...]]] = []
        counted = set(terms)
        for t in terms:
            expansion = expansions.get(t)
            if expansion is not None and expansion.single:
                plan.append((expansion.ids, expansion.values))
                counted |= expansion.terms
            elif t in postings:
                plan.append(postings[t])
        for a, b in pairwise(terms):
            expansion = expansions.get(f"{a} {b}")
            if expansion is not None and expansion.terms.isdisjoint(counted):
                plan.append((expansion.ids, expansion.values))
                counted |= expansion.terms
        # adjacent query terms adjacent in a name or first sentence; name words, unstemmed
        for pair in pairwise(terms) if self._pairs else ():
            found = self._pairs.get(pair)
            if found is not None:
                plan.append(found)
        plain = [w for w in words(query, joined=False) if w not in STOPWORDS]
        for w in dict.fromkeys(plain) if self._raw_words else ():
            found = self._raw_words.get(w)
            if found is not None:
                plan.append(found)
        # two words the catalog writes as one ("work log" -> worklog, "time zone")
        for a, b in pairwise(plain) if self.config.join_words else ():
            if a + b not in self._vocabulary:
                continue
            joined = self._stem(a + b)
            if joined not in counted and joined in postings:
                counted.add(joined)
                plan.append(postings[joined])
        return plan
