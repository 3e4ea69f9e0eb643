"""The audit log's file: one line per decision, appended to a file kept open for the
session, made again when it was removed; the latest entries kept in memory, a bounded
number of them."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tooldeck.policy import AuditLog
from tooldeck.policy import audit as audit_module


def record(log: AuditLog, n: int) -> None:
    log.record(
        session_id="s", call_id=f"c{n}", tool="t", args={"n": n}, decision="allow", level="tier"
    )


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_lines_go_to_one_private_file_kept_open_until_close(tmp_path: Path) -> None:
    path = tmp_path / "state" / "s.audit.jsonl"
    log = AuditLog(path)
    fds = open_fds()
    for n in range(3):
        record(log, n)
    assert open_fds() == fds + 1  # one file, opened once, kept open
    assert [e["call_id"] for e in AuditLog.read(path)] == ["c0", "c1", "c2"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    log.close()
    assert open_fds() == fds
    record(log, 3)  # a line after the close: opened again, appended
    assert [e["call_id"] for e in AuditLog.read(path)][-1] == "c3"
    log.close()


def test_a_removed_audit_file_is_made_again_with_its_folder(tmp_path: Path) -> None:
    path = tmp_path / "state" / "s.audit.jsonl"
    log = AuditLog(path)
    record(log, 0)
    path.unlink()
    path.parent.rmdir()
    record(log, 1)
    assert [e["call_id"] for e in AuditLog.read(path)] == ["c1"]
    log.close()


def test_a_failed_write_raises_and_the_next_line_retries(tmp_path: Path) -> None:
    blocker = tmp_path / "state"
    blocker.write_text("a file where the folder should be")
    log = AuditLog(blocker / "s.audit.jsonl")
    with pytest.raises(OSError):
        record(log, 0)  # an audit line that cannot be written fails the decision
    blocker.unlink()
    record(log, 1)
    assert [e["call_id"] for e in AuditLog.read(blocker / "s.audit.jsonl")] == ["c1"]
    log.close()


def test_memory_holds_the_latest_entries_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(audit_module, "KEPT_ENTRIES", 5)
    path = tmp_path / "s.audit.jsonl"
    log = AuditLog(path)
    for n in range(12):
        record(log, n)
    assert [e["call_id"] for e in log.entries] == [f"c{n}" for n in range(7, 12)]
    assert len(AuditLog.read(path)) == 12  # the file has every line
    log.close()
