"""web_fetch against a real HTTP server on 127.0.0.1, started by the test."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tooldeck import AbortSignal, ToolContext, ToolResult, validate_arguments
from tooldeck.assembly import Toolset, TurnContext
from tooldeck.builtin import load_builtin_registry, web
from tooldeck.builtin.web import html_to_text

PAGE = b"""<!doctype html>
<html><head><title>The  Test Page</title>
<style>body { color: red }</style>
<script>var secret = "do not show";</script>
</head><body>
<nav><a href="/">Home</a></nav>
<h1>Main heading</h1>
<p>First paragraph with <b>bold</b> and an &amp; entity.</p>
<ul><li>one</li><li>two</li></ul>
<noscript>enable javascript</noscript>
<pre>keep   spacing</pre>
</body></html>
"""

STOP = threading.Event()


class Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def send(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == "/page":
            self.send(200, "text/html; charset=utf-8", PAGE)
        elif self.path == "/latin1":
            self.send(200, "text/plain; charset=iso-8859-1", "café".encode("latin-1"))
        elif self.path == "/json":
            self.send(200, "application/json", b'{"answer": 42}')
        elif self.path == "/image":
            self.send(200, "image/png", b"\x89PNG\r\n\x1a\n" + bytes(100))
        elif self.path == "/missing":
            self.send(404, "text/plain", b"nothing here")
        elif self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "/page")
            self.end_headers()
        elif self.path == "/to-file":
            self.send_response(302)
            self.send_header("Location", "file:///etc/passwd")
            self.end_headers()
        elif self.path == "/long":
            self.send(200, "text/plain", b"x" * 50_000)
        elif self.path == "/endless":
            # No length, never ends: only a client that stops reading gets an answer.
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            chunk = b"y" * 16_384
            try:
                while not STOP.is_set():
                    self.wfile.write(chunk)
            except OSError:
                pass
        elif self.path == "/slow":
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and not STOP.is_set():
                time.sleep(0.05)
            self.send(200, "text/plain", b"finally")
        else:
            self.send(404, "text/plain", b"unknown")


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    STOP.clear()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        STOP.set()
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture(autouse=True)
def no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "*")


@pytest.fixture
def turn(tmp_path: Path) -> TurnContext:
    return TurnContext(session_id="s1", home=tmp_path, web_provider="test-provider")


@pytest.fixture
def toolset(turn: TurnContext) -> Toolset:
    return load_builtin_registry().toolset(turn)


async def afetch(
    toolset: Toolset, turn: TurnContext, args: dict[str, Any], sig: AbortSignal | None = None
) -> ToolResult:
    tool = toolset["web_fetch"]
    validated = validate_arguments(tool, json.dumps(args))
    ctx = ToolContext(
        call_id="call-1",
        tool_name="web_fetch",
        session_id=turn.session_id,
        turn=turn,
        toolset=toolset,
        signal=sig or AbortSignal(),
    )
    return await tool.invoke(validated.params, ctx)


def fetch(toolset: Toolset, turn: TurnContext, args: dict[str, Any]) -> ToolResult:
    return asyncio.run(afetch(toolset, turn, args))


def test_web_fetch_reduces_html_to_readable_text(
    toolset: Toolset, turn: TurnContext, server: str
) -> None:
    result = fetch(toolset, turn, {"url": f"{server}/page"})
    text = result.text()
    assert not result.is_error
    assert text.startswith(
        f"URL: {server}/page\nStatus: 200 OK\nContent-Type: text/html; charset=utf-8\n"
        "Title: The Test Page\n\n"
    )
    body = text.split("\n\n", 1)[1]
    assert "# Main heading" in body
    assert "First paragraph with bold and an & entity." in body
    assert "- one\n- two" in body
    assert "keep   spacing" in body
    for hidden in ("secret", "color: red", "enable javascript", "<p>", "The Test Page"):
        assert hidden not in body


def test_web_fetch_text_json_redirect_status_and_binary(
    toolset: Toolset, turn: TurnContext, server: str
) -> None:
    latin = fetch(toolset, turn, {"url": f"{server}/latin1"})
    assert latin.text().endswith("\n\ncafé")
    data = fetch(toolset, turn, {"url": f"{server}/json"})
    assert data.text().endswith('\n\n{"answer": 42}')
    moved = fetch(toolset, turn, {"url": f"{server}/redirect"})
    assert moved.text().startswith(f"URL: {server}/page\nStatus: 200 OK")
    missing = fetch(toolset, turn, {"url": f"{server}/missing"})
    assert not missing.is_error and "Status: 404 Not Found" in missing.text()
    assert missing.text().endswith("nothing here")
    image = fetch(toolset, turn, {"url": f"{server}/image"})
    assert "[Binary content (image/png, 108 bytes read) is not shown" in image.text()


def test_web_fetch_cuts_text_at_max_chars(toolset: Toolset, turn: TurnContext, server: str) -> None:
    result = fetch(toolset, turn, {"url": f"{server}/long", "max_chars": 1000})
    assert "x" * 1000 in result.text() and "x" * 1001 not in result.text()
    assert "[Text cut at 1000 of 50000 characters" in result.text()
    assert result.details["chars"] == 50_000


def test_web_fetch_stops_reading_at_the_size_limit(
    toolset: Toolset, turn: TurnContext, server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(web, "MAX_BYTES", 100_000)
    started = time.monotonic()
    result = fetch(toolset, turn, {"url": f"{server}/endless", "timeout": 10})
    assert time.monotonic() - started < 5  # an endless body: it returned because it stopped
    assert not result.is_error
    assert result.details["bytes_read"] == 100_000 and result.details["capped"]
    assert "[Download stopped at the 100000-byte limit" in result.text()


def test_web_fetch_time_limit(toolset: Toolset, turn: TurnContext, server: str) -> None:
    started = time.monotonic()
    result = fetch(toolset, turn, {"url": f"{server}/slow", "timeout": 1})
    assert time.monotonic() - started < 4
    assert result.is_error and result.text() == f"Timed out after 1 s fetching {server}/slow."


def test_web_fetch_abort_signal_stops_it(toolset: Toolset, turn: TurnContext, server: str) -> None:
    sig = AbortSignal()

    async def main() -> ToolResult:
        asyncio.get_running_loop().call_later(0.3, sig.abort, "user stop")
        return await afetch(toolset, turn, {"url": f"{server}/slow", "timeout": 30}, sig)

    started = time.monotonic()
    result = asyncio.run(main())
    assert time.monotonic() - started < 4
    assert result.is_error and "aborted (user stop)" in result.text()


@pytest.mark.parametrize(
    "url",
    ["ftp://example.com/file", "file:///etc/passwd", "javascript:alert(1)", "example.com/page"],
)
def test_web_fetch_refuses_other_schemes(toolset: Toolset, turn: TurnContext, url: str) -> None:
    result = fetch(toolset, turn, {"url": url})
    assert result.is_error
    assert result.text().startswith(f"Refused {url!r}: only http:// and https:// URLs")


def test_web_fetch_refuses_a_redirect_to_another_scheme(
    toolset: Toolset, turn: TurnContext, server: str
) -> None:
    result = fetch(toolset, turn, {"url": f"{server}/to-file"})
    assert result.is_error and "not http(s)" in result.text()
    assert "root:" not in result.text()


def test_web_fetch_connection_error(toolset: Toolset, turn: TurnContext) -> None:
    result = fetch(toolset, turn, {"url": "http://127.0.0.1:9/", "timeout": 5})
    assert result.is_error and result.text().startswith("Could not fetch http://127.0.0.1:9/")


def test_web_fetch_only_exists_with_a_web_provider(tmp_path: Path) -> None:
    registry = load_builtin_registry()
    without = registry.toolset(TurnContext(session_id="s", home=tmp_path))
    assert "web_fetch" not in without
    with_provider = registry.toolset(TurnContext(session_id="s", home=tmp_path, web_provider="x"))
    assert "web_fetch" in with_provider


def test_html_to_text_handles_broken_markup() -> None:
    title, text = html_to_text("<title>T</title><div>a<p>b<script>x<svg/><li>c")
    assert title == "T"
    assert text == "a\n\nb"  # an unclosed <script> hides the rest
    assert html_to_text("<p>x</p><svg/><p>y</p>")[1] == "x\n\ny"
