"""fastembed's ONNX sentence encoders as an :class:`~tooldeck.search.embedding.Embedder`.

For users with network (``tooldeck[fastembed]``): fastembed downloads a model (default
``BAAI/bge-small-en-v1.5``) into its cache on first use and runs it with onnxruntime. A
model already on disk is loaded with ``model_path=`` and never downloaded (fastembed's
``specific_model_path``); a folder fastembed does not know by name is registered as a
custom model with mean pooling (``dim`` then required).
"""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._extras import needs_extra

__all__ = ["DEFAULT_MODEL"]

DEFAULT_MODEL = "BAAI/bge-small-en-v1.5"


class FastEmbedEmbedder:
    """``fastembed.TextEmbedding`` behind the Embedder protocol.

    ``model_name``: a model fastembed supports, or a new name for a local custom model.
    ``model_path``: a local folder with the model files (``model_file`` inside it and
    ``tokenizer.json``); nothing is downloaded. ``dim``: needed to register a custom
    model. ``cache_dir``, ``threads``, ``local_files_only``: passed to fastembed.
    """

    def __init__(
        self,
        model_name: str = DEFAULT_MODEL,
        *,
        model_path: str | Path | None = None,
        dim: int | None = None,
        model_file: str = "model.onnx",
        cache_dir: str | Path | None = None,
        threads: int | None = 1,
        local_files_only: bool = False,
        batch_size: int = 32,
    ) -> None:
        with needs_extra("fastembed"):
            self._np = importlib.import_module("numpy")
            module = importlib.import_module("fastembed")
        text_embedding = module.TextEmbedding
        kwargs: dict[str, Any] = {"threads": threads}
        if cache_dir is not None:
            kwargs["cache_dir"] = str(cache_dir)
        if local_files_only:
            kwargs["local_files_only"] = True
        if model_path is not None:
            kwargs["specific_model_path"] = str(model_path)
            known = {m["model"].lower() for m in text_embedding.list_supported_models()}
            if model_name.lower() not in known:
                if dim is None:
                    raise ValueError(f"a custom fastembed model ({model_name!r}) needs dim=")
                with needs_extra("fastembed"):
                    pooling = importlib.import_module("fastembed.common.model_description")
                text_embedding.add_custom_model(
                    model=model_name,
                    pooling=pooling.PoolingType.MEAN,
                    normalization=True,
                    sources=pooling.ModelSource(hf=model_name),
                    dim=dim,
                    model_file=model_file,
                )
        self._model = text_embedding(model_name=model_name, **kwargs)
        self.model_name = model_name
        self.batch_size = batch_size
        try:
            release = importlib.metadata.version("fastembed")
        except importlib.metadata.PackageNotFoundError:
            release = "unknown"
        self._version = f"fastembed-{release}"
        if model_path is not None:
            from .onnx import _file_digest

            weights = Path(model_path) / model_file
            if weights.is_file():
                self._version += f"-{_file_digest(weights)}"

    @property
    def name(self) -> str:
        return f"fastembed/{self.model_name}"

    @property
    def version(self) -> str:
        return self._version

    def embed(self, texts: Sequence[str]) -> Any:
        np = self._np
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        rows = list(self._model.embed(list(texts), batch_size=self.batch_size))
        return np.stack(rows).astype(np.float32, copy=False)
