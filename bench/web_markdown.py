"""web_fetch's HTML to Markdown: candidate libraries measured on the saved test pages.

Quality is the share of a page's checks that hold (tests/web_pages/pages.py: headings,
lists, tables, code blocks and absolute links kept; menus, banners and footers dropped),
speed the median time per page. Every candidate gets the same decoded text and the same
link post-pass (links made absolute), so only the conversion differs. Run::

    python3 -m uv run --locked --with markdownify --with html-to-markdown \\
        --with readability-lxml --with lxml_html_clean python bench/web_markdown.py

``--weights`` also installs each candidate into a fresh virtual environment (uv, from
PyPI) and reports what it adds on disk and how many packages it pulls in.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "web_pages"))

from pages import HELD_OUT, PAGES  # noqa: E402

from tooldeck.builtin.web.documents import content_type, decode  # noqa: E402
from tooldeck.builtin.web.markdown import absolute_links, html_to_markdown  # noqa: E402

ORIGIN = "https://site.example"
REPEATS = 20


def tooldeck_default(html: str, url: str) -> str:
    return html_to_markdown(html, url).markdown


def tooldeck_fallback(html: str, url: str) -> str:
    return html_to_markdown(html, url, prefer_library=False).markdown


def trafilatura_alone(html: str, url: str) -> str:
    import trafilatura

    made = trafilatura.extract(
        html,
        output_format="markdown",
        include_links=True,
        include_tables=True,
        include_formatting=True,
        include_comments=False,
    )
    return absolute_links(made or "", url)


def readability_markdownify(html: str, url: str) -> str:
    import markdownify
    from readability import Document

    summary = Document(html).summary(html_partial=True)
    return absolute_links(markdownify.markdownify(summary, heading_style="ATX"), url)


def readability_html_to_markdown(html: str, url: str) -> str:
    import html_to_markdown
    from readability import Document

    summary = Document(html).summary(html_partial=True)
    return absolute_links(html_to_markdown.convert(summary).content, url)


def markdownify_alone(html: str, url: str) -> str:
    import markdownify

    return absolute_links(
        markdownify.markdownify(html, heading_style="ATX", strip=["script", "style"]), url
    )


def html_to_markdown_alone(html: str, url: str) -> str:
    import html_to_markdown

    return absolute_links(html_to_markdown.convert(html).content, url)


CANDIDATES: dict[str, tuple[Callable[[str, str], str], list[str]]] = {
    "tooldeck (trafilatura, web extra)": (tooldeck_default, ["trafilatura"]),
    "tooldeck fallback (html.parser)": (tooldeck_fallback, []),
    "trafilatura 2.x alone": (trafilatura_alone, ["trafilatura"]),
    "readability-lxml + markdownify": (
        readability_markdownify,
        ["readability-lxml", "lxml_html_clean", "markdownify"],
    ),
    "readability-lxml + html-to-markdown": (
        readability_html_to_markdown,
        ["readability-lxml", "lxml_html_clean", "html-to-markdown"],
    ),
    "markdownify alone": (markdownify_alone, ["markdownify"]),
    "html-to-markdown alone": (html_to_markdown_alone, ["html-to-markdown"]),
}


def decoded() -> list[tuple[str, str, object]]:
    out = []
    for page in (*PAGES, HELD_OUT):
        _, charset = content_type(page.content_type)
        text, _ = decode(page.body, charset, True)
        out.append((text, ORIGIN + page.path, page))
    return out


def quality_and_speed() -> None:
    pages = decoded()
    print(
        f"{'candidate':38} {'checks':>8} "
        + " ".join(f"{p.file[:10]:>10}" for _, _, p in pages)
        + f" {'ms/page':>8}"
    )
    for name, (convert, _) in CANDIDATES.items():
        held = total = 0
        cells = []
        times: list[float] = []
        for html, url, page in pages:
            try:
                made = convert(html, url)
            except Exception as exc:  # a candidate that fails scores zero on that page
                made = f"(failed: {exc})"
            missing, present = page.check(made, ORIGIN)  # type: ignore[attr-defined]
            checks = len(page.keep) + len(page.drop)  # type: ignore[attr-defined]
            ok = checks - len(missing) - len(present)
            held += ok
            total += checks
            cells.append(f"{ok}/{checks}")
            for _ in range(REPEATS):
                start = time.perf_counter()
                convert(html, url)
                times.append((time.perf_counter() - start) * 1000)
        print(
            f"{name:38} {held:>3}/{total:<4} "
            + " ".join(f"{c:>10}" for c in cells)
            + f" {statistics.median(times):8.2f}"
        )


def weights() -> None:
    for name, (_, packages) in CANDIDATES.items():
        if not packages:
            print(f"{name:38} standard library only")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            venv = Path(tmp) / "v"
            uv = [os.environ["UV"]] if os.environ.get("UV") else ["python3", "-m", "uv"]
            subprocess.run([*uv, "venv", "-q", str(venv)], check=True)
            python = str(venv / "bin" / "python")
            subprocess.run([*uv, "pip", "install", "-q", "--python", python, *packages], check=True)
            site = next(venv.glob("lib/python*/site-packages"))
            size = sum(f.stat().st_size for f in site.rglob("*") if f.is_file())
            dists = len(list(site.glob("*.dist-info")))
            print(f"{name:38} {size / 1e6:6.1f} MB, {dists} packages")


if __name__ == "__main__":
    quality_and_speed()
    if "--weights" in sys.argv:
        weights()
