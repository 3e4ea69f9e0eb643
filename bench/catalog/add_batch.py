"""Add a batch of hand-written queries (``batch7.txt``) to ``queries.json``.

Why a script: the fresh held-out set's provenance has to be reproducible. It checks every
expected tool against ``tools.json``, drops each query too close in wording to an earlier
query for the same tool (word Jaccard >= 0.5, the filter batch 4 used) or to an earlier
query of the same batch, then splits what is left by a hash of the query text: half
``tune``, half ``heldout-3``. No ranker is imported or run.

Run: ``python bench/catalog/add_batch.py bench/catalog/batch7.txt 7`` (idempotent: the
batch's earlier rows are replaced).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TOOLS = HERE / "tools.json"
QUERIES = HERE / "queries.json"
JACCARD_LIMIT = 0.5


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 0.0


def parse(path: Path) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.rstrip()
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line.startswith("* "):
            items.append({"query": line[2:].strip(), "needs": [], "subqueries": []})
        elif line.lstrip().startswith("> "):
            sub, _, tools = line.lstrip()[2:].partition(" | ")
            items[-1]["subqueries"].append(sub.strip())
            items[-1]["needs"].append([t.strip() for t in tools.split(",")])
        else:
            query, _, tools = line.partition(" | ")
            items.append(
                {"query": query.strip(), "expected": [t.strip() for t in tools.split(",")]}
            )
    return items


def tools_of(item: dict[str, Any]) -> set[str]:
    if "needs" in item:
        return {t for need in item["needs"] for t in need}
    return set(item["expected"])


def main() -> None:
    source, batch = Path(sys.argv[1]), int(sys.argv[2])
    names = {t["name"] for t in json.loads(TOOLS.read_text(encoding="utf-8"))["tools"]}
    existing = [q for q in json.loads(QUERIES.read_text(encoding="utf-8")) if q["batch"] != batch]
    items = parse(source)
    unknown = sorted({t for item in items for t in tools_of(item)} - names)
    if unknown:
        raise SystemExit(f"unknown tools: {unknown}")
    for item in items:
        if "needs" in item and len(item["needs"]) < 2:
            raise SystemExit(f"a multi-tool request needs 2+ sub-tasks: {item['query']!r}")
    earlier = [(words(q["query"]), tools_of(q)) for q in existing]
    kept: list[dict[str, Any]] = []
    dropped: list[tuple[str, str, float]] = []
    for item in items:
        w, t = words(item["query"]), tools_of(item)
        close = [(jaccard(w, ew), et) for ew, et in earlier if et & t]
        worst = max((j for j, _ in close), default=0.0)
        if worst >= JACCARD_LIMIT:
            dropped.append((item["query"], "earlier batch", worst))
            continue
        earlier.append((w, t))  # later items of this batch are checked against it too
        kept.append(item)
    next_id = max(q["id"] for q in existing) + 1
    rows = []
    for item in kept:
        digest = hashlib.sha256(item["query"].encode("utf-8")).digest()
        split = "heldout-3" if digest[0] % 2 else "tune"
        rows.append({"id": next_id, "split": split, **item, "batch": batch})
        next_id += 1
    lines = ",\n".join(json.dumps(q, ensure_ascii=False) for q in existing + rows)
    QUERIES.write_text(f"[\n{lines}\n]\n", encoding="utf-8")
    for query, why, j in dropped:
        print(f"dropped (Jaccard {j:.2f} with an {why}): {query!r}")
    single = [r for r in rows if "expected" in r]
    multi = [r for r in rows if "needs" in r]
    for split in ("tune", "heldout-3"):
        s = sum(r["split"] == split for r in single)
        m = sum(r["split"] == split for r in multi)
        print(f"{split}: {s} single-tool, {m} multi-tool")
    print(f"written {len(rows)} of {len(items)} (dropped {len(dropped)})")


if __name__ == "__main__":
    main()
