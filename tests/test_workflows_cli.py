"""``tooldeck workflows run / list / show`` with real SQLite files and the real PostgreSQL,
and the offline demo's workflow."""

from __future__ import annotations

import asyncio
import io
import re
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from test_workflows_support import PG_DSN
from tooldeck.cli.workflows import workflows_app

pytest_plugins = ["test_workflows_support"]  # the PostgreSQL fixtures

SCRIPTS = Path(__file__).parent / "workflow_scripts"
ENV = {"COLUMNS": "200", "TOOLDECK_WORKFLOWS_DSN": "", "TOOLDECK_WORKFLOWS_DB": ""}


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(workflows_app, list(args), env=ENV)
    return result.exit_code, result.output


def _run_id(output: str) -> str:
    found = re.search(r"workflow (wf-[0-9a-f]{12})", output)
    assert found, output
    return found.group(1)


@pytest.fixture(params=["sqlite", "postgres"])
def store_args(request: pytest.FixtureRequest, tmp_path: Path) -> list[str]:
    if request.param == "sqlite":
        return ["--db", str(tmp_path / "runs.sqlite3")]
    schema: str = request.getfixturevalue("pg_schema")
    return ["--dsn", PG_DSN, "--pg-schema", schema]


def test_run_list_and_show_a_workflow_script(store_args: list[str], tmp_path: Path) -> None:
    code, out = invoke(
        "run",
        str(SCRIPTS / "research_brief.py"),
        "--inputs",
        '{"topic": "heat pumps"}',
        "--home",
        str(tmp_path),
        *store_args,
    )
    assert code == 0, out
    workflow_id = _run_id(out)
    assert "research_brief): succeeded, 4/4 submitted" in out
    for task in ("benefits", "drawbacks", "outline", "verdict"):
        assert task in out
    assert "✓ outline: submitted (2/3 submissions)" in out  # live progress lines
    assert '"recommended"' in out

    code, out = invoke("list", *store_args)
    assert code == 0 and workflow_id in out and "4/4" in out and "succeeded" in out

    code, out = invoke("show", workflow_id[:7], *store_args, "--history")
    assert code == 0, out
    assert "heat pumps save energy" in out and "2/3" in out
    assert "rejected outline submission 1 (arguments)" in out
    assert '$: "title" is a required property' in out
    assert "pending" in out and "running" in out and "submitted" in out  # transitions

    code, out = invoke("show", "wf-000000000000", *store_args)
    assert code == 1 and "no workflow run" in out
    code, out = invoke("list", "--state", "failed", *store_args)
    assert code == 0 and "No workflow runs" in out


def test_run_refuses_bad_scripts_inputs_and_models(tmp_path: Path) -> None:
    db = ["--db", str(tmp_path / "x.sqlite3")]
    code, out = invoke("run", str(SCRIPTS / "bad_result_schema.py"), *db)
    assert code == 2 and "$.labels: additionalProperties must be false" in out
    code, out = invoke("run", str(SCRIPTS / "research_brief.py"), "--inputs", "{}", *db)
    assert code == 2 and '"topic" is a required property' in out
    code, out = invoke("run", str(SCRIPTS / "research_brief.py"), "--inputs", "[1]", *db)
    assert code == 2 and "must be a JSON object" in out
    code, out = invoke("run", str(SCRIPTS / "research_brief.py"), "--inputs", "{x", *db)
    assert code == 2 and "--inputs: not valid JSON" in out
    args = ["run", str(SCRIPTS / "research_brief.py"), "-i", '{"topic": "x"}', *db]
    code, out = invoke(*args, "--model", "nonsense")
    assert code == 2 and "KIND:MODEL" in out
    code, out = invoke(*args, "--dsn", "postgresql://localhost/x")
    assert code == 2 and "not both" in out
    code, out = invoke("run", str(tmp_path / "missing.py"), *db)
    assert code == 2 and "missing.py does not exist; give a workflow script" in out
    script = tmp_path / "no_model.py"
    script.write_text(
        "from tooldeck.workflows import Task, Workflow\n"
        "workflow = Workflow('w', [Task('a', 'x', {'type': 'string'})])\n"
    )
    code, out = invoke("run", str(script), *db)
    assert code == 2 and "no scripted_model" in out


def test_inputs_from_a_file_and_a_failed_run_exit_1(tmp_path: Path) -> None:
    inputs = tmp_path / "inputs.json"
    inputs.write_text('{"city": "Porto", "days": 1}')
    db = ["--db", str(tmp_path / "x.sqlite3")]
    code, out = invoke("run", str(SCRIPTS / "trip_brief.py"), "-i", f"@{inputs}", *db)
    assert code == 0, out
    assert "Porto, Portugal: 1 relaxed day(s)." in out
    failing = tmp_path / "failing.py"
    failing.write_text(
        "from tooldeck.workflows import Task, Workflow\n"
        "from tooldeck.workflows.scripted import submitting\n"
        "workflow = Workflow('w', [Task('a', 'x', {'type': 'integer'}, max_attempts=1)])\n"
        "def scripted_model(run):\n"
        "    return submitting(run, 'not a number')\n"
    )
    code, out = invoke("run", str(failing), *db)
    assert code == 1, out
    assert "failed" in out and "no attempts left" in out


def test_the_demo_workflow_runs_offline(tmp_path: Path) -> None:
    from tooldeck.workflows.demo import run_demo_workflow

    buffer = io.StringIO()
    console = Console(file=buffer, width=200)
    run = asyncio.run(run_demo_workflow(console, tmp_path))
    out = buffer.getvalue()
    assert run.state == "succeeded"
    assert run.results["summary"] == "Lisbon, Portugal: 2 relaxed day(s)."
    assert run.task("plan").attempts == 2
    assert "rejected plan submission 1 (arguments)" in out
    assert "$.days[0].day: 0 is less than the minimum of 1" in out
    assert (tmp_path / ".tooldeck" / "workflows.sqlite3").exists()


def test_the_progress_view_counts_notes_and_shows_the_last_in_its_row() -> None:
    """A run followed on workers: each note counted in the heading, a task's last note in
    its row (live), or a line of its own (not a terminal)."""
    from rich.console import Console

    from tooldeck.events import EventBus
    from tooldeck.workflows.events import TaskNote, TaskStateChanged
    from tooldeck.workflows.render import WorkflowProgress

    notes = [
        TaskNote("wf-1", "a", "rejected", "submission 1 of 3 rejected: $.n: too small"),
        TaskNote("wf-1", "a", "restarted", "turn restarted: the worker w1 was lost"),
        TaskNote("wf-1", "b", "rejected", "submission 1 of 2 rejected: $.x: missing"),
    ]

    async def show(console: Console) -> WorkflowProgress:
        bus = EventBus()
        progress = WorkflowProgress(console).attach(bus)
        with progress:
            for name in ("a", "b"):
                await bus.emit(TaskStateChanged("wf-1", name, "running", 0, 3))
            for note in notes:
                await bus.emit(note)
        return progress

    live = Console(file=io.StringIO(), force_terminal=True, width=120)
    progress = asyncio.run(show(live))
    frame = Console(file=io.StringIO(), width=120)
    with frame.capture() as capture:
        frame.print(progress.render())
    drawn = capture.get()
    assert "(2 rejected, 1 restarted)" in drawn.splitlines()[0]
    assert "turn restarted: the worker w1 was lost" in drawn
    assert "submission 1 of 2 rejected: $.x: missing" in drawn
    assert "too small" not in drawn  # a's row shows its last note only

    plain = Console(file=io.StringIO(), width=200)
    asyncio.run(show(plain))
    printed = plain.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert [x for x in printed if x.startswith("! ")] == [f"! {n.task}: {n.text}" for n in notes]
