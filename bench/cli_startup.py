"""How long the ``tooldeck`` command takes to start: ``--help``, ``version``, each command's
``--help`` (a group's, and one of its subcommands').

Each case is a fresh process (``python -c 'from tooldeck.cli import main; main()' ...``),
run ``--repeat`` times, cases alternated round by round so that load which comes and goes
hits them all alike (hyperfine-style: wall time per run, median and min, plus the child's
CPU time, which another process's load inflates much less). Floors in the same rounds:
an empty interpreter and ``import typer, rich.console`` (what any typer + rich CLI pays).

It also lists which heavy packages each case imported (``sys.modules`` at exit) and the
biggest cumulative imports of ``tooldeck --help`` (``python -X importtime``).

``--src DIR`` measures another checkout's ``src`` (e.g. an older commit exported with
``git archive``) with this environment's packages.

    uv run --group bench python bench/cli_startup.py [--repeat 20] [--src DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _harness import BackgroundLoad, machine_lines, table, wait_for_idle

HEAVY = ("openai", "anthropic", "dbos", "mcp", "pydantic", "jsonschema_rs", "httpx", "sqlite3")

RUN_CLI = "import sys; from tooldeck.cli import main; sys.argv[0] = 'tooldeck'; main()"
CASES: dict[str, list[str]] = {
    "python -c pass (floor)": ["-c", "pass"],
    "import typer, rich.console (floor)": ["-c", "import typer, rich.console"],
    "tooldeck --help": ["-c", RUN_CLI, "--help"],
    "tooldeck version": ["-c", RUN_CLI, "version"],
}
# every command's own --help (a group's, and for two groups a subcommand's too)
HELP_OF = (
    "workflows",
    "workflows run",
    "worker",
    "jobs",
    "schedules",
    "scheduler",
    "policy",
    "policy explain",
    "mcp",
    "tools",
    "toolkits",
    "agents",
    "search",
    "serve",
    "demo",
    "timeline",
    "approve",
)
CASES.update({f"tooldeck {c} --help": ["-c", RUN_CLI, *c.split(), "--help"] for c in HELP_OF})

PROBE = (
    "import atexit, sys\n"
    "def _show():\n"
    "    sys.__stderr__.write('MODULES ' + ' '.join(m for m in {heavy!r} if m in sys.modules))\n"
    "atexit.register(_show)\n"
)


def _env(src: Path | None) -> dict[str, str]:
    env = {**os.environ, "COLUMNS": "100", "TERM": "dumb"}
    if src is not None:
        env["PYTHONPATH"] = str(src)
    return env


def _one(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, child CPU seconds) of one fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, *args], env=env, capture_output=True, check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _modules(args: list[str], env: dict[str, str]) -> str:
    if args[0] != "-c":
        return ""
    code = PROBE.format(heavy=HEAVY) + args[1]
    done = subprocess.run(
        [sys.executable, "-c", code, *args[2:]], env=env, capture_output=True, text=True
    )
    line = next((x for x in done.stderr.splitlines() if x.startswith("MODULES")), "MODULES")
    return ", ".join(line.split()[1:]) or "none"


def _importtime(env: dict[str, str], top: int) -> list[tuple[str, float]]:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", RUN_CLI, "--help"],
        env=env,
        capture_output=True,
        text=True,
    )
    rows: list[tuple[str, float]] = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _self, cumulative, name = line.split("|", 2)
        depth = (len(name) - len(name.lstrip()) - 1) // 2
        if depth <= 1:
            rows.append((name.strip(), int(cumulative) / 1000))
    return sorted(rows, key=lambda r: -r[1])[:top]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=20, help="Runs per case.")
    parser.add_argument("--src", type=Path, help="Another checkout's src/ to measure.")
    opts = parser.parse_args()
    env = _env(opts.src)
    print("# tooldeck CLI start-up\n")
    print("\n".join(machine_lines(("tooldeck", "typer", "rich", "click"))))
    if opts.src is not None:
        print(f"- measured src: {opts.src}")
    print(f"- {wait_for_idle()}")
    for args in CASES.values():  # warm the file cache and the .pyc files
        _one(args, env)
    load = BackgroundLoad()
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in CASES}
    for _ in range(opts.repeat):
        for name, args in CASES.items():
            samples[name].append(_one(args, env))
    print(f"- {load.report()}\n")
    rows = []
    for name, runs in samples.items():
        walls = sorted(w for w, _ in runs)
        cpus = sorted(c for _, c in runs)
        rows.append(
            [
                name,
                f"{statistics.median(walls) * 1000:.0f} ms",
                f"{walls[0] * 1000:.0f} ms",
                f"{statistics.median(cpus) * 1000:.0f} ms",
                _modules(CASES[name], env),
            ]
        )
    print(f"{opts.repeat} runs per case, alternated:\n")
    print(table(["case", "wall median", "wall min", "CPU median", "heavy modules loaded"], rows))
    print("\nBiggest top-level imports of `tooldeck --help` (`-X importtime`, cumulative):\n")
    print(table(["module", "ms"], [[n, f"{ms:.1f}"] for n, ms in _importtime(env, 12)]))


if __name__ == "__main__":
    main()
