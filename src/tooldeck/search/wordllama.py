"""The default embedder: WordLlama's static token table, offline, no torch.

The model is WordLlama's ``l2_supercat`` (a token -> vector table distilled from Llama 2's
embeddings, MIT licence), read straight from the files the ``wordllama`` wheel ships
(``wordllama/weights/l2_supercat_256.safetensors``, 32,000 x 256 float16, and
``wordllama/tokenizers/l2_supercat_tokenizer_config.json``). ``wordllama`` itself is never
imported (its loader looks for the tokenizer in the wrong folder and then tries to
download it, and its import configures the root logger); only ``numpy`` and
``tokenizers``, two of its dependencies, are.

A text's vector is the mean of its tokens' vectors, truncated to ``dim`` dimensions (the
model is trained Matryoshka-style, so a prefix is a valid smaller model): a query costs
a tokenizer call and a small gather, tens of microseconds.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import json
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._extras import needs_extra

__all__ = ["DEFAULT_DIM", "PACKAGE"]

#: the PyPI package whose wheel carries the model files
PACKAGE = "wordllama"
#: dimensions kept (of 256), chosen on the tune queries (bench/RESULTS.md)
DEFAULT_DIM = 256
_WEIGHTS = ("weights", "l2_supercat_256.safetensors", "embedding.weight")
_TOKENIZER = ("tokenizers", "l2_supercat_tokenizer_config.json")


def package_dir(package: str) -> Path | None:
    """Where ``package`` is installed, found without running its ``__init__``."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def read_safetensors(path: Path, key: str, np: Any) -> Any:
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


class WordLlamaEmbedder:
    """Text -> the mean of its token vectors (rows are not normalised here: the index
    does that)."""

    def __init__(self, table: Any, tokenizer: Any, np: Any, *, version: str = "") -> None:
        self._np = np
        self.table = table  # (vocabulary, dim) float32
        self.dim = int(table.shape[1])
        self._tokenizer = tokenizer
        self._version = f"{version}-d{self.dim}"

    @property
    def name(self) -> str:
        return "wordllama/l2_supercat"

    @property
    def version(self) -> str:
        return self._version

    @classmethod
    def load(cls, dim: int = DEFAULT_DIM, *, package: str | None = None) -> WordLlamaEmbedder:
        """Read the table and tokenizer from the installed ``wordllama`` package
        (:class:`~tooldeck.errors.MissingExtra` when it is missing, OSError when its files
        are)."""
        if not 1 <= dim <= 256:
            raise ValueError(f"dim must be between 1 and 256, not {dim}")
        package = package or PACKAGE
        with needs_extra("semantic"):
            np = importlib.import_module("numpy")
            tokenizers = importlib.import_module("tokenizers")
            root = package_dir(package)
            if root is None:
                raise ModuleNotFoundError(f"no module named {package!r}", name=package)
        folder, filename, key = _WEIGHTS
        table = read_safetensors(root / folder / filename, key, np)
        table = np.ascontiguousarray(table[:, :dim], dtype=np.float32)
        tokenizer = tokenizers.Tokenizer.from_file(str(root.joinpath(*_TOKENIZER)))
        tokenizer.no_padding()
        tokenizer.no_truncation()
        try:
            version = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            version = "unknown"
        return cls(table, tokenizer, np, version=version)

    def embed(self, texts: Sequence[str]) -> Any:
        """A ``(len(texts), dim)`` float32 matrix: each row the mean of the text's token
        vectors (zeros for a text with no token)."""
        np = self._np
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if len(texts) == 1:  # a query: skip the batch machinery
            ids = self._tokenizer.encode(texts[0], add_special_tokens=False).ids
            if ids:
                out[0] = self.table[ids].mean(axis=0)
            return out
        encodings = self._tokenizer.encode_batch(list(texts), add_special_tokens=False)
        for row, encoding in enumerate(encodings):
            if encoding.ids:
                out[row] = self.table[encoding.ids].mean(axis=0)
        return out

    @property
    def memory_bytes(self) -> int:
        return int(self.table.nbytes)
