"""docs/architecture.md's module table names files that exist.

Every row of the table under "## Modules (`src/tooldeck/`)" starts with the paths it
describes (``| `tools.py` |``, ``| `agents/toolkits.py`, `agents/toolkits.toml` |``); a
module moved or renamed without the map following it fails here, naming the row.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "tooldeck"
MAP = ROOT / "docs" / "architecture.md"


def module_rows() -> list[tuple[int, list[str]]]:
    """``(line number, paths)`` of every row of the module table."""
    rows: list[tuple[int, list[str]]] = []
    inside = False
    for number, line in enumerate(MAP.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("## "):
            inside = line.startswith("## Modules")
            continue
        if not inside or not line.startswith("| `"):
            continue
        first = line.split("|")[1]
        rows.append((number, re.findall(r"`([^`]+)`", first)))
    return rows


def test_the_module_table_is_found() -> None:
    rows = module_rows()
    assert len(rows) > 50  # the whole table, not a fragment of it
    assert any("tools.py" in paths for _, paths in rows)


def test_every_row_of_the_module_table_names_an_existing_file() -> None:
    missing = [
        f"docs/architecture.md:{number}: {path}"
        for number, paths in module_rows()
        for path in paths
        if not (PACKAGE / path).exists()
    ]
    assert missing == [], "the module table names what src/tooldeck/ does not hold"
