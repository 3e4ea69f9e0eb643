"""The README's set-up commands are CI's, and the CLI demo works offline.

The README's Python examples run in tests/test_docs_blocks.py, with every docs page's.
"""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from tooldeck.cli import app

ROOT = Path(__file__).resolve().parents[1]


def _set_up_commands(readme: str) -> list[str]:
    """The commands of the first bash block of the README's "Set up" section."""
    section = readme.split("\n## Set up\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "the Set up section has a bash block"
    return [ln for ln in block.group(1).splitlines() if ln.strip() and not ln.startswith("#")]


def test_readme_set_up_commands_are_the_ones_ci_runs() -> None:
    demo, tests = _set_up_commands((ROOT / "README.md").read_text())
    ci = (ROOT / ".ci" / "run").read_text()
    commands = [ln for ln in ci.splitlines() if ln.strip() and not ln.startswith("#")]
    # CI runs the README's test command verbatim, and nothing else
    assert commands == ["set -euo pipefail", 'cd "$(dirname "$0")/.."', tests]
    # the demo installs only its extra (issue 32 item 8); the tests get the dev group,
    # which pulls every extra (tooldeck[all])
    assert demo.endswith(" && .venv-uv/bin/uv run --locked --no-dev --extra demo tooldeck demo")
    assert tests.endswith(" && .venv-uv/bin/uv run --locked scripts/check")
    for command in (demo, tests):
        # nothing goes into the interpreter that runs them (an externally managed one
        # refuses it, PEP 668): uv is installed into a virtual environment of its own
        assert command.startswith("python3 -m venv .venv-uv && .venv-uv/bin/pip install uv")
        assert "python3 -m pip" not in command and "--break-system-packages" not in command
    # that environment is never linted, tested, committed or packaged
    assert ".venv-uv/" in (ROOT / ".gitignore").read_text().splitlines()


def test_demo_runs_offline_and_shows_decisions_and_repairs() -> None:
    result = CliRunner().invoke(app, ["demo"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    out = result.output
    for expected in (
        "openai-responses",
        "anthropic",
        "not strict-compatible",
        "extract_json",
        "trailing_commas",
        "close_brackets",
        "double_encoded",
        "python_literals",
        "surplus_closers",
        "refused",
        "cut inside a string",
        "Deferred loading",
        "hosted",
        "repaired: trailing_commas",
        "Unknown tool 'summarize_repo'",
        "submitted",
    ):
        assert expected in out, expected
    # the demo's folder is deleted at the end: never shown as where things are stored
    assert "stored in a temporary folder, removed when the demo ends" in out
    assert "tooldeck-demo-" not in out
    # the first line says what tooldeck is (both halves); then a scripted MCP client talks
    # to a real `tooldeck serve` process: it lists, searches, calls the tool the search
    # named, is denied by the policy, and is asked before a WRITE tool runs
    assert out.splitlines()[0].startswith("tooldeck is the tool runtime for LLM agents: a library")
    gateway = out.split("The MCP gateway: tooldeck serve", 1)[1]
    for expected in (
        "tool_search, call_tool, recall_tool_result",
        "- get_weather: Get the current weather for a city.",
        "tool_search, call_tool, recall_tool_result, get_weather",  # after list_changed
        '{"city":"Paris","temp":18,"sky":"clear"}',
        "error: Denied by policy: no client drops tables through this gateway",
        "(asked, approved) q3.csv is labelled 'final'",
        "asked the client's user (elicitation): Allow the tool call label_file",
        "drop_table: deny; label_file: ask; label_file: approve",
    ):
        assert expected in gateway, expected


def test_demo_attaches_an_mcp_server_from_a_config_file(tmp_path: Path) -> None:
    import json
    import sys

    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "time": {
                        "command": sys.executable,
                        "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
                    }
                }
            }
        )
    )
    result = CliRunner().invoke(app, ["demo", "--mcp", str(config)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "mcp__time__get_current_time" in result.output
    assert "MCP server time: connected" in result.output
