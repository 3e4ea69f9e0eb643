"""The gateway in front of several real, published MCP servers at once.

- PyPI ``mcp-server-git`` (dev dependency) on a temporary git repository, with PyPI
  ``mcp-server-time`` and the test's own basic.py: aggregated listing, search, and
  writes to the repository approved out of band with ``tooldeck approve``;
- npm ``@modelcontextprotocol/server-memory`` (the reference TypeScript SDK's server),
  installed by the test with npm into ``~/.cache/tooldeck-tests/npm`` (once, pinned),
  skipped only when npm is missing or the registry cannot be reached.

The client is the official MCP SDK's, over stdio.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from gateway_client import (
    PY,
    Notes,
    answered_out_of_band,
    gateway,
    names,
    node_server,
    npm_server,
    stdio,
    text_of,
    time_server,
    write_config,
    write_policy,
)

NPM_PACKAGE = "@modelcontextprotocol/server-memory"
NPM_VERSION = "2026.8.31"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    if shutil.which("git") is None:
        pytest.skip("mcp-server-git needs the git program, which is not installed")
    path = tmp_path / "repo"
    path.mkdir()
    _git(path, "init", "-q", "-b", "main")
    _git(path, "config", "user.email", "test@example.invalid")
    _git(path, "config", "user.name", "Test")
    (path / "README.md").write_text("first\n")
    _git(path, "add", "README.md")
    _git(path, "commit", "-q", "-m", "first commit")
    return path


def git_server(repo: Path) -> dict[str, Any]:
    return {"command": PY, "args": ["-m", "mcp_server_git", "--repository", str(repo)]}


def test_three_real_servers_listed_searched_and_a_commit_approved_out_of_band(
    tmp_path: Path, repo: Path
) -> None:
    config = write_config(
        tmp_path,
        {"git": git_server(repo), "time": time_server(), "alpha": stdio("basic.py")},
    )
    policy = write_policy(
        tmp_path,
        '[profile]\n[[profile.rules]]\naction = "allow"\n'
        'tools = ["git__git_status", "git__git_log", "time__*"]\n',
    )
    state = tmp_path / "s"
    notes = Notes()
    (repo / "CHANGES.md").write_text("a change\n")

    async def main() -> None:
        args = ("--policy", str(policy), "--approvals", "out-of-band")
        async with gateway(config, state, *args, notes=notes) as c:
            assert await names(c) == ["tool_search", "call_tool", "recall_tool_result"]
            found = await c.call_tool("tool_search", {"query": ["stage files", "commit changes"]})
            assert "git__git_add" in text_of(found) and "git__git_commit" in text_of(found)
            with anyio.fail_after(30):
                await notes.changed.wait()
            listed = await names(c)
            assert {"git__git_add", "git__git_commit"} <= set(listed)
            status = await c.call_tool(
                "call_tool", {"name": "git__git_status", "arguments": {"repo_path": str(repo)}}
            )
            assert "CHANGES.md" in text_of(status)
            when = await c.call_tool(
                "call_tool",
                {"name": "time__get_current_time", "arguments": {"timezone": "UTC"}},
            )
            assert not when.is_error
            # writes ask: approved by a person with tooldeck approve
            seen: set[Path] = set()
            for name, arguments in (
                ("git__git_add", {"repo_path": str(repo), "files": ["CHANGES.md"]}),
                ("git__git_commit", {"repo_path": str(repo), "message": "add the changes"}),
            ):
                result, _ = await answered_out_of_band(c, state, name, arguments, "y\n", seen)
                assert not result.is_error, text_of(result)
            log = await c.call_tool(
                "call_tool", {"name": "git__git_log", "arguments": {"repo_path": str(repo)}}
            )
            assert "add the changes" in text_of(log)

    anyio.run(main)
    assert _git(repo, "log", "-1", "--format=%s").strip() == "add the changes"
    calls = [json.loads(line) for p in state.glob("*.calls.jsonl") for line in p.open()]
    assert {c["server"] for c in calls} == {"git", "time", None}  # None: the gateway's own


@pytest.fixture(scope="session")
def npm_memory_server() -> Iterator[Path]:
    """The installed server's entry script (installed once into the cache, pinned)."""
    yield npm_server(NPM_PACKAGE, NPM_VERSION, "mcp-server-memory")


def test_an_npm_server_next_to_python_servers(tmp_path: Path, npm_memory_server: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    config = write_config(
        tmp_path,
        {
            "memory": node_server(npm_memory_server, env={"MEMORY_FILE_PATH": str(memory_file)}),
            "time": time_server(),
            "alpha": stdio("basic.py"),
        },
    )
    policy = write_policy(
        tmp_path, '[profile]\n[[profile.rules]]\ntools = "*__*"\naction = "allow"\n'
    )

    async def main() -> None:
        async with gateway(config, tmp_path / "s", "--core", "*", "--policy", str(policy)) as c:
            listed = await names(c)
            for expected in ("memory__create_entities", "memory__read_graph", "alpha__add"):
                assert expected in listed
            assert "time__get_current_time" in listed
            created = await c.call_tool(
                "memory__create_entities",
                {
                    "entities": [
                        {
                            "name": "tooldeck",
                            "entityType": "project",
                            "observations": ["serves MCP servers behind one policy"],
                        }
                    ]
                },
            )
            assert not created.is_error, text_of(created)
            graph = await c.call_tool("memory__read_graph", {})
            assert "serves MCP servers behind one policy" in text_of(graph)
            bad = await c.call_tool("memory__create_entities", {"entities": "not a list"})
            assert bad.is_error  # refused by the gateway's validation, never sent

    anyio.run(main)
    assert "tooldeck" in memory_file.read_text()
