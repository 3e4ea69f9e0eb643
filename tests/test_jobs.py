"""Background jobs on the real SQLite and PostgreSQL stores: started in one turn, announced
once in a later one, cancelled, denied what needs a human (read off the file system),
and only offered where the turn can create jobs."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from test_workflows_support import StoreFactory, raw_query
from tooldeck import Protection, Session, Toolset, TurnContext
from tooldeck._notices import NOTICE_PREFIX
from tooldeck.approvals import ApprovalAnswer, ApprovalRequest, allow_all
from tooldeck.builtin import load_builtin_registry
from tooldeck.jobs import (
    JobManager,
    JobNotices,
    JobRuntime,
    NewJob,
    job_tools_source,
)
from tooldeck.model import ModelRequest
from tooldeck.policy import Policy, SessionPolicy, approve
from tooldeck.testing import ScriptedModel, call, reply
from tooldeck.transcript import AssistantMessage, UserMessage
from tooldeck.workflows.store import WorkflowStore

pytest_plugins = ["test_workflows_support"]

REGISTRY = load_builtin_registry()


class Gated(ScriptedModel):
    """A scripted model whose every answer waits for ``gate`` (a job that takes a while)."""

    def __init__(self, script: Any, gate: asyncio.Event | None = None) -> None:
        super().__init__(script)
        self.gate = gate

    async def respond(self, request: ModelRequest) -> AssistantMessage:
        if self.gate is not None:
            await self.gate.wait()
        return await super().respond(request)


class Human:
    def __init__(self, *answers: ApprovalAnswer) -> None:
        self.answers = list(answers)
        self.asked: list[str] = []

    async def __call__(self, requests: Sequence[ApprovalRequest]) -> list[ApprovalAnswer]:
        self.asked.extend(r.call.name for r in requests)
        return [self.answers.pop(0) if self.answers else ApprovalAnswer(False) for _ in requests]


def notices_in(items: Sequence[Any]) -> list[str]:
    return [
        i.text for i in items if isinstance(i, UserMessage) and i.text.startswith(NOTICE_PREFIX)
    ]


def tools_for(manager: JobManager, job_model: Any) -> Any:
    return [REGISTRY, job_tools_source(manager, model_for=lambda agent: job_model)]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# -- the life of a job ---------------------------------------------------------------------


def test_a_job_finishes_while_the_session_goes_on_and_is_announced_once(
    make_store: StoreFactory, tmp_path: Path
) -> None:
    async def main() -> None:
        store = make_store()
        async with store, JobManager(store, poll=0.05, lease=5) as manager:
            gate = asyncio.Event()
            job_model = Gated([reply("The answer is 42, found in the archive.")], gate)
            seen: list[list[str]] = []
            ref: list[str] = []

            def parent(request: ModelRequest) -> AssistantMessage:
                seen.append(notices_in(request.transcript))
                last = request.transcript[-1]
                text = last.text if isinstance(last, UserMessage) else ""
                if text == "start it":
                    return reply(call("start_job", {"task": "find the answer"}))
                if text == "and now?" and not ref:
                    found = re.search(r"ref_id='(ref_[0-9a-f]+)'", "\n".join(seen[-1]))
                    assert found, seen[-1]
                    ref.append(found.group(1))
                    return reply(call("recall_tool_result", {"ref_id": ref[0]}))
                return reply("ok")

            turn = TurnContext(session_id="s1", home=tmp_path, can_create_jobs=True)
            session = Session(
                ScriptedModel(parent),
                tools_for(manager, job_model),
                session_id="s1",
                turn=turn,
                notices=JobNotices(store),
            )
            first = await session.run("start it")
            job_id = first.tool_outputs[0].result.details["job_id"]
            await session.run("how are you?")  # the job is still running: nothing yet
            assert (await manager.get(job_id)).state == "running"
            assert notices_in(session.transcript) == []
            gate.set()
            job = await asyncio.wait_for(manager.wait(job_id), 30)
            assert job.state == "succeeded" and job.summary and "42" in job.summary
            third = await session.run("and now?")
            announced = notices_in(session.transcript)
            assert len(announced) == 1 and job_id in announced[0] and "succeeded" in announced[0]
            # the notice is the item right before the prompt, and the model was sent it
            prompt_at = max(
                i for i, m in enumerate(session.transcript) if m == UserMessage("and now?")
            )
            assert session.transcript[prompt_at - 1].text == announced[0]
            assert len(seen[-2]) == 1
            # the recall reference in the notice gives the whole result back
            recalled = third.tool_outputs[0]
            assert recalled.name == "recall_tool_result" and not recalled.is_error
            assert "The answer is 42, found in the archive." in recalled.result.text()
            await session.run("anything else?")
            assert len(notices_in(session.transcript)) == 1  # once, not again
            # and another connection (another process) gets nothing either
            other = make_store()
            async with other:
                assert await JobNotices(other).take("s1") == []

    run(main())


def test_notices_are_taken_once_by_racing_readers(make_store: StoreFactory) -> None:
    """Ten stores (connections) take the same session's notices at once: each once."""

    async def main() -> None:
        store = make_store()
        async with store:
            manager = JobManager(store)
            for i in range(20):
                await manager.table.create(NewJob(id=f"job-{i:02d}", session_id="s", task="t"))
                await manager.table.claim(f"job-{i:02d}", "me")
                await manager.table.finish(f"job-{i:02d}", "me", "succeeded", summary=f"r{i}")
            readers = [make_store() for _ in range(10)]
            for r in readers:
                await r.open()
            try:
                taken = await asyncio.gather(*(JobNotices(r).take("s") for r in readers))
            finally:
                for r in readers:
                    await r.close()
            ids = [re.search(r"job-\d\d", t).group(0) for batch in taken for t in batch]  # type: ignore[union-attr]
            assert sorted(ids) == [f"job-{i:02d}" for i in range(20)]

    run(main())


def test_cancel_a_running_job_and_a_pending_one(make_store: StoreFactory, tmp_path: Path) -> None:
    async def main() -> None:
        store = make_store()
        async with store, JobManager(store, concurrency=1, poll=0.05, lease=5) as manager:
            gate = asyncio.Event()  # never set: the running job waits in its model call
            live = _live(Gated([reply("never")], gate), tmp_path)
            running = await manager.start(NewJob(id="job-run", session_id="s", task="t"), live)
            queued = await manager.start(NewJob(id="job-wait", session_id="s", task="t"), live)
            assert (await manager.get(queued)).state == "pending"  # one slot, taken
            assert await manager.cancel(queued, "not needed") == ("cancelled", True)
            assert await manager.cancel(running, "changed my mind") == ("running", True)
            job = await asyncio.wait_for(manager.wait(running), 30)
            assert job.state == "cancelled" and "changed my mind" in (job.error or "")
            again = await manager.get(queued)
            assert again.state == "cancelled" and again.attempts == 0  # it never ran
            assert await manager.cancel(running) == ("cancelled", False)
            notes = await JobNotices(store).take("s")
            assert len(notes) == 2 and all("cancelled" in n for n in notes)

    run(main())


def _live(model: Any, home: Path, policy: Any = None, tools: Toolset | None = None) -> Any:
    from tooldeck.approvals import allow_all
    from tooldeck.jobs import LiveJob

    return LiveJob(model=model, tools=tools or Toolset(), policy=policy or allow_all, home=home)


def test_the_concurrency_limit_holds_and_queued_jobs_run_when_slots_free(
    make_store: StoreFactory, tmp_path: Path
) -> None:
    async def main() -> None:
        store = make_store()
        async with store, JobManager(store, concurrency=2, poll=0.02, lease=5) as manager:
            ids = [
                await manager.start(
                    NewJob(id=f"job-{i}", session_id="s", task="t"),
                    _live(ScriptedModel([reply(f"done {i}")]), tmp_path),
                )
                for i in range(7)
            ]
            ended = [await asyncio.wait_for(manager.wait(i), 30) for i in ids]
            assert [j.state for j in ended] == ["succeeded"] * 7
            assert manager.peak <= 2

    run(main())


def test_pending_jobs_nobody_holds_are_claimed_only_into_free_slots(
    make_store: StoreFactory,
) -> None:
    """Seven pending jobs (a schedule's, say) and two slots: never more than two at once
    (on PostgreSQL the claim's ``LIMIT`` in an ``IN`` subquery once took every one)."""

    async def main() -> None:
        store = make_store()
        async with store:
            table = JobManager(store).table
            for i in range(7):
                await table.create(NewJob(id=f"job-p{i}", session_id="s", task="t"))
            model = Gated([reply("done")] * 7)
            runtime = JobRuntime(model_for=lambda job: model)
            async with JobManager(store, runtime, concurrency=2, poll=0.02, lease=5) as manager:
                ended = [await asyncio.wait_for(manager.wait(f"job-p{i}"), 30) for i in range(7)]
            assert [j.state for j in ended] == ["succeeded"] * 7
            assert manager.peak == 2

    run(main())


# -- headless: what needs a human never runs -------------------------------------------------


def _job_calls(home: Path, *calls: Any) -> ScriptedModel:
    return ScriptedModel([reply(*calls), reply("finished")])


@pytest.mark.parametrize("parent_policy", ["none", "session", "session-granted"])
def test_a_jobs_dangerous_call_is_denied_and_never_runs(
    make_store: StoreFactory, tmp_path: Path, parent_policy: str
) -> None:
    """run_bash (DANGEROUS) in a job: denied however permissive the parent, never run."""

    async def main() -> None:
        store = make_store()
        turn = TurnContext(session_id="p", home=tmp_path, can_create_jobs=True)
        policy: Any = None
        human = Human(approve(), approve())
        if parent_policy != "none":
            policy = SessionPolicy(Policy(), session_id="p", home=tmp_path)
            if parent_policy == "session-granted":
                policy.grants.add("write_file", None, by="human")
        job_model = _job_calls(
            tmp_path,
            call("run_bash", {"command": f"touch {tmp_path / 'PWNED'}"}),
            call("write_file", {"path": "note.txt", "content": "written"}),
        )
        async with store, JobManager(store, poll=0.05, lease=5) as manager:
            session = Session(
                ScriptedModel([reply(call("start_job", {"task": "do things"})), reply("ok")]),
                tools_for(manager, job_model),
                session_id="p",
                turn=turn,
                protect=Protection.policy(policy, approver=policy.approver(human))
                if policy is not None
                else Protection.policy(allow_all, approver=human),
            )
            started = await session.run("go")
            job_id = started.tool_outputs[0].result.details["job_id"]
            job = await asyncio.wait_for(manager.wait(job_id), 30)
        assert job.state == "succeeded"
        assert not (tmp_path / "PWNED").exists()  # the DANGEROUS call never ran
        outputs = {o.name: o for o in _job_outputs(job_model)}
        # hidden from the job (its policy denies every call of it), so refused as unknown
        assert outputs["run_bash"].startswith("Unknown tool 'run_bash'")
        wrote = (tmp_path / "note.txt").exists()
        # WRITE needs a human: denied, unless the parent's human granted it ahead
        assert wrote == (parent_policy in ("none", "session-granted"))
        if parent_policy == "none":  # no policy at all: tiers do not ask, only the list denies
            assert (tmp_path / "note.txt").read_text() == "written"

    run(main())


def _job_outputs(model: ScriptedModel) -> list[Any]:
    """The tool outputs the job's model was sent (name, text), from its second request."""
    from tooldeck.transcript import ToolOutput

    class Out(str):
        name: str

    found = []
    for item in model.requests[-1].transcript:
        if isinstance(item, ToolOutput):
            out = Out(item.result.text())
            out.name = item.name
            found.append(out)
    return found


def test_a_resumed_job_without_its_parent_is_headless_under_the_runtime_policy(
    make_store: StoreFactory, tmp_path: Path
) -> None:
    """A job this process did not start runs under the runtime's policy, headless."""

    async def main() -> None:
        store = make_store()
        job_model = _job_calls(tmp_path, call("run_bash", {"command": f"touch {tmp_path / 'X'}"}))
        runtime = JobRuntime(
            model_for=lambda job: job_model,
            tools_for=lambda job: REGISTRY.toolset(TurnContext(session_id="j", home=tmp_path)),
            home=tmp_path,
        )
        async with store:
            await JobManager(store).table.create(NewJob(id="job-q", session_id="s", task="t"))
            async with JobManager(store, runtime, poll=0.02, lease=5) as manager:
                job = await asyncio.wait_for(manager.wait("job-q"), 30)
        assert job.state == "succeeded"
        assert not (tmp_path / "X").exists()
        # run_bash was not even shown to the job's model: its policy denies it outright
        shown = {t.name for t in job_model.requests[0].tools}
        assert "run_bash" not in shown and "read_document" in shown

    run(main())


# -- availability per turn ----------------------------------------------------------------


def test_job_tools_exist_only_on_text_turns_that_can_create_jobs(tmp_path: Path) -> None:
    async def main() -> None:
        from tooldeck.workflows.store import SQLiteStore

        store = SQLiteStore(tmp_path / "db.sqlite3")
        async with store:
            manager = JobManager(store)
            creator = job_tools_source(manager, model_for=lambda a: ScriptedModel([]))
            yes = TurnContext(session_id="s", home=tmp_path, can_create_jobs=True)
            assert {t.name for t in creator.tools_for(yes)} == {
                "start_job",
                "job_status",
                "list_jobs",
                "cancel_job",
            }
            no = TurnContext(session_id="s", home=tmp_path)
            assert list(creator.tools_for(no)) == []
            task = TurnContext(
                session_id="s", home=tmp_path, can_create_jobs=True, turn_kind="workflow_task"
            )
            assert list(creator.tools_for(task)) == []

    run(main())


def test_a_job_never_gets_job_or_control_tools(make_store: StoreFactory, tmp_path: Path) -> None:
    async def main() -> None:
        store = make_store()
        job_model = ScriptedModel([reply("done")])
        async with store, JobManager(store, poll=0.05, lease=5) as manager:
            session = Session(
                ScriptedModel([reply(call("start_job", {"task": "x"})), reply("ok")]),
                tools_for(manager, job_model),
                session_id="p",
                turn=TurnContext(session_id="p", home=tmp_path, can_create_jobs=True),
            )
            started = await session.run("go")
            job = await asyncio.wait_for(
                manager.wait(started.tool_outputs[0].result.details["job_id"]), 30
            )
        assert job.state == "succeeded"
        shown = {t.name for t in job_model.requests[0].tools}
        assert shown and not shown & {"start_job", "job_status", "cancel_job", "list_jobs"}

    run(main())


def _rows(store: WorkflowStore, q: str) -> list[tuple[object, ...]]:
    return raw_query(store, q)


# -- the headless wrapper itself ----------------------------------------------------------

TIERS = ["STANDARD", "WRITE", "DANGEROUS"]


@given(
    tier=st.sampled_from(TIERS),
    name=st.sampled_from(["read_document", "delegate_task", "my_tool", "run_bash"]),
    inner=st.sampled_from(["allow", "ask", "deny"]),
)
def test_headless_never_allows_what_needs_a_human(tier: str, name: str, inner: str) -> None:
    """Whatever the inherited hook says: no ask survives, DANGEROUS and delegate_task are
    denied, and a deny stays a deny. Called directly, as the dispatcher calls it (the
    visibility filter is a second line, not the only one)."""
    from tooldeck import Protection
    from tooldeck import tool as make_tool
    from tooldeck.approvals import PolicyDecision
    from tooldeck.transcript import ToolCall

    @make_tool(name=name, tier=tier)  # type: ignore[arg-type]
    def t() -> str:
        """A tool."""
        return "ran"

    def parent(tool: Any, params: Any, c: Any) -> PolicyDecision:
        return PolicyDecision(inner, "the parent says so")  # type: ignore[arg-type]

    gate = Protection.policy(parent).headless()
    decided = asyncio.run(gate(t, {}, ToolCall("c1", name, "{}")))
    assert decided.action in ("allow", "deny")
    if tier == "DANGEROUS" or name in ("delegate_task", "run_bash") or inner != "allow":
        assert decided.action == "deny"
        if tier == "DANGEROUS" or name in ("delegate_task", "run_bash"):
            assert not gate.visible(t) and "headless" in decided.reason
    else:
        assert decided.action == "allow"


# -- the notice in provider requests -------------------------------------------------------


def test_a_notice_before_the_prompt_is_a_valid_request_for_every_adapter() -> None:
    """Anthropic gets one user turn (notice + prompt merged, roles still alternate);
    Chat Completions and Responses get two user messages in a row."""
    from tooldeck.model import ModelSettings
    from tooldeck.providers.anthropic import AnthropicModel
    from tooldeck.providers.chat_completions import ChatCompletionsModel
    from tooldeck.providers.openai_responses import OpenAIResponsesModel

    notice = f"{NOTICE_PREFIX} background job job-1 ended: succeeded.\nSummary: 42"
    transcript = [
        UserMessage("start it"),
        reply("started"),
        UserMessage(notice),
        UserMessage("and now?"),
    ]
    request = ModelRequest(transcript=transcript, tools=(), settings=ModelSettings())
    base = "http://127.0.0.1:9"
    # [0]: the body (the rest of what build_request returns differs per adapter)
    anthropic = AnthropicModel("claude-x", api_key="k", base_url=base).build_request(request)[0]
    roles = [m["role"] for m in anthropic["messages"]]
    assert roles == ["user", "assistant", "user"]
    last = anthropic["messages"][-1]["content"]
    assert [b["text"] for b in last] == [notice, "and now?"]
    chat = ChatCompletionsModel("gpt-x", api_key="k", base_url=base).build_request(request)[0]
    users = [m for m in chat["messages"] if m["role"] == "user"]
    assert [u["content"] for u in users][-2:] == [notice, "and now?"]
    responses = OpenAIResponsesModel("gpt-x", api_key="k", base_url=base).build_request(request)[0]
    texts = [str(i.get("content")) for i in responses["input"] if i.get("role") == "user"]
    assert notice in texts[-2] and "and now?" in texts[-1]


# -- workflow task turns cannot create jobs -----------------------------------------------


def test_a_workflow_task_turn_calling_job_tools_gets_unknown_tool(tmp_path: Path) -> None:
    from tooldeck.testing import call as make_call
    from tooldeck.workflows import SQLiteStore, Task, TaskRun, Workflow, WorkflowEngine
    from tooldeck.workflows.scripted import submitting

    seen: list[str] = []

    def model(run: TaskRun) -> Any:
        inner = submitting(
            run,
            make_call("start_job", {"task": "escape"}),
            make_call("create_schedule", {"name": "x", "prompt": "p", "cron": "* * * * *"}),
            {"ok": True},
        )

        class Watch(ScriptedModel):
            async def respond(self, request: ModelRequest) -> AssistantMessage:
                from tooldeck.transcript import ToolOutput

                seen.extend(
                    o.result.text() for o in request.transcript if isinstance(o, ToolOutput)
                )
                return await inner.respond(request)

        return Watch([])

    schema = {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"],
        "additionalProperties": False,
    }
    flow = Workflow("w", [Task("t", "Do it.", result=schema)])

    async def main() -> None:
        async with SQLiteStore(tmp_path / "w.sqlite3") as store:
            engine = WorkflowEngine(store, model, home=tmp_path)
            async with engine:
                run_ = await asyncio.wait_for(engine.run(flow), 60)
        assert run_.state == "succeeded"

    asyncio.run(main())
    assert any(s.startswith("Unknown tool 'start_job'") for s in seen), seen
    assert any(s.startswith("Unknown tool 'create_schedule'") for s in seen), seen


def test_the_documented_examples_run(capsys: pytest.CaptureFixture[str]) -> None:
    doc = (Path(__file__).resolve().parents[1] / "docs" / "jobs-and-schedules.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", doc, re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, "docs/jobs-and-schedules.md", "exec"), {"__name__": "__doc__"})
    assert "ended: succeeded" in capsys.readouterr().out


def test_a_job_limited_to_a_toolkit_gets_only_its_tools(
    make_store: StoreFactory, tmp_path: Path
) -> None:
    from tooldeck.agents.toolkits import ToolkitManifest

    async def main() -> None:
        store = make_store()
        job_model = ScriptedModel([reply("read only")])
        async with store, JobManager(store, poll=0.05, lease=5) as manager:
            creator = job_tools_source(
                manager, model_for=lambda a: job_model, manifest=ToolkitManifest.load()
            )
            session = Session(
                ScriptedModel(
                    [
                        reply(call("start_job", {"task": "x", "toolkit": "nope"})),
                        reply(call("start_job", {"task": "x", "toolkit": "common_read"})),
                        reply("ok"),
                    ]
                ),
                [REGISTRY, creator],
                session_id="p",
                turn=TurnContext(session_id="p", home=tmp_path, can_create_jobs=True),
            )
            result = await session.run("go")
            bad, good = result.tool_outputs
            assert bad.is_error and "Unknown toolkit 'nope'" in bad.result.text()
            job = await asyncio.wait_for(manager.wait(good.result.details["job_id"]), 30)
        assert job.state == "succeeded"
        shown = {t.name for t in job_model.requests[0].tools}
        assert shown == {"read_document", "grep_files", "list_files"}

    run(main())


def test_a_runtime_gives_a_job_the_tools_its_turn_recorded(
    make_store: StoreFactory, tmp_path: Path
) -> None:
    from tooldeck.jobs.runner import registry_tools

    async def main() -> None:
        store = make_store()
        model = ScriptedModel([reply("done")])
        runtime = JobRuntime(
            model_for=lambda job: model, tools_for=registry_tools(REGISTRY, tmp_path)
        )
        async with store:
            await JobManager(store).table.create(
                NewJob(
                    id="job-t",
                    session_id="s",
                    task="t",
                    spec={"tools": ["read_document", "run_bash"]},
                )
            )
            async with JobManager(store, runtime, poll=0.02, lease=5) as manager:
                job = await asyncio.wait_for(manager.wait("job-t"), 30)
        assert job.state == "succeeded"
        assert {t.name for t in model.requests[0].tools} == {"read_document"}  # bash: headless

    run(main())


def test_a_session_cannot_see_or_cancel_another_sessions_job(
    make_store: StoreFactory, tmp_path: Path
) -> None:
    async def main() -> None:
        store = make_store()
        async with store, JobManager(store, poll=0.05, lease=5) as manager:
            await manager.table.create(NewJob(id="job-other", session_id="victim", task="t"))
            session = Session(
                ScriptedModel(
                    [
                        reply(
                            call("job_status", {"job_id": "job-other"}),
                            call("cancel_job", {"job_id": "job-other"}),
                            call("list_jobs", {}),
                        ),
                        reply("ok"),
                    ]
                ),
                tools_for(manager, ScriptedModel([])),
                session_id="intruder",
                turn=TurnContext(session_id="intruder", home=tmp_path, can_create_jobs=True),
            )
            result = await session.run("peek")
            status, cancel, listed = result.tool_outputs
            assert status.is_error and "no job 'job-other' in this session" in status.result.text()
            assert cancel.is_error and listed.result.text() == "No jobs."
            assert (await manager.get("job-other")).state == "pending"  # untouched

    run(main())
