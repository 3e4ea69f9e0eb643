"""Encoders trained with an instruction prefix (e5: "query: " / "passage: ", bge's query
instruction) embed a query and a tool's text differently (issue 36, fifth round).

``OnnxEmbedder(query_prefix=..., text_prefix=...)``: tool texts get ``text_prefix``, the
query of a search gets ``query_prefix`` (through :func:`embedding.embed_query`, which the
index calls), and the prefixes are part of the vectors' version, so vectors cached
without them are not reused. Tested on the tiny word-level encoder of
``test_search_embedders`` (imported from it), whose vectors are computed by hand.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_search_embedders import mean_of, write_encoder
from tooldeck.search import OnnxEmbedder, ToolDoc, ToolIndex
from tooldeck.search.embedding import embed_query, unit_rows


def test_texts_and_queries_get_their_own_prefix(tmp_path: Path) -> None:
    folder = write_encoder(tmp_path / "m")
    embedder = OnnxEmbedder(folder, query_prefix="alpha ", text_prefix="beta ")
    assert np.allclose(embedder.embed(["send email"])[0], mean_of(["beta", "send", "email"]))
    want = unit_rows(mean_of(["alpha", "send", "email"])[None, :])[0]
    assert np.allclose(embed_query(embedder, "send email"), want, atol=1e-6)
    # without prefixes a query is embedded like any text
    plain = OnnxEmbedder(folder)
    want = unit_rows(mean_of(["send", "email"])[None, :])[0]
    assert np.allclose(embed_query(plain, "send email"), want, atol=1e-6)


def test_the_prefixes_are_part_of_the_version(tmp_path: Path) -> None:
    folder = write_encoder(tmp_path / "m")
    plain = OnnxEmbedder(folder).version
    assert OnnxEmbedder(folder, text_prefix="beta ").version != plain
    assert OnnxEmbedder(folder, query_prefix="alpha ").version != plain
    assert OnnxEmbedder(folder, query_prefix="alpha ").version == (
        OnnxEmbedder(folder, query_prefix="alpha ").version
    )


def test_an_index_searches_with_the_query_prefix(tmp_path: Path) -> None:
    """The prefix moves the query's vector, and so the fused score of a hit."""
    folder = write_encoder(tmp_path / "m")
    docs = [
        ToolDoc("mail__send", "send email message"),
        ToolDoc("files__delete", "delete file"),
    ]
    scores = []
    for prefix in ("", "gamma delta gamma "):
        embedder = OnnxEmbedder(folder, query_prefix=prefix)
        index = ToolIndex(docs, semantic=embedder, cache=tmp_path / "cache")
        scores.append(index.search("send email", 1)[0])
    assert scores[0].name == scores[1].name == "mail__send"
    assert scores[0].score != pytest.approx(scores[1].score)
