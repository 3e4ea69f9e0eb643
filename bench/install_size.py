"""Install size: the README's demo command from a fresh clone, before and after (issue 32
item 8).

For each commit given (default: the one before the lighter install, and HEAD), clone this
repository into a temporary folder, check the commit out, run the demo command of that
commit's README "Set up" section exactly as written, and measure ``.venv`` (``du -sm``)
and the packages in it; then sync the test command's environment (``uv sync --locked``:
the dev group, which ``uv run --locked scripts/check`` uses) and measure it again; and,
at HEAD, the core alone (``uv sync --locked --no-dev``). uv's cache is shared, so the
times are mostly linking, not downloading; the sizes are what counts.

    python3 bench/install_size.py [COMMIT ...]
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEFORE = "9a5b608"  # main before issue 32 item 8


def sh(command: str, cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV" and not k.startswith("UV_")}
    done = subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        sys.exit(f"{command!r} failed in {cwd}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return done.stdout


def demo_command(readme: str) -> str:
    section = readme.split("\n## Set up\n", 1)[1].split("\n## ", 1)[0]
    return next(line for line in section.splitlines() if line.endswith("tooldeck demo"))


def measure(clone: Path) -> tuple[int, int]:
    """(MB of .venv, packages in it)."""
    size = int(sh("du -sm .venv", clone).split()[0])
    listed = sh(".venv-uv/bin/uv pip list --python .venv/bin/python --format freeze", clone)
    return size, len(listed.splitlines())


def main(commits: list[str]) -> None:
    print(f"load: {os.getloadavg()[0]:.1f} (1 min), {os.cpu_count()} cores")
    for commit in commits:
        with tempfile.TemporaryDirectory(prefix="install-size-") as tmp:
            clone = Path(tmp) / "tooldeck"
            sh(f"git clone -q {ROOT} {clone} && git -C {clone} checkout -q {commit}", Path(tmp))
            command = demo_command((clone / "README.md").read_text())
            started = time.perf_counter()
            output = sh(command, clone)
            seconds = time.perf_counter() - started
            assert "Deferred loading" in output, output[-500:]
            demo = measure(clone)
            print(f"{commit}: {command.split('&& ')[-1]}")
            print(f"  demo env: {demo[0]} MB, {demo[1]} packages ({seconds:.0f} s)")
            sh(".venv-uv/bin/uv sync --locked -q", clone)
            full = measure(clone)
            print(f"  test env (uv sync --locked): {full[0]} MB, {full[1]} packages")
            if re.search(r"--extra demo", command):
                sh(".venv-uv/bin/uv sync --locked --no-dev -q", clone)  # exact: the core
                core = measure(clone)
                print(f"  core (uv sync --locked --no-dev): {core[0]} MB, {core[1]} packages")


if __name__ == "__main__":
    main(sys.argv[1:] or [BEFORE, "HEAD"])
