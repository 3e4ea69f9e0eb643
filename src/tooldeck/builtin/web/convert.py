"""A fetched body as the text the model reads: Markdown, PDF text, text, or a note.

:func:`convert` is pure CPU work on hostile input (HTML parsing, PDF content streams,
charset decoding), so ``web_fetch`` runs it in a worker process it can stop
(:mod:`.worker`); it imports nothing heavy itself (trafilatura and pypdf are loaded by
the functions that use them).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from .documents import RefusedCharset, content_type, decode, is_html, is_pdf, is_text, pdf_to_text
from .markdown import extract_title, html_to_markdown


@dataclass(frozen=True, slots=True)
class Page:
    title: str
    text: str
    details: dict[str, Any]
    chars: int | None = None  # the text's length before :meth:`cut` shortened it

    @property
    def length(self) -> int:
        """How many characters the whole text has (cut or not)."""
        return len(self.text) if self.chars is None else self.chars

    def cut(self, max_chars: int) -> Page:
        """This page with at most ``max_chars`` characters of text."""
        if len(self.text) <= max_chars:
            return self
        return replace(self, text=self.text[:max_chars], chars=self.length)


def _looks_binary(sample: bytes) -> bool:
    # imported here: _common loads the tool result types, which a worker rarely needs
    from .._common import looks_binary

    return looks_binary(sample)


def convert(body: bytes, header: str, url: str, raw: bool) -> Page:
    """The readable text of a body served with ``Content-Type: header`` from ``url``."""
    media, charset = content_type(header)
    details: dict[str, Any] = {"media_type": media or None}
    if is_pdf(media, body):
        details["format"] = "pdf"
        try:
            read = pdf_to_text(body)
        except ValueError as exc:
            return Page("", f"[The PDF could not be read: {exc}]", details)
        if read is None:
            return Page(
                "",
                "[This is a PDF; reading PDFs needs the web extra: pip install 'tooldeck[web]'.]",
                details,
            )
        title, text, pages = read
        return Page(title, text, {**details, "pages": pages})
    html = is_html(media, body)
    if not html and not is_text(media) and (media or _looks_binary(body[:8192])):
        return Page(
            "",
            f"[Binary content ({media or 'unknown type'}, {len(body)} bytes read) is not "
            "shown; web_fetch returns text only.]",
            {**details, "format": "binary"},
        )
    try:
        text, used = decode(body, charset, html)
    except RefusedCharset as refused:
        return Page(
            "",
            f"[The page declares the charset {refused.declared!r}, which is not a text "
            "encoding; web_fetch does not decode it.]",
            {**details, "format": "refused", "charset": refused.declared},
        )
    details["charset"] = used
    if not html:
        return Page("", text, {**details, "format": "text"})
    if raw:
        return Page(extract_title(text), text, {**details, "format": "html (raw)"})
    converted = html_to_markdown(text, url)
    return Page(
        converted.title,
        converted.markdown,
        {**details, "format": "markdown", "converter": converted.method},
    )
