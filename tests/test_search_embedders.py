"""Embedders for tool search: loading each backend, and the on-disk vector cache.

The ONNX and fastembed backends are tested on a tiny encoder built here with onnx's
helper API (an embedding-table lookup, the shape of a real encoder's output) and a
word-level ``tokenizers`` tokenizer: nothing is downloaded, and the expected vectors can
be computed by hand.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tooldeck.search import Embedder, SearchConfig, ToolIndex, VectorCache
from tooldeck.search import embedding as embedding_module
from tooldeck.search import wordllama as wordllama_module
from tooldeck.search.embedding import resolve_embedder, unit_rows

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

WORDS = ["alpha", "beta", "gamma", "delta", "send", "email", "message", "file", "delete"]
DIM = 8


def _table() -> Any:
    rng = np.random.default_rng(7)
    return rng.standard_normal((len(WORDS) + 2, DIM)).astype(np.float32)


def write_tokenizer(folder: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0, "[PAD]": 1} | {w: i + 2 for i, w in enumerate(WORDS)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(folder / "tokenizer.json"))
    config = {"model_max_length": 64, "pad_token": "[PAD]"}
    (folder / "tokenizer_config.json").write_text(json.dumps(config))


def write_encoder(
    folder: Path, *, pooled: bool = False, token_types: bool = False, table: Any = None
) -> Path:
    """A tiny ONNX "encoder": each token's row of ``table`` (batch, tokens, DIM), or their
    plain mean (batch, DIM) with ``pooled``."""
    from onnx import TensorProto, helper, numpy_helper

    table = _table() if table is None else table
    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "tokens"]),
        helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "tokens"]),
    ]
    if token_types:
        inputs.append(
            helper.make_tensor_value_info("token_type_ids", TensorProto.INT64, ["batch", "tokens"])
        )
    nodes = [helper.make_node("Gather", ["table", "input_ids"], ["hidden"], axis=0)]
    if pooled:
        axes = numpy_helper.from_array(np.array([1], dtype=np.int64), "axes")
        nodes.append(helper.make_node("ReduceMean", ["hidden", "axes"], ["out"], keepdims=0))
        shape: list[Any] = ["batch", DIM]
        inits = [numpy_helper.from_array(table, "table"), axes]
    else:
        nodes.append(helper.make_node("Identity", ["hidden"], ["out"]))
        shape = ["batch", "tokens", DIM]
        inits = [numpy_helper.from_array(table, "table")]
    output = helper.make_tensor_value_info("out", TensorProto.FLOAT, shape)
    graph = helper.make_graph(nodes, "tiny", inputs, [output], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    onnx.checker.check_model(model)
    folder.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(folder / "model.onnx"))
    write_tokenizer(folder)
    return folder


def mean_of(words: Sequence[str], table: Any = None) -> Any:
    table = _table() if table is None else table
    return table[[WORDS.index(w) + 2 for w in words]].mean(axis=0)


# -- OnnxEmbedder ------------------------------------------------------------------------
def test_onnx_embedder_mean_pools_over_the_attention_mask(tmp_path: Path) -> None:
    from tooldeck.search import OnnxEmbedder

    embedder = OnnxEmbedder(write_encoder(tmp_path / "m"))
    assert isinstance(embedder, Embedder)
    assert embedder.name == "onnx/m" and len(embedder.version) == 24
    texts = ["alpha", "send email message", "beta gamma"]  # padded together in one batch
    out = embedder.embed(texts)
    assert out.shape == (3, DIM) and out.dtype == np.float32
    for row, text in zip(out, texts, strict=True):
        np.testing.assert_allclose(row, mean_of(text.split()), rtol=1e-5, atol=1e-6)
    # the same text alone, or in a batch of different lengths, gives the same vector
    np.testing.assert_allclose(embedder.embed(["beta gamma"])[0], out[2], rtol=1e-5, atol=1e-6)
    assert embedder.embed([]).shape[0] == 0


def test_onnx_embedder_pooled_output_token_types_and_small_batches(tmp_path: Path) -> None:
    from tooldeck.search import OnnxEmbedder

    folder = write_encoder(tmp_path / "pooled", pooled=True, token_types=True)
    embedder = OnnxEmbedder(folder / "model.onnx", batch_size=1)  # the file itself
    out = embedder.embed(["alpha beta", "delete"])
    np.testing.assert_allclose(out[0], mean_of(["alpha", "beta"]), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[1], mean_of(["delete"]), rtol=1e-5, atol=1e-6)


def test_onnx_embedder_says_what_is_missing(tmp_path: Path) -> None:
    from tooldeck.search import OnnxEmbedder

    with pytest.raises(FileNotFoundError, match=r"no \.onnx model"):
        OnnxEmbedder(tmp_path)
    folder = write_encoder(tmp_path / "m")
    (folder / "tokenizer.json").unlink()
    with pytest.raises(FileNotFoundError, match=r"tokenizer\.json"):
        OnnxEmbedder(folder)
    write_tokenizer(folder)
    (folder / "model.onnx").rename(folder / "a.onnx")
    write_encoder(tmp_path / "other")
    (tmp_path / "other" / "model.onnx").rename(folder / "b.onnx")
    with pytest.raises(ValueError, match="several"):
        OnnxEmbedder(folder)
    assert OnnxEmbedder(folder / "a.onnx").embed(["alpha"]).shape == (1, DIM)


def test_onnx_embedder_rejects_a_model_without_input_ids(tmp_path: Path) -> None:
    from onnx import TensorProto, helper

    from tooldeck.search import OnnxEmbedder

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    onnx.save(model, str(tmp_path / "model.onnx"))
    write_tokenizer(tmp_path)
    with pytest.raises(ValueError, match="input_ids"):
        OnnxEmbedder(tmp_path)


def test_onnx_version_follows_the_model_file(tmp_path: Path) -> None:
    from tooldeck.search import OnnxEmbedder

    folder = write_encoder(tmp_path / "m")
    first = OnnxEmbedder(folder).version
    assert OnnxEmbedder(folder).version == first
    write_encoder(folder, table=_table() * 2)
    assert OnnxEmbedder(folder).version != first


# -- FastEmbedEmbedder -------------------------------------------------------------------
def test_fastembed_loads_a_local_model_without_downloading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("fastembed")
    from tooldeck.search import FastEmbedEmbedder

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # any download attempt would fail
    folder = write_encoder(tmp_path / "tiny")
    embedder = FastEmbedEmbedder(
        "tooldeck-test/tiny-encoder",
        model_path=folder,
        dim=DIM,
        cache_dir=tmp_path / "fastembed-cache",
    )
    assert isinstance(embedder, Embedder)
    assert embedder.name == "fastembed/tooldeck-test/tiny-encoder"
    assert embedder.version.startswith("fastembed-")
    out = embedder.embed(["send email", "file"])
    expected = unit_rows(np.stack([mean_of(["send", "email"]), mean_of(["file"])]))
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)
    # registering the same custom name again (a second index) works
    again = FastEmbedEmbedder("tooldeck-test/tiny-encoder", model_path=folder, dim=DIM)
    np.testing.assert_allclose(again.embed(["file"])[0], expected[1], rtol=1e-4, atol=1e-5)
    assert embedder.embed([]).shape[0] == 0


def test_fastembed_custom_model_needs_its_dimension(tmp_path: Path) -> None:
    pytest.importorskip("fastembed")
    from tooldeck.search import FastEmbedEmbedder

    with pytest.raises(ValueError, match="dim"):
        FastEmbedEmbedder("tooldeck-test/no-dim", model_path=write_encoder(tmp_path / "m"))


# -- WordLlamaEmbedder (the default) -----------------------------------------------------
def test_wordllama_loads_from_the_installed_package() -> None:
    pytest.importorskip("wordllama")
    from tooldeck.search import WordLlamaEmbedder

    small = WordLlamaEmbedder.load(64)
    assert small.dim == 64 and small.name == "wordllama/l2_supercat"
    assert small.version.endswith("-d64") and "0.4" in small.version
    full = WordLlamaEmbedder.load()
    assert full.version != small.version  # another dimension is another cache entry
    out = small.embed(["send an email", "delete a file", ""])
    assert out.shape == (3, 64) and not out[2].any()  # no token: zeros
    np.testing.assert_allclose(small.embed(["delete a file"])[0], out[1], rtol=1e-6)
    np.testing.assert_allclose(full.embed(["delete a file"])[0][:64], out[1], rtol=1e-5)
    with pytest.raises(ValueError, match="dim"):
        WordLlamaEmbedder.load(0)


def test_missing_default_embedder_falls_back_to_bm25_and_says_why(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(wordllama_module, "PACKAGE", "no_such_package_for_tooldeck")
    monkeypatch.setattr(embedding_module, "_default", None)
    monkeypatch.setattr(embedding_module, "_default_reason", None)
    defs = [{"name": "send_email", "description": "Send an email"}]
    with caplog.at_level(logging.DEBUG, logger="tooldeck.search"):
        auto = ToolIndex.from_definitions(defs)
        asked = ToolIndex.from_definitions(defs, semantic=True)
    assert not auto.semantic and not asked.semantic
    records = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert records[0][0] == logging.DEBUG and "no_such_package_for_tooldeck" in records[0][1]
    assert records[1][0] == logging.WARNING and "BM25F alone" in records[1][1]
    assert "tooldeck[semantic]" in records[1][1]
    assert auto.search("send email") == asked.search("send email")
    with pytest.raises(ValueError, match="semantic"):
        resolve_embedder("yes")  # type: ignore[arg-type]


# -- the vector cache --------------------------------------------------------------------
class CountingEmbedder:
    """A real (if crude) embedder: character-trigram hashing; counts what it embeds."""

    def __init__(self, version: str = "1", dim: int = 16) -> None:
        self._version = version
        self.dim = dim
        self.embedded: list[str] = []
        self.lock = threading.Lock()

    @property
    def name(self) -> str:
        return "test/trigrams"

    @property
    def version(self) -> str:
        return self._version

    def embed(self, texts: Sequence[str]) -> Any:
        with self.lock:
            self.embedded.extend(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            t = f"  {text.lower()}  "
            for k in range(len(t) - 2):
                out[row, sum(map(ord, t[k : k + 3])) % self.dim] += 1.0
        return out


TOOLS = [
    {"name": "send_email", "description": "Send an email message to a recipient"},
    {"name": "delete_file", "description": "Delete a file from the disk"},
    {"name": "list_events", "description": "List the events of a calendar"},
]


def test_cache_hit_on_the_second_build(tmp_path: Path) -> None:
    embedder = CountingEmbedder()
    first = ToolIndex.from_definitions(TOOLS, semantic=embedder, cache=tmp_path)
    fields = len(embedder.embedded)
    assert first.cache_stats == (0, fields) and fields > 0
    assert list(tmp_path.glob("test-trigrams-*.npz"))
    second = ToolIndex.from_definitions(TOOLS, semantic=embedder, cache=tmp_path)
    assert len(embedder.embedded) == fields  # nothing embedded again
    assert second.cache_stats == (fields, 0)
    names = [t["name"] for t in TOOLS]
    np.testing.assert_array_equal(first.vector_of(names), second.vector_of(names))
    assert first.search("email a recipient") == second.search("email a recipient")


def test_changed_description_reembeds_only_that_tool(tmp_path: Path) -> None:
    embedder = CountingEmbedder()
    ToolIndex.from_definitions(TOOLS, semantic=embedder, cache=tmp_path)
    embedder.embedded.clear()
    changed = [dict(TOOLS[0]), *TOOLS[1:]]
    changed[0]["description"] = "Send a mail to someone. Attachments allowed."
    index = ToolIndex.from_definitions(changed, semantic=embedder, cache=tmp_path)
    assert embedder.embedded  # the new description was embedded ...
    assert all("Send a mail" in t or "Attachments" in t for t in embedder.embedded)
    hits, misses = index.cache_stats
    assert misses == len(embedder.embedded) and hits > 0  # ... and nothing else
    fresh = ToolIndex.from_definitions(changed, semantic=CountingEmbedder(), cache=False)
    np.testing.assert_allclose(
        index.vector_of(["send_email"]), fresh.vector_of(["send_email"]), rtol=1e-6
    )


def test_cache_is_per_embedder_version_and_text_mode(tmp_path: Path) -> None:
    ToolIndex.from_definitions(TOOLS, semantic=CountingEmbedder("1"), cache=tmp_path)
    newer = CountingEmbedder("2")
    index = ToolIndex.from_definitions(TOOLS, semantic=newer, cache=tmp_path)
    assert index.cache_stats[0] == 0 and newer.embedded  # another version: a miss
    assert len(list(tmp_path.glob("*.npz"))) == 2
    summary = CountingEmbedder("2")
    config = SearchConfig(semantic_text="summary")
    ToolIndex.from_definitions(TOOLS, semantic=summary, cache=tmp_path, config=config)
    assert summary.embedded  # other texts: embedded, added to the same file


def test_a_corrupt_or_foreign_cache_file_is_a_miss(tmp_path: Path) -> None:
    embedder = CountingEmbedder()
    cache = VectorCache(tmp_path)
    path = cache.path_for(embedder)
    for junk in (b"not a zip file", b"PK\x03\x04 truncated"):
        path.write_bytes(junk)
        embedder.embedded.clear()
        index = ToolIndex.from_definitions(TOOLS, semantic=embedder, cache=cache)
        assert index.cache_stats[0] == 0 and embedder.embedded
        assert ToolIndex.from_definitions(TOOLS, semantic=embedder, cache=cache).cache_stats[1] == 0
    np.savez(path, keys=np.array([1, 2, 3]), vectors=np.zeros((3, 16), dtype=np.float32))
    embedder.embedded.clear()
    assert ToolIndex.from_definitions(TOOLS, semantic=embedder, cache=cache).cache_stats[0] == 0
    with open(path, "wb") as f:  # an object array would need pickle: refused
        np.savez(f, keys=np.array([object()]), vectors=np.zeros((1, 16), dtype=np.float32))
    assert ToolIndex.from_definitions(TOOLS, semantic=embedder, cache=cache).cache_stats[0] == 0


def test_a_cache_that_cannot_be_written_still_ranks(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder should be")
    embedder = CountingEmbedder()
    index = ToolIndex.from_definitions(TOOLS, semantic=embedder, cache=blocker / "sub")
    assert index.semantic and index.search("delete a file")[0].name == "delete_file"


def test_cache_default_folder_follows_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLDECK_CACHE_DIR", str(tmp_path / "td"))
    assert VectorCache().directory == tmp_path / "td" / "embeddings"
    monkeypatch.delenv("TOOLDECK_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert VectorCache().directory == tmp_path / "xdg" / "tooldeck" / "embeddings"


def test_concurrent_writers_keep_every_row(tmp_path: Path) -> None:
    """Threads building indexes over different tools into one cache file: each one's rows
    survive (the file is merged under a lock, never half-written)."""
    embedder = CountingEmbedder()
    batches = [
        [{"name": f"tool_{b}_{k}", "description": f"does thing {b} {k}"} for k in range(20)]
        for b in range(6)
    ]
    errors: list[BaseException] = []

    def build(tools: list[dict[str, str]]) -> None:
        try:
            ToolIndex.from_definitions(tools, semantic=embedder, cache=tmp_path)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=build, args=(b,)) for b in batches]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    embedder.embedded.clear()
    everything = [t for b in batches for t in b]
    index = ToolIndex.from_definitions(everything, semantic=embedder, cache=tmp_path)
    assert index.cache_stats[1] == 0 and not embedder.embedded


def _build_in_process(folder: str, start: int) -> None:
    tools = [{"name": f"p{start}_{k}", "description": f"process tool {k}"} for k in range(30)]
    ToolIndex.from_definitions(tools, semantic=CountingEmbedder(), cache=folder)


def test_concurrent_processes_share_one_cache_file(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_build_in_process, args=(str(tmp_path), n)) for n in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    embedder = CountingEmbedder()
    tools = [
        {"name": f"p{n}_{k}", "description": f"process tool {k}"}
        for n in range(3)
        for k in range(30)
    ]
    index = ToolIndex.from_definitions(tools, semantic=embedder, cache=tmp_path)
    assert index.cache_stats[1] == 0


def test_a_custom_embedder_ranks_by_its_vectors(tmp_path: Path) -> None:
    index = ToolIndex.from_definitions(TOOLS, semantic=CountingEmbedder(), cache=False)
    assert index.semantic and "test/trigrams" in repr(index)
    assert index.cache_stats == (0, index.cache_stats[1])
    assert index.search("calendar events", 1)[0].name == "list_events"
    assert dict(index.explain("calendar events", "list_events"))["~cosine"] > 0.3


def test_an_embedder_returning_int8_is_normalised(tmp_path: Path) -> None:
    class Int8(CountingEmbedder):
        def embed(self, texts: Sequence[str]) -> Any:
            return np.clip(super().embed(texts) * 10, -127, 127).astype(np.int8)

    index = ToolIndex.from_definitions(TOOLS, semantic=Int8(), cache=tmp_path)
    vectors = index.vector_of([t["name"] for t in TOOLS])
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)


def test_an_embedder_returning_a_bad_shape_is_an_error() -> None:
    class Flat(CountingEmbedder):
        def embed(self, texts: Sequence[str]) -> Any:
            return np.zeros(len(texts), dtype=np.float32)

    with pytest.raises(ValueError, match="2-D"):
        ToolIndex.from_definitions(TOOLS, semantic=Flat(), cache=False)
