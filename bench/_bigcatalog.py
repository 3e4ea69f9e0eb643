"""Large tool catalogs for the search scale benchmark (deterministic, seeded).

A gateway in front of many MCP servers sees thousands of tools from hundreds of services.
``catalog(n)`` builds such a catalog of exactly ``n`` tool definitions:

- every tool a benchmark query needs (``bench/catalog/queries.json``: ``expected`` and
  ``needs``), so recall can be measured at every size;
- then the other real tools of ``bench/catalog/tools.json`` (2,033 in all), in file order;
- then generated services of 12 to 40 tools each, in the style of ``_toolgen``: a service
  (namespace) named from its word lists, tools named ``<verb>_<noun>`` (a few with a
  qualifier), five parameters with descriptions and enum values. Each generated
  description also carries one sentence of a real tool's description (picked at random),
  so query words hit generated tools about as often as real ones: a query's posting
  lists grow with the catalog, as they do behind a real gateway.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from _toolgen import _NOUNS, _ROLES, _VERBS, _WORDS

HERE = Path(__file__).resolve().parent
TOOLS = HERE / "catalog" / "tools.json"
QUERIES = HERE / "catalog" / "queries.json"

_QUALIFIERS = ("batch", "draft", "history", "status", "by_id", "details", "v2", "summary")
_KINDS = ("string", "integer", "number", "boolean", "array", "enum")


def real_tools() -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = json.loads(TOOLS.read_text(encoding="utf-8"))["tools"]
    for t in tools:
        t.pop("source", None)
    return tools


def queries() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = json.loads(QUERIES.read_text(encoding="utf-8"))
    return out


def needed(qs: list[dict[str, Any]]) -> set[str]:
    names: set[str] = set()
    for q in qs:
        names.update(q.get("expected", ()))
        for need in q.get("needs", ()):
            names.update(need)
    return names


def _sentences(tools: list[dict[str, Any]]) -> list[str]:
    out = []
    for t in tools:
        first = t.get("description", "").split(". ")[0].strip()
        if 20 <= len(first) <= 200:
            out.append(first.rstrip(".") + ".")
    return out


def generated(count: int, sentences: list[str], seed: int = 20261202) -> list[dict[str, Any]]:
    """``count`` generated tool definitions, services of 12 to 40 tools."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    service = 0
    while len(out) < count:
        service += 1
        ns = f"{rng.choice(_WORDS)}_{rng.choice(_NOUNS)}_{service}"
        topic = rng.sample(_NOUNS, 4)
        ns_desc = (
            f"{ns.split('_')[0].capitalize()} service: {', '.join(topic[:3])} and "
            f"{topic[3]} records for teams."
        )
        size = min(rng.randint(12, 40), count - len(out))
        names: set[str] = set()
        while len(names) < size:
            verb, noun = rng.choice(_VERBS), rng.choice([*topic, rng.choice(_NOUNS)])
            name = f"{verb}_{noun}"
            if rng.random() < 0.3:
                name += "_" + rng.choice(_QUALIFIERS)
            names.add(name)
        for name in sorted(names):
            verb, noun = name.split("_")[:2]
            props: dict[str, Any] = {}
            while len(props) < 5:
                pname = f"{rng.choice(_WORDS)}_{rng.choice(_ROLES)}"
                kind = rng.choice(_KINDS)
                what = f"The {pname.replace('_', ' ')} used to {verb} the {noun}."
                if kind == "enum":
                    props[pname] = {
                        "type": "string",
                        "enum": rng.sample(_WORDS, 3),
                        "description": what,
                    }
                elif kind == "array":
                    props[pname] = {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": what,
                    }
                else:
                    props[pname] = {"type": kind, "description": what}
            first = next(iter(props)).replace("_", " ")
            out.append(
                {
                    "name": f"{ns}__{name}",
                    "description": (
                        f"{verb.capitalize()} one {noun} in {ns}. {rng.choice(sentences)} "
                        f"Use this to {verb} the {noun} by its {first}."
                    ),
                    "input_schema": {
                        "type": "object",
                        "properties": props,
                        "required": list(props)[:4],
                    },
                    "namespace": ns,
                    "namespace_description": ns_desc,
                }
            )
    return out


def catalog(n: int) -> list[dict[str, Any]]:
    """``n`` tool definitions: the needed real tools, the other real ones, generated ones."""
    tools = real_tools()
    want = needed(queries())
    first = [t for t in tools if t["name"] in want]
    rest = [t for t in tools if t["name"] not in want]
    if n < len(first):
        raise ValueError(f"a catalog needs at least {len(first)} tools (the needed ones)")
    picked = (first + rest)[:n]
    if len(picked) < n:
        picked += generated(n - len(picked), _sentences(tools))
    return picked
