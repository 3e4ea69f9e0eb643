"""A real HTTP server on 127.0.0.1 that plays a provider's side, for adapter tests.

The official SDK clients talk to it over real HTTP (and real SSE for streaming). Each
test queues the replies the server should give, in order, and afterwards reads the
requests it received (method, path, headers, JSON body) to compare with golden files.
"""

from __future__ import annotations

import base64
import json
import os
import struct
import threading
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

GOLDEN = Path(__file__).parent / "golden"


@dataclass
class Reply:
    """A JSON reply."""

    body: Any
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class SSE:
    """A streamed reply: ``events`` are ``(event_name_or_None, data)`` pairs.

    With ``hold=True`` the stream stays open after its events until the client closes the
    connection, and then ``closed`` is set (a test sees that the client really closed it).
    """

    events: Iterable[tuple[str | None, Any]]
    status: int = 200
    hold: bool = False
    closed: threading.Event = field(default_factory=threading.Event)


@dataclass
class EventStream:
    """A streamed reply in AWS's binary event-stream encoding (Bedrock's
    ``invoke-with-response-stream``): each event is one ``chunk`` frame whose payload is
    ``{"bytes": base64(json)}``; ``exception`` frames carry an error instead."""

    events: Iterable[Any]
    status: int = 200
    exception: tuple[str, str] | None = None  # (exception type, message) after the events


def _aws_frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One event-stream message: prelude, CRC, string headers, payload, CRC."""
    packed = b"".join(
        bytes([len(k)]) + k.encode() + b"\x07" + struct.pack(">H", len(v.encode())) + v.encode()
        for k, v in headers.items()
    )
    prelude = struct.pack(">II", 16 + len(packed) + len(payload), len(packed))
    message = prelude + struct.pack(">I", zlib.crc32(prelude)) + packed + payload
    return message + struct.pack(">I", zlib.crc32(message))


def aws_event_stream(reply: EventStream) -> bytes:
    frames = []
    for event in reply.events:
        data = event if isinstance(event, bytes) else json.dumps(event).encode()
        payload = json.dumps({"bytes": base64.b64encode(data).decode()}).encode()
        frames.append(
            _aws_frame(
                {
                    ":event-type": "chunk",
                    ":content-type": "application/json",
                    ":message-type": "event",
                },
                payload,
            )
        )
    if reply.exception is not None:
        kind, message = reply.exception
        frames.append(
            _aws_frame(
                {
                    ":exception-type": kind,
                    ":content-type": "application/json",
                    ":message-type": "exception",
                },
                json.dumps({"message": message}).encode(),
            )
        )
    return b"".join(frames)


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class _QuietServer(ThreadingHTTPServer):
    """A client that hangs up on a kept-alive connection is not the server's error: the
    standard handler would print its traceback to sys.stderr, which a CLI test captures
    as the command's own output."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class FakeProvider:
    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self._replies: list[Reply | SSE | EventStream] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                with fake._lock:
                    fake.requests.append(
                        Recorded(
                            "POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body
                        )
                    )
                    reply = (
                        fake._replies.pop(0)
                        if fake._replies
                        else Reply(
                            {"error": {"message": "no reply queued", "type": "test_error"}}, 500
                        )
                    )
                if isinstance(reply, EventStream):
                    payload = aws_event_stream(reply)
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/vnd.amazon.eventstream")
                    self.send_header("content-length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                if isinstance(reply, SSE):
                    self.send_response(reply.status)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("cache-control", "no-cache")
                    self.send_header("connection", "close")
                    self.end_headers()
                    for name, data in reply.events:
                        chunk = ""
                        if name:
                            chunk += f"event: {name}\n"
                        payload = data if isinstance(data, str) else json.dumps(data)
                        chunk += f"data: {payload}\n\n"
                        self.wfile.write(chunk.encode())
                        self.wfile.flush()
                    if reply.hold:  # until the client hangs up (bounded, not to hang a test)
                        self.connection.settimeout(30)
                        try:
                            while self.connection.recv(4096):
                                pass
                        except OSError:
                            pass
                        else:
                            reply.closed.set()
                    self.close_connection = True
                    return
                payload = json.dumps(reply.body).encode()
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST

        self.server = _QuietServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def queue(self, *replies: Reply | SSE | EventStream) -> None:
        with self._lock:
            self._replies.extend(replies)

    def bodies(self) -> list[Any]:
        return [r.body for r in self.requests]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def assert_golden(name: str, actual: Any) -> None:
    """Compare ``actual`` with ``golden/<name>.json``; UPDATE_GOLDEN=1 rewrites the file.

    Golden files are reviewed by hand: they are the request bodies the provider expects.
    """
    path = GOLDEN / f"{name}.json"
    text = json.dumps(actual, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    if os.environ.get("UPDATE_GOLDEN") == "1" or not path.exists():
        if os.environ.get("CI") and not path.exists():
            raise AssertionError(f"golden file {path} is missing")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return
    expected = json.loads(path.read_text())
    assert actual == expected, f"request body differs from {path}"
