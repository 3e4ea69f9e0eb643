"""The CLI never shrugs: every mistake is one line saying what to do, exit 2, nothing made.

Each case is a real command line against real files (missing, a folder, malformed, the
wrong shape) or an unknown value; the whole output and the exit status are checked, and
that nothing was created. The rule is in docs/cli.md.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tooldeck.cli import app

SHAPE = 'give a JSON list of tool definitions, or an object with a "tools" list'
DEFS = 'give a definitions file: a JSON list of tool definitions, or an object with a "tools" list'
DB = "give --db an existing workflow database"


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "folder").mkdir()
    (tmp_path / "empty").mkdir()
    (tmp_path / "broken.json").write_text("{not json")
    (tmp_path / "number.json").write_text('{"tools": 3}')
    (tmp_path / "text.json").write_text('"tools"')
    (tmp_path / "entries.json").write_text(json.dumps([{"name": "a", "description": "b"}, 3]))
    (tmp_path / "nameless.json").write_text(json.dumps({"tools": [{"description": "x"}]}))
    (tmp_path / "list.json").write_text("[1, 2]")
    return tmp_path


CASES: list[tuple[tuple[str, ...], int, str]] = [
    # a store path given explicitly: named, never created
    (
        ("workflows", "list", "--db", "{t}/nodir/x.sqlite3"),
        2,
        f"{{t}}/nodir/x.sqlite3 does not exist; {DB}",
    ),
    (
        ("workflows", "show", "x", "--db", "{t}/folder"),
        2,
        f"{{t}}/folder is a folder, not a SQLite file; {DB}",
    ),
    (
        ("jobs", "list", "--db", "{t}/nodir/x.sqlite3"),
        2,
        f"{{t}}/nodir/x.sqlite3 does not exist; {DB}",
    ),
    (("jobs", "show", "x", "--db", "{t}/x.sqlite3"), 2, f"{{t}}/x.sqlite3 does not exist; {DB}"),
    (("jobs", "cancel", "x", "--db", "{t}/x.sqlite3"), 2, f"{{t}}/x.sqlite3 does not exist; {DB}"),
    (("schedules", "list", "--db", "{t}/x.sqlite3"), 2, f"{{t}}/x.sqlite3 does not exist; {DB}"),
    (
        ("schedules", "show", "x", "--db", "{t}/folder"),
        2,
        f"{{t}}/folder is a folder, not a SQLite file; {DB}",
    ),
    # unknown values: the valid ones listed
    (
        ("workflows", "list", "--state", "bogus"),
        2,
        "Invalid value for '--state': 'bogus' is not one of 'pending', 'running', 'succeeded', "
        "'failed', 'cancelled'; see tooldeck workflows list --help",
    ),
    (
        ("jobs", "list", "--state", "bogus"),
        2,
        "Invalid value for '--state': 'bogus' is not one of 'pending', 'running', 'succeeded', "
        "'failed', 'cancelled', 'lost'; see tooldeck jobs list --help",
    ),
    (
        ("schedules", "list", "--state", "bogus"),
        2,
        "Invalid value for '--state': 'bogus' is not one of 'active', 'cancelled', 'finished'; "
        "see tooldeck schedules list --help",
    ),
    (
        ("tools", "show", "read_document", "--provider", "bogus"),
        2,
        "Invalid value for '--provider' / '-p': 'bogus' is not one of 'openai-responses', "
        "'openai-chat', 'anthropic'; see tooldeck tools show --help",
    ),
    (
        ("policy", "explain", "thing", "--tier", "bogus"),
        2,
        "Invalid value for '--tier': 'bogus' is not one of 'STANDARD', 'WRITE', 'DANGEROUS'; "
        "see tooldeck policy explain --help",
    ),
    (
        ("workflowz", "list"),
        2,
        "No such command 'workflowz'. Did you mean 'workflows'?; see tooldeck --help",
    ),
    (("--bogus",), 2, "No such option: --bogus (Possible options: --verbose); see tooldeck --help"),
    # folders of agents, grants files
    (
        ("agents", "check", "{t}/nodir"),
        2,
        "{t}/nodir does not exist; give a folder of agent definitions",
    ),
    (
        ("agents", "check", "{t}/list.json"),
        2,
        "{t}/list.json is a file, not a folder; give a folder of agent definitions",
    ),
    (
        ("agents", "check", "{t}/empty"),
        2,
        "{t}/empty holds no agent definitions (*.md); give a folder of agent definitions",
    ),
    (
        ("policy", "grants", "{t}/nosuch.grants.json"),
        2,
        "{t}/nosuch.grants.json does not exist; give a session's <id>.grants.json",
    ),
    (
        ("policy", "grants", "{t}/list.json"),
        2,
        "{t}/list.json: not a grants file (tooldeck.grants/1); give a session's <id>.grants.json",
    ),
    (
        ("policy", "revoke", "{t}/nosuch.grants.json", "g1"),
        2,
        "{t}/nosuch.grants.json does not exist; give a session's <id>.grants.json",
    ),
    (
        ("policy", "check", "{t}/nosuch.toml"),
        2,
        "{t}/nosuch.toml does not exist; give a policy file (TOML, or JSON for .json)",
    ),
    (
        ("policy", "explain", "read_document", "-p", "{t}/folder"),
        2,
        "{t}/folder is a folder, not a file; give a policy file (TOML, or JSON for .json)",
    ),
    # definitions: one rule for tools and search
    (("tools", "check", "{t}/nosuch.json"), 2, f"{{t}}/nosuch.json does not exist; {DEFS}"),
    (
        ("search", "x", "--catalog", "{t}/nosuch.json"),
        2,
        f"{{t}}/nosuch.json does not exist; {DEFS}",
    ),
    (("tools", "check", "{t}/folder"), 2, f"{{t}}/folder is a folder, not a file; {DEFS}"),
    (
        ("tools", "check", "{t}/broken.json"),
        2,
        f"{{t}}/broken.json: not valid JSON: Expecting property name enclosed in double quotes at "
        f"line 1 column 2; {DEFS}",
    ),
    (
        ("search", "x", "--catalog", "{t}/broken.json"),
        2,
        f"{{t}}/broken.json: not valid JSON: Expecting property name enclosed in double quotes at "
        f"line 1 column 2; {DEFS}",
    ),
    (("tools", "check", "{t}/number.json"), 2, f"{{t}}/number.json: /tools is a number; {SHAPE}"),
    (
        ("search", "x", "--catalog", "{t}/number.json"),
        2,
        f"{{t}}/number.json: /tools is a number; {SHAPE}",
    ),
    (
        ("tools", "list", "-d", "{t}/text.json"),
        2,
        f"{{t}}/text.json: the top level (/) is a string; {SHAPE}",
    ),
    (
        ("search", "x", "--catalog", "{t}/text.json"),
        2,
        f"{{t}}/text.json: the top level (/) is a string; {SHAPE}",
    ),
    (
        ("search", "x", "--catalog", "{t}/entries.json"),
        2,
        "{t}/entries.json: /1 is a number; each tool definition is an object",
    ),
    (
        ("search", "x", "--catalog", "{t}/nameless.json"),
        2,
        "{t}/nameless.json: /tools/0: a tool definition needs a non-empty 'name': "
        "{'description': 'x'}",
    ),
    (
        ("tools", "list", "-d", "{t}/entries.json"),
        2,
        "{t}/entries.json: 3 problem(s) in the definitions, the first: tools[0] (a): "
        '"input_schema" '
        "is a required property; see them all with tooldeck tools check {t}/entries.json",
    ),
    # other files
    (
        ("timeline", "{t}/nosuch.json"),
        2,
        "{t}/nosuch.json does not exist; give a saved timeline or an OTLP/JSON trace file",
    ),
    (
        ("timeline", "{t}/folder"),
        2,
        "{t}/folder is a folder, not a file; give a saved timeline or an OTLP/JSON trace file",
    ),
    (
        ("approve", "{t}/nosuch.pending.json"),
        2,
        "{t}/nosuch.pending.json does not exist; give a waiting run's <session>.pending.json",
    ),
    (
        ("approve", "{t}/list.json"),
        2,
        "{t}/list.json: not a pending-approval file (tooldeck.pending/1); give a waiting run's "
        "<session>.pending.json",
    ),
    (
        ("mcp", "list", "{t}/nosuch.json"),
        2,
        '{t}/nosuch.json does not exist; give an MCP config file ({"mcpServers": {...}})',
    ),
    (
        ("mcp", "call", "{t}/list.json", "s", "t"),
        2,
        "{t}/list.json: the config must be a JSON object, got an array; give an MCP config file "
        '({"mcpServers": {...}})',
    ),
    (
        ("toolkits", "list", "-m", "{t}/nosuch.toml"),
        2,
        "{t}/nosuch.toml does not exist; give a toolkits.toml",
    ),
    (
        ("demo", "--mcp", "{t}/nosuch.json"),
        2,
        '{t}/nosuch.json does not exist; give an MCP config file ({"mcpServers": {...}})',
    ),
    (
        ("workflows", "run", "{t}/folder"),
        2,
        "{t}/folder is a folder, not a file; give a workflow script (a Python file defining a "
        "Workflow)",
    ),
    (("scheduler", "--script", "{t}/nosuch.py", "--for", "0"), 2, "no script at {t}/nosuch.py"),
    (
        ("scheduler", "--policy", "{t}/nosuch.toml", "--for", "0"),
        2,
        "{t}/nosuch.toml does not exist; give a policy file (TOML, or JSON for .json)",
    ),
    (
        ("scheduler", "--policy", "{t}/list.json", "--for", "0"),
        2,
        "{t}/list.json: 1 problem(s) in the policy, the first: the policy must be a table (a "
        "JSON object); see them all with tooldeck policy check {t}/list.json",
    ),
    (
        (
            "worker",
            "--dsn",
            "postgresql://postgres@127.0.0.1:1/test",
            "-m",
            "openai:x",
            "-p",
            "{t}/list.json",
        ),
        2,
        "--policy sets the policy of the background jobs this worker runs: add --jobs N",
    ),
    # arguments meant for a human
    (
        ("policy", "explain", "write_file", "--args", '{"path": 3}'),
        2,
        '--args for write_file: $: "content" is a required property; $.path: 3 is not of type '
        '"string"',
    ),
    (
        ("policy", "explain", "write_file", "--args", "[1]"),
        2,
        "--args is a list; give a JSON object",
    ),
    (
        ("worker", "--dsn", "postgresql://postgres@127.0.0.1:1/test"),
        2,
        "a worker needs a model for its turns: --model KIND:MODEL (e.g. openai:gpt-5.4), or "
        "--script FILE defining scripted_model(run) (a scripted stand-in)",
    ),
]


@pytest.mark.parametrize(("args", "code", "line"), CASES, ids=[" ".join(c[0]) for c in CASES])
def test_a_mistake_is_one_line_with_what_to_do(
    files: Path, args: tuple[str, ...], code: int, line: str
) -> None:
    before = sorted(files.rglob("*"))
    env = {
        "HOME": str(files / "home"),
        "COLUMNS": "200",
        "TOOLDECK_WORKFLOWS_DB": "",
        "TOOLDECK_WORKFLOWS_DSN": "",
    }
    result = CliRunner().invoke(app, [a.replace("{t}", str(files)) for a in args], env=env)
    assert (result.exit_code, result.output) == (
        code,
        f"error: {line.replace('{t}', str(files))}\n",
    )
    assert sorted(files.rglob("*")) == before  # nothing was created


def test_the_help_lists_the_values_a_choice_takes() -> None:
    env = {"COLUMNS": "200"}
    for args, values in (
        (["workflows", "list"], "[pending|running|succeeded|failed|cancelled]"),
        (["jobs", "list"], "[pending|running|succeeded|failed|cancelled|lost]"),
        (["schedules", "list"], "[active|cancelled|finished]"),
        (["tools", "show"], "[openai-responses|openai-chat|anthropic]"),
        (["policy", "explain"], "[STANDARD|WRITE|DANGEROUS]"),
    ):
        out = CliRunner().invoke(app, [*args, "--help"], env=env).output
        assert values in out, args


def test_verbose_shows_the_traceback_of_a_usage_error() -> None:
    result = CliRunner().invoke(app, ["-v", "workflows", "list", "--state", "bogus"])
    assert result.exit_code == 2
    assert "Traceback" in result.output and result.output.strip().endswith("list --help")


def test_tools_check_and_search_read_a_bare_list_alike(tmp_path: Path) -> None:
    entry = {
        "name": "fetch_page",
        "description": "Fetch a web page.",
        "category": "web",
        "input_schema": {"type": "object", "properties": {"url": {"type": "string"}}},
    }
    bare, wrapped = tmp_path / "bare.json", tmp_path / "wrapped.json"
    bare.write_text(json.dumps([entry]))
    wrapped.write_text(json.dumps({"tools": [entry]}))
    for path in (bare, wrapped):
        checked = CliRunner().invoke(app, ["tools", "check", str(path)], env={"COLUMNS": "200"})
        assert checked.exit_code == 0 and f"ok {path}: 1 tools (web: 1)" in checked.output
        found = CliRunner().invoke(
            app, ["search", "fetch_page", "--catalog", str(path), "--json", "--no-semantic"]
        )
        assert found.exit_code == 0 and json.loads(found.output)[0]["name"] == "fetch_page"


def test_a_problem_in_an_entry_is_located_and_never_dumps_the_file(tmp_path: Path) -> None:
    big = {"name": "x", "description": "y" * 5000, "category": "c", "input_schema": []}
    path = tmp_path / "big.json"
    path.write_text(json.dumps([big]))
    result = CliRunner().invoke(app, ["tools", "check", str(path)], env={"COLUMNS": "200"})
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert lines[0] == f"{path}: 1 problem(s)"
    assert lines[1].startswith("  - tools[0] (x).input_schema: [] is not of type")
    assert len(result.output) < 500


def test_demo_keep_keeps_the_folder_it_names() -> None:
    result = CliRunner().invoke(app, ["demo", "--keep"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    kept = result.output.strip().splitlines()[-1]
    assert kept.startswith("The demo's folder is kept: ")
    folder = Path(kept.removeprefix("The demo's folder is kept: "))
    try:
        assert (folder / "notes.md").is_file()
        assert f"stored in {folder}" in result.output
    finally:
        import shutil

        shutil.rmtree(folder)


def test_a_server_that_fails_to_start_is_said_once(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    missing = tmp_path / "no-such-server"
    config.write_text(json.dumps({"mcpServers": {"broken": {"command": str(missing)}}}))
    called = CliRunner().invoke(app, ["mcp", "call", str(config), "broken", "ping"])
    assert (called.exit_code, called.output) == (
        2,
        f"error: MCP server 'broken' failed to start: {missing}: no such file\n",
    )
    listed = CliRunner().invoke(app, ["mcp", "list", str(config)], env={"COLUMNS": "300"})
    assert listed.exit_code == 1
    assert listed.output.count(": no such file") == 1  # in its row, not also logged
