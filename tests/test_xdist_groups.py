"""The test command's two processes keep together what tests/conftest.py groups.

``scripts/check`` runs ``pytest -n 2 --dist loadgroup``: tests marked
``xdist_group(name)``, and the tests of a module that share a module-scoped fixture (a
server, a build), must run on one process. A real pytest run (a subprocess, two
pytest-xdist workers) over a small test folder that uses this repository's
``tests/conftest.py``: each test prints which worker ran it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

GROUPED = """
import pytest

@pytest.mark.xdist_group("together")
@pytest.mark.parametrize("n", range(12))
def test_grouped(n: int) -> None:
    pass

@pytest.mark.parametrize("n", range(12))
def test_free(n: int) -> None:
    pass
"""

SHARED = """
import pytest

@pytest.fixture(scope="module")
def server() -> str:
    return "started once per process"

@pytest.mark.parametrize("n", range(12))
def test_uses_the_server(server: str, n: int) -> None:
    pass
"""


def test_groups_and_module_fixtures_stay_on_one_process(tmp_path: Path) -> None:
    shutil.copy(HERE / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    (tmp_path / "test_shared.py").write_text(SHARED)
    options = ["-n", "2", "--dist", "loadgroup", "-v", "-p", "no:cacheprovider", "-o", "addopts="]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *options, str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    ran = re.findall(r"\[(gw\d)\] \[ *\d+%\] PASSED (\S+)", done.stdout)
    assert len(ran) == 36, done.stdout
    on = {test: worker for worker, test in ran}
    grouped = {w for t, w in on.items() if "::test_grouped[" in t}
    shared = {w for t, w in on.items() if "::test_uses_the_server[" in t}
    assert len(grouped) == 1 and len(shared) == 1, done.stdout
    # the group is in the test's id, as pytest-xdist reports it
    assert all(t.endswith("@together") for t in on if "::test_grouped[" in t), on
    assert all(t.endswith("@module:test_shared.py") for t in on if "::test_uses_the_server[" in t)
    # and the rest is shared out: both processes ran tests
    assert set(on.values()) == {"gw0", "gw1"}, done.stdout
