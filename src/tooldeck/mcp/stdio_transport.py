"""An MCP server over stdio whose pipes tooldeck reads and writes itself.

The MCP SDK's ``stdio_client`` puts a writer task and two memory streams between a
request and the server's stdin, and a reader task, a pydantic parse and a memory stream
between the server's answer and the caller; each is a task switch (an event-loop
iteration) per message. :func:`stdio_transport` keeps the SDK's process handling (the
spawn in its own process group, the shutdown sequence: stdin closed, a grace period,
the process tree killed) and the SDK's streams for the SDK's session, but reads the
server's stdout itself: a line that answers (or reports progress on) a call made by
:class:`~.direct_calls.DirectCalls` resolves that call right there, in the reader, and
such a call is written to the server's stdin by its caller, at once. Every other line
goes to the SDK's session as ``stdio_client`` would hand it over (parsed by the SDK's own
function, a line that is not JSON-RPC as the exception it raised).

Each message is written whole in one write of the pipe's transport, so the SDK's writer
and direct calls never interleave. When the server's stdout ends (it exited, or was
killed), every call waiting is answered "Connection closed" and ``on_lost`` is called.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TextIO

import anyio
import anyio.lowlevel
from mcp.client.stdio import (
    _WRITER_FLUSH_TIMEOUT,
    StdioServerParameters,
    _aclose_all,
    _create_platform_compatible_process,
    _drain_stdout,
    _get_executable_command,
    _parse_line,
    _stop_server_process,
    get_default_environment,
)
from mcp.shared.message import SessionMessage

from .._lines import Lines
from .direct_calls import DirectCalls

__all__ = ["stdio_transport"]

_log = logging.getLogger("tooldeck.mcp")


@asynccontextmanager
async def stdio_transport(
    server: StdioServerParameters,
    errlog: TextIO,
    on_lost: Callable[[], None],
    on_direct: Callable[[DirectCalls | None], None],
) -> AsyncIterator[tuple[Any, Any]]:
    """The server of ``server`` started, its (read, write) streams for the SDK's
    ``Client``; its :class:`~.direct_calls.DirectCalls` handed to ``on_direct`` while it
    is open (``None`` once it closes); ``on_lost`` called when its stdout ends."""
    command = await _get_executable_command(server.command)
    process = await _create_platform_compatible_process(
        command=command,
        args=server.args,
        env=get_default_environment() | (server.env or {}),
        errlog=errlog,
        cwd=server.cwd,
    )
    assert process.stdin is not None and process.stdout is not None
    stdin, stdout = process.stdin, process.stdout
    to_sdk, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, from_sdk = anyio.create_memory_object_stream[SessionMessage](0)
    direct = DirectCalls(_writer(stdin))
    shutting_down = False
    writer_done = anyio.Event()

    async def read() -> None:
        lines = Lines(sys.maxsize)  # no bound, as the SDK's
        try:
            async with to_sdk:
                try:
                    while True:
                        try:
                            chunk = await stdout.receive()
                        except anyio.EndOfStream:
                            chunk = b""
                        for line in lines.feed(chunk) if chunk else lines.end():
                            if direct.take(line):
                                continue  # a direct call's answer or progress: resolved
                            try:
                                await to_sdk.send(_parse_line(line))
                            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                                return  # the session is gone; only the drain below remains
                        if not chunk:
                            return
                finally:
                    direct.close()
                    on_lost()
                    await _drain_stdout(process)
        except anyio.ClosedResourceError:
            pass  # our own shutdown closed the stdout stream under the read
        except (anyio.BrokenResourceError, ConnectionError):
            if not shutting_down:
                _log.exception("Reading from the MCP server's stdout failed mid-session")

    async def write() -> None:
        try:
            async with from_sdk:
                async for message in from_sdk:
                    dumped = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await stdin.send((dumped + "\n").encode())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await to_sdk.aclose()
        finally:
            writer_done.set()

    async def shutdown() -> None:
        """As the SDK's: traffic stopped, the writer flushed, the server stopped."""
        read_stream.close()
        write_stream.close()
        with anyio.move_on_after(_WRITER_FLUSH_TIMEOUT) as flush_scope:
            await writer_done.wait()
        if flush_scope.cancelled_caught:
            await anyio.lowlevel.cancel_shielded_checkpoint()
        direct.close()
        await _stop_server_process(process)
        await _aclose_all(read_stream, write_stream, to_sdk, from_sdk)
        await anyio.lowlevel.checkpoint()

    on_direct(direct)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(read)
            tg.start_soon(write)
            try:
                yield read_stream, write_stream
            finally:
                shutting_down = True
                with anyio.CancelScope(shield=True):
                    await shutdown()
                tg.cancel_scope.cancel()
    finally:
        on_direct(None)
    await anyio.lowlevel.cancel_shielded_checkpoint()


def _writer(stdin: Any) -> Callable[[bytes], Awaitable[None]]:
    """How a direct call writes a message to the server's stdin: into the pipe's asyncio
    transport at once, waiting only while its buffer is full (anyio's ``send`` also
    yields to the event loop after every write: a loop iteration per call); anyio's
    ``send`` where the stream is not asyncio's."""
    stream = getattr(stdin, "_stream", None)
    if not isinstance(stream, asyncio.StreamWriter):
        send: Callable[[bytes], Awaitable[None]] = stdin.send
        return send

    async def write(data: bytes) -> None:
        if stream.is_closing():
            raise anyio.BrokenResourceError
        try:
            stream.write(data)
            await stream.drain()
        except (ConnectionResetError, BrokenPipeError, RuntimeError) as exc:
            raise anyio.BrokenResourceError from exc

    return write
