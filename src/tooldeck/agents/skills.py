"""Skills: folders of instructions the model loads on demand with ``use_skill``.

A skill is a folder holding a ``SKILL.md``: YAML frontmatter (``name``, ``description``,
optionally ``mcp_server``, the MCP server the skill needs) and a Markdown body. The model
sees only the catalog (names and short descriptions, in ``use_skill``'s description);
``use_skill(name)`` returns the body and lists the skill's other files. A skill that
names an MCP server activates it through the catalog's ``on_activate`` (e.g. an MCP
source's :meth:`~tooldeck.mcp.McpSource.activation_hook`), so that server's tools join
the session from the next step. The catalog is a tool source: put it in ``tools=``.
The skill catalog is separate from function-schema search: skills are instructions,
not tools.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field

from .._config_files import ConfigFileError, parse_yaml, read_text
from ..assembly import Source, TurnContext
from ..context import ToolContext
from ..result import ToolResult
from ..tools import Tool

__all__ = ["Skill", "SkillCatalog"]

SHORT_DESCRIPTION = 160
MAX_FILES_LISTED = 50


@dataclass(frozen=True, slots=True)
class Skill:
    name: str
    description: str
    folder: Path
    mcp_server: str | None = None

    @property
    def body(self) -> str:
        text = read_text(self.folder / "SKILL.md")
        return (
            text.split("\n---", 1)[1].split("\n", 1)[-1].strip()
            if text.startswith("---")
            else text.strip()
        )

    def files(self) -> list[str]:
        found = sorted(
            str(p.relative_to(self.folder))
            for p in self.folder.rglob("*")
            if p.is_file() and p.name != "SKILL.md" and not p.is_symlink()
        )
        return found


def _parse(path: Path) -> Skill:
    """The skill in ``path``; ``ValueError`` (or ``OSError``) saying why it is unusable."""
    text = read_text(path)
    if not text.startswith("---") or "\n---" not in text[3:]:
        raise ValueError("SKILL.md must start with YAML frontmatter closed by '---'")
    try:
        meta = parse_yaml(text[3:].split("\n---", 1)[0]) or {}
    except ConfigFileError as exc:
        raise ValueError(f"frontmatter: {exc.problem}") from exc
    if not isinstance(meta, dict):
        raise ValueError("the frontmatter must be a mapping")
    name, description = meta.get("name"), meta.get("description")
    if not isinstance(name, str) or not name.strip():
        raise ValueError("'name' is required")
    if not isinstance(description, str) or not description.strip():
        raise ValueError("'description' is required")
    server = meta.get("mcp_server")
    if server is not None and not isinstance(server, str):
        raise ValueError("'mcp_server' must be a server name")
    return Skill(name.strip(), " ".join(description.split()), path.parent, server)


class UseSkill(BaseModel):
    name: str = Field(description="The skill's name, exactly as listed.")


ActivateHook = Callable[[Skill], Awaitable[object] | object]


class SkillCatalog(Source):
    """The skills found in some folders; a tool source: ``use_skill`` when there are
    skills, else nothing. ``on_activate`` is called with a skill that names an MCP server
    when the model loads it."""

    label = "skills"

    def __init__(self, skills: Iterable[Skill] = (), on_activate: ActivateHook | None = None):
        self.skills = {s.name: s for s in skills}
        self.active: set[str] = set()
        self.on_activate = on_activate
        self._tool: tuple[ActivateHook | None, Tool] | None = None

    @classmethod
    def load(cls, *folders: str | Path) -> tuple[SkillCatalog, list[str]]:
        """Every ``*/SKILL.md`` under the folders; returns (catalog, problems)."""
        skills: dict[str, Skill] = {}
        problems: list[str] = []
        for folder in folders:
            for path in sorted(Path(folder).glob("*/SKILL.md")):
                try:
                    skill = _parse(path)
                except (OSError, ValueError) as exc:
                    problems.append(f"{path}: {exc}")
                    continue
                if skill.name in skills:
                    problems.append(
                        f"{path}: skill {skill.name!r} also in {skills[skill.name].folder}"
                    )
                    continue
                skills[skill.name] = skill
        return cls(skills.values()), problems

    def listing(self) -> str:
        lines = []
        for skill in self.skills.values():
            short = skill.description
            if len(short) > SHORT_DESCRIPTION:
                short = short[: SHORT_DESCRIPTION - 1] + "…"
            lines.append(f"- {skill.name}: {short}")
        return "\n".join(lines)

    def use_skill_tool(self, on_activate: ActivateHook | None = None) -> Tool:
        catalog = self

        async def execute(params: UseSkill, ctx: ToolContext) -> ToolResult:
            skill = catalog.skills.get(params.name)
            if skill is None:
                names = ", ".join(catalog.skills) or "(none)"
                return ToolResult.error(f"No skill named {params.name!r}. Skills: {names}.")
            try:
                body = skill.body
                files = skill.files()
            except (OSError, ConfigFileError) as exc:
                return ToolResult.error(f"Skill {skill.name} cannot be read: {exc}")
            catalog.active.add(skill.name)
            notes = []
            if skill.mcp_server and on_activate is not None:
                outcome = on_activate(skill)
                if inspect.isawaitable(outcome):
                    await outcome
                notes.append(
                    f"The tools of MCP server {skill.mcp_server!r} are available "
                    "from your next step."
                )
            listed = files[:MAX_FILES_LISTED]
            more = len(files) - len(listed)
            file_text = (
                (
                    "\n\nFiles in this skill (read them with read_document):\n"
                    + "\n".join(f"- {skill.folder / f}" for f in listed)
                    + (f"\n- ... and {more} more" if more > 0 else "")
                )
                if files
                else ""
            )
            extra = ("\n\n" + " ".join(notes)) if notes else ""
            return ToolResult(
                content=f"# Skill: {skill.name}\n\n{body}{file_text}{extra}",
                details={
                    "skill": skill.name,
                    "folder": str(skill.folder),
                    "files": files,
                    "mcp_server": skill.mcp_server,
                },
            )

        return Tool.from_model(
            UseSkill,
            name="use_skill",
            description=(
                "Load a skill's instructions before doing a task it covers. Skills:\n"
                + self.listing()
            ),
            execute=execute,
            read_only=True,
            describe_activity=lambda p: f"Loading skill {p.name}",
        )

    def tools_for(self, ctx: TurnContext, /) -> Sequence[Tool]:
        if not self.skills:
            return ()
        made = self._tool
        if made is None or made[0] is not self.on_activate:  # made once per hook
            made = self._tool = (self.on_activate, self.use_skill_tool(self.on_activate))
        return (made[1],)
