"""Real servers that notice being used: an HTTP server that counts requests, a FIFO that
counts readers. Shared by the tests that prove a schema never fetches or reads anything.
"""

from __future__ import annotations

import errno
import http.server
import json
import os
import threading
from pathlib import Path
from typing import Any


class CountingServer:
    """An HTTP server on 127.0.0.1 that serves a schema for every path and counts requests."""

    def __init__(self) -> None:
        hits: list[str] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                hits.append(self.path)
                body = json.dumps({"type": "string"}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.hits = hits
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> CountingServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


class WatchedFifo:
    """A FIFO at ``path``: anyone who opens it to read is served a schema and counted.

    Opening a FIFO for reading blocks until a writer comes; the watcher keeps trying to
    open it for writing without blocking, which succeeds only while a reader waits.
    """

    def __init__(self, directory: Path) -> None:
        self.path = directory / "target.json"
        os.mkfifo(self.path)
        self.opened = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        served = False  # the current reader (if any) has had its schema
        while not self._stop.wait(0.002):
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as exc:
                assert exc.errno == errno.ENXIO  # nobody is reading
                served = False
                continue
            try:
                if not served:
                    self.opened += 1
                    os.write(fd, json.dumps({"type": "string"}).encode())
                    served = True
            finally:
                os.close(fd)

    def __enter__(self) -> WatchedFifo:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
