"""``tools/call`` over stdio answered by the gateway itself, not by the MCP SDK's server.

The SDK's server costs a call a JSON-RPC dispatcher, a task, two memory streams and
pydantic models of the request, on top of what the gateway does; over stdio that was
most of what a call through the gateway cost beyond the upstream's own time
(``bench/RESULTS.md``). :class:`StdioCalls` sits between the client's stdin
(:class:`~._stdin.WireStdin`) and the SDK: it reads each line first, takes a plain
``tools/call`` and answers it on stdout (:class:`~._stdin.WireStdout`) after running it
through the session's one dispatcher, as the SDK's handler would
(:meth:`GatewaySession.call`: policy, approvals, audit, evidence, offload, guard), and
hands every other line to the SDK unchanged.

Taken: a ``tools/call`` request once the client's ``initialize`` handshake is done
(``notifications/initialized`` seen), whose ``params`` are just ``name`` (a string) and
``arguments`` (an object, or none), and whose id is not in flight here. Left to the SDK:
everything else, and a call that may need the SDK's session: one carrying ``_meta``
(a progress token, a trace context), any call of a client that declared elicitation
or sampling (an ask, or an upstream server's question or sampling request, goes to that
client), and any call of a client
that did not shake hands (MCP 2026-07-28).

As the SDK does: ``notifications/cancelled`` for a call taken here cancels it, and it is
never answered; a call still running when stdin ends is cancelled and answered with a
"Connection closed" error. Each id taken here is answered at most once. A line that is
not JSON, not a JSON-RPC message, or over :data:`~._stdin.MAX_MESSAGE` bytes is
answered with the JSON-RPC error that says so (the SDK answered nothing).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from .._compact import compact_json
from ..approvals import Approver
from ._handshake import HANDSHAKE_VERSIONS
from ._stdin import MAX_MESSAGE, TOO_LONG, WireStdin, WireStdout
from .wire import an_id, call_result_json, request_key

if TYPE_CHECKING:
    from .session import GatewaySession

__all__ = ["Host", "StdioCalls", "stdio_calls_around"]

_log = logging.getLogger("tooldeck.gateway")
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INTERNAL_ERROR = -32603
CONNECTION_CLOSED = -32000
CLOSING_SECONDS = 2.0  # at the end: how long the "Connection closed" answers get
_PLAIN = frozenset({"name", "arguments"})
_LIST_CHANGED = b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}\n'


class Host(Protocol):
    """What :class:`StdioCalls` needs of the gateway (:class:`~.server.Gateway`)."""

    approvals: str

    def stdio_session(self) -> GatewaySession: ...

    def plain_asker(self, session: GatewaySession) -> tuple[Approver, str]: ...

    async def listing_changed(
        self, session: GatewaySession, announce: Callable[[], Awaitable[None]]
    ) -> None: ...


def _line(message: dict[str, Any]) -> bytes:
    return (compact_json(message) + "\n").encode()


def _error(request_id: object, code: int, message: str) -> bytes:
    return _line({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})


class StdioCalls:
    """See the module docstring. :meth:`lines` is the SDK's stdin; each call taken runs
    in a task of its own, until :meth:`close`."""

    def __init__(self, host: Host, stdout: WireStdout) -> None:
        self.host = host
        self.out = stdout
        self._asked: dict[str, Any] | None = None  # the client's initialize params
        self.protocol: str | None = None  # negotiated, once the handshake is done
        self._elicits = False
        self._running: dict[int | str, anyio.CancelScope] = {}
        self._cancelled: set[anyio.CancelScope] = set()  # by the client: never answered
        self._tasks: set[asyncio.Task[None]] = set()  # the calls' tasks not finished
        # the running backend's cancel scope: what anyio.CancelScope() makes after asking
        # sniffio which backend runs, every time (this runs on asyncio's loop, or uvloop's)
        self._scope: type[anyio.CancelScope] = type(anyio.CancelScope())

    async def lines(self, source: AsyncIterable[str]) -> AsyncIterator[str]:
        """The lines of ``source`` the SDK is to read: all but the calls taken here, their
        cancellations, and the lines answered here as errors."""
        async for line in source:
            if await self._keep(line):
                yield line

    async def _keep(self, line: str) -> bool:
        if line is TOO_LONG:
            await self._send(
                _error(None, INVALID_REQUEST, f"Invalid request: over {MAX_MESSAGE:,} bytes")
            )
            return False
        if not line or line.isspace():
            return False
        try:
            message = json.loads(line)
        except ValueError as exc:
            await self._send(_error(None, PARSE_ERROR, f"Parse error: {exc}"))
            return False
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return await self._invalid(message)
        method = message.get("method")
        if method is None:
            if "result" in message or "error" in message:
                return True  # the client's answer to the SDK's request
            return await self._invalid(message)
        if "id" in message:
            if method == "tools/call" and self._take(message):
                return False
            if method == "initialize":
                params = message.get("params")
                self._asked = params if isinstance(params, dict) else None
        elif method == "notifications/cancelled":
            return not self._cancel(message.get("params"))
        elif method == "notifications/initialized":
            self._handshake_done()
        return True

    async def _invalid(self, message: object) -> bool:
        found = message.get("id") if isinstance(message, dict) else None
        request_id = found if an_id(found) else None
        await self._send(_error(request_id, INVALID_REQUEST, "Invalid request: not JSON-RPC 2.0"))
        return False

    def _handshake_done(self) -> None:
        asked = self._asked
        if asked is None:
            return
        requested = asked.get("protocolVersion")
        versions = HANDSHAKE_VERSIONS
        self.protocol = requested if requested in versions else versions[-1]
        capabilities = asked.get("capabilities")
        self._elicits = isinstance(capabilities, dict) and any(  # it can be asked (sampling.py)
            capabilities.get(c) is not None for c in ("elicitation", "sampling")
        )

    def _take(self, message: dict[str, Any]) -> bool:
        """Whether this ``tools/call`` is run here (see the module docstring)."""
        request_id = message["id"]
        params = message.get("params")
        if self.protocol is None or not an_id(request_id) or not isinstance(params, dict):
            return False
        if self._elicits:  # an ask, or an upstream's question, goes to that client
            return False
        if not params.keys() <= _PLAIN:
            return False
        name, arguments = params.get("name"), params.get("arguments")
        if not isinstance(name, str) or not (arguments is None or isinstance(arguments, dict)):
            return False
        key = request_key(request_id)
        if key in self._running:
            return False  # the SDK says what a duplicate id gets
        scope = self._running[key] = self._scope()
        # a plain asyncio task: an anyio task group's start_soon, and the wrapper its
        # tasks step through, cost a call more than the rest of this module
        task = asyncio.get_running_loop().create_task(
            self._serve(request_id, key, scope, name, arguments)
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    def _cancel(self, params: object) -> bool:
        """Cancel the call taken here that ``params`` names; whether there was one."""
        request_id = params.get("requestId") if isinstance(params, dict) else None
        if not an_id(request_id):
            return False
        assert isinstance(request_id, int | str)
        scope = self._running.get(request_key(request_id))
        if scope is None:
            return False
        self._cancelled.add(scope)
        scope.cancel()
        return True

    async def _serve(
        self,
        request_id: int | str,
        key: int | str,
        scope: anyio.CancelScope,
        name: str,
        arguments: dict[str, Any] | None,
    ) -> None:
        answer: bytes | None = None
        try:
            with scope:
                try:
                    answer = await self._answer(request_id, name, arguments)
                except Exception as exc:
                    _log.exception("tools/call %s failed", name)
                    answer = _error(request_id, INTERNAL_ERROR, str(exc) or type(exc).__name__)
            if scope.cancelled_caught and scope not in self._cancelled:  # stopping: say so
                with anyio.move_on_after(CLOSING_SECONDS):
                    await self._send(_error(request_id, CONNECTION_CLOSED, "Connection closed"))
                return
        finally:
            if self._running.get(key) is scope:
                del self._running[key]
            self._cancelled.discard(scope)
        if answer is None:  # cancelled by the client: never answered
            return
        # no longer in _running: nothing cancels it, a message is never left half written
        await self._send(answer)

    async def close(self) -> None:
        """Cancel the calls still running (each answered "Connection closed"), and wait
        for every call's task to end (an answer being written is written whole)."""
        for scope in list(self._running.values()):
            scope.cancel()
        with anyio.CancelScope(shield=True):
            while self._tasks:
                await asyncio.wait(list(self._tasks))

    async def _answer(
        self, request_id: int | str, name: str, arguments: dict[str, Any] | None
    ) -> bytes:
        host = self.host
        session = host.stdio_session()
        before = session.listing_state()
        asker, who = host.plain_asker(session)
        result = await session.call(name, arguments, asker, who=who, protocol=self.protocol)
        if session.listing_state() != before:  # announced before the answer, as the SDK's
            await host.listing_changed(session, self._tools_changed)
        assert self.protocol is not None  # a call is taken once the handshake is done
        dumped = call_result_json(result, self.protocol)
        return _line({"jsonrpc": "2.0", "id": request_id, "result": dumped})

    async def _tools_changed(self) -> None:
        await self._send(_LIST_CHANGED)

    async def _send(self, data: bytes) -> None:
        try:
            await self.out.send(data)
        except OSError as exc:  # the client went away: its answers go nowhere
            _log.debug("answer not written: %s", exc)


@asynccontextmanager
async def stdio_calls_around(
    host: Host, stdin: WireStdin | None, stdout: WireStdout | None
) -> AsyncIterator[AsyncIterable[str] | None]:
    """What the SDK's ``stdio_server`` is to read as stdin while the block runs: the
    lines of ``stdin`` that :class:`StdioCalls` leaves to it (``stdin`` itself when the
    loop does not read or write the wire, :mod:`._stdin`). Calls still running when the
    block ends are cancelled (and answered "Connection closed")."""
    if stdin is None or stdout is None:
        yield stdin
        return
    calls = StdioCalls(host, stdout)
    try:
        yield calls.lines(stdin)
    finally:
        await calls.close()
