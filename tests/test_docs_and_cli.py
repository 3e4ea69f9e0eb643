"""The README's set-up commands are CI's, and the CLI demo works offline.

The README's Python examples run in tests/test_docs_blocks.py, with every docs page's.
"""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from tooldeck.cli import app

ROOT = Path(__file__).resolve().parents[1]


def test_readme_set_up_commands_are_the_ones_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    test_command = ci.strip().splitlines()[-1]
    assert test_command in readme
    assert "python3 -m uv run --locked tooldeck demo" in readme


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
