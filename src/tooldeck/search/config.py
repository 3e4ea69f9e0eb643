"""Ranking knobs of tool search (:class:`SearchConfig`), one frozen record.

Every default was chosen on the benchmark's ``tune`` queries only (bench/RESULTS.md);
``bench/bench_search.py --set key=value`` overrides one for an experiment.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

__all__ = []

#: the fusion weight (``SearchConfig.semantic_weight``) of the quality mode, chosen for
#: MiniLM on the tune queries: 3.0 (whole catalog overall R@5 0.902; 1.5: 0.894, 5.0:
#: 0.896; against small catalogs, bench/tune_recall.py, the same or better than 1.5 to 10;
#: bench/RESULTS.md, issue 36)
QUALITY_WEIGHT = 3.0
#: the cosine a tool BM25F does not match needs to be a candidate in the quality mode
#: (``SearchConfig.semantic_min_similarity``; the default's 0.5 was set for WordLlama).
#: MiniLM puts a paraphrase and its tool at cosines of 0.3 to 0.5, which 0.5 kept out of
#: the ranking altogether. Chosen on tune (bench/tune_fusion.py, issue 36 fifth round):
#: overall R@5 against small catalogs 0.921 at 0.5, 0.921 at 0.4, 0.924 at 0.3, 0.926 at
#: 0.2; whole catalog 0.902 / 0.905 / 0.905 / 0.905; indirect wording (batches 6-7,
#: small catalogs) 0.852 / 0.852 / 0.860 / 0.860
QUALITY_MIN_SIMILARITY = 0.2


@dataclass(frozen=True, slots=True)
class SearchConfig:
    """Ranking knobs. The defaults were tuned on the benchmark's tuning queries only."""

    name_weight: float = 4.0
    #: the description's first sentence (counted again, on top of the description)
    summary_weight: float = 1.0
    description_weight: float = 1.0
    param_name_weight: float = 0.5
    param_description_weight: float = 0.25
    namespace_weight: float = 2.0
    namespace_description_weight: float = 0.3
    k1: float = 1.2
    b: float = 0.75
    #: weight of a synonym of a query term, relative to the term itself
    synonym_weight: float = 0.7
    #: score a query earns by naming all of a tool's name words (shared out per word)
    name_coverage: float = 4.0
    #: score added when the query (or one of its words) is exactly a tool's name
    exact_name_bonus: float = 100.0
    stemming: bool = True
    synonyms: bool = True
    #: also match two adjacent query words written as one word ("time zone" -> timezone)
    join_words: bool = True
    #: score added for each two adjacent query terms that are also adjacent in a tool's
    #: name or first sentence ("live stream", "access control")
    phrase_bonus: float = 0.5
    #: score a query earns by naming a tool's name words exactly, unstemmed (plural
    #: "buckets" for ListBuckets, singular "bucket" for DeleteBucket), shared out per word
    exact_word_coverage: float = 0.5
    #: at most this many distinct query terms are used (bounds the time of a query)
    max_query_terms: int = 48
    #: semantic re-ranking (only when the index has a model, see ``ToolIndex``): a
    #: candidate's score is its BM25F score divided by the best one's, plus this weight
    #: times the cosine of the query's and the tool's embeddings
    semantic_weight: float = 1.5
    #: candidates: the best this many by BM25F, plus the best this many by cosine
    semantic_pool: int = 50
    #: a tool found by cosine alone needs at least this cosine (keeps nonsense queries
    #: from matching anything; tune recall is the same anywhere from 0 to 0.7)
    semantic_min_similarity: float = 0.5
    #: a cosine under this counts as this ("sum" fusion): unrelated texts have cosines
    #: scattered near zero, and that scatter must not order tools BM25F ties (all the
    #: tools of a server a query matched only by the server's name; issue 36). Tune:
    #: 0.1-0.2 change nothing, 0.3 costs 0.002 R@5
    semantic_noise_floor: float = 0.2
    #: how BM25F and cosine are combined: "sum" (BM25F / best + weight x cosine) or
    #: "rrf" (reciprocal rank fusion: 1 / (k + BM25F rank) + weight / (k + cosine rank))
    semantic_fusion: Literal["sum", "rrf"] = "sum"
    #: "sum" fusion divides BM25F scores by the larger of the best one and this: with 0
    #: the best lexical match always counts 1 (worth 1 / ``semantic_weight`` of cosine),
    #: however weak; above 0 a weak lexical match (a common word, a server's name) counts
    #: for less than a strong one, so the cosine decides when BM25F has little evidence
    semantic_lexical_scale: float = 0.0
    #: RRF's k
    semantic_rrf_k: float = 20.0
    #: what a tool's embedding is made of: "fields" (each of name, first sentence,
    #: description, parameter names, parameter descriptions embedded on its own, the
    #: vectors mixed by ``semantic_field_weights``), or one text: "summary" (namespace,
    #: name words, first sentence), "description" (the whole description instead), or
    #: "full" (also the parameters' names, descriptions and enum values)
    semantic_text: Literal["fields", "summary", "description", "full"] = "fields"
    #: weights of the "fields" vectors, in the order of ``docs.EMBEDDING_FIELDS``
    semantic_field_weights: tuple[float, ...] = (1.5, 1.0, 0.25, 0.25, 0.5)
    #: an embedded text (or field) is cut after this many characters (0: never)
    semantic_text_chars: int = 600
    #: group near-duplicate hits from different namespaces (same name words, or tool
    #: vectors at least ``alternative_similarity`` apart) on one line of results
    alternatives: bool = True
    alternative_similarity: float = 0.85
    #: the relevance floor, when a search asks for it (``floor=True``; the gateway's
    #: ``tool_search`` does): a hit scoring under this fraction of the best hit's score
    #: is left out. With an embedder (``"sum"`` fusion) a hit also needs at least
    #: ``semantic_weight x semantic_min_similarity``: what a tool found by meaning alone
    #: scores at the least similarity the search admits
    relative_floor: float = 0.5

    @classmethod
    def for_semantic(cls, semantic: object) -> SearchConfig:
        """The knobs tuned for a search mode: ``"quality"`` (MiniLM) ranks with
        :data:`QUALITY_WEIGHT` and :data:`QUALITY_MIN_SIMILARITY`, every other mode with the
        defaults (tuned for WordLlama)."""
        config = cls()
        if isinstance(semantic, str) and semantic == "quality":
            return replace(
                config,
                semantic_weight=QUALITY_WEIGHT,
                semantic_min_similarity=QUALITY_MIN_SIMILARITY,
            )
        return config
