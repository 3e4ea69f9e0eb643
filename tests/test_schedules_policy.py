"""Schedules run with their creator's power, never more (issue 30, item 1).

The attack: a session whose organization rule denies ``read_document`` under
``secrets/`` has a schedule made (the human approves ``create_schedule``) whose prompt
reads ``secrets/key``; the run must be denied the read, and the secret must never come
back. Driven through the real tick and job manager and a ``tooldeck scheduler`` process
(with ``--policy``), on the real SQLite file and PostgreSQL; records of the creator that
cannot be rebuilt (made before migration 5, tampered with) are refused and say why in
``tooldeck schedules show``; the schedule tools of two sessions on one store never see,
name or cancel each other's. The jobs' side is in test_jobs_policy.py.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from test_jobs_policy import (
    CHAT_TOOLS,
    CREATOR_RULES,
    EXFILTRATE,
    RUNNER_RULES,
    SECRET,
    VAULT,
    Human,
    make_home,
    runtime,
)
from test_jobs_processes import Processes, processes, store_args
from test_schedules import Clock
from test_workflows_support import StoreFactory, raw_execute
from tooldeck import Protection, Session, Toolset, TurnContext
from tooldeck.approvals import PolicyDecision, allow_all
from tooldeck.builtin import load_builtin_registry
from tooldeck.cli import app
from tooldeck.jobs import JobManager, JobNotices, JobRuntime, JobTable
from tooldeck.jobs.policy import record_creator
from tooldeck.policy import Policy, SessionPolicy
from tooldeck.schedules import ScheduleBook, Scheduler, schedule_tools_source
from tooldeck.testing import ScriptedModel, call, reply
from tooldeck.transcript import ToolCall
from tooldeck.workflows.store import WorkflowStore

pytest_plugins = ["test_workflows_support"]

__all__ = ["processes"]  # a fixture, defined with the scheduler process tests


def chat(
    book: ScheduleBook,
    home: Path,
    session_id: str,
    script: list[Any],
    policy: Any = None,
    human: Human | None = None,
    workflows: Sequence[str] | None = None,
) -> Session:
    """A text turn's session with three built-in tools and the schedule tools."""
    turn = TurnContext(session_id=session_id, home=home)
    builtins = load_builtin_registry().toolset(turn).only(CHAT_TOOLS)
    schedules = schedule_tools_source(book, workflows=workflows).tools_for(turn)
    tools = Toolset([*builtins.tools, *schedules])
    approver = policy.approver(human) if isinstance(policy, SessionPolicy) and human else None
    return Session(
        ScriptedModel(script),
        tools,
        session_id=session_id,
        turn=turn,
        protect=Protection.policy(policy or allow_all, approver=approver),
    )


def creator_chat(book: ScheduleBook, home: Path, schedule: dict[str, Any]) -> tuple[Session, Human]:
    """The session of the attack: it cannot read secrets/, then has a schedule made."""
    human = Human()
    policy = SessionPolicy(Policy.from_dict(CREATOR_RULES), session_id="chat", home=home)
    script = [
        reply(call("read_document", {"path": "secrets/key"})),
        reply(call("create_schedule", schedule)),
        reply("scheduled"),
    ]
    return chat(book, home, "chat", script, policy, human), human


def offered(answer: str) -> list[str]:
    return answer.split("tools: ", 1)[1].split(" |", 1)[0].split(",")


# -- the attack, through the real tick ---------------------------------------------------------


def test_a_scheduled_run_cannot_read_what_its_creator_could_not(
    make_store: StoreFactory, tmp_path: Path
) -> None:
    home = make_home(tmp_path)

    async def main() -> None:
        store = make_store()
        clock = Clock(datetime(2026, 2, 1, 7, 59, tzinfo=UTC))
        async with store:
            book = ScheduleBook(store, clock=clock)
            make = {"name": "leak", "prompt": "read secrets/key", "cron": "0 8 * * *"}
            session, human = creator_chat(book, home, make)
            denied, created = (await session.run("what is the key?")).tool_outputs
            assert denied.is_error and SECRET not in denied.text
            assert not created.is_error and human.asked == ["create_schedule"]
            async with JobManager(store, runtime(home), poll=0.02, lease=5) as manager:
                clock.advance(minutes=2)
                (out,) = await Scheduler(store, clock=clock).tick()
                job = await asyncio.wait_for(manager.wait(out.fired[0].job_id), 30)
            answer = job.result["output"]
            assert job.state == "succeeded" and SECRET not in answer
            assert "secrets stay secret" in answer  # the creator's organization rule
            # its creator's tools (write_file hidden: headless), not the runner's nine
            assert offered(answer) == ["list_files", "read_document"]
            notes = await JobNotices(store).take("chat")
            assert len(notes) == 1 and SECRET not in notes[0]
            (made,) = await book.table.list()
            assert made.creator is not None and made.creator["session_id"] == "chat"

    asyncio.run(main())


async def ended(
    store: WorkflowStore, schedule_ids: Sequence[str], runner: tuple[Any, Path], within: float = 90
) -> Any:
    """The first job of each schedule, once all of them have ended (while ``runner``, the
    process that runs them, is still up)."""
    deadline = time.monotonic() + within
    while True:
        proc, log = runner
        assert proc.poll() is None, log.read_text()
        async with store:
            book = ScheduleBook(store)
            jobs = JobTable(store)
            found = []
            for schedule_id in schedule_ids:
                fires = await book.table.fires(schedule_id)
                job = await jobs.get(fires[-1].job_id) if fires else None
                found.append(job)
        if all(j is not None and j.terminal for j in found):
            return found
        assert time.monotonic() < deadline, found
        await asyncio.sleep(0.2)


def test_the_scheduler_process_runs_each_schedule_under_its_creator_and_its_policy_file(
    make_store: StoreFactory, tmp_path: Path, processes: Processes
) -> None:
    """``tooldeck scheduler --policy``: the creator's recorded rules deny secrets/, the
    scheduler's organization file denies vault/; neither comes back."""
    home = make_home(tmp_path)
    runner_file = tmp_path / "org.toml"
    runner_file.write_text(RUNNER_RULES)
    store = make_store()

    def soon() -> str:
        """2-3 s from now, for a session about to run: far enough ahead that a loaded
        machine still runs its steps before then (an `at` already past is refused, and
        the session then lists nothing); the scheduler, given 1000 s of grace, fires it
        whenever it first ticks after that."""
        at = (datetime.now(UTC) + timedelta(seconds=3)).replace(tzinfo=None)
        return at.isoformat(timespec="seconds")

    async def create() -> list[str]:
        async with store:
            book = ScheduleBook(store)
            session, _ = creator_chat(
                book, home, {"name": "a", "prompt": "read secrets/key", "at": soon()}
            )
            await session.run("schedule it")
            b = {"name": "b", "prompt": "read vault/key", "at": soon()}
            ops = chat(  # a session without any policy: the file is what stops it
                book, home, "ops", [reply(call("create_schedule", b)), reply("ok")]
            )
            await ops.run("schedule it")
            return [(await book.table.list(session_id=s))[0].id for s in ("chat", "ops")]

    ids = asyncio.run(create())
    options = ["--script", str(EXFILTRATE), "--home", str(home), "--poll", "0.1"]
    runner = processes.scheduler(
        store, "sch", *options, "--grace", "1000", "--policy", str(runner_file)
    )
    chat_job, ops_job = asyncio.run(ended(store, ids, runner))
    assert chat_job.state == ops_job.state == "succeeded"
    assert SECRET not in chat_job.summary and "secrets stay secret" in chat_job.summary
    assert VAULT not in ops_job.summary and "the vault is closed" in ops_job.summary
    shown = CliRunner().invoke(app, ["schedules", "show", ids[0], *store_args(store)])
    assert shown.exit_code == 0 and "runs as: session chat" in shown.output, shown.output


# -- a creator that cannot be rebuilt ---------------------------------------------------------


def test_a_schedule_whose_creator_cannot_be_rebuilt_does_not_run_and_says_why(
    make_store: StoreFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A schedule made before migration 5 (the column dropped and added again by the
    migration: NULL) and one whose record was tampered with: their jobs fail unrun, each
    said in one ``refused`` log record (a line of the scheduler's log)."""
    caplog.set_level(logging.WARNING, logger="tooldeck.jobs")
    home = make_home(tmp_path)
    asked: list[Any] = []

    def model_for(job: Any) -> ScriptedModel:
        asked.append(job.id)
        return ScriptedModel([reply("ran")])

    async def create() -> list[str]:
        async with store:
            book = ScheduleBook(store, clock=clock)
            return [
                (
                    await book.create(
                        name=name,
                        session_id="chat",
                        action=book.action(prompt="read secrets/key"),
                        timing=parse_cron(),
                    )
                ).id
                for name in ("old", "tampered")
            ]

    def parse_cron() -> Any:
        from tooldeck.schedules import Timing

        return Timing.cron("0 8 * * *")

    store = make_store()
    clock = Clock(datetime(2026, 2, 1, 7, 59, tzinfo=UTC))
    old, tampered = asyncio.run(create())
    # the database as a release before migration 5 left it: no creator column (and none
    # of the later migrations' tables)
    raw_execute(
        store,
        "ALTER TABLE schedules DROP COLUMN creator",
        *(f"DROP TABLE {t}" for t in ("gateway_sessions", "gateway_secrets", "gateway_waits")),
        "DROP TABLE gateway_asks",
        "DROP TABLE agent_session_items",
        "DROP TABLE agent_sessions",
        "DELETE FROM schema_version WHERE version >= 5",
    )
    record = record_creator(SessionPolicy(Policy.from_dict(CREATOR_RULES)), "chat")
    record["policy"][0]["policy"]["organization"]["rules"][0]["action"] = "maybe"

    async def tick() -> list[Any]:
        async with store:  # opening it migrates: the old row gets creator NULL
            raw_execute(
                store,
                f"UPDATE schedules SET creator = '{json.dumps(record)}' WHERE id = '{tampered}'",
            )
            async with JobManager(store, runtime(home, model_for=model_for), poll=0.02) as jobs:
                clock.advance(minutes=2)
                outcomes = await Scheduler(store, clock=clock).tick()
                return [await jobs.wait(o.fired[0].job_id) for o in outcomes]

    finished = asyncio.run(tick())
    assert asked == [] and len(finished) == 2  # no model was even made
    assert all(j.state == "failed" and (j.error or "").startswith("not run: ") for j in finished)
    said = {
        r.fields["job"]: r.getMessage()  # type: ignore[attr-defined]
        for r in caplog.records
        if getattr(r, "event", None) == "refused"
    }
    assert said == {j.id: f"job {j.id} {j.error}" for j in finished}
    for schedule_id, why in (
        (old, "nothing records the policy of the session that made it"),
        (tampered, "organization.rules[0].action: must be one of"),
    ):
        shown = CliRunner().invoke(
            app, ["schedules", "show", schedule_id, *store_args(store)], env={"COLUMNS": "400"}
        )
        assert shown.exit_code == 0, shown.output
        flat = " ".join(shown.output.split())
        refused = flat.split("runs: refused, none will run: ", 1)[1]
        assert why in refused.split(" next ", 1)[0], flat  # the schedule says why
        assert "│ failed │ not run: " in flat and why in flat.split("│ failed │", 1)[1], flat


def test_a_session_whose_policy_cannot_be_written_down_gets_no_schedule(tmp_path: Path) -> None:
    async def main() -> None:
        from tooldeck.workflows.store import SQLiteStore

        async with SQLiteStore(tmp_path / "db.sqlite3") as store:
            book = ScheduleBook(store)

            def mine(tool: Any, params: Any, call: ToolCall) -> PolicyDecision:
                return PolicyDecision("allow", "a function nobody can record")

            make = {"name": "x", "prompt": "read secrets/key", "cron": "0 8 * * *"}
            session = chat(
                book, tmp_path, "chat", [reply(call("create_schedule", make)), reply("ok")], mine
            )
            (out,) = (await session.run("schedule it")).tool_outputs
            assert out.is_error and "cannot write down" in out.text
            assert await book.table.list() == []

    asyncio.run(main())


def test_a_scheduled_workflow_is_not_started_when_its_creator_is_denied_it(
    tmp_path: Path,
) -> None:
    """A session whose policy denies the ``workflow`` tool has one scheduled: the human
    approved the schedule, but the deny holds at every run."""
    from tooldeck.workflows import Task, TaskRun, Workflow, WorkflowEngine
    from tooldeck.workflows.scripted import submitting
    from tooldeck.workflows.store import SQLiteStore

    no_workflows = {
        "version": 1,
        "organization": {
            "rules": [{"tools": "workflow", "action": "deny", "reason": "no workflows here"}]
        },
    }
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
        "additionalProperties": False,
    }
    flow = Workflow("nightly", [Task("count", "Count.", result=schema)])

    def task_model(run: TaskRun) -> Any:
        return submitting(run, {"n": 7})

    async def main() -> None:
        clock = Clock(datetime(2026, 2, 1, 1, 59, tzinfo=UTC))
        async with SQLiteStore(tmp_path / "db.sqlite3") as store:
            book = ScheduleBook(store, clock=clock)
            policy = SessionPolicy(Policy.from_dict(no_workflows), session_id="chat")
            make = {"name": "n", "workflow": "nightly", "inputs_json": "{}", "cron": "0 2 * * *"}
            script = [reply(call("create_schedule", make)), reply("ok")]
            session = chat(book, tmp_path, "chat", script, policy, Human(), ["nightly"])
            (created,) = (await session.run("schedule it")).tool_outputs
            assert not created.is_error
            engine = WorkflowEngine(store, task_model, catalog=[flow], home=tmp_path)
            rt = JobRuntime(model_for=lambda job: ScriptedModel([]), engine=engine)
            async with engine, JobManager(store, rt, poll=0.02, lease=5) as manager:
                clock.advance(minutes=2)
                (out,) = await Scheduler(store, clock=clock).tick()
                job = await asyncio.wait_for(manager.wait(out.fired[0].job_id), 30)
            assert job.state == "failed" and "no workflows here" in (job.error or "")
            assert (job.error or "").startswith("not run: ")
            assert await store.list_workflows() == []  # nothing was started

    asyncio.run(main())


# -- the schedule and job tools of two sessions on one store ----------------------------------


def test_two_sessions_never_see_or_cancel_each_others_schedules_(
    make_store: StoreFactory, tmp_path: Path
) -> None:
    async def main() -> None:
        store = make_store()
        async with store:
            book = ScheduleBook(store)

            async def as_session(session_id: str, *calls: ToolCall) -> list[Any]:
                script = [reply(c) for c in calls] + [reply("ok")]
                return (await chat(book, tmp_path, session_id, script).run("go")).tool_outputs

            def make(name: str, prompt: str) -> ToolCall:
                return call(
                    "create_schedule", {"name": name, "prompt": prompt, "cron": "0 8 * * *"}
                )

            await as_session("alice", make("a1", "alice one"), make("a2", "alice two"))
            await as_session("bob", make("b1", "bob's private prompt"))
            (bob,) = await book.table.list(session_id="bob")
            mine = {s.id for s in await book.table.list(session_id="alice")}
            # the shortest prefix of bob's id that none of alice's ids start with (random ids
            # share their first characters now and then; alice's own match would be cancelled)
            short_id = next(
                bob.id[:n]
                for n in range(6, len(bob.id))
                if not any(i.startswith(bob.id[:n]) for i in mine)
            )
            listed, ambiguous, short, exact = await as_session(
                "alice",
                call("list_schedules", {}),
                call("cancel_schedule", {"schedule_id": "sch-"}),
                call("cancel_schedule", {"schedule_id": short_id}),
                call("cancel_schedule", {"schedule_id": bob.id}),
            )
            assert set(listed.result.details["ids"]) == mine
            assert "bob" not in listed.text
            assert ambiguous.is_error and "matches several schedules" in ambiguous.text
            assert bob.id not in ambiguous.text and all(i in ambiguous.text for i in mine)
            for refused in (short, exact):
                assert refused.is_error and "in this session" in refused.text
            assert (await book.get(bob.id)).state == "active"
            (cancelled,) = await as_session("bob", call("cancel_schedule", {"schedule_id": "sch-"}))
            assert not cancelled.is_error and (await book.get(bob.id)).state == "cancelled"

    asyncio.run(main())
