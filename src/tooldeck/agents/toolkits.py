"""Toolkits: named bundles of tools for sub-agents, and agent definitions that use them.

A resolved toolkit is a tool source over the tools it picks from:
``manifest.resolve("common_read").of([registry, mcp])``.

A manifest (``toolkits.toml``) declares toolkits, each with a ``description``, ``tools``
and ``includes``. tooldeck ships defaults; user manifests load on top of them, and a
user toolkit with the name of a default one replaces it entirely.

Resolution expands ``includes`` recursively, depth first, each include before the
toolkit's own ``tools``; order is kept and duplicates are removed. A cycle is an error
naming the cycle path; a missing include is an error naming the toolkit that referenced
it.

An agent definition is a Markdown file with YAML frontmatter (``name``, ``description``,
``model``, and ``toolkit:`` or a legacy ``tools:`` list); the body is the instructions.
Its tools are: the ``toolkit`` if present and known; else the legacy ``tools`` list
verbatim; else ``_default``. A misspelled toolkit falls back to ``_default`` with a
warning naming the closest known toolkit.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .._config_files import ConfigFileError, parse_toml, parse_yaml, read_text
from ..assembly import Source
from ..errors import TooldeckError
from ..sources.listed import ToolList, Tools

__all__ = [
    "DEFAULT_MANIFEST_PATH",
    "AgentDefinition",
    "AgentTools",
    "Resolution",
    "Toolkit",
    "ToolkitError",
    "ToolkitManifest",
    "load_agents",
]

DEFAULT_MANIFEST_PATH = Path(__file__).parent / "toolkits.toml"
DEFAULT_TOOLKIT = "_default"


class ToolkitError(TooldeckError):
    """A manifest or agent definition is unusable."""


@dataclass(frozen=True, slots=True)
class Toolkit:
    name: str
    description: str
    tools: tuple[str, ...] = ()
    includes: tuple[str, ...] = ()
    source: str = ""


@dataclass(frozen=True, slots=True)
class Resolution:
    """A resolved toolkit: the final tool list and how it was built."""

    name: str
    tools: tuple[str, ...]
    tree: tuple[tuple[int, str], ...]  # (depth, toolkit name) in expansion order

    def of(self, tools: Tools) -> Source:
        """This toolkit as a tool source: its tools among ``tools`` (in their order)."""
        names = frozenset(self.tools)
        return ToolList(tools).filtered(lambda t: t.name in names)


def _parse(text: str, source: str) -> dict[str, Toolkit]:
    try:
        data = parse_toml(text)
    except ConfigFileError as exc:
        raise ToolkitError(f"{source}: {exc.problem}") from exc
    kits: dict[str, Toolkit] = {}
    problems: list[str] = []
    for name, body in data.items():
        if not isinstance(body, dict):
            problems.append(f"{source}: [{name}] must be a table")
            continue
        unknown = set(body) - {"description", "tools", "includes"}
        if unknown:
            problems.append(f"{source}: [{name}] has unknown keys {sorted(unknown)}")
        tools, includes = body.get("tools", []), body.get("includes", [])
        for key, value in (("tools", tools), ("includes", includes)):
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                problems.append(f"{source}: [{name}].{key} must be a list of strings")
        if problems:
            continue
        kits[name] = Toolkit(
            name, str(body.get("description", "")), tuple(tools), tuple(includes), source
        )
    if problems:
        raise ToolkitError("; ".join(problems))
    return kits


class ToolkitManifest:
    """The toolkits in force: tooldeck's defaults, with user manifests on top."""

    def __init__(self, toolkits: Mapping[str, Toolkit]):
        self.toolkits = dict(toolkits)

    @classmethod
    def load(cls, *paths: str | Path, defaults: bool = True) -> ToolkitManifest:
        """Load the defaults, then each path in order (later ones win by name)."""
        kits: dict[str, Toolkit] = {}
        if defaults:
            kits.update(_parse(read_text(DEFAULT_MANIFEST_PATH), "tooldeck defaults"))
        for path in paths:
            p = Path(path)
            try:
                text = read_text(p)
            except OSError as exc:
                raise ToolkitError(f"{p}: cannot read: {exc}") from exc
            except ConfigFileError as exc:
                raise ToolkitError(f"{p}: {exc.problem}") from exc
            kits.update(_parse(text, str(p)))
        return cls(kits)

    @property
    def names(self) -> list[str]:
        return list(self.toolkits)

    def closest(self, name: str) -> str | None:
        found = difflib.get_close_matches(name, self.names, n=1, cutoff=0.5)
        return found[0] if found else None

    def resolve(self, name: str) -> Resolution:
        if name not in self.toolkits:
            hint = self.closest(name)
            raise ToolkitError(
                f"unknown toolkit {name!r}" + (f"; did you mean {hint!r}?" if hint else "")
            )
        tools: list[str] = []
        tree: list[tuple[int, str]] = []

        def expand(kit_name: str, trail: list[str]) -> None:
            kit = self.toolkits[kit_name]
            tree.append((len(trail), kit_name))
            for include in kit.includes:
                path = [*trail, kit_name]
                if include in path:
                    cycle = " -> ".join([*path[path.index(include) :], include])
                    raise ToolkitError(f"toolkit include cycle: {cycle}")
                if include not in self.toolkits:
                    raise ToolkitError(f"toolkit {kit_name!r} includes unknown toolkit {include!r}")
                expand(include, [*trail, kit_name])
            for tool_name in kit.tools:
                if tool_name not in tools:
                    tools.append(tool_name)

        expand(name, [])
        return Resolution(name, tuple(tools), tuple(tree))

    def check(self) -> list[str]:
        """Every problem in the manifest (cycles, missing includes), without stopping."""
        problems = []
        for name in self.toolkits:
            try:
                self.resolve(name)
            except ToolkitError as exc:
                problems.append(str(exc))
        return sorted(set(problems))


@dataclass(frozen=True, slots=True)
class AgentDefinition:
    name: str
    description: str
    instructions: str
    model: str | None = None
    toolkit: str | None = None
    tools: tuple[str, ...] | None = None
    grants: tuple[str, ...] = ()  # control tools granted explicitly (e.g. delegate_task)
    source: str = ""

    @classmethod
    def parse(cls, text: str, source: str = "<agent>") -> AgentDefinition:
        if not text.startswith("---"):
            raise ToolkitError(f"{source}: an agent definition starts with YAML frontmatter")
        parts = text.split("\n---", 1)
        if len(parts) != 2:
            raise ToolkitError(f"{source}: the frontmatter is not closed with '---'")
        try:
            meta = parse_yaml(parts[0][3:]) or {}
        except ConfigFileError as exc:
            raise ToolkitError(f"{source}: frontmatter: {exc.problem}") from exc
        if not isinstance(meta, dict):
            raise ToolkitError(f"{source}: the frontmatter must be a mapping")
        problems = []
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            problems.append("'name' is required")
        tools = meta.get("tools")
        if tools is not None and (
            not isinstance(tools, list) or not all(isinstance(t, str) for t in tools)
        ):
            problems.append("'tools' must be a list of tool names")
        toolkit = meta.get("toolkit")
        if toolkit is not None and not isinstance(toolkit, str):
            problems.append("'toolkit' must be a string")
        grants = meta.get("grants", [])
        if not isinstance(grants, list) or not all(isinstance(t, str) for t in grants):
            problems.append("'grants' must be a list of tool names")
        if problems:
            raise ToolkitError(f"{source}: " + "; ".join(problems))
        body = parts[1].split("\n", 1)[1] if "\n" in parts[1] else ""
        return cls(
            name=str(name),
            description=str(meta.get("description", "")),
            instructions=body.strip(),
            model=meta.get("model"),
            toolkit=toolkit,
            tools=tuple(tools) if tools is not None else None,
            grants=tuple(grants),
            source=source,
        )

    @classmethod
    def load(cls, path: str | Path) -> AgentDefinition:
        """Read and parse an agent file: :class:`ToolkitError` if unusable, ``OSError``
        if it cannot be read."""
        p = Path(path)
        try:
            text = read_text(p)
        except ConfigFileError as exc:
            raise ToolkitError(f"{p}: {exc.problem}") from exc
        return cls.parse(text, str(p))


@dataclass(frozen=True, slots=True)
class AgentTools:
    """The tools an agent gets, how they were chosen, and every warning on the way."""

    tools: tuple[str, ...]
    via: str  # "toolkit:<name>", "tools", or "_default"
    warnings: tuple[str, ...] = field(default=())


def resolve_agent_tools(
    agent: AgentDefinition, manifest: ToolkitManifest, available: Iterable[str] | None = None
) -> AgentTools:
    """Apply the resolution order; drop (with a warning) tools that do not exist."""
    warnings: list[str] = []
    if agent.toolkit is not None and agent.toolkit in manifest.toolkits:
        names, via = manifest.resolve(agent.toolkit).tools, f"toolkit:{agent.toolkit}"
    elif agent.toolkit is not None:
        hint = manifest.closest(agent.toolkit)
        warnings.append(
            f"agent {agent.name!r}: unknown toolkit {agent.toolkit!r}"
            + (f" (did you mean {hint!r}?)" if hint else "")
            + f"; falling back to {DEFAULT_TOOLKIT}"
        )
        names, via = manifest.resolve(DEFAULT_TOOLKIT).tools, DEFAULT_TOOLKIT
    elif agent.tools is not None:
        names, via = tuple(dict.fromkeys(agent.tools)), "tools"
    else:
        names, via = manifest.resolve(DEFAULT_TOOLKIT).tools, DEFAULT_TOOLKIT
    if available is not None:
        known = set(available)
        missing = [n for n in names if n not in known]
        if missing:
            warnings.append(
                f"agent {agent.name!r}: tools {missing} do not exist here; running without them"
            )
            names = tuple(n for n in names if n in known)
    return AgentTools(names, via, tuple(warnings))


def load_agents(directory: str | Path) -> tuple[dict[str, AgentDefinition], list[str]]:
    """Every ``*.md`` agent definition in ``directory``; returns (agents, problems)."""
    agents: dict[str, AgentDefinition] = {}
    problems: list[str] = []
    for path in sorted(Path(directory).glob("*.md")):
        try:
            agent = AgentDefinition.load(path)
        except (ToolkitError, OSError) as exc:
            problems.append(str(exc))
            continue
        if agent.name in agents:
            problems.append(
                f"{path}: agent {agent.name!r} also defined in {agents[agent.name].source}"
            )
            continue
        agents[agent.name] = agent
    return agents, problems
