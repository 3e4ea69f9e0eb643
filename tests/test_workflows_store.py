"""The workflow store, the same tests against a real SQLite file and a real PostgreSQL:
migrations, transitions, exactly-once results under duplicates and races, rejections,
cancellation, and the constraints that hold even when the store's logic is bypassed."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from typing import Any

import pytest

from test_workflows_support import StoreFactory, raw_insert_result, raw_query
from tooldeck.workflows.store import (
    NewTask,
    PostgresStore,
    SQLiteStore,
    StoreError,
    WorkflowStore,
    open_store,
    redact_dsn,
)
from tooldeck.workflows.store.migrations import latest_version

pytest_plugins = ["test_workflows_support"]  # the store fixtures, both backends
SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer"}},
    "required": ["n"],
    "additionalProperties": False,
}


def _tasks(*names: str, max_attempts: int = 3) -> list[NewTask]:
    return [
        NewTask(name, i, f"do {name}", SCHEMA, max_attempts=max_attempts)
        for i, name in enumerate(names)
    ]


async def _new_run(store: WorkflowStore, *names: str, max_attempts: int = 3) -> str:
    workflow_id = f"wf-{uuid.uuid4().hex[:12]}"
    await store.create_workflow(
        workflow_id, "w", {"topic": "x"}, _tasks(*names, max_attempts=max_attempts)
    )
    await store.set_workflow_state(workflow_id, "running", expect=("pending",))
    return workflow_id


def test_migrations_create_the_tables_once_and_record_the_version(
    make_store: StoreFactory, store_kind: str
) -> None:

    async def main() -> None:
        async with make_store() as store:
            assert await store.schema_version() == latest_version(store_kind)
        async with make_store() as store:  # reopening applies nothing again
            assert await store.schema_version() == latest_version(store_kind)
            rows = raw_query(store, "SELECT version FROM schema_version")
            assert rows == [(v,) for v in range(1, latest_version(store_kind) + 1)]
        # Two stores opening a fresh database at the same moment: one migrates.
        stores = [make_store() for _ in range(3)]
        await asyncio.gather(*(s.open() for s in stores))
        for s in stores:
            await s.close()

    asyncio.run(main())


def test_both_stores_start_empty_on_a_fresh_database_at_the_same_time(
    make_store: StoreFactory,
) -> None:
    async def main() -> None:
        stores = [make_store() for _ in range(4)]
        await asyncio.gather(*(s.open() for s in stores))
        try:
            assert await stores[0].list_workflows() == []
        finally:
            for s in stores:
                await s.close()

    asyncio.run(main())


def test_storage_types_jsonb_in_postgres_wal_in_sqlite(make_store: StoreFactory) -> None:
    async def main() -> None:
        async with make_store() as store:
            workflow_id = await _new_run(store, "a")
            await store.claim_task(f"{workflow_id}:a", "s")
            await store.accept_result(f"{workflow_id}:a", {"n": 1}, submission_key="k")
            if isinstance(store, PostgresStore):
                kinds = raw_query(
                    store,
                    "SELECT pg_typeof(value)::text, pg_typeof(stored_at)::text FROM results",
                )
                assert kinds == [("jsonb", "timestamp with time zone")]
                types = raw_query(
                    store,
                    "SELECT pg_typeof(inputs)::text FROM workflows",
                )
                assert types == [("jsonb",)]
            else:
                assert raw_query(store, "PRAGMA journal_mode") == [("wal",)]
                assert raw_query(store, "SELECT value FROM results") == [('{"n":1}',)]

    asyncio.run(main())


def test_claims_and_transitions_are_recorded_with_timestamps(make_store: StoreFactory) -> None:
    async def main() -> None:
        async with make_store() as store:
            workflow_id = await _new_run(store, "a", "b")
            task_id = f"{workflow_id}:a"
            assert await store.claim_task(task_id, "session-1")
            assert not await store.claim_task(task_id, "session-2")  # one worker only
            task = await store.get_task(task_id)
            assert task is not None and task.state == "running"
            assert task.session_id == "session-1" and task.started_at is not None
            assert await store.set_task_state(
                task_id, "failed", expect=("running",), reason="broke"
            )
            assert not await store.set_task_state(task_id, "submitted", expect=("running",))
            history = await store.transitions(workflow_id, task_id)
            assert [(t.from_state, t.to_state) for t in history] == [
                (None, "pending"),
                ("pending", "running"),
                ("running", "failed"),
            ]
            assert history[-1].reason == "broke"
            assert [t.at for t in history] == sorted(t.at for t in history)
            every = await store.transitions(workflow_id)
            assert ("pending", "running") in [(t.from_state, t.to_state) for t in every]
            assert any(t.task_id is None and t.to_state == "running" for t in every)
            wf = await store.get_workflow(workflow_id)
            assert wf is not None and [t.name for t in wf.tasks] == ["a", "b"]
            assert wf.task("a").error == "broke" and wf.task("a").finished_at is not None

    asyncio.run(main())


def test_the_dependents_of_a_task_and_the_run_counts_as_scheduling_reads_them(
    make_store: StoreFactory,
) -> None:
    """What advancing reads after a task ended (not every task's row): a name's '_' is not
    a wildcard, a name that only starts like it is not a dependency."""

    async def main() -> None:
        async with make_store() as store:
            workflow_id = f"wf-{uuid.uuid4().hex[:12]}"
            deps = {"a_b": (), "axb": (), "a_bc": (), "c": ("a_b",), "d": ("axb", "a_bc")}
            deps["e"] = ("axb", "a_b")
            tasks = [
                NewTask(name, i, f"do {name}", SCHEMA, depends_on=after)
                for i, (name, after) in enumerate(deps.items())
            ]
            await store.create_workflow(workflow_id, "w", {}, tasks)
            await store.set_workflow_state(workflow_id, "running", expect=("pending",))
            found = await store.dependents(workflow_id, "a_b")
            assert found is not None and (found.name, found.state) == ("w", "running")
            assert (found.total, found.ended, found.submitted) == (6, 0, 0)
            assert found.finished_state == "pending"
            assert [(t.name, t.depends_on) for t in found.pending] == [
                ("c", ("a_b",)),
                ("e", ("axb", "a_b")),
            ]
            assert await store.claim_task(f"{workflow_id}:a_b", "s")
            await store.accept_result(f"{workflow_id}:a_b", {"n": 1}, submission_key="s:1")
            assert await store.claim_task(f"{workflow_id}:c", "s2")  # no longer pending
            found = await store.dependents(workflow_id, "a_b")
            assert found is not None and (found.ended, found.submitted) == (1, 1)
            assert found.finished_state == "submitted"
            assert [t.name for t in found.pending] == ["e"]
            assert await store.dependents("wf-none", "a_b") is None

    asyncio.run(main())


def test_a_result_is_stored_once_duplicates_and_conflicts_are_told_apart(
    make_store: StoreFactory,
) -> None:
    async def main() -> None:
        async with make_store() as store:
            workflow_id = await _new_run(store, "a")
            task_id = f"{workflow_id}:a"
            early = await store.accept_result(task_id, {"n": 0}, submission_key="k0")
            assert early.status == "not_running"  # not claimed yet: nothing stored
            await store.claim_task(task_id, "s")
            first = await store.accept_result(task_id, {"n": 1}, submission_key="k1")
            again = await store.accept_result(task_id, {"n": 1}, submission_key="k1")
            other = await store.accept_result(task_id, {"n": 2}, submission_key="k2")
            assert (first.status, again.status, other.status) == (
                "stored",
                "duplicate",
                "conflict",
            )
            assert again.value == {"n": 1} and other.value == {"n": 1}
            assert await store.count_results(task_id) == 1
            task = await store.get_task(task_id)
            assert task is not None and task.state == "submitted" and task.attempts == 1
            assert task.result == {"n": 1} and task.submission_key == "k1"
            with pytest.raises(StoreError):
                await store.accept_result(f"{workflow_id}:zz", {"n": 1}, submission_key="x")

    asyncio.run(main())


def test_the_database_itself_refuses_a_second_result(make_store: StoreFactory) -> None:
    async def main() -> tuple[WorkflowStore, str]:
        async with make_store() as store:
            workflow_id = await _new_run(store, "a")
            task_id = f"{workflow_id}:a"
            await store.claim_task(task_id, "s")
            assert (await store.accept_result(task_id, {"n": 1}, submission_key="k")).status == (
                "stored"
            )
        return store, task_id

    store, task_id = asyncio.run(main())
    with pytest.raises(Exception, match=r"(?i)unique|duplicate key"):
        raw_insert_result(store, task_id)


@pytest.mark.parametrize("same_submission", [False, True], ids=["racing_workers", "duplicates"])
def test_200_concurrent_submissions_store_exactly_one_result(
    make_store: StoreFactory, same_submission: bool
) -> None:
    """200 submissions at once, spread over 4 stores (4 connections / pools): one wins."""

    async def main() -> None:
        stores = [make_store() for _ in range(4)]
        for s in stores:
            await s.open()
        try:
            workflow_id = await _new_run(stores[0], "a")
            task_id = f"{workflow_id}:a"
            await stores[0].claim_task(task_id, "s")

            async def submit(i: int) -> Any:
                key = "same" if same_submission else f"worker-{i}"
                value = {"n": 7} if same_submission else {"n": i}
                return await stores[i % len(stores)].accept_result(
                    task_id, value, submission_key=key
                )

            outcomes = await asyncio.gather(*(submit(i) for i in range(200)))
            statuses = Counter(o.status for o in outcomes)
            assert statuses["stored"] == 1, statuses
            loser = "duplicate" if same_submission else "conflict"
            assert statuses[loser] == 199, statuses
            winner = next(o for o in outcomes if o.status == "stored")
            assert {o.value["n"] for o in outcomes} == {winner.value["n"]}
            assert await stores[1].count_results(task_id) == 1
            task = await stores[2].get_task(task_id)
            assert task is not None and task.state == "submitted" and task.attempts == 1
            assert task.result == winner.value
            moves = [t for t in await stores[3].transitions(workflow_id, task_id)]
            assert sum(t.to_state == "submitted" for t in moves) == 1
        finally:
            for s in stores:
                await s.close()

    asyncio.run(main())


def test_rejections_count_attempts_once_per_submission_and_fail_the_task_at_the_bound(
    make_store: StoreFactory,
) -> None:
    async def main() -> None:
        async with make_store() as store:
            workflow_id = await _new_run(store, "a", max_attempts=3)
            task_id = f"{workflow_id}:a"
            await store.claim_task(task_id, "s")
            first = await store.record_rejection(
                task_id, {"n": "x"}, ['$.n: "x" is not of type "integer"'], submission_key="k1"
            )
            repeat = await store.record_rejection(task_id, {"n": "x"}, ["..."], submission_key="k1")
            assert (first.status, first.attempt, first.failed) == ("recorded", 1, False)
            assert (repeat.status, repeat.attempt) == ("duplicate", 1)
            second = await store.record_rejection(
                task_id, "raw{", ["not JSON"], submission_key="k2", source="arguments"
            )
            assert (second.attempt, second.failed) == (2, False)
            third = await store.record_rejection(task_id, {}, ["$: missing n"], submission_key="k3")
            assert (third.attempt, third.failed, third.state) == (3, True, "failed")
            late = await store.record_rejection(task_id, {}, ["late"], submission_key="k4")
            assert late.status == "not_running" and late.failed
            accepted = await store.accept_result(task_id, {"n": 1}, submission_key="k5")
            assert accepted.status == "not_running"
            task = await store.get_task(task_id)
            assert task is not None and task.state == "failed" and task.attempts == 3
            assert task.error is not None and "no attempts left" in task.error
            rejections = await store.rejections(task_id)
            assert [(r.attempt, r.source) for r in rejections] == [
                (1, "control_plane"),
                (2, "arguments"),
                (3, "control_plane"),
            ]
            assert rejections[0].reasons == ('$.n: "x" is not of type "integer"',)
            assert rejections[0].value == {"n": "x"} and rejections[1].value == "raw{"

    asyncio.run(main())


def test_racing_identical_rejections_count_once(make_store: StoreFactory) -> None:
    async def main() -> None:
        stores = [make_store() for _ in range(3)]
        for s in stores:
            await s.open()
        try:
            workflow_id = await _new_run(stores[0], "a", max_attempts=50)
            task_id = f"{workflow_id}:a"
            await stores[0].claim_task(task_id, "s")
            outcomes = await asyncio.gather(
                *(
                    stores[i % 3].record_rejection(task_id, {}, ["bad"], submission_key="same")
                    for i in range(30)
                )
            )
            assert Counter(o.status for o in outcomes)["recorded"] == 1
            task = await stores[0].get_task(task_id)
            assert task is not None and task.attempts == 1
            assert len(await stores[0].rejections(task_id)) == 1
        finally:
            for s in stores:
                await s.close()

    asyncio.run(main())


def test_cancel_marks_the_run_and_every_unfinished_task(make_store: StoreFactory) -> None:
    async def main() -> None:
        async with make_store() as store:
            workflow_id = await _new_run(store, "a", "b", "c")
            await store.claim_task(f"{workflow_id}:a", "s")
            await store.claim_task(f"{workflow_id}:b", "s")
            await store.accept_result(f"{workflow_id}:b", {"n": 1}, submission_key="k")
            outcome = await store.cancel_workflow(workflow_id, "stop it")
            assert outcome.cancelled
            assert outcome.running == (f"{workflow_id}:a",)
            assert outcome.pending == (f"{workflow_id}:c",)
            again = await store.cancel_workflow(workflow_id, "again")
            assert not again.cancelled and again.state == "cancelled"
            late = await store.accept_result(f"{workflow_id}:a", {"n": 2}, submission_key="k2")
            assert late.status == "not_running"
            wf = await store.get_workflow(workflow_id)
            assert wf is not None and wf.state == "cancelled" and wf.error == "stop it"
            assert [t.state for t in wf.tasks] == ["cancelled", "submitted", "cancelled"]
            assert wf.results == {"b": {"n": 1}}
            with pytest.raises(StoreError):
                await store.cancel_workflow("wf-missing", "x")

    asyncio.run(main())


def test_listing_and_finding_runs(make_store: StoreFactory) -> None:
    async def main() -> None:
        async with make_store() as store:
            first = await _new_run(store, "a", "b")
            second = await _new_run(store, "a")
            await store.claim_task(f"{first}:a", "s")
            await store.accept_result(f"{first}:a", {"n": 1}, submission_key="k")
            runs = await store.list_workflows(limit=10)
            assert [r.id for r in runs] == [second, first]
            assert (runs[1].task_count, runs[1].submitted_count) == (2, 1)
            assert [r.id for r in await store.list_workflows(limit=1)] == [second]
            assert await store.list_workflows(state="failed") == []
            assert await store.find_workflows(first[:9]) in (
                [first],
                [second, first],
                [first, second],
            )
            assert await store.find_workflows(first) == [first]
            assert await store.find_workflows("%") == []
            assert await store.get_workflow("wf-nope") is None
            assert await store.get_task("wf-nope:a") is None

    asyncio.run(main())


def test_results_of_every_json_kind_round_trip(make_store: StoreFactory) -> None:
    values: list[Any] = [
        None,
        "text with 'quotes' and ünïcode",
        0,
        -3.25,
        True,
        [1, [2, {"a": None}]],
        {"nested": {"deep": ["x"]}},
    ]

    async def main() -> None:
        async with make_store() as store:
            workflow_id = await _new_run(store, *[f"t{i}" for i in range(len(values))])
            for i, value in enumerate(values):
                await store.claim_task(f"{workflow_id}:t{i}", "s")
                outcome = await store.accept_result(
                    f"{workflow_id}:t{i}", value, submission_key="k"
                )
                assert outcome.status == "stored"
            wf = await store.get_workflow(workflow_id)
            assert wf is not None
            assert [t.result for t in wf.tasks] == values
            assert all(t.has_result for t in wf.tasks)
            with pytest.raises(ValueError):
                await store.accept_result(f"{workflow_id}:t0", float("nan"), submission_key="n")

    asyncio.run(main())


def test_configuration_picks_the_store(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(open_store(db=tmp_path / "x.db", env={}), SQLiteStore)
    default = open_store(home=tmp_path, env={})
    assert isinstance(default, SQLiteStore)
    assert default.path == tmp_path / ".tooldeck" / "workflows.sqlite3"
    from_env = open_store(env={"TOOLDECK_WORKFLOWS_DSN": "postgresql://u:secret@h/db"})
    assert isinstance(from_env, PostgresStore) and from_env.schema == "tooldeck"
    assert "secret" not in from_env.location
    assert redact_dsn("host=h password=secret user=u") == "host=h password=*** user=u"
    pg = open_store(dsn="postgresql://h/db", schema="mine", env={})
    assert isinstance(pg, PostgresStore) and pg.schema == "mine"
    by_env_db = open_store(env={"TOOLDECK_WORKFLOWS_DB": str(tmp_path / "e.db")})
    assert isinstance(by_env_db, SQLiteStore) and by_env_db.path == tmp_path / "e.db"
    with pytest.raises(StoreError, match="not both"):
        open_store(db="x", dsn="y")
    with pytest.raises(StoreError, match="schema name"):
        PostgresStore("postgresql://h/db", schema="Bad-Name")


def test_a_closed_store_refuses_work_and_a_dead_server_is_reported(tmp_path: Any) -> None:
    async def main() -> None:
        store = SQLiteStore(tmp_path / "x.db")
        with pytest.raises(StoreError, match="not open"):
            await store.list_workflows()
        dead = PostgresStore("postgresql://postgres@127.0.0.1:1/test", connect_timeout=1)
        with pytest.raises(StoreError, match="cannot connect"):
            await dead.open()
        with pytest.raises(StoreError, match="not open"):
            await dead.list_workflows()

    asyncio.run(main())


def test_a_lost_turn_is_resumed_by_a_new_session_and_the_old_one_can_no_longer_finish(
    make_store: StoreFactory,
) -> None:
    async def main() -> None:
        async with make_store() as store:
            workflow_id = await _new_run(store, "a", "b")
            task_id = f"{workflow_id}:a"
            assert await store.resume_task(task_id, "s2", "lost") is None  # still pending
            assert await store.claim_task(task_id, "s1@w1")
            assert await store.task_owner(task_id) == ("running", "s1@w1")
            assert await store.resume_task(task_id, "s2@w2", "worker w1 was lost") == "s1@w1"
            assert await store.task_owner(task_id) == ("running", "s2@w2")
            # The old session can neither fail nor cancel the task any more.
            for to in ("failed", "cancelled"):
                assert not await store.set_task_state(
                    task_id, to, expect=("running",), reason="zombie", owner="s1@w1"
                )
            assert await store.accept_result(task_id, {"ok": True}, submission_key="s2@w2:c1")
            assert await store.resume_task(task_id, "s3", "late") is None  # submitted
            assert await store.task_owner(f"{workflow_id}:nope") is None
            history = [
                (t.from_state, t.to_state, t.reason)
                for t in await store.transitions(workflow_id, task_id)
            ]
            assert history[1:] == [
                ("pending", "running", "claimed by s1@w1"),
                ("running", "running", "worker w1 was lost; resumed by s2@w2 (was s1@w1)"),
                ("running", "submitted", "result s2@w2:c1"),
            ]
            assert await store.count_results(task_id) == 1

    asyncio.run(main())


def test_worker_leases_register_renew_and_expire_once(make_store: StoreFactory) -> None:
    from tooldeck.workflows.store.workers import WorkerLeases

    async def main() -> None:
        async with make_store() as store:
            leases = WorkerLeases(store)
            await leases.register("w1", "host-a", 101)
            await leases.register("w2", "host-b", 202)
            assert await leases.heartbeat("w1")
            assert await leases.take_over_lost("w2", lease=60) == []  # w1 is fresh
            await asyncio.sleep(0.3)
            assert await leases.heartbeat("w2")
            # w1 has been silent for 0.3 s: with a 0.2 s lease, w2 takes it over, once.
            results = await asyncio.gather(
                leases.take_over_lost("w2", lease=0.2), leases.take_over_lost("w2", lease=0.2)
            )
            assert sorted(results) == [[], ["w1"]]
            assert not await leases.heartbeat("w1")  # w1 learns it was taken over
            workers = {w.id: w for w in await leases.list()}
            assert workers["w1"].state == "lost"
            assert "taken over by w2" in (workers["w1"].note or "")
            assert workers["w2"].state == "alive" and workers["w2"].pid == 202
            await leases.stop("w2", "done")
            await leases.register("w1", "host-a", 303)  # restarted under the same id
            workers = {w.id: w for w in await leases.list()}
            assert workers["w1"].state == "alive" and workers["w1"].pid == 303
            assert workers["w2"].state == "stopped" and workers["w2"].ended_at is not None

    asyncio.run(main())
