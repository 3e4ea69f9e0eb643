"""docs/getting-started.md, done as a new user does it: every command of its ``bash``
blocks, in order, in one shell, under a fresh home folder; then the client's part, the
entry the import printed, started by the official SDK client.

The page's ``git clone <repository URL> tooldeck`` clones this repository, and the clone
is then brought up to this working tree's package (``src/``, ``pyproject.toml``,
``README.md``: uncommitted changes included), so that what is installed is the code
under test. ``pip install uv`` and ``uv tool install`` reach the package index; they use
this machine's pip and uv caches, nothing else of it (no virtual environment, no ``UV_``
settings, a home folder of its own). A Claude Desktop config with the real time server
(``mcp-server-time``, run by this test's Python) is what gets imported.

It takes tens of seconds (mostly ``pip install uv``), so it runs beside the packaging
tests, on their test process.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from gateway_client import APPROVE, Answers, search_then_call, started_as_entry

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "getting-started.md"
CLONE = "git clone <repository URL> tooldeck"
pytestmark = pytest.mark.xdist_group("packaging")


def page_commands(text: str) -> list[str]:
    """The command lines of the page's ``bash`` blocks, in order."""
    blocks = re.findall(r"^```bash\n(.*?)^```", text, re.M | re.S)
    return [
        line.strip()
        for block in blocks
        for line in block.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]


def _environment(home: Path) -> dict[str, str]:
    """A new user's shell: this machine's PATH without this test's virtual environment,
    a home of its own (``~/.local/bin`` on the PATH, as ``uv tool update-shell`` makes it
    for a new terminal), and the machine's download caches."""
    venv = os.environ.get("VIRTUAL_ENV")
    path = [
        p
        for p in os.environ.get("PATH", "").split(os.pathsep)
        if p and not (venv and Path(p).is_relative_to(venv))
    ]
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "CONDA_PREFIX"}
        and not k.startswith(("UV_", "XDG_", "TOOLDECK_"))
    }
    caches = subprocess.run(
        [sys.executable, "-m", "pip", "cache", "dir"], capture_output=True, text=True
    )
    uv_cache = Path(os.environ.get("UV_CACHE_DIR") or Path.home() / ".cache" / "uv")
    env.update(
        HOME=str(home),
        PATH=os.pathsep.join([str(home / ".local" / "bin"), *path]),
        UV_CACHE_DIR=str(uv_cache),
        COLUMNS="120",
    )
    if caches.returncode == 0 and caches.stdout.strip():
        env["PIP_CACHE_DIR"] = caches.stdout.strip()
    return env


def test_the_page_has_the_path_from_a_clone_to_a_client() -> None:
    commands = page_commands(PAGE.read_text(encoding="utf-8"))
    assert commands[0] == CLONE
    # the command with what the gateway needs, not every extra (issue 32 item 8)
    assert ".venv-uv/bin/uv tool install --from '.[cli,mcp,search]' tooldeck" in commands
    assert any(c.startswith("tooldeck serve --import ") for c in commands)


def test_every_command_of_the_page_runs(tmp_path: Path) -> None:
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout (or no git): the page starts with a clone")
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    claude = home / ".config" / "Claude" / "claude_desktop_config.json"
    claude.parent.mkdir(parents=True)
    time_server = [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]
    claude.write_text(
        json.dumps({"mcpServers": {"time": {"command": time_server[0], "args": time_server[1:]}}})
    )
    commands = page_commands(PAGE.read_text(encoding="utf-8"))
    lines = ["set -euo pipefail"]
    for i, command in enumerate(commands):
        lines.append(f"echo '::: {i}'")
        lines.append(command.replace("<repository URL>", str(ROOT)))
        if command == CLONE:  # the clone, brought up to the working tree under test
            lines.append(f"rm -rf tooldeck/src && cp -r {ROOT}/src tooldeck/src")
            lines.append(f"cp {ROOT}/pyproject.toml {ROOT}/README.md tooldeck/")
    done = subprocess.run(
        ["bash", "-c", "\n".join(lines)],
        cwd=work,
        env=_environment(home),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    outputs = dict(
        (int(number), text)
        for number, text in re.findall(r"^::: (\d+)\n(.*?)(?=^::: |\Z)", done.stdout, re.M | re.S)
    )
    assert len(outputs) == len(commands)
    by_command = dict(zip(commands, (outputs[i] for i in range(len(commands))), strict=True))
    assert "tooldeck: the tool runtime" in by_command["tooldeck --help"]
    check = next(out for c, out in by_command.items() if "--check" in c)
    assert "time: connected" in check, check
    entry = json.loads(next(out for c, out in by_command.items() if "--import" in c))
    server = entry["mcpServers"]["tooldeck"]
    installed = home / ".local" / "bin" / "tooldeck"
    assert server["command"] == str(installed)  # uv tool install's command, by its path
    assert server["args"] == ["serve", "--mcp", str(home / ".config" / "tooldeck" / "mcp.json")]

    # the client's part: start the gateway as the entry says, find a tool, call it
    env = {"HOME": str(home), "PATH": os.environ.get("PATH", "")}
    approve = Answers(APPROVE)

    async def client() -> None:
        async with started_as_entry(server, env, elicit=approve, starts_within=120) as session:
            with anyio.fail_after(120):
                now = await search_then_call(
                    session, "current time", "get_current_time", {"timezone": "Asia/Tokyo"}
                )
            assert "Asia/Tokyo" in now

    anyio.run(client)
    assert len(approve.asked) == 1
