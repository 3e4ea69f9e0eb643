"""run_bash: exit codes, environment, timeout, abort, cancellation and output limits."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tooldeck import AbortSignal, ToolContext, ToolResult, validate_arguments
from tooldeck.assembly import Toolset, TurnContext
from tooldeck.builtin import load_builtin_registry, shell


@pytest.fixture
def turn(tmp_path: Path) -> TurnContext:
    return TurnContext(session_id="s1", home=tmp_path, env={"GREETING": "hello there"})


@pytest.fixture
def toolset(turn: TurnContext) -> Toolset:
    return load_builtin_registry().toolset(turn)


def context(toolset: Toolset, turn: TurnContext, sig: AbortSignal | None = None) -> ToolContext:
    return ToolContext(
        call_id="call-1",
        tool_name="run_bash",
        session_id=turn.session_id,
        turn=turn,
        toolset=toolset,
        signal=sig or AbortSignal(),
    )


async def arun(
    toolset: Toolset, turn: TurnContext, args: dict[str, Any], sig: AbortSignal | None = None
) -> ToolResult:
    tool = toolset["run_bash"]
    validated = validate_arguments(tool, json.dumps(args))
    return await tool.invoke(validated.params, context(toolset, turn, sig))


def run(toolset: Toolset, turn: TurnContext, args: dict[str, Any]) -> ToolResult:
    return asyncio.run(arun(toolset, turn, args))


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live (not zombie) process."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return fields[0] not in ("Z", "X")


def wait_gone(pid: int, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


def child_pid(home: Path) -> int:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        text = (home / "child.pid").read_text().strip() if (home / "child.pid").exists() else ""
        if text:
            return int(text)
        time.sleep(0.02)
    raise AssertionError("the command did not record its child's pid")


CHILD = "sleep 300 & echo $! > child.pid; wait"


def test_exit_code_stdout_and_stderr(toolset: Toolset, turn: TurnContext) -> None:
    ok = run(toolset, turn, {"command": "echo out; echo err >&2"})
    assert not ok.is_error
    assert ok.text() == "Exit code: 0\nstdout:\nout\nstderr:\nerr"
    assert ok.details["exit_code"] == 0 and ok.details["stopped"] is None

    failed = run(toolset, turn, {"command": "echo nope >&2; exit 3"})
    assert not failed.is_error  # a non-zero exit is reported, not a tool failure
    assert failed.text() == "Exit code: 3\nstdout: (empty)\nstderr:\nnope"
    assert failed.details["exit_code"] == 3


def test_runs_in_home_with_the_turn_env_plus_path(
    toolset: Toolset, turn: TurnContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLDECK_TEST_LEAK", "leaked")
    result = run(
        toolset,
        turn,
        {"command": 'pwd; echo "$GREETING"; echo "[$TOOLDECK_TEST_LEAK]"; command -v ls'},
    )
    out = result.text().split("stdout:\n", 1)[1].split("\nstderr:", 1)[0].splitlines()
    assert out[0] == str(tmp_path.resolve())
    assert out[1] == "hello there"
    assert out[2] == "[]"  # only the turn's env, not the process's
    assert out[3].endswith("/ls")  # PATH was added because the turn's env has none


def test_timeout_kills_the_whole_process_group(
    toolset: Toolset, turn: TurnContext, tmp_path: Path
) -> None:
    started = time.monotonic()
    result = run(toolset, turn, {"command": CHILD, "timeout": 1})
    assert time.monotonic() - started < 10
    assert result.is_error
    assert result.text().startswith("The command timed out after 1 s and was killed")
    assert "Exit code: -9 (killed by SIGKILL)" in result.text()
    assert result.details["stopped"] == "timed out after 1 s"
    assert wait_gone(child_pid(tmp_path)), "the child sleep survived the timeout"


def test_abort_signal_kills_the_process_group(
    toolset: Toolset, turn: TurnContext, tmp_path: Path
) -> None:
    sig = AbortSignal()

    async def main() -> tuple[ToolResult, float]:
        asyncio.get_running_loop().call_later(0.5, sig.abort, "user pressed stop")
        started = time.monotonic()
        result = await arun(toolset, turn, {"command": CHILD, "timeout": 60}, sig)
        return result, time.monotonic() - started

    result, elapsed = asyncio.run(main())
    assert elapsed < 10
    assert result.is_error
    assert result.text().startswith("The command aborted (user pressed stop) and was killed")
    assert wait_gone(child_pid(tmp_path)), "the child sleep survived the abort"


def test_abort_from_another_thread_kills_the_process_group(
    toolset: Toolset, turn: TurnContext, tmp_path: Path
) -> None:
    sig = AbortSignal()

    async def main() -> ToolResult:
        loop = asyncio.get_running_loop()
        loop.call_later(0.5, lambda: loop.run_in_executor(None, sig.abort, "from a thread"))
        return await arun(toolset, turn, {"command": CHILD, "timeout": 60}, sig)

    result = asyncio.run(main())
    assert result.is_error and "aborted (from a thread)" in result.text()
    assert wait_gone(child_pid(tmp_path))


def test_an_already_aborted_call_does_not_run(
    toolset: Toolset, turn: TurnContext, tmp_path: Path
) -> None:
    sig = AbortSignal()
    sig.abort("too late")
    result = asyncio.run(arun(toolset, turn, {"command": "touch ran"}, sig))
    assert result.is_error and "Not run" in result.text()
    assert not (tmp_path / "ran").exists()


def test_cancelling_the_call_kills_the_process_group(
    toolset: Toolset, turn: TurnContext, tmp_path: Path
) -> None:
    async def main() -> None:
        task = asyncio.ensure_future(arun(toolset, turn, {"command": CHILD, "timeout": 60}))
        await asyncio.to_thread(child_pid, tmp_path)  # the command is running
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert wait_gone(child_pid(tmp_path)), "the child sleep survived cancellation"


def test_output_keeps_head_and_tail_and_says_how_much_was_cut(
    toolset: Toolset, turn: TurnContext
) -> None:
    command = "echo START; head -c 100000 /dev/zero | tr '\\0' a; echo; echo END; echo e >&2"
    result = run(toolset, turn, {"command": command})
    text = result.text()
    stdout = text.split("stdout:\n", 1)[1].split("\nstderr:", 1)[0]
    total = len("START\n") + 100_000 + len("\nEND\n")
    kept = shell.OUTPUT_HEAD_BYTES + shell.OUTPUT_TAIL_BYTES
    assert stdout.startswith("START\naaa") and stdout.endswith("aaa\nEND")
    assert f"[{total - kept} bytes cut from the middle; {total} bytes in all." in stdout
    assert len(stdout) < kept + 400
    assert result.details["stdout_bytes"] == total
    assert result.details["stdout_cut_bytes"] == total - kept
    assert text.endswith("stderr:\ne")


def test_background_job_holding_the_output_does_not_hang_the_call(
    toolset: Toolset, turn: TurnContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shell, "DRAIN_GRACE", 0.3)
    started = time.monotonic()
    result = run(toolset, turn, {"command": "sleep 30 & echo $! > child.pid; echo started"})
    try:
        assert time.monotonic() - started < 5
        assert not result.is_error and "Exit code: 0" in result.text()
        assert "started" in result.text()
        assert "Background processes still held the output open" in result.text()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child_pid(tmp_path), signal.SIGKILL)


def test_timeout_argument_is_bounded_by_the_schema(toolset: Toolset) -> None:
    from tooldeck import ArgumentError

    with pytest.raises(ArgumentError):
        validate_arguments(toolset["run_bash"], '{"command": "true", "timeout": 601}')
    with pytest.raises(ArgumentError):
        validate_arguments(toolset["run_bash"], '{"command": "true", "timeout": 0}')
    assert toolset["run_bash"].schema["properties"]["timeout"]["maximum"] == shell.MAX_TIMEOUT


def test_through_the_dispatcher_its_timeout_also_kills_the_group(
    toolset: Toolset, turn: TurnContext, tmp_path: Path
) -> None:
    from tooldeck.dispatch import Dispatcher
    from tooldeck.transcript import ToolCall

    dispatcher = Dispatcher(toolset, turn=turn, timeouts={"run_bash": 1.0})
    call = ToolCall("c1", "run_bash", json.dumps({"command": CHILD, "timeout": 60}))
    outcome = asyncio.run(dispatcher.dispatch([call]))
    (output,) = outcome.outputs
    assert output.result.is_error and "stopped" in output.result.text()
    assert wait_gone(child_pid(tmp_path)), "the child sleep survived the dispatcher's timeout"
