"""Each search provider against a local HTTP server that speaks its service's API.

The server (127.0.0.1, started here) answers with the recorded shapes in tests/web_api/
and records every request, so each test checks both directions: what the adapter sends
(path, query or body, auth header) and how it reads the answer, the empty answer, the
auth and quota errors, a timeout, a 5xx and a body that is not JSON. The configured API
host is allowed through the network guard; a redirect from it to another local address
is not. ``ddgs`` is tested the same way, its DuckDuckGo engine pointed at the server.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
import threading
import tracemalloc
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from _local_http import gzip_bomb
from tooldeck.web import (
    BraveSearch,
    DdgsSearch,
    SearchResult,
    SearxngSearch,
    TavilySearch,
    WebSearchError,
)
from tooldeck.web._base import clean_text, host_in, normalize_domain, site_query, tidy_results
from tooldeck.web.netguard import NetPolicy

API = Path(__file__).parent / "web_api"
BRAVE_KEY = "BSAk3yS3cr3t-brave-0123456789"
TAVILY_KEY = "tvly-dev-s3cr3tTAVILYkey987654"


def fixture(name: str) -> bytes:
    return (API / name).read_bytes()


@dataclass
class Answer:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    hang: bool = False  # never answer (until the test ends)


@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any


class ApiServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.answers: list[Answer] = []
        self.seen: list[Seen] = []
        self.release = threading.Event()
        super().__init__((host, 0), _Handler)

    @property
    def url(self) -> str:
        return f"http://{self.server_address[0]}:{self.server_address[1]}"

    def answer(self, *answers: Answer) -> None:
        self.answers.extend(answers)


class _Handler(BaseHTTPRequestHandler):
    server: ApiServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _handle(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        parts = urlsplit(self.path)
        self.server.seen.append(
            Seen(
                self.command,
                parts.path,
                parse_qs(parts.query),
                {k.lower(): v for k, v in self.headers.items()},
                body,
            )
        )
        answer = self.server.answers.pop(0) if self.server.answers else Answer(500, b"{}")
        if answer.hang:
            self.server.release.wait(30)
            return
        self.send_response(answer.status)
        self.send_header("Content-Type", answer.content_type)
        self.send_header("Content-Length", str(len(answer.body)))
        for key, value in answer.headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(answer.body)

    do_GET = _handle
    do_POST = _handle


@pytest.fixture
def api() -> Iterator[ApiServer]:
    server = ApiServer()
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TOOLDECK_WEB_ALLOW", "TOOLDECK_WEB_PROXY", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def failure(coro: Any) -> WebSearchError:
    with pytest.raises(WebSearchError) as info:
        run(coro)
    return info.value


# -- Brave -----------------------------------------------------------------------------------


def brave(api: ApiServer, **kw: Any) -> BraveSearch:
    return BraveSearch(BRAVE_KEY, url=f"{api.url}/res/v1/web/search", **kw)


def test_brave_search_request_and_results(api: ApiServer) -> None:
    api.answer(Answer(body=fixture("brave_search.json")))
    found = run(brave(api, country="us").search("asyncio timeout python", limit=5, recency="week"))
    [seen] = api.seen
    assert (seen.method, seen.path) == ("GET", "/res/v1/web/search")
    assert seen.headers["x-subscription-token"] == BRAVE_KEY
    assert seen.headers["accept"] == "application/json"
    assert seen.query == {
        "q": ["asyncio timeout python"],
        "count": ["5"],
        "text_decorations": ["false"],
        "result_filter": ["web"],
        "freshness": ["pw"],
        "country": ["us"],
    }
    assert found.provider == "brave" and found.query == "asyncio timeout python"
    first, second = found.results
    assert first == SearchResult(
        title="Coroutines and Tasks — Python 3.13 documentation",
        url="https://docs.python.org/3/library/asyncio-task.html",
        snippet=(
            "Timeouts: asyncio.timeout(delay) returns an asynchronous context manager that "
            "can be used to limit the amount of time spent waiting on something."
        ),
        published="2024-10-07",
        source="docs.python.org",
    )
    assert second.published == "3 days ago"  # no page_age: Brave's human age
    assert "<strong>" not in second.snippet


def test_brave_domains_become_site_words_and_filter_the_answer(api: ApiServer) -> None:
    api.answer(Answer(body=fixture("brave_search.json")))
    found = run(brave(api).search("asyncio timeout", domains=["https://Docs.Python.org/3/"]))
    assert api.seen[0].query["q"] == ["asyncio timeout site:docs.python.org"]
    assert [r.url for r in found.results] == ["https://docs.python.org/3/library/asyncio-task.html"]
    api.answer(Answer(body=fixture("brave_search.json")))
    run(brave(api).search("x", domains=["a.example", "*.b.example"]))
    assert api.seen[1].query["q"] == ["x (site:a.example OR site:b.example)"]


def test_brave_empty_answer(api: ApiServer) -> None:
    api.answer(Answer(body=fixture("brave_empty.json")))
    found = run(brave(api).search("zxqv nothing matches this"))
    assert found.results == () and found.provider == "brave"


def test_brave_invalid_token_is_an_auth_error(api: ApiServer) -> None:
    api.answer(Answer(422, fixture("brave_invalid_token.json")))
    error = failure(brave(api).search("x"))
    assert (error.kind, error.status, error.code) == ("auth", 422, "SUBSCRIPTION_TOKEN_INVALID")
    assert error.line == (
        "Web search failed (brave): The provided subscription token is invalid. — the search "
        "key is missing or not accepted; a user has to fix the setup."
    )


def test_brave_rate_limit_is_a_quota_error_with_its_reset(api: ApiServer) -> None:
    headers = {
        "X-RateLimit-Limit": "1, 2000",
        "X-RateLimit-Policy": "1;w=1, 2000;w=2592000",
        "X-RateLimit-Remaining": "0, 1983",
        "X-RateLimit-Reset": "1, 1419704",
    }
    api.answer(Answer(429, fixture("brave_rate_limited.json"), headers=headers))
    error = failure(brave(api).search("x"))
    assert (error.kind, error.status, error.retry_after) == ("quota", 429, 1.0)
    assert error.detail == {
        "provider": "brave",
        "kind": "quota",
        "status": 429,
        "retry_after": 1.0,
        "code": "RATE_LIMITED",
        "message": "Request rate limit exceeded for plan.",
    }
    assert "(retry after 1 s)" in error.line


def test_a_timeout_is_a_timeout_error(api: ApiServer) -> None:
    api.answer(Answer(hang=True))
    error = failure(brave(api, timeout=0.3).search("x"))
    assert error.kind == "timeout" and "no answer from" in error.message


def test_server_errors_and_bodies_that_are_not_json(api: ApiServer) -> None:
    api.answer(Answer(503, b"upstream down", content_type="text/plain"))
    assert failure(brave(api).search("x")).kind == "unavailable"
    api.answer(Answer(200, b"<html>captcha</html>", content_type="text/html"))
    error = failure(brave(api).search("x"))
    assert error.kind == "bad_response" and "not JSON" in error.message
    api.answer(Answer(200, b'{"web": {"results": "nope"}}'))
    assert failure(brave(api).search("x")).kind == "bad_response"


def test_connection_refused_is_unavailable() -> None:
    error = failure(BraveSearch(BRAVE_KEY, url="http://127.0.0.1:9/x", timeout=5).search("x"))
    assert error.kind == "unavailable" and error.message.startswith("cannot reach")


# -- Tavily ----------------------------------------------------------------------------------


def tavily(api: ApiServer, **kw: Any) -> TavilySearch:
    return TavilySearch(TAVILY_KEY, url=f"{api.url}/search", **kw)


def test_tavily_search_request_and_results(api: ApiServer) -> None:
    api.answer(Answer(body=fixture("tavily_search.json")))
    found = run(
        tavily(api, include_answer=True).search(
            "pgbouncer too many clients postgres 16",
            limit=3,
            recency="month",
            domains=["postgresql.org", "www.pgbouncer.org"],
        )
    )
    [seen] = api.seen
    assert (seen.method, seen.path) == ("POST", "/search")
    assert seen.headers["authorization"] == f"Bearer {TAVILY_KEY}"
    assert seen.headers["content-type"] == "application/json"
    assert seen.body == {
        "query": "pgbouncer too many clients postgres 16",
        "max_results": 3,
        "search_depth": "basic",
        "topic": "general",
        "include_answer": True,
        "time_range": "month",
        "include_domains": ["postgresql.org", "www.pgbouncer.org"],
    }
    assert "api_key" not in seen.body  # the key travels only in the header
    assert found.answer and found.answer.startswith("The error usually means")
    assert [r.url for r in found.results] == [
        "https://www.postgresql.org/docs/16/runtime-config-connection.html",
        "https://www.pgbouncer.org/config.html",
    ]
    assert found.results[1].published == "Mon, 02 Jun 2025 09:00:00 GMT"
    assert found.results[0].published is None


def test_tavily_empty_and_errors(api: ApiServer) -> None:
    api.answer(Answer(body=fixture("tavily_empty.json")))
    assert run(tavily(api).search("zxqv")).results == ()
    api.answer(Answer(401, fixture("tavily_invalid_key.json")))
    error = failure(tavily(api).search("x"))
    assert (error.kind, error.status) == ("auth", 401)
    assert error.message == "Unauthorized: missing or invalid API key."
    api.answer(Answer(432, fixture("tavily_plan_limit.json")))
    assert failure(tavily(api).search("x")).kind == "quota"
    api.answer(
        Answer(429, b'{"detail": {"error": "Rate limit exceeded"}}', headers={"Retry-After": "7"})
    )
    limited = failure(tavily(api).search("x"))
    assert (limited.kind, limited.retry_after) == ("quota", 7.0)
    api.answer(Answer(400, b'{"detail": {"error": "Query is too long."}}'))
    assert failure(tavily(api).search("x")).kind == "bad_request"
    api.answer(Answer(hang=True))
    assert failure(tavily(api, timeout=0.3).search("x")).kind == "timeout"


# -- SearXNG ---------------------------------------------------------------------------------


def test_searxng_search_request_and_results(api: ApiServer) -> None:
    api.answer(Answer(body=fixture("searxng_search.json")))
    engine = SearxngSearch(api.url + "/", language="en", safesearch=1)
    found = run(engine.search("kyoto bamboo grove", limit=10, recency="year"))
    [seen] = api.seen
    assert (seen.method, seen.path) == ("GET", "/search")
    assert seen.query == {
        "q": ["kyoto bamboo grove"],
        "format": ["json"],
        "pageno": ["1"],
        "time_range": ["year"],
        "language": ["en"],
        "safesearch": ["1"],
    }
    assert "authorization" not in seen.headers
    assert [(r.title, r.source, r.published) for r in found.results] == [
        ("Arashiyama Bamboo Grove", "duckduckgo", None),
        ("Arashiyama - Wikipedia", "wikipedia", "2026-09-14"),
    ]
    assert found.notes == ("engines that did not answer: brave, qwant",)


def test_searxng_without_the_json_format_says_how_to_enable_it(api: ApiServer) -> None:
    api.answer(Answer(403, b"<html>403 Forbidden</html>", content_type="text/html"))
    error = failure(SearxngSearch(api.url).search("x"))
    assert error.kind == "config" and "add json to search.formats" in error.message
    api.answer(Answer(429, b"Too Many Requests", content_type="text/plain"))
    assert failure(SearxngSearch(api.url).search("x")).kind == "quota"
    api.answer(Answer(body=fixture("searxng_empty.json")))
    assert run(SearxngSearch(api.url).search("zxqv")).results == ()


def test_searxng_credentials_go_as_basic_auth_and_are_never_shown(api: ApiServer) -> None:
    api.answer(Answer(body=fixture("searxng_empty.json")), Answer(503, b"down"))
    host = api.url.removeprefix("http://")
    engine = SearxngSearch(f"http://searcher:pa55w0rd-xyz@{host}")
    run(engine.search("x"))
    assert api.seen[0].headers["authorization"].startswith("Basic ")
    error = failure(engine.search("x"))
    for text in (repr(engine), error.line, json.dumps(error.detail)):
        assert "pa55w0rd-xyz" not in text


def test_the_configured_host_is_allowed_but_a_redirect_elsewhere_is_not(api: ApiServer) -> None:
    # The instance at 127.0.0.1 was configured, so the guard lets it through; it answers
    # with a redirect to another local address, which nobody configured.
    api.answer(Answer(302, b"", headers={"Location": "http://127.0.0.2:9/search"}))
    error = failure(SearxngSearch(api.url).search("x"))
    assert error.kind == "refused" and "127.0.0.2 is a loopback address" in error.message
    # A strict policy of the user's (no allow-list) still reaches the configured host.
    api.answer(Answer(body=fixture("searxng_empty.json")))
    run(SearxngSearch(api.url, net=NetPolicy()).search("x"))
    assert len(api.seen) == 2


def test_a_compressed_answer_is_capped_as_it_inflates(api: ApiServer) -> None:
    # A service (or whoever answers at its address) sends a stacked gzip bomb: the cap
    # on an answer counts inflated bytes as they come, so the bomb costs little memory.
    api.answer(Answer(body=gzip_bomb(), headers={"Content-Encoding": "gzip, gzip"}))
    tracemalloc.start()
    try:
        error = failure(SearxngSearch(api.url).search("x"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert error.kind == "bad_response" and "larger than 5000000 bytes" in error.message
    assert peak < 64 * 2**20, f"the bomb took {peak / 2**20:.0f} MiB"
    assert api.seen[0].headers["accept-encoding"] == "gzip, deflate"  # what can be bounded
    # a real compressed answer reads as usual; a coding that was not asked for is refused
    answer = gzip.compress(fixture("searxng_empty.json"))
    api.answer(Answer(body=answer, headers={"Content-Encoding": "gzip"}))
    assert run(SearxngSearch(api.url).search("zxqv")).results == ()
    api.answer(Answer(body=b"\x8b\x00", headers={"Content-Encoding": "br"}))
    error = failure(SearxngSearch(api.url).search("x"))
    assert error.kind == "bad_response" and "encoded with 'br', which is not decoded" in (
        error.message
    )


def test_bad_configuration_is_a_config_error() -> None:
    for make in (
        lambda: BraveSearch(""),
        lambda: TavilySearch(""),
        lambda: SearxngSearch("ftp://x"),
        lambda: SearxngSearch("not a url"),
    ):
        with pytest.raises(WebSearchError) as info:
            make()
        assert info.value.kind == "config"


# -- ddgs (keyless) ----------------------------------------------------------------------------


@pytest.fixture
def ddg_engine(api: ApiServer, monkeypatch: pytest.MonkeyPatch) -> ApiServer:
    engines = pytest.importorskip("ddgs.engines.duckduckgo")
    monkeypatch.setattr(engines.Duckduckgo, "search_url", f"{api.url}/html/")
    return api


def test_ddgs_reads_duckduckgo_results_from_the_local_server(ddg_engine: ApiServer) -> None:
    ddg_engine.answer(Answer(body=fixture("ddgs_duckduckgo.html"), content_type="text/html"))
    engine = DdgsSearch(backend="duckduckgo", region="uk-en")
    found = run(engine.search("asyncio timeout", limit=5, recency="month"))
    [seen] = ddg_engine.seen
    assert (seen.method, seen.path) == ("POST", "/html/")
    form = parse_qs(seen.body) if isinstance(seen.body, str) else {}
    assert form["q"] == ["asyncio timeout"] and form["l"] == ["uk-en"] and form["df"] == ["m"]
    by_url = {r.url: r for r in found.results}  # ddgs ranks the hits itself
    assert sorted(by_url) == [
        "https://docs.python.org/3/library/asyncio-task.html",
        "https://superfastpython.com/asyncio-timeout/",
    ]
    docs = by_url["https://docs.python.org/3/library/asyncio-task.html"]
    assert docs.title == "Coroutines and Tasks — Python 3.13 documentation"
    assert docs.snippet.startswith("asyncio.timeout(delay) returns")


def test_ddgs_no_results_is_empty_and_a_timeout_is_a_timeout(ddg_engine: ApiServer) -> None:
    page = b"<html><body><div id='links'></div></body></html>"
    ddg_engine.answer(Answer(body=page, content_type="text/html"))
    assert run(DdgsSearch(backend="duckduckgo").search("zxqv")).results == ()
    ddg_engine.answer(Answer(hang=True))
    error = failure(DdgsSearch(backend="duckduckgo", timeout=1).search("slow"))
    assert error.kind in ("timeout", "unavailable")


# -- secrets and shared helpers ----------------------------------------------------------------


def test_keys_never_reach_logs_messages_or_reprs(
    api: ApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # every logger, httpx and httpcore included
    echo = json.dumps({"error": {"code": "X", "detail": f"bad token {BRAVE_KEY}"}}).encode()
    api.answer(
        Answer(body=fixture("brave_search.json")),
        Answer(401, echo),
        Answer(body=fixture("tavily_search.json")),
        Answer(401, json.dumps({"detail": {"error": f"key {TAVILY_KEY} unknown"}}).encode()),
    )
    b, t = brave(api), tavily(api)
    run(b.search("x"))
    brave_error = failure(b.search("x"))
    run(t.search("x"))
    tavily_error = failure(t.search("x"))
    texts = [repr(b), repr(t), brave_error.line, tavily_error.line, str(brave_error)]
    texts += [json.dumps(e.detail) for e in (brave_error, tavily_error)]
    texts += [r.getMessage() for r in caplog.records] + [str(r.args) for r in caplog.records]
    assert any("GET" in r.getMessage() for r in caplog.records)  # logging was on
    for text in texts:
        assert BRAVE_KEY not in text and TAVILY_KEY not in text
    assert "bad token ***" in brave_error.message


def test_result_helpers() -> None:
    assert clean_text("<b>a</b> &amp;\n b") == "a & b"
    assert clean_text("x" * 500, 10) == "x" * 9 + "…"
    assert clean_text(None) == ""
    assert normalize_domain(" HTTPS://Docs.Example.com:443/x ") == "docs.example.com"
    assert normalize_domain("*.example.org.") == "example.org"
    assert host_in("https://a.docs.example.com/x", ["docs.example.com"])
    assert not host_in("https://evildocs.example.com/", ["docs.example.com"])
    assert site_query("q", []) == "q"
    hits = [
        SearchResult("a", "https://a.example/1"),
        SearchResult("dup", "https://a.example/1"),
        SearchResult("js", "javascript:alert(1)"),
        SearchResult("b", "https://b.example/"),
        SearchResult("c", "http://sub.a.example/"),
    ]
    assert [h.title for h in tidy_results(hits, limit=10)] == ["a", "b", "c"]
    assert [h.title for h in tidy_results(hits, limit=10, domains=["a.example"])] == ["a", "c"]
    assert [h.title for h in tidy_results(hits, limit=1)] == ["a"]
