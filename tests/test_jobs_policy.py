"""Jobs run with their creator's power, never more (issue 30, item 1).

A job records whose it is (the starting session's id, policy and tools:
``tooldeck.jobs.policy.record_creator``); a process that runs it away from that session
(another manager after its own stopped, a ``tooldeck worker --jobs``) rebuilds that
policy and keeps to it, headless, with at most those tools, and with its own
``--policy`` as well. The record reads back exactly (a property over random policies),
and a job never gets an allow its creator would not have had.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from test_jobs_dbos import JobWorkers
from test_policy_properties import ALL, args_strategy, config, context
from test_workflows_support import PG_DSN, StoreFactory
from tooldeck import Protection, Session, Toolset, TurnContext
from tooldeck.approvals import ApprovalAnswer, ApprovalRequest, PolicyDecision, allow_all
from tooldeck.builtin import load_builtin_registry
from tooldeck.cli.schedules import load_job_script
from tooldeck.jobs import JobManager, JobRuntime, JobTable, NewJob, job_tools_source
from tooldeck.jobs.durable import DbosJobQueue
from tooldeck.jobs.policy import creator_policy, job_policy, record_creator
from tooldeck.jobs.runner import registry_tools
from tooldeck.policy import Policy, SessionPolicy, approve
from tooldeck.testing import ScriptedModel, call, reply
from tooldeck.transcript import ToolCall, ToolOutput
from tooldeck.workflows.store import PostgresStore

pytest_plugins = ["test_workflows_support"]

EXFILTRATE = Path(__file__).parent / "job_scripts" / "exfiltrate.py"
SECRET = "launch-code-4242"
VAULT = "vault-combination-1234"
CREATOR_RULES = {
    "version": 1,
    "organization": {
        "rules": [
            {
                "tools": "read_document",
                "action": "deny",
                "args": {"path": {"prefix": "secrets/"}},
                "reason": "secrets stay secret",
            }
        ]
    },
}
RUNNER_RULES = (
    'version = 1\n[[organization.rules]]\ntools = "read_document"\naction = "deny"\n'
    'args = { path = { prefix = "vault/" } }\nreason = "the vault is closed"\n'
)
CHAT_TOOLS = ("read_document", "list_files", "write_file")


def make_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    for name, text in (("secrets", SECRET), ("vault", VAULT)):
        (home / name).mkdir(parents=True)
        (home / name / "key").write_text(text)
    return home


class Human:
    """Approves everything it is shown (the human says yes to start_job, create_schedule)."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def __call__(self, requests: Sequence[ApprovalRequest]) -> list[ApprovalAnswer]:
        self.asked.extend(r.tool.name for r in requests)
        return [approve() for _ in requests]


def runtime(home: Path, policy: Any = None, model_for: Any = None) -> JobRuntime:
    """What ``tooldeck scheduler --script exfiltrate.py`` runs jobs with."""
    scripted, _, _ = load_job_script(EXFILTRATE)
    assert scripted is not None
    return JobRuntime(
        model_for=model_for if model_for is not None else scripted,
        tools_for=registry_tools(load_builtin_registry(), home),
        policy=policy,
        home=home,
    )


# -- jobs run away from their session ----------------------------------------------------------


def test_a_job_resumed_in_another_process_keeps_its_creators_policy(
    make_store: StoreFactory, tmp_path: Path
) -> None:
    """A job started by ``start_job``, handed back when its process stops, and run by
    another manager (a runtime with no policy of its own): still denied the secret."""
    home = make_home(tmp_path)

    async def main() -> None:
        store = make_store()
        policy = SessionPolicy(Policy.from_dict(CREATOR_RULES), session_id="chat", home=home)
        hang = asyncio.Event()

        class Hangs(ScriptedModel):
            async def respond(self, request: Any) -> Any:
                hang.set()
                await asyncio.Event().wait()

        async with store:
            first = JobManager(store, poll=0.02, lease=5)
            await first.open()
            creator = job_tools_source(first, model_for=lambda agent: Hangs([]))
            turn = TurnContext(session_id="chat", home=home, can_create_jobs=True)
            tools = load_builtin_registry().toolset(turn).only(CHAT_TOOLS)
            session = Session(
                ScriptedModel(
                    [reply(call("start_job", {"task": "read secrets/key"})), reply("ok")]
                ),
                Toolset([*tools.tools, *creator.tools_for(turn)]),
                session_id="chat",
                turn=turn,
                protect=Protection.policy(policy, approver=policy.approver(Human())),
            )
            (started,) = (await session.run("go")).tool_outputs
            job_id = started.result.details["job_id"]
            await asyncio.wait_for(hang.wait(), 10)
            await first.close(grace=1)  # handed back: pending again
            async with JobManager(store, runtime(home), poll=0.02, lease=5) as second:
                job = await asyncio.wait_for(second.wait(job_id), 30)
            assert job.state == "succeeded" and job.owner == second.owner  # run over there
            assert SECRET not in job.result["output"]
            assert "secrets stay secret" in job.result["output"]

    asyncio.run(main())


def test_a_dbos_worker_runs_each_job_under_its_creator_and_its_policy_file(
    pg_schema: str, tmp_path: Path
) -> None:
    """``tooldeck worker --jobs --policy``: a job ``start_job`` queued on DBOS runs in the
    worker under the policy its session recorded and the worker's organization file."""
    home = make_home(tmp_path)
    runner_file = tmp_path / "org.toml"
    runner_file.write_text(RUNNER_RULES)
    workers = JobWorkers(pg_schema, tmp_path)
    try:
        workers.start(
            "w1", script=EXFILTRATE, extra=["--home", str(home), "--policy", str(runner_file)]
        )

        async def main() -> list[Any]:
            async with PostgresStore(PG_DSN, schema=pg_schema) as store:
                manager = JobManager(
                    store,
                    dispatch="dbos",
                    queue=DbosJobQueue(PG_DSN, dbos_schema=workers.dbos_schema),
                )
                creator = job_tools_source(manager, model_for=lambda agent: ScriptedModel([]))
                policy = SessionPolicy(Policy.from_dict(CREATOR_RULES), session_id="chat")
                ids = []
                for session_id, path, rules in (
                    ("chat", "secrets/key", policy),
                    ("ops", "vault/key", None),  # no policy: the worker's file stops it
                ):
                    turn = TurnContext(session_id=session_id, home=home, can_create_jobs=True)
                    tools = load_builtin_registry().toolset(turn).only(CHAT_TOOLS)
                    session = Session(
                        ScriptedModel(
                            [reply(call("start_job", {"task": f"read {path}"})), reply("ok")]
                        ),
                        Toolset([*tools.tools, *creator.tools_for(turn)]),
                        session_id=session_id,
                        turn=turn,
                        protect=Protection.policy(
                            rules or allow_all,
                            approver=rules.approver(Human()) if rules is not None else None,
                        ),
                    )
                    (started,) = (await session.run("go")).tool_outputs
                    ids.append(started.result.details["job_id"])
                async with asyncio.timeout(120):
                    done = [await manager.wait(i, poll=0.1) for i in ids]
                await manager.close()
                return done

        chat_job, ops_job = asyncio.run(main())
    finally:
        workers.stop_all()
    assert chat_job.state == ops_job.state == "succeeded" and chat_job.owner == "w1"
    assert SECRET not in chat_job.summary and "secrets stay secret" in chat_job.summary
    assert VAULT not in ops_job.summary and "the vault is closed" in ops_job.summary


def test_a_live_job_of_a_session_with_a_policy_and_an_ask_rule_is_headless_in_both(
    tmp_path: Path,
) -> None:
    """``Protection.policy(...) & Protection.ask(...)``: an ask of the session's rules
    on a STANDARD tool is denied in its job, never auto-approved as a sub-agent's is."""
    asking = {
        "version": 1,
        "organization": {"rules": [{"tools": "read_document", "action": "ask"}]},
    }
    (tmp_path / "notes.txt").write_text("private notes")

    async def main() -> None:
        from tooldeck.workflows.store import SQLiteStore

        async with (
            SQLiteStore(tmp_path / "db.sqlite3") as store,
            JobManager(store, poll=0.02) as manager,
        ):
            job_model = ScriptedModel(
                [reply(call("read_document", {"path": "notes.txt"})), reply("done")]
            )
            creator = job_tools_source(manager, model_for=lambda agent: job_model)
            turn = TurnContext(session_id="chat", home=tmp_path, can_create_jobs=True)
            tools = load_builtin_registry().toolset(turn).only(["read_document"])
            policy = SessionPolicy(Policy.from_dict(asking), session_id="chat", home=tmp_path)
            session = Session(
                ScriptedModel([reply(call("start_job", {"task": "read notes"})), reply("ok")]),
                Toolset([*tools.tools, *creator.tools_for(turn)]),
                session_id="chat",
                turn=turn,
                protect=Protection.policy(policy)
                & Protection.ask("WRITE", approver=lambda request: True),
            )
            (started,) = (await session.run("go")).tool_outputs
            await asyncio.wait_for(manager.wait(started.result.details["job_id"]), 30)
            (read,) = [m for m in job_model.requests[1].transcript if isinstance(m, ToolOutput)]
            assert read.is_error and "private notes" not in read.text

    asyncio.run(main())


# -- the job tools of two sessions on one store ------------------------------------------------


def test_the_job_tools_never_name_another_sessions_jobs(
    make_store: StoreFactory, tmp_path: Path
) -> None:
    """An ambiguous id prefix lists only the caller's jobs; another's is not found."""

    async def main() -> None:
        store = make_store()
        async with store:
            jobs = JobTable(store)
            for job_id, session_id in (("job-a1", "alice"), ("job-a2", "alice"), ("job-b1", "bob")):
                await jobs.create(NewJob(id=job_id, session_id=session_id, task="t"))
            async with JobManager(store) as manager:
                creator = job_tools_source(manager, model_for=lambda agent: ScriptedModel([]))
                turn = TurnContext(session_id="alice", home=tmp_path, can_create_jobs=True)
                session = Session(
                    ScriptedModel(
                        [
                            reply(call("job_status", {"job_id": "job-"})),
                            reply(call("job_status", {"job_id": "job-b"})),
                            reply(call("cancel_job", {"job_id": "job-b1"})),
                            reply("ok"),
                        ]
                    ),
                    Toolset(list(creator.tools_for(turn))),
                    session_id="alice",
                    turn=turn,
                )
                several, other, cancel = (await session.run("go")).tool_outputs
            assert several.is_error and "job-a1" in several.text and "job-b1" not in several.text
            for refused in (other, cancel):
                assert refused.is_error and "in this session" in refused.text
            untouched = await jobs.get("job-b1")
            assert untouched is not None and untouched.state == "pending"

    asyncio.run(main())


# -- properties of the record -------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(config, context, st.sampled_from(list(ALL)), args_strategy)
def test_a_recorded_policy_reads_back_as_it_was_and_its_job_never_gets_more(
    data: dict[str, Any], ctx: Any, name: str, args: dict[str, Any]
) -> None:
    policy = Policy.from_dict(data)
    creator = SessionPolicy(policy, session_id="s", context=ctx)
    record = json.loads(json.dumps(record_creator(creator, "s")))
    rebuilt = creator_policy(record, "s")
    (judge,) = rebuilt.judges
    assert isinstance(judge, SessionPolicy)
    assert judge.policy == policy and judge.ctx == ctx
    tool = ALL[name]
    job = job_policy(rebuilt, "job", "s.job")
    decided = asyncio.run(job(tool, args, ToolCall("c1", name, "{}")))
    assert isinstance(decided, PolicyDecision)
    if decided.action == "allow":
        assert creator.decide(tool, args).action == "allow"
    assert decided.action != "ask"
