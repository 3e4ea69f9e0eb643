"""Real HTTP servers on local addresses for the web tests, each recording what reached it.

A server answers a path given in ``routes`` with that route's headers and body as they are
(no ``Content-Length`` unless the route gives one: the body then ends with the connection),
``/redirect?to=URL`` with a 302 to URL, a request in absolute form (``GET http://host/path``,
what a client sends to a proxy) with ``proxied <url>``, and anything else with
``served by <name>: <path>``. ``hits`` lists every request line that
arrived, so a test can prove that nothing reached a server it must not reach.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeAlias
from urllib.parse import parse_qs, urlsplit

Routes: TypeAlias = dict[str, tuple[list[tuple[str, str]], bytes]]
"""``path -> (headers, body)``: what a server answers (status 200) for a path."""


class RecordingServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host: str, port: int, name: str, routes: Routes | None = None) -> None:
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.name = name
        self.routes = routes or {}
        self.hits: list[str] = []
        self.sni: list[str | None] = []
        super().__init__((host, port), RecordingHandler)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def url(self) -> str:
        host = str(self.server_address[0])
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}"


class RecordingHandler(BaseHTTPRequestHandler):
    server: RecordingServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.server.hits.append(f"{self.command} {self.path} Host={self.headers.get('Host')}")
        parts = urlsplit(self.path)
        if self.path in self.server.routes:
            headers, content = self.server.routes[self.path]
            self.send_response(200)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            with contextlib.suppress(OSError):  # the client stopped reading (a cap)
                self.wfile.write(content)
            return
        if parts.scheme:
            body = f"proxied {self.path}".encode()
        elif parts.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", parse_qs(parts.query)["to"][0])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        else:
            body = f"served by {self.server.name}: {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@contextlib.contextmanager
def serving(
    host: str,
    name: str,
    port: int = 0,
    tls: ssl.SSLContext | None = None,
    routes: Routes | None = None,
) -> Iterator[RecordingServer]:
    """A recording server on ``host:port`` (port 0: any free one), in a thread."""
    httpd = RecordingServer(host, port, name, routes)
    if tls is not None:
        tls.sni_callback = lambda sock, sni, ctx: httpd.sni.append(sni)  # type: ignore[assignment,misc,return-value]
        httpd.socket = tls.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


@contextlib.contextmanager
def two_on_one_port(first: str, second: str) -> Iterator[tuple[RecordingServer, RecordingServer]]:
    """Servers on two local addresses sharing one port (for DNS rebinding tests)."""
    for _ in range(20):
        with serving(first, first) as one:
            try:
                cm = serving(second, second, port=one.port)
                two = cm.__enter__()
            except OSError:
                continue  # that port is taken on the second address: try another
            try:
                yield one, two
            finally:
                cm.__exit__(None, None, None)
            return
    raise RuntimeError(f"no port free on both {first} and {second}")


def gzip_bomb(mib: int = 384, layers: int = 2) -> bytes:
    """``mib`` MiB of zeros gzipped ``layers`` times: about 800 bytes for 384 MiB in two layers
    (send it with ``Content-Encoding: gzip, gzip``)."""
    packed = b""
    for layer in range(layers):
        squeeze = zlib.compressobj(6, zlib.DEFLATED, 31)
        if layer == 0:
            zeros = bytes(1 << 20)
            packed = b"".join(squeeze.compress(zeros) for _ in range(mib)) + squeeze.flush()
        else:
            packed = squeeze.compress(packed) + squeeze.flush()
    return packed
