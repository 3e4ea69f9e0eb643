"""The saved pages web_fetch is tested (and the HTML converters benchmarked) on.

The pages were written for tooldeck in the shape of real ones (no network here to save
real pages from): a news article, a documentation page, a forum thread, a table-heavy
encyclopedia page, a windows-1251 page that declares its charset only in a ``<meta>``
tag, a Shift_JIS page that declares it nowhere, and a PDF (``make_pdf.py``). Each has
what a reader needs (``keep``) and the boilerplate a reader does not (``drop``).

Expectations are regular expressions over the Markdown; ``{origin}`` is the scheme and
host the page was served from, so links must come out absolute.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).parent


@dataclass(frozen=True)
class Page:
    file: str
    path: str  # where the test server serves it
    content_type: str
    title: str
    keep: dict[str, str] = field(default_factory=dict)  # what it checks -> regex
    drop: tuple[str, ...] = ()  # boilerplate that must not appear (plain text)

    @property
    def body(self) -> bytes:
        return (HERE / self.file).read_bytes()

    def check(self, markdown: str, origin: str) -> tuple[list[str], list[str]]:
        """(kept checks that failed, dropped strings that are still there)."""
        missing = [
            what
            for what, pattern in self.keep.items()
            if not re.search(pattern.replace("{origin}", re.escape(origin)), markdown, re.M)
        ]
        present = [text for text in self.drop if text in markdown]
        return missing, present


PAGES: tuple[Page, ...] = (
    Page(
        "news_article.html",
        "/2026/11/30/harbor-street-bike-lanes",
        "text/html; charset=utf-8",
        "City council approves new bike lanes on Harbor Street | The Riverside Ledger",
        keep={
            "first paragraph": r"voted 7–2 on Monday night",
            "h2 heading": r"^## What changes for drivers$",
            "h3 heading": r"^### Next steps$",
            "list item": r"^[-*+] +new left-turn signals at Fifth Avenue",
            "relative link made absolute": (
                r"\[city's traffic study\]\({origin}/documents/harbor-street-traffic-study\.pdf\)"
            ),
            "external link": (
                r"\[2024 study of protected lanes in 14 cities\]\("
                r"https://www\.transportation-research\.example/studies/protected-lanes-retail-2024\)"
            ),
            "quote": r"^> .*keeps every store reachable",
            "last paragraph": r"public meeting on the detailed design",
        },
        drop=(
            "We use cookies",
            "Accept all",
            "Subscribe for $1",
            "Share on Facebook",
            "Related stories",
            "Ferry terminal renovation",
            "Get the Morning Ledger",
            "All rights reserved",
            "Privacy policy",
            "gtag(",
        ),
    ),
    Page(
        "docs_page.html",
        "/en/3.2/guide/retries.html",
        "text/html; charset=utf-8",
        "Retrying requests — Pyrope 3.2 documentation",
        keep={
            "intro": r"exponential backoff between attempts",
            "h2 heading": r"^## Enabling retries",
            "code block fenced": r"^```[a-z]*\n(?:.*\n)*?import pyrope$",
            "code line intact": (r"^retry = pyrope\.Retry\(total=5, backoff_factor=0\.5\)$"),
            "code indentation kept": (
                r'^    response = session\.get\("https://api\.example\.com/items"\)$'
            ),
            "inline code": r"`backoff_factor \* 2 \*\* \(n - 1\)`",
            "table header": r"^\|? *Parameter *\| *Default *\| *Meaning *\|?",
            "table row": r"^\|? *`?status_forcelist`? *\| *`?\(502, 503, 504\)`? *\|",
            "ordered list": r"^1\. +Generate a unique key per logical operation",
            "relative link absolute": (
                r"\[Connect timeouts\]\({origin}/en/3\.2/guide/timeouts\.html#connect-timeouts\)"
            ),
        },
        drop=(
            "Skip to content",
            "Pyrope 4.0 beta is out",
            "Sessions and connection pools",
            "Edit on GitHub",
            "Built with Sphinx",
            "Timeouts »",
        ),
    ),
    Page(
        "forum_thread.html",
        "/t/postgres-connection-pool-exhausted-after-upgrading-to-16-4/8812",
        "text/html; charset=utf-8",
        "Postgres connection pool exhausted after upgrading to 16.4 - Help - DevHub Community",
        keep={
            "question": r"our API keeps failing with this error",
            "error in a code block": r"^FATAL:  sorry, too many clients already$",
            "second post": r"Check whether `max_connections` went back",
            "sql code": r"^SHOW max_connections;$",
            "accepted answer": r"the errors stopped",
            "answer list": r"^[-*+] +`max_connections = 300`",
            "answer link": (
                r"\[connection settings documentation\]\("
                r"https://www\.postgresql\.org/docs/16/runtime-config-connection\.html\)"
            ),
        },
        drop=(
            "Sign up",
            "Log in",
            "Search topics",
            "Badges",
            "Powered by Discourse",
            "Terms of Service",
        ),
    ),
    Page(
        "table_page.html",
        "/wiki/List_of_tallest_lighthouses",
        "text/html; charset=UTF-8",
        "List of tallest lighthouses - OpenWiki",
        keep={
            "lead": r"list of the tallest lighthouses",
            "h2 heading": r"^## Tallest lighthouses",
            "table header": (
                r"^\|? *Rank *\| *Name *\| *Country *\| *Height \(m\) *\| *Year built *\|?"
            ),
            "table separator": r"^\|? *:?-{3,}:? *\|",
            "table row with a link": (
                r"^\|? *1 *\| *\[Jeddah Light\]\({origin}/wiki/Jeddah_Light\) *\| *Saudi Arabia"
                r" *\| *133 *\| *1990 *\|?"
            ),
            "last row": r"Cape Hatteras Light.*\| *63 *\| *1870",
            "second table": r"^\|? *France *\| *7 *\| *Île Vierge *\|?",
        },
        drop=(
            "Navigation menu",
            "Random article",
            "donate today",
            "Search OpenWiki",
            "Privacy policy",
            "Creative Commons Attribution-ShareAlike",
        ),
    ),
    Page(
        "windows1251_news.html",
        "/news/2026/most.html",
        "text/html",  # the charset is only in the page's <meta> tag
        "Новый мост через Волгу откроют в декабре — Городские новости",
        keep={
            "heading": r"^# Новый мост через Волгу откроют в декабре$",
            "body text": r"завершено на девяносто пять процентов",
            "h2": r"^## Что изменится для жителей$",
            "list": r"^[-*+] +время в пути из Заречного района",
            "link": r"\[сайте проекта\]\({origin}/news/2026/most-plan\.html\)",
        },
        drop=("Мы используем файлы cookie", "Все права защищены"),
    ),
    Page(
        "shift_jis_blog.html",
        "/blog/kyoto.html",
        "text/html",  # no charset anywhere: it has to be detected
        "週末の京都散歩：嵐山と竹林の小径",
        keep={
            "body text": r"竹林の小径を歩きたかったからです",
            "h2": r"^## おすすめの順路$",
            "ordered list": r"^1\. +嵐山駅から渡月橋まで歩く",
            "link": r"\[京都グルメの記事\]\({origin}/kyoto/food\.html\)",
        },
        drop=("All Rights Reserved", "プロフィール"),
    ),
)

# Written after the plain converter's rules were fixed, to see how both converters do
# on a page neither was adjusted to (a WordPress post, with its own class names).
HELD_OUT = Page(
    "blog_post.html",
    "/2026/10/sourdough-high-altitude/",
    "text/html; charset=UTF-8",
    "Sourdough at high altitude: what I changed – Crumb & Crust",
    keep={
        "first paragraph": r"my usual loaf collapsed three weekends in a row",
        "h2 heading": r"^## The three changes that fixed it$",
        "ordered list": r"^1\. +Cut the levain from 20% to 12%",
        "table header": r"^\|? *Ingredient *\| *Sea level *\| *2,300 m *\|?",
        "table row": r"^\|? *Water *\| *78% *\| *72% *\|?",
        "external link": (
            r"\[guide to high-altitude baking\]\("
            r"https://www\.kingarthurbaking\.example/learn/resources/high-altitude-baking\)"
        ),
        "relative link made absolute": (
            r"\[my levain schedule\]\({origin}/2026/09/levain-schedule/\)"
        ),
    },
    drop=(
        "Shop my tools",
        "Bread, mostly",
        "Share this",
        "Pinterest",
        "Rye without tears",
        "saved my weekend bake",
        "Recent Posts",
        "Proudly powered by WordPress",
    ),
)

PDF = Page(
    "report.pdf",
    "/documents/harbor-street-traffic-study.pdf",
    "application/pdf",
    "Harbor Street Traffic Study",
    keep={
        "page 1": r"Protected bike lanes would add about 90 seconds",
        "page 2": r"Keep a loading zone in front of every block of shops",
        "page marker": r"Page 2",
    },
)
