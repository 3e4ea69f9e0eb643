"""Skills: catalog of names and short descriptions, bodies loaded by use_skill."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tooldeck import ToolContext, validate_arguments
from tooldeck.agents.skills import Skill, SkillCatalog
from tooldeck.assembly import TurnContext


def make_skill(root: Path, folder: str, front: str, body: str = "Do it well.") -> Path:
    path = root / folder
    path.mkdir(parents=True)
    (path / "SKILL.md").write_text(f"---\n{front}\n---\n{body}\n")
    return path


def test_catalog_shows_only_names_and_short_descriptions(tmp_path: Path) -> None:
    make_skill(tmp_path, "pdf", "name: pdf-forms\ndescription: Fill PDF forms.", "SECRET BODY TEXT")
    make_skill(tmp_path, "long", "name: long\ndescription: " + "word " * 100)
    catalog, problems = SkillCatalog.load(tmp_path)
    assert problems == []
    tool = catalog.use_skill_tool()
    assert "- pdf-forms: Fill PDF forms." in tool.description
    assert "SECRET BODY TEXT" not in tool.description
    long_line = next(line for line in tool.description.splitlines() if line.startswith("- long"))
    assert len(long_line) < 180 and long_line.endswith("…")


def test_use_skill_returns_the_body_and_lists_files(tmp_path: Path) -> None:
    folder = make_skill(
        tmp_path, "pdf", "name: pdf-forms\ndescription: Fill PDF forms.", "Step 1: read forms.md"
    )
    (folder / "forms.md").write_text("field list")
    (folder / "scripts").mkdir()
    (folder / "scripts" / "fill.py").write_text("print(1)")
    catalog, _ = SkillCatalog.load(tmp_path)
    tool = catalog.use_skill_tool()
    params = validate_arguments(tool, '{"name": "pdf-forms"}').params
    result = asyncio.run(tool.invoke(params, ToolContext()))
    text = result.text()
    assert "Step 1: read forms.md" in text and "forms.md" in text and "scripts/fill.py" in text
    assert catalog.active == {"pdf-forms"}
    missing = asyncio.run(
        tool.invoke(validate_arguments(tool, '{"name": "pdf"}').params, ToolContext())
    )
    assert missing.is_error and "pdf-forms" in missing.text()


def test_mcp_backed_skill_activates_its_server(tmp_path: Path) -> None:
    make_skill(tmp_path, "gh", "name: github\ndescription: Work with GitHub.\nmcp_server: github")
    activated: list[Any] = []

    async def activate(skill: Skill) -> None:
        activated.append(skill.mcp_server)

    catalog, _ = SkillCatalog.load(tmp_path)
    tool = catalog.use_skill_tool(on_activate=activate)
    result = asyncio.run(
        tool.invoke(validate_arguments(tool, '{"name":"github"}').params, ToolContext())
    )
    assert activated == ["github"]
    assert "MCP server 'github'" in result.text()


def test_bad_skills_are_reported_and_the_source_follows_the_catalog(tmp_path: Path) -> None:
    make_skill(tmp_path, "a", "name: a\ndescription: A.")
    make_skill(tmp_path, "dup", "name: a\ndescription: again.")
    make_skill(tmp_path, "nodesc", "name: b")
    (tmp_path / "nofront").mkdir()
    (tmp_path / "nofront" / "SKILL.md").write_text("just text")
    catalog, problems = SkillCatalog.load(tmp_path)
    assert list(catalog.skills) == ["a"] and len(problems) == 3
    ctx = TurnContext(session_id="s", home=tmp_path)
    assert [t.name for t in catalog.tools_for(ctx)] == ["use_skill"]
    assert SkillCatalog().tools_for(ctx) == ()
