"""``tooldeck serve --http`` on the wire: its TCP connections, the HTTP parser uvicorn runs.

- every accepted connection sends without Nagle's delay (``TCP_NODELAY``): a response
  written as headers then body would otherwise wait for the client's delayed ACK of the
  headers (40 ms on Linux) on a connection kept alive between requests;
- the official SDK client's plain calls reuse one HTTP connection (the gateway answers them
  with a JSON body, which that client reads to its end; it closes an SSE answer's stream,
  and its connection with it, at the answer);
- uvicorn parses HTTP with ``httptools`` when it is installed (the ``mcp`` extra brings
  it), and the gateway still serves with its pure-Python ``h11`` when it is not;
- what the protocol writes in one turn of the event loop (a response's headers, then its
  body) is sent as one: nothing before the turn ends, all of it in one piece then, and
  what is pending when the connection closes (gateway/http_wire.py).

Real gateways as subprocesses in front of tests/mcp_servers/basic.py, real clients.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from gateway_client import ALLOW_ALL, gateway_process, stdio, write_config, write_policy
from tooldeck.gateway.http_wire import Coalesced
from tooldeck.gateway.server import http_socket


def test_accepted_connections_have_tcp_nodelay() -> None:
    """The socket the gateway serves on: asyncio turns Nagle off for the connections it
    accepts only on a socket that says it is TCP."""

    async def main() -> list[int]:
        sock = http_socket("127.0.0.1", 0)
        port = sock.getsockname()[1]
        seen: list[int] = []

        async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            raw = writer.get_extra_info("socket")
            seen.append(raw.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(accepted, sock=sock)
        async with server:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            for _ in range(100):
                if seen:
                    break
                await asyncio.sleep(0.01)
            writer.close()
        return seen

    assert asyncio.run(main()) == [1]


def _served(tmp: Path, env: dict[str, str] | None = None) -> Any:
    config = write_config(tmp, {"alpha": stdio("basic.py")})
    policy = write_policy(tmp, ALLOW_ALL)
    return gateway_process(config, tmp / "state", "--core", "*", "--policy", str(policy), env=env)


class Streams:
    """An httpx event hook: the network stream (connection) of each ``tools/call``."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    async def __call__(self, response: httpx2.Response) -> None:
        if response.request.method == "POST" and b'"tools/call"' in response.request.content:
            self.calls.append(id(response.extensions["network_stream"]))


async def _calls(url: str, n: int, streams: Streams | None = None) -> None:
    hooks = {"response": [streams]} if streams else {}
    async with (
        httpx2.AsyncClient(timeout=60, event_hooks=hooks) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as client,
    ):
        await client.initialize()
        with anyio.fail_after(60):  # until the upstream is up
            while True:
                if "alpha__echo" in str(await client.list_tools()):
                    break
                await anyio.sleep(0.1)
        for k in range(n):
            result = await client.call_tool("alpha__echo", {"text": f"call {k}"})
            assert not result.is_error and f"call {k}" in str(result.content)


def test_the_sdk_clients_plain_calls_keep_one_connection(tmp_path: Path) -> None:
    streams = Streams()
    with _served(tmp_path) as (url, _):
        anyio.run(_calls, url, 6, streams)
    assert len(streams.calls) == 6
    assert len(set(streams.calls)) == 1, streams.calls


def _parser_loaded(pid: int) -> bool:
    """Whether ``httptools``' compiled parser is mapped into process ``pid``."""
    return "httptools" in Path(f"/proc/{pid}/maps").read_text()


@pytest.mark.no_zygote  # the gateway is the process started, not a fork of the tests'
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/PID/maps")
def test_uvicorn_parses_with_httptools_when_installed(tmp_path: Path) -> None:
    pytest.importorskip("httptools")
    with _served(tmp_path) as (url, proc):
        anyio.run(_calls, url, 2)
        assert _parser_loaded(proc.pid)


@pytest.mark.no_zygote
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/PID/maps")
def test_the_gateway_serves_with_h11_when_httptools_is_absent(tmp_path: Path) -> None:
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / "httptools.py").write_text('raise ImportError("not installed here")\n')
    path = os.pathsep.join([str(blocked), *sys.path])
    with _served(tmp_path, env={"PYTHONPATH": path}) as (url, proc):
        anyio.run(_calls, url, 2)
        assert not _parser_loaded(proc.pid)
        # and it speaks plain HTTP/1.1 keep-alive as well: a second request on one connection
        with httpx2.Client(timeout=30) as http:
            for _ in range(2):
                answer = http.get(url.removesuffix("/mcp") + "/nowhere")
                assert answer.status_code == 404


def test_writes_of_one_loop_turn_are_sent_as_one() -> None:
    async def main() -> tuple[bool, bytes, bytes]:
        loop = asyncio.get_running_loop()
        ours, theirs = socket.socketpair()
        theirs.setblocking(False)
        transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, ours)
        coalesced = Coalesced(transport, loop)  # type: ignore[arg-type]
        coalesced.write(b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\n")
        coalesced.write(b"")
        coalesced.write(b"body")
        try:
            early = theirs.recv(1024)  # nothing sent yet
        except BlockingIOError:
            early = b""
        sent_late = not early and coalesced.get_write_buffer_size() == 42
        await asyncio.sleep(0)  # the turn ends
        at_once = theirs.recv(1024)
        coalesced.write(b"last")
        coalesced.close()  # pending writes go first
        await asyncio.sleep(0.05)
        closing = theirs.recv(1024)
        theirs.close()
        return sent_late, at_once, closing

    sent_late, at_once, closing = asyncio.run(main())
    assert sent_late
    assert at_once == b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nbody"
    assert closing == b"last"
