"""The package as a user gets it: an sdist, a wheel built from that sdist, the wheel
installed into a clean virtual environment (no source tree on the path, no dev tools),
and the installed package importing, answering ``tooldeck --help`` and running the
offline demo, which reads the packaged data files (the built-in definitions, the demo
catalog, the definitions schema, the toolkit manifest).

The core wheel alone (no extra) gets a clean environment of its own: a one-tool scripted
agent runs in it, and every extra it lacks is hit the way a user hits it (a model string,
an import, a cron schedule, a PostgreSQL DSN, the ``tooldeck`` command...), each answered
by one line naming the extra. Then the ``demo`` extra alone is added to the same
environment and the offline demo runs (the README's demo command installs just that).

The build and the install go through uv (the one running the tests when they run under
``uv run``); the clean environment gets the dependency versions of ``uv.lock``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tooldeck._extras import EXTRAS as TABLE

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
NAME = PYPROJECT["project"]["name"]
VERSION = PYPROJECT["project"]["version"]
EXTRAS = set(PYPROJECT["project"]["optional-dependencies"])
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
    assert "tooldeck = tooldeck.__main__:main" in entry_points
    extras = {
        line.split(":", 1)[1].strip()
        for line in metadata.splitlines()
        if line.startswith("Provides-Extra:")
    }
    assert extras == EXTRAS == set(TABLE) | {"all"}
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
    # every extra (tooldeck[all]): the core alone is the tests below
    _run(uv, "pip", "install", "--quiet", "--python", python, "-c", pins, f"{wheel}[all]",
         cwd=tmp_path)  # fmt: skip

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


# -- the core wheel alone -----------------------------------------------------------------

# What each case does, the way a user's program does it: run by the clean environment's
# Python, it prints one JSON line per case named, the message the case ended with.
CASES_SCRIPT = Path(__file__).with_name("install_cases.py")
LINE = re.compile(
    r"^(?P<kind>\w+): (?P<purpose>.+) the (?P<extra>\w+) extra "
    r"\(no module named '(?P<module>[^']+)'\): pip install 'tooldeck\[(?P=extra)\]'$"
)
# case -> the extra its one line must name, in the core environment
CORE_CASES = {
    "openai": "openai",
    "openrouter": "openai",
    "anthropic": "anthropic",
    "gemini": "gemini",
    "mcp": "mcp",
    "gateway": "mcp",
    "search": "search",
    "console approvals": "cli",
    "cron": "cron",
    "postgres": "postgres",
    "dbos": "dbos",
    "otel": "otel",
}
# with the demo extra added: the embedders are reachable (tooldeck.search imports)
DEMO_CASES = {"onnx": "onnx", "fastembed": "fastembed", "semantic": "semantic"}
OPTIONAL_DISTRIBUTIONS = {
    "openai", "anthropic", "mcp", "typer", "rich", "psycopg", "cronsim", "pystemmer",
    "dbos", "wordllama", "trafilatura", "ddgs", "onnxruntime", "numpy", "fastembed",
    "opentelemetry-sdk", "google-genai",
}  # fmt: skip


def _check_line(said: str, extra: str) -> None:
    """``said`` is ``MissingExtra: <the line of extra>`` exactly as the table makes it."""
    found = LINE.match(said)
    assert found, said
    assert found["kind"] == "MissingExtra" and found["extra"] == extra, said
    entry = TABLE[extra]
    assert found["purpose"] == entry.purpose, said
    module = found["module"]
    assert any(module == m or module.startswith(f"{m}.") for m in entry.modules), said


def _cases(python: Path, names: list[str], cwd: Path) -> dict[str, str]:
    out = _run(python, CASES_SCRIPT, *names, cwd=cwd)
    said: dict[str, str] = {}
    for line in out.splitlines():
        said.update(json.loads(line))
    return said


def _one_line_exit_2(args: list[str | Path], cwd: Path) -> str:
    result = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=_clean_env(), capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert result.stdout == "", result.stdout
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0].removeprefix("error: ")


@pytest.fixture(scope="module")
def core_venv(built: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clean virtual environment with the core wheel only (no extra)."""
    _, wheel = built
    uv = _uv()
    where = tmp_path_factory.mktemp("core")
    pins = where / "constraints.txt"
    _run(
        uv, "export", "--locked", "--no-hashes", "--no-dev", "--all-extras",
        "--no-emit-project", "--quiet", "--output-file", pins, cwd=ROOT,
    )  # fmt: skip
    venv = where / "venv"
    _run(uv, "venv", "--quiet", "--python", sys.executable, venv, cwd=where)
    python = venv / "bin" / "python"
    _run(uv, "pip", "install", "--quiet", "--python", python, "-c", pins, wheel, cwd=where)
    return venv


def _installed(venv: Path) -> set[str]:
    listed = _run(_uv(), "pip", "list", "--format", "json", "--python", venv / "bin" / "python",
                  cwd=venv)  # fmt: skip
    return {p["name"].lower() for p in json.loads(listed)}


def test_the_core_wheel_runs_an_agent_and_each_missing_extra_is_one_line(
    core_venv: Path, tmp_path: Path
) -> None:
    installed = _installed(core_venv)
    assert "tooldeck" in installed and "pydantic" in installed
    assert not installed & OPTIONAL_DISTRIBUTIONS, sorted(installed & OPTIONAL_DISTRIBUTIONS)

    said = _cases(core_venv / "bin" / "python", [*CORE_CASES, "ddgs", "pdf"], tmp_path)
    assert said.pop("agent") == ["2 + 3 = 5", "end_turn"]  # type: ignore[comparison-overlap]
    for case, extra in CORE_CASES.items():
        _check_line(said[case], extra)
    # a web search provider tells the model, as a configuration problem, in the same words
    assert said["ddgs"].startswith("WebSearchError: ") and said["ddgs"].endswith(
        "the ddgs extra (no module named 'ddgs'): pip install 'tooldeck[ddgs]'"
    ), said["ddgs"]
    # without the web extra a PDF is a placeholder naming it, not an error
    assert "reading PDFs needs the web extra: pip install 'tooldeck[web]'" in said["pdf"]

    # the command, without the cli extra: one line, exit status 2, no traceback
    tooldeck = core_venv / "bin" / "tooldeck"
    for args in ([tooldeck, "--help"], [tooldeck, "demo"], [core_venv / "bin" / "python", "-m",
                 "tooldeck", "tools", "list"]):  # fmt: skip
        _check_line("MissingExtra: " + _one_line_exit_2(args, tmp_path), "cli")


def test_the_demo_extra_alone_runs_the_offline_demo(
    built: tuple[Path, Path], core_venv: Path, tmp_path: Path
) -> None:
    _, wheel = built
    python = core_venv / "bin" / "python"
    pins = core_venv.parent / "constraints.txt"
    _run(_uv(), "pip", "install", "--quiet", "--python", python, "-c", pins, f"{wheel}[demo]",
         cwd=tmp_path)  # fmt: skip
    installed = _installed(core_venv)
    assert {"typer", "rich", "mcp", "pystemmer"} <= installed
    assert not installed & (OPTIONAL_DISTRIBUTIONS - {"typer", "rich", "mcp", "pystemmer"})

    demo = _run(core_venv / "bin" / "tooldeck", "demo", cwd=tmp_path)
    for expected in ("openai-responses", "Deferred loading", "submitted", "(asked, approved)"):
        assert expected in demo, expected
    # a live turn names the provider's extra, before anything runs
    line = _one_line_exit_2([core_venv / "bin" / "tooldeck", "demo", "-m", "openai:gpt-5.4"],
                            tmp_path)  # fmt: skip
    _check_line("MissingExtra: " + line, "openai")
    script = tmp_path / "script.py"
    script.write_text("def scripted_model(run):\n    raise NotImplementedError\n")
    dsn = "postgresql://postgres@127.0.0.1:5432/test"
    line = _one_line_exit_2(
        [core_venv / "bin" / "tooldeck", "worker", "--dsn", dsn, "--script", script], tmp_path
    )
    _check_line("MissingExtra: " + line, "dbos")
    said = _cases(python, list(DEMO_CASES), tmp_path)
    said.pop("agent")
    for case, extra in DEMO_CASES.items():
        _check_line(said[case], extra)
