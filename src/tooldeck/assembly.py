"""Per-turn assembly: the turn's facts (:class:`TurnContext`) and its tools (:class:`Toolset`).

Each turn builds its tool list from an ordered list of *category creators*, each a
function ``(ctx) -> iterable of Tool``. There is no global tool set: a tool is available
in a turn if and only if a creator returned it for that turn's context. The resulting
:class:`Toolset` is immutable and is the one object that both the provider projection and
the dispatcher read, so what the model is shown and what can execute cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias

from .context import AbortSignal
from .errors import ToolDefinitionError
from .tools import Tool

if TYPE_CHECKING:
    from .web import WebProvider
    from .web.netguard import NetPolicy

__all__ = [
    "AssemblyError",
    "Creator",
    "Toolset",
    "TurnContext",
    "TurnKind",
    "assemble",
    "creator_name",
]

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
      store, approvals... each part registers its own).
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

    def __post_init__(self) -> None:
        if self.turn_kind not in ("text", "workflow_task"):
            raise ValueError(f"turn_kind must be 'text' or 'workflow_task', not {self.turn_kind!r}")
        if self.home is not None:
            object.__setattr__(self, "home", Path(self.home))


class Creator(Protocol):
    """A category creator: the tools of one category for one turn."""

    def __call__(self, ctx: TurnContext, /) -> Iterable[Tool]: ...


CreatorFn: TypeAlias = Callable[[TurnContext], Iterable[Tool]]


def creator_name(creator: Any) -> str:
    """A readable name for a creator, for error messages and provenance."""
    explicit = getattr(creator, "creator_name", None)
    if isinstance(explicit, str):
        return explicit
    name = getattr(creator, "__qualname__", None)
    module = getattr(creator, "__module__", None)
    if isinstance(name, str):
        return f"{module}.{name}" if module else name
    return repr(creator)


class AssemblyError(ToolDefinitionError):
    """The creators of a turn produced an unusable tool list (e.g. a duplicate name)."""


class Toolset(Mapping[str, Tool]):
    """The immutable, ordered tools of one turn, with the creator each came from."""

    __slots__ = ("_origin", "_tools")

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
        """The creator that contributed ``name``."""
        return self._origin.get(name)

    def only(self, names: Iterable[str]) -> Toolset:
        """A toolset with just these tools (unknown names are ignored), order kept."""
        wanted = set(names)
        return Toolset(
            (t for t in self._tools.values() if t.name in wanted),
            {n: o for n, o in self._origin.items() if n in wanted},
        )


def assemble(ctx: TurnContext, creators: Sequence[CreatorFn]) -> Toolset:
    """Run ``creators`` in order for ``ctx`` and collect their tools into a :class:`Toolset`.

    A name produced by two creators is an error naming both. A creator that raises is
    reported with its name; nothing is half-assembled.
    """
    tools: list[Tool] = []
    origin: dict[str, str] = {}
    for creator in creators:
        who = creator_name(creator)
        try:
            made = list(creator(ctx))
        except Exception as exc:
            raise AssemblyError(f"tool creator {who} failed: {exc}") from exc
        for t in made:
            if not isinstance(t, Tool):
                raise AssemblyError(f"tool creator {who} returned {t!r}, not a Tool")
            if t.name in origin:
                raise AssemblyError(
                    f"tool {t.name!r} is created twice: by {origin[t.name]} and by {who}; "
                    "rename one of them or leave one out"
                )
            origin[t.name] = who
            tools.append(t)
    return Toolset(tools, origin)
