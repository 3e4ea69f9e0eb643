"""File tools against a racing process: symlink swaps under the walk, concurrent edits.

Bounded stress tests, no timing: a real second process flips ``home/d`` between a real
directory and a symlink to a directory outside the home while the tools work on paths
under ``d``; every result is checked, and the number of escapes must be exactly 0.
Concurrent ``edit_file`` calls on one file must keep every edit they report as done.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tooldeck import ToolContext, ToolResult
from tooldeck.assembly import TurnContext
from tooldeck.builtin import files

ROUNDS = 3_000  # calls per tool while the racer flips the directory
# A loaded machine can leave the racer off the CPU for seconds while ``d`` is missing
# (CI once saw 3,000 calls in a row find no ``d``): the calls go on past ROUNDS, up to
# MOST_ROUNDS, until both sides of the race were seen (a call that worked and a call
# refused as outside the home), so the race is known to have been run.
MOST_ROUNDS = 30_000
HOLD = 150  # at most this many system calls per state (measured: 30-400 all find escapes)

# Flips home/d between a real directory (kept as home/d.real while away) and a symlink
# to the outside directory until the stop file appears. Each state is held for a random
# number of system calls, so that states last about as long as a tool call.
RACER = r"""
import os, random, sys
home, outside, stop, most = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
os.chdir(home)
print("ready", flush=True)
flips = 0
def hold():
    for _ in range(random.randrange(most)):
        os.stat(".")
def put(step):
    for k in range(1000):  # a tool may have created d while it was missing: move that aside
        try:
            return step()
        except OSError:
            try:
                os.rename("d", f"d.made-{flips}-{k}")
            except OSError:
                pass
while flips < 10_000_000 and not os.path.exists(stop):
    os.rename("d", "d.real")
    put(lambda: os.symlink(outside, "d"))
    hold()
    os.unlink("d")
    put(lambda: os.rename("d.real", "d"))
    hold()
    flips += 1
print(flips, flush=True)
"""


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / "d").mkdir(parents=True)
    (home / "d" / "secret.txt").write_text("inside text\n")
    (home / "d" / "only-inside.txt").write_text("inside text\n")
    return home


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    out = tmp_path / "outside"
    out.mkdir()
    (out / "secret.txt").write_text("OUTSIDE SECRET text\n")
    (out / "only-outside.txt").write_text("OUTSIDE SECRET text\n")
    return out


@pytest.fixture
def racer(home: Path, outside: Path, tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    stop = tmp_path / "stop"
    proc = subprocess.Popen(
        [sys.executable, "-c", RACER, str(home), str(outside), str(stop), str(HOLD)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    try:
        yield proc
    finally:
        stop.touch()
        try:
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def context(home: Path, name: str) -> ToolContext:
    turn = TurnContext(session_id="race", home=home)
    return ToolContext(call_id="c", tool_name=name, session_id="race", turn=turn)


def _outside_changed(outside: Path) -> bool:
    names = sorted(p.name for p in outside.iterdir())
    texts = {p.read_text() for p in outside.iterdir()}
    return names != ["only-outside.txt", "secret.txt"] or texts != {"OUTSIDE SECRET text\n"}


CALLS: dict[str, Callable[[ToolContext], ToolResult]] = {
    "read_document": lambda ctx: files.read_document("d/secret.txt", ctx),
    "grep_files": lambda ctx: files.grep_files("SECRET|inside", ctx, path="d"),
    "grep_one_file": lambda ctx: files.grep_files("SECRET|inside", ctx, path="d/secret.txt"),
    "list_files": lambda ctx: files.list_files(ctx, path="d"),
    "write_file": lambda ctx: files.write_file("d/new.txt", "written\n", ctx),
    "edit_file": lambda ctx: files.edit_file("d/secret.txt", "text", "TEXT", ctx),
}


@pytest.mark.parametrize("tool", list(CALLS))
def test_no_file_tool_reaches_outside_while_a_directory_is_swapped_for_a_symlink(
    home: Path, outside: Path, racer: subprocess.Popen[str], tool: str
) -> None:
    ctx = context(home, tool)
    run = CALLS[tool]
    escapes, ok, refused = 0, 0, 0
    outcomes: Counter[str] = Counter()
    i = 0
    while i < ROUNDS or (i < MOST_ROUNDS and not (ok and refused)):
        if tool == "edit_file" and i % 2:
            run = lambda ctx: files.edit_file("d/secret.txt", "TEXT", "text", ctx)  # noqa: E731
        elif tool == "edit_file":
            run = CALLS[tool]
        result = run(ctx)
        text = result.text()
        if "OUTSIDE" in text or "only-outside" in text or _outside_changed(outside):
            escapes += 1
            # put the outside back as it was, so every later escape is counted too
            for p in outside.iterdir():
                p.unlink()
            (outside / "secret.txt").write_text("OUTSIDE SECRET text\n")
            (outside / "only-outside.txt").write_text("OUTSIDE SECRET text\n")
        elif not result.is_error:
            ok += 1
        elif "is outside the agent's home directory" in text:
            refused += 1
        outcomes[text.split(":")[0][:40] if result.is_error else "ok"] += 1
        i += 1
    assert racer.poll() is None, "the racer stopped early: the race was not run"
    print(tool, i, dict(outcomes))
    assert escapes == 0, f"{tool}: {escapes} of {i} calls reached outside the home"
    assert ok > 0, outcomes  # the racer did not simply make every call fail
    assert refused > 0, outcomes  # and ``d`` was a link out while calls were made


@pytest.mark.parametrize("tool", list(CALLS))
def test_a_swap_right_after_the_check_is_caught_by_every_file_tool(
    home: Path, outside: Path, monkeypatch: pytest.MonkeyPatch, tool: str
) -> None:
    """The racer's best moment, made certain: ``d`` becomes a link out right after the
    path was checked (the real check runs, then the real swap), before the tool opens it."""
    check = files.resolve_in_home

    def check_then_swap(home_dir: Path, path: str) -> Path:
        resolved = check(home_dir, path)
        if (home / "d").is_dir() and not (home / "d").is_symlink():
            (home / "d").rename(home / "d.real")
            (home / "d").symlink_to(outside, target_is_directory=True)
        return resolved

    monkeypatch.setattr(files, "resolve_in_home", check_then_swap)
    result = CALLS[tool](context(home, tool))
    assert (home / "d").is_symlink()  # the swap happened
    assert "OUTSIDE" not in result.text() and "only-outside" not in result.text()
    assert not _outside_changed(outside)
    assert result.is_error, result.text()
    assert "is outside the agent's home directory" in result.text(), result.text()


# -- concurrent edits ----------------------------------------------------------------------

EDITORS = 40


def _concurrent_edits(home: Path) -> tuple[list[ToolResult], str]:
    """EDITORS threads each change their own line of one file at the same moment."""
    target = home / "shared.txt"
    target.write_text("".join(f"line {i}: old\n" for i in range(EDITORS)))
    barrier = threading.Barrier(EDITORS)
    results: list[Any] = [None] * EDITORS

    def edit(i: int) -> None:
        ctx = context(home, "edit_file")
        barrier.wait()
        results[i] = files.edit_file("shared.txt", f"line {i}: old", f"line {i}: new", ctx)

    threads = [threading.Thread(target=edit, args=(i,)) for i in range(EDITORS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, target.read_text()


@pytest.mark.parametrize("attempt", range(5))
def test_every_reported_edit_survives_forty_concurrent_edits(tmp_path: Path, attempt: int) -> None:
    home = tmp_path / "home"
    home.mkdir()
    results, final = _concurrent_edits(home)
    succeeded = {i for i, r in enumerate(results) if not r.is_error}
    survived = {i for i in range(EDITORS) if f"line {i}: new\n" in final}
    assert succeeded == survived, (
        f"{len(succeeded)} edits reported success, {len(survived)} are in the file"
    )
    assert succeeded, "at least one edit must win"
    for r in results:
        if r.is_error:
            assert "changed while" in r.text() and "read it again" in r.text(), r.text()
    # the file is whole: every line is there, old or new
    assert final.count("\n") == EDITORS
    assert sorted(p.name for p in home.iterdir()) == ["shared.txt"]  # no temp files left
