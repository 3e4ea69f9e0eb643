"""``compact_json``: ``json.dumps(value, ensure_ascii=False, separators=(",", ":"))``,
without what ``json.dumps`` does around the encoding on every call.

``json.dumps`` builds a ``JSONEncoder``, then ``encode`` builds the C encoder for it and
steps through ``iterencode``: three layers of Python for every message the gateway
writes. Here the C encoder is built once per thread (its cycle markers are its own) and
called directly: the same text, the same errors (``TypeError`` for a value JSON has no
spelling for, ``ValueError`` for a cycle).
"""

from __future__ import annotations

import json
import threading
from typing import Any

__all__ = ["compact_json"]

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))  # json.dumps's
_make_encoder = getattr(json.encoder, "c_make_encoder", None)
_local = threading.local()


def compact_json(value: Any) -> str:
    """``json.dumps(value, ensure_ascii=False, separators=(",", ":"))``."""
    encoder = _local.__dict__.get("encoder")
    if encoder is None:
        if _make_encoder is None:  # pragma: no cover - CPython always has the C encoder
            return _ENCODER.encode(value)
        encoder = _local.encoder = _make_encoder(
            {}, _ENCODER.default, json.encoder.encode_basestring, None, ":", ",", False, False, True
        )
    try:
        return "".join(encoder(value, 0))
    except BaseException:
        _local.encoder = None  # its cycle markers may be left half-filled
        raise
