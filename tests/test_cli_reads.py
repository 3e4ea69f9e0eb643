"""Read commands never create anything and never answer a typo with an empty success."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tooldeck.cli import app


def invoke(*args: str, home: Path) -> tuple[int, str]:
    env = {"HOME": str(home), "COLUMNS": "200", "TOOLDECK_WORKFLOWS_DB": ""}
    result = CliRunner().invoke(app, list(args), env=env)
    return result.exit_code, result.output


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ("workflows", "list", "--db", "{tmp}/no-dir/x.sqlite3"),
            "error: {tmp}/no-dir/x.sqlite3 does not exist; give --db an existing workflow "
            "database\n",
        ),
        (
            ("workflows", "show", "abc", "--db", "{tmp}/nope.sqlite3"),
            "error: {tmp}/nope.sqlite3 does not exist; give --db an existing workflow database\n",
        ),
        (
            ("workflows", "list", "--db", "{tmp}"),
            "error: {tmp} is a folder, not a SQLite file; give --db an existing workflow "
            "database\n",
        ),
        (
            ("workflows", "list", "--state", "bogus"),
            "error: Invalid value for '--state': 'bogus' is not one of 'pending', 'running', "
            "'succeeded', 'failed', 'cancelled'; see tooldeck workflows list --help\n",
        ),
        (
            ("agents", "check", "{tmp}/nodir"),
            "error: {tmp}/nodir does not exist; give a folder of agent definitions\n",
        ),
        (
            ("policy", "grants", "{tmp}/nosuch.grants.json"),
            "error: {tmp}/nosuch.grants.json does not exist; give a session's <id>.grants.json\n",
        ),
    ],
)
def test_a_missing_or_mistyped_value_is_one_line_and_exit_2(
    tmp_path: Path, args: tuple[str, ...], expected: str
) -> None:
    home = tmp_path / "home"
    before = sorted(tmp_path.rglob("*"))
    code, out = invoke(*(a.replace("{tmp}", str(tmp_path)) for a in args), home=home)
    assert (code, out) == (2, expected.replace("{tmp}", str(tmp_path)))
    assert sorted(tmp_path.rglob("*")) == before  # nothing was created


def test_listing_before_anything_ran_creates_nothing(tmp_path: Path) -> None:
    code, out = invoke("workflows", "list", home=tmp_path)
    assert (code, out) == (0, "No workflow runs yet (no workflow database on this machine).\n")
    code, out = invoke("workflows", "show", "abc", home=tmp_path)
    assert (code, out) == (1, "error: no run 'abc': nothing has run on this machine yet\n")
    assert list(tmp_path.iterdir()) == []
