"""The web_search tool: bindings, the compact result list, errors, abort, parallel calls,
and the policy's domain rules on its arguments."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from test_web_providers import API, Answer, ApiServer
from tooldeck import AbortSignal, Session, ToolContext, ToolResult, validate_arguments
from tooldeck.assembly import AssemblyError, TurnContext
from tooldeck.builtin import load_builtin_registry
from tooldeck.builtin.web.search import BUDGET_CHARS, format_results
from tooldeck.policy import Policy, SessionPolicy
from tooldeck.testing import ScriptedModel, call, reply
from tooldeck.web import SearchResult, SearchResults, WebSearchError


@pytest.fixture
def api() -> Iterator[ApiServer]:
    server = ApiServer()
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


class Fixed:
    """A provider object that answers with given results and records what it was asked."""

    name = "fixed"

    def __init__(self, results: Sequence[SearchResult] = (), **extra: Any) -> None:
        self.results = tuple(results)
        self.extra = extra
        self.asked: list[dict[str, Any]] = []

    async def search(
        self, query: str, *, limit: int = 10, recency: Any = None, domains: Sequence[str] = ()
    ) -> SearchResults:
        self.asked.append(
            {"query": query, "limit": limit, "recency": recency, "domains": list(domains)}
        )
        return SearchResults(query, self.name, self.results[:limit], **self.extra)


def invoke(
    turn: TurnContext, args: dict[str, Any], signal: AbortSignal | None = None
) -> ToolResult:
    toolset = load_builtin_registry().toolset(turn)
    tool = toolset["web_search"]
    ctx = ToolContext(
        call_id="c1",
        tool_name="web_search",
        session_id="s",
        turn=turn,
        toolset=toolset,
        signal=signal or AbortSignal(),
    )
    return asyncio.run(tool.invoke(validate_arguments(tool, json.dumps(args)).params, ctx))


HITS = [
    SearchResult(
        "Coroutines and Tasks",
        "https://docs.python.org/3/library/asyncio-task.html",
        "asyncio.timeout(delay) limits the time spent waiting.",
        "2024-10-07",
    ),
    SearchResult(
        "wait_for vs timeout",
        "https://stackoverflow.com/q/77164543",
        "Since 3.11 use asyncio.timeout.",
    ),
]


def test_results_are_a_compact_numbered_list(tmp_path: Path) -> None:
    provider = Fixed(HITS)
    turn = TurnContext("s", tmp_path, web_provider=provider)
    result = invoke(
        turn,
        {
            "query": " asyncio timeout ",
            "limit": 5,
            "recency": "week",
            "domains": ["docs.python.org"],
        },
    )
    assert provider.asked == [
        {"query": "asyncio timeout", "limit": 5, "recency": "week", "domains": ["docs.python.org"]}
    ]
    assert result.text() == (
        'Web results for "asyncio timeout" from fixed (2):\n'
        "\n"
        "1. Coroutines and Tasks\n"
        "   https://docs.python.org/3/library/asyncio-task.html\n"
        "   asyncio.timeout(delay) limits the time spent waiting. (2024-10-07)\n"
        "\n"
        "2. wait_for vs timeout\n"
        "   https://stackoverflow.com/q/77164543\n"
        "   Since 3.11 use asyncio.timeout."
    )
    assert result.details["results"][0] == {
        "title": "Coroutines and Tasks",
        "url": "https://docs.python.org/3/library/asyncio-task.html",
        "snippet": "asyncio.timeout(delay) limits the time spent waiting.",
        "published": "2024-10-07",
    }
    assert result.details["provider"] == "fixed" and result.details["recency"] == "week"


def test_the_list_fits_its_budget_and_says_what_it_left_out() -> None:
    many = tuple(
        SearchResult(f"Title {i} " + "t" * 150, f"https://site{i}.example/" + "p" * 150, "s" * 400)
        for i in range(20)
    )
    text = format_results(SearchResults("q", "x", many, answer="A short answer.", notes=("n1",)))
    assert len(text) <= BUDGET_CHARS + 200
    assert "Answer (written by x): A short answer." in text
    shown = sum(1 for line in text.split("\n") if line[:3].rstrip(". ").isdigit())
    assert 0 < shown < 20
    assert f"[{20 - shown} more result(s) not shown, to keep this short.]" in text
    assert text.endswith("[Note: n1]")
    assert "s" * 300 not in text  # snippets are cut


def test_empty_results_say_which_filters_to_loosen(tmp_path: Path) -> None:
    turn = TurnContext("s", tmp_path, web_provider=Fixed())
    result = invoke(turn, {"query": "zxqv", "recency": "day", "domains": ["a.example"]})
    assert not result.is_error
    assert result.text() == (
        'No web results for "zxqv" from fixed with recency: day; domains: a.example; try fewer '
        "filters or other words."
    )


class Failing:
    name = "failing"

    async def search(self, query: str, **_: Any) -> SearchResults:
        raise WebSearchError(
            "brave", "quota", "Request rate limit exceeded for plan.", status=429, retry_after=2
        )


def test_a_provider_error_is_one_line_and_a_typed_detail(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    result = invoke(TurnContext("s", tmp_path, web_provider=Failing()), {"query": "x"})
    assert result.is_error and "\n" not in result.text()
    assert result.text() == (
        "Web search failed (brave): Request rate limit exceeded for plan. — the search quota "
        "or rate limit is used up (retry after 2 s)."
    )
    assert result.details == {
        "error": {
            "provider": "brave",
            "kind": "quota",
            "status": 429,
            "retry_after": 2,
            "message": "Request rate limit exceeded for plan.",
        }
    }
    assert any("web_search failed" in r.getMessage() for r in caplog.records)


def test_a_named_provider_is_built_from_the_environment_and_reaches_the_server(
    tmp_path: Path,
    api: ApiServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SEARXNG_URL", api.url)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("TOOLDECK_CONFIG", raising=False)
    api.answer(Answer(body=(API / "searxng_search.json").read_bytes()))
    turn = TurnContext("s", tmp_path, web_provider="searxng")
    assert "web_search" in load_builtin_registry().toolset(turn)
    result = invoke(turn, {"query": "kyoto bamboo grove"})
    assert result.text().startswith('Web results for "kyoto bamboo grove" from searxng (2):')
    assert "[Note: engines that did not answer: brave, qwant]" in result.text()
    assert api.seen[0].query["q"] == ["kyoto bamboo grove"]


def test_a_provider_named_but_not_set_up_is_a_one_line_assembly_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BRAVE_API_KEY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("TOOLDECK_CONFIG", raising=False)
    with pytest.raises(AssemblyError) as info:
        load_builtin_registry().toolset(TurnContext("s", tmp_path, web_provider="brave"))
    assert "web search provider 'brave': no API key (set BRAVE_API_KEY)" in str(info.value)
    assert "\n" not in str(info.value)


class Hanging:
    name = "hanging"

    def __init__(self) -> None:
        self.cancelled = False

    async def search(self, query: str, **_: Any) -> SearchResults:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        raise AssertionError("unreachable")


def test_the_abort_signal_stops_a_search(tmp_path: Path) -> None:
    provider = Hanging()
    signal = AbortSignal()
    turn = TurnContext("s", tmp_path, web_provider=provider)

    async def main() -> ToolResult:
        toolset = load_builtin_registry().toolset(turn)
        tool = toolset["web_search"]
        ctx = ToolContext("c1", "web_search", "s", signal=signal, turn=turn, toolset=toolset)
        running = asyncio.ensure_future(tool.invoke({"query": "x", "limit": 8}, ctx))
        await asyncio.sleep(0)
        signal.abort("user stop")
        return await running

    result = asyncio.run(main())
    assert result.is_error and result.text() == "Searching the web was aborted (user stop)."
    assert provider.cancelled


class Meeting:
    """Answers only once two searches are running at the same time."""

    name = "meeting"

    def __init__(self) -> None:
        self.running = 0
        self.both: asyncio.Event | None = None

    async def search(self, query: str, **_: Any) -> SearchResults:
        self.both = self.both or asyncio.Event()
        self.running += 1
        if self.running == 2:
            self.both.set()
        await asyncio.wait_for(self.both.wait(), 10)  # deadlock guard, not a timing check
        return SearchResults(query, self.name, (SearchResult(query, f"https://{query}.example/"),))


def test_two_searches_of_one_step_run_in_parallel(tmp_path: Path) -> None:
    provider = Meeting()
    turn = TurnContext("s", tmp_path, web_provider=provider)
    model = ScriptedModel(
        [
            reply(call("web_search", {"query": "one"}), call("web_search", {"query": "two"})),
            reply("ok"),
        ]
    )
    session = Session(model, load_builtin_registry().toolset(turn), turn=turn)
    result = asyncio.run(session.run("search twice"))
    assert [o.is_error for o in result.tool_outputs] == [False, False]
    assert provider.running == 2


def test_domain_rules_judge_the_domains_argument(tmp_path: Path) -> None:
    policy_file = tmp_path / "policy.toml"
    policy_file.write_text(
        """
[profile]
default = "ask"
[[profile.rules]]
tools = "web_search"
action = "allow"
args = { domains = { domain = ["python.org"] } }
"""
    )
    session = SessionPolicy(Policy.load(policy_file))
    tool = load_builtin_registry().tools["web_search"]
    assert session.decide(tool, {"query": "q", "domains": ["docs.python.org"]}).action == "allow"
    assert (
        session.decide(tool, {"query": "q", "domains": ["docs.python.org", "evil.example"]}).action
        == "ask"
    )
    assert session.decide(tool, {"query": "q"}).action == "ask"  # no domains: everywhere
