"""The evidence record's file: one line per call, appended to a file kept open for the
session, made again when it was removed, reopened after a failed write or a close."""

from __future__ import annotations

import json
import logging
import os
import stat
from pathlib import Path

import pytest

from tooldeck import tool
from tooldeck.context import ToolContext
from tooldeck.gateway.evidence import EvidenceLog
from tooldeck.result import ToolResult
from tooldeck.transcript import ToolCall


@tool
def echo(text: str) -> str:
    """Echo the text."""
    return text


def record(log: EvidenceLog, n: int) -> ToolResult:
    result = ToolResult(f"answer {n}")
    call = ToolCall(f"c{n}", "echo", {"text": str(n)})
    assert log.hook(call, echo, result, ToolContext(tool_name="echo")) is result
    return result


def lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_lines_go_to_one_private_file_kept_open_until_close(tmp_path: Path) -> None:
    path = tmp_path / "state" / "gw-1.calls.jsonl"
    log = EvidenceLog(path, "gw-1")
    fds = open_fds()
    for n in range(3):
        record(log, n)
    assert open_fds() == fds + 1  # one file, opened once
    assert [e["call_id"] for e in lines(path)] == ["c0", "c1", "c2"]
    assert {e["session_id"] for e in lines(path)} == {"gw-1"}
    assert lines(path)[0]["text"] == "answer 0"  # not an upstream result: its text
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    log.close()
    assert open_fds() == fds
    record(log, 3)  # a line after the close: opened again, appended
    assert [e["call_id"] for e in lines(path)][-1] == "c3"
    log.close()


def test_a_removed_record_is_made_again_with_its_folder(tmp_path: Path) -> None:
    path = tmp_path / "state" / "gw-2.calls.jsonl"
    log = EvidenceLog(path, "gw-2")
    record(log, 0)
    path.unlink()
    path.parent.rmdir()
    record(log, 1)
    assert [e["call_id"] for e in lines(path)] == ["c1"]
    log.close()


def test_a_failed_write_is_logged_the_result_passes_and_the_next_line_retries(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "state"
    blocker.write_text("a file where the folder should be")
    path = blocker / "gw-3.calls.jsonl"
    log = EvidenceLog(path, "gw-3")
    with caplog.at_level(logging.ERROR, "tooldeck.gateway"):
        record(log, 0)  # the result goes on, unchanged
    assert "cannot be written" in caplog.text
    blocker.unlink()
    record(log, 1)
    assert [e["call_id"] for e in lines(path)] == ["c1"]
    log.close()


def test_a_log_without_a_path_writes_nothing(tmp_path: Path) -> None:
    log = EvidenceLog(None, "gw-4")
    record(log, 0)
    log.close()
    assert list(tmp_path.iterdir()) == []
