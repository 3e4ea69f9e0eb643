"""A response body read under a cap on its *decoded* size, however it is encoded.

A server chooses the ``Content-Encoding``, and a hostile one sends a compression bomb:
796 bytes of ``gzip, gzip`` that inflate to 384 MiB. httpx's own decoders inflate each
network chunk whole before a caller can count the bytes, so a cap applied after
``aiter_bytes`` comes too late. :func:`read_capped` reads the raw bytes and inflates
them itself, every layer in steps of at most :data:`STEP` bytes (zlib's ``max_length``),
and stops as soon as the cap is reached: memory stays within a few steps per layer
whatever the ratio, and the work within what the cap allows.

Decoded: ``gzip`` (``x-gzip``), ``deflate`` (zlib-wrapped or raw, as browsers accept),
``identity``, stacked up to :data:`MAX_LAYERS` deep; these are what
:data:`ACCEPT_ENCODING` asks for. Anything else (``br``, ``zstd``, ``compress``...) is not
guessed at: it raises :class:`httpx.DecodingError` with a one-line reason.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Sequence
from typing import Any

import httpx

__all__ = ["ACCEPT_ENCODING", "MAX_LAYERS", "STEP", "read_capped"]

ACCEPT_ENCODING = "gzip, deflate"  # what read_capped decodes within bounds
MAX_LAYERS = 3  # content codings stacked on one body (real servers use one)
STEP = 64 * 1024  # bytes a layer inflates at a time, at most

_GZIP_WBITS = zlib.MAX_WBITS | 16
_NAMES = {"gzip": "gzip", "x-gzip": "gzip", "deflate": "deflate"}


class _Inflate:
    """One ``gzip`` or ``deflate`` layer, inflating at most :data:`STEP` bytes a step."""

    def __init__(self, coding: str) -> None:
        self.coding = coding
        self.inflater: Any = None  # for "deflate": chosen once its first two bytes are in
        self.head = b""
        if coding == "gzip":
            self.inflater = zlib.decompressobj(_GZIP_WBITS)

    def _choose(self, data: bytes) -> bytes:
        """``deflate`` comes zlib-wrapped (the standard) or raw (what many servers send,
        and browsers accept): a valid zlib header in the first two bytes decides."""
        self.head += data
        if len(self.head) < 2:
            return b""
        cmf, flg = self.head[0], self.head[1]
        wrapped = cmf & 0x0F == 8 and (cmf << 8 | flg) % 31 == 0
        self.inflater = zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)
        data, self.head = self.head, b""
        return data

    def feed(self, data: bytes) -> Iterator[bytes]:
        """What ``data`` inflates to, in pieces of at most :data:`STEP` bytes."""
        if self.inflater is None:
            data = self._choose(data)
            if not data:
                return
        while True:
            try:
                out = self.inflater.decompress(data, STEP)
            except zlib.error as exc:
                raise httpx.DecodingError(f"the {self.coding} body is corrupt ({exc})") from None
            data = self.inflater.unconsumed_tail
            if out:
                yield out
            # all input taken and the last step not full: nothing more is pending
            if not data and len(out) < STEP:
                return


def _layers(header_values: Sequence[str]) -> list[_Inflate]:
    """The decoders for a response's ``Content-Encoding``, the last applied first."""
    codings = [
        part.strip().lower() for value in header_values for part in value.split(",") if part.strip()
    ]
    codings = [c for c in codings if c != "identity"]
    unknown = [c for c in codings if c not in _NAMES]
    if unknown:
        raise httpx.DecodingError(
            f"the body is encoded with {unknown[0]!r}, which is not decoded "
            f"(only {ACCEPT_ENCODING} are, and only those are asked for)"
        )
    if len(codings) > MAX_LAYERS:
        raise httpx.DecodingError(
            f"the body is encoded {len(codings)} times over (Content-Encoding: "
            f"{', '.join(codings[:8])}{'...' if len(codings) > 8 else ''}); at most "
            f"{MAX_LAYERS} layers are decoded"
        )
    return [_Inflate(_NAMES[c]) for c in reversed(codings)]


def _through(layers: list[_Inflate], data: bytes) -> Iterator[bytes]:
    """``data`` (raw bytes) decoded through every layer, piece by piece."""
    if not layers:
        if data:
            yield data
        return
    for piece in layers[0].feed(data):
        yield from _through(layers[1:], piece)


async def read_capped(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    """``(body, capped)``: at most ``limit`` decoded bytes of a streamed ``response``.

    ``capped`` is true when the body decodes to more than ``limit`` bytes; the rest is
    neither decoded nor downloaded. Raises :class:`httpx.DecodingError` for a coding
    that is not decoded, more than :data:`MAX_LAYERS` layers or a corrupt body.
    """
    layers = _layers(response.headers.get_list("content-encoding"))
    body = bytearray()
    async for chunk in response.aiter_raw():
        for piece in _through(layers, chunk):
            room = limit - len(body)
            if len(piece) > room:
                body += piece[:room]
                return bytes(body), True
            body += piece
    return bytes(body), False
