"""Which web search provider a turn uses, configured once: environment and config file.

Sources, strongest first: keyword arguments, environment variables, the ``[web]``
section of the config file (``TOOLDECK_CONFIG``, else
``$XDG_CONFIG_HOME/tooldeck/config.toml``, else ``~/.config/tooldeck/config.toml``):

    [web]
    search = "brave"           # brave | tavily | searxng | ddgs   (TOOLDECK_WEB_SEARCH)
    mode = "local"             # local | hosted | both              (TOOLDECK_WEB_SEARCH_MODE)

    [web.brave]
    api_key_env = "BRAVE_API_KEY"   # the variable holding the key (the default)
    country = "us"

    [web.searxng]
    url = "http://10.0.0.5:8888"    # or SEARXNG_URL

    [web.hosted]                    # the model provider's own search (mode hosted / both)
    max_uses = 5
    allowed_domains = ["docs.python.org"]

With no ``search`` named, the first provider that is set up is chosen: Brave
(``BRAVE_API_KEY``), Tavily (``TAVILY_API_KEY``), SearXNG (``SEARXNG_URL``), then
``ddgs`` when that library is installed. Keys are read from the environment (an
``api_key`` in the file works too, but a file is easier to leak); they never appear in a
``repr``, a message or a log line.

:func:`search_provider` turns a turn's ``web_provider`` binding into a provider: a
:class:`~tooldeck.web.WebProvider` object as it is; ``"auto"`` the configured one (or
none); a provider's name that provider, built from the configuration (a missing key is
a :class:`WebConfigError`); any other string (the bare flag of older versions) no search
provider, so the turn gets ``web_fetch`` only.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeAlias, cast

from .._config_files import ConfigFileError, load_toml
from ..errors import TooldeckError
from ._base import WebProvider, WebSearchError
from .netguard import NetPolicy

__all__ = ["CONFIG_VARIABLE", "MODE_VARIABLE", "PROVIDER_NAMES", "SEARCH_VARIABLE", "config_path"]

CONFIG_VARIABLE = "TOOLDECK_CONFIG"
SEARCH_VARIABLE = "TOOLDECK_WEB_SEARCH"
MODE_VARIABLE = "TOOLDECK_WEB_SEARCH_MODE"
PROVIDER_NAMES: tuple[str, ...] = ("brave", "tavily", "searxng", "ddgs")
KEY_VARIABLES = {"brave": "BRAVE_API_KEY", "tavily": "TAVILY_API_KEY"}
URL_VARIABLE = "SEARXNG_URL"

WebSearchMode: TypeAlias = Literal["local", "hosted", "both"]
MODES: tuple[WebSearchMode, ...] = ("local", "hosted", "both")

_log = logging.getLogger("tooldeck.web")
_SECRET_WORDS = ("key", "token", "secret", "password")

_OPTIONS: dict[str, dict[str, type | tuple[type, ...]]] = {
    "brave": {
        "api_key": str,
        "api_key_env": str,
        "url": str,
        "country": str,
        "search_lang": str,
        "safesearch": str,
        "timeout": (int, float),
    },
    "tavily": {
        "api_key": str,
        "api_key_env": str,
        "url": str,
        "search_depth": str,
        "topic": str,
        "include_answer": bool,
        "timeout": (int, float),
    },
    "searxng": {
        "url": str,
        "language": str,
        "safesearch": int,
        "categories": str,
        "timeout": (int, float),
    },
    "ddgs": {"backend": str, "region": str, "safesearch": str, "timeout": int},
    "hosted": {
        "max_uses": int,
        "allowed_domains": list,
        "blocked_domains": list,
        "search_context_size": str,
    },
}


class WebConfigError(TooldeckError, ValueError):
    """The web configuration cannot be used; the message is one line saying what to fix."""


@dataclass(frozen=True, slots=True)
class HostedSearch:
    """Options of the model provider's own web search (``[web.hosted]``).

    ``max_uses`` caps searches per request (Anthropic); ``allowed_domains`` /
    ``blocked_domains`` restrict results (Anthropic takes one of them; OpenAI takes
    ``allowed_domains``); ``search_context_size`` is OpenAI's ``low`` / ``medium`` /
    ``high``.
    """

    max_uses: int | None = None
    allowed_domains: tuple[str, ...] = ()
    blocked_domains: tuple[str, ...] = ()
    search_context_size: str | None = None


def config_path(environ: Mapping[str, str] | None = None) -> Path:
    """Where the config file is looked for (it need not exist)."""
    env = os.environ if environ is None else environ
    explicit = env.get(CONFIG_VARIABLE)
    if explicit:
        return Path(explicit).expanduser()
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or Path.home()) / ".config")
    return Path(base) / "tooldeck" / "config.toml"


_FILE_CACHE: dict[Path, tuple[tuple[int, int], dict[str, Any]]] = {}


def _web_section(path: Path, explicit: bool) -> dict[str, Any]:
    try:
        st = path.stat()
    except FileNotFoundError:
        if explicit:
            raise WebConfigError(f"{CONFIG_VARIABLE}: {path} does not exist") from None
        return {}
    except OSError as exc:
        raise WebConfigError(f"{path}: cannot read the config file ({exc})") from None
    stamp = (st.st_mtime_ns, st.st_size)
    cached = _FILE_CACHE.get(path)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    try:
        document = load_toml(path)
    except ConfigFileError as exc:
        raise WebConfigError(f"{path}: {exc.problem}") from None
    except OSError as exc:
        raise WebConfigError(f"{path}: cannot read the config file ({exc})") from None
    web = document.get("web", {})
    if not isinstance(web, dict):
        raise WebConfigError(f"{path}: [web] must be a table")
    _FILE_CACHE[path] = (stamp, web)
    return web


def _check(section: str, table: Any, where: str) -> dict[str, Any]:
    if not isinstance(table, dict):
        raise WebConfigError(f"{where}: [web.{section}] must be a table")
    allowed = _OPTIONS[section]
    unknown = sorted(set(table) - set(allowed))
    if unknown:
        raise WebConfigError(
            f"{where}: [web.{section}] has unknown key(s) {', '.join(unknown)} "
            f"(known: {', '.join(sorted(allowed))})"
        )
    for key, value in table.items():
        wanted = allowed[key]
        ok = isinstance(value, wanted) and not (isinstance(value, bool) and wanted is not bool)
        if not ok:
            names = (
                wanted.__name__
                if isinstance(wanted, type)
                else " or ".join(t.__name__ for t in wanted)
            )
            raise WebConfigError(f"{where}: web.{section}.{key} must be a {names}")
    return dict(table)


@dataclass(frozen=True, slots=True)
class WebConfig:
    """The web settings in force: ``search`` (a provider name or ``None``), ``mode``,
    the per-provider options and the hosted-search options. See the module docstring."""

    search: str | None = None
    mode: WebSearchMode = "local"
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    hosted: HostedSearch = field(default_factory=HostedSearch)
    environ: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)
    source: str = "(defaults)"

    def __repr__(self) -> str:
        shown = {
            name: {
                k: ("***" if any(w in k for w in _SECRET_WORDS) and k != "api_key_env" else v)
                for k, v in opts.items()
            }
            for name, opts in self.options.items()
        }
        return (
            f"WebConfig(search={self.search!r}, mode={self.mode!r}, options={shown!r}, "
            f"hosted={self.hosted!r}, source={self.source!r})"
        )

    @classmethod
    def load(
        cls, path: str | Path | None = None, *, environ: Mapping[str, str] | None = None
    ) -> WebConfig:
        """Read the environment and the config file (see the module docstring).

        Raises :class:`WebConfigError` with a one-line message naming the key and file.
        """
        env = dict(os.environ if environ is None else environ)
        explicit = path is not None or bool(env.get(CONFIG_VARIABLE))
        file = Path(path).expanduser() if path is not None else config_path(env)
        web = _web_section(file, explicit)
        where = str(file)
        unknown = sorted(set(web) - {"search", "mode", *PROVIDER_NAMES, "hosted"})
        if unknown:
            raise WebConfigError(
                f"{where}: [web] has unknown key(s) {', '.join(unknown)} (known: search, "
                f"mode, hosted, {', '.join(PROVIDER_NAMES)})"
            )
        options = {name: _check(name, web[name], where) for name in PROVIDER_NAMES if name in web}
        hosted_table = _check("hosted", web.get("hosted", {}), where)
        search = env.get(SEARCH_VARIABLE) or web.get("search")
        source = f"{SEARCH_VARIABLE}" if env.get(SEARCH_VARIABLE) else where
        if search is not None:
            search = str(search).strip().lower()
            if search not in PROVIDER_NAMES:
                raise WebConfigError(
                    f"{source}: unknown web search provider {search!r} "
                    f"(use one of {', '.join(PROVIDER_NAMES)})"
                )
        mode = env.get(MODE_VARIABLE) or web.get("mode") or "local"
        if mode not in MODES:
            where_mode = MODE_VARIABLE if env.get(MODE_VARIABLE) else where
            raise WebConfigError(
                f"{where_mode}: web search mode must be local, hosted or both, not {mode!r}"
            )
        for key in ("allowed_domains", "blocked_domains"):
            values = hosted_table.get(key, [])
            if not all(isinstance(v, str) and v for v in values):
                raise WebConfigError(f"{where}: web.hosted.{key} must be a list of domains")
        hosted = HostedSearch(
            max_uses=hosted_table.get("max_uses"),
            allowed_domains=tuple(hosted_table.get("allowed_domains", ())),
            blocked_domains=tuple(hosted_table.get("blocked_domains", ())),
            search_context_size=hosted_table.get("search_context_size"),
        )
        if hosted.allowed_domains and hosted.blocked_domains:
            raise WebConfigError(
                f"{where}: web.hosted takes allowed_domains or blocked_domains, not both"
            )
        return cls(
            search, cast(WebSearchMode, mode), options, hosted, env, where if web else source
        )

    # -- providers --------------------------------------------------------------------
    def _key(self, name: str) -> str | None:
        opts = self.options.get(name, {})
        variable = opts.get("api_key_env") or KEY_VARIABLES[name]
        return self.environ.get(variable) or opts.get("api_key") or None

    def available(self) -> list[str]:
        """The providers that are set up, in the order ``search`` is chosen from."""
        found = [n for n in ("brave", "tavily") if self._key(n)]
        if self.environ.get(URL_VARIABLE) or self.options.get("searxng", {}).get("url"):
            found.append("searxng")
        from .ddgs_search import ddgs_available

        if ddgs_available():
            found.append("ddgs")
        return found

    def chosen(self) -> str | None:
        """The provider ``web_search`` uses: ``search``, else the first available."""
        if self.search is not None:
            return self.search
        found = self.available()
        return found[0] if found else None

    def provider(self, name: str | None = None, *, net: NetPolicy | None = None) -> WebProvider:
        """Build provider ``name`` (default: :meth:`chosen`); :class:`WebConfigError` if
        it is not set up."""
        name = name or self.chosen()
        if name is None:
            raise WebConfigError(
                "no web search provider is set up: set BRAVE_API_KEY, TAVILY_API_KEY or "
                "SEARXNG_URL, or install tooldeck[ddgs] (see docs/web.md)"
            )
        if name not in PROVIDER_NAMES:
            raise WebConfigError(
                f"unknown web search provider {name!r} (use one of {', '.join(PROVIDER_NAMES)})"
            )
        opts = {
            k: v
            for k, v in self.options.get(name, {}).items()
            if k not in ("api_key", "api_key_env")
        }
        try:
            return self._build(name, opts, net)
        except WebSearchError as exc:
            raise WebConfigError(f"web search provider {name!r}: {exc.message}") from None

    def _build(self, name: str, opts: dict[str, Any], net: NetPolicy | None) -> WebProvider:
        if name == "brave":
            from .brave import BraveSearch

            return BraveSearch(self._key("brave") or "", net=net, **opts)
        if name == "tavily":
            from .tavily import TavilySearch

            return TavilySearch(self._key("tavily") or "", net=net, **opts)
        if name == "searxng":
            from .searxng import SearxngSearch

            url = self.environ.get(URL_VARIABLE) or opts.pop("url", None)
            opts.pop("url", None)
            if not url:
                raise WebSearchError("searxng", "config", "no instance URL (set SEARXNG_URL)")
            return SearxngSearch(url, net=net, **opts)
        from .ddgs_search import DdgsSearch, ddgs_available

        if not ddgs_available():
            raise WebSearchError(
                "ddgs", "config", "the ddgs library is not installed (pip install 'tooldeck[ddgs]')"
            )
        proxy = (net.proxy if net is not None else None) or self.environ.get("TOOLDECK_WEB_PROXY")
        return DdgsSearch(proxy=proxy, **opts)


def search_provider(
    binding: Any,
    *,
    net: NetPolicy | None = None,
    environ: Mapping[str, str] | None = None,
) -> WebProvider | None:
    """The search provider a turn's ``web_provider`` binding stands for (see the module
    docstring); ``None`` when the turn has no search provider.

    Raises :class:`WebConfigError` when a provider is named but not set up, or the
    configuration is broken.
    """
    if binding is None:
        return None
    if not isinstance(binding, str):
        if not callable(getattr(binding, "search", None)):
            raise WebConfigError(
                f"web_provider must be a provider name or an object with an async search(), "
                f"not {type(binding).__name__}"
            )
        return cast(WebProvider, binding)
    name = binding.strip().lower()
    if name in ("auto", "default"):
        config = WebConfig.load(environ=environ)
        return config.provider(net=net) if config.chosen() is not None else None
    if name in PROVIDER_NAMES:
        return WebConfig.load(environ=environ).provider(name, net=net)
    _log.debug("web_provider %r names no search provider: web_fetch only", binding)
    return None
