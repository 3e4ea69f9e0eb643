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

Everything heavy happens once, in the constructor: each (term, tool) weight is
precomputed into compact posting lists (:mod:`.postings`); a query reads the lists of
its terms (a term and its synonyms as the best of their lists) and finds its best
tools from their heads, reading a whole list only when it has to (:mod:`.topk`).
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left
from collections.abc import Sequence
from itertools import chain, pairwise
from typing import NamedTuple

from .config import SearchConfig
from .docs import ToolDoc, schema_text
from .merged import MergedLists
from .postings import HashedKeys, Postings, Terms
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
from .topk import Addend, score, top

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
_CHUNK_CACHE = 200_000  # while building
_QUERY_CHUNK_CACHE = 4_096  # after
# a query's chunks kept with their terms' numbers and plain words (about 300 bytes each:
# 0.6 MB at most, what 4,096 chunks of terms alone took)
_QUERY_CHUNKS = 2_048
# synonym lists kept merged after a query (.merged): a quarter of the index's postings,
# at most this many (10 bytes each)
_MERGED_MOST = 32_768


class _Expansion(NamedTuple):
    members: tuple[tuple[Postings, int, float], ...]  # (store, term number, scale)
    single: bool  # one term's (its own list first, when the index has the term)


# a query chunk's index terms with their numbers (None: not a term of the index), and its
# words unstemmed, stopwords dropped (for the exact name words and joined words)
_Chunk = tuple[tuple[tuple[str, "int | None"], ...], tuple[str, ...]]


class Bm25fIndex:
    """The lexical side of :class:`~tooldeck.search.ToolIndex` (see the module)."""

    def __init__(
        self, docs: Sequence[ToolDoc], summaries: Sequence[str], config: SearchConfig
    ) -> None:
        self.config = config
        self._docs = tuple(docs)
        self._cache_bound = _CHUNK_CACHE
        self._build(summaries)

    @property
    def term_count(self) -> int:
        return len(self._term_ids)

    def top(self, query: str, k: int, *, exact_bonus: bool = False) -> list[tuple[int, float]]:
        """The ``k`` best (tool position, BM25F score) pairs for ``query``, best first
        (equal scores in catalog order); with ``exact_bonus`` the exact-name bonus is
        in the scores (see :meth:`exact_matches`)."""
        addends = self.addends(query)
        if exact_bonus and self.config.exact_name_bonus:
            exact = sorted(self.exact_matches(query))
            if exact:
                store = Postings(len(self._docs), const=self.config.exact_name_bonus)
                addends.append(Addend("=", ((store, store.add(exact), 1.0),)))
        return top(addends, k)

    def score(self, addends: Sequence[Addend], i: int) -> float:
        """Tool ``i``'s BM25F score for the query of ``addends`` (see :meth:`addends`)."""
        return score(addends, i)

    def exact_matches(self, query: str) -> set[int]:
        """Tools named by the whole query, or by a word of it written like an
        identifier (snake_case, kebab-case, dotted, camelCase)."""
        keys = {norm_name(query)}
        keys.update(norm_name(w) for w in IDENTIFIER.findall(query))
        keys.discard("")
        found: set[int] = set()
        for key in keys:
            for i in self._exact.get(key):
                if key in self._exact_keys(i):
                    found.add(i)
        return found

    def named(self, name: str) -> int | None:
        """The position of the tool named ``name`` (None: no such tool)."""
        for i in self._exact.get(norm_name(name)):
            if self._docs[i].name == name:
                return i
        return None

    def _exact_keys(self, i: int, empty: bool = False) -> set[str]:
        """The keys tool ``i`` is named by (its name, its name without the namespace);
        ``empty``: an empty key too (the name table finds every tool by its name)."""
        doc = self._docs[i]
        keys = {norm_name(doc.name)}
        if doc.namespace and "__" in doc.name:
            keys.add(norm_name(doc.name.split("__", 1)[1]))
        if not empty:
            keys.discard("")
        return keys

    def explain(self, query: str, i: int) -> list[tuple[str, float]]:
        """(term, contribution) pairs of tool ``i`` for ``query``, largest first."""
        out = [(a.label, w) for a in self.addends(query) if (w := a.weight(i))]
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
                    if len(cache) < self._cache_bound:
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
        del chunks, vocabulary
        self._chunk_cache: dict[tuple[bool, bool], dict[str, tuple[str, ...]]] = {
            (split, joined): {} for split in (False, True) for joined in (False, True)
        }
        docs = self._docs
        n_docs = len(docs)
        n = max(n_docs, 1)
        # field lengths first (for the averages), then each tool's terms again: holding
        # every tool's fields at once would take more than the finished index
        lengths = {f: 0 for f in _FIELDS}
        for d, s in zip(docs, summaries, strict=True):
            for f, terms in self._fields(d, s).items():
                lengths[f] += len(terms)
        avg = {f: (lengths[f] / n) or 1.0 for f in _FIELDS}
        # term -> [(doc, pseudo term frequency)]: BM25F's field-weighted, length-normalised
        # frequency, summed over the fields of one tool
        weight_b = [(f, weights[f], cfg.b / avg[f]) for f in _FIELDS if weights[f]]
        # term -> (tools, pseudo frequencies, name coverage shares)
        tf: dict[str, tuple[array[int], array[float], array[float]]] = {}
        one_minus_b = 1.0 - cfg.b
        coverage = cfg.name_coverage
        pairs: dict[tuple[str, str], list[int]] = {}
        code = "H" if n_docs <= 1 << 16 else "I"
        for i, (doc, summary) in enumerate(zip(docs, summaries, strict=True)):
            fields = self._fields(doc, summary)
            acc: dict[str, float] = {}
            get = acc.get
            for f, w, b_over_avg in weight_b:
                terms = fields[f]
                if terms:
                    norm = w / (one_minus_b + b_over_avg * len(terms))
                    for term in terms:
                        acc[term] = get(term, 0.0) + norm
            # the words a query has to cover to name this tool (no joined identifiers):
            # each name word the query has adds an equal share, however common the word
            # ("list", "delete"), so the query's verb picks among a resource's siblings
            name = self._terms(doc.name, split_compounds=True, joined=False)
            names = set(name)
            for term, x in acc.items():
                row = tf.get(term)
                if row is None:
                    row = tf[term] = (array(code), array("d"), array("d"))
                row[0].append(i)
                row[1].append(x)
                row[2].append(coverage / len(names) if coverage and term in names else 0.0)
            # adjacent term pairs of each name and first sentence -> tools (phrase bonus)
            if cfg.phrase_bonus:
                for seq in (name, fields["summary"]):
                    for pair in pairwise(seq):
                        having = pairs.setdefault(pair, [])
                        if not having or having[-1] != i:
                            having.append(i)
        k1 = cfg.k1
        terms_by_id = self._terms_sorted = sorted(tf)
        self._term_ids: dict[str, int] | Terms = {t: j for j, t in enumerate(terms_by_id)}
        self._idf = array("d")
        self._unseen_idf = math.log(1.0 + (n + 0.5) / 0.5)
        store = self._postings = Postings(n_docs)
        for term in terms_by_id:
            ids, xs, shares = tf.pop(term)
            df = len(ids)
            idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            self._idf.append(idf)
            scores = [idf * x / (k1 + x) for x in xs]
            for j, share in enumerate(shares):
                if share:
                    scores[j] += share
            store.add(ids, scores)
        store.compact()
        del tf
        self._exact = HashedKeys(
            ((key, i) for i in range(n_docs) for key in self._exact_keys(i, empty=True)), n_docs
        )
        ids_of = {t: j for j, t in enumerate(terms_by_id)}
        width = len(terms_by_id)
        keyed = sorted(
            (ids_of[a] * width + ids_of[b], tools)
            for (a, b), tools in pairs.items()
            if a in ids_of and b in ids_of
        )
        del pairs
        self._pair_keys = array("q", (key for key, _ in keyed))
        self._pairs = Postings(n_docs, const=cfg.phrase_bonus)
        for _, tools in keyed:
            self._pairs.add(tools)
        self._pairs.compact()
        del keyed
        # unstemmed name words -> tools; each tool's share of exact_word_coverage
        raw: dict[str, list[int]] = {}
        word_share = array("d", bytes(8 * n_docs))
        if cfg.exact_word_coverage:
            for i, doc in enumerate(docs):
                name_words = {x for x in words(doc.name, joined=False) if x not in STOPWORDS}
                for word in name_words:
                    raw.setdefault(word, []).append(i)
                if name_words:
                    word_share[i] = cfg.exact_word_coverage / len(name_words)
        self._raw = Postings(n_docs, const=1.0, per_tool=word_share)
        self._raw_words = {word: self._raw.add(tools) for word, tools in raw.items()}
        self._raw.compact()
        self._synonyms = self._synonym_table() if cfg.synonyms else {}
        self._expansions = self._expansion_table()
        del self._synonyms  # the expansions hold what queries need of it
        self._merged = MergedLists(n_docs, min(len(store.ids) // 4, _MERGED_MOST))
        self._term_ids = Terms(terms_by_id)  # the dict took five times the room
        del self._terms_sorted
        for cache in self._chunk_cache.values():
            cache.clear()  # the build's chunks; queries fill it again, up to a small bound
        self._cache_bound = _QUERY_CHUNK_CACHE
        #: a query's chunk -> its (term, term number) pairs and its plain words
        self._query_chunks: dict[str, _Chunk] = {}

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
            key: tuple(sorted(m for m in others if all(t in self._term_ids for t in m)))
            for key, others in table.items()
        }

    # -- querying -----------------------------------------------------------------------
    def _expansion_table(self) -> dict[str, _Expansion]:
        """Synonym matching, one entry per synonym key: the lists whose best weight counts.

        For a single term the entry holds the term's own list and its synonyms': a tool
        scores ``max(term, synonym_weight * best synonym)``, so it is credited once for
        the meaning, however many of its words match. For a two-term phrase ("pull
        request") the entry holds only the synonyms ("pr", "merge request"), added on top
        of the phrase's own terms.
        """
        weight = self.config.synonym_weight
        ids = {t: j for j, t in enumerate(self._terms_sorted)}
        idf = self._idf
        out: dict[str, _Expansion] = {}
        for key, members in self._synonyms.items():
            own = key.split()
            terms = frozenset(t for m in members for t in m if t not in own)
            # a synonym never counts as more specific than the word the query used
            own_idf = max(idf[ids[t]] if t in ids else self._unseen_idf for t in own)
            store = self._postings
            found = [
                (store, ids[t], weight * min(1.0, own_idf / idf[ids[t]])) for t in sorted(terms)
            ]
            single = len(own) == 1
            if single and own[0] in ids:
                found.insert(0, (store, ids[own[0]], 1.0))
            if found:
                out[key] = _Expansion(tuple(found), single)
        return out

    def _query_words(self, query: str) -> tuple[dict[str, int | None], list[str]]:
        """``query``'s index terms, each once, in order, with their numbers (what
        :meth:`_terms` gives, looked up); and its words unstemmed, stopwords dropped (what
        :func:`~.text.words` gives, ``joined=False``). Both are kept per chunk, up to a
        bound, so a word a query repeats is analysed once."""
        cache = self._query_chunks
        chunks = WORD.findall(query)
        found = list(map(cache.get, chunks))  # the common case: every chunk seen before
        if None in found:
            number = self._term_ids.get
            stemming = self.config.stemming
            for k, chunk in enumerate(chunks):
                if found[k] is None:
                    terms = chunk_terms(chunk, True, stemming)
                    plain = tuple(w for w in chunk_words(chunk, False) if w not in STOPWORDS)
                    entry = (tuple((t, number(t)) for t in terms), plain)
                    if len(cache) < _QUERY_CHUNKS:
                        cache[chunk] = entry
                    found[k] = entry
        entries: list[_Chunk] = found  # type: ignore[assignment]
        numbered = dict(chain.from_iterable(e[0] for e in entries))
        return numbered, list(chain.from_iterable(e[1] for e in entries))

    def addends(self, query: str) -> list[Addend]:
        """The addends of ``query``'s score (see :mod:`.topk`).

        Each query term counts once, with its synonyms folded in (see
        :meth:`_expansion_table`); each two-term phrase adds its own synonyms. A term
        already counted is never added again through a synonym.
        """
        numbered, plain = self._query_words(query)
        terms = list(numbered)[: self.config.max_query_terms]
        numbers = [numbered[t] for t in terms]
        number = self._term_ids.get
        store = self._postings
        expansions = self._expansions
        plan: list[Addend] = []
        # the terms counted, by number (a term the index has not has no list to add)
        counted = set(numbers)
        for t, j in zip(terms, numbers, strict=True):
            expansion = expansions.get(t)
            if expansion is not None and expansion.single:
                plan.append(Addend(f"{t}~", expansion.members, self._merged))
                counted.update([m[1] for m in expansion.members])
            elif j is not None:
                plan.append(Addend(t, ((store, j, 1.0),)))
        for a, b in pairwise(terms):
            expansion = expansions.get(f"{a} {b}")
            if expansion is not None:
                synonyms = [m[1] for m in expansion.members]
                if counted.isdisjoint(synonyms):
                    plan.append(Addend(f"{a} {b}~", expansion.members, self._merged))
                    counted.update(synonyms)
        # adjacent query terms adjacent in a name or first sentence; name words, unstemmed
        keys = self._pair_keys
        if len(keys):
            count = len(self._term_ids)
            for (a, ja), (b, jb) in pairwise(zip(terms, numbers, strict=True)):
                if ja is not None and jb is not None:
                    key = ja * count + jb
                    j = bisect_left(keys, key)
                    if j < len(keys) and keys[j] == key:
                        plan.append(Addend(f'"{a} {b}"', ((self._pairs, j, 1.0),)))
        raw = self._raw_words
        for w in dict.fromkeys(plain) if raw else ():
            found = raw.get(w)
            if found is not None:
                plan.append(Addend(f"'{w}'", ((self._raw, found, 1.0),)))
        # two words the catalog writes as one ("work log" -> worklog, "time zone")
        for a, b in pairwise(plain) if self.config.join_words else ():
            if a + b not in self._vocabulary:
                continue
            joined = self._stem(a + b)
            if (j := number(joined)) is not None and j not in counted:
                counted.add(j)
                plan.append(Addend(joined, ((store, j, 1.0),)))
        return plan
