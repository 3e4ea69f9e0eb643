"""``web_fetch``: GET one http(s) URL and give the model readable Markdown.

The URL comes from a model and the tool runs without approval, so every connection goes
through :mod:`tooldeck.web.netguard`: only public addresses are reached, redirect hops
included, unless a user allows a host or range (``TurnContext.web_access``, else
``TOOLDECK_WEB_ALLOW``). Every redirect hop is also judged by the session's policy as a
``web_fetch`` of that URL, so a rule on ``url`` (``domain = [...]``) holds for the host
the page finally comes from, not only for the URL the model wrote. The body is streamed
and decoded as it arrives (:func:`tooldeck.web.netbody.read_capped`), and reading stops at
:data:`MAX_BYTES` decoded bytes (:data:`MAX_PDF_BYTES` for a PDF), however many
compression layers it came in. The whole call (connect, redirects, body, conversion) has
one deadline, and the conversion runs in a worker process (:mod:`.worker`) that is
killed when the deadline passes: a page that is slow to read costs no CPU after the
call has answered.

What comes back: the title, the final URL, the status and the content type on top, then
the page as Markdown (:mod:`.markdown`: main content, headings, lists, tables, code and
absolute links; ``raw=true`` gives the body as received instead), PDFs as text page by
page, text types as they are, binary types as a one-line note. Large pages are returned
whole (up to ``max_chars``) so that the session's offload keeps them recallable.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx

from ...context import ToolContext
from ...errors import TooldeckError
from ...result import ToolResult
from ...transcript import ToolCall
from ...web.netbody import read_capped
from ...web.netguard import NetPolicy, Refused, guarded_client
from . import worker
from ._handlers import handlers
from .convert import Page
from .documents import content_type, is_pdf

__all__ = ["MAX_PDF_BYTES", "MAX_REDIRECTS"]

MAX_BYTES = 2_000_000  # bytes of body read, at most; the rest is never downloaded
MAX_PDF_BYTES = 10_000_000  # a PDF cut short cannot be read at all, so it may be larger
MAX_REDIRECTS = 5
USER_AGENT = "Mozilla/5.0 (compatible; tooldeck-web_fetch/0.1)"


@dataclass(frozen=True, slots=True)
class Fetched:
    """A fetched response: what a provider's own ``fetch`` returns too."""

    url: str  # the final URL, after redirects
    status: int
    reason: str
    content_type: str
    body: bytes
    capped: bool = False  # reading stopped at the byte limit


class HopRefused(TooldeckError):
    """A redirect hop the session's policy does not allow."""

    def __init__(self, url: str, action: str, reason: str) -> None:
        super().__init__(url)
        self.url, self.action, self.reason = url, action, reason


async def _verdict(ctx: ToolContext, params: dict[str, Any], url: str) -> tuple[str, str] | None:
    """``(action, reason)`` when the session's policy would not let ``web_fetch`` get ``url``."""
    protection = ctx.protection
    tool = ctx.toolset.get(ctx.tool_name) if ctx.toolset is not None else None
    if protection is None or tool is None:
        return None
    args = {**params, "url": url}
    decide = getattr(protection.policy, "decide", None)
    if callable(decide) and len(inspect.signature(decide).parameters) >= 2:
        decision: Any = decide(tool, args)  # a policy session: judged without an audit line
    else:
        decision = protection.policy(tool, args, ToolCall(ctx.call_id, tool.name, json.dumps(args)))
    if isinstance(decision, Awaitable):
        decision = await decision
    action = getattr(decision, "action", "allow")
    if action == "allow":
        return None
    return str(action), str(getattr(decision, "reason", "") or "")


async def _fetch(
    url: str, seconds: int, policy: NetPolicy, ctx: ToolContext, params: dict[str, Any]
) -> Fetched:
    requested = {"first": True}

    async def judge(request: httpx.Request) -> None:
        if requested["first"]:  # the call itself was judged before it ran
            requested["first"] = False
            return
        verdict = await _verdict(ctx, params, str(request.url))
        if verdict is not None:
            raise HopRefused(str(request.url), *verdict)

    client = guarded_client(
        policy,
        max_redirects=MAX_REDIRECTS,
        timeout=httpx.Timeout(seconds),
        headers={
            "User-Agent": USER_AGENT,
            "Accept": (
                "text/html,application/xhtml+xml,text/*;q=0.9,application/pdf;q=0.8,*/*;q=0.5"
            ),
        },
    )
    client.event_hooks = {"request": [judge], "response": []}
    async with client, client.stream("GET", url) as response:
        media, _ = content_type(response.headers.get("content-type", ""))
        limit = MAX_PDF_BYTES if media == "application/pdf" else MAX_BYTES
        body, capped = await read_capped(response, limit)
        # Leaving the block closes the connection: the rest is never read.
        return Fetched(
            str(response.url),
            response.status_code,
            response.reason_phrase,
            response.headers.get("content-type", ""),
            body,
            capped,
        )


async def _convert(fetched: Fetched, raw: bool, max_chars: int) -> Page:
    """The readable text of a response, converted in a worker process (:mod:`.worker`)
    and cut at ``max_chars``."""
    media, _ = content_type(fetched.content_type)
    if fetched.capped and is_pdf(media, fetched.body):
        return Page(
            "",
            f"[This PDF is larger than the {MAX_PDF_BYTES}-byte limit and cannot be read "
            "cut short.]",
            {"media_type": media or None, "format": "pdf"},
        )
    return await worker.convert_page(
        fetched.body, fetched.content_type, fetched.url, raw, max_chars
    )


def _render(fetched: Fetched, page: Page, max_chars: int) -> ToolResult:
    lines = []
    if page.title:
        lines.append(f"Title: {page.title}")
    lines += [
        f"URL: {fetched.url}",
        f"Status: {fetched.status} {fetched.reason}".rstrip(),
        f"Content-Type: {fetched.content_type or '(none)'}",
    ]
    text = page.text[:max_chars]
    total = page.length
    lines.append("")
    lines.append(text if text.strip() else "(no readable text)")
    if total > max_chars:
        lines.append(
            f"\n[Text cut at {max_chars} of {total} characters; raise max_chars (up to "
            "1000000) to see more.]"
        )
    if fetched.capped:
        lines.append("[Download stopped at the byte limit; the rest of the page was not read.]")
    details: dict[str, Any] = {
        "url": fetched.url,
        "status": fetched.status,
        "reason": fetched.reason,
        "content_type": fetched.content_type,
        "bytes_read": len(fetched.body),
        "capped": fetched.capped,
        "title": page.title or None,
        "chars": total,
        **page.details,
    }
    return ToolResult(content="\n".join(lines), details=details)


def _refusal(url: str, exc: Refused) -> str:
    """One line for the model: what was refused and how a user can allow it."""
    try:
        first = str(httpx.URL(url))
    except httpx.InvalidURL:
        first = url
    hop = f"{url} redirected to {exc.url}, and " if exc.url and exc.url != first else ""
    return f"Refused: {hop}{exc.line('web_fetch')}"


async def _whole(
    url: str,
    seconds: int,
    policy: NetPolicy,
    ctx: ToolContext,
    params: dict[str, Any],
    raw: bool,
    max_chars: int,
) -> tuple[Fetched, Page]:
    """Fetch and convert under the one deadline."""
    timeout = seconds
    with anyio.fail_after(seconds):
        worker.warm()  # a converter starts while the page downloads
        provider = getattr(ctx.turn, "web_provider", None)
        own_fetch = getattr(provider, "fetch", None) if not isinstance(provider, str) else None
        if callable(own_fetch):
            fetched = await own_fetch(url, timeout=timeout)
            if not isinstance(fetched, Fetched):
                raise TypeError(f"the web provider's fetch returned {type(fetched).__name__}")
            limit = MAX_PDF_BYTES if fetched.body.startswith(b"%PDF-") else MAX_BYTES
            if len(fetched.body) > limit:  # the same cap as a fetch of our own
                fetched = replace(fetched, body=fetched.body[:limit], capped=True)
            final = (urlsplit(fetched.url).hostname or "") if fetched.url != url else ""
            if final:
                verdict = await _verdict(ctx, params, fetched.url)
                if verdict is not None:
                    raise HopRefused(fetched.url, *verdict)
        else:
            fetched = await _fetch(url, timeout, policy, ctx, params)
        page = await _convert(fetched, raw, max_chars)
        return fetched, page


@handlers("web_fetch")
async def web_fetch(
    url: str,
    ctx: ToolContext,
    max_chars: int = 100_000,
    timeout: int = 30,  # noqa: ASYNC109 - the tool's argument, named by the input schema
    raw: bool = False,
) -> ToolResult:
    target = url.strip()
    parts = urlsplit(target)
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
    params = {"url": target, "max_chars": max_chars, "timeout": timeout, "raw": raw}

    work = asyncio.ensure_future(_whole(target, timeout, policy, ctx, params, raw, max_chars))
    abort = asyncio.ensure_future(ctx.signal.wait())
    try:
        await asyncio.wait({work, abort}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        abort.cancel()
        if not work.done():
            work.cancel()
            await asyncio.wait({work})
    if work.cancelled():
        return ToolResult.error(f"Fetching {url} was aborted ({ctx.signal.reason}).")
    exc = work.exception()
    if exc is None:
        fetched, page = work.result()
        return _render(fetched, page, max_chars)
    if isinstance(exc, Refused):
        return ToolResult.error(_refusal(target, exc))
    if isinstance(exc, HopRefused):
        why = f" ({exc.reason})" if exc.reason else ""
        if exc.action == "ask":
            return ToolResult.error(
                f"Stopped: {target} redirected to {exc.url}, which needs approval{why}; call "
                "web_fetch with that URL to ask for it."
            )
        return ToolResult.error(
            f"Refused: {target} redirected to {exc.url}, which the policy denies{why}."
        )
    if isinstance(exc, TimeoutError | httpx.TimeoutException):
        return ToolResult.error(f"Timed out after {timeout} s fetching {url}.")
    if isinstance(exc, httpx.TooManyRedirects):
        return ToolResult.error(f"Too many redirects (more than {MAX_REDIRECTS}) for {url}.")
    if isinstance(exc, httpx.UnsupportedProtocol):
        return ToolResult.error(f"Refused: {url} redirected to a URL that is not http(s): {exc}")
    if isinstance(exc, httpx.HTTPError | OSError):
        return ToolResult.error(f"Could not fetch {url}: {type(exc).__name__}: {exc}")
    raise exc
