"""Hostile and broken input for the web tools' parsers: they never raise, never leak
script text, and keep their promises (links absolute, domain tests consistent)."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tooldeck.builtin.web import markdown
from tooldeck.builtin.web.documents import RefusedCharset, decode
from tooldeck.policy.rules import parse_args
from tooldeck.web._base import SearchResult, clean_text, tidy_results

TAGS = [
    "div",
    "p",
    "a",
    "ul",
    "ol",
    "li",
    "table",
    "tr",
    "td",
    "th",
    "pre",
    "code",
    "h2",
    "blockquote",
    "script",
    "style",
    "nav",
    "main",
    "article",
    "br",
    "b",
    "i",
    "span",
]
fragment = st.lists(
    st.one_of(
        st.sampled_from([f"<{t}>" for t in TAGS] + [f"</{t}>" for t in TAGS]),
        st.sampled_from(['<a href="/x">', '<a href="javascript:evil()">', "<pre class='lang-py'>"]),
        st.sampled_from(["\\", "[", "]", "](/y)", "&#92;"]),  # text that looks like Markdown
        st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=20),
    ),
    max_size=60,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(fragment)
def test_the_plain_converter_never_raises_and_never_shows_scripts(html: str) -> None:
    page = f"<html><head><script>SECRET_SCRIPT()</script></head><body>{html}</body></html>"
    title, text = markdown.html_to_text(page)
    assert "SECRET_SCRIPT" not in text
    assert isinstance(title, str)


@settings(max_examples=200, deadline=None)
@given(fragment)
def test_links_come_out_absolute_or_not_at_all(html: str) -> None:
    made = markdown.html_to_markdown(html, "https://site.example/dir/page", prefer_library=False)
    in_code = False
    for line in made.markdown.split("\n"):
        if line.lstrip().startswith("```"):
            in_code = not in_code
        if in_code:
            continue
        line = re.sub(r"`[^`]*`", "", line)  # a code span's brackets are text
        # a `](` not escaped by the page's own text (an odd run of backslashes escapes it)
        for target in re.findall(r"(?<!\\)(?:\\\\)*\]\(([^)\s]+)", line):
            assert urlsplit(target).scheme in ("http", "https", "mailto"), target


def test_deeply_nested_and_huge_markup_is_handled() -> None:
    deep = "<div>" * 50_000 + "<p>deep text</p>" + "</div>" * 50_000
    made = markdown.html_to_markdown(deep, "https://x.example/")
    assert "deep text" in made.markdown
    unclosed = "<main>" + "<li><b><i>x" * 20_000
    assert "x" in markdown.html_to_markdown(unclosed, "https://x.example/").markdown


NOT_CHARSETS = [
    "punycode",  # quadratic: 1.9 MB of it decodes for many minutes
    "idna",
    "rot13",
    "rot_13",
    "base64",
    "base64_codec",
    "hex",
    "zlib",
    "bz2",
    "uu",
    "quopri",
    "quotedprintable",
    "unicode_escape",
    "raw_unicode_escape",
    "undefined",
    "charmap",
    "PUNYCODE",
]


@given(
    st.binary(max_size=2000),
    st.one_of(
        st.none(),
        st.sampled_from(["utf-8", "bogus", "latin-1", "utf-16", "", " ", *NOT_CHARSETS]),
    ),
    st.sampled_from(
        [
            "",
            '<meta charset="{}">',
            "<meta http-equiv=content-type content='text/html; charset={}'>",
        ]
    ),
    st.sampled_from(["utf-8", "koi8-r", "bogus", *NOT_CHARSETS]),
)
def test_decoding_gives_text_or_refuses_a_codec_that_is_not_a_charset(
    data: bytes, charset: str | None, meta: str, in_meta: str
) -> None:
    page = meta.format(in_meta).encode() + data
    try:
        text, used = decode(page, charset, html=True)
    except RefusedCharset as refused:
        assert refused.declared in (charset, in_meta)
        assert refused.declared.lower() in {c.lower() for c in NOT_CHARSETS}
    else:
        assert isinstance(text, str) and used


@pytest.mark.parametrize("name", NOT_CHARSETS)
def test_a_codec_that_is_not_a_charset_is_refused_in_the_header_and_in_the_page(
    name: str,
) -> None:
    with pytest.raises(RefusedCharset, match=f"the page declares the charset '{name}', which"):
        decode(b"x" * 100, name, html=False)
    with pytest.raises(RefusedCharset):
        decode(f'<html><meta charset="{name}"><p>x</p></html>'.encode(), None, html=True)
    # a byte-order mark outranks the page's own declaration
    text, used = decode(f'\ufeff<meta charset="{name}"><p>x'.encode(), None, html=True)
    assert used == "utf-8-sig" and text.endswith("<p>x")


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("windows-1251", "Новости"),
        ("shift_jis", "日本語のページ"),
        ("gb18030", "中文网页"),
        ("koi8-r", "Привет"),
        ("latin-1", "café"),
        ("utf-16", "naïve"),
        ("iso-2022-jp", "日本"),
        ("utf-7", "a+b"),
        ("cp437", "╔═╗"),
    ],
)
def test_real_charsets_still_decode(name: str, text: str) -> None:
    assert decode(text.encode(name), name, html=False)[0] == text


@given(st.text(max_size=500))
def test_clean_text_is_one_line_and_bounded(value: str) -> None:
    cleaned = clean_text(value, 100)
    assert "\n" not in cleaned and len(cleaned) <= 100


labels = st.from_regex(r"[a-z][a-z0-9]{0,8}", fullmatch=True)


@given(st.lists(labels, min_size=1, max_size=3), st.lists(labels, min_size=0, max_size=2))
def test_a_domain_rule_matches_the_domain_and_its_subdomains_only(
    base: list[str], sub: list[str]
) -> None:
    domain = ".".join([*base, "example"])
    [predicate] = parse_args({"url": {"domain": [domain]}}, "t", [])
    host = ".".join([*sub, domain])
    assert predicate.test({"url": f"https://{host}/path"}) is True
    assert predicate.test({"url": f"https://{host.upper()}./x"}) is True
    assert predicate.test({"url": f"https://x{domain}/"}) is False  # not a subdomain
    assert predicate.test({"url": "no host here"}) in (None, False)
    assert predicate.test({"url": 3}) is None
    assert predicate.test({"url": [f"https://{host}/", "https://other.test/"]}) is None


@given(
    st.lists(
        st.tuples(st.sampled_from(["https", "http", "ftp", "javascript"]), labels), max_size=30
    )
)
def test_tidy_results_keeps_only_http_once_each(pairs: list[tuple[str, str]]) -> None:
    hits = [SearchResult(h, f"{s}://{h}.example/") for s, h in pairs]
    kept = tidy_results(hits, limit=10)
    urls = [k.url for k in kept]
    assert len(urls) == len(set(urls)) <= 10
    assert all(urlsplit(u).scheme in ("http", "https") for u in urls)
