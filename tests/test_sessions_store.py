"""Stored sessions (issue 34, item 2), on a real SQLite file and a real PostgreSQL, with
real processes: a later process resumes a conversation by id; two processes never
interleave steps of one session (a lease, and a revision checked on every save); a
process killed with SIGKILL in the middle of a turn leaves a conversation that goes on
with exactly one output per call; a waiting approval is resumed in another process;
``tooldeck sessions list|show|delete``."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from test_workflows_support import PG_DSN
from tooldeck import Session, tool
from tooldeck.session_state import UNRECORDED
from tooldeck.sessions import SessionBusy, SessionConflict, SessionStore
from tooldeck.testing import ScriptedModel, call, reply
from tooldeck.transcript import AssistantMessage, Item, ToolOutput, UserMessage
from tooldeck.workflows.store import PostgresStore

pytest_plugins = ["test_workflows_support"]  # the store fixtures, both backends

SCRIPT = Path(__file__).parent / "session_scripts" / "turn.py"
ROOT = Path(__file__).resolve().parents[1]


class Where:
    """One store of a test: its kind, its place, and how to open it here."""

    def __init__(self, kind: str, tmp_path: Path, schema: str) -> None:
        self.kind, self.schema = kind, schema
        self.where = PG_DSN if kind == "postgres" else str(tmp_path / "sessions.sqlite3")

    def store(self, **options: Any) -> SessionStore:
        db = PostgresStore(self.where, schema=self.schema) if self.kind == "postgres" else None
        return SessionStore(db or self.where, **options)

    def args(self, session_id: str, action: str, prompt: str, folder: Path) -> list[str]:
        return [
            sys.executable,
            str(SCRIPT),
            self.kind,
            self.where,
            self.schema,
            session_id,
            action,
            prompt,
            str(folder),
        ]


@pytest.fixture
def where(store_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Where:
    schema = request.getfixturevalue("pg_schema") if store_kind == "postgres" else ""
    return Where(store_kind, tmp_path, schema)


def turn(where: Where, session_id: str, prompt: str, folder: Path, action: str = "run") -> Any:
    done = subprocess.run(
        where.args(session_id, action, prompt, folder),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=folder,
    )
    if done.returncode != 0:
        return done
    return json.loads(done.stdout)


def stored(where: Where, session_id: str) -> list[Item]:
    async def main() -> list[Item]:
        async with where.store() as store:
            found = await store.show(session_id)
            assert found is not None
            return found[1]

    return asyncio.run(main())


def one_output_per_call(items: list[Item]) -> None:
    asked = [c.call_id for m in items if isinstance(m, AssistantMessage) for c in m.tool_calls]
    answered = [o.call_id for o in items if isinstance(o, ToolOutput)]
    assert sorted(asked) == sorted(answered) and len(set(answered)) == len(answered)


def wait_for(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 60
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_a_later_process_resumes_the_conversation_by_id(where: Where, tmp_path: Path) -> None:
    first = turn(where, "chat-1", "add 2 and 3", tmp_path)
    assert first == {"output": "done: 5", "stop": "end_turn", "waiting": False, "items": 4}
    second = turn(where, "chat-1", "and now?", tmp_path)  # a new process: sees all 4 + 1
    assert second["output"] == "seen 5 items" and second["items"] == 6
    items = stored(where, "chat-1")
    assert [type(i).__name__ for i in items] == [
        "UserMessage",
        "AssistantMessage",
        "ToolOutput",
        "AssistantMessage",
        "UserMessage",
        "AssistantMessage",
    ]
    one_output_per_call(items)


def test_two_processes_never_run_turns_of_one_session_at_once(where: Where, tmp_path: Path) -> None:
    holder = subprocess.Popen(
        where.args("shared", "run", "block here", tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        wait_for(lambda: (tmp_path / "started").exists(), "the first turn's tool")
        refused = turn(where, "shared", "hello", tmp_path)
        assert isinstance(refused, subprocess.CompletedProcess) and refused.returncode == 2
        line = refused.stderr.strip()
        assert "\n" not in line and line.startswith("error: session shared is running a turn in")
        assert f":{holder.pid}:" in line
        (tmp_path / "go").write_text("go")
        out, err = holder.communicate(timeout=60)
        assert json.loads(out)["output"] == "done: went", err
    finally:
        holder.kill()
        holder.wait()
    after = turn(where, "shared", "hello", tmp_path)
    assert after["output"] == "seen 5 items"  # the first turn's 4 items, then this prompt
    one_output_per_call(stored(where, "shared"))


def test_kill_9_mid_turn_leaves_one_output_per_call(where: Where, tmp_path: Path) -> None:
    victim = subprocess.Popen(
        where.args("killed", "run", "block here", tmp_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=tmp_path,
    )
    wait_for(lambda: (tmp_path / "started").exists(), "the turn's tool to start")
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()
    # at once (the holder's process is gone from this machine): the call gets its output
    after = turn(where, "killed", "what happened?", tmp_path)
    assert after["output"] == "seen 4 items", after
    items = stored(where, "killed")
    one_output_per_call(items)
    lost = [i for i in items if isinstance(i, ToolOutput)]
    assert len(lost) == 1 and lost[0].is_error and lost[0].text == UNRECORDED
    assert isinstance(items[3], UserMessage) and items[3].text == "what happened?"


def test_a_waiting_approval_is_resumed_in_another_process(where: Where, tmp_path: Path) -> None:
    waiting = turn(where, "approve-me", "launch it", tmp_path)
    assert waiting["waiting"] is True and waiting["stop"] == "tool_calls"
    refused = turn(where, "approve-me", "hello", tmp_path)
    assert refused.returncode == 2 and "waiting for approval" in refused.stderr
    done = turn(where, "approve-me", "", tmp_path, action="resume")
    assert done["output"] == "done: launched" and done["waiting"] is False
    again = turn(where, "approve-me", "", tmp_path, action="resume")
    assert again.returncode == 2 and "no step waiting for approval" in again.stderr
    one_output_per_call(stored(where, "approve-me"))


def test_a_lease_that_ran_out_is_taken_and_the_old_holder_writes_nothing(
    where: Where,
) -> None:
    release = asyncio.Event()

    @tool(read_only=True)
    async def slow() -> str:
        """Wait."""
        await release.wait()
        return "slow done"

    def model() -> ScriptedModel:
        def script(request: Any) -> AssistantMessage:
            last = request.transcript[-1]
            if isinstance(last, UserMessage) and last.text == "slow":
                return reply(call("slow"))
            return reply(f"seen {len(request.transcript)}")

        return ScriptedModel(script)

    async def main() -> None:
        async with where.store(lease=0.5) as store:
            first = Session(model(), [slow], store=store, session_id="leased")
            running = asyncio.create_task(first.run("slow"))
            await asyncio.sleep(0.2)
            second = Session(model(), [slow], store=store, session_id="leased")
            with pytest.raises(SessionBusy, match="is running a turn in"):
                await second.run("too soon")
            await asyncio.sleep(0.5)  # the first turn's lease runs out (it saved nothing)
            taken = await second.run("now")
            assert taken.output == "seen 4"  # the first turn's call got its output
            release.set()
            with pytest.raises(SessionConflict, match="changed by another process"):
                await running
            found = await store.show("leased")
            assert found is not None
            items = found[1]
            assert [i.text for i in items if isinstance(i, UserMessage)] == ["slow", "now"]
            one_output_per_call(items)
            assert not any(isinstance(i, ToolOutput) and i.text == "slow done" for i in items)

    asyncio.run(main())


def test_a_bad_session_id_is_refused_before_anything_is_written(where: Where) -> None:
    async def main() -> None:
        async with where.store() as store:
            session = Session(ScriptedModel([reply("hi")]), store=store, session_id="../x")
            with pytest.raises(ValueError, match="cannot name a file"):
                await session.run("hi")
            assert await store.sessions() == []

    asyncio.run(main())


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tooldeck", "sessions", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
    )


def test_the_sessions_command_lists_shows_and_deletes(tmp_path: Path) -> None:
    where = Where("sqlite", tmp_path, "")
    turn(where, "cli-1", "add 2 and 3", tmp_path)
    db = ["--db", where.where]
    listed = cli("list", *db)
    assert listed.returncode == 0, listed.stderr
    assert "cli-1" in listed.stdout and "add 2 and 3" in listed.stdout and "idle" in listed.stdout
    shown = cli("show", "cli-1", *db)
    assert shown.returncode == 0, shown.stderr
    assert "user: add 2 and 3" in shown.stdout and "output add: 5" in shown.stdout
    missing = cli("show", "nope", *db)
    assert missing.returncode == 1 and missing.stderr.startswith("error: no stored session")
    assert cli("delete", "cli-1", *db).returncode == 0
    assert "No stored sessions." in cli("list", *db).stdout
    # a read never creates a database
    home = tmp_path / "home"
    home.mkdir()
    empty = cli("list", env={"HOME": str(home), "TOOLDECK_WORKFLOWS_DB": ""})
    assert empty.returncode == 0 and "no database yet" in empty.stdout
    assert list(home.iterdir()) == []


def test_a_session_budget_holds_across_session_objects(where: Where) -> None:
    from tooldeck import Budget, StopReason

    async def main() -> None:
        async with where.store() as store:
            for expected in ("one", "two"):
                model = ScriptedModel([reply(expected)])
                session = Session(model, store=store, session_id="b", budget=Budget(requests=2))
                assert (await session.run("go")).output == expected
            third = Session(ScriptedModel([reply("three")]), store=store, session_id="b")
            result = await third.run("go", budget=None)
            assert result.output == "three"  # no budget on this object
            limited = Session(
                ScriptedModel([reply("four")]),
                store=store,
                session_id="b",
                budget=Budget(requests=3),
            )
            stopped = await limited.run("go")
            assert stopped.stop_reason is StopReason.BUDGET
            assert stopped.reason == "budget: the session's requests limit (3) reached: 3"

    asyncio.run(main())


def test_approve_always_grants_kept_in_memory_are_stored_with_the_session(
    where: Where,
) -> None:
    from tooldeck import Protection
    from tooldeck.approvals import ApprovalAnswer, ApprovalRequest
    from tooldeck.policy import SessionPolicy
    from tooldeck.policy.session import approve_always

    wrote: list[str] = []

    @tool
    def note(text: str) -> str:
        """Write a note (a WRITE tool: asked before it runs)."""
        wrote.append(text)
        return "noted"

    async def always(requests: Any) -> list[ApprovalAnswer]:
        return [approve_always() for _ in requests]

    async def nobody(requests: list[ApprovalRequest]) -> list[ApprovalAnswer]:
        raise AssertionError(f"asked again: {[r.call.name for r in requests]}")

    def session(store: SessionStore, approver: Any, text: str) -> Session:
        policy = SessionPolicy(session_id="granted")  # its grants in memory only
        model = ScriptedModel([reply(call("note", {"text": text})), reply("ok")])
        protect = Protection.policy(policy, approver=policy.approver(approver))
        return Session(model, [note], store=store, session_id="granted", protect=protect)

    async def main() -> None:
        async with where.store() as store:
            first = await session(store, always, "one").run("note one")
            assert first.output == "ok"
            later = session(store, nobody, "two")  # another process: a fresh policy
            assert (await later.run("note two")).output == "ok"
            judge = later.protect.judges[0] if later.protect else None
            assert isinstance(judge, SessionPolicy)
            assert [g.tool for g in judge.grants] == ["note"]
        assert wrote == ["one", "two"]

    asyncio.run(main())


def test_the_one_turn_functions_continue_a_stored_conversation(where: Where) -> None:
    import tooldeck

    async def main() -> None:
        async with where.store() as store:
            for prompt in ("first", "second"):
                model = ScriptedModel(lambda r: reply(f"sent {len(r.transcript)}"))
                result = await tooldeck.run(model, [], prompt, store=store, session_id="one")
            assert result.output == "sent 3"

    asyncio.run(main())


def test_a_stored_item_that_is_not_what_a_session_writes_is_one_line(where: Where) -> None:
    from test_workflows_support import raw_execute
    from tooldeck.workflows.store import StoreError

    async def main() -> None:
        async with where.store() as store:
            await Session(ScriptedModel([reply("hi")]), store=store, session_id="bad").run("x")
            bad = '{"type": "tool_output", "call_id": 7}'
            if where.kind == "postgres":
                raw_execute(
                    store.db,
                    f"UPDATE agent_session_items SET item = '{bad}'::jsonb WHERE position = 1",
                )
            else:
                import sqlite3

                with sqlite3.connect(where.where) as conn:
                    conn.execute(
                        "UPDATE agent_session_items SET item = ? WHERE position = 1", (bad,)
                    )
            again = Session(ScriptedModel([reply("never")]), store=store, session_id="bad")
            with pytest.raises(StoreError, match="stored session bad cannot be read") as raised:
                await again.run("y")
            assert "\n" not in str(raised.value)
            infos = await store.sessions()
            assert infos[0].running is None  # the lease was given back

    asyncio.run(main())


def test_a_cancelled_turn_is_saved_with_one_output_per_call_and_released(
    where: Where,
) -> None:
    started = asyncio.Event()

    @tool(read_only=True)
    async def hang() -> str:
        """Never ends."""
        started.set()
        await asyncio.Event().wait()
        return "never"

    async def main() -> None:
        async with where.store() as store:
            model = ScriptedModel([reply(call("hang"))])
            session = Session(model, [hang], store=store, session_id="cancelled")
            stream = session.stream("hang")

            async def consume() -> None:
                async for _ in stream:
                    pass

            task = asyncio.create_task(consume())
            await started.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            found = await store.show("cancelled")
            assert found is not None
            info, items = found
            assert info.running is None
            one_output_per_call(items)
            assert "cancelled" in items[-1].text  # type: ignore[union-attr]
            later = Session(ScriptedModel([reply("fine")]), store=store, session_id="cancelled")
            assert (await later.run("again")).output == "fine"

    asyncio.run(main())
