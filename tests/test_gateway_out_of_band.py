"""Out-of-band approvals at the gateway: a call waits while ``tooldeck approve`` answers.

A real ``tooldeck serve`` (stdio, and HTTP) in front of tests/mcp_servers/basic.py and
the real PyPI mcp-server-git, reached with the official MCP client SDK; the gateway runs
with ``--approvals out-of-band``, so an ask becomes a pending-approval file that a real
``tooldeck approve`` subprocess answers, as a person in another terminal would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import typing
from pathlib import Path
from typing import Any

import anyio
import pytest
from typer.testing import CliRunner

from gateway_client import (
    ALLOW_ALL,
    PY,
    Call,
    answered_out_of_band,
    approve,
    gateway,
    http_client,
    pending_file,
    result_of,
    served_gateway,
    stdio,
    text_of,
    write_config,
    write_policy,
)
from tooldeck.cli import app
from tooldeck.gateway.out_of_band import WATCHED_SECONDS
from tooldeck.policy import AuditLog

WHO = "tooldeck approve (out of band)"
OOB = ("--approvals", "out-of-band")  # else a client without elicitation is denied at once
# the approval timeout a test waits out: long enough for a `tooldeck approve` started when
# the call began waiting to have read its file first, even on a busy machine
LATE = 6


def _audit(state: Path) -> list[dict[str, Any]]:
    return [e for p in sorted(state.glob("*.audit.jsonl")) for e in AuditLog.read(p)]


def _evidence(state: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for p in state.glob("*.calls.jsonl") for line in p.open()]


def test_a_waiting_call_is_approved_by_tooldeck_approve(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    state = tmp_path / "s"
    log = tmp_path / "gateway.err"
    progress: list[str] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    async def main() -> None:
        with log.open("w") as errlog:
            async with (
                gateway(config, state, *OOB, "--core", "*", errlog=errlog) as c,
                anyio.create_task_group() as tg,
            ):
                call = Call()
                args = {"text": "approved out of band"}
                tg.start_soon(
                    lambda: call.run(c, "alpha__echo", args, progress_callback=on_progress)
                )
                path = await pending_file(state)
                assert not call.done.is_set()  # it waits for a person
                elsewhere = str(tmp_path / "answers.json")
                astray = await anyio.to_thread.run_sync(approve, path, "y\n", "-o", elsewhere)
                assert astray.returncode == 2 and "leave out --answers" in astray.stderr
                answered = await anyio.to_thread.run_sync(approve, path, "y\n")
                assert answered.returncode == 0, answered.stderr
                assert "1 approved, 0 denied" in answered.stdout
                assert "tooldeck serve" in answered.stdout  # it says who waits
                result = await call.get()
                assert not result.is_error and text_of(result) == "approved out of band"
                assert list((state / "approvals").iterdir()) == []  # both files taken

    anyio.run(main)
    lines = [line for line in log.read_text().splitlines() if "tooldeck approve" in line]
    assert len(lines) == 1 and "alpha__echo needs approval" in lines[0]
    assert lines[0].endswith(".pending.json")  # the command to run, whole
    assert any("waiting for approval: tooldeck approve" in m for m in progress)
    approvals = [e for e in _audit(state) if e["level"] == "approval"]
    assert [(e["decision"], e["approved_by"]) for e in approvals] == [("approve", WHO)]
    assert [c["tool"] for c in _evidence(state)] == ["alpha__echo"]


def test_a_denial_reaches_the_model_with_the_approvers_message(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    state = tmp_path / "s"

    async def main() -> None:
        async with gateway(config, state, *OOB, "--core", "*") as c:
            typed = "n\nuse the staging copy\n"
            result, _ = await answered_out_of_band(c, state, "alpha__echo", {"text": "x"}, typed)
            assert result.is_error and "use the staging copy" in text_of(result)

    anyio.run(main)
    denied = [e for e in _audit(state) if e["level"] == "approval"]
    assert [(e["decision"], e["denied_by"]) for e in denied] == [("deny", WHO)]
    assert _evidence(state) == []  # it never ran


def test_edited_arguments_are_judged_again(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    policy = write_policy(
        tmp_path,
        '[profile]\n[[profile.rules]]\ntools = "alpha__echo"\naction = "deny"\n'
        'args = { text = { equals = "forbidden" } }\nreason = "not that text"\n',
    )
    state = tmp_path / "s"

    async def main() -> None:
        args = ("--core", "*", "--policy", str(policy))
        async with gateway(config, state, *OOB, *args) as c, anyio.create_task_group() as tg:
            first = Call()
            tg.start_soon(first.run, c, "alpha__echo", {"text": "draft"})
            path = await pending_file(state)
            edited = await anyio.to_thread.run_sync(approve, path, 'e\n{"text": "edited"}\n')
            assert edited.returncode == 0, edited.stderr
            assert text_of(await first.get()) == "edited"
            second = Call()
            tg.start_soon(second.run, c, "alpha__echo", {"text": "draft"})
            path = await pending_file(state, {path})
            sneaky = await anyio.to_thread.run_sync(approve, path, 'e\n{"text": "forbidden"}\n')
            assert sneaky.returncode == 0
            result = await second.get()
            assert result.is_error and "not that text" in text_of(result)

    anyio.run(main)
    assert [c["tool"] for c in _evidence(state)] == ["alpha__echo"]  # the edit only
    decisions = [
        (e["decision"], e.get("edited")) for e in _audit(state) if e["level"] == "approval"
    ]
    assert decisions == [("edit", None), ("deny", True)]


def test_no_answer_in_time_is_a_deny_and_a_late_answer_is_refused(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    state = tmp_path / "s"

    async def main() -> None:
        args = ("--core", "*", "--approval-timeout", str(LATE))
        async with gateway(config, state, *OOB, *args) as c, anyio.create_task_group() as tg:
            call = Call()
            tg.start_soon(call.run, c, "alpha__echo", {"text": "late"})
            path = await pending_file(state)
            # the approver opens the file in time, but answers after the call gave up
            async with await anyio.open_process(
                [PY, "-m", "tooldeck.cli", "approve", str(path)]
            ) as slow:
                assert slow.stdin and slow.stdout and slow.stderr
                shown = b""
                with anyio.fail_after(60):
                    while b"Approve alpha__echo" not in shown:  # it has read the file
                        shown += await slow.stdout.receive()
                result = await call.get()
                assert result.is_error
                # what happened, not "Denied by the user": nobody answered
                assert text_of(result).startswith(
                    f"Denied: nobody approved the call within {LATE} s"
                )
                assert "tooldeck approve" in text_of(result)  # what a person can do
                assert not path.exists()
                await slow.stdin.send(b"y\n")
                await slow.stdin.aclose()
                with anyio.fail_after(60):
                    err = (await slow.stderr.receive(65536)).decode()
                    assert await slow.wait() == 2
            assert "stopped waiting" in err and len(err.strip().splitlines()) == 1
            assert not path.with_name(path.name.replace("pending", "answers")).exists()
            gone = await anyio.to_thread.run_sync(approve, path, "y\n")
            assert gone.returncode == 2 and "does not exist" in gone.stderr

    anyio.run(main)
    approvals = [e for e in _audit(state) if e["level"] == "approval"]
    assert [(e["decision"], e.get("denied_by")) for e in approvals] == [("deny", None)]
    assert f"within {LATE} s" in approvals[0]["reason"]
    assert _evidence(state) == []


def test_dangerous_never_runs_without_a_human(tmp_path: Path) -> None:
    """A DANGEROUS tool (policy file) with a rule allowing everything: it still asks; with
    nobody to ask, or nobody answering, or an answer that is not an approval, it never runs;
    approve-always for it approves that one call only."""
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    policy = write_policy(tmp_path, 'dangerous = ["alpha__wipe"]\n' + ALLOW_ALL)
    state = tmp_path / "s"

    async def main() -> None:
        base = ("--core", "*", "--policy", str(policy))
        async with gateway(config, tmp_path / "nobody", *base, "--approvals", "deny") as c:
            denied = await c.call_tool("alpha__wipe", {})
            assert denied.is_error and "--approvals deny" in text_of(denied)
        async with gateway(config, state, *OOB, *base) as c, anyio.create_task_group() as tg:
            # a forged answers file: "approved": "yes" is not an explicit true
            call = Call()
            tg.start_soon(call.run, c, "alpha__wipe", {})
            path = await pending_file(state)
            data = json.loads(path.read_text())
            call_id = data["step"]["calls"][0]["call_id"]
            assert data["step"]["calls"][0]["tier"] == "DANGEROUS"
            path.with_name(f"{data['session_id']}.answers.json").write_text(
                json.dumps(
                    {
                        "format": "tooldeck.answers/1",
                        "session_id": data["session_id"],
                        "answers": {call_id: {"approved": "yes"}},
                    }
                )
            )
            assert (await call.get()).is_error
            # 'a' (always) is not offered for DANGEROUS: the prompt asks again, then y
            for typed in ("a\ny\n", "y\n"):
                wiped, answered = await answered_out_of_band(c, state, "alpha__wipe", {}, typed)
                assert result_of(wiped) == "wiped"
                assert ("one call at a time" in answered.stdout) == typed.startswith("a")

    anyio.run(main)
    wipes = [c for c in _evidence(state) if c["tool"] == "alpha__wipe"]
    assert len(wipes) == 2  # the two approved calls, not the forged one
    assert not any(e["decision"] == "approve-always" for e in _audit(state))
    assert not list((tmp_path / "nobody").glob("*.calls.jsonl"))


def test_approve_always_holds_for_the_rest_of_the_session(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    state = tmp_path / "s"

    async def main() -> None:
        async with gateway(config, state, *OOB, "--core", "*") as c:
            one, _ = await answered_out_of_band(c, state, "alpha__echo", {"text": "one"}, "a\n\n")
            assert text_of(one) == "one"
            with anyio.fail_after(30):  # no file, no wait: the grant answers
                assert text_of(await c.call_tool("alpha__echo", {"text": "two"})) == "two"

    anyio.run(main)
    assert [e["tool"] for e in _audit(state) if e["decision"] == "approve-always"] == [
        "alpha__echo"
    ]


def _gateway_pid(path: Path) -> int:
    by = json.loads(path.read_text())["waiter"]["by"]
    return int(by.rsplit("pid ", 1)[1].rstrip(")"))


def _exited(pid: int) -> None:
    """Wait (bounded) until process ``pid`` (a child of this one) has exited."""
    stat = Path(f"/proc/{pid}/stat")
    deadline = time.monotonic() + 30
    while stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z":
        assert time.monotonic() < deadline, f"the gateway (pid {pid}) did not stop"
        time.sleep(0.05)


async def _stopped_while_waiting(c: Any, state: Path) -> None:
    async with anyio.create_task_group() as tg:
        call = Call()
        tg.start_soon(call.run, c, "alpha__echo", {"text": "x"})
        path = await pending_file(state)
        pid = _gateway_pid(path)
        os.kill(pid, signal.SIGTERM)
        result = await call.get()
        assert result.is_error
        assert text_of(result).startswith("Denied: the gateway is shutting down")
        assert not path.exists()
        await anyio.to_thread.run_sync(_exited, pid)  # and then it stops, by itself


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_gateway_stopped_while_a_call_waits_answers_it_first(
    tmp_path: Path, transport: str
) -> None:
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    state = tmp_path / "s"

    async def over_stdio() -> None:
        async with gateway(config, state, *OOB, "--core", "*") as c:
            await _stopped_while_waiting(c, state)

    async def over_http(url: str) -> None:
        async with http_client(url) as c:
            await _stopped_while_waiting(c, state)

    if transport == "stdio":
        anyio.run(over_stdio)
    else:
        with served_gateway(config, state, *OOB, "--core", "*") as url:
            anyio.run(over_http, url)
    approvals = [e for e in _audit(state) if e["level"] == "approval"]
    assert [(e["decision"], e.get("denied_by")) for e in approvals] == [("deny", None)]
    assert "shutting down" in approvals[0]["reason"]


def test_a_cancelled_call_stops_waiting(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    policy = write_policy(
        tmp_path, '[profile]\n[[profile.rules]]\ntools = "alpha__add"\naction = "allow"\n'
    )
    state = tmp_path / "s"

    async def main() -> None:
        async with gateway(config, state, *OOB, "--core", "*", "--policy", str(policy)) as c:
            async with anyio.create_task_group() as tg:
                tg.start_soon(c.call_tool, "alpha__echo", {"text": "x"})
                path = await pending_file(state)
                tg.cancel_scope.cancel()  # the SDK client sends notifications/cancelled
            with anyio.fail_after(30):
                while path.exists():  # noqa: ASYNC110 - another process removes it
                    await anyio.sleep(0.05)
            # the session goes on
            assert result_of(await c.call_tool("alpha__add", {"a": 1, "b": 2})) == 3

    anyio.run(main)
    approvals = [e for e in _audit(state) if e["level"] == "approval"]
    assert [e["decision"] for e in approvals] == ["deny"]
    assert "cancelled" in approvals[0]["reason"]


def test_an_http_client_without_elicitation_waits_for_tooldeck_approve(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    state = tmp_path / "s"

    async def main(url: str) -> None:
        async with http_client(url) as a, http_client(url) as b, anyio.create_task_group() as tg:
            first, second = Call(), Call()
            tg.start_soon(
                first.run, a, "call_tool", {"name": "alpha__echo", "arguments": {"text": "a"}}
            )
            path_a = await pending_file(state)
            tg.start_soon(second.run, b, "alpha__echo", {"text": "b"})
            path_b = await pending_file(state, {path_a})
            # each call its own file: B's answer does not touch A's wait
            assert (await anyio.to_thread.run_sync(approve, path_b, "n\n")).returncode == 0
            assert (await second.get()).is_error and not first.done.is_set()
            assert (await anyio.to_thread.run_sync(approve, path_a, "y\n")).returncode == 0
            assert text_of(await first.get()) == "a"

    with served_gateway(config, state, *OOB) as url:
        anyio.run(main, url)
    by_session: dict[str, list[str]] = {}
    for e in _audit(state):
        if e["level"] == "approval":
            by_session.setdefault(e["session_id"], []).append(e["decision"])
    assert sorted(by_session.values()) == [["approve"], ["deny"]]


def test_auto_waits_for_a_watching_approver_and_only_while_one_watches(tmp_path: Path) -> None:
    """--approvals auto, a client without elicitation: denied at once while nobody watches
    (the denial says how to watch), waiting for the person at tooldeck approve --watch
    while one does; a second watcher is refused; stopped, nobody watches again."""
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    state = tmp_path / "s"
    watch = [PY, "-m", "tooldeck.cli", "approve", "--watch", str(state)]

    async def main() -> None:
        async with gateway(config, state, "--core", "*") as c, anyio.create_task_group() as tg:
            nobody = await c.call_tool("alpha__echo", {"text": "x"})
            assert nobody.is_error and f"tooldeck approve --watch {state}" in text_of(nobody)
            watcher = await anyio.open_process(watch)
            try:
                assert watcher.stdin and watcher.stdout
                shown = b""

                async def until(text: bytes) -> None:
                    nonlocal shown
                    with anyio.fail_after(60):
                        while text not in shown:
                            assert watcher.stdout
                            shown += await watcher.stdout.receive()

                await until(b"Watching ")
                await anyio.sleep(WATCHED_SECONDS)  # the gateway looks once per this
                call = Call()
                tg.start_soon(call.run, c, "alpha__echo", {"text": "watched"})
                await until(b"Approve alpha__echo")
                await watcher.stdin.send(b"y\n")
                assert text_of(await call.get()) == "watched"
                second = await anyio.to_thread.run_sync(
                    lambda: subprocess.run(watch, capture_output=True, text=True, timeout=60)
                )
                assert second.returncode == 2, second.stderr
                assert "another tooldeck approve --watch watches" in second.stderr
                watcher.send_signal(signal.SIGINT)
                with anyio.fail_after(60):
                    assert await watcher.wait() == 0
            finally:  # a failure above must not leave the test waiting for the watcher
                if watcher.returncode is None:
                    watcher.kill()
                with anyio.CancelScope(shield=True):
                    await watcher.aclose()
            await anyio.sleep(WATCHED_SECONDS)
            again = await c.call_tool("alpha__echo", {"text": "y"})
            assert again.is_error and "nobody can approve it here" in text_of(again)

    anyio.run(main)
    approvals = [e for e in _audit(state) if e["level"] == "approval"]
    assert [(e["decision"], e.get("approved_by")) for e in approvals] == [
        ("deny", None),
        ("approve", WHO),
        ("deny", None),
    ]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--watch", "{t}", "{t}/x.pending.json"], "leave out FILE and --answers"),
        ([], "give FILE, a waiting run's <session>.pending.json, or --watch STATE"),
        (["--watch", "{t}/nowhere"], "approvals does not exist; give --watch the --state"),
    ],
)
def test_approve_watch_mistakes_are_one_line(tmp_path: Path, args: list[str], said: str) -> None:
    out = CliRunner().invoke(app, ["approve", *(a.format(t=tmp_path) for a in args)])
    assert out.exit_code == 2 and said in out.stderr, out.output
    assert len(out.stderr.strip().splitlines()) == 1


def test_out_of_band_needs_a_private_state_folder(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    state = tmp_path / "s"
    (state / "approvals").mkdir(parents=True)
    (state / "approvals").chmod(0o777)
    out = CliRunner().invoke(
        app,
        ["serve", "--mcp", str(config), "--state", str(state), "--approvals", "out-of-band"],
    )
    assert out.exit_code == 2
    assert "other users" in out.stderr and "chmod 700" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_the_approvals_choices_are_the_gateways() -> None:
    from tooldeck.cli.serve import Approvals
    from tooldeck.gateway.approval import MODES

    assert typing.get_args(Approvals) == MODES


def test_the_desk_keeps_nothing_of_an_ask_that_ended(tmp_path: Path) -> None:
    """A long-running gateway asks many times: each ask, answered or timed out, leaves
    neither files nor memory behind (the pending file's identity it remembered is
    dropped with the file)."""
    from tooldeck import tool
    from tooldeck.approvals import ApprovalRequest
    from tooldeck.gateway.out_of_band import ApprovalDesk
    from tooldeck.policy.pending import save_answers
    from tooldeck.policy.session import approve
    from tooldeck.testing import call

    @tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    folder = tmp_path / "approvals"
    folder.mkdir(mode=0o700)
    desk = ApprovalDesk(folder, timeout=0.5)

    async def ask(n: int, answer: bool) -> list[Any]:
        made = call("echo", {"text": str(n)})
        request = ApprovalRequest(made, echo, {"text": str(n)}, "echo is WRITE")
        approver = desk.asker(f"s{n}", tier_of=lambda t: "WRITE", shown=lambda t: t.name)
        async with anyio.create_task_group() as tg:
            if answer:

                async def answer_it() -> None:
                    path = desk.files.path(made.call_id)
                    for _ in range(1000):  # the desk writes it, then polls for answers
                        if path.exists():
                            break
                        await anyio.sleep(0.01)
                    answers = path.with_name(f"{made.call_id}.answers.json")
                    save_answers(answers, made.call_id, {made.call_id: approve()})

                tg.start_soon(answer_it)
            return list(await approver([request]))

    async def main() -> None:
        for n in range(3):
            (answered,) = await ask(n, answer=True)
            assert answered.approved
        (timed_out,) = await ask(3, answer=False)
        assert not timed_out.approved and not timed_out.by_user

    anyio.run(main)
    assert desk.files._seen == {} and desk.waiting == 0
    assert [p.name for p in folder.iterdir() if not p.name.endswith(".lock")] == []
