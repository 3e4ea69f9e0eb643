"""Local tool search: tokenisation, ranking, the tool_search tool and ``tooldeck search``."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field
from typer.testing import CliRunner

from tooldeck import ArgumentError, Tool, ToolContext, validate_arguments
from tooldeck.cli.search import search_command
from tooldeck.search import (
    SearchConfig,
    SearchHit,
    ToolDoc,
    ToolIndex,
    load_definitions,
    one_line,
    stem,
    tokenize,
    tool_search_tool,
)


def _schema(**props: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {k: {"type": "string", "description": v} for k, v in props.items()},
    }


# A small real subset of bench/catalog/tools.json (names, descriptions and parameters as
# the servers publish them; sources: modelcontextprotocol/servers, github/github-mcp-server,
# containers/kubernetes-mcp-server, sooperset/mcp-atlassian, botocore, Google discovery).
SLACK = "MCP Server for the Slack API, enabling Claude to interact with Slack workspaces."
GITHUB = "GitHub's official MCP server: repositories, issues, pull requests, Actions."
CATALOG: list[dict[str, Any]] = [
    {
        "name": "slack__slack_post_message",
        "description": "Post a new message to a Slack channel",
        "input_schema": _schema(channel_id="The ID of the channel to post to", text="The text"),
        "namespace": "slack",
        "namespace_description": SLACK,
    },
    {
        "name": "slack__slack_reply_to_thread",
        "description": "Reply to a specific message thread",
        "input_schema": _schema(thread_ts="Timestamp of the parent message", text="The reply"),
        "namespace": "slack",
        "namespace_description": SLACK,
    },
    {
        "name": "slack__slack_list_channels",
        "description": "List public channels in the workspace",
        "input_schema": _schema(cursor="Pagination cursor for next page"),
        "namespace": "slack",
        "namespace_description": SLACK,
    },
    {
        "name": "github__create_pull_request",
        "description": "Open new pull request",
        "input_schema": _schema(base="Branch to merge into", head="Branch containing changes"),
        "namespace": "github",
        "namespace_description": GITHUB,
    },
    {
        "name": "github__merge_pull_request",
        "description": "Merge pull request",
        "input_schema": _schema(merge_method="Merge method", pullNumber="Pull request number"),
        "namespace": "github",
        "namespace_description": GITHUB,
    },
    {
        "name": "github__list_issues",
        "description": "List issues",
        "input_schema": _schema(state="Filter by state", labels="Filter by labels"),
        "namespace": "github",
        "namespace_description": GITHUB,
    },
    {
        "name": "github__create_branch",
        "description": "Create branch",
        "input_schema": _schema(branch="Name for new branch", from_branch="Source branch"),
        "namespace": "github",
        "namespace_description": GITHUB,
    },
    {
        "name": "git__git_diff_staged",
        "description": "Shows changes that are staged for commit",
        "input_schema": _schema(repo_path="Path to Git repository"),
        "namespace": "git",
    },
    {
        "name": "git__git_log",
        "description": "Shows the commit logs with optional date filtering",
        "input_schema": _schema(repo_path="Path to Git repository"),
        "namespace": "git",
    },
    {
        "name": "filesystem__read_text_file",
        "description": "Read complete contents of a file as text.",
        "input_schema": _schema(path="Path of the file"),
        "namespace": "filesystem",
    },
    {
        "name": "filesystem__edit_file",
        "description": "Make selective edits using advanced pattern matching and formatting.",
        "input_schema": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File to edit"},
                "edits": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "oldText": {"type": "string", "description": "Text to search for"},
                            "newText": {"type": "string", "description": "Text to replace with"},
                        },
                    },
                },
            },
        },
        "namespace": "filesystem",
    },
    {
        "name": "kubernetes__pods_log",
        "description": "Get the logs of a Kubernetes Pod in the current or provided namespace",
        "input_schema": _schema(name="Name of the Pod", namespace="Namespace of the Pod"),
        "namespace": "kubernetes",
    },
    {
        "name": "kubernetes__helm_install",
        "description": "Install a Helm chart in the current or provided namespace",
        "input_schema": _schema(chart="Chart reference to install"),
        "namespace": "kubernetes",
    },
    {
        "name": "atlassian__jira_transition_issue",
        "description": "Transition a Jira issue to a new status.",
        "input_schema": _schema(issue_key="Jira issue key", transition_id="Transition ID"),
        "namespace": "atlassian",
    },
    {
        "name": "aws_s3__PutObject",
        "description": "Adds an object to a bucket.",
        "input_schema": _schema(Bucket="The bucket name", Key="Object key"),
        "namespace": "aws_s3",
        "namespace_description": "Amazon Simple Storage Service.",
    },
    {
        "name": "aws_s3__ListBuckets",
        "description": "Returns a list of all buckets owned by the authenticated sender.",
        "input_schema": _schema(Prefix="Limits the response to bucket names that begin with"),
        "namespace": "aws_s3",
        "namespace_description": "Amazon Simple Storage Service.",
    },
    {
        "name": "secretmanager__projects_secrets_versions_access",
        "description": "Accesses a SecretVersion. This call returns the secret data.",
        "input_schema": _schema(name="The resource name of the SecretVersion"),
        "namespace": "secretmanager",
        "namespace_description": "Google Secret Manager API. Stores sensitive data.",
    },
    {
        "name": "time__convert_time",
        "description": "Convert time between timezones.",
        "input_schema": _schema(source_timezone="Source IANA timezone name"),
        "namespace": "time",
    },
]


def lexical(defs: Any, **options: Any) -> ToolIndex:
    """An index ranking with BM25F alone: these tests pin the lexical ranker."""
    return ToolIndex.from_definitions(defs, semantic=False, **options)


@pytest.fixture(scope="module")
def index() -> ToolIndex:
    return lexical(CATALOG)


def top(index: ToolIndex, query: str, k: int = 1) -> list[str]:
    return [h.name for h in index.search(query, k)]


# -- tokenisation ------------------------------------------------------------------------
def test_tokenize_snake_kebab_dotted_and_namespaces() -> None:
    assert tokenize("create_pull_request") == ["creat", "pull", "request"]
    assert tokenize("github__list_pull_requests") == ["github", "list", "pull", "request"]
    assert tokenize("atlas-list-clusters") == ["atlas", "list", "cluster"]
    assert tokenize("users.messages.send") == ["user", "messag", "send"]


def test_tokenize_camel_case_keeps_the_joined_word_and_its_parts() -> None:
    joined = ["createchatcomplet", "creat", "chat", "complet"]
    assert tokenize("createChatCompletion") == joined
    assert tokenize("PutObject") == ["putobject", "put", "object"]
    assert tokenize("HTTPServer") == ["httpserver", "http", "server"]
    assert tokenize("GitHub") == ["github", "git", "hub"]  # "github" still matches


def test_tokenize_digits_stopwords_and_stemming() -> None:
    assert tokenize("s3 ec2 base64") == ["s3", "ec2", "ec", "base64", "base", "64"]
    assert tokenize("Get the logs of a pod") == ["get", "log", "pod"]
    assert tokenize("messages") == tokenize("message") == ["messag"]
    assert tokenize("listing replies") == ["list", "repli"]
    assert tokenize("") == [] and tokenize("!!! ... ???") == []


def test_stemmer_is_snowball_english_and_consistent() -> None:
    for a, b in [("created", "create"), ("creating", "create"), ("scheduled", "schedule")]:
        assert stem(a) == stem(b)
    assert stem("running") == "run" and stem("buckets") == "bucket"
    assert stem("translation") == stem("translate")  # Snowball folds some derivations
    assert stem("s3") == "s3" and stem("ios") == "ios"


def test_one_line_takes_the_first_sentence() -> None:
    assert one_line("Accesses a SecretVersion. This call returns the data.") == (
        "Accesses a SecretVersion."
    )
    assert one_line("e.g. a short one") == "e.g. a short one"
    assert len(one_line("word " * 200, limit=40)) <= 40


# -- ranking -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("post a message to a slack channel", "slack__slack_post_message"),
        ("answer in a slack thread", "slack__slack_reply_to_thread"),  # synonym answer~reply
        ("open a new PR on github", "github__create_pull_request"),  # pr~pull request
        ("merge a pull request", "github__merge_pull_request"),
        ("what is staged for the next commit", "git__git_diff_staged"),
        ("show commit history", "git__git_log"),  # history~log
        ("read a text file", "filesystem__read_text_file"),
        ("replace oldText with newText in a file", "filesystem__edit_file"),  # nested params
        ("tail the logs of a k8s pod", "kubernetes__pods_log"),  # k8s~kubernetes
        ("install a helm chart", "kubernetes__helm_install"),
        ("move a jira ticket to done", "atlassian__jira_transition_issue"),
        ("upload an object into an s3 bucket", "aws_s3__PutObject"),
        ("list my amazon buckets", "aws_s3__ListBuckets"),  # amazon~aws
        (
            "read a secret from google secret manager",
            "secretmanager__projects_secrets_versions_access",
        ),
        ("convert 9am from one time zone to another", "time__convert_time"),  # time zone
    ],
)
def test_ranking_sanity(index: ToolIndex, query: str, expected: str) -> None:
    assert top(index, query, 1) == [expected], index.search(query, 3)


def test_exact_name_ranks_first_and_identifier_words_select(index: ToolIndex) -> None:
    assert top(index, "github__create_branch") == ["github__create_branch"]
    assert top(index, "create_branch") == ["github__create_branch"]  # without the namespace
    got = top(index, "load github__list_issues and time__convert_time please", 2)
    assert set(got) == {"github__list_issues", "time__convert_time"}
    # an ordinary word equal to a name is no identifier: no exact-name bonus for "find"
    tiny = lexical([{"name": "find", "description": "Run a find query against a collection"}])
    assert tiny.search("find restaurants nearby")[0].score < 50
    assert tiny.search("find")[0].score > 100  # the whole query is the name


def test_hits_are_name_score_pairs_sorted_and_limited(index: ToolIndex) -> None:
    hits = index.search("create something on github", 3)
    assert len(hits) == 3 and all(isinstance(h, SearchHit) for h in hits)
    name, score = hits[0]
    assert isinstance(name, str) and score > 0
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert len(index.search("github", 100)) == 4  # only tools that match at all
    assert index.search("github", 0) == [] and index.search("github", -1) == []
    again = index.search("create something on github", 3)
    assert again == hits  # deterministic


@pytest.mark.parametrize(
    "query", ["", "   ", "\n\t", "!!!", "the of and to a", "zzqxj wqzzx", "🙂", "草泥马"]
)
def test_empty_and_odd_queries_return_nothing(index: ToolIndex, query: str) -> None:
    assert index.search(query) == []


def test_long_and_unusual_queries_are_fast_and_safe(index: ToolIndex) -> None:
    long_query = "slack message " + " ".join(f"word{i}" for i in range(5000))
    started = time.perf_counter()
    hits = index.search(long_query, 5)
    assert time.perf_counter() - started < 0.1
    assert hits[0].name.startswith("slack__")
    assert top(index, "SLACK   Post\tMESSAGE") == ["slack__slack_post_message"]
    assert top(index, "Créer un message slack") == ["slack__slack_post_message"]
    with pytest.raises(TypeError):
        index.search(None)  # type: ignore[arg-type]


def test_index_from_tools_definitions_and_docs() -> None:
    class Args(BaseModel):
        city: str = Field(description="City to get the forecast for")

    weather = Tool.from_model(
        Args,
        name="get_forecast",
        description="Weather forecast for the next days.",
        execute=lambda p, c: "sunny",
        namespace="weather",
        namespace_description="Weather service",
    )
    openai_style = {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "description": "Find an order",
            "parameters": _schema(order_id="The order number"),
        },
    }
    mcp_style = {"name": "ping", "description": "Check the server", "inputSchema": {}}
    index = ToolIndex([weather, openai_style, mcp_style, ToolDoc(name="noop")], semantic=False)
    assert len(index) == 4 and "lookup_order" in index and "missing" not in index
    assert top(index, "what city weather tomorrow") == ["get_forecast"]
    assert top(index, "order number") == ["lookup_order"]
    assert index.doc("get_forecast").namespace == "weather"
    assert index.summary("get_forecast") == "Weather forecast for the next days."
    with pytest.raises(ValueError, match="two tools named"):
        ToolIndex([weather, weather], semantic=False)
    with pytest.raises(ValueError, match="name"):
        lexical([{"description": "nameless"}])
    with pytest.raises(TypeError):
        ToolIndex([42], semantic=False)  # type: ignore[list-item]
    assert ToolIndex([], semantic=False).search("anything") == []
    assert ToolIndex([]).search("anything") == []


def test_config_switches_change_matching() -> None:
    defs = [
        {"name": "remove_file", "description": "Remove a file"},
        {"name": "list_files", "description": "List files"},
    ]
    assert top(lexical(defs), "delete a file") == ["remove_file"]
    plain = lexical(defs, config=SearchConfig(synonyms=False))
    assert plain.search("delete", 5) == []  # no synonyms: "delete" matches nothing
    unstemmed = lexical(defs, config=SearchConfig(stemming=False))
    assert unstemmed.search("removing", 5) == []
    assert top(lexical(defs), "removing") == ["remove_file"]


def test_exact_name_words_pick_the_sibling_by_number() -> None:
    defs = [
        {"name": "ListBuckets", "description": "Returns the buckets of the account."},
        {"name": "DeleteBucket", "description": "Removes the bucket."},
    ]
    both = lexical(defs, config=SearchConfig(phrase_bonus=0.0))
    stemmed_only = lexical(defs, config=SearchConfig(phrase_bonus=0.0, exact_word_coverage=0.0))
    # stemming alone cannot tell "buckets" from "bucket": the unstemmed name word can
    gap = dict(both.search("buckets", 2))
    gap_stemmed = dict(stemmed_only.search("buckets", 2))
    assert gap["ListBuckets"] - gap["DeleteBucket"] > (
        gap_stemmed["ListBuckets"] - gap_stemmed["DeleteBucket"]
    )
    parts = dict(both.explain("buckets", "ListBuckets"))
    assert parts["'buckets'"] == pytest.approx(0.25)  # 0.5 shared over two name words


def test_phrase_bonus_rewards_adjacent_terms() -> None:
    defs = [
        {"name": "list_streams", "description": "Returns the live streams of a channel."},
        {"name": "list_broadcasts", "description": "Lists broadcasts: live, upcoming, past."},
    ]
    on = lexical(defs, config=SearchConfig(exact_word_coverage=0.0))
    parts = dict(on.explain("list live streams", "list_streams"))
    assert parts['"live stream"'] == pytest.approx(0.5)
    assert '"list live"' not in parts
    off = lexical(defs, config=SearchConfig(exact_word_coverage=0.0, phrase_bonus=0.0))
    assert on.search("live streams", 1)[0].score == pytest.approx(
        off.search("live streams", 1)[0].score + 0.5
    )


def test_explain_lists_the_matching_terms(index: ToolIndex) -> None:
    parts = dict(index.explain("post a message to a slack channel", "slack__slack_post_message"))
    assert "slack" in parts and "channel" in parts
    assert any(k.endswith("~") for k in parts)  # send~post folded in
    total = sum(parts.values())
    assert total == pytest.approx(index.search("post a message to a slack channel")[0].score, 1e-3)


# -- the tool_search tool ----------------------------------------------------------------
def _run(tool: Tool, raw: str | dict[str, Any]) -> str:
    params = validate_arguments(tool, raw).params
    ctx = ToolContext(call_id="c1", tool_name=tool.name)
    return asyncio.run(tool.invoke(params, ctx)).text()


def test_tool_search_tool_validates_returns_and_reports(index: ToolIndex) -> None:
    selected: list[list[str]] = []
    tool = tool_search_tool(index, selected.append)
    assert tool.name == "tool_search" and tool.read_only
    assert tool.schema["required"] == ["query"]
    text = _run(tool, '{"query": "send a slack message", "limit": 2}')
    assert selected == [["slack__slack_post_message", "slack__slack_reply_to_thread"]] or (
        len(selected) == 1 and selected[0][0] == "slack__slack_post_message"
    )
    assert "slack__slack_post_message: Post a new message to a Slack channel" in text
    assert len(selected[0]) == 2 and text.count("\n- ") == 2
    # default limit 5; names reported in rank order
    _run(tool, {"query": "github"})
    assert selected[1] == [h.name for h in index.search("github", 5)]


def test_tool_search_tool_rejects_bad_arguments(index: ToolIndex) -> None:
    tool = tool_search_tool(index, lambda names: None)
    for raw in (
        '{"limit": 3}',
        '{"query": ""}',
        '{"query": "x", "limit": 0}',
        '{"query": "x", "limit": 21}',
        '{"query": "x", "extra": 1}',
        '{"query": 5}',
    ):
        with pytest.raises(ArgumentError):
            validate_arguments(tool, raw)


def test_tool_search_tool_without_match_does_not_call_back(index: ToolIndex) -> None:
    calls: list[list[str]] = []
    tool = tool_search_tool(index, calls.append, name="find_tools", description="Find tools.")
    text = _run(tool, '{"query": "zzqx"}')
    assert calls == [] and "No tools match 'zzqx'" in text
    assert tool.name == "find_tools" and tool.description == "Find tools."
    assert "No tools match" in _run(tool_search_tool(index), '{"query": "zzqx"}')  # no callback


# -- CLI ---------------------------------------------------------------------------------
@pytest.fixture
def cli() -> typer.Typer:
    app = typer.Typer()
    app.command("search")(search_command)

    @app.command("version")
    def version() -> None:  # a second command, so "search" is a real subcommand
        pass

    return app


@pytest.fixture
def catalog_file(tmp_path: Path) -> Path:
    path = tmp_path / "tools.json"
    path.write_text(json.dumps({"version": 1, "tools": CATALOG}), encoding="utf-8")
    return path


def test_cli_prints_ranked_hits(cli: typer.Typer, catalog_file: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(
        cli, ["search", "--catalog", str(catalog_file), "post to a slack channel", "-n", "2"]
    )
    assert result.exit_code == 0, result.output
    assert "slack__slack_post_message" in result.output and "2 of 18 tools" in result.output
    result = runner.invoke(
        cli, ["search", "-c", str(catalog_file), "merge a pull request", "--json", "--explain"]
    )
    assert result.exit_code == 0, result.output
    hits = json.loads(result.output)
    assert hits[0]["name"] == "github__merge_pull_request" and hits[0]["rank"] == 1
    assert hits[0]["score"] > hits[-1]["score"] and "merg~" in hits[0]["matched"]
    assert len(hits) <= 5


def test_cli_exit_codes_and_default_catalog(
    cli: typer.Typer, catalog_file: Path, tmp_path: Path
) -> None:
    runner = CliRunner()
    nothing = runner.invoke(cli, ["search", "-c", str(catalog_file), "zzqx"])
    assert nothing.exit_code == 1 and "match" in nothing.output
    missing = runner.invoke(cli, ["search", "-c", str(tmp_path / "nope.json"), "x"])
    assert missing.exit_code == 2
    (tmp_path / "bad.json").write_text('{"tools": 3}', encoding="utf-8")
    assert runner.invoke(cli, ["search", "-c", str(tmp_path / "bad.json"), "x"]).exit_code == 2
    builtin = runner.invoke(cli, ["search", "read a text file", "--json", "-n", "1"])
    assert builtin.exit_code == 0 and json.loads(builtin.output)[0]["name"] == "read_document"


def test_load_definitions_accepts_list_and_object(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps(CATALOG[:2]), encoding="utf-8")
    docs = load_definitions(tmp_path / "a.json")
    assert [d.name for d in docs] == [CATALOG[0]["name"], CATALOG[1]["name"]]
    assert docs[0].namespace == "slack" and docs[0].input_schema["type"] == "object"


_WORDS = ["create", "issue", "slack", "message", "time", "zone", "file", "read", "git"]
_WORDS += ["commit", "pod", "log", "bucket", "delete", "branch", "convert", "zzqx", "the"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    words=st.lists(st.sampled_from(_WORDS) | st.text(max_size=8), min_size=1, max_size=6),
    limit=st.integers(1, 20),
)
def test_the_relevance_floor_keeps_the_best_and_only_what_scores_above_it(
    index: ToolIndex, words: list[str], limit: int
) -> None:
    query = " ".join(words)
    every = index.search(query, limit)
    floored = index.search(query, limit, floor=True)
    if not every:
        assert floored == []
        return
    least = index.floor(every[0].score)
    assert floored == [h for h in every if h.score >= round(least, 4) - 1e-4][: len(floored)]
    assert floored[0] == every[0]  # the best always stays (lexical: no absolute floor)
    assert all(h.score >= least - 1e-4 for h in floored)
    groups = index.search_groups(query, limit, floor=True)
    assert {h.name for g in groups for h in g} <= {h.name for h in index.search(query, 100)}
    assert all(h.score >= least - 1e-4 for g in groups for h in g)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("current time in a timezone", ["time__convert_time"]),
        ("list my amazon buckets", ["aws_s3__ListBuckets"]),
        ("tail the logs of a k8s pod", ["kubernetes__pods_log"]),
        ("show commit history", ["git__git_log", "kubernetes__pods_log"]),
        ("github__create_branch", ["github__create_branch"]),
    ],
)
def test_the_floor_leaves_the_unrelated_out(
    index: ToolIndex, query: str, expected: list[str]
) -> None:
    assert [h.name for h in index.search(query, 5, floor=True)] == expected
    assert len(index.search(query, 5)) > len(expected) or "__" in query
