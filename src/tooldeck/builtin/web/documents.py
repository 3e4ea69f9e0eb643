"""What a fetched body is and how it reads as text: media type, charset, PDF pages.

The charset is taken, in order, from the ``Content-Type`` header, a byte-order mark, the
page's own ``<meta charset>`` / ``http-equiv`` declaration, a strict UTF-8 decode, and
last from charset-normalizer's detection (with the ``web`` extra), since many pages in
windows-1251, Shift_JIS or GB 18030 declare nothing. A declared charset must be one of
Python's own text charsets: a page can name any codec Python has, and some are not
charsets at all (``punycode`` and ``idna`` decode in quadratic time, ``base64``, ``zlib``,
``rot13``, ``unicode_escape``... transform data); naming one raises
:class:`RefusedCharset`. A name Python does not know is ignored, as browsers do. PDFs are
read with pypdf (the ``web`` extra), page by page.
"""

from __future__ import annotations

import codecs
import encodings
import io
import logging
import pkgutil
import re
from email.message import Message

from ...errors import TooldeckError

__all__ = [
    "NOT_TEXT_CODECS",
    "RefusedCharset",
    "content_type",
    "decode",
    "is_html",
    "is_pdf",
    "is_text",
    "pdf_to_text",
]

_log = logging.getLogger("tooldeck.builtin.web")

_TEXT_TYPES = frozenset(
    {
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
    }
)
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)
_BOMS = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


# Codecs of the standard library that are not text charsets: bytes-to-bytes transforms,
# escapes, IDNA labels (punycode's decoder is quadratic), and codecs that always fail.
NOT_TEXT_CODECS = frozenset(
    {
        "base64",
        "bz2",
        "charmap",
        "hex",
        "idna",
        "punycode",
        "quopri",
        "raw-unicode-escape",
        "rot-13",
        "undefined",
        "unicode-escape",
        "uu",
        "zlib",
    }
)


def _text_charsets() -> frozenset[str]:
    """The canonical names of the standard library's text charsets."""
    names = set()
    for module in pkgutil.iter_modules(encodings.__path__):
        try:
            names.add(codecs.lookup(module.name).name)
        except LookupError:  # aliases; mbcs and oem off Windows
            continue
    return frozenset(names - NOT_TEXT_CODECS)


_TEXT_CHARSETS = _text_charsets()


class RefusedCharset(TooldeckError, ValueError):
    """A page declares, as its charset, a codec that is not a text charset."""

    def __init__(self, declared: str) -> None:
        self.declared = declared
        super().__init__(
            f"the page declares the charset {declared!r}, which is not a text encoding"
        )


def content_type(header: str) -> tuple[str, str | None]:
    """``(media type, charset)`` of a ``Content-Type`` header."""
    if not header:
        return "", None
    msg = Message()
    msg["content-type"] = header
    charset = msg.get_param("charset")
    return msg.get_content_type().lower(), charset if isinstance(charset, str) else None


def is_html(media: str, body: bytes) -> bool:
    if media in ("text/html", "application/xhtml+xml"):
        return True
    start = body[:512].lstrip().lower()
    return (not media or media == "text/plain") and start.startswith((b"<!doctype html", b"<html"))


def is_pdf(media: str, body: bytes) -> bool:
    return media == "application/pdf" or (not media and body.startswith(b"%PDF-"))


def is_text(media: str) -> bool:
    return (
        media.startswith("text/")
        or media in _TEXT_TYPES
        or media.endswith(("+json", "+xml", "+yaml"))
    )


def _known(name: str | None) -> str | None:
    """The codec a declared charset names; ``None`` when Python knows no such name.

    Raises :class:`RefusedCharset` for a codec that is not one of Python's text charsets.
    """
    if not name or not name.strip():
        return None
    try:
        found = codecs.lookup(name.strip()).name
    except LookupError:
        return None
    if found not in _TEXT_CHARSETS:
        raise RefusedCharset(name.strip()[:40])
    return found


def decode(data: bytes, charset: str | None, html: bool) -> tuple[str, str]:
    """``(text, charset used)``; undecodable bytes become U+FFFD.

    Raises :class:`RefusedCharset` when the header or the page's ``<meta>`` names a
    codec that is not a text charset (``punycode``, ``base64``...).
    """
    declared = _known(charset)
    if declared is None:
        for bom, name in _BOMS:
            if data.startswith(bom):
                declared = name
                break
    if declared is None and html:
        found = _META_CHARSET.search(data[:4096])
        declared = _known(found.group(1).decode("ascii", "replace")) if found else None
    if declared is not None:
        return data.decode(declared, errors="replace"), declared
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    try:
        from charset_normalizer import from_bytes
    except ImportError:
        return data.decode("utf-8", errors="replace"), "utf-8 (undetected)"
    best = from_bytes(data[:200_000]).best()
    if best is None:
        return data.decode("utf-8", errors="replace"), "utf-8 (undetected)"
    return data.decode(best.encoding, errors="replace"), f"{best.encoding} (detected)"


def pdf_to_text(data: bytes) -> tuple[str, str, int] | None:
    """``(title, text, pages)`` of a PDF, or ``None`` when pypdf is not installed.

    Each page's text is under a ``## Page N`` heading. Raises ``ValueError`` for a file
    pypdf cannot read (a cut-off or encrypted PDF).
    """
    try:
        from pypdf import PdfReader
        from pypdf.errors import PyPdfError
    except ImportError:
        return None
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise ValueError("the PDF is encrypted")
        title = ""
        meta = reader.metadata
        if meta is not None and isinstance(meta.title, str):
            title = meta.title.strip()
        pages = []
        for number, page in enumerate(reader.pages, start=1):
            text = (page.extract_text() or "").strip()
            pages.append(
                f"## Page {number}\n\n{text}" if text else f"## Page {number}\n\n(no text)"
            )
        return title, "\n\n".join(pages), len(reader.pages)
    except (PyPdfError, ValueError, KeyError, TypeError, OSError) as exc:
        raise ValueError(str(exc) or type(exc).__name__) from None
