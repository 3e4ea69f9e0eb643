"""The ``tool_search`` tool: several queries per search, and near-duplicates as alternatives."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tooldeck import ArgumentError, Tool, ToolContext, validate_arguments
from tooldeck.search import SearchConfig, ToolIndex, tool_search_tool

CATALOG: list[dict[str, Any]] = [
    {"name": "github__create_branch", "description": "Create a new branch in a repository",
     "namespace": "github"},
    {"name": "gitlab__create_branch", "description": "Create a new branch in a GitLab project",
     "namespace": "gitlab"},
    {"name": "github__create_issue", "description": "Open a new issue in a repository",
     "namespace": "github"},
    {"name": "github__list_workflow_runs", "description": "List the runs of a workflow",
     "namespace": "github"},
    {"name": "gmail__send_message", "description": "Send an email message", "namespace": "gmail"},
    {"name": "slack__post_message", "description": "Post a message to a Slack channel",
     "namespace": "slack"},
    {"name": "drive__list_files", "description": "Search the files in Google Drive",
     "namespace": "drive"},
    {"name": "github__delete_branch", "description": "Delete a branch of a repository",
     "namespace": "github"},
]  # fmt: skip


def _index(**config: Any) -> ToolIndex:
    return ToolIndex.from_definitions(
        CATALOG, semantic=False, config=SearchConfig(**config), cache=False
    )


def _run(tool: Tool, raw: str | dict[str, Any]) -> str:
    params = validate_arguments(tool, raw).params
    ctx = ToolContext(call_id="c1", tool_name=tool.name)
    return asyncio.run(tool.invoke(params, ctx)).text()


def test_a_list_of_queries_returns_the_union_labelled_by_query() -> None:
    index = _index()
    selected: list[list[str]] = []
    tool = tool_search_tool(index, selected.append)
    text = _run(tool, {"query": ["list workflow runs", "create issue"], "limit": 1})
    assert selected == [["github__list_workflow_runs", "github__create_issue"]]
    lines = text.splitlines()
    assert lines[0] == "Tools now available to call, by query:"
    first, second = lines.index("For 'list workflow runs':"), lines.index("For 'create issue':")
    assert lines[first + 1].startswith("- github__list_workflow_runs: List the runs")
    assert lines[second + 1].startswith("- github__create_issue: Open a new issue")


def test_a_tool_found_by_two_queries_is_listed_once() -> None:
    names: list[list[str]] = []
    tool = tool_search_tool(_index(), names.append)
    text = _run(tool, {"query": ["create a branch", "new branch", "create a branch"], "limit": 2})
    assert text.count("github__create_branch: ") == 1
    assert "(listed above)" in text
    assert text.count("For '") == 2  # the repeated query runs once
    assert len(names[0]) == len(set(names[0]))


def test_one_query_in_a_list_matching_nothing_is_reported_alone() -> None:
    selected: list[list[str]] = []
    tool = tool_search_tool(_index(), selected.append)
    text = _run(tool, {"query": ["send email", "zzqxj wqzzx"]})
    assert "No tools match 'zzqxj wqzzx'" in text
    assert "gmail__send_message" in text and selected and "gmail__send_message" in selected[0]
    nothing = tool_search_tool(_index(), selected.append)
    before = len(selected)
    assert "No tools match" in _run(nothing, {"query": ["zzqxj", "qqqxx"]})
    assert len(selected) == before  # no match: the callback is not called


def test_a_single_string_still_works_and_the_schema_offers_both() -> None:
    tool = tool_search_tool(_index())
    text = _run(tool, '{"query": "send an email", "limit": 1}')
    assert text.startswith("1 tool(s) for 'send an email', now available to call:")
    query = tool.schema["properties"]["query"]
    kinds = {alt.get("type") for alt in query["anyOf"]}
    assert kinds == {"string", "array"}
    assert "one short query per tool" in tool.description
    assert "list" in query["description"]


@pytest.mark.parametrize(
    "raw",
    [
        {"query": []},
        {"query": [""]},
        {"query": ["ok", ""]},
        {"query": ["q"] * 11},
        {"query": ["x" * 501]},
        {"query": [1, 2]},
        {"query": ["ok"], "limit": 0},
        {"query": ["ok"], "extra": True},
    ],
)
def test_bad_query_lists_are_rejected(raw: dict[str, Any]) -> None:
    with pytest.raises(ArgumentError):
        validate_arguments(tool_search_tool(_index()), raw)


def test_activity_names_the_queries() -> None:
    tool = tool_search_tool(_index())
    one = validate_arguments(tool, {"query": "x"}).params
    two = validate_arguments(tool, {"query": ["a", "b"]}).params
    assert tool.describe_activity is not None
    assert tool.describe_activity(one) == "Searching tools for 'x'"
    assert tool.describe_activity(two) == "Searching tools for 2 queries"


# -- alternatives --------------------------------------------------------------------------
def test_same_action_in_two_services_shares_one_group() -> None:
    index = _index(alternatives=True)
    groups = index.search_groups("create a branch", 3)
    names = [[h.name for h in g] for g in groups]
    assert names[0] == ["github__create_branch", "gitlab__create_branch"]
    assert all(len({index.doc(n).namespace for n in g}) == len(g) for g in names)
    flat = [h.name for h in index.search("create a branch", 3)]
    assert flat[:2] == ["github__create_branch", "gitlab__create_branch"]
    # limit counts groups: one slot more for another action than the flat list has
    assert len(groups) == 3 and sum(len(g) for g in names) == 4


def test_siblings_of_one_service_are_never_grouped() -> None:
    index = _index(alternatives=True, alternative_similarity=-1.0)  # any cosine would do
    for group in index.search_groups("branch", 5):
        spaces = [index.doc(h.name).namespace for h in group]
        assert len(spaces) == len(set(spaces))


def test_the_tool_shows_alternatives_on_one_line_and_loads_them() -> None:
    selected: list[list[str]] = []
    tool = tool_search_tool(_index(alternatives=True), selected.append)
    text = _run(tool, {"query": "create a branch", "limit": 1})
    assert text.splitlines()[1] == (
        "- github__create_branch: Create a new branch in a repository "
        "(the same in other services: gitlab__create_branch)"
    )
    assert selected == [["github__create_branch", "gitlab__create_branch"]]
    plain = tool_search_tool(_index(alternatives=False), selected.append)
    assert "other services" not in _run(plain, {"query": "create a branch", "limit": 1})


def test_groups_use_tool_vectors_when_there_are_some() -> None:
    pytest.importorskip("wordllama")
    defs = [
        {"name": "aws__translate_text", "description": "Translate text into another language",
         "namespace": "aws"},
        {"name": "gcp__translate", "description": "Translate text into another language",
         "namespace": "gcp"},
        {"name": "gcp__detect_language", "description": "Detect the language of a text",
         "namespace": "gcp"},
    ]  # fmt: skip
    config = SearchConfig(alternatives=True, alternative_similarity=0.8)
    index = ToolIndex.from_definitions(defs, config=config, cache=False)
    assert index.semantic
    groups = index.search_groups("translate a sentence", 2)
    assert {h.name for h in groups[0]} == {"aws__translate_text", "gcp__translate"}
    strict = ToolIndex.from_definitions(
        defs, config=SearchConfig(alternatives=True, alternative_similarity=1.01), cache=False
    )
    assert all(len(g) == 1 for g in strict.search_groups("translate a sentence", 3))


def test_groups_of_odd_queries_and_limits() -> None:
    index = _index(alternatives=True)
    assert index.search_groups("", 5) == [] and index.search_groups("zzqxj", 5) == []
    assert index.search_groups("branch", 0) == []
    assert len(index.search_groups("branch", 1)) == 1


def test_the_python_examples_of_the_deferred_loading_doc_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Every ``python`` block of docs/deferred-loading.md runs, and prints what it says."""
    import re
    from pathlib import Path

    doc = Path(__file__).resolve().parents[1] / "docs" / "deferred-loading.md"
    blocks = re.findall(r"```python\n(.*?)```", doc.read_text(encoding="utf-8"), re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, str(doc), "exec", dont_inherit=True), {})
        printed = capsys.readouterr().out.splitlines()
        expected = [line[5:] for line in block.splitlines() if line.startswith("# -> ")]
        assert printed == expected
