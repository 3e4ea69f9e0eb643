"""The package as a user gets it: an sdist, a wheel built from that sdist, the wheel
installed into a clean virtual environment (no source tree on the path, no dev tools),
and the installed package importing, answering ``tooldeck --help`` and running the
offline demo, which reads the packaged data files (the built-in definitions, the demo
catalog, the definitions schema, the toolkit manifest).

The build and the install go through uv (the one running the tests when they run under
``uv run``); the clean environment gets the dependency versions of ``uv.lock``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
NAME = PYPROJECT["project"]["name"]
VERSION = PYPROJECT["project"]["version"]
EXTRAS = {"dbos", "web", "ddgs", "semantic", "onnx", "fastembed", "otel"}
# One build for the module's tests: they run on one test process (pytest-xdist).
pytestmark = pytest.mark.xdist_group("packaging")
DATA_FILES = [
    "tooldeck/py.typed",
    "tooldeck/agents/toolkits.toml",
    "tooldeck/builtin/definitions.json",
    "tooldeck/data/demo_catalog.json",
    "tooldeck/schemas/definitions.schema.json",
]


def _uv() -> str:
    found = os.environ.get("UV") or shutil.which("uv")
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail("uv is neither in $UV nor on PATH, and CI is set", pytrace=False)
    pytest.skip("uv is neither in $UV (set by `uv run`) nor on PATH")


def _clean_env() -> dict[str, str]:
    """The environment without anything pointing at this checkout or its virtualenv."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "CONDA_PREFIX"}
        and not k.startswith("UV_")
    }
    env["COLUMNS"] = "200"
    return env


def _run(*args: str | Path, cwd: Path) -> str:
    result = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, (
        f"{args} exited {result.returncode}\n{result.stdout}\n{result.stderr}"
    )
    return result.stdout


def _source_files() -> set[str]:
    """Every file of the package in the source tree, relative to ``src``."""
    src = ROOT / "src"
    return {
        p.relative_to(src).as_posix()
        for p in (src / "tooldeck").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """(sdist, wheel): the sdist from the tree, the wheel from the sdist."""
    uv = _uv()
    out = tmp_path_factory.mktemp("dist")
    _run(uv, "build", "--sdist", "--out-dir", out, ROOT, cwd=ROOT)
    sdist = out / f"{NAME}-{VERSION}.tar.gz"
    assert sdist.is_file(), sorted(out.iterdir())
    _run(uv, "build", "--wheel", "--out-dir", out, sdist, cwd=out)
    wheel = out / f"{NAME}-{VERSION}-py3-none-any.whl"
    assert wheel.is_file(), sorted(out.iterdir())
    yield sdist, wheel


def test_the_sdist_holds_the_package_and_what_builds_it(built: tuple[Path, Path]) -> None:
    sdist, _ = built
    with tarfile.open(sdist) as tar:
        top = f"{NAME}-{VERSION}/"
        names = {m.name.removeprefix(top) for m in tar.getmembers() if m.isfile()}
    assert {"pyproject.toml", "README.md", "PKG-INFO"} <= names
    # no virtual environment (.venv, .venv-uv), build output or cache came along
    stray = {n for n in names if n.split("/")[0] in {".venv", ".venv-uv", "dist", ".git"}}
    assert not stray and not any("__pycache__" in n for n in names), sorted(stray)[:5]
    missing = {f"src/{f}" for f in _source_files()} - names
    assert not missing, sorted(missing)


def test_the_wheel_holds_every_module_the_data_files_and_the_entry_point(
    built: tuple[Path, Path],
) -> None:
    _, wheel = built
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        info = f"{NAME}-{VERSION}.dist-info"
        metadata = zf.read(f"{info}/METADATA").decode()
        entry_points = zf.read(f"{info}/entry_points.txt").decode()
    for data in DATA_FILES:
        assert data in names, data
    missing = _source_files() - names
    assert not missing, sorted(missing)
    assert "tooldeck = tooldeck.cli:main" in entry_points
    extras = {
        line.split(":", 1)[1].strip()
        for line in metadata.splitlines()
        if line.startswith("Provides-Extra:")
    }
    assert extras == EXTRAS
    assert "Requires-Python: >=3.11" in metadata


def test_the_wheel_installs_into_a_clean_venv_and_runs(
    built: tuple[Path, Path], tmp_path: Path
) -> None:
    _, wheel = built
    uv = _uv()
    pins = tmp_path / "constraints.txt"
    _run(
        uv, "export", "--locked", "--no-hashes", "--no-dev", "--all-extras",
        "--no-emit-project", "--quiet", "--output-file", pins, cwd=ROOT,
    )  # fmt: skip
    venv = tmp_path / "venv"
    _run(uv, "venv", "--quiet", "--python", sys.executable, venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    _run(uv, "pip", "install", "--quiet", "--python", python, "-c", pins, wheel, cwd=tmp_path)

    # imported from the venv, not from this checkout
    where = _run(
        python, "-c", "import tooldeck, tooldeck.cli; print(tooldeck.__file__)", cwd=tmp_path
    )
    assert Path(where.strip()).is_relative_to(venv), where
    assert ROOT.as_posix() not in where
    # the dev tools did not come along
    listed = _run(uv, "pip", "list", "--python", python, cwd=tmp_path)
    assert "pytest" not in listed and "ruff" not in listed, listed

    assert "tooldeck: the tool runtime for LLM agents." in _run(
        venv / "bin" / "tooldeck", "--help", cwd=tmp_path
    )
    # the demo reads the built-in definitions, the demo catalog, the definitions schema
    # and the toolkit manifest from the installed package
    demo = _run(venv / "bin" / "tooldeck", "demo", cwd=tmp_path)
    for expected in ("openai-responses", "Deferred loading", "submitted", "(asked, approved)"):
        assert expected in demo, expected
    # the toolkit manifest shipped in the package
    kits = _run(venv / "bin" / "tooldeck", "toolkits", "list", cwd=tmp_path)
    assert "web_research" in kits and "tooldeck defaults" in kits, kits
