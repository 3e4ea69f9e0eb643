"""The HTTP/1.1 protocol ``tooldeck serve --http`` runs under uvicorn: its parser, and its
writes sent together.

uvicorn parses with ``httptools`` (C, the ``mcp`` extra brings it) when it is installed,
else with its pure-Python ``h11``; :func:`http_protocol` is that protocol with one change:
what it writes to a connection in one turn of the event loop goes out as one ``send``.
uvicorn writes a response's headers and its body separately, each at once: two system
calls, two TCP segments, and a client woken for the headers alone. Here the writes of a
turn are joined and sent by a callback of the same loop, scheduled by the first of them
(an SSE event written later is sent in its own turn, as before); a connection's close
sends what is pending first.
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["Coalesced", "http_protocol"]


class Coalesced:
    """``transport`` whose writes of one loop turn are sent as one (see the module
    docstring); everything else is the transport's own."""

    __slots__ = ("_loop", "_pending", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []

    def write(self, data: bytes) -> None:
        if not data:
            return
        if not self._pending:
            self._loop.call_soon(self._flush)
        self._pending.append(data)

    def _flush(self) -> None:
        pending = self._pending
        if not pending:
            return
        self._pending = []
        if not self._transport.is_closing():
            self._transport.write(pending[0] if len(pending) == 1 else b"".join(pending))

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + sum(map(len, self._pending))

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def http_protocol() -> type[asyncio.Protocol]:
    """uvicorn's protocol class (``Config(http=...)``): ``httptools``' if it imports, else
    ``h11``'s, its transport :class:`Coalesced`."""
    base: type[Any]
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as base
    except ImportError:  # httptools not installed: the pure-Python parser
        from uvicorn.protocols.http.h11_impl import H11Protocol as base

    class Protocol(base):  # type: ignore[misc]
        def connection_made(self, transport: asyncio.Transport) -> None:
            coalesced = Coalesced(transport, asyncio.get_running_loop())
            super().connection_made(coalesced)

    Protocol.__name__ = Protocol.__qualname__ = f"Coalesced{base.__name__}"
    return Protocol
