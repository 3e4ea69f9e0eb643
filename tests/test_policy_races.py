"""Shared policy state under concurrent processes: grants and pending approvals.

Real processes, real files: two workers are told to act on the same file at the same
moment (one line on each one's stdin), so their read-modify-write cycles overlap. The
number of rounds is bounded; nothing here measures time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

from tooldeck import Protection
from tooldeck.policy import GrantStore
from tooldeck.policy.grants import FORMAT

ROUNDS = 20
ADDS_PER_ROUND = 3

_WORKER = """
import sys
from tooldeck.policy.grants import GrantStore

role = sys.argv[1]
for line in sys.stdin:
    store = GrantStore(line.strip())
    if role == "add":
        for _ in range(int(sys.argv[2])):
            store.add("writer", by="adder")
    else:
        store.revoke("g_victim")
    print("done", flush=True)
"""


def _worker(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _WORKER, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def _tell(pipe: IO[str] | None, line: str) -> None:
    assert pipe is not None
    pipe.write(line + "\n")
    pipe.flush()


def _seed(path: Path) -> None:
    victim = {"id": "g_victim", "tool": "writer", "args": None, "created": "", "by": "human"}
    path.write_text(json.dumps({"format": FORMAT, "grants": [victim]}), encoding="utf-8")


def test_a_revocation_racing_grants_recorded_by_another_process_is_never_undone(
    tmp_path: Path,
) -> None:
    adder, revoker = _worker("add", str(ADDS_PER_ROUND)), _worker("revoke")
    files = [tmp_path / f"s{r}.grants.json" for r in range(ROUNDS)]
    try:
        for path in files:
            _seed(path)
            _tell(adder.stdin, str(path))
            _tell(revoker.stdin, str(path))
            for worker in (adder, revoker):
                assert worker.stdout is not None
                assert worker.stdout.readline().strip() == "done"
    finally:
        for worker in (adder, revoker):
            assert worker.stdin is not None
            worker.stdin.close()
            worker.wait(timeout=60)
    undone = lost = 0
    for path in files:
        grants = list(GrantStore(path))
        undone += any(g.id == "g_victim" for g in grants)
        lost += ADDS_PER_ROUND - sum(g.by == "adder" for g in grants)
    assert (undone, lost) == (0, 0), f"{undone} of {ROUNDS} revocations undone, {lost} adds lost"


def test_a_grants_file_rewritten_within_one_timestamp_tick_is_read_again(tmp_path: Path) -> None:
    # Same inode, same size, same modification time: only the content changed, as when
    # a freed inode is reused within the file system's timestamp granularity.
    path = tmp_path / "s.grants.json"
    _seed(path)
    tick = time.time_ns() + 60 * 10**9
    os.utime(path, ns=(tick, tick))
    store = GrantStore(path)
    assert [g.id for g in store] == ["g_victim"]
    with path.open("r+", encoding="utf-8") as f:
        text = f.read()
        f.seek(0)
        f.write(text.replace("g_victim", "g_vector"))
    os.utime(path, ns=(tick, tick))
    assert [g.id for g in store] == ["g_vector"]


# -- pending approvals ---------------------------------------------------------------------------
def _waiting_session(tmp_path: Path, state: Path) -> None:
    """A session whose step waits for approval, kept in ``state``."""
    import asyncio

    from tooldeck import Session, TurnContext
    from tooldeck.builtin import load_builtin_registry
    from tooldeck.policy import PendingFiles, SessionPolicy, wait_for_human
    from tooldeck.testing import ScriptedModel, call, reply

    policy = SessionPolicy(session_id="s", directory=state)
    turn = TurnContext(session_id="s", home=tmp_path)
    session = Session(
        ScriptedModel([reply(call("write_file", {"path": "w.txt", "content": "1"}))]),
        load_builtin_registry().toolset(turn),
        session_id="s",
        turn=turn,
        protect=Protection.policy(policy, approver=policy.approver(wait_for_human)),
        pending_store=PendingFiles(state),
    )
    assert asyncio.run(session.run("go")).waiting


def test_a_step_loaded_by_one_process_is_not_claimed_after_another_resumed_it(
    tmp_path: Path,
) -> None:
    from tooldeck.policy import PendingFiles

    state = tmp_path / "state"
    _waiting_session(tmp_path, state)
    first, second = PendingFiles(state), PendingFiles(state)  # two processes' views
    loaded = first.load("s")
    assert loaded is not None
    again = second.load("s")
    assert again is not None and second.claim("s")
    second.save("s", *again)  # the resumed turn waits again: a new step in the same file
    # The step `first` loaded is finished: claiming now would run it a second time and
    # swallow the new waiting step.
    assert not first.claim("s")
    assert (state / "s.pending.json").exists()
    assert second.load("s") is not None and second.claim("s")
