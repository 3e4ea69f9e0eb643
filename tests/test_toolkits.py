"""Toolkit manifests, recursive resolution, agent definitions and every fallback path."""

from __future__ import annotations

from pathlib import Path

import pytest

from tooldeck.agents.toolkits import (
    AgentDefinition,
    ToolkitError,
    ToolkitManifest,
    load_agents,
    resolve_agent_tools,
)


def manifest(tmp_path: Path, text: str) -> ToolkitManifest:
    path = tmp_path / "toolkits.toml"
    path.write_text(text)
    return ToolkitManifest.load(path)


def test_defaults_resolve() -> None:
    m = ToolkitManifest.load()
    assert m.resolve("_default").tools == ("read_document", "grep_files")
    assert m.resolve("common_read").tools == ("read_document", "grep_files", "list_files")
    assert m.resolve("common_write").tools == ("write_file", "edit_file")
    general = m.resolve("general_purpose")
    assert len(general.tools) == len(set(general.tools))
    assert general.tools[:3] == ("read_document", "grep_files", "list_files")
    assert {"web_fetch", "run_bash", "write_file", "status"} <= set(general.tools)
    assert general.tree[0] == (0, "general_purpose") and (1, "web_research") in general.tree
    assert m.check() == []


def test_recursive_includes_keep_order_and_remove_duplicates(tmp_path: Path) -> None:
    m = manifest(
        tmp_path,
        """
[a]
tools = ["x", "y"]
[b]
includes = ["a"]
tools = ["y", "z"]
[c]
includes = ["b", "a"]
tools = ["w", "x"]
""",
    )
    r = m.resolve("c")
    assert r.tools == ("x", "y", "z", "w")
    assert r.tree == ((0, "c"), (1, "b"), (2, "a"), (1, "a"))


def test_cycles_name_the_path(tmp_path: Path) -> None:
    m = manifest(
        tmp_path,
        """
[a]
includes = ["b"]
[b]
includes = ["c"]
[c]
includes = ["a"]
[self]
includes = ["self"]
""",
    )
    with pytest.raises(ToolkitError, match="cycle: a -> b -> c -> a"):
        m.resolve("a")
    with pytest.raises(ToolkitError, match="cycle: self -> self"):
        m.resolve("self")
    assert len(m.check()) >= 3


def test_missing_include_names_the_referencing_toolkit(tmp_path: Path) -> None:
    m = manifest(tmp_path, '[outer]\nincludes = ["inner"]\n[inner]\nincludes = ["ghost"]\n')
    with pytest.raises(ToolkitError, match="toolkit 'inner' includes unknown toolkit 'ghost'"):
        m.resolve("outer")


def test_user_manifest_overrides_defaults_by_name(tmp_path: Path) -> None:
    m = manifest(
        tmp_path,
        '[common_read]\ndescription = "mine"\ntools = ["read_document"]\n'
        '[mine]\nincludes = ["common_read"]\n',
    )
    assert m.resolve("web_research").tools[:1] == ("read_document",)
    assert "list_files" not in m.resolve("web_research").tools
    assert m.toolkits["common_read"].description == "mine"
    assert "general_purpose" in m.names


def test_bad_manifests(tmp_path: Path) -> None:
    with pytest.raises(ToolkitError, match="not valid TOML"):
        manifest(tmp_path, "[a\n")
    with pytest.raises(ToolkitError, match="list of strings"):
        manifest(tmp_path, '[a]\ntools = "x"\n')
    with pytest.raises(ToolkitError, match="unknown keys"):
        manifest(tmp_path, '[a]\ntool = ["x"]\n')
    with pytest.raises(ToolkitError, match="unknown toolkit 'nope'"):
        ToolkitManifest.load().resolve("nope")


def agent(text: str) -> AgentDefinition:
    return AgentDefinition.parse(text, "test.md")


AVAILABLE = [
    "read_document",
    "grep_files",
    "list_files",
    "write_file",
    "edit_file",
    "web_search",
    "web_fetch",
    "notes",
]


def test_resolution_order_and_fallbacks() -> None:
    m = ToolkitManifest.load()
    by_kit = agent("---\nname: r\ntoolkit: web_research\ntools: [write_file]\n---\nResearch.")
    got = resolve_agent_tools(by_kit, m, AVAILABLE)
    assert got.via == "toolkit:web_research" and "write_file" not in got.tools
    assert got.warnings == ()
    assert by_kit.instructions == "Research."

    legacy = agent("---\nname: l\ntools: [edit_file, read_document, edit_file]\n---\n")
    got = resolve_agent_tools(legacy, m, AVAILABLE)
    assert got.via == "tools" and got.tools == ("edit_file", "read_document")

    plain = agent("---\nname: p\n---\nbody")
    assert resolve_agent_tools(plain, m, AVAILABLE).tools == ("read_document", "grep_files")

    typo = agent("---\nname: t\ntoolkit: web_reserch\ntools: [write_file]\n---\n")
    got = resolve_agent_tools(typo, m, AVAILABLE)
    assert got.via == "_default" and got.tools == ("read_document", "grep_files")
    assert "did you mean 'web_research'" in got.warnings[0]


def test_unknown_tools_warn_and_are_dropped() -> None:
    got = resolve_agent_tools(
        agent("---\nname: x\ntools: [read_document, teleport]\n---\n"),
        ToolkitManifest.load(),
        AVAILABLE,
    )
    assert got.tools == ("read_document",)
    assert "['teleport'] do not exist here" in got.warnings[0]


def test_bad_agent_files(tmp_path: Path) -> None:
    for text, message in [
        ("no frontmatter", "starts with YAML frontmatter"),
        ("---\nname: x\n", "not closed"),
        ("---\n[unclosed\n---\n", "not valid YAML"),
        ("---\ndescription: d\n---\n", "'name' is required"),
        ("---\nname: x\ntools: read\n---\n", "'tools' must be a list"),
    ]:
        with pytest.raises(ToolkitError, match=message):
            agent(text)
    (tmp_path / "a.md").write_text("---\nname: a\ndescription: first\n---\nA")
    (tmp_path / "b.md").write_text("---\nname: a\n---\nduplicate")
    (tmp_path / "c.md").write_text("nothing")
    agents, problems = load_agents(tmp_path)
    assert list(agents) == ["a"] and len(problems) == 2
