"""HTML as Markdown a model reads well: the main content, its structure, absolute links.

With the ``web`` extra installed (``pip install 'tooldeck[web]'``) the page goes through
trafilatura, which finds the main content (boilerplate such as menus, cookie banners,
share buttons, related links and footers dropped) and writes it as Markdown with
headings, lists, tables, code blocks and links. It was chosen by measuring it against
readability-lxml, markdownify and html-to-markdown on saved pages (bench/RESULTS.md,
"web_fetch: HTML to Markdown").

Without the extra, :class:`_Fallback` (the standard library's :mod:`html.parser`) does a
plainer job: it keeps only a page's ``<main>`` or ``<article>`` when it has one, drops
elements that are boilerplate by name, role, id or class, and writes the same Markdown
constructs. Either way links are made absolute against the page's URL (or its
``<base href>``), outside code blocks, and heading anchors such as ``¶`` are removed.
"""

from __future__ import annotations

import html as html_lib
import logging
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urljoin, urlsplit

__all__ = ["Converted", "absolute_links", "extract_title", "library"]

_log = logging.getLogger("tooldeck.builtin.web")


@dataclass(frozen=True, slots=True)
class Converted:
    title: str
    markdown: str
    method: str  # "trafilatura" or "html.parser": what made the Markdown


def library() -> Any:
    """The trafilatura module, or ``None`` when the ``web`` extra is not installed."""
    try:
        import trafilatura
    except ImportError:
        return None
    return trafilatura


# -- title, base, links -------------------------------------------------------------------

_TITLE = re.compile(r"<title[^>]*>(.*?)</title\s*>", re.I | re.S)
_OG_TITLE = re.compile(
    r"""<meta[^>]+property\s*=\s*["']og:title["'][^>]*content\s*=\s*["']([^"']*)["']""", re.I
)
_BASE = re.compile(r"""<base[^>]+href\s*=\s*["']([^"']+)["']""", re.I)
_LINK = re.compile(r"(!?\[(?:[^\]\\]|\\.)*\]\()(<[^>]*>|[^)\s]+)((?:\s+\"[^\"]*\")?\))")
_ANCHOR_GLYPHS = frozenset({"¶", "#", "§", "🔗", "Â¶"})
_ANCHOR_LINK = re.compile(r"\[(?:¶|#|§|🔗|Â¶)\]\([^)]*\)")
_INDENTED_HEADING = re.compile(r"^[ \t]{1,3}(#{1,6} )")
_FENCE = re.compile(r"^\s*(```|~~~)")
_MD_TEXT = re.compile(r"[\\\[\]]")
_BARE_BRACKET = re.compile(r"(?<!\\)((?:\\\\)*)([\[\]])")  # not escaped yet


def extract_title(html: str) -> str:
    """The page's ``<title>`` (else its ``og:title``), whitespace collapsed."""
    found = _TITLE.search(html[:200_000])
    if found is None:
        found = _OG_TITLE.search(html[:200_000])
    if found is None:
        return ""
    return re.sub(r"\s+", " ", html_lib.unescape(re.sub(r"<[^>]+>", "", found.group(1)))).strip()


def base_url(html: str, url: str) -> str:
    """What relative links are relative to: ``<base href>`` (resolved) or the page URL."""
    found = _BASE.search(html[:200_000])
    if found is None:
        return url
    joined = urljoin(url, html_lib.unescape(found.group(1).strip()))
    return joined if urlsplit(joined).scheme in ("http", "https") else url


def _absolute(target: str, base: str) -> str:
    bare = target[1:-1] if target.startswith("<") and target.endswith(">") else target
    scheme = urlsplit(bare).scheme.lower()
    if scheme in ("javascript", "data", "vbscript"):
        return ""
    if scheme or bare.startswith("mailto:"):
        return bare
    return urljoin(base, bare)


def absolute_links(markdown: str, base: str) -> str:
    """Every Markdown link and image target made absolute against ``base``.

    Code blocks are left alone; ``javascript:`` and ``data:`` targets are removed (the
    link text stays).
    """
    out: list[str] = []
    in_code = False
    for line in markdown.split("\n"):
        if _FENCE.match(line):
            in_code = not in_code
            out.append(line)
            continue
        if in_code:
            out.append(line)
            continue
        line = _ANCHOR_LINK.sub("", line)

        def fix(m: re.Match[str]) -> str:
            target = _absolute(m.group(2), base)
            if not target:  # keep the text, drop the link
                opener = m.group(1)
                return opener[2:-2] if opener.startswith("!") else opener[1:-2]
            return f"{m.group(1)}{target}{m.group(3)}"

        out.append(_LINK.sub(fix, line))
    return "\n".join(out)


_INLINE_TAGS = re.compile(r"</?(?:sup|sub|span|u|ins|del|mark|small|abbr|cite|font)\b[^>]*>", re.I)


def _tidy(markdown: str) -> str:
    """Trailing spaces and inline HTML tags (``<sup>``...) gone, outside code blocks."""
    lines: list[str] = []
    in_code = False
    for line in markdown.split("\n"):
        if _FENCE.match(line):
            in_code = not in_code
            lines.append(line)
            continue
        if not in_code:  # a heading indented by up to three spaces is still one: unindent
            line = _INDENTED_HEADING.sub(r"\1", _INLINE_TAGS.sub("", line)).rstrip()
        lines.append(line)
    text = "\n".join(lines)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


# -- the two converters -------------------------------------------------------------------


def html_to_markdown(html: str, url: str, *, prefer_library: bool = True) -> Converted:
    """``html`` (fetched from ``url``) as :class:`Converted` Markdown with its title."""
    title = extract_title(html)
    base = base_url(html, url)
    lib = library() if prefer_library else None
    if lib is not None:
        try:
            made = lib.extract(
                html,
                output_format="markdown",
                include_links=True,
                include_tables=True,
                include_formatting=True,
                include_comments=False,
                include_images=False,
                deduplicate=False,
            )
        except Exception:  # a library failure must not fail the fetch: fall back
            _log.warning("trafilatura failed on %s; using the plain converter", url, exc_info=True)
            made = None
        plain = _Fallback.convert(html)
        if made and made.strip() and (_structured(made) or not _structured(plain)):
            return Converted(title, _tidy(absolute_links(made, base)), "trafilatura")
        # trafilatura found no main content and fell back to bare lines of text (it does
        # on small pages): the plain converter keeps more of the page's structure.
        return Converted(title, _tidy(absolute_links(plain, base)), "html.parser")
    return Converted(title, _tidy(absolute_links(_Fallback.convert(html), base)), "html.parser")


_STRUCTURE = re.compile(r"^(#{1,6} |[-*+] |\d+\. |\||```|> )|\]\(", re.M)


def _structured(markdown: str) -> bool:
    """Whether Markdown has any structure (a heading, list, table, code, quote or link)."""
    return _STRUCTURE.search(markdown) is not None


def html_to_text(html: str) -> tuple[str, str]:
    """``(title, Markdown)`` of an HTML document with the plain converter (no base URL)."""
    return extract_title(html), _tidy(_Fallback.convert(html))


_SKIP = frozenset(
    {
        "script",
        "style",
        "noscript",
        "template",
        "svg",
        "math",
        "iframe",
        "object",
        "canvas",
        "head",
        "title",
        "form",
        "button",
        "select",
        "textarea",
        "nav",
        "aside",
        "footer",
        "dialog",
        "menu",
    }
)
_VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}
)
_BLOCK = frozenset(
    {
        "address",
        "article",
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
        "header",
        "hr",
        "html",
        "main",
        "p",
        "section",
        "summary",
    }
)
_BOILERPLATE = re.compile(
    r"(^|[\s_-])(cookie|consent|banner|share|sharing|social|newsletter|related|comments?|"
    r"sidebar|breadcrumbs?|menu|navbar|nav|footer|advert|ads?|ad-slot|promo|subscribe|"
    r"skip-link|popup|modal|signup|login|toc|announcement|sitenotice|catlinks|editsection|"
    r"headerlink)([\s_-]|$)",
    re.I,
)
_BOILER_ROLES = frozenset(
    {"navigation", "banner", "contentinfo", "complementary", "dialog", "search"}
)
_MAIN = re.compile(r"<main\b|<[^>]+role\s*=\s*[\"']main[\"']|<article\b", re.I)
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}


def _boilerplate(tag: str, attrs: dict[str, str]) -> bool:
    if tag in _SKIP:
        return True
    if attrs.get("role", "").lower() in _BOILER_ROLES:
        return True
    if "hidden" in attrs or attrs.get("aria-hidden") == "true":
        return True
    names = f"{attrs.get('id', '')} {attrs.get('class', '')}"
    return bool(names.strip()) and _BOILERPLATE.search(names) is not None


class _Fallback(HTMLParser):
    """Markdown from the standard library's parser (see the module docstring)."""

    def __init__(self, main_only: bool) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []  # open elements
        self.open: dict[str, int] = {}  # how many of each are open (no O(depth) scans)
        self.skip_at: int | None = None  # depth where a skipped subtree started
        self.main_only = main_only
        self.main_at: int | None = None
        self.main_done = False
        self.buffers: list[list[str]] = [[]]
        self.pre = 0
        self.code_lang = ""
        self.lists: list[list[Any]] = []  # [kind, counter]
        self.links: list[str] = []
        self.tables: list[dict[str, Any]] = []

    @classmethod
    def convert(cls, html: str) -> str:
        parser = cls(main_only=_MAIN.search(html) is not None)
        try:
            parser.feed(html)
            parser.close()
        except Exception:  # html.parser is lenient; never let a strange page fail the call
            pass
        return "".join(parser.buffers[0])

    # -- output ------------------------------------------------------------------------
    @property
    def active(self) -> bool:
        if self.skip_at is not None:
            return False
        return not self.main_only or self.main_at is not None

    def emit(self, text: str) -> None:
        if self.active:
            self.buffers[-1].append(text)

    def push(self) -> None:
        self.buffers.append([])

    def pop(self) -> str:
        return "".join(self.buffers.pop()) if len(self.buffers) > 1 else ""

    # -- events --------------------------------------------------------------------------
    def handle_starttag(self, tag: str, attrs_list: list[tuple[str, str | None]]) -> None:
        if tag == "a" and self.open.get("a"):
            self.handle_endtag("a")  # links do not nest: a new one closes the open one
        attrs = {k: (v or "") for k, v in attrs_list}
        inside_story = bool(self.open.get("article") or self.open.get("main"))
        if tag not in _VOID:
            self.stack.append(tag)
            self.open[tag] = self.open.get(tag, 0) + 1
        depth = len(self.stack)
        if self.skip_at is not None:
            return
        in_code = bool(self.open.get("pre") or self.open.get("code"))
        if (
            not in_code  # a highlighter's "hljs-comment" span is code, not comments
            and _boilerplate(tag, attrs)
            and not (tag == "header" and inside_story)
        ):
            if tag not in _VOID:
                self.skip_at = depth
            return
        if (
            self.main_only
            and self.main_at is None
            and not self.main_done
            and (tag in ("main", "article") or attrs.get("role") == "main")
        ):
            self.main_at = depth
        if not self.active:
            return
        self._open(tag, attrs)

    def _open(self, tag: str, attrs: dict[str, str]) -> None:
        if tag in _HEADINGS:
            self.emit("\n\n" + "#" * _HEADINGS[tag] + " ")
        elif tag == "br":
            self.emit(" " if self.tables else "\n")
        elif tag == "hr":
            self.emit("\n\n---\n\n")
        elif tag in ("ul", "ol"):
            start = attrs.get("start", "1")
            if not self.lists:
                self.emit("\n\n")
            self.lists.append([tag, int(start) - 1 if start.isdigit() else 0])
        elif tag == "li":
            indent = "  " * max(0, len(self.lists) - 1)
            if self.lists and self.lists[-1][0] == "ol":
                self.lists[-1][1] += 1
                self.emit(f"\n{indent}{self.lists[-1][1]}. ")
            else:
                self.emit(f"\n{indent}- ")
        elif tag == "pre":
            self.pre += 1
            self.code_lang = _language(attrs.get("class", ""))
            self.push()
        elif tag == "code":
            if self.pre:
                self.code_lang = self.code_lang or _language(attrs.get("class", ""))
            else:
                self.emit("`")
        elif tag in ("strong", "b"):
            self.emit("**")
        elif tag in ("em", "i"):
            self.emit("*")
        elif tag == "a":
            self.links.append(attrs.get("href", ""))
            self.push()
        elif tag == "blockquote":
            self.push()
        elif tag == "table":
            self.tables.append({"rows": [], "row": None})
        elif tag == "tr" and self.tables:
            self.tables[-1]["row"] = []
        elif tag in ("td", "th") and self.tables:
            self.push()
        elif tag in _BLOCK:
            self.emit("\n\n")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _VOID:
            self.handle_starttag(tag, attrs)
        # <svg/>, <div/>: opens nothing

    def handle_endtag(self, tag: str) -> None:
        if tag in _VOID or not self.open.get(tag):
            return
        while self.stack:
            depth = len(self.stack)
            top = self.stack.pop()
            self.open[top] -= 1
            if self.skip_at is not None:
                if depth == self.skip_at:
                    self.skip_at = None
            elif self.active:
                self._close(top)
            if self.main_at is not None and depth == self.main_at:
                self.main_at = None
                self.main_done = True
            if top == tag:
                break

    def _close(self, tag: str) -> None:
        if tag in _HEADINGS:
            self.emit("\n\n")
        elif tag in ("ul", "ol"):
            if self.lists:
                self.lists.pop()
            self.emit("\n\n" if not self.lists else "")
        elif tag == "pre":
            self.pre = max(0, self.pre - 1)
            code = self.pop().strip("\n")
            self.emit(f"\n\n```{self.code_lang}\n{code}\n```\n\n")
            self.code_lang = ""
        elif tag == "code" and not self.pre:
            self.emit("`")
        elif tag in ("strong", "b"):
            self.emit("**")
        elif tag in ("em", "i"):
            self.emit("*")
        elif tag == "a":
            text = re.sub(r"\s+", " ", self.pop()).strip()
            # code inside a link keeps its brackets; as link text they would end it early
            text = _BARE_BRACKET.sub(r"\1\\\2", text)
            href = self.links.pop() if self.links else ""
            if text and href and not href.startswith("#"):
                self.emit(f"[{text}]({href.strip()})")
            elif not (href.startswith("#") and text in _ANCHOR_GLYPHS):
                self.emit(text)  # (a heading's own "#" / "¶" permalink is dropped)
        elif tag == "blockquote":
            body = re.sub(r"\n{3,}", "\n\n", self.pop()).strip()
            quoted = "\n".join(f"> {line}".rstrip() for line in body.split("\n"))
            self.emit(f"\n\n{quoted}\n\n")
        elif tag in ("td", "th") and self.tables:
            cell = re.sub(r"\s+", " ", self.pop()).strip().replace("|", "\\|")
            row = self.tables[-1]["row"]
            if row is not None:
                row.append(cell)
        elif tag == "tr" and self.tables:
            table = self.tables[-1]
            if table["row"]:
                table["rows"].append(table["row"])
            table["row"] = None
        elif tag == "table" and self.tables:
            self.emit(_pipe_table(self.tables.pop()["rows"]))
        elif tag in _BLOCK:
            self.emit("\n\n")

    def handle_data(self, data: str) -> None:
        if not self.active:
            return
        if self.pre:
            self.emit(data)
        elif self.open.get("code"):
            self.emit(re.sub(r"\s+", " ", data))  # a code span shows backslashes as typed
        else:
            # Text is text: a bracket or backslash on the page must not open, close or
            # escape a link of ours (``[a\](/x)`` would hide the link from absolute_links).
            self.emit(_MD_TEXT.sub(r"\\\g<0>", re.sub(r"\s+", " ", data)))


def _language(classes: str) -> str:
    for name in classes.split():
        for prefix in ("language-", "lang-", "highlight-"):
            if name.startswith(prefix):
                lang = name[len(prefix) :]
                return lang if re.fullmatch(r"[A-Za-z0-9_+-]{1,20}", lang) else ""
    return ""


def _pipe_table(rows: list[list[str]]) -> str:
    if not rows:
        return ""
    width = max(len(r) for r in rows)
    padded = [r + [""] * (width - len(r)) for r in rows]
    lines = ["| " + " | ".join(padded[0]) + " |", "|" + "---|" * width]
    lines += ["| " + " | ".join(r) + " |" for r in padded[1:]]
    return "\n\n" + "\n".join(lines) + "\n\n"
