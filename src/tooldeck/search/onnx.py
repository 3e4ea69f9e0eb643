"""A sentence encoder exported to ONNX, run with onnxruntime from a local folder.

For users who have a model on disk (all-MiniLM-L6-v2, bge-small, e5-small, ... as
``model.onnx`` next to its ``tokenizer.json``, the layout Hugging Face's ONNX exports and
optimum write) and want a contextual encoder without torch and without a download at
run time. Needs ``onnxruntime``, ``tokenizers`` and ``numpy`` (``tooldeck[onnx]``).

The model's inputs are read from the graph (``input_ids``, ``attention_mask`` and
``token_type_ids`` when it has them); a ``(batch, tokens, dim)`` output is mean-pooled
over the attention mask, a ``(batch, dim)`` one is used as is. The version in the cache
key is the SHA-256 of the model file, so replacing the model re-embeds the tools.

Encoders trained with instruction prefixes take them as ``query_prefix`` and
``text_prefix``: e5 wants ``"query: "`` and ``"passage: "``, bge-small-en-v1.5 a query
instruction (``"Represent this sentence for searching relevant passages: "``) and none
for the passages. The query of a search is embedded through :meth:`OnnxEmbedder.embed_queries`.
"""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._extras import needs_extra

__all__ = []


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:24]


class OnnxEmbedder:
    """Texts -> pooled vectors of an ONNX encoder.

    ``path``: a folder with ``tokenizer.json`` and ``model.onnx`` (or ``onnx/model.onnx``,
    or the only ``*.onnx`` file there), or the ``.onnx`` file itself with
    ``tokenizer.json`` beside it; or, with ``tokenizer`` (a ``tokenizers.Tokenizer``),
    the ``.onnx`` file alone (``version``: what identifies its vectors, else the file's
    SHA-256). ``threads``: onnxruntime's intra-op threads (1 keeps a
    query from competing with the rest of the process). ``max_tokens``: longer texts are
    cut. ``batch_size``: texts per run when embedding many. ``text_prefix``: put before
    every tool text (:meth:`embed`), ``query_prefix`` before every query
    (:meth:`embed_queries`); both are part of :attr:`version`.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        threads: int = 1,
        max_tokens: int = 256,
        batch_size: int = 32,
        name: str | None = None,
        tokenizer: Any = None,
        version: str | None = None,
        query_prefix: str = "",
        text_prefix: str = "",
    ) -> None:
        with needs_extra("onnx"):
            np = importlib.import_module("numpy")
            ort = importlib.import_module("onnxruntime")
            tokenizers = importlib.import_module("tokenizers")
        self._np = np
        if tokenizer is None:
            model_file, tokenizer_file = self._locate(Path(path))
            tokenizer = tokenizers.Tokenizer.from_file(str(tokenizer_file))
        else:
            model_file = Path(path)
        self.model_file = model_file
        self._name = name or f"onnx/{model_file.parent.name or model_file.stem}"
        self._version = version or _file_digest(model_file)
        self.query_prefix = query_prefix
        self.text_prefix = text_prefix
        if query_prefix or text_prefix:
            tag = hashlib.sha256(f"{query_prefix}\0{text_prefix}".encode()).hexdigest()[:8]
            self._version = f"{self._version}-p{tag}"
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self._session = ort.InferenceSession(
            str(model_file), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._inputs = [i.name for i in self._session.get_inputs()]
        if "input_ids" not in self._inputs:
            raise ValueError(f"{model_file}: the model has no 'input_ids' input ({self._inputs})")
        self._tokenizer = tokenizer
        self._tokenizer.enable_truncation(max_tokens)
        self._tokenizer.no_padding()
        self.batch_size = max(1, batch_size)

    @staticmethod
    def _locate(path: Path) -> tuple[Path, Path]:
        if path.is_file():
            folder, model = path.parent, path
        else:
            folder = path
            candidates = [path / "model.onnx", path / "onnx" / "model.onnx"]
            found = [c for c in candidates if c.is_file()] or sorted(path.glob("*.onnx"))
            if not found:
                raise FileNotFoundError(f"no .onnx model in {path}")
            if len(found) > 1 and found[0] not in candidates:
                raise ValueError(f"several .onnx files in {path}: name one of them")
            model = found[0]
        tokenizer = folder / "tokenizer.json"
        if not tokenizer.is_file():
            tokenizer = model.parent / "tokenizer.json"
        if not tokenizer.is_file():
            raise FileNotFoundError(f"no tokenizer.json next to {model}")
        return model, tokenizer

    @property
    def name(self) -> str:
        return self._name

    @property
    def version(self) -> str:
        return self._version

    def embed(self, texts: Sequence[str]) -> Any:
        """A ``(len(texts), dim)`` float32 matrix, texts run in batches of similar length
        (each after ``text_prefix``)."""
        return self._embed([self.text_prefix + t for t in texts])

    def embed_queries(self, queries: Sequence[str]) -> Any:
        """Like :meth:`embed`, for search queries (each after ``query_prefix``)."""
        return self._embed([self.query_prefix + q for q in queries])

    def _embed(self, texts: Sequence[str]) -> Any:
        np = self._np
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        encodings = self._tokenizer.encode_batch(list(texts))
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        rows: list[Any] = [None] * len(texts)
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            pooled = self._run([encodings[i] for i in chunk])
            for k, i in enumerate(chunk):
                rows[i] = pooled[k]
        return np.stack(rows).astype(np.float32, copy=False)

    def _run(self, encodings: Sequence[Any]) -> Any:
        np = self._np
        width = max(1, max(len(e.ids) for e in encodings))
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        types = np.zeros_like(ids)
        for row, e in enumerate(encodings):
            n = len(e.ids)
            ids[row, :n] = e.ids
            mask[row, :n] = 1
            types[row, :n] = e.type_ids
        feed = {"input_ids": ids}
        if "attention_mask" in self._inputs:
            feed["attention_mask"] = mask
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = types
        output = self._session.run(None, feed)[0]
        if output.ndim == 2:
            return output
        if output.ndim != 3:
            raise ValueError(f"{self.model_file}: unexpected output shape {output.shape}")
        weights = mask[:, :, None].astype(np.float32)
        return (output * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1.0)
