"""Optional semantic side of tool search: a static embedding model, no torch, no network.

The model is WordLlama's ``l2_supercat`` (a token -> vector table distilled from
Llama 2's embeddings, MIT licence), read straight from the files the ``wordllama``
wheel ships (``wordllama/weights/l2_supercat_256.safetensors``, 32,000 x 256 float16,
and ``wordllama/tokenizers/l2_supercat_tokenizer_config.json``). ``wordllama`` itself is
never imported (its loader looks for the tokenizer in the wrong folder and then tries
to download it, and its import configures the root logger); only ``numpy`` and
``tokenizers``, two of its dependencies, are.

A text's vector is the mean of its tokens' vectors, truncated to :data:`DIM` dimensions
(the model is trained Matryoshka-style, so a prefix is a valid smaller model) and
normalised to unit length: a query costs a tokenizer call and a small gather, tens of
microseconds.

Everything here is imported lazily by :mod:`tooldeck.search`; when ``wordllama``,
``numpy`` or ``tokenizers`` is missing, :func:`load_embedder` says why and returns None.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import struct
import threading
from pathlib import Path
from typing import Any

__all__ = ["DIM", "PACKAGE", "StaticEmbedder", "load_embedder", "unavailable_reason"]

#: the PyPI package whose wheel carries the model files
PACKAGE = "wordllama"
#: dimensions kept (of 256): chosen on the tune queries, as good as 256 and 4x cheaper
DIM = 128
_WEIGHTS = ("weights", "l2_supercat_256.safetensors", "embedding.weight")
_TOKENIZER = ("tokenizers", "l2_supercat_tokenizer_config.json")
#: rows per matrix-vector block: small enough that OpenBLAS runs it on one thread
#: (threading a product this small costs far more than it saves on a busy machine)
_BLOCK_ELEMENTS = 1 << 18

_lock = threading.Lock()
_cached: StaticEmbedder | None = None
_reason: str | None = None


def _package_dir() -> Path | None:
    spec = importlib.util.find_spec(PACKAGE)  # locates the package without running it
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _read_safetensors(path: Path, key: str, np: Any) -> Any:
    """One tensor of a ``.safetensors`` file as a numpy array (the format is a JSON
    header and raw little-endian data)."""
    raw = path.read_bytes()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + size])
    info = header[key]
    dtypes = {"F16": np.float16, "F32": np.float32}
    start, end = info["data_offsets"]
    data = raw[8 + size + start : 8 + size + end]
    return np.frombuffer(data, dtype=dtypes[info["dtype"]]).reshape(info["shape"])


class StaticEmbedder:
    """Text -> unit vector: the mean of the text's token vectors."""

    def __init__(self, table: Any, tokenizer: Any, np: Any):
        self._np = np
        self.table = table  # (vocabulary, DIM) float32
        self.dim = int(table.shape[1])
        self._tokenizer = tokenizer
        self._zero = np.zeros(self.dim, dtype=np.float32)

    @classmethod
    def load(cls) -> StaticEmbedder:
        np = importlib.import_module("numpy")
        tokenizers = importlib.import_module("tokenizers")
        root = _package_dir()
        if root is None:
            raise ModuleNotFoundError(f"no module named {PACKAGE!r}")
        folder, filename, key = _WEIGHTS
        table = _read_safetensors(root / folder / filename, key, np)
        table = np.ascontiguousarray(table[:, :DIM], dtype=np.float32)
        tokenizer = tokenizers.Tokenizer.from_file(str(root.joinpath(*_TOKENIZER)))
        tokenizer.no_padding()
        tokenizer.no_truncation()
        return cls(table, tokenizer, np)

    def embed(self, text: str) -> Any:
        """The unit vector of ``text`` (all zeros when it has no token)."""
        ids = self._tokenizer.encode(text, add_special_tokens=False).ids
        if not ids:
            return self._zero
        vector = self.table[ids].mean(axis=0)
        norm = float(self._np.linalg.norm(vector))
        return vector / norm if norm else self._zero

    def embed_many(self, texts: list[str]) -> Any:
        """A (len(texts), dim) float32 matrix of unit vectors."""
        np = self._np
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        encodings = self._tokenizer.encode_batch(texts, add_special_tokens=False)
        for row, encoding in enumerate(encodings):
            if encoding.ids:
                vector = self.table[encoding.ids].mean(axis=0)
                norm = float(np.linalg.norm(vector))
                if norm:
                    out[row] = vector / norm
        return out

    def similarities(self, matrix: Any, vector: Any) -> Any:
        """``matrix @ vector`` (cosines, for unit rows), in blocks that OpenBLAS keeps on
        one thread."""
        np = self._np
        rows = matrix.shape[0]
        step = max(1, _BLOCK_ELEMENTS // max(1, matrix.shape[1]))
        if rows <= step:
            return matrix @ vector
        out = np.empty(rows, dtype=np.float32)
        for start in range(0, rows, step):
            np.matmul(matrix[start : start + step], vector, out=out[start : start + step])
        return out

    def top(self, scores: Any, k: int) -> list[int]:
        """Indices of the ``k`` largest ``scores``, in no particular order."""
        n = int(scores.shape[0])
        if k >= n:
            return list(range(n))
        return [int(i) for i in self._np.argpartition(scores, n - k)[n - k :]]

    @property
    def memory_bytes(self) -> int:
        return int(self.table.nbytes)


def load_embedder() -> StaticEmbedder | None:
    """The process-wide embedder (loaded once, about 0.2 s), or None when the optional
    packages are missing (:func:`unavailable_reason` says why)."""
    global _cached, _reason
    with _lock:
        if _cached is not None or _reason is not None:
            return _cached
        try:
            _cached = StaticEmbedder.load()
        except (ImportError, OSError, KeyError, ValueError) as exc:
            _reason = (
                f"semantic tool search needs the optional package {PACKAGE!r} "
                f"(pip install {PACKAGE}): {type(exc).__name__}: {exc}"
            )
        return _cached


def unavailable_reason() -> str | None:
    """Why :func:`load_embedder` returned None (None if it has not failed)."""
    return _reason
