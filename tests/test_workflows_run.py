"""Running workflows with scripted models (not real ones), against both stores: full runs,
rejection and resubmission within one task turn, bounded attempts, cancellation, the
fixed task toolset, and the workflow tools of text turns."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from test_workflows_support import StoreFactory
from tooldeck import Session, ToolContext, TurnContext, assemble
from tooldeck.builtin import load_builtin_registry
from tooldeck.model import ModelDelta, ModelRequest
from tooldeck.testing import ScriptedModel, call, reply
from tooldeck.transcript import AssistantMessage, ToolOutput
from tooldeck.workflows import (
    AsyncioExecutor,
    ControlPlane,
    Task,
    TaskExecutor,
    TaskRun,
    TaskStateChanged,
    Workflow,
    WorkflowEngine,
    WorkflowInputError,
    WorkflowStore,
    load_script,
    result_schema,
    submit_result_tool,
    task_toolset,
    workflow_tools_source,
)
from tooldeck.workflows.engine import WorkflowError
from tooldeck.workflows.scripted import Raw, submitting

pytest_plugins = ["test_workflows_support"]  # the store fixtures, both backends
SCRIPTS = Path(__file__).parent / "workflow_scripts"
REGISTRY = load_builtin_registry()
T = TypeVar("T")

POINT = {
    "type": "object",
    "properties": {
        "x": {"type": "integer", "minimum": 0},
        "label": {"type": "string", "enum": ["a", "b"]},
    },
    "required": ["x", "label"],
    "additionalProperties": False,
}


def run_with(
    make_store: StoreFactory,
    body: Callable[[WorkflowStore], Awaitable[T]],
) -> T:

    async def main() -> T:
        async with make_store() as store:
            async with asyncio.timeout(30):
                return await body(store)

    return asyncio.run(main())


def engine_for(
    store: WorkflowStore, factory: Callable[[TaskRun], Any], tmp: Path | None = None, **kw: Any
) -> WorkflowEngine:
    kw.setdefault("registry", REGISTRY)
    kw.setdefault("poll_interval", 0.05)
    return WorkflowEngine(store, factory, home=tmp or Path("/nonexistent-home"), **kw)


# -- full runs ---------------------------------------------------------------------------------


def test_a_full_workflow_of_several_tasks_runs_with_the_scripted_model(
    make_store: StoreFactory,
) -> None:
    script = load_script(SCRIPTS / "research_brief.py")
    workflow = script.workflow()
    assert script.scripted_model is not None
    prompts: dict[str, str] = {}
    events: list[TaskStateChanged] = []

    def factory(run: TaskRun) -> Any:
        prompts[run.name] = run.prompt
        assert script.scripted_model is not None
        return script.scripted_model(run)

    async def body(store: WorkflowStore) -> None:
        executor = AsyncioExecutor(max_concurrency=2)
        engine = engine_for(store, factory, executor=executor)
        engine.events.subscribe(lambda e: events.append(e), TaskStateChanged)  # type: ignore[arg-type, func-returns-value]
        async with engine:
            run = await engine.run(workflow, {"topic": "heat pumps", "audience": "owners"})
        assert run.state == "succeeded", run
        assert [t.state for t in run.tasks] == ["submitted"] * 4
        assert run.results["verdict"] == "recommended"
        assert run.results["outline"]["title"] == "On heat pumps"
        assert run.results["outline"]["sections"] == [
            "heat pumps save energy",
            "heat pumps cost more up front",
        ]
        assert run.task("outline").attempts == 2  # one rejection, then accepted
        assert executor.peak == 2  # benefits and drawbacks ran together, within the limit
        # Inputs are filtered per task; dependency results are in the dependent's prompt.
        assert '"topic": "heat pumps"' in prompts["benefits"]
        assert "audience" not in prompts["benefits"]
        assert "heat pumps save energy" in prompts["outline"]
        assert "Results of the tasks this one depends on" in prompts["outline"]
        order = [(e.task, e.state) for e in events if e.state in ("running", "submitted")]
        assert order.index(("outline", "running")) > order.index(("benefits", "submitted"))
        assert order.index(("outline", "running")) > order.index(("drawbacks", "submitted"))
        history = await store.transitions(run.id)
        assert [t.to_state for t in history if t.task_id is None] == [
            "pending",
            "running",
            "succeeded",
        ]

    run_with(make_store, body)


def test_rejection_then_resubmission_within_one_task_turn(
    make_store: StoreFactory, tmp_path: Path
) -> None:
    """The first value breaks the schema: an error output, the turn goes on, the fix is stored."""
    seen: list[list[Any]] = []
    sessions: list[str] = []

    def script(run: TaskRun) -> Any:
        def step(request: ModelRequest) -> AssistantMessage:
            seen.append(list(request.transcript))
            sessions.append(run.session_id)
            outputs = [i for i in request.transcript if isinstance(i, ToolOutput)]
            if not outputs:
                return reply(call("submit_result", {"x": -1, "label": "c"}))
            assert outputs[-1].is_error and "minimum of 0" in outputs[-1].text
            return reply(call("submit_result", {"x": 4, "label": "a"}))

        return ScriptedModel(step)

    async def body(store: WorkflowStore) -> None:
        wf = Workflow("w", [Task("point", "Give a point.", POINT)])
        async with engine_for(store, script, tmp_path) as engine:
            run = await engine.run(wf, {})
        task = run.task("point")
        assert run.state == "succeeded" and task.result == {"x": 4, "label": "a"}
        assert task.attempts == 2
        assert len(set(sessions)) == 1 and len(seen) == 2  # one session, one turn, two steps
        first_output = seen[1][-1]
        assert isinstance(first_output, ToolOutput) and first_output.is_error
        assert "$.x" in first_output.text and "$.label" in first_output.text
        rejections = await store.rejections(task.id)
        assert [(r.attempt, r.source) for r in rejections] == [(1, "arguments")]
        assert any("minimum of 0" in r for r in rejections[0].reasons)
        assert json.loads(rejections[0].value) == {"x": -1, "label": "c"}

    run_with(make_store, body)


def test_the_control_plane_checks_again_even_when_the_tool_schema_lets_a_value_through(
    make_store: StoreFactory,
) -> None:
    """A submit tool built from a looser schema (a drifted definition) cannot store a value
    the stored schema refuses: the control plane validates independently."""

    async def body(store: WorkflowStore) -> None:
        wf = Workflow("w", [Task("point", "Give a point.", POINT)])
        engine = engine_for(store, lambda run: ScriptedModel([]))
        workflow_id = f"wf-manual{int(time.time() * 1000) % 100000}"
        from tooldeck.workflows.store import NewTask

        await store.create_workflow(
            workflow_id, "w", {}, [NewTask("point", 0, "x", wf.tasks[0].schema.schema)]
        )
        task_id = f"{workflow_id}:point"
        await store.claim_task(task_id, "sess")
        task = await store.get_task(task_id)
        assert task is not None
        loose = result_schema(
            {
                "type": "object",
                "properties": {"x": {"type": "integer"}, "label": {"type": "string"}},
                "required": ["x", "label"],
                "additionalProperties": False,
            }
        )
        tool = submit_result_tool(task, engine.control, schema=loose)
        turn = TurnContext("sess", Path("."), turn_kind="workflow_task")
        model = ScriptedModel(
            [
                reply(call("submit_result", {"x": -5, "label": "zzz"})),
                reply(call("submit_result", {"x": 5, "label": "b"})),
            ]
        )
        session = Session(model, task_toolset(turn, tool), session_id="sess", turn=turn)
        result = await session.run("go")
        first, second = result.tool_outputs
        assert first.is_error and not first.result.terminate
        assert first.text.startswith("Rejected (attempt 1 of 3)")
        assert "$.x: -5 is less than the minimum of 0" in first.text
        assert "$.label" in first.text and "2 attempt(s) left" in first.text
        assert second.text.startswith("Accepted") and second.result.terminate
        assert result.reason == "ended by tool submit_result"
        stored = await store.get_task(task_id)
        assert stored is not None and stored.result == {"x": 5, "label": "b"}
        assert [r.source for r in await store.rejections(task_id)] == ["control_plane"]
        # The same call delivered again (same session and call id) is not stored twice.
        again = await tool.invoke(
            {"x": 5, "label": "b"},
            ToolContext(call_id=second.call_id, session_id="sess", tool_name="submit_result"),
        )
        assert again.terminate and again.text().startswith("Accepted earlier")
        other = await ControlPlane(store).submit(
            task_id, {"x": 9, "label": "a"}, submission_key="z"
        )
        assert other.status == "conflict" and other.tool_result().terminate
        assert await store.count_results(task_id) == 1

    run_with(make_store, body)


def test_attempts_are_bounded_and_dependents_are_cancelled(
    make_store: StoreFactory, tmp_path: Path
) -> None:
    def factory(run: TaskRun) -> Any:
        if run.name == "point":  # never valid: rejected by arguments, then by repair
            return submitting(run, {"x": -1, "label": "a"}, Raw('{"x": 1, "label": '), {"x": 1})
        return submitting(run, "unused")

    async def body(store: WorkflowStore) -> None:
        wf = Workflow(
            "w",
            [
                Task("point", "Give a point.", POINT, max_attempts=2),
                Task("after", "Use it.", {"type": "string"}, depends_on=["point"]),
            ],
        )
        async with engine_for(store, factory, tmp_path) as engine:
            run = await engine.run(wf, {})
        point, after = run.task("point"), run.task("after")
        assert run.state == "failed"
        assert point.state == "failed" and point.attempts == 2
        assert point.error is not None and "no attempts left" in point.error
        assert after.state == "cancelled" and after.error == "dependency 'point' failed"
        assert run.error is not None and "point failed" in run.error
        assert not point.has_result
        assert [r.attempt for r in await store.rejections(point.id)] == [1, 2]

    run_with(make_store, body)


def test_a_model_that_stops_without_submitting_is_reminded_once_then_the_task_fails(
    make_store: StoreFactory, tmp_path: Path
) -> None:
    reminded: list[str] = []

    def factory(run: TaskRun) -> Any:
        def step(request: ModelRequest) -> AssistantMessage:
            last = request.transcript[-1]
            text = getattr(last, "text", "")
            if "not finished" in str(text):
                reminded.append(run.name)
                if run.name == "late":
                    return reply(call("submit_result", {"value": "done"}))
            return reply("I think I am done.")

        return ScriptedModel(step)

    async def body(store: WorkflowStore) -> None:
        wf = Workflow(
            "w",
            [Task("late", "x", {"type": "string"}), Task("never", "x", {"type": "string"})],
        )
        async with engine_for(store, factory, tmp_path) as engine:
            run = await engine.run(wf, {})
        assert run.task("late").state == "submitted" and run.task("late").result == "done"
        never = run.task("never")
        assert never.state == "failed"
        assert never.error == "the turn ended without an accepted result (end_turn)"
        assert sorted(reminded) == ["late", "never"]

    run_with(make_store, body)


def test_a_task_turn_out_of_time_fails(make_store: StoreFactory, tmp_path: Path) -> None:
    async def body(store: WorkflowStore) -> None:
        wf = Workflow("w", [Task("slow", "x", {"type": "string"})])
        slow = _BlockingModel()
        async with engine_for(store, lambda run: slow, tmp_path, task_timeout=0.3) as engine:
            run = await engine.run(wf, {})
        task = run.task("slow")
        assert task.state == "failed" and "time budget" in (task.error or "")
        assert slow.cancelled

    run_with(make_store, body)


# -- cancellation ------------------------------------------------------------------------------


class _BlockingModel:
    """A model whose every request waits forever (until it is cancelled)."""

    name = "blocking"

    def __init__(self, group: _Started | None = None) -> None:
        self.started = asyncio.Event()
        self.cancelled = False
        self.group = group

    async def respond(self, request: ModelRequest) -> AssistantMessage:
        self.started.set()
        if self.group is not None:
            self.group.arrive()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        raise AssertionError("unreachable")

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta | AssistantMessage]:
        yield await self.respond(request)


class _Started:
    """Set once ``count`` arrivals have happened."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.event = asyncio.Event()

    def arrive(self) -> None:
        self.count -= 1
        if self.count <= 0:
            self.event.set()


def test_cancel_mid_run_stops_running_tasks_and_cancels_the_rest(
    make_store: StoreFactory, tmp_path: Path
) -> None:
    blockers: dict[str, _BlockingModel] = {}
    three = _Started(3)

    def factory(run: TaskRun) -> Any:
        if run.name == "quick":
            return submitting(run, "ok")
        blockers[run.name] = _BlockingModel(three)
        return blockers[run.name]

    async def body(store: WorkflowStore) -> None:
        wf = Workflow(
            "w",
            [
                Task("quick", "x", {"type": "string"}),
                Task("slow1", "x", {"type": "string"}),
                Task("slow2", "x", {"type": "string"}),
                Task("queued", "x", {"type": "string"}),  # gets quick's slot when it is done
                Task("waiting", "x", {"type": "string"}),  # never gets a slot
                Task("after", "x", {"type": "string"}, depends_on=["slow1"]),
            ],
        )
        executor = AsyncioExecutor(max_concurrency=3)
        async with engine_for(store, factory, tmp_path, executor=executor) as engine:
            workflow_id = await engine.start(wf, {})
            await three.event.wait()  # slow1, slow2 and queued are inside their model calls
            started = time.monotonic()
            outcome = await engine.cancel(workflow_id, "the user changed their mind")
            took = time.monotonic() - started
            run = await engine.wait(workflow_id)
        assert took < 2.0, took
        assert outcome.cancelled
        assert sorted(t.split(":")[1] for t in outcome.running) == ["queued", "slow1", "slow2"]
        assert sorted(t.split(":")[1] for t in outcome.pending) == ["after", "waiting"]
        assert run.state == "cancelled" and run.error == "the user changed their mind"
        states = {t.name: t.state for t in run.tasks}
        assert states == {
            "quick": "submitted",
            "slow1": "cancelled",
            "slow2": "cancelled",
            "queued": "cancelled",
            "waiting": "cancelled",
            "after": "cancelled",
        }
        assert all(b.cancelled for b in blockers.values())  # the model calls were stopped
        assert sorted(blockers) == ["queued", "slow1", "slow2"]  # waiting never started
        assert executor.peak == 3
        assert run.task("slow1").error == "the user changed their mind"
        assert run.results == {"quick": "ok"}
        assert not (await engine.cancel(workflow_id)).cancelled

    run_with(make_store, body)


def test_a_cancellation_made_elsewhere_stops_the_turn_at_its_next_step(
    make_store: StoreFactory, tmp_path: Path
) -> None:
    """Another process cancels through the store only: the turn sees it before its next step."""
    steps: list[int] = []
    two = _Started(2)

    def factory(run: TaskRun) -> Any:
        def step(request: ModelRequest) -> AssistantMessage:
            steps.append(len(steps))
            two.arrive()
            return reply(call("notes", {"action": "list"}))  # works, never submits

        return ScriptedModel(step)

    async def body(store: WorkflowStore) -> None:
        wf = Workflow("w", [Task("loop", "x", {"type": "string"}, max_steps=50)])
        other = WorkflowEngine(store, factory, home=tmp_path)  # stands for another process
        async with engine_for(store, factory, tmp_path) as engine:
            workflow_id = await engine.start(wf, {})
            await two.event.wait()
            await other.store.cancel_workflow(workflow_id, "cancelled elsewhere")
            await engine.executor.join(workflow_id)
            run = await engine.wait(workflow_id)
        assert run.state == "cancelled" and run.task("loop").state == "cancelled"
        assert len(steps) < 10

    run_with(make_store, body)


# -- the fixed task toolset, and the text-turn tools ------------------------------------------


def _task_turn(**kw: Any) -> TurnContext:
    return TurnContext("s", Path("/tmp"), turn_kind="workflow_task", **kw)


def _dummy_submit() -> Any:
    from test_workflows_schema import _task_record

    schema = result_schema(POINT)
    return submit_result_tool(_task_record(schema.schema), ControlPlane(None), schema=schema)  # type: ignore[arg-type]


def test_task_toolset_is_fixed_by_the_context() -> None:
    submit = _dummy_submit()
    assert task_toolset(_task_turn(), submit, REGISTRY).names == ("notes", "submit_result")
    assert task_toolset(_task_turn(web_provider="search"), submit, REGISTRY).names == (
        "web_fetch",
        "notes",
        "submit_result",
    )
    assert task_toolset(_task_turn(memory_enabled=False), submit, REGISTRY).names == (
        "submit_result",
    )
    assert task_toolset(_task_turn(can_create_jobs=True), submit).names == ("submit_result",)
    toolset = task_toolset(_task_turn(web_provider="x"), submit, REGISTRY)
    assert toolset.origin("notes") == "workflow_task:memory (read-only)"
    notes = toolset["notes"]
    assert notes.read_only and notes.tier == "STANDARD"
    assert notes.schema["properties"]["action"]["enum"] == ["get", "search", "list"]
    assert "text" not in notes.schema["properties"]
    with pytest.raises(ValueError, match="workflow_task"):
        task_toolset(TurnContext("s", Path("/tmp")), submit, REGISTRY)


def test_read_only_notes_can_recall_but_not_write(tmp_path: Path) -> None:
    async def main() -> list[ToolOutput]:
        registry_notes = REGISTRY.tools["notes"]
        text_turn = TurnContext("s", tmp_path)
        saved = await registry_notes.invoke(
            {"action": "save", "key": "k", "text": "remember me"},
            ToolContext(call_id="c", tool_name="notes", turn=text_turn),
        )
        assert not saved.is_error
        turn = TurnContext("s", tmp_path, turn_kind="workflow_task")
        model = ScriptedModel(
            [
                reply(
                    call("notes", {"action": "get", "key": "k"}),
                    call("notes", {"action": "save", "key": "k", "text": "overwrite"}),
                    call("notes", {"action": "delete", "key": "k"}),
                    call("workflow", {"name": "w", "inputs": {}}),
                    call("delegate_task", {"agent": "a", "task": "t"}),
                    call("write_file", {"path": "x", "content": "y"}),
                ),
                reply("done"),
            ]
        )
        toolset = task_toolset(turn, _dummy_submit(), REGISTRY)
        result = await Session(model, toolset, turn=turn).run("go")
        return result.tool_outputs

    outputs = asyncio.run(main())
    assert [o.is_error for o in outputs] == [False, True, True, True, True, True]
    assert "remember me" in outputs[0].text
    assert "save" in outputs[1].text and "delete" in outputs[2].text
    for unknown in outputs[3:]:
        assert unknown.text.startswith("Unknown tool")
        assert "Available tools: " in unknown.text
    assert "remember me" in (tmp_path / ".tooldeck" / "notes.sqlite3").read_bytes().decode(
        "utf-8", "replace"
    )


def test_workflow_tools_exist_on_text_turns_only(make_store: StoreFactory, tmp_path: Path) -> None:
    wf = Workflow(
        "pair",
        [Task("a", "x", {"type": "string"}), Task("b", "x", {"type": "string"})],
        description="Two strings.",
        inputs={"type": "object", "properties": {"seed": {"type": "integer"}}},
    )

    async def body(store: WorkflowStore) -> None:
        engine = engine_for(store, lambda run: submitting(run, f"{run.name}!"), tmp_path)
        engine.register(wf)
        create = workflow_tools_source(engine)
        text = assemble(TurnContext("s", tmp_path), [create])
        task = assemble(TurnContext("s", tmp_path, turn_kind="workflow_task"), [create])
        assert text.names == ("workflow", "show_workflow", "list_workflows", "cancel_workflow")
        assert task.names == ()
        assert text.origin("workflow") == "workflows"
        assert "pair: Two strings." in text["workflow"].description

        outputs: dict[str, str] = {}

        def step(request: ModelRequest) -> AssistantMessage:
            done = [i for i in request.transcript if isinstance(i, ToolOutput)]
            for o in done:
                outputs[o.call_id] = o.text
            if not done:
                return reply(
                    call("workflow", {"name": "pair", "inputs": {"seed": 1}}, call_id="start"),
                    call("workflow", {"name": "pair", "inputs": {"seed": "x"}}, call_id="bad"),
                    call("workflow", {"name": "nope", "inputs": {}}, call_id="unknown"),
                )
            if len(done) == 3:
                return reply(call("list_workflows", {}, call_id="list"))
            return reply("ok")

        session = Session(ScriptedModel(step), text, turn=TurnContext("s", tmp_path))
        await session.run("start the pair workflow")
        assert outputs["start"].startswith("Started workflow 'pair' as wf-")
        assert "$.seed" in outputs["bad"]
        assert "Invalid arguments for workflow" in outputs["unknown"]
        workflow_id = outputs["start"].split(" as ")[1].split(" ")[0]
        assert workflow_id in outputs["list"]
        await engine.wait(workflow_id)
        show = text["show_workflow"]
        ctx = ToolContext(call_id="c", tool_name="show_workflow")
        shown = await show.invoke(show.params.model_validate({"workflow_id": workflow_id[:8]}), ctx)  # type: ignore[union-attr]
        assert not shown.is_error and "is succeeded" in shown.text()  # a unique prefix
        exact = await show.invoke(show.params.model_validate({"workflow_id": workflow_id}), ctx)  # type: ignore[union-attr]
        assert f"Workflow {workflow_id} (pair) is succeeded; 2 of 2" in exact.text()
        assert '- a: submitted, 1 of 3 submission(s); result: "a!"' in exact.text()
        cancel = text["cancel_workflow"]
        late = await cancel.invoke(
            cancel.params.model_validate({"workflow_id": workflow_id}),
            ctx,  # type: ignore[union-attr]
        )
        assert late.is_error and "already succeeded" in late.text()
        missing = await show.invoke(show.params.model_validate({"workflow_id": "wf-zz"}), ctx)  # type: ignore[union-attr]
        assert missing.is_error and "no workflow run" in missing.text()
        await engine.close()

    run_with(make_store, body)


def test_cancel_workflow_tool_stops_a_run(make_store: StoreFactory, tmp_path: Path) -> None:
    async def body(store: WorkflowStore) -> None:
        blocker = _BlockingModel()
        wf = Workflow("slow", [Task("a", "x", {"type": "string"})])
        engine = engine_for(store, lambda run: blocker, tmp_path, catalog=[wf])
        tools = {
            t.name: t for t in workflow_tools_source(engine).tools_for(TurnContext("s", tmp_path))
        }
        ctx = ToolContext(call_id="c", tool_name="t")
        started = await tools["workflow"].invoke({"name": "slow", "inputs": {}}, ctx)
        workflow_id = started.details["workflow_id"]
        await blocker.started.wait()
        cancel = tools["cancel_workflow"]
        done = await cancel.invoke(
            cancel.params.model_validate({"workflow_id": workflow_id, "reason": "stop"}),
            ctx,  # type: ignore[union-attr]
        )
        assert "stopped 1 running task(s)" in done.text()
        run = await engine.wait(workflow_id)
        assert run.state == "cancelled" and blocker.cancelled
        await engine.close()

    run_with(make_store, body)


def test_engine_refuses_bad_starts(make_store: StoreFactory) -> None:
    async def body(store: WorkflowStore) -> None:
        wf = Workflow(
            "w",
            [Task("a", "x", {"type": "string"})],
            inputs={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        )
        engine = engine_for(store, lambda run: ScriptedModel([]), catalog=[wf])
        with pytest.raises(WorkflowError, match="unknown workflow 'x'"):
            await engine.start("x", {})
        with pytest.raises(WorkflowInputError, match=r"\$: \"n\" is a required property"):
            await engine.start("w", {})
        with pytest.raises(LookupError):
            await engine.get("wf-none")
        assert isinstance(engine.executor, TaskExecutor)
        with pytest.raises(TypeError):
            engine.register("w")  # type: ignore[arg-type]

    run_with(make_store, body)


def test_a_task_claimed_elsewhere_is_not_run_twice(
    make_store: StoreFactory, tmp_path: Path
) -> None:
    """Two engines (workers) given the same task: the claim lets exactly one run it."""
    ran: list[str] = []

    def factory(run: TaskRun) -> Any:
        ran.append(run.session_id)
        return submitting(run, "once")

    async def body(store: WorkflowStore) -> None:
        wf = Workflow("w", [Task("a", "x", {"type": "string"})])
        first = engine_for(store, factory, tmp_path)
        second = engine_for(store, factory, tmp_path)
        from tooldeck.workflows.store import NewTask

        await store.create_workflow(
            "wf-shared", "w", {}, [NewTask("a", 0, "x", wf.tasks[0].schema.schema)]
        )
        await asyncio.gather(
            first.run_task("wf-shared:a"),
            second.run_task("wf-shared:a"),
            first.run_task("wf-shared:a"),
        )
        assert len(ran) == 1
        task = await store.get_task("wf-shared:a")
        assert task is not None and task.result == "once" and task.attempts == 1

    run_with(make_store, body)
