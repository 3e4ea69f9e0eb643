"""What ``tool_search`` adds to a session's listing: only tools above the relevance floor,
and at most ``MAX_FOUND`` of them, the least recently used dropped (``list_changed``).

Real processes only: ``tooldeck serve`` reached with the official MCP client SDK, in
front of npm's ``@modelcontextprotocol/server-everything`` and
``@modelcontextprotocol/server-memory``, PyPI's ``mcp-server-time`` and
``mcp-server-git`` (the catalog of the issue: 36 tools).
"""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession

from gateway_client import (
    ALLOW_ALL,
    PY,
    Notes,
    gateway,
    names,
    node_server,
    npm_server,
    text_of,
    time_server,
    write_config,
    write_policy,
)
from tooldeck.gateway.session import MAX_FOUND
from tooldeck.gateway.wire import listing_tokens

OWN = {"tool_search", "call_tool", "recall_tool_result"}
TIME_TOOLS = {"time__get_current_time", "time__convert_time"}


def _catalog(tmp_path: Path) -> Path:
    everything = npm_server(
        "@modelcontextprotocol/server-everything", "2026.8.31", "mcp-server-everything"
    )
    memory = npm_server("@modelcontextprotocol/server-memory", "2026.8.31", "mcp-server-memory")
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return write_config(
        tmp_path,
        {
            "everything": node_server(everything, "stdio"),
            "memory": node_server(memory, env={"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")}),
            "time": time_server(),
            "git": {"command": PY, "args": ["-m", "mcp_server_git", "--repository", str(repo)]},
        },
    )


async def _found(client: ClientSession) -> list[str]:
    return [n for n in await names(client) if n not in OWN]


async def _tokens(client: ClientSession) -> int:
    return listing_tokens((await client.list_tools()).tools)


@pytest.mark.parametrize("lexical", [True, False], ids=["words", "meaning"])
def test_a_search_adds_only_the_relevant_tools(tmp_path: Path, lexical: bool) -> None:
    """The issue's query listed trigger-long-running-operation (and four other tools)."""
    if not lexical and importlib.util.find_spec("wordllama") is None:
        pytest.skip("ranking by meaning needs the semantic extra")
    config = _catalog(tmp_path)
    policy = write_policy(tmp_path, ALLOW_ALL)
    sizes: list[int] = []

    async def main() -> None:
        args = ("--policy", str(policy))
        async with gateway(config, tmp_path / "s", *args, lexical=lexical) as c:
            sizes.append(await _tokens(c))
            answer = text_of(
                await c.call_tool("tool_search", {"query": "current time in a timezone"})
            )
            assert set(await _found(c)) == TIME_TOOLS
            assert "trigger-long-running-operation" not in answer
            assert answer.count("\n- ") == 2 and answer.count("\n- time__") == 2
            sizes.append(await _tokens(c))
            await c.call_tool("tool_search", {"query": "echo a message"})
            assert set(await _found(c)) == {*TIME_TOOLS, "everything__echo"}
            sizes.append(await _tokens(c))
            # an exact name is that tool alone
            answer = text_of(await c.call_tool("tool_search", {"query": "git_log"}))
            assert "git__git_log" in answer and "git__git_show" not in answer

    anyio.run(main)
    print(f"listing tokens ({'words' if lexical else 'meaning'}): {sizes}")
    assert sizes[2] - sizes[0] < 1_000


QUERIES = (
    "create entities in the knowledge graph",
    "show git log",
    "commit changes",
    "echo a message",
    "long running operation",
    "add two numbers",
    "delete observations",
    "create a branch",
    "environment variables",
    "sample from the model",
    "annotated message",
    "resource links",
)


def test_the_listing_is_capped_and_the_least_recently_used_tool_dropped(tmp_path: Path) -> None:
    config = _catalog(tmp_path)
    policy = write_policy(tmp_path, ALLOW_ALL)
    notes = Notes()
    seen: list[Any] = []

    async def changed() -> None:
        with anyio.fail_after(30):
            await notes.changed.wait()

    async def main() -> None:
        async with gateway(config, tmp_path / "s", "--policy", str(policy), notes=notes) as c:
            await c.call_tool("tool_search", {"query": "current time in a timezone"})
            assert set(await _found(c)) == TIME_TOOLS
            # used since: the time server's other tool, found at the same time, is older
            now = await c.call_tool("time__get_current_time", {"timezone": "UTC"})
            assert not now.is_error
            for query in QUERIES:
                notes.changed = anyio.Event()
                listed_before = await _found(c)
                await c.call_tool("tool_search", {"query": query})
                found = await _found(c)
                assert len(found) <= MAX_FOUND
                if found != listed_before:
                    await changed()
                seen.append(found)
                if "time__convert_time" not in found:
                    break
            else:
                raise AssertionError(f"never more than {MAX_FOUND} tools found: {seen}")
            assert len(found) == MAX_FOUND
            assert "time__get_current_time" in found  # recently used: kept
            # a dropped tool is still called by its name, which lists it again
            notes.changed = anyio.Event()
            converted = await c.call_tool(
                "time__convert_time",
                {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Europe/Oslo"},
            )
            assert not converted.is_error, text_of(converted)
            await changed()
            again = await _found(c)
            assert "time__convert_time" in again and len(again) == MAX_FOUND
            # the one dropped for it is the least recently used: found first of the others
            [gone] = set(found) - set(again)
            first = {n: next(i for i, f in enumerate(seen) if n in f) for n in found}
            assert first[gone] == min(first[n] for n in found if n not in TIME_TOOLS)

    anyio.run(main)
