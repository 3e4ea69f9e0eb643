"""docs/web.md's config file is accepted (its Python blocks run in tests/test_docs_blocks.py)."""

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
