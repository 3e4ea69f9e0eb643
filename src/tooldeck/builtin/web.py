"""The web tool: ``web_fetch`` GETs one http(s) URL and returns its readable text.

The URL comes from a model and the tool runs without approval, so every connection goes
through :mod:`tooldeck.netguard`: only public addresses are reached, redirect hops
included, unless a user allows a host or range (``TurnContext.web_access``, else
``TOOLDECK_WEB_ALLOW``). The body is streamed and reading stops at :data:`MAX_BYTES`; the
whole fetch (connect, redirects, body) has one deadline. HTML is reduced to text with the
standard library's :mod:`html.parser` (scripts, styles and other non-content elements
dropped).
"""

from __future__ import annotations

import asyncio
import re
from email.message import Message
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx

from ..context import ToolContext
from ..netguard import NetPolicy, Refused, guarded_client
from ..registry import Handlers
from ..result import ToolResult
from ._common import looks_binary

handlers = Handlers("web")

MAX_BYTES = 2_000_000  # bytes of body read, at most; the rest is never downloaded
MAX_REDIRECTS = 5
USER_AGENT = "Mozilla/5.0 (compatible; tooldeck-web_fetch/0.1)"

_SKIP_TAGS = frozenset(
    {"script", "style", "noscript", "template", "svg", "math", "iframe", "object", "canvas"}
)
_BLOCK_TAGS = frozenset(
    {
        "address",
        "article",
        "aside",
        "blockquote",
        "body",
        "caption",
        "dd",
        "details",
        "div",
        "dl",
        "dt",
        "fieldset",
        "figcaption",
        "figure",
        "footer",
        "form",
        "header",
        "hr",
        "html",
        "main",
        "nav",
        "ol",
        "p",
        "section",
        "summary",
        "table",
        "tbody",
        "thead",
        "tfoot",
        "tr",
        "ul",
    }
)
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_TEXT_TYPES = (
    "application/json",
    "application/xml",
    "application/javascript",
    "application/x-javascript",
    "application/ecmascript",
    "application/x-ndjson",
    "application/ld+json",
    "application/yaml",
    "application/x-yaml",
    "application/toml",
    "application/x-sh",
    "application/csv",
)
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)


class _HtmlText(HTMLParser):
    """Readable text of an HTML document: blocks on their own lines, headings marked."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title = ""
        self._skip = 0
        self._pre = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP_TAGS:
            self._skip += 1
        elif tag == "title":
            self._in_title = True
        elif tag in ("br", "hr"):
            self.parts.append("\n")
        elif tag == "li":
            self.parts.append("\n- ")
        elif tag in _HEADINGS:
            self.parts.append("\n\n" + "#" * _HEADINGS[tag] + " ")
        elif tag == "pre":
            self._pre += 1
            self.parts.append("\n\n")
        elif tag in ("td", "th"):
            self.parts.append(" | ")
        elif tag in _BLOCK_TAGS:
            self.parts.append("\n\n" if tag == "p" else "\n")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in _SKIP_TAGS:  # <svg/> opens nothing
            self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP_TAGS:
            self._skip = max(0, self._skip - 1)
        elif tag == "title":
            self._in_title = False
        elif tag == "pre":
            self._pre = max(0, self._pre - 1)
            self.parts.append("\n\n")
        elif tag in _HEADINGS or tag == "p":
            self.parts.append("\n\n")
        elif tag in _BLOCK_TAGS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        if self._in_title:
            self.title += data
            return
        if self._pre:
            self.parts.append(data.replace(" ", "\u00a0"))  # kept through the squeeze
        else:
            self.parts.append(re.sub(r"\s+", " ", data))

    def text(self) -> str:
        joined = "".join(self.parts)
        lines = [re.sub(r"[ \t]+", " ", line).strip() for line in joined.split("\n")]
        out = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
        return out.replace("\u00a0", " ")


def html_to_text(html: str) -> tuple[str, str]:
    """``(title, text)`` of an HTML document."""
    parser = _HtmlText()
    try:
        parser.feed(html)
        parser.close()
    except Exception:  # html.parser is lenient; never let a strange page fail the call
        pass
    return re.sub(r"\s+", " ", parser.title).strip(), parser.text()


def _content_type(header: str) -> tuple[str, str | None]:
    msg = Message()
    msg["content-type"] = header
    charset = msg.get_param("charset")
    return msg.get_content_type().lower(), charset if isinstance(charset, str) else None


def _decode(data: bytes, charset: str | None, is_html: bool) -> str:
    if charset is None and is_html:
        found = _META_CHARSET.search(data[:4096])
        charset = found.group(1).decode("ascii", "replace") if found else None
    try:
        return data.decode(charset or "utf-8", errors="replace")
    except LookupError:
        return data.decode("utf-8", errors="replace")


def _is_text(media: str) -> bool:
    return (
        media.startswith("text/")
        or media in _TEXT_TYPES
        or media.endswith(("+json", "+xml", "+yaml"))
    )


async def _fetch(url: str, seconds: int, policy: NetPolicy) -> dict[str, Any]:
    client = guarded_client(
        policy,
        max_redirects=MAX_REDIRECTS,
        timeout=httpx.Timeout(seconds),
        headers={"User-Agent": USER_AGENT, "Accept": "text/html,text/*;q=0.9,*/*;q=0.5"},
    )
    with anyio.fail_after(seconds):
        async with client, client.stream("GET", url) as response:
            body = bytearray()
            capped = False
            async for chunk in response.aiter_bytes():
                room = MAX_BYTES - len(body)
                if len(chunk) > room:
                    body += chunk[:room]
                    capped = True
                    break
                body += chunk
            # Leaving the block closes the connection: the rest is never read.
            return {
                "url": str(response.url),
                "status": response.status_code,
                "reason": response.reason_phrase,
                "content_type": response.headers.get("content-type", ""),
                "body": bytes(body),
                "capped": capped,
            }


def _render(fetched: dict[str, Any], max_chars: int) -> ToolResult:
    body: bytes = fetched["body"]
    header = fetched["content_type"]
    media, charset = _content_type(header) if header else ("", None)
    is_html = media in ("text/html", "application/xhtml+xml") or (
        not media and body[:512].lstrip().lower().startswith((b"<!doctype html", b"<html"))
    )
    lines = [
        f"URL: {fetched['url']}",
        f"Status: {fetched['status']} {fetched['reason']}".rstrip(),
        f"Content-Type: {header or '(none)'}",
    ]
    details = {k: v for k, v in fetched.items() if k != "body"}
    details["bytes_read"] = len(body)
    if not is_html and not _is_text(media) and (media or looks_binary(body[:8192])):
        lines.append(
            f"\n[Binary content ({media or 'unknown type'}, {len(body)} bytes read) is not "
            "shown; web_fetch returns text only.]"
        )
        return ToolResult(content="\n".join(lines), details=details)
    text = _decode(body, charset, is_html)
    if is_html:
        title, text = html_to_text(text)
        if title:
            lines.append(f"Title: {title}")
    total = len(text)
    if total > max_chars:
        text = text[:max_chars]
    lines.append("")
    lines.append(text if text.strip() else "(no readable text)")
    if total > max_chars:
        lines.append(
            f"\n[Text cut at {max_chars} of {total} characters; raise max_chars (up to 100000) "
            "to see more.]"
        )
    if fetched["capped"]:
        lines.append(
            f"[Download stopped at the {MAX_BYTES}-byte limit; the rest of the page was not read.]"
        )
    details["chars"] = total
    return ToolResult(content="\n".join(lines), details=details)


def _refusal(url: str, exc: Refused) -> str:
    """One line for the model: what was refused and how a user can allow it."""
    try:
        first = str(httpx.URL(url))
    except httpx.InvalidURL:
        first = url
    hop = f"{url} redirected to {exc.url}, and " if exc.url and exc.url != first else ""
    return f"Refused: {hop}{exc.line('web_fetch')}"


@handlers("web_fetch")
async def web_fetch(
    url: str,
    ctx: ToolContext,
    max_chars: int = 20_000,
    timeout: int = 20,  # noqa: ASYNC109 - the tool's argument, named by the input schema
) -> ToolResult:
    parts = urlsplit(url.strip())
    if parts.scheme.lower() not in ("http", "https"):
        shown = parts.scheme or "no scheme"
        return ToolResult.error(
            f"Refused {url!r}: only http:// and https:// URLs can be fetched ({shown} given)."
        )
    if not parts.hostname:
        return ToolResult.error(f"Refused {url!r}: the URL has no host name.")
    if ctx.signal.aborted:
        return ToolResult.error(f"Not fetched: the call was aborted ({ctx.signal.reason}).")
    policy = getattr(ctx.turn, "web_access", None)
    if policy is None:
        try:
            policy = NetPolicy.from_env()
        except ValueError as bad:
            return ToolResult.error(f"Not fetched: web_fetch is misconfigured ({bad}).")

    fetch = asyncio.ensure_future(_fetch(url.strip(), timeout, policy))
    abort = asyncio.ensure_future(ctx.signal.wait())
    try:
        await asyncio.wait({fetch, abort}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        abort.cancel()
        if not fetch.done():
            fetch.cancel()
            await asyncio.wait({fetch})
    if fetch.cancelled():
        return ToolResult.error(f"Fetching {url} was aborted ({ctx.signal.reason}).")
    exc = fetch.exception()
    if exc is None:
        return _render(fetch.result(), max_chars)
    if isinstance(exc, Refused):
        return ToolResult.error(_refusal(url.strip(), exc))
    if isinstance(exc, TimeoutError | httpx.TimeoutException):
        return ToolResult.error(f"Timed out after {timeout} s fetching {url}.")
    if isinstance(exc, httpx.TooManyRedirects):
        return ToolResult.error(f"Too many redirects (more than {MAX_REDIRECTS}) for {url}.")
    if isinstance(exc, httpx.UnsupportedProtocol):
        return ToolResult.error(f"Refused: {url} redirected to a URL that is not http(s): {exc}")
    if isinstance(exc, httpx.HTTPError | OSError):
        return ToolResult.error(f"Could not fetch {url}: {type(exc).__name__}: {exc}")
    raise exc
