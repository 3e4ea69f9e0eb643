"""``tools/call`` to a stdio server written and read by tooldeck, beside the SDK's client.

The MCP SDK's client session costs a call a request model dumped, its JSON-RPC
dispatcher's pending table and a memory stream for the answer, on top of the transport;
the gateway makes many calls (``bench/RESULTS.md``). :class:`DirectCalls` sits on the
pipes of one stdio connection (:func:`.stdio_transport.stdio_transport` hands it every
line the server writes before the SDK sees it): :meth:`DirectCalls.call` writes a
``tools/call`` request with an id of its own (``tooldeck-N``, never one of the SDK's
numbers) to the server's stdin, takes its answer and its progress notifications off
the server's stdout (a line that names no such id is never parsed here), and leaves
everything else (the server's requests, other answers, notifications) to the SDK. An
answer to such an id that is not a JSON-RPC answer ends its call with an error (code
``INTERNAL_ERROR``) naming the line.

The request is stamped and the answer checked by the SDK's session itself
(:func:`call_tool`: the 2026-07-28 envelope, the negotiated version's result shape, the
result model, the tool's output schema; an ``input_required`` answer finished by the
SDK's client), so a call made here returns and raises what ``Client.call_tool``
would. Cancelled (a timeout, the caller gone), the request is followed by
``notifications/cancelled``, as the SDK does; the connection lost, every call waiting
is answered "Connection closed" (``CONNECTION_CLOSED``), the SDK's error for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

import anyio
import mcp_types as types
from mcp import Client, MCPError
from mcp.client.extension import UnexpectedClaimedResult
from mcp.client.session import _clamp_inbound_ttl, _later_revision_fields
from mcp_types import CONNECTION_CLOSED, INTERNAL_ERROR
from mcp_types import methods as _methods
from mcp_types.version import KNOWN_PROTOCOL_VERSIONS
from pydantic import TypeAdapter, ValidationError

from .._compact import compact_json
from .plain_results import plain_texts

__all__ = ["DirectCalls", "Plain", "Progress", "call_tool", "usable"]

_log = logging.getLogger("tooldeck.mcp")
Progress = Callable[[float, float | None, str | None], Any]
CANCEL_SECONDS = 1.0  # bound on sending notifications/cancelled for a call given up
_PREFIX = "tooldeck-"  # the ids of the calls made here; never one of the SDK's (numbers)
_MARK = f'"{_PREFIX}'  # in every line that answers or reports on such a call
_SHOWN = 200  # of a malformed answer, the characters an error shows
_encode_str = json.encoder.encode_basestring  # the C function it uses for text


class _Waiting:
    """One call waiting for its answer: ``done`` is a future of the running loop (an
    ``anyio.Event`` wraps an ``asyncio.Event`` that makes one per wait anyway); a cancel
    scope cancels the wait as any other."""

    __slots__ = ("answer", "done", "on_progress")

    def __init__(self, on_progress: Progress | None) -> None:
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.answer: dict[str, Any] | MCPError | None = None
        self.on_progress = on_progress

    def set(self) -> None:
        if not self.done.done():
            self.done.set_result(None)


class DirectCalls:
    """The ``tools/call`` requests of one transport (see the module docstring): ``send``
    writes a message (whole, newline-ended) to the server's stdin."""

    def __init__(self, send: Callable[[bytes], Awaitable[None]]) -> None:
        self._send = send
        self._waiting: dict[str, _Waiting] = {}
        self._ids = itertools.count(1)
        self.closed = False
        self._meta: tuple[object, str | None] | None = None  # :meth:`meta_of`

    def take(self, line: str) -> bool:
        """Whether ``line`` (one the server wrote) is the answer to, or progress of, a
        call made here: then it is taken (not for the SDK). An answer that is not a
        JSON-RPC answer still ends its call, with an error."""
        if not self._waiting or _MARK not in line:
            return False
        try:
            message = json.loads(line)
        except ValueError:
            return False
        if not isinstance(message, dict):
            return False
        method = message.get("method")
        if method is None:
            request_id = message.get("id")
            waiting = self._waiting.get(request_id) if isinstance(request_id, str) else None
            if waiting is None or waiting.answer is not None:
                return False  # not ours, or answered already: the SDK says what it is
            waiting.answer = _answer(message, line)
            waiting.set()
            return True
        if method == "notifications/progress":
            params = message.get("params")
            token = params.get("progressToken") if isinstance(params, dict) else None
            waiting = self._waiting.get(token) if isinstance(token, str) else None
            if waiting is None:
                return False
            assert isinstance(params, dict)
            _progress(waiting, params)
            return True
        return False

    def close(self) -> None:
        """The connection is gone: every call waiting is answered "Connection closed"."""
        self.closed = True
        for waiting in self._waiting.values():
            if waiting.answer is None:
                waiting.answer = MCPError(code=CONNECTION_CLOSED, message="Connection closed")
            waiting.set()

    def meta_of(self, stamp: Callable[[dict[str, Any], Any], None]) -> str | None:
        """The ``_meta`` the session's ``stamp`` puts in a ``tools/call`` request, as JSON
        text (``None``: none). Worked out once per stamp (the session makes a new one when
        it negotiates again): it is the version, the client's info and capabilities, the
        same for every call (the headers it sets are HTTP's: not used over stdio)."""
        kept = self._meta
        if kept is not None and kept[0] is stamp:
            return kept[1]
        data: dict[str, Any] = {"method": "tools/call", "params": {"name": ""}}
        stamp(data, {})
        meta = data["params"].get("_meta")
        text = None if meta is None else compact_json(meta)
        self._meta = (stamp, text)
        return text

    async def call(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        meta: str | None,
        on_progress: Progress | None,
    ) -> dict[str, Any]:
        """The raw result of ``tools/call`` of ``name`` with ``arguments`` (``None``: none
        sent) and ``meta`` (:meth:`meta_of`); raises :class:`MCPError` for an error answer
        (``CONNECTION_CLOSED`` when the connection is lost), as the SDK does."""
        if self.closed:
            raise MCPError(code=CONNECTION_CLOSED, message="Connection closed")
        request_id = f"{_PREFIX}{next(self._ids)}"
        waiting = self._waiting[request_id] = _Waiting(on_progress)
        try:
            await self._send(_request(request_id, name, arguments, meta, on_progress is not None))
            await waiting.done
        except anyio.get_cancelled_exc_class():
            # a send interrupted may still have delivered: the server is told either way
            if not self.closed and waiting.answer is None:
                with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_SECONDS):
                    await self._cancel(request_id)
            raise
        finally:
            del self._waiting[request_id]
        answer = waiting.answer
        if isinstance(answer, MCPError):
            raise answer
        assert answer is not None
        return answer

    async def _cancel(self, request_id: str) -> None:
        params = {"requestId": request_id, "reason": "the caller gave up"}
        note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            await self._send(_dumped(note))


def _dumped(message: dict[str, Any]) -> bytes:
    return (compact_json(message) + "\n").encode()


def _request(
    request_id: str, name: str, arguments: dict[str, Any] | None, meta: str | None, progress: bool
) -> bytes:
    """The request line of a call: what :func:`_dumped` gives of ``{"jsonrpc": "2.0",
    "id": request_id, "method": "tools/call", "params": {"name": name, "arguments":
    arguments, "_meta": {**meta, "progressToken": request_id}}}`` (no ``arguments`` when
    ``None``, no ``progressToken`` without ``progress``, no ``_meta`` when neither),
    without dumping ``meta`` again."""
    out = ['{"jsonrpc":"2.0","id":', _encode_str(request_id)]
    out += [',"method":"tools/call","params":{"name":', _encode_str(name)]
    if arguments is not None:
        out += [',"arguments":', compact_json(arguments)]
    if progress:
        token = '"progressToken":' + _encode_str(request_id) + "}"
        if meta is None or meta == "{}":
            out += [',"_meta":{', token]
        elif '"progressToken"' in meta:  # (never stamped): where it goes, the dict says
            value = {**json.loads(meta), "progressToken": request_id}
            out += [',"_meta":', compact_json(value)]
        else:
            out += [',"_meta":', meta[:-1], ",", token]
    elif meta is not None:
        out += [',"_meta":', meta]
    out.append("}}\n")
    return "".join(out).encode()


def _answer(message: dict[str, Any], line: str) -> dict[str, Any] | MCPError:
    """A server's answer to a call: its result, or the error it is (:class:`MCPError`)."""
    if message.get("jsonrpc") == "2.0":
        result, error = message.get("result"), message.get("error")
        if isinstance(result, dict) and error is None:
            return result
        if result is None and isinstance(error, dict):
            try:
                return MCPError.from_error_data(types.ErrorData.model_validate(error))
            except ValidationError:
                pass
    shown = line if len(line) <= _SHOWN else line[:_SHOWN] + "..."
    return MCPError(code=INTERNAL_ERROR, message=f"the server's answer is not JSON-RPC: {shown}")


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


class Plain(NamedTuple):
    """A ``tools/call`` result of text blocks only (:func:`call_tool` with ``plain``)."""

    texts: list[str]
    is_error: bool
    meta: dict[str, Any] | None


def _plain_checked(session: Any, name: str, raw: dict[str, Any]) -> bool:
    """Whether the session's check of a plain result (:func:`call_tool`) passes without
    looking: an error result is not checked against the output schema; any other passes
    when the tool is known to have none (an unknown tool is listed again first)."""
    if getattr(session, "_active_claims", True):  # an extension's result shapes too
        return False
    if raw.get("isError") is True:
        return True
    schemas = session._tool_output_schemas
    return name in schemas and schemas[name] is None


@functools.cache
def _surface(version: str) -> TypeAdapter[Any] | None:
    """What ``version``'s ``tools/call`` result is checked against: the check of the
    SDK's ``validate_server_result`` (an unknown version is its ``ValueError``), without
    the dump it makes of the result and drops; ``None``: a version without a row, nothing
    to check."""
    if version not in KNOWN_PROTOCOL_VERSIONS:
        raise ValueError(f"version must be a known protocol version, got {version!r}")
    row = _methods.SERVER_RESULTS.get(("tools/call", version))
    return None if row is None else _methods._adapter(row)


def checked(adapter: TypeAdapter[Any], version: str, raw: dict[str, Any]) -> Any:
    """The session's model of ``raw`` (a ``tools/call`` result off the wire; its ``ttlMs``
    clamped in place), checked as it checks it for ``version`` (:func:`call_tool`):
    raises ``ValidationError`` (or ``ValueError`` for an unknown version)."""
    _clamp_inbound_ttl(raw)
    surface = _surface(version)
    if surface is not None:
        surface.validate_python(raw, by_name=False)
    foreign = _later_revision_fields("tools/call", version)
    if not foreign.isdisjoint(raw):
        raw = {key: value for key, value in raw.items() if key not in foreign}
    return adapter.validate_python(raw, by_name=False)


def usable(client: Client) -> bool:
    """Whether calls of ``client`` can be made here: the SDK version has what
    :func:`call_tool` reuses of its client and session."""
    session = client.session
    return hasattr(client, "_drive_input_required") and all(
        hasattr(session, name) for name in ("_stamp", "_call_tool_adapter", "_tool_output_schemas")
    )


async def call_tool(
    client: Client,
    direct: DirectCalls,
    version: str,
    name: str,
    arguments: dict[str, Any] | None,
    on_progress: Progress | None,
    *,
    plain: bool = False,
) -> types.CallToolResult | Plain:
    """What ``client.call_tool(name, arguments)`` returns or raises, its first request
    made by ``direct``: stamped by the session (the 2026-07-28 envelope in ``_meta``),
    the answer checked as the session checks it for ``version``: its shape in that
    version, a later version's fields dropped, the session's result adapter, the tool's
    output schema (the session's validator). An ``input_required`` answer (a 2026-07-28
    server asking for roots, say) is finished by the SDK's client, round by round, as
    its ``call_tool`` does.

    With ``plain``, an answer of text blocks only (:func:`.plain_results.plain_texts`)
    whose check could not fail comes back as :class:`Plain` instead of the model: its
    texts, whether it is an error, its ``_meta``."""
    session = client.session
    meta = direct.meta_of(session._stamp)
    raw = await direct.call(name, arguments, meta, on_progress)
    if plain:
        texts = plain_texts(raw, "resultType" not in _later_revision_fields("tools/call", version))
        if texts is not None and _plain_checked(session, name, raw):
            return Plain(texts, raw.get("isError", False), raw.get("_meta"))
    result = checked(session._call_tool_adapter, version, raw)
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
