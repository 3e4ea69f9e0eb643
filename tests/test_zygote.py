"""The tests' fork server (tests/_zygote.py): a script that hands off to it behaves, to
the process that started it, as if it ran itself: its stdin, stdout and stderr, exit
status, signals; killed, the server goes too. Real processes throughout."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import conftest

SERVERS = Path(__file__).parent / "mcp_servers"

SCRIPT = f"""
import importlib.util, sys
spec = importlib.util.spec_from_file_location("handoff", {str(SERVERS / "_zygote_client.py")!r})
client = importlib.util.module_from_spec(spec)
spec.loader.exec_module(client)
client.handoff()
import os, signal, time
print(os.getpid(), "mcp" in sys.modules, os.getcwd(), os.environ.get("ZYGOTE_TEST"), flush=True)
print(sys.argv[1:], file=sys.stderr, flush=True)
what = sys.stdin.readline().strip()
if what == "sleep":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(7))
    print("sleeping", flush=True)
    time.sleep(60)
elif what == "die":
    os.kill(os.getpid(), signal.SIGKILL)
sys.exit(int(what or 0))
"""

pytestmark = pytest.mark.skipif(
    conftest._zygote is None, reason="no fork server (TOOLDECK_TEST_ZYGOTE=0, or not Linux)"
)


def start(tmp_path: Path, **env: str) -> subprocess.Popen[str]:
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    return subprocess.Popen(
        [sys.executable, str(script), "an argument"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "ZYGOTE_TEST": "here", **env},
    )


def first_line(proc: subprocess.Popen[str]) -> list[str]:
    assert proc.stdout is not None
    return proc.stdout.readline().split()


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_a_handed_off_script_has_our_pipes_folder_environment_and_exit_code(
    tmp_path: Path,
) -> None:
    proc = start(tmp_path)
    pid, preloaded, cwd, env = first_line(proc)
    assert int(pid) != proc.pid  # run by the fork server, which had imported the SDK
    assert preloaded == "True"
    assert (cwd, env) == (str(tmp_path), "here")
    out, err = proc.communicate("3\n", timeout=30)
    assert proc.returncode == 3
    assert err == "['an argument']\n"
    assert out == ""


def test_without_the_fork_server_the_script_runs_itself(tmp_path: Path) -> None:
    proc = start(tmp_path, TOOLDECK_TEST_ZYGOTE="0")
    pid, preloaded, *_ = first_line(proc)
    assert (int(pid), preloaded) == (proc.pid, "False")
    proc.communicate("0\n", timeout=30)
    assert proc.returncode == 0


@pytest.mark.no_zygote
def test_a_test_marked_no_zygote_starts_its_processes_as_usual(tmp_path: Path) -> None:
    proc = start(tmp_path)
    assert int(first_line(proc)[0]) == proc.pid
    proc.communicate("0\n", timeout=30)


def test_a_signal_reaches_the_script_and_its_exit_comes_back(tmp_path: Path) -> None:
    proc = start(tmp_path)
    first_line(proc)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("sleep\n")
    proc.stdin.flush()
    assert proc.stdout.readline() == "sleeping\n"
    proc.terminate()
    assert proc.wait(30) == 7  # the script's own SIGTERM handler ran


def test_a_script_killed_by_a_signal_looks_killed_by_it(tmp_path: Path) -> None:
    proc = start(tmp_path)
    first_line(proc)
    proc.communicate("die\n", timeout=30)
    assert proc.returncode == -signal.SIGKILL


def test_killing_the_stand_in_kills_the_script_and_closes_its_pipes(tmp_path: Path) -> None:
    proc = start(tmp_path)
    pid = int(first_line(proc)[0])
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("sleep\n")
    proc.stdin.flush()
    assert proc.stdout.readline() == "sleeping\n"
    proc.kill()
    assert proc.wait(30) == -signal.SIGKILL
    deadline = time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(pid)  # killed and reaped
    assert proc.stdout.read() == ""  # end of file: no process holds the pipe any more


def test_closing_stdin_ends_a_server_that_reads_it(tmp_path: Path) -> None:
    proc = start(tmp_path)
    first_line(proc)
    proc.communicate("", timeout=30)  # end of file at once: the script exits 0
    assert proc.returncode == 0


def test_a_script_started_with_stdin_closed_runs_itself(tmp_path: Path) -> None:
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script)],
        preexec_fn=lambda: os.close(0),
        capture_output=True,
        text=True,
        timeout=60,
    )
    _pid, preloaded, *_ = done.stdout.split()
    assert preloaded == "False"  # not handed off: it sees its stdin closed itself,
    assert "'NoneType' object has no attribute 'readline'" in done.stderr  # sys.stdin None
