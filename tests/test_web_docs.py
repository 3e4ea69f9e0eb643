"""docs/web.md's examples run: its Python blocks, and its config file is accepted."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tooldeck.web import HostedSearch, SearxngSearch, WebConfig

DOC = Path(__file__).parent.parent / "docs" / "web.md"


@pytest.fixture(autouse=True)
def no_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in (
        "TOOLDECK_CONFIG",
        "XDG_CONFIG_HOME",
        "TOOLDECK_WEB_SEARCH",
        "TOOLDECK_WEB_SEARCH_MODE",
        "BRAVE_API_KEY",
        "TAVILY_API_KEY",
        "SEARXNG_URL",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("index", range(len(re.findall(r"```python\n", DOC.read_text()))))
def test_web_md_python_examples_run(index: int) -> None:
    block = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)[index]
    exec(compile(block, f"docs/web.md block {index + 1}", "exec"), {"__name__": "web_md"})


def test_web_md_config_file_is_accepted(tmp_path: Path) -> None:
    [toml] = re.findall(r"```toml\n(.*?)```", DOC.read_text(), re.S)
    path = tmp_path / "config.toml"
    path.write_text(toml)
    config = WebConfig.load(path, environ={"HOME": str(tmp_path)})
    assert (config.search, config.mode) == ("searxng", "local")
    assert config.hosted == HostedSearch(5, ("docs.python.org",), (), "medium")
    made = config.provider()
    assert isinstance(made, SearxngSearch) and made.base == "http://10.0.0.5:8888"
    for name in ("brave", "tavily"):
        assert set(config.options[name]) >= {"api_key_env"}
