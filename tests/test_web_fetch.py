"""web_fetch on saved pages served by a local HTTP server: Markdown, charsets, PDFs, raw,
the policy on redirect hops, and a provider's own fetch.

The pages (tests/web_pages/) are served at their own paths with their own content types,
so relative links must come out absolute against the served URL. Each page is checked
with the ``web`` extra (trafilatura) and with the standard-library fallback.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import threading
from collections.abc import Iterator
from html import unescape as html_unescape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tooldeck import AbortSignal, ToolContext, ToolResult, validate_arguments
from tooldeck.assembly import Toolset, TurnContext
from tooldeck.builtin import load_builtin_registry
from tooldeck.builtin.web import Fetched, fetch, markdown, worker
from tooldeck.context import LiveProtection
from tooldeck.policy import Policy, SessionPolicy

sys.path.insert(0, str(Path(__file__).parent / "web_pages"))
from pages import HELD_OUT, PAGES, PDF, Page

ALL_PAGES: tuple[Page, ...] = (*PAGES, HELD_OUT)
ROUTES: dict[str, tuple[str, bytes]] = {p.path: (p.content_type, p.body) for p in (*ALL_PAGES, PDF)}
# A real page, not one written for the tests: Node.js's own API documentation for
# node:path (v20.20.2, as Debian's nodejs package ships it; MIT licence, see
# tests/web_pages/real/README.md).
REAL_NODE_PAGE = Path(__file__).parent / "web_pages" / "real" / "nodejs_path.html"
ROUTES["/api/path.html"] = ("text/html; charset=utf-8", REAL_NODE_PAGE.read_bytes())
ROUTES["/notes.txt"] = ("text/plain; charset=utf-8", b"plain text, kept as it is\n")
ROUTES["/untyped.pdf"] = ("", PDF.body)
ROUTES["/broken.pdf"] = ("application/pdf", PDF.body[: len(PDF.body) // 2])
ROUTES["/latin1"] = (
    "text/html",
    "<html><body><main><p>café crème</p></main></body></html>".encode("latin-1"),
)
ROUTES["/bom"] = ("text/html", b"\xef\xbb\xbf<html><body><p>na\xc3\xafve</p></body></html>")


class Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        if self.path.startswith("/go?to="):
            self.send_response(302)
            self.send_header("Location", self.path.split("=", 1)[1])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        content_type, body = ROUTES.get(self.path, ("text/plain", b"not found"))
        self.send_response(200 if self.path in ROUTES else 404)
        if content_type:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture(autouse=True)
def allow_local(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "TOOLDECK_WEB_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TOOLDECK_WEB_ALLOW", "127.0.0.1")


def without(monkeypatch: pytest.MonkeyPatch, where: Path, pool: worker._Pool, *names: str) -> None:
    """Convert pages as if ``names`` were not installed: with workers (``pool``) that
    start with a folder on their path where importing each of them fails."""
    for name in names:
        (where / f"{name}.py").write_text(f"raise ImportError('{name}: not installed here')\n")
    monkeypatch.syspath_prepend(str(where))  # workers start with the caller's sys.path
    monkeypatch.setattr(worker, "_pool", pool)


@pytest.fixture(scope="module")
def plain_workers() -> Iterator[worker._Pool]:
    pool = worker._Pool()
    yield pool
    pool.close()


@pytest.fixture(params=["trafilatura", "html.parser"])
def converter(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> str:
    if request.param == "html.parser":  # the web extra's trafilatura is not installed
        pool = request.getfixturevalue("plain_workers")
        without(monkeypatch, tmp_path_factory.mktemp("no-trafilatura"), pool, "trafilatura")
    return str(request.param)


def invoke(
    turn: TurnContext, args: dict[str, Any], protection: LiveProtection | None = None
) -> ToolResult:
    toolset: Toolset = load_builtin_registry().toolset(turn)
    tool = toolset["web_fetch"]
    ctx = ToolContext(
        call_id="call-1",
        tool_name="web_fetch",
        session_id=turn.session_id,
        turn=turn,
        toolset=toolset,
        signal=AbortSignal(),
        protection=protection,
    )
    return asyncio.run(tool.invoke(validate_arguments(tool, json.dumps(args)).params, ctx))


@pytest.fixture
def turn(tmp_path: Path) -> TurnContext:
    return TurnContext("s", tmp_path, web_provider="fetch-only")


@pytest.mark.parametrize("page", ALL_PAGES, ids=[p.file for p in ALL_PAGES])
def test_saved_pages_come_back_as_markdown(
    page: Page, site: str, turn: TurnContext, converter: str
) -> None:
    result = invoke(turn, {"url": site + page.path})
    text = result.text()
    assert not result.is_error
    header, _, body = text.partition("\n\n")
    assert header.split("\n") == [
        f"Title: {page.title}",
        f"URL: {site}{page.path}",
        "Status: 200 OK",
        f"Content-Type: {page.content_type}",
    ]
    missing, present = page.check(body, site)
    # The fallback misses a little on the two pages written after its rules were fixed
    # (bench/RESULTS.md); everything else holds with both converters.
    allowed = {
        ("html.parser", "shift_jis_blog.html"): ([], ["プロフィール"]),
        ("html.parser", "blog_post.html"): ([], ["Rye without tears"]),
        ("trafilatura", "news_article.html"): (["quote"], []),
    }.get((converter, page.file), ([], []))
    assert (missing, present) == allowed
    assert result.details["converter"] == converter
    assert result.details["format"] == "markdown"
    assert "<" not in body.replace("<=", "")  # no markup left


def test_charsets_are_detected(site: str, turn: TurnContext) -> None:
    ru = invoke(turn, {"url": site + "/news/2026/most.html"})
    assert ru.details["charset"] == "cp1251"  # from the page's <meta> tag
    ja = invoke(turn, {"url": site + "/blog/kyoto.html"})
    assert ja.details["charset"] in ("shift_jis (detected)", "cp932 (detected)")
    assert "嵐山" in ja.text()
    assert "café crème" in invoke(turn, {"url": site + "/latin1"}).text()  # detected
    assert "naïve" in invoke(turn, {"url": site + "/bom"}).text()


def test_a_pdf_comes_back_as_text_page_by_page(site: str, turn: TurnContext) -> None:
    result = invoke(turn, {"url": site + PDF.path})
    text = result.text()
    assert text.startswith(f"Title: {PDF.title}\nURL: {site}{PDF.path}\n")
    assert PDF.check(text, site) == ([], [])
    assert result.details["format"] == "pdf" and result.details["pages"] == 2
    assert "## Page 1\n\nHarbor Street Traffic Study" in text
    untyped = invoke(turn, {"url": site + "/untyped.pdf"})  # no Content-Type: sniffed
    assert untyped.details["format"] == "pdf"
    broken = invoke(turn, {"url": site + "/broken.pdf"})
    assert not broken.is_error and "[The PDF could not be read:" in broken.text()


def test_without_the_extra_a_pdf_says_what_to_install(
    site: str, turn: TurnContext, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pool = worker._Pool()
    try:
        without(monkeypatch, tmp_path, pool, "pypdf")
        text = invoke(turn, {"url": site + PDF.path}).text()
    finally:
        pool.close()
    assert "reading PDFs needs the web extra: pip install 'tooldeck[web]'" in text


def test_raw_gives_the_page_as_received(site: str, turn: TurnContext) -> None:
    page = PAGES[0]
    result = invoke(turn, {"url": site + page.path, "raw": True})
    assert result.details["format"] == "html (raw)"
    assert result.text().startswith(f"Title: {page.title}\n")
    assert page.body.decode() in result.text()
    assert "We use cookies" in result.text()  # nothing dropped


def test_plain_text_is_kept_and_max_chars_cuts(site: str, turn: TurnContext) -> None:
    text = invoke(turn, {"url": site + "/notes.txt"}).text()
    assert text.endswith("\n\nplain text, kept as it is\n")
    cut = invoke(turn, {"url": site + PAGES[1].path, "max_chars": 500})
    assert "[Text cut at 500 of " in cut.text() and cut.details["chars"] > 500


def test_a_large_page_goes_through_offload(site: str, tmp_path: Path) -> None:
    from tooldeck import Session
    from tooldeck.testing import ScriptedModel, call, reply

    big = (
        "<html><body><main>"
        + "".join(f"<h2>Section {i}</h2><p>{'word ' * 120}</p>" for i in range(300))
        + "</main></body></html>"
    )
    ROUTES["/big"] = ("text/html; charset=utf-8", big.encode())
    turn = TurnContext("s", tmp_path, web_provider="fetch-only")
    registry = load_builtin_registry()
    model = ScriptedModel([reply(call("web_fetch", {"url": f"{site}/big"})), reply("done")])
    session = Session(model, registry.toolset(turn), turn=turn)
    result = asyncio.run(session.run("read it"))
    [output] = result.tool_outputs
    assert "recall_tool_result" in output.text  # the model got the stub and a ref
    assert len(output.text) < 20_000


def test_policy_domain_rules_hold_on_every_redirect_hop(
    site: str, turn: TurnContext, tmp_path: Path
) -> None:
    policy_file = tmp_path / "policy.toml"
    policy_file.write_text(
        """
[profile]
[[profile.rules]]
tools = "web_fetch"
action = "deny"
args = { url = { domain = ["localhost"] } }
reason = "no localhost pages"
"""
    )
    session = SessionPolicy(Policy.load(policy_file))
    protection = LiveProtection(policy=session)
    hop = site.replace("127.0.0.1", "localhost") + PAGES[0].path
    # The model's URL is on an allowed host; the page itself is on a denied one.
    result = invoke(turn, {"url": f"{site}/go?to={hop}"}, protection)
    assert result.is_error
    assert result.text() == (
        f"Refused: {site}/go?to={hop} redirected to {hop}, which the policy denies "
        "(no localhost pages)."
    )
    # Without the rule the same redirect is followed.
    open_session = SessionPolicy(Policy())
    followed = invoke(
        TurnContext("s", tmp_path, web_provider="x"),
        {"url": f"{site}/go?to={site}{PAGES[0].path}"},
        LiveProtection(policy=open_session),
    )
    assert followed.details["url"] == site + PAGES[0].path


def test_an_ask_rule_on_a_hop_stops_and_says_how_to_ask(
    site: str, turn: TurnContext, tmp_path: Path
) -> None:
    policy_file = tmp_path / "policy.toml"
    policy_file.write_text(
        """
[profile]
[[profile.rules]]
tools = "web_fetch"
action = "ask"
args = { url = { domain = "localhost" } }
"""
    )
    protection = LiveProtection(policy=SessionPolicy(Policy.load(policy_file)))
    hop = site.replace("127.0.0.1", "localhost") + "/notes.txt"
    result = invoke(turn, {"url": f"{site}/go?to={hop}"}, protection)
    assert result.is_error and "which needs approval" in result.text()
    assert "call web_fetch with that URL to ask for it" in result.text()


class OwnFetch:
    """A provider with its own fetch (say, a crawler service); web_fetch uses it."""

    name = "own"

    def __init__(self, final: str) -> None:
        self.final = final
        self.asked: list[str] = []

    async def search(self, query: str, **_: Any) -> Any:
        raise AssertionError("not searched")

    async def fetch(self, url: str, *, timeout: float) -> Fetched:  # noqa: ASYNC109
        self.asked.append(url)
        body = "<html><head><title>From the provider</title></head><body><main><h1>Hi</h1>"
        body += "<p>Served by the provider.</p></main></body></html>"
        return Fetched(self.final, 200, "OK", "text/html; charset=utf-8", body.encode())


def test_a_providers_own_fetch_is_used_and_its_final_url_judged(tmp_path: Path) -> None:
    provider = OwnFetch("https://docs.example.org/page")
    turn = TurnContext("s", tmp_path, web_provider=provider)
    result = invoke(turn, {"url": "https://docs.example.org/page"})
    assert provider.asked == ["https://docs.example.org/page"]
    assert result.text().startswith("Title: From the provider\nURL: https://docs.example.org/page")
    assert "# Hi" in result.text()
    policy_file = tmp_path / "policy.toml"
    policy_file.write_text(
        '[profile]\n[[profile.rules]]\ntools = "web_fetch"\naction = "deny"\n'
        'args = { url = { domain = "evil.example" } }\n'
    )
    moved = OwnFetch("https://www.evil.example/landing")
    refused = invoke(
        TurnContext("s", tmp_path, web_provider=moved),
        {"url": "https://docs.example.org/page"},
        LiveProtection(policy=SessionPolicy(Policy.load(policy_file))),
    )
    assert refused.is_error and "which the policy denies" in refused.text()


def test_a_providers_own_fetch_gets_the_same_byte_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Huge(OwnFetch):
        async def fetch(self, url: str, *, timeout: float) -> Fetched:  # noqa: ASYNC109
            return Fetched(url, 200, "OK", "text/plain", b"z" * 5000)

    monkeypatch.setattr(fetch, "MAX_BYTES", 1000)
    result = invoke(
        TurnContext("s", tmp_path, web_provider=Huge("")), {"url": "https://a.example/"}
    )
    assert result.details["bytes_read"] == 1000 and result.details["capped"]
    assert "[Download stopped at the byte limit" in result.text()


def test_links_are_made_absolute_outside_code_only() -> None:
    md = "[a](/x) ![i](img.png) [j](javascript:alert(1)) [m](mailto:a@b.c)\n```\n[c](/y)\n```"
    out = markdown.absolute_links(md, "https://h.example/dir/page")
    assert out == (
        "[a](https://h.example/x) ![i](https://h.example/dir/img.png) j) "
        "[m](mailto:a@b.c)\n```\n[c](/y)\n```"
    )
    assert markdown.absolute_links("## T [¶](#t)", "https://h/") == "## T "
    assert markdown.base_url('<base href="/docs/">', "https://h/a/b") == "https://h/docs/"
    assert markdown.base_url('<base href="javascript:x">', "https://h/a") == "https://h/a"


def test_the_plain_converter_survives_broken_markup() -> None:
    title, text = markdown.html_to_text("<title>T</title><div>a<p>b<script>x<svg/><li>c")
    assert title == "T" and text == "a\n\nb"  # an unclosed <script> hides the rest
    assert markdown.html_to_text("<p>x</p><svg/><p>y</p>")[1] == "x\n\ny"
    nested = "<ul><li>a<ul><li>b</li></ul></li><li>c</li></ul><ol start='3'><li>x</li></ol>"
    assert markdown.html_to_text(nested)[1] == "- a\n  - b\n- c\n\n3. x"
    table = "<table><tr><td>a|b</td><td>c<br>d</td></tr></table>"
    assert markdown.html_to_text(table)[1] == "| a\\|b | c d |\n|---|---|"


def test_a_real_documentation_page_keeps_every_section_and_every_code_line(
    site: str, turn: TurnContext, converter: str
) -> None:
    """Node.js's real node:path page: what the written pages did not catch.

    On it, the standard-library converter dropped every code comment (highlighters mark
    them ``hljs-comment``, which read as a comments section), and headings kept their
    permalink glyph (``## Path#``); trafilatura's headings came out indented, so they
    were not headings.
    """
    html = REAL_NODE_PAGE.read_text(encoding="utf-8")
    sections = [
        re.sub(r"<[^>]+>", "", h).replace("#", "").strip()
        for h in re.findall(r"<h[23]>(.*?)</h[23]>", html, re.S)
    ]
    comments = set(re.findall(r'<span class="hljs-comment">(// [^<]*)</span>', html))
    assert len(sections) >= 18 and len(comments) >= 20  # the page is what it was
    result = invoke(turn, {"url": site + "/api/path.html"})
    assert not result.is_error and result.details["converter"] == converter
    body = result.text().partition("\n\n")[2]
    headings = [line for line in body.splitlines() if line.startswith("#")]
    unescaped = {h.replace("`", "").lstrip("# ").strip() for h in headings}
    missing = [s for s in sections if s.replace("`", "") not in unescaped]
    assert missing == [], missing
    assert not [h for h in headings if h.endswith(("#", "¶"))]
    assert [c for c in sorted(comments) if html_unescape(c) not in body] == []
    assert "](https://nodejs.org" not in body  # links resolved against where it was served
    assert f"]({site}/api/documentation.html#stability-index)" in body
