"""Newline-delimited messages out of a byte stream read in chunks (JSON-RPC over stdio):
the gateway's stdin (:mod:`tooldeck.gateway._stdin`) and an upstream server's stdout
(:mod:`tooldeck.mcp.stdio_transport`)."""

from __future__ import annotations

__all__ = ["Lines"]


class Lines:
    """Bytes in, lines out (text, newline dropped); a line over ``limit`` bytes is
    ``too_long`` once, its bytes dropped up to its newline. Linear in the bytes fed
    (a long line is kept in pieces, joined once)."""

    def __init__(self, limit: int, too_long: str = "") -> None:
        self.limit = limit
        self.too_long = too_long
        self._parts: list[bytes] = []
        self._size = 0
        self._skipping = False  # inside a line over the limit

    def feed(self, chunk: bytes) -> list[str]:
        out: list[str] = []
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if not self._skipping:
                if self._size + len(piece) > self.limit:
                    out.append(self.too_long)
                    self._skipping = True
                    self._parts.clear()
                elif end >= 0:
                    self._parts.append(piece)
                    out.append(b"".join(self._parts).decode("utf-8", "replace"))
                    self._parts.clear()
                elif piece:
                    self._parts.append(piece)
                    self._size += len(piece)
            if end < 0:
                return out
            self._skipping = False
            self._size = 0
            start = end + 1

    def end(self) -> list[str]:
        """What is left when the input ends: the last line without its newline."""
        rest = b"".join(self._parts)
        self._parts.clear()
        return [] if self._skipping or not rest else [rest.decode("utf-8", "replace")]
