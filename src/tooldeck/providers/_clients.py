"""An SDK client per event loop, closed on the loop that opened it.

An ``AsyncOpenAI`` / ``AsyncAnthropic`` keeps a connection pool whose sockets belong to
the event loop they were opened on. Used from a second loop (a second ``asyncio.run``, a
``run_sync`` after an ``asyncio.run``), the pool fails with "Event loop is closed"; and a
client dropped while another loop runs closes itself from that loop in its ``__del__``,
which logs the same error as an unretrieved task. :class:`LoopClient` keeps one client
for the loop in use: on another loop it makes a fresh client and closes the old one
quietly (its loop is gone, so its sockets cannot be shut down cleanly and are released
when it is collected), and :meth:`LoopClient.aclose` closes the client on its own loop.
A closed client is replaced on the next use, so an adapter stays usable after
``aclose()``.

A client the caller passed in (``client=``) is used as it is and never closed here.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

__all__ = ["LoopClient"]


class _Closable(Protocol):
    def is_closed(self) -> bool: ...

    async def close(self) -> None: ...


C = TypeVar("C", bound=_Closable)


async def _quiet_close(client: _Closable) -> None:
    # Marks the client closed (so its __del__ does nothing); the sockets of a closed loop
    # cannot be shut down from here and raise "Event loop is closed" on the way.
    with contextlib.suppress(RuntimeError, OSError):
        await client.close()


class LoopClient(Generic[C]):
    """The adapter's SDK client for the running event loop (see the module docstring)."""

    def __init__(self, make: Callable[[], C] | None, given: C | None = None) -> None:
        if given is None and make is None:
            raise ValueError("LoopClient needs a client or a way to make one")
        self._make = make
        self.owned = given is None
        self.current: C = given if given is not None else make()  # type: ignore[misc]
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing: set[asyncio.Task[None]] = set()

    def get(self) -> C:
        """The client to use on the running loop (made afresh after a loop switch)."""
        loop = asyncio.get_running_loop()
        if not self.owned:
            return self.current
        if self.current.is_closed() or self._loop not in (None, loop):
            stale, stale_loop = self.current, self._loop
            assert self._make is not None
            self.current = self._make()
            if stale_loop is not None and stale_loop is not loop:
                self._retire(stale, stale_loop, loop)
        self._loop = loop
        return self.current

    def _retire(
        self, stale: C, stale_loop: asyncio.AbstractEventLoop, loop: asyncio.AbstractEventLoop
    ) -> None:
        if stale.is_closed():
            return
        if stale_loop.is_running() and not stale_loop.is_closed():
            # still serving another thread: close it there, never from this thread
            stale_loop.call_soon_threadsafe(lambda: stale_loop.create_task(_quiet_close(stale)))
            return
        task = loop.create_task(_quiet_close(stale))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def aclose(self) -> None:
        """Close the client this adapter made (a client passed in is left open)."""
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)
        if not self.owned or self.current.is_closed():
            return
        loop = asyncio.get_running_loop()
        if self._loop in (None, loop):
            await self.current.close()
        else:
            self._retire(self.current, self._loop, loop)
            if self._closing:
                await asyncio.gather(*self._closing, return_exceptions=True)
        self._loop = None
