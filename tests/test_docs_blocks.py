"""Every ```python block in README.md and docs/*.md runs, as the program a user would paste.

Each block is one test, with an id such as ``docs/mcp.md:2`` (the file and the block's
number in it, from 1). It is written to a file in a fresh temporary directory and run by
a new interpreter (``sys.executable``) with that directory as its working directory:

- a fresh process is the only namespace that is really fresh: a block cannot see what an
  earlier block (or this test process) imported, registered, patched or left running
  (event loops, MCP threads, ``atexit`` hooks, environment variables);
- a block that writes files (a ``.tooldeck`` home, a SQLite store, a config file) writes
  them into the temporary directory, never into the repository;
- a block that hangs or crashes the interpreter fails its own test, with its output, and
  nothing else.

The cost is an interpreter start and ``import tooldeck`` per block (about a second); the
blocks selected for a test session run a few at a time, before their tests report.

Nothing here reaches the network: blocks use ``ScriptedModel`` (the offline model) and
``mcp-server-time``; telemetry goes to a real OTLP receiver on 127.0.0.1 (the default
endpoint variable names it), and a compatible server's address is a closed local port.
A block that cannot run offline (it needs a provider's API key) is marked with
``<!-- docs: typecheck-only -->`` on the line before its fence; it is then checked by mypy
instead of run, with the project's settings (strict) and cache, so that after the test
command's own mypy run only the blocks themselves are checked. Keep those rare.

New pages are picked up by the glob: nothing to register.
"""

from __future__ import annotations

import concurrent.futures
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from otlp_receiver import OtlpReceiver

ROOT = Path(__file__).resolve().parents[1]
TYPECHECK_ONLY = "<!-- docs: typecheck-only -->"
# A block another test runs (it names the test file), or another library's code (it says
# so): not collected here. tests/test_docs_blocks.py checks that the named test exists.
RUN_ELSEWHERE = re.compile(r"^<!-- docs: (?:run by (tests/\S+\.py)|peer code) -->$")
FENCE = re.compile(r"^```(\S*)\s*$")
TIMEOUT = 120


@dataclass(frozen=True)
class Block:
    path: str  # relative to the repository root, e.g. "docs/mcp.md"
    index: int  # from 1, among the file's Python blocks
    line: int  # the line of the opening fence, from 1
    code: str
    typecheck_only: bool

    @property
    def id(self) -> str:
        return f"{self.path}:{self.index}"


def python_blocks(path: Path) -> list[Block]:
    """The ```python blocks of one Markdown file, with the marker before each."""
    rel = path.relative_to(ROOT).as_posix()
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if match is None:
            i += 1
            continue
        language, start = match.group(1).lower(), i
        i += 1
        while i < len(lines) and lines[i].rstrip() != "```":
            i += 1
        if i == len(lines):
            raise ValueError(f"{rel}:{start + 1}: a code block that is never closed")
        before = [line.strip() for line in lines[:start] if line.strip()]
        if language in ("python", "py") and not (before and RUN_ELSEWHERE.match(before[-1])):
            blocks.append(
                Block(
                    path=rel,
                    index=len(blocks) + 1,
                    line=start + 1,
                    code="\n".join(lines[start + 1 : i]) + "\n",
                    typecheck_only=bool(before) and before[-1] == TYPECHECK_ONLY,
                )
            )
        i += 1
    return blocks


def markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


BLOCKS = [block for path in markdown_files() for block in python_blocks(path)]


def _script(block: Block, directory: Path) -> Path:
    # A file, not ``-c``: tracebacks then show the block's own lines, and with the blank
    # lines before it their numbers are the Markdown file's.
    name = re.sub(r"\W", "_", block.id)
    script = directory / f"{name}.py"
    script.write_text("\n" * block.line + block.code, encoding="utf-8")
    return script


@pytest.fixture(scope="module")
def otlp_endpoint() -> Iterator[str]:
    """A real OTLP/HTTP receiver, for blocks that export telemetry (its default variable)."""
    with OtlpReceiver() as receiver:
        yield receiver.endpoint


def _env(tmp_path: Path, otlp_endpoint: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        # A block sees no provider key (a block that would need one fails here, not later),
        # and no tooldeck or OpenTelemetry settings of the machine running the tests.
        if not key.endswith("_API_KEY") and not key.startswith(("TOOLDECK_", "OTEL_"))
    }
    home = tmp_path / "home"  # ~/.tooldeck and ~/.config stay in the temp dir
    home.mkdir()
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        TOOLDECK_CACHE_DIR=os.environ.get("TOOLDECK_CACHE_DIR", str(tmp_path / "cache")),
        # A compatible server's address where nothing listens: a block that talks to one
        # shows its error path (ProviderError), offline.
        TOOLDECK_BASE_URL="http://127.0.0.1:9/v1",
        OTEL_EXPORTER_OTLP_ENDPOINT=otlp_endpoint,
        OTEL_BSP_SCHEDULE_DELAY="50",
        OTEL_METRIC_EXPORT_INTERVAL="200",
        COLUMNS="100",
    )
    # Compiled bytecode is written (to the gitignored __pycache__ folders), as for the other
    # processes of the tests: a module only the blocks import is compiled once, not per block.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[int | None, str]:
    """The exit status (``None`` after the timeout) and everything the program printed."""
    try:
        done = subprocess.run(
            argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT
        )
    except subprocess.TimeoutExpired as exc:
        return None, f"did not finish within {TIMEOUT} s\n{exc.stdout!r}\n{exc.stderr!r}"
    return done.returncode, f"{done.stdout}\n{done.stderr}"


def _run_block(block: Block, tmp_path: Path, otlp_endpoint: str) -> str | None:
    """Run one block as a program; what went wrong, or ``None``."""
    work = tmp_path / "work"
    work.mkdir(parents=True)
    script = _script(block, work)
    status, output = _run([sys.executable, str(script)], work, _env(tmp_path, otlp_endpoint))
    return None if status == 0 else f"{block.path}:{block.line} exited with {status}\n{output}"


def _typecheck(blocks: list[Block], directory: Path) -> dict[str, str | None]:
    """mypy over all the typecheck-only blocks at once: what it says about each, or ``None``.

    The project's settings (strict) and its cache: after the test command's own mypy run,
    only the blocks themselves are checked.
    """
    directory.mkdir(parents=True)
    scripts = {block.id: _script(block, directory) for block in blocks}
    argv = [
        sys.executable,
        "-m",
        "mypy",
        "--config-file",
        str(ROOT / "pyproject.toml"),
        "--cache-dir",
        str(ROOT / ".mypy_cache"),
        "--no-error-summary",
        "--show-absolute-path",
        *map(str, scripts.values()),
    ]
    status, output = _run(argv, ROOT, {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    if status not in (0, 1):
        return {block.id: f"mypy did not run ({status})\n{output}" for block in blocks}
    lines = output.splitlines()
    found = {}
    for block in blocks:
        errors = [line for line in lines if line.startswith(f"{scripts[block.id]}:")]
        found[block.id] = f"{block.path}:{block.line} (typecheck-only)\n" + "\n".join(errors)
        if not errors:
            found[block.id] = None
    return found


@pytest.fixture(scope="module")
def outcomes(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, otlp_endpoint: str
) -> dict[str, str | None]:
    """Every selected block's outcome, the blocks run a few at a time (each in its own
    process and directory, so they cannot meet)."""
    selected = [
        item.callspec.params["block"]
        for item in request.session.items
        if isinstance(item, pytest.Function) and item.originalname == "test_docs_block"
    ]
    base = tmp_path_factory.mktemp("docs-blocks")
    marked = [block for block in selected if block.typecheck_only]
    workers = max(2, min(4, os.cpu_count() or 2))
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        checked = pool.submit(_typecheck, marked, base / "typecheck-only") if marked else None
        runs = {
            block.id: pool.submit(
                _run_block, block, base / re.sub(r"\W", "_", block.id), otlp_endpoint
            )
            for block in selected
            if not block.typecheck_only
        }
        found = {block_id: run.result() for block_id, run in runs.items()}
        if checked is not None:
            found.update(checked.result())
    return found


def test_the_docs_have_python_blocks() -> None:
    assert len(BLOCKS) >= 20
    assert {block.path for block in BLOCKS} >= {"README.md", "docs/mcp.md", "docs/policy.md"}


# On one test process (pytest-xdist): ``outcomes`` runs every selected block, so each
# process that ran one of these tests would run them all again, mypy included; and with
# tests/test_typed_entry_points.py (same group, run before it: tests/conftest.py) the
# mypy cache is written once, by whichever runs first, and read by the other.
@pytest.mark.xdist_group("mypy")
@pytest.mark.parametrize("block", BLOCKS, ids=[block.id for block in BLOCKS])
def test_docs_block(block: Block, outcomes: dict[str, str | None]) -> None:
    problem = outcomes[block.id]
    assert problem is None, problem


def test_a_marker_must_sit_right_before_a_python_block() -> None:
    """A typecheck-only marker anywhere else would silently mark nothing."""
    for path in markdown_files():
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines):
            if line.strip() != TYPECHECK_ONLY and not RUN_ELSEWHERE.match(line.strip()):
                continue
            after = [following for following in lines[number + 1 :] if following.strip()]
            rel = path.relative_to(ROOT)
            assert after, f"{rel}:{number + 1}: a marker at the end of the file"
            assert FENCE.match(after[0]) and after[0].startswith("```py"), (
                f"{rel}:{number + 1}: the marker is not right before a Python block"
            )


def test_a_block_run_elsewhere_names_a_test_that_reads_its_page() -> None:
    for path in markdown_files():
        rel = path.relative_to(ROOT).as_posix()
        for line in path.read_text(encoding="utf-8").splitlines():
            found = RUN_ELSEWHERE.match(line.strip())
            if found and found.group(1):
                test_file = ROOT / found.group(1)
                assert test_file.is_file(), f"{rel}: {found.group(1)} does not exist"
                assert path.name in test_file.read_text(encoding="utf-8"), (
                    f"{rel}: {found.group(1)} never reads {path.name}"
                )
