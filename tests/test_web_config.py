"""Web search configuration: environment variables, the config file's [web] section, and
how a turn's ``web_provider`` binding becomes a provider."""

from __future__ import annotations

from pathlib import Path

import pytest

from tooldeck.web import (
    BraveSearch,
    DdgsSearch,
    HostedSearch,
    SearxngSearch,
    TavilySearch,
    WebConfig,
    WebConfigError,
    search_provider,
)
from tooldeck.web.config import config_path
from tooldeck.web.netguard import NetPolicy


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def env(tmp_path: Path, **values: str) -> dict[str, str]:
    """An environment with no config file unless TOOLDECK_CONFIG is given."""
    return {"HOME": str(tmp_path / "home"), **values}


def test_config_path_follows_the_variables(tmp_path: Path) -> None:
    assert (
        config_path({"TOOLDECK_CONFIG": "~/x.toml", "HOME": "/h"}) == Path("~/x.toml").expanduser()
    )
    assert config_path({"XDG_CONFIG_HOME": "/cfg"}) == Path("/cfg/tooldeck/config.toml")
    assert config_path({"HOME": "/h"}) == Path("/h/.config/tooldeck/config.toml")


def test_nothing_set_up_means_no_provider(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tooldeck.web.ddgs_search.ddgs_available", lambda: False)
    config = WebConfig.load(environ=env(tmp_path))
    assert config.chosen() is None and config.mode == "local" and config.available() == []
    with pytest.raises(WebConfigError, match="no web search provider is set up"):
        config.provider()
    assert search_provider("auto", environ=env(tmp_path)) is None


def test_the_first_provider_set_up_is_chosen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tooldeck.web.ddgs_search.ddgs_available", lambda: True)
    both = WebConfig.load(environ=env(tmp_path, TAVILY_API_KEY="tvly-1", SEARXNG_URL="http://s:8"))
    assert both.available() == ["tavily", "searxng", "ddgs"]
    assert isinstance(both.provider(), TavilySearch)
    brave = WebConfig.load(environ=env(tmp_path, BRAVE_API_KEY="b-1", TAVILY_API_KEY="t-1"))
    assert isinstance(brave.provider(), BraveSearch)
    keyless = WebConfig.load(environ=env(tmp_path))
    assert isinstance(keyless.provider(), DdgsSearch)


def test_a_named_provider_wins_and_must_be_set_up(tmp_path: Path) -> None:
    config = WebConfig.load(
        environ=env(
            tmp_path,
            TOOLDECK_WEB_SEARCH="searxng",
            BRAVE_API_KEY="b",
            SEARXNG_URL="http://10.0.0.5:8888",
        )
    )
    made = config.provider()
    assert isinstance(made, SearxngSearch) and made.base == "http://10.0.0.5:8888"
    missing = WebConfig.load(environ=env(tmp_path, TOOLDECK_WEB_SEARCH="tavily"))
    with pytest.raises(WebConfigError) as info:
        missing.provider()
    assert str(info.value) == "web search provider 'tavily': no API key (set TAVILY_API_KEY)"
    with pytest.raises(WebConfigError, match="unknown web search provider 'bing'"):
        WebConfig.load(environ=env(tmp_path, TOOLDECK_WEB_SEARCH="bing"))


def test_the_config_file_section(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
[web]
search = "brave"
mode = "both"

[web.brave]
api_key_env = "MY_BRAVE"
country = "de"
timeout = 5

[web.searxng]
url = "http://search.lan:8080"
language = "de"

[web.hosted]
max_uses = 3
allowed_domains = ["docs.python.org"]
search_context_size = "low"
""",
    )
    config = WebConfig.load(environ=env(tmp_path, TOOLDECK_CONFIG=str(path), MY_BRAVE="k-123456"))
    assert (config.search, config.mode) == ("brave", "both")
    assert config.hosted == HostedSearch(3, ("docs.python.org",), (), "low")
    brave = config.provider(net=NetPolicy(allow=("10.0.0.0/8",)))
    assert isinstance(brave, BraveSearch)
    assert (brave.country, brave.timeout, brave.net) == ("de", 5, NetPolicy(allow=("10.0.0.0/8",)))
    searx = config.provider("searxng")
    assert isinstance(searx, SearxngSearch) and searx.language == "de"
    # The environment wins over the file.
    over = WebConfig.load(
        environ=env(
            tmp_path,
            TOOLDECK_CONFIG=str(path),
            TOOLDECK_WEB_SEARCH="searxng",
            TOOLDECK_WEB_SEARCH_MODE="hosted",
            SEARXNG_URL="http://other:1",
        )
    )
    assert (over.search, over.mode) == ("searxng", "hosted")
    made = over.provider()
    assert isinstance(made, SearxngSearch) and made.base == "http://other:1"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[web]\nserch = "brave"\n', "[web] has unknown key(s) serch"),
        ('[web.brave]\napikey = "x"\n', "[web.brave] has unknown key(s) apikey"),
        ('[web.brave]\ntimeout = "5"\n', "web.brave.timeout must be a int or float"),
        ("[web.tavily]\ninclude_answer = 1\n", "web.tavily.include_answer must be a bool"),
        ("[web.searxng]\nsafesearch = true\n", "web.searxng.safesearch must be a int"),
        ('[web]\nmode = "sometimes"\n', "web search mode must be local, hosted or both"),
        ('[web.hosted]\nallowed_domains = ["a"]\nblocked_domains = ["b"]\n', "not both"),
        ("[web.hosted]\nallowed_domains = [1]\n", "must be a list of domains"),
        ("web = 3\n", "[web] must be a table"),
        ("[web\n", "TOML"),
    ],
)
def test_config_file_errors_are_one_line(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(WebConfigError) as info:
        WebConfig.load(environ=env(tmp_path, TOOLDECK_CONFIG=str(path)))
    assert message in str(info.value) and "\n" not in str(info.value)
    assert str(path) in str(info.value)


def test_an_explicit_config_file_must_exist(tmp_path: Path) -> None:
    with pytest.raises(WebConfigError, match="does not exist"):
        WebConfig.load(environ=env(tmp_path, TOOLDECK_CONFIG=str(tmp_path / "nope.toml")))
    # The default place may be missing.
    assert WebConfig.load(environ=env(tmp_path)).options == {}


def test_the_file_is_read_again_when_it_changes(tmp_path: Path) -> None:
    path = write(tmp_path, '[web]\nsearch = "brave"\n')
    first = WebConfig.load(environ=env(tmp_path, TOOLDECK_CONFIG=str(path)))
    path.write_text('[web]\nsearch = "tavily"\nmode = "hosted"\n')
    second = WebConfig.load(environ=env(tmp_path, TOOLDECK_CONFIG=str(path)))
    assert (first.search, second.search, second.mode) == ("brave", "tavily", "hosted")


def test_keys_from_the_file_are_masked_in_the_repr(tmp_path: Path) -> None:
    path = write(tmp_path, '[web.tavily]\napi_key = "tvly-file-secret-999"\n')
    config = WebConfig.load(environ=env(tmp_path, TOOLDECK_CONFIG=str(path)))
    assert "tvly-file-secret-999" not in repr(config) and "'api_key': '***'" in repr(config)
    made = config.provider("tavily")
    assert "tvly-file-secret-999" not in repr(made)
    assert made._key == "tvly-file-secret-999"  # type: ignore[attr-defined]


def test_search_provider_bindings(tmp_path: Path) -> None:
    class Mine:
        name = "mine"

        async def search(self, query: str, **_: object) -> object:
            return None

    mine = Mine()
    assert search_provider(None) is None
    assert search_provider(mine) is mine
    assert search_provider("p", environ=env(tmp_path)) is None  # the old bare flag: no search
    assert search_provider("intranet", environ=env(tmp_path, BRAVE_API_KEY="b")) is None
    by_name = search_provider("brave", environ=env(tmp_path, BRAVE_API_KEY="b-key"))
    assert isinstance(by_name, BraveSearch)
    net = NetPolicy(allow=("wiki.corp.example",))
    auto = search_provider(
        "auto", net=net, environ=env(tmp_path, SEARXNG_URL="http://127.0.0.1:8888")
    )
    assert isinstance(auto, SearxngSearch) and auto.net is net
    with pytest.raises(WebConfigError, match="no API key"):
        search_provider("brave", environ=env(tmp_path))
    with pytest.raises(WebConfigError, match="async search"):
        search_provider(42)
