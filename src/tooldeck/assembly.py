"""A turn's tools: its facts (:class:`TurnContext`), the :class:`ToolSource` protocol, the
:class:`Toolset` and :func:`assemble`.

A *tool source* is anything with ``tools_for(ctx)``: the tools it offers for one turn's
context. There is no global tool set: a tool is available in a turn if and only if a
source gave it for that turn's context. Every collection of tools in tooldeck is one
(a :class:`Toolset`, a :class:`~tooldeck.registry.ToolRegistry`, a
:class:`~tooldeck.agents.skills.SkillCatalog`, an :class:`~tooldeck.mcp.McpSource`, the
:class:`~tooldeck.plan.ToolPlanner`, a function made one with
:func:`tooldeck.source`), and each inherits :class:`Source`'s combinators
(``filtered``, ``prefixed``, ``renamed``, ``with_approval``; each in its own module of
:mod:`tooldeck.sources`). :func:`assemble` runs sources in order into one immutable
:class:`Toolset`, the one object that both the provider projection and the dispatcher
read, so what the model is shown and what can execute cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias, runtime_checkable

from .context import AbortSignal
from .errors import ToolDefinitionError
from .tools import Tier, Tool

if TYPE_CHECKING:
    from .web import WebProvider
    from .web.netguard import NetPolicy

__all__ = ["AssemblyError", "Source", "TurnKind", "label_of"]

TurnKind: TypeAlias = Literal["text", "workflow_task"]


@dataclass(frozen=True, slots=True)
class TurnContext:
    """The facts of one turn that decide which tools exist and how they behave.

    - ``session_id``: the session this turn belongs to;
    - ``home``: the agent's home directory (file tools cannot leave it); ``None``: no
      home, so less power: file tools refuse, large results are guarded, never stored;
    - ``env``: environment variables for tools that start processes;
    - ``web_provider``: the turn's web binding, ``None`` for no web tools: a
      :class:`~tooldeck.web.WebProvider` (``web_search`` and ``web_fetch``), a provider
      name (``"brave"``, ``"tavily"``, ``"searxng"``, ``"ddgs"``, or ``"auto"`` for the
      configured one) resolved from the environment and config file, or any other
      string, which gives ``web_fetch`` only (the bare flag of earlier versions; see
      :func:`tooldeck.web.search_provider` and docs/web.md);
    - ``web_access``: where the web tools may connect (a :class:`~tooldeck.web.netguard.NetPolicy`;
      ``None``: public addresses plus ``TOOLDECK_WEB_ALLOW`` / ``TOOLDECK_WEB_PROXY``);
    - ``can_create_jobs``: whether this turn may create background jobs;
    - ``turn_kind``: ``'text'`` or ``'workflow_task'`` (workflow tools only on text turns);
    - ``memory_enabled``: whether memory (notes) tools are offered;
    - ``rpc``: a client slot for tools that talk to a control plane;
    - ``signal``: the turn's abort signal;
    - ``status_sources``: named callables the ``status`` tool reports on (offload
      store, approvals... each part registers its own);
    - ``deps``: the session's dependencies, which every tool reads as ``ctx.deps``
      (``Session(deps=...)`` sets it on a turn that has none of its own).
    """

    session_id: str
    home: Path | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    web_provider: WebProvider | str | None = None
    web_access: NetPolicy | None = None
    can_create_jobs: bool = False
    turn_kind: TurnKind = "text"
    memory_enabled: bool = True
    rpc: Any = None
    signal: AbortSignal = field(default_factory=AbortSignal)
    status_sources: Mapping[str, Callable[[], Any]] = field(default_factory=dict)
    # not compared, not shown: two turns differ by their facts, not by the user's objects
    deps: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.turn_kind not in ("text", "workflow_task"):
            raise ValueError(f"turn_kind must be 'text' or 'workflow_task', not {self.turn_kind!r}")
        if self.home is not None:
            object.__setattr__(self, "home", Path(self.home))


@runtime_checkable
class ToolSource(Protocol):
    """Where a turn's tools come from: ``tools_for(ctx)``, the tools for one turn.

    Calls never go through the source: each tool it gives carries its own ``execute``
    (an MCP source's tools call their server through the source), and the dispatcher
    runs that, whatever wraps the source.
    """

    def tools_for(self, ctx: TurnContext, /) -> Sequence[Tool]: ...


def label_of(source: object) -> str:
    """How errors and provenance name a source: its ``label``, else its type's name."""
    label = getattr(source, "label", None)
    return label if isinstance(label, str) and label else type(source).__name__


class Source:
    """Base of tooldeck's tool sources: the combinators, each a small source of its own.

    ``label`` names the source in errors and provenance. A subclass implements
    :meth:`tools_for`.
    """

    __slots__ = ()
    label: str = ""

    def tools_for(self, ctx: TurnContext, /) -> Sequence[Tool]:
        raise NotImplementedError(f"{type(self).__name__} implements no tools_for")

    def filtered(self, keep: Callable[[Tool], bool]) -> Source:
        """Only the tools ``keep(tool)`` is true for."""
        from .sources.filtered import Filtered

        return Filtered(self, keep)

    def prefixed(self, prefix: str) -> Source:
        """Every tool named ``prefix + name``: the name the model sees and calls."""
        from .sources.prefixed import Prefixed

        return Prefixed(self, prefix)

    def renamed(self, names: Mapping[str, str]) -> Source:
        """Tools renamed ``{old: new}`` (the others as they are): the model calls ``new``."""
        from .sources.renamed import Renamed

        return Renamed(self, names)

    def with_approval(self, tier: Tier = "DANGEROUS") -> Source:
        """Every tool's approval tier raised to at least ``tier`` (never lowered)."""
        from .sources.approval import WithApproval

        return WithApproval(self, tier)


class AssemblyError(ToolDefinitionError):
    """The sources of a turn gave an unusable tool list (e.g. a duplicate name)."""


class Toolset(Mapping[str, Tool], Source):
    """The immutable, ordered tools of one turn, with the source each came from.

    A Toolset is a source too: the same tools for every turn.
    """

    __slots__ = ("_origin", "_tools")
    label = "a Toolset"

    def __init__(self, tools: Iterable[Tool] = (), origin: Mapping[str, str] | None = None):
        by_name: dict[str, Tool] = {}
        for t in tools:
            if t.name in by_name:
                raise AssemblyError(f"two tools named {t.name!r} in one toolset")
            by_name[t.name] = t
        self._tools = MappingProxyType(by_name)
        self._origin = MappingProxyType(dict(origin or {}))

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def get(self, name: str, default: Any = None) -> Any:  # faster than Mapping's mixin
        return self._tools.get(name, default)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[str]:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"Toolset({list(self._tools)})"

    @property
    def tools(self) -> Sequence[Tool]:
        return tuple(self._tools.values())

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._tools)

    def origin(self, name: str) -> str | None:
        """The source that contributed ``name``."""
        return self._origin.get(name)

    def tools_for(self, ctx: TurnContext, /) -> Sequence[Tool]:
        return tuple(self._tools.values())

    def only(self, names: Iterable[str]) -> Toolset:
        """A toolset with just these tools (unknown names are ignored), order kept."""
        wanted = set(names)
        return Toolset(
            (t for t in self._tools.values() if t.name in wanted),
            {n: o for n, o in self._origin.items() if n in wanted},
        )


def assemble(ctx: TurnContext, sources: Sequence[ToolSource]) -> Toolset:
    """The tools ``sources`` give for ``ctx``, in order, as one :class:`Toolset`.

    A name given by two sources is an error naming both. A source that raises is
    reported with its label; nothing is half-assembled.
    """
    return assemble_labelled(ctx, [(label_of(s), s) for s in sources])


def assemble_labelled(ctx: TurnContext, sources: Sequence[tuple[str, ToolSource]]) -> Toolset:
    """:func:`assemble` with each source's label given (a list's ``tools[2] (mcp)``)."""
    tools: list[Tool] = []
    origin: dict[str, str] = {}
    for who, source in sources:
        try:
            made = list(source.tools_for(ctx))
        except Exception as exc:
            raise AssemblyError(f"tool source {who} failed: {exc}") from exc
        for t in made:
            if not isinstance(t, Tool):
                raise AssemblyError(f"tool source {who} gave {t!r}, not a Tool")
            if t.name in origin:
                raise AssemblyError(
                    f"tool {t.name!r} is created twice: by {origin[t.name]} and by {who}; "
                    "rename one of them (.renamed, .prefixed) or leave one out"
                )
            origin[t.name] = who
            tools.append(t)
    return Toolset(tools, origin)
