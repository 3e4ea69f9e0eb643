"""Embedders for semantic tool search: the protocol, choosing one, and the on-disk cache.

An :class:`Embedder` turns texts into a matrix (one row per text, float32 or int8); its
``name`` and ``version`` say which vectors it makes, so cached vectors are reused only for
the same model. Three ship with tooldeck, each behind its own extra:

- :class:`~tooldeck.search.wordllama.WordLlamaEmbedder` (``tooldeck[semantic]``): a
  static token table, no network, tens of microseconds a query; the default when
  installed;
- :class:`~tooldeck.search.onnx.OnnxEmbedder` (``tooldeck[onnx]``): any sentence
  encoder exported to ONNX, loaded with its ``tokenizer.json`` from a local folder;
- :class:`~tooldeck.search.fastembed.FastEmbedEmbedder` (``tooldeck[fastembed]``):
  fastembed's models (bge-small, MiniLM, ...), downloaded on first use.

Tool vectors are cached on disk (:class:`VectorCache`), one file per embedder and
version, one row per tool text keyed by the text's SHA-256: a restart does not re-embed,
and a changed description re-embeds only that tool. Nothing here imports numpy until an
embedder is actually used.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import tempfile
import threading
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from .._extras import needs_extra
from ..errors import MissingExtra

__all__ = [
    "SemanticSetting",
    "default_cache_dir",
    "default_embedder",
    "resolve_embedder",
]

_log = logging.getLogger("tooldeck.search")

#: rows per matrix-vector block: small enough that OpenBLAS runs it on one thread
#: (threading a product this small costs far more than it saves on a busy machine)
_BLOCK_ELEMENTS = 1 << 18
#: a cache file keeps at most this many vectors (the newest win)
MAX_CACHED_VECTORS = 100_000


@runtime_checkable
class Embedder(Protocol):
    """Texts -> vectors. ``name`` and ``version`` identify the vectors it makes (a new
    model file or dimension must change one of them)."""

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> str: ...

    def embed(self, texts: Sequence[str]) -> Any:
        """A ``(len(texts), dim)`` numpy array, float32 or int8, one row per text."""
        ...


SemanticSetting = bool | Literal["auto", "quality"] | Embedder

_default_lock = threading.Lock()
_default: Embedder | None = None
_default_reason: str | None = None
_quality: Embedder | None = None


def default_embedder() -> tuple[Embedder | None, str | None]:
    """The process-wide default embedder (WordLlama, loaded once), or ``(None, why)``."""
    global _default, _default_reason
    with _default_lock:
        if _default is None and _default_reason is None:
            from .wordllama import WordLlamaEmbedder

            try:
                _default = WordLlamaEmbedder.load()
            except MissingExtra as exc:  # the semantic extra is not installed
                _default_reason = str(exc)
            except (ImportError, OSError, KeyError, ValueError) as exc:
                _default_reason = (
                    "semantic tool search needs the optional package 'wordllama' "
                    f"(pip install 'tooldeck[semantic]'): {type(exc).__name__}: {exc}"
                )
        return _default, _default_reason


def quality_embedder() -> Embedder:
    """The quality mode's encoder (MiniLM from ``tooldeck[quality]``, loaded once per
    process); :class:`~tooldeck.errors.MissingExtra` when the extra is not installed."""
    global _quality
    with _default_lock:
        if _quality is None:
            from .minilm import load

            _quality = load()
        return _quality


def resolve_embedder(semantic: SemanticSetting) -> Embedder | None:
    """The embedder ``semantic`` asks for: ``False`` none, ``"auto"`` the default when
    installed (logged at debug level when not), ``True`` the default (a warning when
    missing), ``"quality"`` the quality mode's encoder (an error when missing), or an
    :class:`Embedder` itself."""
    if semantic is False:
        return None
    if semantic == "quality":
        return quality_embedder()
    if semantic is True or semantic == "auto":
        embedder, reason = default_embedder()
        if embedder is None:
            level = logging.WARNING if semantic is True else logging.DEBUG
            _log.log(level, "%s; ranking tools with BM25F alone", reason)
        return embedder
    if isinstance(semantic, Embedder):
        return semantic
    raise ValueError(
        f"semantic must be True, False, 'auto', 'quality' or an Embedder, not {semantic!r}"
    )


def default_cache_dir() -> Path:
    """``$TOOLDECK_CACHE_DIR``, else ``$XDG_CACHE_HOME/tooldeck``, else
    ``~/.cache/tooldeck``; vectors go in its ``embeddings`` folder."""
    explicit = os.environ.get("TOOLDECK_CACHE_DIR")
    if explicit:
        return Path(explicit) / "embeddings"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tooldeck" / "embeddings"


def _np() -> Any:
    with needs_extra("semantic"):  # an embedder is loaded: its extra brought numpy
        import numpy

    return numpy


def unit_rows(matrix: Any) -> Any:
    """``matrix`` as float32 with rows of unit length (zero rows stay zero)."""
    np = _np()
    out = np.asarray(matrix, dtype=np.float32)
    if out.ndim != 2:
        raise ValueError(f"an embedder must return a 2-D matrix, got shape {out.shape}")
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.divide(out, norms, out=out, where=norms > 0)
    return np.ascontiguousarray(out)


def similarities(matrix: Any, vector: Any) -> Any:
    """``matrix @ vector`` (cosines, for unit rows), in blocks OpenBLAS keeps on one
    thread."""
    np = _np()
    rows = matrix.shape[0]
    step = max(1, _BLOCK_ELEMENTS // max(1, matrix.shape[1]))
    if rows <= step:
        return matrix @ vector
    out = np.empty(rows, dtype=np.float32)
    for start in range(0, rows, step):
        np.matmul(matrix[start : start + step], vector, out=out[start : start + step])
    return out


def top(scores: Any, k: int) -> list[int]:
    """Indices of the ``k`` largest ``scores``, in no particular order."""
    n = int(scores.shape[0])
    if k >= n:
        return list(range(n))
    return [int(i) for i in _np().argpartition(scores, n - k)[n - k :]]


def embed_query(embedder: Embedder, text: str) -> Any:
    """The unit vector of one query: through the embedder's ``embed_queries`` when it has
    one (an encoder that embeds queries unlike passages, e.g. with e5's ``"query: "``),
    else its ``embed``."""
    queries = getattr(embedder, "embed_queries", None)
    matrix = queries([text]) if callable(queries) else embedder.embed([text])
    return unit_rows(matrix)[0]


def _text_key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


class VectorCache:
    """Tool vectors on disk: one ``.npz`` file per embedder name and version, holding
    SHA-256 keys of the texts and their unit vectors.

    A missing, unreadable or foreign file is a cache miss, never an error; writes go to a
    temporary file renamed into place under a file lock, so concurrent processes never
    see half a file and never lose each other's rows.
    """

    def __init__(self, directory: str | Path | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        #: what the last :meth:`vectors` call did: (distinct texts read from the cache,
        #: distinct texts embedded)
        self.last: tuple[int, int] = (0, 0)

    def path_for(self, embedder: Embedder) -> Path:
        ident = f"{embedder.name}\0{embedder.version}"
        slug = re.sub(r"[^A-Za-z0-9._-]+", "-", embedder.name).strip("-")[:60] or "embedder"
        digest = hashlib.sha256(ident.encode("utf-8")).hexdigest()[:16]
        return self.directory / f"{slug}-{digest}.npz"

    def _read(self, path: Path) -> tuple[Any, Any] | None:
        np = _np()
        try:
            with np.load(path, allow_pickle=False) as data:
                keys, vectors = data["keys"], data["vectors"]
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
            _log.debug("ignoring the unreadable embedding cache %s: %s", path, exc)
            return None
        if (
            keys.dtype != np.dtype("S32")
            or vectors.dtype != np.float32
            or vectors.ndim != 2
            or keys.shape != (vectors.shape[0],)
        ):
            _log.debug("ignoring the embedding cache %s: unexpected contents", path)
            return None
        return keys, vectors

    def vectors(self, embedder: Embedder, texts: Sequence[str]) -> Any:
        """Unit float32 vectors of ``texts``: cached rows reused, the rest embedded (and
        added to the cache)."""
        np = _np()
        path = self.path_for(embedder)
        keys = [_text_key(t) for t in texts]
        stored = self._read(path)
        index: dict[bytes, int] = {}
        if stored is not None:
            # numpy's "S32" drops a key's trailing zero bytes when read: pad them back
            # (else a text whose SHA-256 ends in 0x00 is embedded again on every build)
            index = {bytes(k).ljust(32, b"\0"): i for i, k in enumerate(stored[0])}
        missing = sorted({k: i for i, k in enumerate(keys) if k not in index}.values())
        fresh = unit_rows(embedder.embed([texts[i] for i in missing])) if missing else None
        dim = (
            fresh.shape[1] if fresh is not None else stored[1].shape[1] if stored is not None else 0
        )
        if stored is not None and fresh is not None and stored[1].shape[1] != dim:
            stored, index = None, {}  # a different dimension under the same name: start over
            missing = sorted({k: i for i, k in enumerate(keys)}.values())
            fresh = unit_rows(embedder.embed([texts[i] for i in missing]))
        out = np.zeros((len(texts), dim), dtype=np.float32)
        fresh_rows = {keys[i]: r for r, i in enumerate(missing)}
        for row, key in enumerate(keys):
            if key in fresh_rows:
                out[row] = fresh[fresh_rows[key]]  # type: ignore[index]
            else:
                out[row] = stored[1][index[key]]  # type: ignore[index]
        self.last = (len(set(keys)) - len(missing), len(missing))
        if fresh is not None:
            new_keys = np.array([keys[i] for i in missing], dtype="S32")
            self._write(path, new_keys, fresh)
        return out

    def _write(self, path: Path, new_keys: Any, new_vectors: Any) -> None:
        from filelock import FileLock, Timeout

        np = _np()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with FileLock(str(path) + ".lock", timeout=10):
                stored = self._read(path)  # another process may have added rows meanwhile
                if stored is not None and stored[1].shape[1] == new_vectors.shape[1]:
                    known = set(new_keys.tolist())
                    keep = [i for i, k in enumerate(stored[0].tolist()) if k not in known]
                    keys = np.concatenate([stored[0][keep], new_keys])
                    vectors = np.concatenate([stored[1][keep], new_vectors])
                else:
                    keys, vectors = new_keys, new_vectors
                keys, vectors = keys[-MAX_CACHED_VECTORS:], vectors[-MAX_CACHED_VECTORS:]
                fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".npz")
                try:
                    with os.fdopen(fd, "wb") as f:
                        np.savez(f, keys=keys, vectors=vectors)
                    os.replace(tmp, path)
                except BaseException:
                    Path(tmp).unlink(missing_ok=True)
                    raise
        except (OSError, Timeout) as exc:
            _log.debug("could not write the embedding cache %s: %s", path, exc)
