"""Distil a static token table from the quality mode's MiniLM (model2vec's recipe, no torch).

Every token of MiniLM's WordPiece vocabulary (special and ``[unused]`` tokens skipped)
goes through the int8 model alone (``[CLS] token [SEP]``), mean-pooled; the table is
reduced by PCA to ``--dim`` dimensions and stored as float16 in an ``.npz``. A text's
vector is then the mean of its tokens' rows, microseconds a query, like WordLlama.

Run: ``uv run python bench/distill_minilm.py --out /tmp/minilm-static.npz`` and
``--evaluate`` to score it on the tune queries as the embedder of the default mode.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

HERE = Path(__file__).resolve().parent


def distil(dim: int) -> tuple[list[str], Any]:
    from tooldeck.search import minilm

    embedder = minilm.load()
    tokenizer = embedder._tokenizer
    vocab = tokenizer.get_vocab()
    tokens = sorted(
        (t for t in vocab if not (t.startswith("[") and t.endswith("]"))), key=vocab.__getitem__
    )
    rows = []
    start = time.perf_counter()
    batch = 512
    for i in range(0, len(tokens), batch):
        chunk = tokens[i : i + batch]
        ids = np.array([[101, vocab[t], 102] for t in chunk], dtype=np.int64)
        feed = {"input_ids": ids}
        names = embedder._inputs
        if "attention_mask" in names:
            feed["attention_mask"] = np.ones_like(ids)
        if "token_type_ids" in names:
            feed["token_type_ids"] = np.zeros_like(ids)
        out = embedder._session.run(None, feed)[0]
        rows.append(out.mean(axis=1) if out.ndim == 3 else out)
    table = np.concatenate(rows).astype(np.float32)
    print(f"{len(tokens)} tokens embedded in {time.perf_counter() - start:.0f} s", flush=True)
    table -= table.mean(axis=0)
    _, _, vt = np.linalg.svd(table, full_matrices=False)
    reduced = table @ vt[:dim].T
    return tokens, reduced.astype(np.float16)


class StaticEmbedder:
    """Texts -> mean of their WordPiece tokens' rows of a distilled table."""

    def __init__(self, path: Path) -> None:
        from tooldeck.search import minilm

        data = np.load(path)
        tokens = [str(t) for t in data["tokens"]]
        self._table = data["table"].astype(np.float32)
        import tokenizers

        raw = gzip.decompress(minilm._TOKENIZER.read_bytes()).decode()
        self._tokenizer = tokenizers.Tokenizer.from_str(raw)
        vocab = self._tokenizer.get_vocab()
        self._row = np.full(max(vocab.values()) + 1, -1, dtype=np.int64)
        for r, t in enumerate(tokens):
            self._row[vocab[t]] = r
        self._version = path.name + str(path.stat().st_size)

    @property
    def name(self) -> str:
        return "minilm-static"

    @property
    def version(self) -> str:
        return self._version

    def embed(self, texts: Sequence[str]) -> Any:
        out = np.zeros((len(texts), self._table.shape[1]), dtype=np.float32)
        for i, enc in enumerate(
            self._tokenizer.encode_batch(list(texts), add_special_tokens=False)
        ):
            rows = self._row[np.array(enc.ids, dtype=np.int64)] if enc.ids else np.array([])
            rows = rows[rows >= 0]
            if len(rows):
                out[i] = self._table[rows].mean(axis=0)
        return out


def evaluate(path: Path) -> None:
    from bench_search import evaluate as score
    from bench_search import grouped
    from tooldeck.search import ToolIndex, load_definitions

    docs = load_definitions(HERE / "catalog" / "tools.json")
    queries = json.loads((HERE / "catalog" / "queries.json").read_text())
    tune = [q for q in queries if q["split"] == "tune"]
    for label, semantic in (("minilm-static", StaticEmbedder(path)), ("wordllama", "auto")):
        r = score(grouped(ToolIndex(docs, semantic=semantic, cache=False)), tune)
        o = r["overall"]
        print(label, {k: round(o[k], 3) for k in ("r1", "r5", "mrr")}, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("/tmp/minilm-static.npz"))
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--evaluate", action="store_true")
    args = parser.parse_args()
    if not args.out.exists():
        tokens, table = distil(args.dim)
        np.savez(args.out, tokens=np.array(tokens), table=table)
    if args.evaluate:
        evaluate(args.out)


if __name__ == "__main__":
    main()
