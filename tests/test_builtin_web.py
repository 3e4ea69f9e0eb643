"""web_fetch against real HTTP servers on local addresses, started by the tests.

Local addresses are exactly what web_fetch refuses by default, so the functional tests
allow 127.0.0.1 the way a user would (``TOOLDECK_WEB_ALLOW``); the SSRF tests at the end
leave it out and prove that nothing reaches the servers.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from _local_http import RecordingServer, serving, two_on_one_port
from tooldeck import AbortSignal, ToolContext, ToolResult, validate_arguments
from tooldeck.assembly import Toolset, TurnContext
from tooldeck.builtin import load_builtin_registry, web
from tooldeck.builtin.web import html_to_text
from tooldeck.web.netguard import NetPolicy

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


PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy")


@pytest.fixture(autouse=True)
def no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*PROXY_VARIABLES, "all_proxy", "NO_PROXY", "no_proxy", "TOOLDECK_WEB_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("TOOLDECK_WEB_ALLOW", raising=False)


@pytest.fixture
def allow_local(monkeypatch: pytest.MonkeyPatch) -> None:
    """Allow the test server's address, as a user reaching an intranet server would."""
    monkeypatch.setenv("TOOLDECK_WEB_ALLOW", "127.0.0.1")


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
    toolset: Toolset, turn: TurnContext, server: str, allow_local: None
) -> None:
    result = fetch(toolset, turn, {"url": f"{server}/page"})
    text = result.text()
    assert not result.is_error
    assert text.startswith(
        f"Title: The Test Page\nURL: {server}/page\nStatus: 200 OK\n"
        "Content-Type: text/html; charset=utf-8\n\n"
    )
    body = text.split("\n\n", 1)[1]
    assert "# Main heading" in body
    assert "First paragraph with **bold** and an & entity." in body
    assert "- one\n- two" in body
    assert "```\nkeep   spacing\n```" in body
    for hidden in ("secret", "color: red", "enable javascript", "<p>", "The Test Page", "Home"):
        assert hidden not in body


def test_web_fetch_text_json_redirect_status_and_binary(
    toolset: Toolset, turn: TurnContext, server: str, allow_local: None
) -> None:
    latin = fetch(toolset, turn, {"url": f"{server}/latin1"})
    assert latin.text().endswith("\n\ncafé")
    data = fetch(toolset, turn, {"url": f"{server}/json"})
    assert data.text().endswith('\n\n{"answer": 42}')
    moved = fetch(toolset, turn, {"url": f"{server}/redirect"})
    assert moved.text().startswith(f"Title: The Test Page\nURL: {server}/page\nStatus: 200 OK")
    missing = fetch(toolset, turn, {"url": f"{server}/missing"})
    assert not missing.is_error and "Status: 404 Not Found" in missing.text()
    assert missing.text().endswith("nothing here")
    image = fetch(toolset, turn, {"url": f"{server}/image"})
    assert "[Binary content (image/png, 108 bytes read) is not shown" in image.text()


def test_web_fetch_cuts_text_at_max_chars(
    toolset: Toolset, turn: TurnContext, server: str, allow_local: None
) -> None:
    result = fetch(toolset, turn, {"url": f"{server}/long", "max_chars": 1000})
    assert "x" * 1000 in result.text() and "x" * 1001 not in result.text()
    assert "[Text cut at 1000 of 50000 characters" in result.text()
    assert result.details["chars"] == 50_000


def test_web_fetch_stops_reading_at_the_size_limit(
    toolset: Toolset,
    turn: TurnContext,
    server: str,
    monkeypatch: pytest.MonkeyPatch,
    allow_local: None,
) -> None:
    monkeypatch.setattr(web.fetch, "MAX_BYTES", 100_000)
    started = time.monotonic()
    result = fetch(toolset, turn, {"url": f"{server}/endless", "timeout": 10})
    assert time.monotonic() - started < 5  # an endless body: it returned because it stopped
    assert not result.is_error
    assert result.details["bytes_read"] == 100_000 and result.details["capped"]
    assert "[Download stopped at the byte limit" in result.text()


def test_web_fetch_time_limit(
    toolset: Toolset, turn: TurnContext, server: str, allow_local: None
) -> None:
    started = time.monotonic()
    result = fetch(toolset, turn, {"url": f"{server}/slow", "timeout": 1})
    assert time.monotonic() - started < 4
    assert result.is_error and result.text() == f"Timed out after 1 s fetching {server}/slow."


def test_web_fetch_abort_signal_stops_it(
    toolset: Toolset, turn: TurnContext, server: str, allow_local: None
) -> None:
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
    toolset: Toolset, turn: TurnContext, server: str, allow_local: None
) -> None:
    result = fetch(toolset, turn, {"url": f"{server}/to-file"})
    assert result.is_error and "not http(s)" in result.text()
    assert "root:" not in result.text()


def test_web_fetch_connection_error(toolset: Toolset, turn: TurnContext, allow_local: None) -> None:
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


# -- SSRF: only public addresses, judged on what is connected to ----------------------

LOOPBACK_SPELLINGS = [
    "127.0.0.1",
    "localhost",
    "LOCALHOST",
    "[::1]",
    "[::ffff:127.0.0.1]",
    "[::ffff:7f00:1]",
    "[0:0:0:0:0:ffff:127.0.0.1]",
    "2130706433",
    "017700000001",
    "0x7f000001",
    "0x7f.1",
    "0177.1",
    "127.1",
    "0.0.0.0",
    "0",
    "[::]",
    "evil.example@127.0.0.1",
    "user:pass@localhost",
]


@pytest.fixture(scope="module")
def loopback() -> Iterator[tuple[RecordingServer, RecordingServer]]:
    """Recording servers on 127.0.0.1 and ::1, on one port."""
    with two_on_one_port("127.0.0.1", "::1") as servers:
        yield servers


@pytest.mark.parametrize("host", LOOPBACK_SPELLINGS)
def test_web_fetch_refuses_loopback_in_every_spelling(
    toolset: Toolset,
    turn: TurnContext,
    loopback: tuple[RecordingServer, RecordingServer],
    monkeypatch: pytest.MonkeyPatch,
    host: str,
) -> None:
    v4, v6 = loopback
    before = len(v4.hits) + len(v6.hits)
    url = f"http://{host}:{v4.port}/probe"
    result = fetch(toolset, turn, {"url": url, "timeout": 5})
    assert result.is_error and result.text().startswith("Refused: ")
    assert "web_fetch only reaches public addresses" in result.text()
    assert "\n" not in result.text()
    assert re.search(r"a loopback address|an unspecified", result.text())
    assert len(v4.hits) + len(v6.hits) == before  # nothing reached either server
    # The same URL does reach a server once a user allows loopback: the refusal above
    # is the guard's, not a connection that would have failed anyway.
    monkeypatch.setenv("TOOLDECK_WEB_ALLOW", "127.0.0.0/8 ::1 0.0.0.0/8 ::/128")
    allowed = fetch(toolset, turn, {"url": url, "timeout": 5})
    assert not allowed.is_error and allowed.text().endswith(": /probe")
    assert len(v4.hits) + len(v6.hits) == before + 1


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a cloud metadata"),
        ("http://[fd00:ec2::254]/latest/meta-data/", "fd00:ec2::254 is a cloud metadata"),
        ("http://100.100.100.200/latest/meta-data/", "100.100.100.200 is a cloud metadata"),
        ("http://10.0.0.1/", "10.0.0.1 is a private (RFC 1918) address"),
        ("http://192.168.1.1:8080/admin", "192.168.1.1 is a private (RFC 1918) address"),
        ("http://172.16.0.1/", "172.16.0.1 is a private (RFC 1918) address"),
        ("http://[fd12:3456::1]/", "fd12:3456::1 is a unique local (private) address"),
        ("http://100.64.0.1/", "100.64.0.1 is a carrier-grade NAT (shared) address"),
        ("http://169.254.10.10/", "169.254.10.10 is a link-local address"),
        ("http://[fe80::1]/", "fe80::1 is a link-local address"),
        ("http://224.0.0.251/", "224.0.0.251 is a multicast address"),
        ("http://255.255.255.255/", "255.255.255.255 is the broadcast address"),
        ("https://198.18.0.1/", "198.18.0.1 is a benchmarking address"),
        (
            "http://[64:ff9b::a9fe:a9fe]/",
            "64:ff9b::a9fe:a9fe is a NAT64 form of 169.254.169.254, a cloud",
        ),
        ("http://[2002:a00:1::]/", "2002:a00:1:: is a 6to4 form of 10.0.0.1, a private"),
    ],
)
def test_web_fetch_refuses_private_link_local_and_metadata_addresses(
    toolset: Toolset, turn: TurnContext, url: str, reason: str
) -> None:
    result = fetch(toolset, turn, {"url": url, "timeout": 5})
    assert result.is_error and result.text().startswith(f"Refused: {reason}")


def test_metadata_needs_its_exact_address_even_inside_an_allowed_range(
    toolset: Toolset, turn: TurnContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLDECK_WEB_ALLOW", "169.254.0.0/16")
    result = fetch(toolset, turn, {"url": "http://169.254.169.254/", "timeout": 5})
    assert result.text() == (
        "Refused: 169.254.169.254 is a cloud metadata address; web_fetch only reaches public "
        "addresses (only its exact address in TOOLDECK_WEB_ALLOW allows it)."
    )


@pytest.mark.parametrize(
    "target",
    [
        "http://127.0.0.1:{port}/secret",
        "http://localhost:{port}/secret",
        "http://[::ffff:127.0.0.1]:{port}/secret",
        "http://2130706433:{port}/secret",
        "http://[::1]:{port}/secret",
    ],
)
def test_web_fetch_refuses_a_redirect_into_loopback(
    toolset: Toolset,
    turn: TurnContext,
    loopback: tuple[RecordingServer, RecordingServer],
    monkeypatch: pytest.MonkeyPatch,
    target: str,
) -> None:
    # The first hop is a server the user allowed (127.0.0.2); it redirects to the
    # loopback servers, which nobody allowed.
    v4, v6 = loopback
    before = len(v4.hits) + len(v6.hits)
    monkeypatch.setenv("TOOLDECK_WEB_ALLOW", "127.0.0.2")
    hop = target.format(port=v4.port)
    with serving("127.0.0.2", "allowed") as first:
        url = f"{first.url}/redirect?to={hop}"
        result = fetch(toolset, turn, {"url": url, "timeout": 5})
        assert first.hits == [f"GET /redirect?to={hop} Host=127.0.0.2:{first.port}"]
    assert result.is_error
    assert result.text().startswith(f"Refused: {url} redirected to {hop}, and ")
    assert "a loopback address; web_fetch only reaches public addresses" in result.text()
    assert len(v4.hits) + len(v6.hits) == before


def test_web_fetch_follows_at_most_five_redirects(
    toolset: Toolset, turn: TurnContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLDECK_WEB_ALLOW", "127.0.0.2")
    with serving("127.0.0.2", "hops") as server:
        url = f"{server.url}/end"
        for _ in range(6):
            url = f"{server.url}/redirect?to={quote(url, safe='')}"
        result = fetch(toolset, turn, {"url": url, "timeout": 5})
        assert result.text() == f"Too many redirects (more than 5) for {url}."
        assert len(server.hits) == 6 and not any("/end" in hit.split()[1] for hit in server.hits)


def test_web_fetch_ignores_proxy_environment_variables(
    toolset: Toolset, turn: TurnContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    with serving("127.0.0.3", "proxy") as proxy, serving("127.0.0.2", "site") as site:
        for name in PROXY_VARIABLES:
            monkeypatch.setenv(name, proxy.url)
        monkeypatch.setenv("TOOLDECK_WEB_ALLOW", "127.0.0.2")
        served = fetch(toolset, turn, {"url": f"{site.url}/direct", "timeout": 5})
        assert served.text().endswith("served by site: /direct")
        refused = fetch(toolset, turn, {"url": "http://localhost:9/", "timeout": 5})
        assert refused.text().startswith("Refused: localhost resolves to ")
        assert proxy.hits == []


def test_web_fetch_allows_what_a_user_allows(
    toolset: Toolset,
    tmp_path: Path,
    loopback: tuple[RecordingServer, RecordingServer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    v4, _ = loopback
    monkeypatch.setenv("TOOLDECK_WEB_ALLOW", "localhost")  # by name: any address it has
    result = fetch(
        toolset,
        TurnContext("s", tmp_path, web_provider="p"),
        {"url": f"http://localhost:{v4.port}/named"},
    )
    assert result.text().endswith(": /named")
    # An explicit policy on the turn replaces the environment's.
    strict = TurnContext("s", tmp_path, web_provider="p", web_access=NetPolicy())
    refused = fetch(
        load_builtin_registry().toolset(strict),
        strict,
        {"url": f"http://localhost:{v4.port}/named"},
    )
    assert refused.text().startswith("Refused: localhost resolves to ")


def test_web_fetch_dns_rebinding_connects_to_the_checked_address(tmp_path: Path) -> None:
    with two_on_one_port("127.0.0.2", "127.0.0.1") as (public, inner):
        answers = iter([["127.0.0.2"]])

        async def rebinding(host: str, port: int) -> list[str]:
            return next(answers, ["127.0.0.1"])  # first the allowed address, then loopback

        turn = TurnContext(
            "s",
            tmp_path,
            web_provider="p",
            web_access=NetPolicy(allow=("127.0.0.2",), resolver=rebinding),
        )
        toolset = load_builtin_registry().toolset(turn)
        url = f"http://rebind.test:{public.port}/page"
        first = fetch(toolset, turn, {"url": url})
        assert first.text().endswith("served by 127.0.0.2: /page")
        second = fetch(toolset, turn, {"url": url})
        assert second.text().startswith("Refused: rebind.test resolves to 127.0.0.1, a loopback")
        assert len(public.hits) == 1 and inner.hits == []


def test_web_fetch_bad_allow_list_is_one_line(
    toolset: Toolset, turn: TurnContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLDECK_WEB_ALLOW", "wiki.corp, 10.0.0.0/33")
    result = fetch(toolset, turn, {"url": "https://example.org/"})
    assert result.is_error and result.text() == (
        "Not fetched: web_fetch is misconfigured (TOOLDECK_WEB_ALLOW: '10.0.0.0/33' is not a "
        "host name, an IP address or a CIDR range)."
    )
