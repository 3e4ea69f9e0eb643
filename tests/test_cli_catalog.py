"""CLI: tools check/list/show, toolkits list/show, agents check."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from tooldeck.builtin import DEFINITIONS_PATH
from tooldeck.cli import app

RUN = CliRunner()
ENV = {"COLUMNS": "200"}


def test_tools_check_builtin_binds_handlers() -> None:
    result = RUN.invoke(app, ["tools", "check", str(DEFINITIONS_PATH)], env=ENV)
    assert result.exit_code == 0, result.output
    assert "ok" in result.output and "11 tools" in result.output
    assert "handlers not checked" not in result.output


def test_tools_check_reports_every_problem(tmp_path: Path) -> None:
    path = tmp_path / "definitions.json"
    path.write_text(
        json.dumps(
            {
                "tools": [
                    {
                        "name": "a",
                        "description": "d",
                        "category": "c",
                        "input_schema": {"type": "array"},
                    },
                    {
                        "name": "a",
                        "description": "d",
                        "category": "c",
                        "input_schema": {"type": "object"},
                    },
                    {
                        "name": "b c",
                        "description": "d",
                        "category": "c",
                        "input_schema": {"type": "object"},
                    },
                ]
            }
        )
    )
    result = RUN.invoke(app, ["tools", "check", str(path)], env=ENV)
    assert result.exit_code == 1
    assert "3 problem(s)" in result.output
    assert "duplicate name" in result.output and "root must be" in result.output


def test_tools_check_unbound_user_file_says_handlers_were_not_checked(tmp_path: Path) -> None:
    path = tmp_path / "definitions.json"
    path.write_text(
        json.dumps(
            {
                "tools": [
                    {
                        "name": "a",
                        "description": "d",
                        "category": "c",
                        "input_schema": {"type": "object"},
                    }
                ]
            }
        )
    )
    result = RUN.invoke(app, ["tools", "check", str(path)], env=ENV)
    assert result.exit_code == 0 and "handlers not checked" in result.output
    bound = RUN.invoke(app, ["tools", "check", str(path), "-c", "tooldeck.builtin.files"], env=ENV)
    assert bound.exit_code == 1 and "defined but no handler" in bound.output


def test_tools_list_and_show() -> None:
    listed = RUN.invoke(app, ["tools", "list"], env=ENV)
    assert listed.exit_code == 0
    row = next(line for line in listed.output.splitlines() if "run_bash" in line)
    assert "DANGEROUS" in row and "sequential" in row
    shown = RUN.invoke(app, ["tools", "show", "write_file", "--provider", "openai-chat"], env=ENV)
    assert shown.exit_code == 0, shown.output
    assert '"function"' in shown.output and "write_file for openai-chat: strict" in shown.output
    missing = RUN.invoke(app, ["tools", "show", "nope"], env=ENV)
    assert missing.exit_code == 1 and "no tool 'nope'" in missing.output


def test_toolkits_and_agents(tmp_path: Path) -> None:
    listed = RUN.invoke(app, ["toolkits", "list"], env=ENV)
    assert listed.exit_code == 0 and "general_purpose" in listed.output
    shown = RUN.invoke(app, ["toolkits", "show", "web_research"], env=ENV)
    assert shown.exit_code == 0 and "common_read" in shown.output
    assert (
        "tools: read_document, grep_files, list_files, web_search, web_fetch, notes" in shown.output
    )
    (tmp_path / "ok.md").write_text("---\nname: ok\ntoolkit: common_read\n---\nRead.")
    (tmp_path / "typo.md").write_text("---\nname: typo\ntoolkit: comon_write\n---\n")
    checked = RUN.invoke(app, ["agents", "check", str(tmp_path)], env=ENV)
    assert checked.exit_code == 0, checked.output
    assert "did you mean 'common_write'" in checked.output
    (tmp_path / "broken.md").write_text("no frontmatter")
    assert RUN.invoke(app, ["agents", "check", str(tmp_path)], env=ENV).exit_code == 1
