"""The API reference build (mkdocs + mkdocstrings, run by scripts/check with --strict)
fails when the docs name a symbol that does not exist.

Each test builds a small site with the project's own mkdocs settings (plugins, handler
options, the Sphinx-role extension), into a temporary directory, and checks that the
build fails and names what is missing.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]


def build(
    tmp_path: Path, page: str, extra_paths: tuple[Path, ...] = ()
) -> subprocess.CompletedProcess[str]:
    config: dict[str, Any] = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text(page)
    config["docs_dir"] = str(docs)
    config["site_dir"] = str(tmp_path / "site")
    config["nav"] = [{"Home": "index.md"}]
    python = config["plugins"][2]["mkdocstrings"]["handlers"]["python"]
    python["paths"] = [*map(str, extra_paths), str(ROOT / "src")]
    python["options"]["extensions"] = [
        str(ROOT / "scripts" / "griffe_sphinx_roles.py") + ":SphinxRoles"
    ]
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config))
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(tmp_path / "mkdocs.yml")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_settings_build_a_page_of_the_reference(tmp_path: Path) -> None:
    page = "# ok\n\n::: tooldeck.offload\n\nSee [`OffloadStore`][tooldeck.offload.OffloadStore].\n"
    done = build(tmp_path, page)
    assert done.returncode == 0, done.stderr
    html = (tmp_path / "site" / "index.html").read_text()
    assert 'id="tooldeck.offload.OffloadStore"' in html


def test_a_missing_symbol_on_a_page_fails_the_build(tmp_path: Path) -> None:
    done = build(tmp_path, "# Reference\n\n::: tooldeck.NoSuchThing\n")
    assert done.returncode != 0
    assert "tooldeck.NoSuchThing" in done.stderr


def test_a_link_to_a_missing_symbol_fails_the_build(tmp_path: Path) -> None:
    done = build(tmp_path, "# Guide\n\nUse [`Tool`][tooldeck.Tol].\n\n::: tooldeck.offload\n")
    assert done.returncode != 0
    assert "tooldeck.Tol" in done.stderr


def test_a_sphinx_role_naming_nothing_fails_the_build(tmp_path: Path) -> None:
    # A docstring as tooldeck's are written: one role names a function that exists, the
    # other the name it had before it was renamed.
    package = tmp_path / "src" / "renamed"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        '"""Call :func:`check_arguments`, not :func:`validate_arguments`."""\n\n\n'
        "def check_arguments() -> None:\n"
        '    """Check them."""\n'
    )
    done = build(tmp_path, "# Reference\n\n::: renamed\n", (tmp_path / "src",))
    assert done.returncode != 0
    assert ":func:`validate_arguments` in renamed names nothing" in done.stderr
    assert "check_arguments`" not in done.stderr  # the existing one resolved
