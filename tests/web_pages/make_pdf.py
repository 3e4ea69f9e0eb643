"""Writes report.pdf: a small two-page PDF built by hand (no PDF library), for web_fetch.

Run it again only to change the file; the tests read the committed report.pdf.
:func:`bomb` builds a hostile PDF for the tests (small on the wire, slow to read).
"""

from __future__ import annotations

import zlib
from pathlib import Path

PAGES = [
    [
        (20, "Harbor Street Traffic Study"),
        (12, "Prepared for the Riverside Department of Transportation, November 2026."),
        (14, "1. Summary"),
        (11, "Protected bike lanes would add about 90 seconds to rush-hour trips by car."),
        (11, "Parking on the corridor would fall from 310 to 268 spaces."),
    ],
    [
        (14, "2. Recommendations"),
        (11, "Add left-turn signals at Fifth Avenue and at Mill Road."),
        (11, "Keep a loading zone in front of every block of shops."),
    ],
]


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def build() -> bytes:
    objects: list[bytes] = []

    def add(body: str | bytes) -> int:
        objects.append(body.encode("latin-1") if isinstance(body, str) else body)
        return len(objects)

    catalog = add("")  # filled in below, once the page tree's number is known
    info = add("<< /Title (Harbor Street Traffic Study) /Author (Riverside DOT) >>")
    font = add("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    tree = len(objects) + 1 + 2 * len(PAGES)
    kids = []
    for lines in PAGES:
        ops = ["BT"]
        y = 740
        for size, text in lines:
            ops.append(f"/F1 {size} Tf 1 0 0 1 72 {y} Tm ({_escape(text)}) Tj")
            y -= size * 2
        ops.append("ET")
        stream = "\n".join(ops).encode("latin-1")
        content = add(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
        kids.append(
            add(
                f"<< /Type /Page /Parent {tree} 0 R /MediaBox [0 0 612 792] "
                f"/Resources << /Font << /F1 {font} 0 R >> >> /Contents {content} 0 R >>"
            )
        )
    refs = " ".join(f"{k} 0 R" for k in kids)
    assert add(f"<< /Type /Pages /Kids [{refs}] /Count {len(kids)} >>") == tree
    objects[catalog - 1] = f"<< /Type /Catalog /Pages {tree} 0 R >>".encode("latin-1")
    return _file(objects, catalog, info)


def bomb(pages: int = 12, stream_bytes: int = 48_000_000) -> bytes:
    """A PDF whose ``pages`` pages all draw one Flate-compressed content stream of
    ``stream_bytes`` bytes of text operators: about 120 KB on the wire, and reading its
    text takes pypdf minutes (every page parses the whole stream again)."""
    op = b"BT /F1 9 Tf 72 720 Td (x) Tj ET\n"
    packed = zlib.compress(op * (stream_bytes // len(op)), 9)
    objects = [
        b"",  # the catalog, filled in below
        b"<< /Title (Quarterly figures) >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(packed) + packed + b"\nendstream",
    ]
    tree = len(objects) + pages + 1
    kids = []
    for _ in range(pages):
        objects.append(
            b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents 4 0 R >>" % tree
        )
        kids.append(b"%d 0 R" % len(objects))
    objects.append(b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(kids), pages))
    assert len(objects) == tree
    objects[0] = b"<< /Type /Catalog /Pages %d 0 R >>" % tree
    return _file(objects, 1, 2)


def _file(objects: list[bytes], catalog: int, info: int) -> bytes:
    """The PDF file of ``objects`` (numbered from 1): header, bodies, xref, trailer."""
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root %d 0 R /Info %d 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        catalog,
        info,
        xref,
    )
    return bytes(out)


if __name__ == "__main__":
    Path(__file__).with_name("report.pdf").write_bytes(build())
