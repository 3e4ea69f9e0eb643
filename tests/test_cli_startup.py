"""``tooldeck --help`` starts without the heavy parts: no provider SDK, MCP, DBOS, pydantic.

Each command's module loads only when that command runs (``tooldeck.cli.COMMANDS``), and
a command's own ``--help`` loads none of what it runs with (no provider SDK, MCP, DBOS):
those are imported in the command's body. The timing itself is measured by
``bench/cli_startup.py``, never asserted here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tooldeck.cli import COMMANDS, app, load_command

HEAVY = ("openai", "anthropic", "dbos", "mcp", "pydantic", "jsonschema_rs", "sqlite3")

PROBE = """
import json, sys
from tooldeck.cli import main
sys.argv = ["tooldeck", *json.loads(sys.argv[1])]
try:
    main()
finally:
    print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)), file=sys.stderr)
"""


def _loaded(*args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY), json.dumps(list(args))],
        capture_output=True,
        text=True,
        timeout=60,
        env={"COLUMNS": "100", "PATH": "/usr/bin:/bin"},
    )
    assert "Commands" in done.stdout or "0.1" in done.stdout, done.stderr
    loaded: list[str] = json.loads(done.stderr.strip().splitlines()[-1])
    return loaded


@pytest.mark.parametrize("args", [("--help",), ()])
def test_the_top_level_help_imports_no_heavy_package(args: tuple[str, ...]) -> None:
    assert _loaded(*args) == []


def test_a_command_imports_only_what_it_needs() -> None:
    # running any command, typer itself parses its parameters with pydantic
    assert _loaded("version") == ["pydantic"]


def test_the_help_lists_every_command_with_its_own_help() -> None:
    result = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for name, entry in COMMANDS.items():
        assert f"{name} " in result.output
        assert entry.help in result.output
        # the help listed before the module loads is the command's own
        assert load_command(name).help == entry.help


def test_help_shows_placeholders_not_python_types() -> None:
    for name in COMMANDS:
        command = load_command(name)
        groups = command.commands.values() if isinstance(command, typer.core.TyperGroup) else []
        for sub in [command, *groups]:
            path = [name] if sub is command else [name, sub.name]
            out = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "200"}).output
            assert "<bool>" not in out and "<list[" not in out and "<str>" not in out, path


# what a command's --help must not load (typer itself imports pydantic to build a command):
# the SDKs, and tooldeck's own heavy parts (the engine, the loop, the schema compiler)
NOT_FOR_HELP = (
    "openai",
    "anthropic",
    "dbos",
    "mcp",
    "psycopg",
    "tooldeck.workflows",
    "tooldeck.loop",
    "tooldeck.registry",
    "tooldeck.policy",
    "tooldeck.events",
)

HELP_PROBE = """
import json, sys
from tooldeck.cli import main
heavy, paths = json.loads(sys.argv[1])
found = {}
for path in paths:
    sys.argv = ["tooldeck", *path, "--help"]
    try:
        main()
    except SystemExit:
        pass
    found[" ".join(path)] = sorted(m for m in heavy if m in sys.modules)
print(json.dumps(found), file=sys.stderr)
"""


def _help_paths() -> list[list[str]]:
    paths: list[list[str]] = []
    for name in COMMANDS:
        command = load_command(name)
        paths.append([name])
        if isinstance(command, typer.core.TyperGroup):
            paths.extend([name, sub] for sub in command.commands)
    return paths


NOT_LAZY_YET: set[str] = set()


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.xfail(strict=True)) if n in NOT_LAZY_YET else n
        for n in COMMANDS
    ],
)
def test_a_commands_help_imports_no_sdk_mcp_dbos_or_engine(name: str) -> None:
    # one fresh process per command, its groups' subcommands' help in the same process
    paths = [p for p in _help_paths() if p[0] == name]
    done = subprocess.run(
        [sys.executable, "-c", HELP_PROBE, json.dumps([NOT_FOR_HELP, paths])],
        capture_output=True,
        text=True,
        timeout=60,
        env={"COLUMNS": "100", "PATH": "/usr/bin:/bin"},
    )
    assert "Usage" in done.stdout, done.stderr
    found = json.loads(done.stderr.strip().splitlines()[-1])
    assert found == {" ".join(p): [] for p in paths}


def test_the_choices_kept_in_the_cli_agree_with_their_sources() -> None:
    from typing import get_args

    from tooldeck.cli import jobs, policy, tools, worker, workflows
    from tooldeck.jobs.store import JOB_STATES, JobState
    from tooldeck.schema import PROVIDERS
    from tooldeck.tools import TIERS
    from tooldeck.workflows.store import DEFAULT_SCHEMA
    from tooldeck.workflows.store.protocol import WorkflowState

    assert get_args(workflows.WorkflowState) == get_args(WorkflowState)
    assert get_args(jobs.JobState) == get_args(JobState) == JOB_STATES
    assert worker.DEFAULT_SCHEMA == DEFAULT_SCHEMA
    assert get_args(policy.Tier) == TIERS
    assert get_args(tools.Provider) == PROVIDERS


def test_serve_without_a_definitions_file_loads_no_rich(tmp_path: Path) -> None:
    """``tooldeck serve`` draws nothing (a client reads its stdout): rich's console and
    tables are not loaded by a gateway each MCP client starts (0.15 CPU-s each)."""
    config = tmp_path / "mcp.json"
    config.write_text('{"mcpServers": {}}')
    args = ["serve", "--mcp", str(config), "--state", str(tmp_path / "s"), "--lexical"]
    done = subprocess.run(  # stdin a pipe that ends at once: the client went away
        [sys.executable, "-c", PROBE.format(heavy=("rich",)), json.dumps(args)],
        input="",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert json.loads(done.stderr.strip().splitlines()[-1]) == [], done.stderr
