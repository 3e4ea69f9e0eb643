"""``tools/call`` to a stdio server written and read by tooldeck, beside the SDK's client.

The MCP SDK's client session costs a call a request model dumped, its JSON-RPC
dispatcher's pending table and a memory stream for the answer, on top of the transport;
the gateway makes many calls (``bench/RESULTS.md``). :class:`DirectCalls` sits on the
transport of one connection (:func:`tooldeck.mcp.connection._watched` hands it every
message the server sends before the SDK sees it): :meth:`DirectCalls.call` writes a
``tools/call`` request with an id of its own (``tooldeck-N``, never one of the SDK's
numbers), takes its answer and its progress notifications off the stream, and leaves
everything else (the server's requests, other answers, notifications) to the SDK.

The request is stamped and the answer checked by the SDK's session itself
(:func:`call_tool`: the 2026-07-28 envelope, the negotiated version's result shape, the
result model, the tool's output schema; an ``input_required`` answer finished by the
SDK's client), so a call made here returns and raises what ``Client.call_tool``
would. Cancelled (a timeout, the caller gone), the request is followed by
``notifications/cancelled``, as the SDK does; the connection lost, every call waiting
is answered "Connection closed" (``CONNECTION_CLOSED``), the SDK's error for it.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections.abc import Callable
from typing import Any

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectSendStream
from mcp import Client, MCPError
from mcp.client.extension import UnexpectedClaimedResult
from mcp.client.session import _clamp_inbound_ttl, _later_revision_fields
from mcp.shared.message import SessionMessage
from mcp_types import CONNECTION_CLOSED
from mcp_types import methods as _methods

__all__ = ["DirectCalls", "Progress", "call_tool", "usable"]

_log = logging.getLogger("tooldeck.mcp")
Progress = Callable[[float, float | None, str | None], Any]
CANCEL_SECONDS = 1.0  # bound on sending notifications/cancelled for a call given up


class _Waiting:
    __slots__ = ("answer", "done", "on_progress")

    def __init__(self, on_progress: Progress | None) -> None:
        self.done = anyio.Event()
        self.answer: types.JSONRPCResponse | types.JSONRPCError | None = None
        self.on_progress = on_progress


class DirectCalls:
    """The ``tools/call`` requests of one transport (see the module docstring)."""

    def __init__(self, write: MemoryObjectSendStream[SessionMessage]) -> None:
        self._write = write
        self._waiting: dict[str, _Waiting] = {}
        self._ids = itertools.count(1)
        self.closed = False

    def take(self, item: object) -> bool:
        """Whether ``item`` (what the transport read) is the answer to, or progress of, a
        call made here: then it is taken (not for the SDK)."""
        if not isinstance(item, SessionMessage) or not self._waiting:
            return False
        message = item.message
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            request_id = message.id
            waiting = self._waiting.get(request_id) if isinstance(request_id, str) else None
            if waiting is None:
                return False
            waiting.answer = message
            waiting.done.set()
            return True
        if isinstance(message, types.JSONRPCNotification):
            if message.method != "notifications/progress" or not message.params:
                return False
            token = message.params.get("progressToken")
            waiting = self._waiting.get(token) if isinstance(token, str) else None
            if waiting is None:
                return False
            _progress(waiting, message.params)
            return True
        return False

    def close(self) -> None:
        """The connection is gone: every call waiting is answered "Connection closed"."""
        self.closed = True
        for request_id, waiting in list(self._waiting.items()):
            if waiting.answer is None:
                error = types.ErrorData(code=CONNECTION_CLOSED, message="Connection closed")
                waiting.answer = types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error)
            waiting.done.set()

    async def call(self, params: dict[str, Any], on_progress: Progress | None) -> dict[str, Any]:
        """The raw result of ``tools/call`` with ``params``; raises :class:`MCPError` for an
        error answer (``CONNECTION_CLOSED`` when the connection is lost), as the SDK does."""
        if self.closed:
            raise MCPError(code=CONNECTION_CLOSED, message="Connection closed")
        request_id = f"tooldeck-{next(self._ids)}"
        if on_progress is not None:
            params = {**params, "_meta": {**params.get("_meta", {}), "progressToken": request_id}}
        request = types.JSONRPCRequest(
            jsonrpc="2.0", id=request_id, method="tools/call", params=params
        )
        waiting = self._waiting[request_id] = _Waiting(on_progress)
        try:
            await self._write.send(SessionMessage(request))
            await waiting.done.wait()
        except anyio.get_cancelled_exc_class():
            # a send interrupted may still have delivered: the server is told either way
            if not self.closed and waiting.answer is None:
                with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_SECONDS):
                    await self._cancel(request_id)
            raise
        finally:
            del self._waiting[request_id]
        answer = waiting.answer
        if isinstance(answer, types.JSONRPCError):
            raise MCPError.from_error_data(answer.error)
        assert answer is not None
        return answer.result

    async def _cancel(self, request_id: str) -> None:
        params = {"requestId": request_id, "reason": "the caller gave up"}
        note = types.JSONRPCNotification(
            jsonrpc="2.0", method="notifications/cancelled", params=params
        )
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await self._write.send(SessionMessage(note))


def _progress(waiting: _Waiting, params: dict[str, Any]) -> None:
    progress, total, message = params.get("progress"), params.get("total"), params.get("message")
    if waiting.on_progress is None or not isinstance(progress, int | float):
        return
    try:
        waiting.on_progress(
            float(progress),
            float(total) if isinstance(total, int | float) else None,
            message if isinstance(message, str) else None,
        )
    except Exception:
        _log.exception("progress callback failed")


def usable(client: Client) -> bool:
    """Whether calls of ``client`` can be made here: the SDK version has what
    :func:`call_tool` reuses of its client and session."""
    session = client.session
    return hasattr(client, "_drive_input_required") and all(
        hasattr(session, name) for name in ("_stamp", "_call_tool_adapter")
    )


async def call_tool(
    client: Client,
    direct: DirectCalls,
    version: str,
    name: str,
    arguments: dict[str, Any] | None,
    on_progress: Progress | None,
) -> types.CallToolResult:
    """What ``client.call_tool(name, arguments)`` returns or raises, its first request
    made by ``direct``: stamped by the session (the 2026-07-28 envelope in ``_meta``),
    the answer checked as the session checks it for ``version``: its shape in that
    version, a later version's fields dropped, the session's result adapter, the tool's
    output schema (the session's validator). An ``input_required`` answer (a 2026-07-28
    server asking for roots, say) is finished by the SDK's client, round by round, as
    its ``call_tool`` does."""
    session = client.session
    data: dict[str, Any] = {"method": "tools/call", "params": {"name": name}}
    if arguments is not None:
        data["params"]["arguments"] = arguments
    session._stamp(data, {})  # the headers it sets are HTTP's: not used over stdio
    raw = await direct.call(data["params"], on_progress)
    _clamp_inbound_ttl(raw)
    with contextlib.suppress(KeyError):  # a version without a row: nothing to check
        _methods.validate_server_result("tools/call", version, raw)
    foreign = _later_revision_fields("tools/call", version)
    if not foreign.isdisjoint(raw):
        raw = {key: value for key, value in raw.items() if key not in foreign}
    result = session._call_tool_adapter.validate_python(raw, by_name=False)
    if isinstance(result, types.CallToolResult):
        if not result.is_error:
            await session.validate_tool_result(name, result)
        return result

    async def again(
        responses: types.InputResponses | None, state: str | None
    ) -> types.CallToolResult | types.InputRequiredResult | types.Result:
        async def relay(done: float, total: float | None, message: str | None) -> None:
            if on_progress is not None:
                on_progress(done, total, message)

        send: Any = session.call_tool  # its overloads: this call's is the widest
        answer: types.CallToolResult | types.InputRequiredResult | types.Result = await send(
            name,
            arguments,
            progress_callback=relay,
            input_responses=responses,
            request_state=state,
            allow_input_required=True,
            allow_claimed=True,
        )
        return answer

    final = await client._drive_input_required(result, again)
    if not isinstance(final, types.CallToolResult):  # no extension claims a shape here
        raise UnexpectedClaimedResult(final)
    return final
